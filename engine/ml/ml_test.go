package ml

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if v[i] == 0 {
			v[i] = 0.5
		}
	}
	return v
}

// withGeneric runs f with the SIMD kernels disabled.
func withGeneric(t testing.TB, f func()) {
	if t != nil {
		t.Helper()
	}
	saved := simdLevel()
	setSIMDLevel(levelGeneric)
	defer setSIMDLevel(saved)
	f()
}

func TestQuantizeQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := randF32(r, 96)
	q := QuantizeQ8_0(src)
	require.Len(t, q, 3*34)
	out := make([]float32, 96)
	withGeneric(t, func() { dequantQ8Generic(out, q) })
	for b := 0; b < 3; b++ {
		var amax float64
		for _, v := range src[b*32 : b*32+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for j := 0; j < 32; j++ {
			require.InDelta(t, src[b*32+j], out[b*32+j], amax/127*0.51+amax*1e-3)
		}
	}
	// Exact ggml values on a hand-checked block: max 127 gives d = 1.
	blk := make([]float32, 32)
	for i := range blk {
		blk[i] = float32(i*8 - 127)
	}
	blk[31] = 127
	q = QuantizeQ8_0(blk)
	require.Equal(t, uint16(0x3c00), binary.LittleEndian.Uint16(q))
	require.Equal(t, int8(-127), int8(q[2]))
	require.Equal(t, int8(-119), int8(q[3]))
}

