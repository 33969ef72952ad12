package ml

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// f16v returns a random f16 value in [-s, s) and its float32 value.
func f16v(r *rand.Rand, s float64) (uint16, float32) {
	h := F32ToF16(float32((r.Float64()*2 - 1) * s))
	return h, F16ToF32(h)
}

func ints(r *rand.Rand, n, lo, hi int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = lo + r.IntN(hi-lo+1)
	}
	// The extremes appear in every block.
	v[0], v[n-1] = lo, hi
	return v
}

// blockCase packs one block of its type from logical values (the 4-, 5-,
// 6-bit quants, scales and mins) as the GGUF spec lays them out, and
// returns the values the spec's formula gives. The packing here is
// written from the format description, independently of the decoders.
type blockCase struct {
	ty   Type
	pack func(r *rand.Rand) (blk []byte, want []float32)
}

var blockCases = []blockCase{
	{Q4_0, func(r *rand.Rand) ([]byte, []float32) {
		blk := make([]byte, 18)
		h, d := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk, h)
		q := ints(r, 32, 0, 15)
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			blk[2+j%16] |= byte(q[j]) << (4 * (j / 16))
			want[j] = float32(q[j]-8) * d
		}
		return blk, want
	}},
	{Q4_1, func(r *rand.Rand) ([]byte, []float32) {
		blk := make([]byte, 20)
		h, d := f16v(r, 0.1)
		hm, m := f16v(r, 1)
		binary.LittleEndian.PutUint16(blk, h)
		binary.LittleEndian.PutUint16(blk[2:], hm)
		q := ints(r, 32, 0, 15)
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			blk[4+j%16] |= byte(q[j]) << (4 * (j / 16))
			want[j] = float32(float32(q[j])*d) + m
		}
		return blk, want
	}},
	{Q5_0, func(r *rand.Rand) ([]byte, []float32) {
		blk := make([]byte, 22)
		h, d := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk, h)
		q := ints(r, 32, 0, 31)
		var qh uint32
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			blk[6+j%16] |= byte(q[j]&15) << (4 * (j / 16))
			qh |= uint32(q[j]>>4) << j
			want[j] = float32(q[j]-16) * d
		}
		binary.LittleEndian.PutUint32(blk[2:], qh)
		return blk, want
	}},
	{Q5_1, func(r *rand.Rand) ([]byte, []float32) {
		blk := make([]byte, 24)
		h, d := f16v(r, 0.1)
		hm, m := f16v(r, 1)
		binary.LittleEndian.PutUint16(blk, h)
		binary.LittleEndian.PutUint16(blk[2:], hm)
		q := ints(r, 32, 0, 31)
		var qh uint32
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			blk[8+j%16] |= byte(q[j]&15) << (4 * (j / 16))
			qh |= uint32(q[j]>>4) << j
			want[j] = float32(float32(q[j])*d) + m
		}
		binary.LittleEndian.PutUint32(blk[4:], qh)
		return blk, want
	}},
	{Q8_0, func(r *rand.Rand) ([]byte, []float32) {
		blk := make([]byte, 34)
		h, d := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk, h)
		q := ints(r, 32, -128, 127)
		want := make([]float32, 32)
		for j := range q {
			blk[2+j] = byte(int8(q[j]))
			want[j] = float32(q[j]) * d
		}
		return blk, want
	}},
	{IQ4_NL, func(r *rand.Rand) ([]byte, []float32) {
		blk := make([]byte, 18)
		h, d := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk, h)
		q := ints(r, 32, 0, 15)
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			blk[2+j%16] |= byte(q[j]) << (4 * (j / 16))
			want[j] = d * float32(kvaluesIQ4NL[q[j]])
		}
		return blk, want
	}},
	{MXFP4, func(r *rand.Rand) ([]byte, []float32) {
		// {E8M0 e, 16 bytes of E2M1 nibbles}: element = E2M1(q) * 2^(e-127),
		// with E2M1 = sign, 2 exponent bits (bias 1), 1 mantissa bit.
		blk := make([]byte, 17)
		e := 100 + r.IntN(40)
		blk[0] = byte(e)
		q := ints(r, 32, 0, 15)
		want := make([]float32, 32)
		for j := 0; j < 32; j++ {
			blk[1+j%16] |= byte(q[j]) << (4 * (j / 16))
			exp, man := q[j]>>1&3, float64(q[j]&1)
			v := man / 2 // subnormal: 0 or 0.5
			if exp > 0 {
				v = math.Ldexp(1+man/2, exp-1)
			}
			if q[j]&8 != 0 && v != 0 { // ggml decodes -0 as +0
				v = -v
			}
			want[j] = float32(v * math.Ldexp(1, e-127))
		}
		return blk, want
	}},
	{Q2_K, func(r *rand.Rand) ([]byte, []float32) {
		// {scales[16] (scale | min<<4), qs[64], d, dmin}; value v sits in
		// byte 32*(v/128) + (v%32), bits 2*((v%128)/32).
		blk := make([]byte, 84)
		h, d := f16v(r, 0.1)
		hm, dmin := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk[80:], h)
		binary.LittleEndian.PutUint16(blk[82:], hm)
		sc, mn, q := ints(r, 16, 0, 15), ints(r, 16, 0, 15), ints(r, 256, 0, 3)
		for g := range sc {
			blk[g] = byte(sc[g] | mn[g]<<4)
		}
		want := make([]float32, 256)
		for v := range q {
			blk[16+32*(v/128)+v%32] |= byte(q[v]) << (2 * ((v % 128) / 32))
			g := v / 16
			want[v] = float32(float32(d*float32(sc[g]))*float32(q[v])) - float32(dmin*float32(mn[g]))
		}
		return blk, want
	}},
	{Q3_K, func(r *rand.Rand) ([]byte, []float32) {
		// {hmask[32], qs[64], scales[12], d}: the low two bits as Q2_K,
		// the third bit of v in hmask[v%32] bit v/32; 6-bit scales with
		// the low nibbles of 0-7 and 8-15 in bytes 0-7, the high bit pairs
		// in bytes 8-11.
		blk := make([]byte, 110)
		h, d := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk[108:], h)
		sc, q := ints(r, 16, 0, 63), ints(r, 256, 0, 7)
		for j, l := range sc {
			blk[96+j%8] |= byte(l&15) << (4 * (j / 8))
			blk[96+8+j%4] |= byte(l>>4) << (2 * (j / 4))
		}
		want := make([]float32, 256)
		for v := range q {
			blk[32+32*(v/128)+v%32] |= byte(q[v]&3) << (2 * ((v % 128) / 32))
			blk[v%32] |= byte(q[v]>>2) << (v / 32)
			want[v] = float32(d*float32(sc[v/16]-32)) * float32(q[v]-4)
		}
		return blk, want
	}},
	{Q4_K, func(r *rand.Rand) ([]byte, []float32) {
		return packK4Like(r, false)
	}},
	{Q5_K, func(r *rand.Rand) ([]byte, []float32) {
		return packK4Like(r, true)
	}},
	{Q6_K, func(r *rand.Rand) ([]byte, []float32) {
		var L [256]uint8
		var sc [16]int8
		for i, v := range ints(r, 256, 0, 63) {
			L[i] = uint8(v)
		}
		for i, v := range ints(r, 16, -128, 127) {
			sc[i] = int8(v)
		}
		h, d := f16v(r, 0.01)
		want := make([]float32, 256)
		for v := range L {
			want[v] = float32(d*float32(sc[v/16])) * float32(int(L[v])-32)
		}
		return packQ6K(&L, &sc, h), want
	}},
	{IQ4_XS, func(r *rand.Rand) ([]byte, []float32) {
		// {d, scales_h (2 high bits per sub-block), scales_l[4] (low
		// nibbles), qs[128]}; sub-block ib as an IQ4_NL block.
		blk := make([]byte, 136)
		h, d := f16v(r, 0.1)
		binary.LittleEndian.PutUint16(blk, h)
		ls, q := ints(r, 8, 0, 63), ints(r, 256, 0, 15)
		var sh uint16
		for ib, l := range ls {
			blk[4+ib/2] |= byte(l&15) << (4 * (ib % 2))
			sh |= uint16(l>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(blk[2:], sh)
		want := make([]float32, 256)
		for v := range q {
			ib, j := v/32, v%32
			blk[8+16*ib+j%16] |= byte(q[v]) << (4 * (j / 16))
			want[v] = float32(d*float32(ls[ib]-32)) * float32(kvaluesIQ4NL[q[v]])
		}
		return blk, want
	}},
}

// packK4Like packs a Q4_K (or, with fifth bits, Q5_K) block: {d, dmin,
// 12 bytes of 6-bit scales and mins, [qh[32],] qs[128]}; sub-block s of 32
// in the low (even s) or high (odd s) nibbles of 32-byte chunk s/2, its
// fifth bits in qh[l] bit s.
func packK4Like(r *rand.Rand, five bool) ([]byte, []float32) {
	n, qoff, top := 144, 16, 15
	if five {
		n, qoff, top = 176, 48, 31
	}
	blk := make([]byte, n)
	h, d := f16v(r, 0.1)
	hm, dmin := f16v(r, 0.1)
	binary.LittleEndian.PutUint16(blk, h)
	binary.LittleEndian.PutUint16(blk[2:], hm)
	var ls, lm [8]uint8
	for i, v := range ints(r, 8, 0, 63) {
		ls[i] = uint8(v)
	}
	for i, v := range ints(r, 8, 0, 63) {
		lm[7-i] = uint8(v)
	}
	sc := packQ4KScales(ls, lm)
	copy(blk[4:16], sc[:])
	q := ints(r, 256, 0, top)
	want := make([]float32, 256)
	for v := range q {
		s, l := v/32, v%32
		blk[qoff+32*(s/2)+l] |= byte(q[v]&15) << (4 * (s % 2))
		if five {
			blk[16+l] |= byte(q[v]>>4) << s
		}
		want[v] = float32(float32(d*float32(ls[s]))*float32(q[v])) - float32(dmin*float32(lm[s]))
	}
	return blk, want
}

// TestDequantBlockLayouts decodes hand-packed blocks of every quantized
// type, alone and three in a row, at every SIMD level.
func TestDequantBlockLayouts(t *testing.T) {
	covered := map[Type]bool{}
	for _, c := range blockCases {
		t.Run(c.ty.String(), func(t *testing.T) {
			covered[c.ty] = true
			r := rand.New(rand.NewPCG(uint64(c.ty), 77))
			var data []byte
			var want []float32
			for range 3 {
				blk, w := c.pack(r)
				require.Len(t, blk, c.ty.BlockBytes())
				require.Len(t, w, c.ty.BlockSize())
				data = append(data, blk...)
				want = append(want, w...)
			}
			m, err := NewMatrix(c.ty, 1, len(want), data)
			require.NoError(t, err)
			for _, lvl := range supportedLevels() {
				saved := simdLevel()
				setSIMDLevel(lvl)
				got := make([]float32, len(want))
				Dequantize(got, m, 0)
				setSIMDLevel(saved)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
						"%v level %d element %d: got %v want %v", c.ty, lvl, i, got[i], want[i])
				}
			}
		})
	}
	for _, ty := range SupportedTypes() {
		if ty.BlockSize() > 1 {
			require.True(t, covered[ty], "no block layout case for %v", ty)
		}
	}
}

