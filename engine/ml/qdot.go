package ml

import (
	"encoding/binary"
	"math"
)

// Integer products of quantized weights with quantized activations, as
// llama.cpp computes them: the activation row is quantized once per
// product (to 32-value blocks for the 32-value weight types, to 256-value
// blocks with per-16 sums for the K-quants and IQ4_XS), every weight block
// is dotted with its activation block exactly in int32, and only the
// per-block scaling is float32. Each dot function below is the reference
// arithmetic of one output for its type: every float32 step is written
// out and rounded in this order, so a SIMD kernel that keeps the integer
// part exact and the float steps in the same order gives identical bits.

// q8KActBlock is one quantized activation block for the K-quants: 256
// int8 values, their f32 scale d, then 16 int16 sums of 16 values each.
const q8KActBlock = 256 + 4 + 32

// quantizeActQ8KGeneric encodes x (len a multiple of 256) as ggml's
// quantize_row_q8_K_ref: per block the value of largest magnitude max
// gives iscale = -127/max, q = min(127, roundeven(iscale*x)), d = 1/iscale.
func quantizeActQ8KGeneric(dst []byte, x []float32) {
	for b := 0; b < len(x)/256; b++ {
		xb := x[b*256 : b*256+256]
		o := dst[b*q8KActBlock : (b+1)*q8KActBlock]
		var amax, mx float32
		for _, v := range xb {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			clear(o)
			continue
		}
		iscale := -127 / mx
		for j, v := range xb {
			q := int32(math.RoundToEven(float64(float32(iscale * v))))
			o[j] = byte(int8(min(127, q)))
		}
		for g := 0; g < 16; g++ {
			var s int16
			for _, q := range o[16*g : 16*g+16] {
				s += int16(int8(q))
			}
			binary.LittleEndian.PutUint16(o[260+2*g:], uint16(s))
		}
		binary.LittleEndian.PutUint32(o[256:], math.Float32bits(1/iscale))
	}
}

// quantizeAct encodes one activation row in format f.
func quantizeAct(f actFormat, dst []byte, x []float32) {
	switch f {
	case actQ8:
		quantizeActQ8(dst, x)
	case actQ8K:
		quantizeActQ8K(dst, x)
	case actBF16:
		quantizeActBF16(dst, x)
	default:
		panic("ml: quantizeAct of a float format")
	}
}

// q8Act returns the scale, the value sum and the 32 values of a Q8
// activation block.
func q8Act(ab []byte) (dx float32, sum int32, q []byte) {
	dx = math.Float32frombits(binary.LittleEndian.Uint32(ab))
	sum = -int32(binary.LittleEndian.Uint32(ab[4:])) / 128
	return dx, sum, ab[8:40]
}

// q8KAct returns the scale, the 16 group sums and the 256 values of a
// Q8_K activation block.
func q8KAct(ab []byte) (dx float32, bsums [16]int32, q []byte) {
	dx = math.Float32frombits(binary.LittleEndian.Uint32(ab[256:]))
	for g := range bsums {
		bsums[g] = int32(int16(binary.LittleEndian.Uint16(ab[260+2*g:])))
	}
	return dx, bsums, ab[:256]
}

// dotScaled adds one block's scaled integer dot: acc + s*(dw*dx).
func dotScaled(acc float32, s int32, dw, dx float32) float32 {
	sc := float32(dw * dx)
	p := float32(float32(s) * sc)
	return float32(acc + p)
}

// dotScaledMin adds one block with an offset m: acc + s*(dw*dx) + sumy*(m*dx).
func dotScaledMin(acc float32, s, sumy int32, dw, m, dx float32) float32 {
	acc = dotScaled(acc, s, dw, dx)
	p := float32(float32(sumy) * float32(m*dx))
	return float32(acc + p)
}

// superBlock adds one K-quant super-block: acc + isum*(d*dx) - msum*(dmin*dx).
func superBlock(acc float32, isum, msum int32, d, dmin, dx float32) float32 {
	a := float32(float32(d*dx) * float32(isum))
	m := float32(float32(dmin*dx) * float32(msum))
	return float32(acc + float32(a-m))
}

// normBlock is one weight block in a normal form shared by all integer
// types, decoded once per weight row and dotted with every activation row:
// values w as small signed integers (32 of them for the 32-value types,
// 256 for super-blocks), and the block's scales. For super-blocks, sc and
// mn are the integer scale and min of each 16 values and d, dmin the f16
// factors; for 32-value blocks, d is the scale and dmin the offset m of
// Q4_1/Q5_1 (the value is w*d + m).
type normBlock struct {
	w       [256]int8
	sc, mn  [16]int32
	d, dmin float32
}