func TestQuantizeQ4_0(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := randF32(r, 64)
	q := QuantizeQ4_0(src)
	require.Len(t, q, 2*18)
	m, err := NewMatrix(Q4_0, 1, 64, q)
	require.NoError(t, err)
	out := make([]float32, 64)
	Dequantize(out, m, 0)
	for b := 0; b < 2; b++ {
		var amax float64
		for _, v := range src[b*32 : b*32+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for j := 0; j < 32; j++ {
			require.InDelta(t, src[b*32+j], out[b*32+j], amax/8*0.51+amax*1e-3, "elem %d", b*32+j)
		}
	}
	// Element layout: low nibbles are 0..15, high nibbles 16..31.
	blk := make([]float32, 32)
	blk[0] = -8 // max magnitude, negative: d = 1
	blk[16] = 7
	blk[1] = 3
	q = QuantizeQ4_0(blk)
	require.Equal(t, uint16(0x3c00), binary.LittleEndian.Uint16(q))
	require.Equal(t, byte(0|15<<4), q[2])
	require.Equal(t, byte(11|8<<4), q[3])
}

// packQ4KScales packs 8 six-bit scales and mins the way ggml's quantizer does.
func packQ4KScales(ls, lm [8]uint8) [12]byte {
	var s [12]byte
	for j := 0; j < 8; j++ {
		if j < 4 {
			s[j] = ls[j]
			s[j+4] = lm[j]
		} else {
			s[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
			s[j-4] |= (ls[j] >> 4) << 6
			s[j] |= (lm[j] >> 4) << 6
		}
	}
	return s
}

func TestDequantQ4K(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const blocks = 3
	data := make([]byte, blocks*144)
	want := make([]float32, blocks*256)
	for b := 0; b < blocks; b++ {
		blk := data[b*144 : (b+1)*144]
		d := F16ToF32(F32ToF16(float32(r.Float64()*0.1 + 0.01)))
		dmin := F16ToF32(F32ToF16(float32(r.Float64()*0.1 + 0.01)))
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(dmin))
		var ls, lm [8]uint8
		for j := range ls {
			ls[j], lm[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
		}
		ls[5], lm[6] = 63, 63
		sc := packQ4KScales(ls, lm)
		copy(blk[4:16], sc[:])
		q := make([]uint8, 256)
		for i := range q {
			q[i] = uint8(r.IntN(16))
		}
		// Sub-block s (32 elements) lives in chunk s/2 of 32 bytes, low
		// nibbles for even s, high for odd.
		for s := 0; s < 8; s++ {
			for l := 0; l < 32; l++ {
				blk[16+(s/2)*32+l] |= q[s*32+l] << (4 * (s % 2))
				want[b*256+s*32+l] = d*float32(ls[s])*float32(q[s*32+l]) - dmin*float32(lm[s])
			}
		}
	}
	m, err := NewMatrix(Q4_K, 1, blocks*256, data)
	require.NoError(t, err)
	got := make([]float32, blocks*256)
	Dequantize(got, m, 0)
	for i := range got {
		require.InDelta(t, want[i], got[i], 1e-5, "elem %d", i)
	}
}

// packQ6K builds one ggml block_q6_K from 256 six-bit values L (0..63,
// the value q+32), 16 int8 scales and the f16 scale d, with the packing of
// ggml's quantize_row_q6_K_ref: per half of 128, ql[l] holds the low
// nibbles of L[l] and L[l+64], ql[l+32] those of L[l+32] and L[l+96], and
// qh[l] the high 2 bits of L[l], L[l+32], L[l+64], L[l+96].
func packQ6K(L *[256]uint8, sc *[16]int8, d uint16) []byte {
	blk := make([]byte, 210)
	ql, qh := blk[:128], blk[128:192]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := L[j+l], L[j+l+32], L[j+l+64], L[j+l+96]
			ql[l] = q1&0xf | (q3&0xf)<<4
			ql[l+32] = q2&0xf | (q4&0xf)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
		ql, qh = ql[64:], qh[32:]
	}
	for i, v := range sc {
		blk[192+i] = byte(v)
	}
	binary.LittleEndian.PutUint16(blk[208:], d)
	return blk
}

func TestDequantQ6K(t *testing.T) {
	require.Equal(t, "Q6_K", Q6_K.String())
	require.Equal(t, 256, Q6_K.BlockSize())
	require.Equal(t, 210, Q6_K.BlockBytes())

	// A hand-checked block: d = 0.5, element e = scale[e/16]*(L[e]-32)*d.
	var L [256]uint8
	var sc [16]int8
	for e := range L {
		L[e] = 32
	}
	L[0], L[1], L[17], L[40], L[64+3], L[96+31], L[128] = 63, 0, 33, 48, 1, 20, 31
	sc[0], sc[1], sc[2], sc[4], sc[7], sc[8] = 2, -3, 5, 127, -128, 1
	blk := packQ6K(&L, &sc, 0x3800) // 0.5
	m, err := NewMatrix(Q6_K, 1, 256, blk)
	require.NoError(t, err)
	got := make([]float32, 256)
	Dequantize(got, m, 0)
	want := make([]float32, 256)
	want[0] = 2 * 31 * 0.5
	want[1] = 2 * -32 * 0.5
	want[17] = -3 * 1 * 0.5
	want[40] = 5 * 16 * 0.5
	want[64+3] = 127 * -31 * 0.5
	want[96+31] = -128 * -12 * 0.5
	want[128] = 1 * -1 * 0.5
	require.Equal(t, want, got)

	// Random blocks against the same formula, rounded as ggml rounds it.
	r := rand.New(rand.NewPCG(23, 24))
	const blocks = 3
	var data []byte
	ref := make([]float32, 0, blocks*256)
	for b := 0; b < blocks; b++ {
		for e := range L {
			L[e] = uint8(r.IntN(64))
		}
		for i := range sc {
			sc[i] = int8(r.Uint32())
		}
		h := F32ToF16(float32(r.Float64()*0.01 + 1e-4))
		data = append(data, packQ6K(&L, &sc, h)...)
		d := F16ToF32(h)
		for e := range L {
			ref = append(ref, float32(d*float32(sc[e/16]))*float32(int(L[e])-32))
		}
	}
	m, err = NewMatrix(Q6_K, 1, blocks*256, data)
	require.NoError(t, err)
	got = make([]float32, blocks*256)
	Dequantize(got, m, 0)
	require.Equal(t, ref, got)
	for _, lvl := range supportedLevels() {
		saved := simdLevel()
		setSIMDLevel(lvl)
		Dequantize(got, m, 0)
		setSIMDLevel(saved)
		require.Equal(t, ref, got, "level %d", lvl)
	}
	_, err = Quantize(Q6_K, 1, 256, make([]float32, 256))
	require.Error(t, err)
	_, err = NewMatrix(Q6_K, 1, 100, make([]byte, 210))
	require.Error(t, err)
}

func TestQuantizeTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	src := randF32(r, 3*64)
	for _, ty := range []Type{F32, F16, BF16, Q8_0, Q4_0} {
		m, err := Quantize(ty, 3, 64, src)
		require.NoError(t, err, "%v", ty)
		row := make([]float32, 64)
		tol := map[Type]float64{F32: 0, F16: 2e-3, BF16: 1.6e-2, Q8_0: 0.03, Q4_0: 0.5}[ty]
		for i := 0; i < 3; i++ {
			Dequantize(row, m, i)
			for j, v := range row {
				require.InDelta(t, src[i*64+j], v, tol*math.Max(1, math.Abs(float64(src[i*64+j]))), "%v", ty)
			}
		}
	}
	_, err := Quantize(Q4_K, 1, 256, make([]float32, 256))
	require.Error(t, err)
	_, err = Quantize(Q8_0, 1, 33, make([]float32, 33))
	require.Error(t, err)
}

