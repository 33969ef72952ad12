// Package blockq encodes and decodes rows of ggml's Q8_0 and Q4_0 blocks
// (32 values: an f16 scale, then 32 int8 values or 32 nibbles) with ggml's
// reference rounding. It is a leaf, like internal/half: the kernels
// (engine/ml) and the KV pool (internal/kvcache, whose q8_0/q4_0 pages
// hold such rows) both use it without depending on each other.
package blockq

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvwarden/kvwarden/internal/half"
)

// Block sizes in bytes.
const (
	Q8_0Bytes = 34
	Q4_0Bytes = 18
)

func check(op string, nbytes, nvals, blockBytes int) {
	if nvals%32 != 0 || nbytes < nvals/32*blockBytes {
		panic(fmt.Sprintf("blockq: %s of %d values into %d bytes (want a multiple of 32 values, %d bytes per 32)", op, nvals, nbytes, blockBytes))
	}
}

// roundf rounds half away from zero, like C's roundf.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }

// QuantizeRowQ8_0 encodes src (len a multiple of 32) into dst as ggml's
// quantize_row_q8_0_ref: d = max|x|/127, q = round(x/d).
func QuantizeRowQ8_0(dst []byte, src []float32) {
	check("QuantizeRowQ8_0", len(dst), len(src), Q8_0Bytes)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		o := dst[b*34 : b*34+34]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(o, half.F32ToF16(d))
		for j, v := range x {
			o[2+j] = byte(int8(roundf(v * id)))
		}
	}
}

// QuantizeRowQ4_0 encodes src (len a multiple of 32) into dst as ggml's
// quantize_row_q4_0_ref: d = max/-8 (max the value of largest magnitude),
// nibbles min(15, int8(x/d + 8.5)), low nibbles elements 0..15.
func QuantizeRowQ4_0(dst []byte, src []float32) {
	check("QuantizeRowQ4_0", len(dst), len(src), Q4_0Bytes)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		o := dst[b*18 : b*18+18]
		var amax, mx float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); amax < a {
				amax, mx = a, v
			}
		}
		d := mx / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(o, half.F32ToF16(d))
		for j := range 16 {
			xi0 := min(15, int8(x[j]*id+8.5))
			xi1 := min(15, int8(x[16+j]*id+8.5))
			o[2+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

// DequantizeRowQ8_0 expands len(dst)/32 Q8_0 blocks: float32(q) * d.
func DequantizeRowQ8_0(dst []float32, src []byte) {
	check("DequantizeRowQ8_0", len(src), len(dst), Q8_0Bytes)
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*34 : b*34+34]
		d := half.F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range 32 {
			dst[b*32+j] = float32(int8(blk[2+j])) * d
		}
	}
}

// DequantizeRowQ4_0 expands len(dst)/32 Q4_0 blocks: float32(q-8) * d.
func DequantizeRowQ4_0(dst []float32, src []byte) {
	check("DequantizeRowQ4_0", len(src), len(dst), Q4_0Bytes)
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*18 : b*18+18]
		d := half.F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range 16 {
			dst[b*32+j] = float32(int(blk[2+j]&0xf)-8) * d
			dst[b*32+j+16] = float32(int(blk[2+j]>>4)-8) * d
		}
	}
}
