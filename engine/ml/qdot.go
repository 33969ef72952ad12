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

// quantizeActQ8K encodes x (len a multiple of 256) as ggml's
// quantize_row_q8_K_ref: per block the value of largest magnitude max
// gives iscale = -127/max, q = min(127, roundeven(iscale*x)), d = 1/iscale.
func quantizeActQ8K(dst []byte, x []float32) {
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

func dotQ4_0(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*18 : b*18+18]
		dx, _, q := q8Act(act[b*q8ActBlock:])
		var s int32
		for j := 0; j < 16; j++ {
			s += (int32(blk[2+j]&0xf) - 8) * int32(int8(q[j]))
			s += (int32(blk[2+j]>>4) - 8) * int32(int8(q[j+16]))
		}
		acc = dotScaled(acc, s, f16At(blk, 0), dx)
	}
	return acc
}

func dotQ4_1(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*20 : b*20+20]
		dx, sum, q := q8Act(act[b*q8ActBlock:])
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(blk[4+j]&0xf) * int32(int8(q[j]))
			s += int32(blk[4+j]>>4) * int32(int8(q[j+16]))
		}
		acc = dotScaledMin(acc, s, sum, f16At(blk, 0), f16At(blk, 2), dx)
	}
	return acc
}

func dotQ5_0(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*22 : b*22+22]
		qh := binary.LittleEndian.Uint32(blk[2:])
		qs := blk[6:22]
		dx, _, q := q8Act(act[b*q8ActBlock:])
		var s int32
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			s += (int32(qs[j]&0xf) | h0 - 16) * int32(int8(q[j]))
			s += (int32(qs[j]>>4) | h1 - 16) * int32(int8(q[j+16]))
		}
		acc = dotScaled(acc, s, f16At(blk, 0), dx)
	}
	return acc
}

func dotQ5_1(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*24 : b*24+24]
		qh := binary.LittleEndian.Uint32(blk[4:])
		qs := blk[8:24]
		dx, sum, q := q8Act(act[b*q8ActBlock:])
		var s int32
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			s += (int32(qs[j]&0xf) | h0) * int32(int8(q[j]))
			s += (int32(qs[j]>>4) | h1) * int32(int8(q[j+16]))
		}
		acc = dotScaledMin(acc, s, sum, f16At(blk, 0), f16At(blk, 2), dx)
	}
	return acc
}

func dotIQ4NL(row, act []byte, nb int) float32 {
	var acc float32
	for b := 0; b < nb; b++ {
		blk := row[b*18 : b*18+18]
		dx, _, q := q8Act(act[b*q8ActBlock:])
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(kvaluesIQ4NL[blk[2+j]&0xf]) * int32(int8(q[j]))
			s += int32(kvaluesIQ4NL[blk[2+j]>>4]) * int32(int8(q[j+16]))
		}
		acc = dotScaled(acc, s, f16At(blk, 0), dx)
	}
	return acc
}

// superBlock adds one K-quant super-block: acc + isum*(d*dx) - msum*(dmin*dx).
func superBlock(acc float32, isum, msum int32, d, dmin, dx float32) float32 {
	a := float32(float32(d*dx) * float32(isum))
	m := float32(float32(dmin*dx) * float32(msum))
	return float32(acc + float32(a-m))
}

// dot16 is the integer dot of 16 weight values w (already decoded to
// small ints) with 16 int8 activations.
func dot16(w *[16]int32, q []byte) int32 {
	var s int32
	for l := 0; l < 16; l++ {
		s += w[l] * int32(int8(q[l]))
	}
	return s
}

func dotQ2K(row, act []byte, nb int) float32 {
	var acc float32
	var w [16]int32
	for i := 0; i < nb; i++ {
		blk := row[i*84 : i*84+84]
		sc, qw := blk[:16], blk[16:80]
		dx, bsums, q := q8KAct(act[i*q8KActBlock:])
		var isum, msum int32
		for g := 0; g < 16; g++ {
			msum += int32(sc[g]>>4) * bsums[g]
		}
		// Group g (16 values) = 128-half g/8, shift pair (g%8)/2, bytes
		// 16*(g%2) of that half's 32.
		for g := 0; g < 16; g++ {
			half, shift, off := g/8, 2*((g%8)/2), 16*(g%2)
			src := qw[32*half+off:]
			for l := range w {
				w[l] = int32(src[l] >> shift & 3)
			}
			isum += int32(sc[g]&0xf) * dot16(&w, q[16*g:])
		}
		acc = superBlock(acc, isum, msum, f16At(blk, 80), f16At(blk, 82), dx)
	}
	return acc
}