// TestDequantFixedValues pins a few hand-computed values.
func TestDequantFixedValues(t *testing.T) {
	one, half := F32ToF16(1), F32ToF16(0.5)
	cases := []struct {
		name string
		ty   Type
		blk  func() []byte
		idx  []int
		want []float32
	}{
		{"Q5_0 fifth bits", Q5_0, func() []byte {
			b := make([]byte, 22)
			binary.LittleEndian.PutUint16(b, one)
			binary.LittleEndian.PutUint32(b[2:], 1|1<<16|1<<31) // elements 0, 16, 31
			b[6] = 0x3f                                         // element 0: 15, element 16: 3
			return b
		}, []int{0, 16, 31, 1, 17}, []float32{15, 3, 0, -16, -16}}, // nibble + 16*(fifth bit) - 16
		{"Q4_1 offset", Q4_1, func() []byte {
			b := make([]byte, 20)
			binary.LittleEndian.PutUint16(b, half)
			binary.LittleEndian.PutUint16(b[2:], F32ToF16(-2))
			b[4] = 0xa5 // element 0: 5, element 16: 10
			return b
		}, []int{0, 16, 1}, []float32{0.5, 3, -2}},
		{"IQ4_NL codebook ends", IQ4_NL, func() []byte {
			b := make([]byte, 18)
			binary.LittleEndian.PutUint16(b, half)
			b[2] = 0xf0 // element 0: index 0, element 16: index 15
			return b
		}, []int{0, 16}, []float32{-63.5, 56.5}},
		{"MXFP4 E8M0 scale 2^0, code ends and negative zero", MXFP4, func() []byte {
			b := make([]byte, 17)
			b[0] = 127  // 2^0
			b[1] = 0x87 // element 0: code 7 (6), element 16: code 8 (-0)
			b[2] = 0xf1 // element 1: code 1 (0.5), element 17: code 15 (-6)
			return b
		}, []int{0, 16, 1, 17, 2}, []float32{6, 0, 0.5, -6, 0}},
		{"MXFP4 E8M0 subnormal scale", MXFP4, func() []byte {
			b := make([]byte, 17)
			b[0] = 0    // 2^-127, a float32 subnormal
			b[1] = 0x0c // element 0: code 12 (-2)
			return b
		}, []int{0}, []float32{float32(-2 * math.Ldexp(1, -127))}},
		{"MXFP4 E8M0 largest scale", MXFP4, func() []byte {
			b := make([]byte, 17)
			b[0] = 254  // 2^127
			b[1] = 0x01 // element 0: code 1 (0.5)
			return b
		}, []int{0}, []float32{float32(math.Ldexp(1, 126))}},
		{"Q2_K scale and min nibbles", Q2_K, func() []byte {
			b := make([]byte, 84)
			b[0] = 0x23            // group 0: scale 3, min 2
			b[16] = 0x03 | 0x02<<2 // element 0: 3, element 32: 2
			binary.LittleEndian.PutUint16(b[80:], one)
			binary.LittleEndian.PutUint16(b[82:], half)
			return b
		}, []int{0, 1, 32}, []float32{3*3 - 1, -1, 0}},
		{"IQ4_XS scale bits", IQ4_XS, func() []byte {
			b := make([]byte, 136)
			binary.LittleEndian.PutUint16(b, one)
			binary.LittleEndian.PutUint16(b[2:], 2<<14) // sub-block 7: high bits 2
			b[4+3] = 0x10                               // sub-block 7: low nibble 1 -> ls 33
			b[8+16*7] = 0x08                            // element 224: index 8 (1)
			return b
		}, []int{224, 0}, []float32{1, -32 * -127}},
	}
	for _, c := range cases {
		m, err := NewMatrix(c.ty, 1, c.ty.BlockSize(), c.blk())
		require.NoError(t, err, c.name)
		got := make([]float32, c.ty.BlockSize())
		Dequantize(got, m, 0)
		for i, idx := range c.idx {
			require.Equal(t, c.want[i], got[idx], "%s element %d", c.name, idx)
		}
	}
}