// refMatMul is the float64 reference of MatMul over a dequantized matrix.
// Integer products quantize the activations too (see q8.go, qdot.go), so
// for those types the reference uses the activations as quantized;
// TestQ8Accuracy and TestIntAccuracy bound the error that adds against
// f32 activations.
func refMatMul(x []float32, n int, w *Matrix) []float64 {
	x = dequantAct(w.Type.traits().act, x, w.Cols)
	out := make([]float64, n*w.Rows)
	row := make([]float32, w.Cols)
	withGeneric(nil, func() {
		for r := 0; r < w.Rows; r++ {
			Dequantize(row, w, r)
			for i := 0; i < n; i++ {
				var s float64
				for j, v := range row {
					s += float64(v) * float64(x[i*w.Cols+j])
				}
				out[i*w.Rows+r] = s
			}
		}
	})
	return out
}

// dequantAct returns rows of k activations as a product in format f sees
// them (unchanged for actF32).
func dequantAct(f actFormat, x []float32, k int) []float32 {
	switch f {
	case actBF16:
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = BF16ToF32(roundBF16(v))
		}
		return out
	case actQ8:
		return dequantActQ8(x, k)
	case actQ8K:
		out := make([]float32, len(x))
		blk := make([]byte, k/256*q8KActBlock)
		for i := 0; i < len(x)/k; i++ {
			quantizeActQ8K(blk, x[i*k:(i+1)*k])
			for b := 0; b < k/256; b++ {
				dx, _, q := q8KAct(blk[b*q8KActBlock:])
				for j := 0; j < 256; j++ {
					out[i*k+b*256+j] = float32(int8(q[j])) * dx
				}
			}
		}
		return out
	}
	return x
}

// dequantActQ8 returns rows of k activations as the Q8_0 product sees them.
func dequantActQ8(x []float32, k int) []float32 {
	out := make([]float32, len(x))
	blk := make([]byte, k/32*q8ActBlock)
	for i := 0; i < len(x)/k; i++ {
		quantizeActQ8Generic(blk, x[i*k:(i+1)*k])
		for b := 0; b < k/32; b++ {
			ab := blk[b*q8ActBlock:]
			d := math.Float32frombits(binary.LittleEndian.Uint32(ab))
			for j := 0; j < 32; j++ {
				out[i*k+b*32+j] = float32(int8(ab[8+j])) * d
			}
		}
	}
	return out
}

// scaleOffsets are the byte offsets of the f16 scales (d, and dmin or m
// where the type has one) inside one block of each quantized type.
var scaleOffsets = map[Type][]int{
	Q4_0: {0}, Q4_1: {0, 2}, Q5_0: {0}, Q5_1: {0, 2}, Q8_0: {0},
	Q2_K: {80, 82}, Q3_K: {108}, Q4_K: {0, 2}, Q5_K: {0, 2}, Q6_K: {208},
	IQ4_NL: {0}, IQ4_XS: {0},
}