func dotQ3K(row, act []byte, nb int) float32 {
	var acc float32
	var w [16]int32
	for i := 0; i < nb; i++ {
		blk := row[i*110 : i*110+110]
		hm, qw := blk[:32], blk[32:96]
		scales := q3KScales(blk[96:108])
		dx, _, q := q8KAct(act[i*q8KActBlock:])
		var isum int32
		for g := 0; g < 16; g++ {
			half, shift, off := g/8, 2*((g%8)/2), 16*(g%2)
			m := byte(1) << (4*half + (g%8)/2)
			src := qw[32*half+off:]
			for l := range w {
				v := int32(src[l] >> shift & 3)
				if hm[off+l]&m == 0 {
					v -= 4
				}
				w[l] = v
			}
			isum += int32(scales[g]) * dot16(&w, q[16*g:])
		}
		acc = superBlock(acc, isum, 0, f16At(blk, 108), 0, dx)
	}
	return acc
}

// dotK4Like is the Q4_K/Q5_K super-block: eight sub-blocks of 32 with
// 6-bit scales and mins; qh (nil for Q4_K) holds Q5_K's fifth bits.
func dotK4Like(acc float32, blk, scales, ql, qh, ab []byte) float32 {
	dx, bsums, q := q8KAct(ab)
	var isum, msum int32
	var w [16]int32
	for s := 0; s < 8; s++ {
		sc, m := getScaleMinK4(s, scales)
		msum += int32(m) * (bsums[2*s] + bsums[2*s+1])
		chunk := ql[32*(s/2):]
		shift := 4 * (s % 2)
		var si int32
		for h := 0; h < 2; h++ {
			for l := range w {
				v := int32(chunk[16*h+l] >> shift & 0xf)
				if qh != nil && qh[16*h+l]>>s&1 != 0 {
					v += 16
				}
				w[l] = v
			}
			si += dot16(&w, q[32*s+16*h:])
		}
		isum += int32(sc) * si
	}
	return superBlock(acc, isum, msum, f16At(blk, 0), f16At(blk, 2), dx)
}

func dotQ4K(row, act []byte, nb int) float32 {
	var acc float32
	for i := 0; i < nb; i++ {
		blk := row[i*144 : i*144+144]
		acc = dotK4Like(acc, blk, blk[4:16], blk[16:144], nil, act[i*q8KActBlock:])
	}
	return acc
}

func dotQ5K(row, act []byte, nb int) float32 {
	var acc float32
	for i := 0; i < nb; i++ {
		blk := row[i*176 : i*176+176]
		acc = dotK4Like(acc, blk, blk[4:16], blk[48:176], blk[16:48], act[i*q8KActBlock:])
	}
	return acc
}

func dotQ6K(row, act []byte, nb int) float32 {
	var acc float32
	var w [16]int32
	for i := 0; i < nb; i++ {
		blk := row[i*210 : i*210+210]
		ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
		dx, _, q := q8KAct(act[i*q8KActBlock:])
		var isum int32
		// Group g of 16: 128-half n = g/8, quarter k = (g%8)/2 (which of
		// the four values packed per ql/qh byte pair), bytes 16*(g%2).
		for g := 0; g < 16; g++ {
			n, k, off := g/8, (g%8)/2, 16*(g%2)
			lo := ql[64*n+32*(k%2)+off:]
			hi := qh[32*n+off:]
			for l := range w {
				w[l] = int32(lo[l]>>(4*(k/2))&0xf|(hi[l]>>(2*k)&3)<<4) - 32
			}
			isum += int32(int8(sc[g])) * dot16(&w, q[16*g:])
		}
		acc = superBlock(acc, isum, 0, f16At(blk, 208), 0, dx)
	}
	return acc
}

func dotIQ4XS(row, act []byte, nb int) float32 {
	var acc float32
	var w [16]int32
	for i := 0; i < nb; i++ {
		blk := row[i*136 : i*136+136]
		qs := blk[8:136]
		dx, _, q := q8KAct(act[i*q8KActBlock:])
		var isum int32
		for ib := 0; ib < 8; ib++ {
			var si int32
			for h := 0; h < 2; h++ {
				for l := range w {
					w[l] = int32(kvaluesIQ4NL[qs[16*ib+l]>>(4*h)&0xf])
				}
				si += dot16(&w, q[32*ib+16*h:])
			}
			isum += int32(iq4XSScale(blk, ib)) * si
		}
		acc = superBlock(acc, isum, 0, f16At(blk, 0), 0, dx)
	}
	return acc
}
