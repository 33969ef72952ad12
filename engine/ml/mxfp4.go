package ml

import (
	"fmt"
	"math"
)

// MXFP4 (OCP microscaling FP4, ggml's block_mxfp4): blocks of 32 values,
// one E8M0 scale byte e then 16 bytes of 4-bit E2M1 codes, element j in
// the low nibble of byte j and element j+16 in the high nibble. ggml keeps
// the E2M1 values doubled so that they are integers, and halves the scale
// to compensate: element = kvaluesMXFP4[code] * 2^(e-128).

// kvaluesMXFP4 is E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives)
// times two; code 8 is negative zero, which is 0 here as in ggml.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// mxfp4BlockBytes is the size of one MXFP4 block.
const mxfp4BlockBytes = 17

// e8m0Half is 2^(e-128): half the E8M0 scale 2^(e-127), to go with the
// doubled code values. e 0 and 1 give the subnormals 2^-128 and 2^-127,
// e 255 (E8M0's NaN) the finite 2^127, as ggml's ggml_e8m0_to_fp32_half.
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantMXFP4(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*mxfp4BlockBytes : (b+1)*mxfp4BlockBytes]
		d := e8m0Half(blk[0])
		y := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			y[j] = float32(kvaluesMXFP4[blk[1+j]&0xf]) * d
			y[j+16] = float32(kvaluesMXFP4[blk[1+j]>>4]) * d
		}
	}
}

// unpackMXFP4 gives the normal form of dot32 without an offset: the
// doubled codes and the halved scale. The block product is then ggml's
// ggml_vec_dot_mxfp4_q8_0: the exact int32 sum of code times activation,
// scaled by (scale*activation scale) in float32.
func unpackMXFP4(nf *normBlock, blk []byte) {
	nf.d = e8m0Half(blk[0])
	for j := 0; j < 16; j++ {
		nf.w[j] = kvaluesMXFP4[blk[1+j]&0xf]
		nf.w[j+16] = kvaluesMXFP4[blk[1+j]>>4]
	}
}

// QuantizeMXFP4 encodes src (len a multiple of 32) as MXFP4 blocks, as
// ggml's quantize_row_mxfp4_ref: per block the largest magnitude amax
// sets e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block), so the
// largest code, 12*2^(e-128) = 1.5*2^floor(log2(amax)), is amax or just
// below it, and every value takes the nearest code (the first in table
// order on a tie; magnitudes above the largest code clip to it). Blocks
// whose amax is below 2^-125, where ggml's float-to-uint8 conversion of
// the negative exponent is undefined, get e = 0 here.
func QuantizeMXFP4(src []float32) []byte {
	if len(src)%32 != 0 {
		panic(fmt.Sprintf("ml: QuantizeMXFP4 of %d values, not a multiple of 32", len(src)))
	}
	out := make([]byte, len(src)/32*mxfp4BlockBytes)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		o := out[b*mxfp4BlockBytes : (b+1)*mxfp4BlockBytes]
		var amax float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); amax < a {
				amax = a
			}
		}
		var e byte
		if amax > 0 {
			l := math.Floor(float64(float32(math.Log2(float64(amax))))) - 2 + 127
			e = byte(max(0, l))
		}
		o[0] = e
		d := e8m0Half(e)
		best := func(v float32) byte {
			bi, be := 0, float32(math.Abs(float64(float32(kvaluesMXFP4[0])*d-v)))
			for i := 1; i < 16; i++ {
				if err := float32(math.Abs(float64(float32(kvaluesMXFP4[i])*d - v))); err < be {
					bi, be = i, err
				}
			}
			return byte(bi)
		}
		for j := 0; j < 16; j++ {
			o[1+j] = best(x[j]) | best(x[j+16])<<4
		}
	}
	return out
}
