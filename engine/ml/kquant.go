package ml

import (
	"encoding/binary"
	"math"
)

// K-quant products (Q4_K, Q6_K) run in integers, like Q8_0's: each
// activation row is quantized once per product to 256-value blocks of
// int8 with one f32 scale and the sums of every 16 values (the layout of
// kqActBlock), each weight super-block is dotted exactly in int32 with its
// integer sub-block scales and mins, and only the per-super-block result
// is scaled in f32. The arithmetic of one output is fixed whatever kernel
// computes it (generic Go, AVX2, AVX-512), so results are bitwise
// identical for any batch size, batch position, thread count and SIMD
// level:
//
//	acc := float32(0)
//	for each super-block b:
//		Q4_K: is := sum_j sc[j] * dot(q[j], a[j])      (8 sub-blocks of 32, q in 0..15)
//		      im := sum_j m[j] * sum(a[j])
//		      acc = float32(acc + float32(float32(is) * float32(d*dx)))
//		      acc = float32(acc - float32(float32(im) * float32(dmin*dx)))
//		Q6_K: is := sum_j sc[j] * dot(q[j]-32, a[j])   (16 sub-blocks of 16, q in 0..63)
//		      acc = float32(acc + float32(float32(is) * float32(d*dx)))
//
// The integer sums are exact (|is| < 2^31 for activations in [-127, 127]);
// float32(is) rounds to nearest even, as CVTDQ2PS does, and no step is
// fused.

// kqActBlock is the size of one quantized activation super-block: 256
// int8 values, the 16 int16 sums of each 16 values, the 8 int16 sums of
// each 32 values, then the f32 scale dx (and 4 bytes of padding).
const (
	kqActBlock  = 256 + 32 + 16 + 8
	kqActSums16 = 256
	kqActSums32 = 256 + 32
	kqActScale  = 256 + 32 + 16
)

// quantizeActQ8KGeneric encodes x (len a multiple of 256) into dst (len
// len(x)/256*kqActBlock): per super-block d = max|x|/127 and q =
// roundeven(x * (1/d)) as quantizeActQ8Generic does per 32 values.
func quantizeActQ8KGeneric(dst []byte, x []float32) {
	for b := 0; b < len(x)/256; b++ {
		xb := x[b*256 : b*256+256]
		o := dst[b*kqActBlock : (b+1)*kqActBlock]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j := 0; j < 16; j++ {
			var sum int32
			for l := 0; l < 16; l++ {
				q := int32(math.RoundToEven(float64(float32(xb[j*16+l] * id))))
				q = max(-127, min(127, q))
				o[j*16+l] = byte(int8(q))
				sum += q
			}
			binary.LittleEndian.PutUint16(o[kqActSums16+2*j:], uint16(int16(sum)))
		}
		for j := 0; j < 8; j++ {
			s := int16(binary.LittleEndian.Uint16(o[kqActSums16+4*j:])) + int16(binary.LittleEndian.Uint16(o[kqActSums16+4*j+2:]))
			binary.LittleEndian.PutUint16(o[kqActSums32+2*j:], uint16(s))
		}
		binary.LittleEndian.PutUint32(o[kqActScale:], math.Float32bits(d))
		clear(o[kqActScale+4:])
	}
}

func actScale(a []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(a[kqActScale:]))
}

// q4KSums returns the integer sums is and im of one Q4_K super-block blk
// against one activation block a.
func q4KSums(blk, a []byte) (is, im int32) {
	scales := blk[4:16]
	q := blk[16:144]
	for c := 0; c < 4; c++ {
		sc0, m0 := getScaleMinK4(2*c, scales)
		sc1, m1 := getScaleMinK4(2*c+1, scales)
		var s0, s1 int32
		for l := 0; l < 32; l++ {
			s0 += int32(q[32*c+l]&0xf) * int32(int8(a[64*c+l]))
			s1 += int32(q[32*c+l]>>4) * int32(int8(a[64*c+32+l]))
		}
		is += int32(sc0)*s0 + int32(sc1)*s1
		b0 := int32(int16(binary.LittleEndian.Uint16(a[kqActSums32+4*c:])))
		b1 := int32(int16(binary.LittleEndian.Uint16(a[kqActSums32+4*c+2:])))
		im += int32(m0)*b0 + int32(m1)*b1
	}
	return is, im
}