// randBlocks returns nb random blocks of a quantized type: random bits
// everywhere except the f16 scales, which are small finite values.
func randBlocks(r *rand.Rand, ty Type, nb int) []byte {
	bb := ty.BlockBytes()
	data := make([]byte, nb*bb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for b := 0; b < nb; b++ {
		for _, off := range scaleOffsets[ty] {
			binary.LittleEndian.PutUint16(data[b*bb+off:], F32ToF16(float32((r.Float64()-0.3)*0.01)))
		}
		if ty == MXFP4 {
			// E8M0 scales around the f16 range's lower end (2^-24..2^-4,
			// values up to 0.75), where the SIMD kernel's f16 expansion
			// is exact.
			data[b*bb] = byte(104 + r.IntN(21))
		}
	}
	return data
}

// randMatrix is a random rows x cols matrix of type ty: quantized from
// normal values where Quantize supports ty, else random blocks.
func randMatrix(t *testing.T, r *rand.Rand, ty Type, rows, cols int) *Matrix {
	switch ty {
	case F32, F16, BF16, Q8_0, Q4_0:
		m, err := Quantize(ty, rows, cols, randF32(r, rows*cols))
		require.NoError(t, err)
		return m
	}
	m, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
	require.NoError(t, err)
	return m
}

func TestMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	type shape struct{ rows, cols int }
	plain := []shape{{1, 1}, {3, 7}, {4, 16}, {5, 17}, {8, 31}, {13, 33}, {64, 64}, {37, 100}, {130, 288}}
	blocked := []shape{{1, 32}, {3, 64}, {4, 96}, {9, 160}, {64, 64}, {37, 288}, {200, 512}}
	kshape := []shape{{1, 256}, {5, 256}, {12, 512}}
	for _, threads := range []int{1, 2, 3} {
		SetThreads(threads)
		for _, ty := range SupportedTypes() {
			shapes := plain
			switch ty.BlockSize() {
			case 32:
				shapes = blocked
			case 256:
				shapes = kshape
			}
			for _, s := range shapes {
				w := randMatrix(t, r, ty, s.rows, s.cols)
				for _, n := range []int{1, 2, 3, 4, 5, 8, 9} {
					// Unaligned activations: start one float into a buffer.
					xb := randF32(r, n*s.cols+1)
					x := xb[1:]
					want := refMatMul(x, n, w)
					for _, lvl := range supportedLevels() {
						name := fmt.Sprintf("%v %dx%d n=%d level=%d threads=%d", ty, s.rows, s.cols, n, lvl, threads)
						got := make([]float32, n*s.rows+1)[1:]
						saved := simdLevel()
						setSIMDLevel(lvl)
						MatMul(got, x, n, w)
						setSIMDLevel(saved)
						for i, v := range got {
							tol := 1e-4 * (1 + math.Sqrt(float64(s.cols))) * (1 + math.Abs(want[i]))
							require.InDelta(t, want[i], float64(v), tol, "%s at %d", name, i)
						}
					}
				}
			}
		}
	}
	SetThreads(0)
}

func TestMatMulLarge(t *testing.T) {
	// Big enough for the pool, with a row count not divisible by the chunk.
	r := rand.New(rand.NewPCG(13, 14))
	for _, ty := range []Type{F32, F16, Q8_0} {
		w := randMatrix(t, r, ty, 1030, 768)
		for _, n := range []int{1, 6} {
			x := randF32(r, n*768)
			want := refMatMul(x, n, w)
			got := make([]float32, n*1030)
			MatMul(got, x, n, w)
			for i, v := range got {
				require.InDelta(t, want[i], float64(v), 1e-3*(1+math.Abs(want[i])), "%v n=%d at %d", ty, n, i)
			}
		}
	}
}

func TestMatMulBadShape(t *testing.T) {
	w := FromF32(2, 3, make([]float32, 6))
	require.Panics(t, func() { MatMul(make([]float32, 2), make([]float32, 4), 1, w) })
	require.Panics(t, func() { MatMul(make([]float32, 3), make([]float32, 3), 1, w) })
}

func TestVectorKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{0, 1, 3, 15, 16, 17, 31, 63, 64, 65, 100, 255, 256, 257, 1000} {
		ab := randF32(r, n+1)
		bb := randF32(r, n+3)
		a, b := ab[1:], bb[3:] // unaligned starts
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		d2 := append([]float32(nil), a...)
		withGeneric(t, func() { Axpy(d2, 0.75, b) })
		for _, lvl := range supportedLevels() {
			saved := simdLevel()
			setSIMDLevel(lvl)
			got := Dot(a, b)
			d1 := append([]float32(nil), a...)
			Axpy(d1, 0.75, b)
			setSIMDLevel(saved)
			require.InDelta(t, want, float64(got), 1e-4*float64(n+1), "dot n=%d level %d", n, lvl)
			for i := range d1 {
				require.InDelta(t, d2[i], d1[i], 1e-6*(1+math.Abs(float64(d2[i]))))
				require.InDelta(t, float64(a[i])+0.75*float64(b[i]), float64(d1[i]), 1e-5)
			}
		}
		if n > 0 && useSIMD() {
			var s float64
			for _, v := range a {
				s += float64(v)
			}
			require.InDelta(t, s, float64(sumSIMD(a)), 1e-4*float64(n+1))
		}
	}
}

func TestDequantKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, cols := range []int{32, 64, 96, 288, 800} {
		for _, ty := range []Type{F16, Q8_0} {
			w := randMatrix(t, r, ty, 2, cols)
			a := make([]float32, cols)
			b := make([]float32, cols)
			Dequantize(a, w, 1)
			withGeneric(t, func() { Dequantize(b, w, 1) })
			require.Equal(t, b, a, "%v cols %d", ty, cols)
		}
	}
	for _, cols := range []int{1, 7, 17, 33} {
		w := randMatrix(t, r, F16, 1, cols)
		a := make([]float32, cols)
		b := make([]float32, cols)
		Dequantize(a, w, 0)
		withGeneric(t, func() { Dequantize(b, w, 0) })
		require.Equal(t, b, a)
	}
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	x := randF32(r, 77)
	wt := randF32(r, 77)
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/77+1e-5)
	dst := make([]float32, 77)
	RMSNorm(dst, x, wt, 1e-5)
	for i := range dst {
		require.InDelta(t, float64(wt[i])*float64(x[i])*inv, float64(dst[i]), 1e-5)
	}
	RMSNorm(x, x, wt, 1e-5) // in place
	require.Equal(t, dst, x)
}

func TestSiLUMulSoftmax(t *testing.T) {
	g := []float32{-3, -0.5, 0, 0.5, 4}
	u := []float32{1, 2, 3, 4, -1}
	SiLUMul(g, u)
	for i, v := range []float64{-3, -0.5, 0, 0.5, 4} {
		require.InDelta(t, v/(1+math.Exp(-v))*float64(u[i]), float64(g[i]), 1e-6)
	}
	x := []float32{1, 2, 3, 1000}
	Softmax(x)
	require.InDelta(t, 1, float64(x[3]), 1e-6)
	x = []float32{0, float32(math.Log(3))}
	Softmax(x)
	require.InDelta(t, 0.25, float64(x[0]), 1e-6)
	require.InDelta(t, 0.75, float64(x[1]), 1e-6)
}

func TestRoPE(t *testing.T) {
	const headDim, heads = 8, 3
	r := rand.New(rand.NewPCG(21, 22))
	v := randF32(r, headDim*heads)
	orig := append([]float32(nil), v...)
	RoPE(v, headDim, 6, 5, 10000, 1)
	for h := 0; h < heads; h++ {
		for i := 0; i < headDim; i += 2 {
			o0, o1 := float64(orig[h*headDim+i]), float64(orig[h*headDim+i+1])
			w0, w1 := o0, o1
			if i < 6 {
				ang := 5 / math.Pow(10000, float64(i)/headDim)
				w0 = o0*math.Cos(ang) - o1*math.Sin(ang)
				w1 = o0*math.Sin(ang) + o1*math.Cos(ang)
			}
			require.InDelta(t, w0, float64(v[h*headDim+i]), 1e-5)
			require.InDelta(t, w1, float64(v[h*headDim+i+1]), 1e-5)
		}
	}
	// Linear scaling: pos 10 at scale 2 equals pos 5.
	a := append([]float32(nil), orig...)
	b := append([]float32(nil), orig...)
	RoPE(a, headDim, headDim, 10, 10000, 2)
	RoPE(b, headDim, headDim, 5, 10000, 1)
	require.Equal(t, b, a)
	// Position 0 is the identity.
	c := append([]float32(nil), orig...)
	RoPE(c, headDim, headDim, 0, 10000, 1)
	require.Equal(t, orig, c)
}
