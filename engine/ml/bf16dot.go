package ml

import (
	"encoding/binary"
	"math"
)

// BF16 weight products use llama.cpp's arithmetic (ggml's bf16 vec_dot on
// AVX512_BF16 CPUs), not the exact product of the f32 activations with the
// widened weights: the activation row is rounded to bf16 once per product
// (roundBF16), and each output is dotBF16Ref of the two bf16 rows. That is
// what VDPBF16PS computes, which does twice the products per instruction
// of an f32 FMA on half the activation bytes: BF16 prefill ran at 0.64-0.68
// of llama.cpp's rate with the exact product. CPUs without the instruction
// (and arm64, and the pure-Go build) compute the same arithmetic in
// emulation, so the bits of every output are the same on every CPU and
// path (NaN payloads aside), and do not depend on the batch.

// roundBF16 rounds f to bf16 as VCVTNEPS2BF16 does: to nearest even,
// subnormal inputs to a zero of their sign (DAZ), NaN to a quiet NaN.
func roundBF16(f float32) uint16 {
	u := math.Float32bits(f)
	switch {
	case u&0x7f800000 == 0:
		return uint16(u>>16) & 0x8000
	case u&0x7fffffff > 0x7f800000:
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// quantizeActBF16Generic writes x rounded to bf16 (roundBF16), two bytes
// a value, little endian.
func quantizeActBF16Generic(dst []byte, x []float32) {
	dst = dst[:2*len(x)]
	for i, v := range x {
		binary.LittleEndian.PutUint16(dst[2*i:], roundBF16(v))
	}
}

// bf16DAZ widens a bf16 operand of a product, subnormals as a zero of
// their sign (the DAZ of VDPBF16PS).
func bf16DAZ(h uint16) float64 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return float64(math.Float32frombits(uint32(h) << 16))
}

// fmaFTZ is fma(x, w, acc) for bf16 x and w, correctly rounded to f32 with
// a tiny result flushed to a zero of its sign (FTZ) as x86 does: tininess
// is detected after rounding, that is a result is flushed when its
// rounding to 24 bits with an unbounded exponent is below 2^-126. That
// differs from rounding to f32 (gradual underflow) and flushing a
// subnormal result: an exact sum just below 2^-126 (within 2^-150 and
// 2^-151 of it, which needs product bits below 2^-149) rounds to 2^-126
// in f32 but is flushed by VDPBF16PS and by an FMA under MXCSR FTZ. The
// product of two bf16 values is exact in float64, and the float64 sum of
// it and an f32 rounds to the f32 nearest the exact sum (both have at most
// 24 significant bits, so the double rounding is innocuous); scaled by
// 2^64 (exact) a tiny sum rounds in the normal range.
func fmaFTZ(x, w float64, acc float32) float32 {
	return roundFTZ(float64(acc) + x*w)
}

// roundFTZ rounds v to f32 with fmaFTZ's flush.
func roundFTZ(v float64) float32 {
	f := float32(v)
	if math.Float32bits(f)&0x7fffffff > 0x00800000 {
		return f // above 2^-126 (or Inf, NaN)
	}
	// 2^-126 or a zero of v's sign, by v rounded to 24 bits in the normal
	// range (times 2^64) against 2^-62.
	b := math.Float32bits(float32(v * 0x1p64))
	if b&0x7fffffff >= 0x20800000 {
		return math.Float32frombits(b&0x80000000 | 0x00800000)
	}
	return math.Float32frombits(b & 0x80000000)
}

// dotBF16Ref is the reference arithmetic of every BF16 weight product: the
// dot of k bf16 activations x and k bf16 weights w (little endian, two
// bytes each). 16 f32 lanes start at +0; k is taken in chunks of 32 values,
// the last zero-padded (both operands), and for chunk c lane j does
//
//	acc[j] = fma(x[32c+2j+1], w[32c+2j+1], acc[j])
//	acc[j] = fma(x[32c+2j], w[32c+2j], acc[j])
//
// (the odd element first) with subnormal operands read as zero and tiny
// results flushed to zero as x86 does (after rounding, fmaFTZ):
// VDPBF16PS, lane for lane (verified against the instruction on a
// Sapphire Rapids, TestBF16TininessAfterRounding among others). The lanes are then summed
// as the AVX-512 kernels' REDUCE1 does, subnormal sums flushed too
// (reduceLanes).
func dotBF16Ref(x, w []byte, k int) float32 {
	var acc [16]float32
	return bf16FinishLanes(&acc, x, w, 0, k)
}

// bf16FinishLanes continues dotBF16Ref's lanes acc from value c0 (a
// multiple of 32) to k and returns their reduction.
func bf16FinishLanes(acc *[16]float32, x, w []byte, c0, k int) float32 {
	for c := c0; c < k; c += 32 {
		for j := 0; j < 16; j++ {
			e, o := c+2*j, c+2*j+1
			var xo, wo, xe, we float64
			if o < k {
				xo = bf16DAZ(binary.LittleEndian.Uint16(x[2*o:]))
				wo = bf16DAZ(binary.LittleEndian.Uint16(w[2*o:]))
			}
			if e < k {
				xe = bf16DAZ(binary.LittleEndian.Uint16(x[2*e:]))
				we = bf16DAZ(binary.LittleEndian.Uint16(w[2*e:]))
			}
			acc[j] = fmaFTZ(xo, wo, acc[j])
			acc[j] = fmaFTZ(xe, we, acc[j])
		}
	}
	return reduceLanes(acc)
}

// reduceLanes sums 16 lanes in the order of the AVX-512 REDUCE1 (and
// REDUCE4) macros: halves, then quarters, then two horizontal pair sums,
// each sum with a subnormal result flushed: the kernels keep MXCSR
// DAZ|FTZ set through their reduction, so no kernel has to switch it
// between its FMAs and its sums (nor could an f32 kernel that does both).
func reduceLanes(a *[16]float32) float32 {
	var s8 [8]float32
	for i := range s8 {
		s8[i] = ftz(a[i] + a[i+8])
	}
	var s4 [4]float32
	for i := range s4 {
		s4[i] = ftz(s8[i] + s8[i+4])
	}
	return ftz(ftz(s4[0]+s4[1]) + ftz(s4[2]+s4[3]))
}

// ftz flushes a subnormal f to a zero of its sign.
func ftz(f float32) float32 {
	if math.Float32bits(f)&0x7f800000 == 0 {
		return math.Float32frombits(math.Float32bits(f) & 0x80000000)
	}
	return f
}

// matmulBF16Generic computes output columns [lo,hi) of every activation row
// of a BF16 product from the bf16 activations act (n rows of 2*w.Cols
// bytes) with dotBF16Ref's arithmetic: the whole 32-value chunks from
// operands widened once (each activation row per call, each weight row
// once for all activation rows), the tail chunk by bf16FinishLanes.
func matmulBF16Generic(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, K := w.Rows, w.Cols
	as, kc := 2*K, K&^31
	xf := make([]float64, n*kc)
	for i := range xf {
		xf[i] = bf16DAZ(binary.LittleEndian.Uint16(act[(i/kc)*as+2*(i%kc):]))
	}
	wf := make([]float64, kc)
	for r := lo; r < hi; r++ {
		row := w.Data[r*rb : (r+1)*rb]
		for j := range wf {
			wf[j] = bf16DAZ(binary.LittleEndian.Uint16(row[2*j:]))
		}
		for i := 0; i < n; i++ {
			acc := bf16ChunksGo(xf[i*kc:(i+1)*kc], wf)
			dst[i*R+r] = bf16FinishLanes(&acc, act[i*as:(i+1)*as], row, kc, K)
		}
	}
}

// bf16ChunksGo runs dotBF16Ref's lanes over whole chunks of widened
// operands (len(x) == len(w), a multiple of 32).
func bf16ChunksGo(x, w []float64) [16]float32 {
	var acc [16]float32
	for c := 0; c+32 <= len(x); c += 32 {
		xc, wc := x[c:c+32:c+32], w[c:c+32:c+32]
		for j := 0; j < 16; j++ {
			a := fmaFTZ(xc[2*j+1], wc[2*j+1], acc[j])
			acc[j] = fmaFTZ(xc[2*j], wc[2*j], a)
		}
	}
	return acc
}

// bf16TileBytes bounds the weight rows a BF16 GEMM sweeps all activation
// rows across (the AVX-512 kernels use a multiple of four rows).
const bf16TileBytes = 16 << 10

// matmulBF16Lanes computes output columns [lo,hi) of a BF16 product with a
// lanes kernel (bf16LanesAVX2, bf16LanesNEON) for the whole 32-value
// chunks of each row, Go for the tail chunk and the reduction
// (bf16FinishLanes), a tile of weight rows at a time against every
// activation row.
func matmulBF16Lanes(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int,
	kernel func(x *byte, w *byte, ws int, nc int, lanes *float32, nw int)) {
	R, K := w.Rows, w.Cols
	as, nc := 2*K, K/32
	tr := max(1, bf16TileBytes/rb)
	lp := getScratch(16 * tr)
	defer scratch.Put(lp)
	lanes := *lp
	for t0 := lo; t0 < hi; t0 += tr {
		m := min(tr, hi-t0)
		for i := 0; i < n; i++ {
			x := act[i*as : (i+1)*as]
			kernel(&x[0], &w.Data[t0*rb], rb, nc, &lanes[0], m)
			for r := 0; r < m; r++ {
				acc := (*[16]float32)(lanes[16*r:])
				dst[i*R+t0+r] = bf16FinishLanes(acc, x, w.Data[(t0+r)*rb:(t0+r+1)*rb], 32*nc, K)
			}
		}
	}
}
