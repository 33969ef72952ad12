package ml

import (
	"encoding/binary"
	"math"
)

// Dequantizers for every computable type, each bit-exact with ggml's
// dequantize_row_<type> (block layouts from ggml-common.h). ggml computes
// in float32 without fused multiply-adds here, so every product and sum
// is rounded to float32 explicitly (Go may otherwise fuse x*y+z).

func f16At(b []byte, off int) float32 { return F16ToF32(binary.LittleEndian.Uint16(b[off:])) }

func dequantF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(dst []float32, src []byte) {
	if useAVX512 && len(dst) > 0 {
		dequantF16AVX512(&dst[0], &src[0], len(dst))
		return
	}
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// Q4_0: {f16 d, 16 bytes of nibbles}; element j is (lo nibble j - 8)*d,
// element j+16 (hi nibble j - 8)*d.
func dequantQ4_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*18 : b*18+18]
		d := f16At(blk, 0)
		y := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			y[j] = float32(int(blk[2+j]&0xf)-8) * d
			y[j+16] = float32(int(blk[2+j]>>4)-8) * d
		}
	}
}

// Q4_1: {f16 d, f16 m, 16 bytes of nibbles}; element = q*d + m.
func dequantQ4_1(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*20 : b*20+20]
		d, m := f16At(blk, 0), f16At(blk, 2)
		y := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(blk[4+j]&0xf)*d) + m
			y[j+16] = float32(float32(blk[4+j]>>4)*d) + m
		}
	}
}

// Q5_0: {f16 d, u32 qh (fifth bits), 16 bytes of nibbles}; element j has
// bit 4 from qh bit j, element j+16 from qh bit j+16; value (q-16)*d.
func dequantQ5_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*22 : b*22+22]
		d := f16At(blk, 0)
		qh := binary.LittleEndian.Uint32(blk[2:])
		qs := blk[6:22]
		y := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j) & 1 << 4
			h1 := byte(qh>>(j+16)) & 1 << 4
			y[j] = float32(int(qs[j]&0xf|h0)-16) * d
			y[j+16] = float32(int(qs[j]>>4|h1)-16) * d
		}
	}
}

// Q5_1: {f16 d, f16 m, u32 qh, 16 bytes of nibbles}; element = q*d + m.
func dequantQ5_1(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*24 : b*24+24]
		d, m := f16At(blk, 0), f16At(blk, 2)
		qh := binary.LittleEndian.Uint32(blk[4:])
		qs := blk[8:24]
		y := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j) & 1 << 4
			h1 := byte(qh>>(j+16)) & 1 << 4
			y[j] = float32(float32(qs[j]&0xf|h0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

func dequantQ8_0(dst []float32, src []byte) {
	if useAVX512 && len(dst) > 0 {
		dequantQ8AVX512(&dst[0], &src[0], len(dst)/32)
		return
	}
	dequantQ8Generic(dst, src)
}

func dequantQ8Generic(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*34 : b*34+34]
		d := f16At(blk, 0)
		y := dst[b*32 : b*32+32]
		for j := range y {
			y[j] = float32(int8(blk[2+j])) * d
		}
	}
}

// Q2_K: super-blocks of 256, {16 bytes of scales (lo nibble scale, hi
// nibble min, per 16 values), 64 bytes of 2-bit values, f16 d, f16 dmin}.
// Per 128 values, byte l of the 32-byte chunk holds values l, l+32, l+64,
// l+96 in bit pairs 0-1, 2-3, 4-5, 6-7.
func dequantQ2K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*84 : i*84+84]
		sc, q := blk[:16], blk[16:80]
		d, dmin := f16At(blk, 80), f16At(blk, 82)
		y := dst[i*256 : i*256+256]
		is := 0
		for n := 0; n < 2; n++ {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					s := sc[is]
					is++
					dl := float32(d * float32(s&0xf))
					ml := float32(dmin * float32(s>>4))
					qq := q[16*half : 16*half+16]
					for l := 0; l < 16; l++ {
						y[l] = float32(dl*float32((qq[l]>>shift)&3)) - ml
					}
					y = y[16:]
				}
			}
			q = q[32:]
		}
	}
}