// dot32 is the reference arithmetic of a 32-value type: per block the
// exact int32 dot s of weights and activations, then acc + s*(d*dx), plus
// sum(q)*(m*dx) when the type has an offset.
func dot32(nbs []normBlock, act []byte, withMin bool) float32 {
	var acc float32
	for b := range nbs {
		nf := &nbs[b]
		dx, sum, q := q8Act(act[b*q8ActBlock:])
		s := dotInt8((*[32]int8)(nf.w[:32]), (*[32]byte)(q))
		if withMin {
			acc = dotScaledMin(acc, s, sum, nf.d, nf.dmin, dx)
		} else {
			acc = dotScaled(acc, s, nf.d, dx)
		}
	}
	return acc
}

func dotInt8(w *[32]int8, q *[32]byte) int32 {
	var s int32
	for l := range w {
		s += int32(w[l]) * int32(int8(q[l]))
	}
	return s
}

// dotK is the reference arithmetic of a super-block type: per super-block
// isum = sum over groups of sc*dot(w, q) and msum = sum of mn*bsum, exact
// in int32, then acc + isum*(d*dx) - msum*(dmin*dx) (see superBlock).
func dotK(nbs []normBlock, act []byte) float32 {
	var acc float32
	for b := range nbs {
		nf := &nbs[b]
		dx, bsums, q := q8KAct(act[b*q8KActBlock:])
		var isum, msum int32
		for g := 0; g < 16; g++ {
			w := (*[16]int8)(nf.w[16*g:])
			qg := (*[16]byte)(q[16*g:])
			var s int32
			for l := range w {
				s += int32(w[l]) * int32(int8(qg[l]))
			}
			isum += nf.sc[g] * s
			msum += nf.mn[g] * bsums[g]
		}
		acc = superBlock(acc, isum, msum, nf.d, nf.dmin, dx)
	}
	return acc
}

// unpackRow decodes the nb blocks of one weight row into normal form.
func unpackRow(tr *typeTraits, dst []normBlock, row []byte) {
	bb := tr.blockBytes
	for b := range dst {
		tr.unpack(&dst[b], row[b*bb:(b+1)*bb])
	}
}

// dotNorm is the product of one unpacked weight row with one quantized
// activation row.
func dotNorm(tr *typeTraits, nbs []normBlock, act []byte) float32 {
	if tr.act == actQ8K {
		return dotK(nbs, act)
	}
	return dot32(nbs, act, tr.withMin)
}

func unpackQ4_0(nf *normBlock, blk []byte) {
	nf.d = f16At(blk, 0)
	for j := 0; j < 16; j++ {
		nf.w[j] = int8(blk[2+j]&0xf) - 8
		nf.w[j+16] = int8(blk[2+j]>>4) - 8
	}
}

func unpackQ4_1(nf *normBlock, blk []byte) {
	nf.d, nf.dmin = f16At(blk, 0), f16At(blk, 2)
	for j := 0; j < 16; j++ {
		nf.w[j] = int8(blk[4+j] & 0xf)
		nf.w[j+16] = int8(blk[4+j] >> 4)
	}
}