// TestTypeTable checks the table against ggml's sizes, and that every
// computable quantized type has a product.
func TestTypeTable(t *testing.T) {
	sizes := map[Type][2]int{
		F32: {1, 4}, F16: {1, 2}, BF16: {1, 2}, Q4_0: {32, 18}, Q4_1: {32, 20}, Q5_0: {32, 22},
		Q5_1: {32, 24}, Q8_0: {32, 34}, Q2_K: {256, 84}, Q3_K: {256, 110}, Q4_K: {256, 144},
		Q5_K: {256, 176}, Q6_K: {256, 210}, IQ4_NL: {32, 18}, IQ4_XS: {256, 136}, MXFP4: {32, 17},
	}
	require.Len(t, SupportedTypes(), len(sizes))
	for _, ty := range SupportedTypes() {
		require.Equal(t, sizes[ty], [2]int{ty.BlockSize(), ty.BlockBytes()}, "%v", ty)
		tr := ty.traits()
		if ty.BlockSize() > 1 {
			require.NotEqual(t, actF32, tr.act, "%v", ty)
			require.NotNil(t, tr.unpack, "%v", ty)
			require.Zero(t, ty.BlockSize()%tr.act.blockSize(), "%v", ty)
		}
	}
	require.True(t, IQ2_XXS.Known())
	require.False(t, IQ2_XXS.Supported())
	_, err := IQ2_XXS.RowBytes(256)
	require.ErrorIs(t, err, ErrUnsupportedType)
	require.ErrorContains(t, err, "IQ2_XXS")
	require.False(t, Type(4).Known())
	require.Equal(t, "type(4)", Type(4).String())
	_, err = NewMatrix(Type(4), 1, 32, make([]byte, 18))
	require.ErrorIs(t, err, ErrUnsupportedType)
}

// TestIntAccuracy bounds every integer product against the f32 product
// over the dequantized weights and unquantized activations: the
// activation quantization costs about 1% RMS (llama.cpp's kernels do the
// same). Random block contents make weights of both signs for every type.
func TestIntAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	const rows, cols, n = 48, 512, 3
	for _, ty := range SupportedTypes() {
		if ty.traits().act == actF32 {
			continue
		}
		w := randMatrix(t, r, ty, rows, cols)
		x := randF32(r, n*cols)
		want := make([]float64, n*rows)
		row := make([]float32, cols)
		for o := 0; o < rows; o++ {
			Dequantize(row, w, o)
			for i := 0; i < n; i++ {
				var s float64
				for j, v := range row {
					s += float64(v) * float64(x[i*cols+j])
				}
				want[i*rows+o] = s
			}
		}
		got := make([]float32, n*rows)
		MatMul(got, x, n, w)
		var sumSq, refSq float64
		for i, v := range got {
			d := float64(v) - want[i]
			sumSq += d * d
			refSq += want[i] * want[i]
		}
		rel := math.Sqrt(sumSq / refSq)
		t.Logf("%v: rms relative error %.3g", ty, rel)
		require.Less(t, rel, 0.02, fmt.Sprint(ty))
	}
}
