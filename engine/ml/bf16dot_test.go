package ml

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// bf16RefProduct is the reference of a whole BF16 product: dotBF16Ref of
// each activation row rounded to bf16 (roundBF16) and each weight row.
func bf16RefProduct(x []float32, n int, w *Matrix) []float32 {
	R, K := w.Rows, w.Cols
	act := make([]byte, 2*K)
	out := make([]float32, n*R)
	for i := 0; i < n; i++ {
		quantizeActBF16Generic(act, x[i*K:(i+1)*K])
		for r := 0; r < R; r++ {
			out[i*R+r] = dotBF16Ref(act, w.Data[r*2*K:(r+1)*2*K], K)
		}
	}
	return out
}

// TestBF16MatMulMatchesRef requires every BF16 product (MatMul, MatMulBatch,
// MatMulEach, MatMulGroup) to give bf16RefProduct's bits at every SIMD
// level, with the AVX512_BF16 kernels and with their emulation
// (bf16Variants), whatever the thread count and the batch size. Shapes
// cover K tails (K%32 != 0, K < 32), weight rows left over from groups of
// four, activation rows left over from groups of four, and several tiles
// per call (K=2061).
func TestBF16MatMulMatchesRef(t *testing.T) {
	defer SetThreads(0)
	saved := simdLevel()
	defer setSIMDLevel(saved)
	type shape struct{ rows, cols int }
	for _, s := range []shape{{7, 20}, {50, 100}, {37, 768}, {23, 2061}, {130, 2048}, {44, 64}, {9, 1}} {
		r := rand.New(rand.NewPCG(7, uint64(s.cols)))
		w := randMatrix(t, r, BF16, s.rows, s.cols)
		for _, n := range []int{1, 3, 4, 9, 16} {
			x := randF32(r, n*s.cols)
			want := bf16RefProduct(x, n, w)
			for _, v := range bf16Variants() {
				for _, lvl := range supportedLevels() {
					setSIMDLevel(lvl)
					v.set()
					for _, threads := range []int{1, 3} {
						SetThreads(threads)
						what := fmt.Sprintf("%dx%d n=%d %s level=%d threads=%d", s.rows, s.cols, n, v.name, lvl, threads)
						got := make([]float32, n*s.rows)
						MatMul(got, x, n, w)
						requireBits(t, want, got, s.rows, "MatMul "+what)
						clear(got)
						MatMulBatch(got, x, n, w)
						requireBits(t, want, got, s.rows, "MatMulBatch "+what)
						clear(got)
						MatMulEach([][]float32{got}, [][]float32{x}, []int{n}, []*Matrix{w})
						requireBits(t, want, got, s.rows, "MatMulEach "+what)
						clear(got)
						MatMulGroup([][]float32{got}, x, n, []*Matrix{w})
						requireBits(t, want, got, s.rows, "MatMulGroup "+what)
					}
					v.restore()
				}
			}
		}
	}
}

// TestBF16Subnormals runs products whose activations, weights, products
// and partial sums are subnormal or near it, with signed zeros, infinities
// and NaNs, through every variant and level against bf16RefProduct (NaN
// for NaN).
func TestBF16Subnormals(t *testing.T) {
	defer SetThreads(0)
	saved := simdLevel()
	defer setSIMDLevel(saved)
	SetThreads(1)
	r := rand.New(rand.NewPCG(3, 4))
	const rows, cols, n = 12, 77, 6
	data := make([]byte, 2*rows*cols)
	for i := 0; i < len(data); i += 2 {
		e := []uint16{0, 1, 2, 60, 66, 127, 254, 255}[r.IntN(8)]
		binary.LittleEndian.PutUint16(data[i:], uint16(r.IntN(2))<<15|e<<7|uint16(r.IntN(128)))
	}
	w, err := NewMatrix(BF16, rows, cols, data)
	require.NoError(t, err)
	x := make([]float32, n*cols)
	for i := range x {
		e := []uint32{0, 1, 2, 60, 66, 127, 254, 255}[r.IntN(8)]
		x[i] = math.Float32frombits(uint32(r.IntN(2))<<31 | e<<23 | r.Uint32()&0x7fffff)
	}
	want := bf16RefProduct(x, n, w)
	for _, v := range bf16Variants() {
		for _, lvl := range supportedLevels() {
			setSIMDLevel(lvl)
			v.set()
			got := make([]float32, n*rows)
			MatMul(got, x, n, w)
			for i := range want {
				if want[i] != want[i] {
					require.True(t, got[i] != got[i], "%s level=%d [%d]: %v, want NaN", v.name, lvl, i, got[i])
					continue
				}
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s level=%d [%d]: %v, want %v", v.name, lvl, i, got[i], want[i])
			}
			v.restore()
		}
	}
}