// q3KScales unpacks Q3_K's twelve bytes of 6-bit scales (biased by 32)
// into 16 signed scales, as ggml's kmask1/kmask2 shuffle.
func q3KScales(s []byte) [16]int8 {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(s)
	a1 := binary.LittleEndian.Uint32(s[4:])
	tmp := binary.LittleEndian.Uint32(s[8:])
	var aux [4]uint32
	aux[2] = (a0>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
	aux[3] = (a1>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
	aux[0] = a0&kmask2 | (tmp&kmask1)<<4
	aux[1] = a1&kmask2 | ((tmp>>2)&kmask1)<<4
	var out [16]int8
	for k, v := range aux {
		for b := 0; b < 4; b++ {
			out[4*k+b] = int8(byte(v>>(8*b))) - 32
		}
	}
	return out
}

// Q3_K: super-blocks of 256, {32 bytes hmask (third bits), 64 bytes of
// 2-bit values, 12 bytes of 6-bit scales, f16 d}. Value = 2-bit q minus 4
// where the hmask bit is clear; element = d*scale*value.
func dequantQ3K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*110 : i*110+110]
		hm, q := blk[:32], blk[32:96]
		scales := q3KScales(blk[96:108])
		d := f16At(blk, 108)
		y := dst[i*256 : i*256+256]
		is := 0
		m := byte(1)
		for n := 0; n < 2; n++ {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := float32(d * float32(scales[is]))
					is++
					for l := 16 * half; l < 16*half+16; l++ {
						v := int((q[l] >> shift) & 3)
						if hm[l]&m == 0 {
							v -= 4
						}
						y[l-16*half] = dl * float32(v)
					}
					y = y[16:]
				}
				m <<= 1
			}
			q = q[32:]
		}
	}
}

// getScaleMinK4 is ggml's get_scale_min_k4: scale and min j of a Q4_K or
// Q5_K super-block's 12 packed bytes of 6-bit values.
func getScaleMinK4(j int, q []byte) (d, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xf) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// Q4_K: super-blocks of 256 elements, {f16 d, f16 dmin, 12 bytes of 6-bit
// scales and mins, 128 bytes of nibbles}; sub-block s of 32 lives in the
// low (even s) or high (odd s) nibbles of 32-byte chunk s/2.
func dequantQ4K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*144 : i*144+144]
		d, dmin := f16At(blk, 0), f16At(blk, 2)
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

// Q5_K: Q4_K plus 32 bytes of fifth bits: {f16 d, f16 dmin, 12 bytes of
// scales and mins, 32 bytes qh, 128 bytes of nibbles}; sub-block s takes
// its fifth bit from qh bit s.
func dequantQ5K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*176 : i*176+176]
		d, dmin := f16At(blk, 0), f16At(blk, 2)
		scales, qh, ql := blk[4:16], blk[16:48], blk[48:176]
		y := dst[i*256 : i*256+256]
		is := 0
		u1, u2 := byte(1), byte(2)
		for j := 0; j < 256; j += 64 {
			sc, m := getScaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = getScaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				v := ql[l] & 0xf
				if qh[l]&u1 != 0 {
					v += 16
				}
				y[j+l] = float32(d1*float32(v)) - m1
			}
			for l := 0; l < 32; l++ {
				v := ql[l] >> 4
				if qh[l]&u2 != 0 {
					v += 16
				}
				y[j+32+l] = float32(d2*float32(v)) - m2
			}
			ql = ql[32:]
			is += 2
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// Q6_K: super-blocks of 256 elements, {128 bytes of low nibbles ql, 64
// bytes of 2-bit high parts qh, 16 int8 scales, f16 d}; element e is
// d*scales[e/16]*(q-32) for its 6-bit q, rounded as ggml does (d*scale
// first, then times q).
func dequantQ6K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*210 : i*210+210]
		d := f16At(blk, 208)
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

// kvaluesIQ4NL is the non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// IQ4_NL: {f16 d, 16 bytes of nibbles}, laid out as Q4_0; element =
// d*kvalues[q].
func dequantIQ4NL(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*18 : b*18+18]
		d := f16At(blk, 0)
		y := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			y[j] = d * float32(kvaluesIQ4NL[blk[2+j]&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[blk[2+j]>>4])
		}
	}
}

// iq4XSScale is the 6-bit scale of 32-value sub-block ib, biased by 32.
func iq4XSScale(blk []byte, ib int) int {
	sh := binary.LittleEndian.Uint16(blk[2:])
	lo := int(blk[4+ib/2]>>(4*(ib%2))) & 0xf
	hi := int(sh>>(2*ib)) & 3
	return (lo | hi<<4) - 32
}

// IQ4_XS: super-blocks of 256, {f16 d, u16 high scale bits, 4 bytes of low
// scale nibbles, 128 bytes of nibbles}; sub-block ib of 32 is laid out as
// an IQ4_NL block with scale d*(ls-32).
func dequantIQ4XS(dst []float32, src []byte) {
	for i := 0; i < len(dst)/256; i++ {
		blk := src[i*136 : i*136+136]
		d := f16At(blk, 0)
		qs := blk[8:136]
		y := dst[i*256 : i*256+256]
		for ib := 0; ib < 8; ib++ {
			dl := float32(d * float32(iq4XSScale(blk, ib)))
			for j := 0; j < 16; j++ {
				y[j] = dl * float32(kvaluesIQ4NL[qs[j]&0xf])
				y[j+16] = dl * float32(kvaluesIQ4NL[qs[j]>>4])
			}
			y, qs = y[32:], qs[16:]
		}
	}
}