// dotQ4KGeneric is the reference arithmetic of one Q4_K output.
func dotQ4KGeneric(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*144 : b*144+144]
		a := act[b*kqActBlock : (b+1)*kqActBlock]
		is, im := q4KSums(blk, a)
		dx := actScale(a)
		sd := float32(F16ToF32(binary.LittleEndian.Uint16(blk)) * dx)
		sm := float32(F16ToF32(binary.LittleEndian.Uint16(blk[2:])) * dx)
		acc = float32(acc + float32(float32(is)*sd))
		acc = float32(acc - float32(float32(im)*sm))
	}
	return acc
}

// q6KSum returns the integer sum is of one Q6_K super-block blk against one
// activation block a.
func q6KSum(blk, a []byte) int32 {
	ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
	sums := a[kqActSums16:]
	var is int32
	for n := 0; n < 2; n++ {
		var s [8]int32 // sums of the 8 sub-blocks of 16 of this half
		for l := 0; l < 32; l++ {
			q1 := int32(ql[l]&0xf | (qh[l]&3)<<4)
			q2 := int32(ql[l+32]&0xf | (qh[l]>>2&3)<<4)
			q3 := int32(ql[l]>>4 | (qh[l]>>4&3)<<4)
			q4 := int32(ql[l+32]>>4 | (qh[l]>>6&3)<<4)
			h := l / 16
			s[h] += q1 * int32(int8(a[l]))
			s[2+h] += q2 * int32(int8(a[32+l]))
			s[4+h] += q3 * int32(int8(a[64+l]))
			s[6+h] += q4 * int32(int8(a[96+l]))
		}
		for j := 0; j < 8; j++ {
			bs := int32(int16(binary.LittleEndian.Uint16(sums[2*(8*n+j):])))
			is += int32(int8(sc[j])) * (s[j] - 32*bs)
		}
		ql, qh, sc, a = ql[64:], qh[32:], sc[8:], a[128:]
	}
	return is
}

// dotQ6KGeneric is the reference arithmetic of one Q6_K output.
func dotQ6KGeneric(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*210 : b*210+210]
		a := act[b*kqActBlock : (b+1)*kqActBlock]
		is := q6KSum(blk, a)
		sd := float32(F16ToF32(binary.LittleEndian.Uint16(blk[208:])) * actScale(a))
		acc = float32(acc + float32(float32(is)*sd))
	}
	return acc
}

// isKQuant reports whether t's products run through matMulKQ.
func isKQuant(t Type) bool { return t == Q4_K || t == Q6_K }

// dotKGeneric dispatches the reference arithmetic by type.
func dotKGeneric(t Type, row, act []byte, nb int) float32 {
	if t == Q4_K {
		return dotQ4KGeneric(row, act, nb)
	}
	return dotQ6KGeneric(row, act, nb)
}

// matmulKGeneric computes output columns [lo,hi) of every activation row.
func matmulKGeneric(dst []float32, act []byte, n int, w *Matrix, rb, lo, hi int) {
	R, nb := w.Rows, w.Cols/256
	as := nb * kqActBlock
	for r := lo; r < hi; r++ {
		row := w.Data[r*rb : (r+1)*rb]
		for i := 0; i < n; i++ {
			dst[i*R+r] = dotKGeneric(w.Type, row, act[i*as:(i+1)*as], nb)
		}
	}
}

// matMulKQ is MatMul for K-quant weights: quantize the activations once,
// then split the weight rows across the pool.
func matMulKQ(dst, x []float32, n int, w *Matrix, rb, threads int) {
	R, K := w.Rows, w.Cols
	nb := K / 256
	as := nb * kqActBlock
	actp := getBytes(n * as)
	defer byteScratch.Put(actp)
	act := *actp
	quant := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			quantizeActQ8K(act[i*as:(i+1)*as], x[i*K:(i+1)*K])
		}
	}
	if threads > 1 && n >= 8 {
		parallelFor(n, (n+2*threads-1)/(2*threads), threads, quant)
	} else {
		quant(0, n)
	}
	chunk := (R + 4*threads - 1) / (4 * threads)
	chunk = max(16, (chunk+15)&^15)
	if threads == 1 {
		chunk = R
	}
	parallelFor(R, chunk, threads, func(lo, hi int) {
		if !matmulKSIMD(dst, act, n, w, rb, lo, hi) {
			matmulKGeneric(dst, act, n, w, rb, lo, hi)
		}
	})
}