// TestBF16SubnormalsFinite is TestBF16Subnormals without infinities and
// NaNs, which would hide most outputs, in two mixes: subnormal weights
// against large activations among products near 1 (the weights' flush
// shows in the sum), and activations near the smallest normal against
// weights near 1, whose partial sums go subnormal (each FMA's flush) and
// cancel between lanes (the reduction's flush).
func TestBF16SubnormalsFinite(t *testing.T) {
	defer SetThreads(0)
	saved := simdLevel()
	defer setSIMDLevel(saved)
	SetThreads(1)
	const rows, cols, n = 24, 200, 5
	// Exponent choices of a column's weights and activations.
	type mix struct{ we, xe []uint32 }
	for mi, m := range [][]mix{
		{{[]uint32{0}, []uint32{250, 251}}, {[]uint32{126, 127, 128}, []uint32{126, 127}}},
		{{[]uint32{0, 1, 126, 127, 128}, []uint32{0, 1, 2, 3}}},
	} {
		r := rand.New(rand.NewPCG(5, uint64(mi)))
		kind := make([]mix, cols)
		for k := range kind {
			kind[k] = m[r.IntN(len(m))]
		}
		data := make([]byte, 2*rows*cols)
		for i := 0; i < rows*cols; i++ {
			we := kind[i%cols].we
			e := uint16(we[r.IntN(len(we))])
			binary.LittleEndian.PutUint16(data[2*i:], uint16(r.IntN(2))<<15|e<<7|uint16(r.IntN(128)))
		}
		w, err := NewMatrix(BF16, rows, cols, data)
		require.NoError(t, err)
		x := make([]float32, n*cols)
		for i := range x {
			xe := kind[i%cols].xe
			e := xe[r.IntN(len(xe))]
			x[i] = math.Float32frombits(uint32(r.IntN(2))<<31 | e<<23 | r.Uint32()&0x7fffff)
		}
		want := bf16RefProduct(x, n, w)
		for _, v := range bf16Variants() {
			for _, lvl := range supportedLevels() {
				setSIMDLevel(lvl)
				v.set()
				got := make([]float32, n*rows)
				MatMul(got, x, n, w)
				requireBits(t, want, got, rows, fmt.Sprintf("mix %d %s level=%d", mi, v.name, lvl))
				v.restore()
			}
		}
	}
}