func unpackQ5_0(nf *normBlock, blk []byte) {
	nf.d = f16At(blk, 0)
	qh := binary.LittleEndian.Uint32(blk[2:])
	for j := 0; j < 16; j++ {
		nf.w[j] = int8(blk[6+j]&0xf|byte(qh>>j&1)<<4) - 16
		nf.w[j+16] = int8(blk[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
	}
}

func unpackQ5_1(nf *normBlock, blk []byte) {
	nf.d, nf.dmin = f16At(blk, 0), f16At(blk, 2)
	qh := binary.LittleEndian.Uint32(blk[4:])
	for j := 0; j < 16; j++ {
		nf.w[j] = int8(blk[8+j]&0xf | byte(qh>>j&1)<<4)
		nf.w[j+16] = int8(blk[8+j]>>4 | byte(qh>>(j+16)&1)<<4)
	}
}

func unpackQ8_0(nf *normBlock, blk []byte) {
	nf.d = f16At(blk, 0)
	for j := 0; j < 32; j++ {
		nf.w[j] = int8(blk[2+j])
	}
}

func unpackIQ4NL(nf *normBlock, blk []byte) {
	nf.d = f16At(blk, 0)
	for j := 0; j < 16; j++ {
		nf.w[j] = kvaluesIQ4NL[blk[2+j]&0xf]
		nf.w[j+16] = kvaluesIQ4NL[blk[2+j]>>4]
	}
}

// unpackQ2K: group g (16 values) is 128-half g/8, bit pair (g%8)/2 of
// bytes 16*(g%2).. of that half's 32; scale and min are the nibbles of
// scales[g].
func unpackQ2K(nf *normBlock, blk []byte) {
	sc, qw := blk[:16], blk[16:80]
	nf.d, nf.dmin = f16At(blk, 80), f16At(blk, 82)
	for g := 0; g < 16; g++ {
		half, shift, off := g/8, 2*((g%8)/2), 16*(g%2)
		src := qw[32*half+off:]
		for l := 0; l < 16; l++ {
			nf.w[16*g+l] = int8(src[l] >> shift & 3)
		}
		nf.sc[g], nf.mn[g] = int32(sc[g]&0xf), int32(sc[g]>>4)
	}
}

// unpackQ3K: the low bits as Q2_K; value minus 4 where the hmask bit
// (bit 4*half + pair of hmask[16*(g%2)+l]) is clear.
func unpackQ3K(nf *normBlock, blk []byte) {
	hm, qw := blk[:32], blk[32:96]
	scales := q3KScales(blk[96:108])
	nf.d, nf.dmin = f16At(blk, 108), 0
	for g := 0; g < 16; g++ {
		half, pair, off := g/8, (g%8)/2, 16*(g%2)
		m := byte(1) << (4*half + pair)
		src := qw[32*half+off:]
		for l := 0; l < 16; l++ {
			v := int8(src[l] >> (2 * pair) & 3)
			if hm[off+l]&m == 0 {
				v -= 4
			}
			nf.w[16*g+l] = v
		}
		nf.sc[g], nf.mn[g] = int32(scales[g]), 0
	}
}

// unpackK4Like: Q4_K/Q5_K sub-block s (32 values) in the low (even s) or
// high (odd s) nibbles of 32-byte chunk s/2 of ql; Q5_K's fifth bit in
// qh[l] bit s.
func unpackK4Like(nf *normBlock, blk, ql, qh []byte) {
	nf.d, nf.dmin = f16At(blk, 0), f16At(blk, 2)
	for s := 0; s < 8; s++ {
		sc, m := getScaleMinK4(s, blk[4:16])
		chunk := ql[32*(s/2):]
		shift := 4 * (s % 2)
		for l := 0; l < 32; l++ {
			v := chunk[l] >> shift & 0xf
			if qh != nil {
				v |= (qh[l] >> s & 1) << 4
			}
			nf.w[32*s+l] = int8(v)
		}
		nf.sc[2*s], nf.sc[2*s+1] = int32(sc), int32(sc)
		nf.mn[2*s], nf.mn[2*s+1] = int32(m), int32(m)
	}
}

func unpackQ4K(nf *normBlock, blk []byte) { unpackK4Like(nf, blk, blk[16:144], nil) }
func unpackQ5K(nf *normBlock, blk []byte) { unpackK4Like(nf, blk, blk[48:176], blk[16:48]) }

// unpackQ6K: group g of 16 is 128-half n = g/8, quarter k = (g%8)/2 (which
// of the four values packed per ql/qh byte pair), bytes 16*(g%2).
func unpackQ6K(nf *normBlock, blk []byte) {
	ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
	nf.d, nf.dmin = f16At(blk, 208), 0
	for g := 0; g < 16; g++ {
		n, k, off := g/8, (g%8)/2, 16*(g%2)
		lo := ql[64*n+32*(k%2)+off:]
		hi := qh[32*n+off:]
		for l := 0; l < 16; l++ {
			nf.w[16*g+l] = int8(lo[l]>>(4*(k/2))&0xf|(hi[l]>>(2*k)&3)<<4) - 32
		}
		nf.sc[g], nf.mn[g] = int32(int8(sc[g])), 0
	}
}

func unpackIQ4XS(nf *normBlock, blk []byte) {
	qs := blk[8:136]
	nf.d, nf.dmin = f16At(blk, 0), 0
	for ib := 0; ib < 8; ib++ {
		for j := 0; j < 16; j++ {
			nf.w[32*ib+j] = kvaluesIQ4NL[qs[16*ib+j]&0xf]
			nf.w[32*ib+j+16] = kvaluesIQ4NL[qs[16*ib+j]>>4]
		}
		ls := int32(iq4XSScale(blk, ib))
		nf.sc[2*ib], nf.sc[2*ib+1] = ls, ls
		nf.mn[2*ib], nf.mn[2*ib+1] = 0, 0
	}
}
