package ml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// QuantizeQ8_0 encodes src (len a multiple of 32) as ggml Q8_0 blocks: an
// f16 scale d = max|x|/127 followed by 32 int8 values round(x/d), as
// ggml's quantize_row_q8_0_ref.
func QuantizeQ8_0(src []float32) []byte {
	if len(src)%32 != 0 {
		panic(fmt.Sprintf("ml: QuantizeQ8_0 of %d values, not a multiple of 32", len(src)))
	}
	out := make([]byte, len(src)/32*34)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		o := out[b*34 : b*34+34]
		var amax float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(o, F32ToF16(d))
		for j, v := range x {
			o[2+j] = byte(int8(roundf(v * id)))
		}
	}
	return out
}

// roundf rounds half away from zero, like C's roundf.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }

// QuantizeQ4_0 encodes src (len a multiple of 32) as ggml Q4_0 blocks, as
// ggml's quantize_row_q4_0_ref: d = max/-8 where max is the value of
// largest magnitude, nibbles min(15, int8(x/d + 8.5)); low nibbles hold
// elements 0..15, high nibbles 16..31.
func QuantizeQ4_0(src []float32) []byte {
	if len(src)%32 != 0 {
		panic(fmt.Sprintf("ml: QuantizeQ4_0 of %d values, not a multiple of 32", len(src)))
	}
	out := make([]byte, len(src)/32*18)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		o := out[b*18 : b*18+18]
		var amax, max float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); amax < a {
				amax, max = a, v
			}
		}
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(o, F32ToF16(d))
		for j := 0; j < 16; j++ {
			x0 := x[j] * id
			x1 := x[16+j] * id
			xi0 := min(15, int8(x0+8.5))
			xi1 := min(15, int8(x1+8.5))
			o[2+j] = byte(xi0) | byte(xi1)<<4
		}
	}
	return out
}

// Quantize encodes a rows x cols row-major float32 matrix as t (F32, F16,
// BF16, Q8_0 or Q4_0).
func Quantize(t Type, rows, cols int, src []float32) (*Matrix, error) {
	if rows <= 0 || cols <= 0 || len(src) != rows*cols {
		return nil, fmt.Errorf("ml: Quantize %dx%d from %d values", rows, cols, len(src))
	}
	if _, err := t.RowBytes(cols); err != nil {
		return nil, err
	}
	var data []byte
	switch t {
	case F32:
		data = make([]byte, len(src)*4)
		copy(BytesF32(data), src)
	case F16:
		data = make([]byte, len(src)*2)
		for i, v := range src {
			binary.LittleEndian.PutUint16(data[2*i:], F32ToF16(v))
		}
	case BF16:
		data = make([]byte, len(src)*2)
		for i, v := range src {
			binary.LittleEndian.PutUint16(data[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		data = QuantizeQ8_0(src)
	case Q4_0:
		data = QuantizeQ4_0(src)
	case MXFP4:
		data = QuantizeMXFP4(src)
	default:
		return nil, fmt.Errorf("ml: cannot quantize to %v", t)
	}
	return NewMatrix(t, rows, cols, data)
}

// Dequantize decodes row of w into dst (len w.Cols).
func Dequantize(dst []float32, w *Matrix, row int) {
	if row < 0 || row >= w.Rows || len(dst) != w.Cols {
		panic(fmt.Sprintf("ml: Dequantize row %d of %dx%d into %d", row, w.Rows, w.Cols, len(dst)))
	}
	rb, err := w.Type.RowBytes(w.Cols)
	if err != nil {
		panic(err)
	}
	dequantRow(dst, w.Type, w.Data[row*rb:(row+1)*rb])
}

// dequantRow decodes one encoded row (src) of type t into dst.
func dequantRow(dst []float32, t Type, src []byte) {
	dq := t.traits().dequant
	if dq == nil {
		panic(fmt.Sprintf("ml: cannot dequantize %v", t))
	}
	dq(dst, src)
}
