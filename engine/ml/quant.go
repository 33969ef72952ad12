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
	switch t {
	case F32:
		copy(dst, BytesF32(src))
	case F16:
		if useAVX512 && len(dst) > 0 {
			dequantF16AVX512(&dst[0], &src[0], len(dst))
			return
		}
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		if useAVX512 && len(dst) > 0 {
			dequantQ8AVX512(&dst[0], &src[0], len(dst)/32)
			return
		}
		dequantQ8Generic(dst, src)
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*18 : b*18+18]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			y := dst[b*32 : b*32+32]
			for j := 0; j < 16; j++ {
				y[j] = float32(int(blk[2+j]&0xf)-8) * d
				y[j+16] = float32(int(blk[2+j]>>4)-8) * d
			}
		}
	case Q4_K:
		dequantQ4K(dst, src)
	case Q6_K:
		dequantQ6K(dst, src)
	default:
		panic(fmt.Sprintf("ml: cannot dequantize %v", t))
	}
}

func dequantQ8Generic(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*34 : b*34+34]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		y := dst[b*32 : b*32+32]
		for j := range y {
			y[j] = float32(int8(blk[2+j])) * d
		}
	}
}

// getScaleMinK4 is ggml's get_scale_min_k4.
func getScaleMinK4(j int, q []byte) (d, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xf) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// dequantQ4K is ggml's dequantize_row_q4_K: super-blocks of 256 elements,
// {f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles}.
func dequantQ4K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*144 : i*144+144]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		scales := blk[4:16]
		q := blk[16:144]
		y := dst[i*256 : i*256+256]
		is := 0
		for j := 0; j < 256; j += 64 {
			sc, m := getScaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = getScaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[j+l] = float32(d1*float32(q[l]&0xf)) - m1
			}
			for l := 0; l < 32; l++ {
				y[j+32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
			q = q[32:]
			is += 2
		}
	}
}

// dequantQ6K is ggml's dequantize_row_q6_K: super-blocks of 256 elements,
// {128 bytes of low nibbles ql, 64 bytes of 2-bit high parts qh, 16 int8
// scales, f16 d}; element e is d*scales[e/16]*(q-32) for its 6-bit q,
// rounded as ggml does (d*scale first, then times q).
func dequantQ6K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*210 : i*210+210]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
		y := dst[i*256 : i*256+256]
		for n := 0; n < 2; n++ {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
			y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
		}
	}
}