// TestBF16TininessAfterRounding pins the FTZ of an FMA whose exact sum is
// just below 2^-126: lane 0 is 2^-126 after the odd element (1 * 2^-126),
// then the even element adds a product p of 1.5*2^-75 and the row's
// weight. x86 (VDPBF16PS, and FMAs under MXCSR FTZ) flushes a result whose
// rounding to 24 bits with an unbounded exponent is below 2^-126, which
// differs from rounding with gradual underflow and flushing a subnormal:
// 2^-126 - 0.75*2^-150 is flushed, though it rounds to 2^-126 in f32.
func TestBF16TininessAfterRounding(t *testing.T) {
	defer SetThreads(0)
	saved := simdLevel()
	defer setSIMDLevel(saved)
	SetThreads(1)
	// Each row's lane 0 of the whole chunk and lane 1 of the tail chunk
	// (values 34, 35 of 50) compute the case; the output is twice it.
	const cols, n = 50, 4
	cases := []struct {
		w0, w1 uint16
		want   float32
	}{
		{0x9980, 0x0080, 0},                      // p = -0.75*2^-150: flushed
		{0x9900, 0x0080, 0x1p-126},               // p = -0.375*2^-150: 2^-126
		{0x99c0, 0x0080, 0},                      // p = -1.125*2^-150: flushed
		{0x9920, 0x0080, 0x1p-126},               // p = -0.46875*2^-150: 2^-126
		{0x1980, 0x8080, 0},                      // the first, negated
		{0x1900, 0x8080, -0x1p-126},              // the second, negated
		{0x3f80, 0x0080, 1.5*0x1p-75 + 0x1p-126}, // a normal sum
	}
	rows := len(cases)
	data := make([]byte, 2*rows*cols)
	for r, c := range cases {
		for _, off := range []int{0, 34} {
			binary.LittleEndian.PutUint16(data[2*(r*cols+off):], c.w0)
			binary.LittleEndian.PutUint16(data[2*(r*cols+off+1):], c.w1)
		}
	}
	w, err := NewMatrix(BF16, rows, cols, data)
	require.NoError(t, err)
	x := make([]float32, n*cols)
	for i := 0; i < n; i++ {
		for _, off := range []int{0, 34} {
			x[i*cols+off], x[i*cols+off+1] = 1.5*0x1p-75, 1
		}
	}
	want := bf16RefProduct(x, n, w)
	for r, c := range cases {
		require.Equal(t, math.Float32bits(2*c.want), math.Float32bits(want[r]), "reference, case %d", r)
	}
	for _, v := range bf16Variants() {
		for _, lvl := range supportedLevels() {
			setSIMDLevel(lvl)
			v.set()
			got := make([]float32, n*rows)
			MatMul(got, x, n, w)
			requireBits(t, want, got, rows, fmt.Sprintf("%s level=%d", v.name, lvl))
			v.restore()
		}
	}
}

// TestRoundBF16 pins roundBF16 on values whose rounding VCVTNEPS2BF16
// defines: ties to even, subnormals to signed zero, NaN kept quiet,
// overflow to infinity.
func TestRoundBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},
		{0x00000001, 0x0000}, {0x807fffff, 0x8000}, {0x00800000, 0x0080}, {0x7f7fffff, 0x7f80},
		{0x7f800001, 0x7fc0}, {0xffc00001, 0xffc0}, {0xff800000, 0xff80}, {0x80000000, 0x8000},
	} {
		require.Equal(t, c.want, roundBF16(math.Float32frombits(c.in)), "%#08x", c.in)
	}
}

// TestBF16ReductionFlush pins the flush of a subnormal lane sum: lanes 0
// and 8 hold 2^-125 and -1.5*2^-126, normal, whose sum 2^-127 is
// subnormal, so every path must give +0 (the reduction runs with FTZ).
func TestBF16ReductionFlush(t *testing.T) {
	defer SetThreads(0)
	saved := simdLevel()
	defer setSIMDLevel(saved)
	SetThreads(1)
	const rows, cols, n = 5, 32, 5
	data := make([]byte, 2*rows*cols)
	for r := 0; r < rows; r++ {
		binary.LittleEndian.PutUint16(data[2*(r*cols+1):], 0x0100)  // 2^-125, lane 0
		binary.LittleEndian.PutUint16(data[2*(r*cols+17):], 0x80c0) // -1.5*2^-126, lane 8
	}
	w, err := NewMatrix(BF16, rows, cols, data)
	require.NoError(t, err)
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = 1
	}
	require.Equal(t, make([]float32, n*rows), bf16RefProduct(x, n, w))
	for _, v := range bf16Variants() {
		for _, lvl := range supportedLevels() {
			setSIMDLevel(lvl)
			v.set()
			got := make([]float32, n*rows)
			MatMul(got, x, n, w)
			requireBits(t, make([]float32, n*rows), got, rows, fmt.Sprintf("%s level=%d", v.name, lvl))
			v.restore()
		}
	}
}
