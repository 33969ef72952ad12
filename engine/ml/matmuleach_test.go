package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMatMulEachMatchesMatMul requires the products of MatMulEach (each
// with its own activation rows, as the experts of an MoE layer) to be, bit
// for bit, those of separate MatMul calls, for mixed weight types, every
// SIMD level and thread count, and row counts per product from 0 up.
func TestMatMulEachMatchesMatMul(t *testing.T) {
	defer SetThreads(0)
	const K = 512
	types := []Type{Q4_K, Q8_0, F32, Q6_K, Q4_0, F16, MXFP4}
	rows := []int{768, 77, 130, 256, 37, 64, 300}
	r := rand.New(rand.NewPCG(5, 6))
	ws := make([]*Matrix, len(types))
	for j, ty := range types {
		ws[j] = randMatrix(t, r, ty, rows[j], K)
	}
	// In the last two, Q6_K shares Q4_K's activation slice (both Q8_K)
	// and Q4_0 Q8_0's (both Q8_0), as an expert's gate and up do: each
	// slice is quantized once per format.
	for ci, ns := range [][]int{{1, 1, 1, 1, 1, 1, 1}, {3, 0, 9, 1, 17, 2, 1}, {40, 40, 40, 40, 40, 40, 3}, {1, 1, 1, 1, 1, 1, 1}, {5, 7, 2, 5, 7, 9, 2}} {
		xs := make([][]float32, len(ws))
		for j := range ws {
			xs[j] = randF32(r, ns[j]*K)
		}
		if ci >= 3 {
			xs[3], xs[4] = xs[0], xs[1]
		}
		for _, lvl := range supportedLevels() {
			saved := simdLevel()
			setSIMDLevel(lvl)
			for _, threads := range []int{1, 2, 3} {
				SetThreads(threads)
				dsts := make([][]float32, len(ws))
				for j, w := range ws {
					dsts[j] = make([]float32, ns[j]*w.Rows)
				}
				MatMulEach(dsts, xs, ns, ws)
				for j, w := range ws {
					want := make([]float32, ns[j]*w.Rows)
					MatMul(want, xs[j], ns[j], w)
					requireBits(t, want, dsts[j], w.Rows, fmt.Sprintf("matrix %d (%v) ns=%v level=%d threads=%d", j, w.Type, ns, lvl, threads))
				}
			}
			setSIMDLevel(saved)
		}
	}
	require.Panics(t, func() { MatMulEach([][]float32{make([]float32, 3)}, [][]float32{make([]float32, K)}, []int{1}, ws[:1]) })
	require.Panics(t, func() { MatMulEach(nil, nil, []int{1}, ws[:1]) })
}

func TestSoftmaxSink(t *testing.T) {
	for _, tc := range []struct {
		x    []float32
		sink float32
	}{
		{[]float32{1, 2, 3}, 0}, {[]float32{-5, 0.5}, 4}, {[]float32{0}, -100}, {[]float32{80, 81}, 90},
	} {
		x := append([]float32(nil), tc.x...)
		SoftmaxSink(x, tc.sink)
		den := math.Exp(float64(tc.sink))
		for _, v := range tc.x {
			den += math.Exp(float64(v))
		}
		sum := 0.0
		for i, v := range tc.x {
			want := math.Exp(float64(v)) / den
			require.InDelta(t, want, x[i], 1e-6*(1+want), "%v sink %g", tc.x, tc.sink)
			sum += float64(x[i])
		}
		require.InDelta(t, 1-math.Exp(float64(tc.sink))/den, sum, 1e-6, "the sink takes its share")
	}
}

func TestSwiGLUOAIMul(t *testing.T) {
	g := []float32{-3, 0, 1, 7, 9}
	u := []float32{-9, 0.5, -1, 2, 100}
	want := make([]float64, len(g))
	for i := range g {
		x := math.Min(float64(g[i]), 7)
		y := math.Max(-7, math.Min(float64(u[i]), 7))
		want[i] = x / (1 + math.Exp(-1.702*x)) * (y + 1)
	}
	SwiGLUOAIMul(g, u, 1.702, 7)
	for i := range g {
		require.InDelta(t, want[i], g[i], 1e-5*(1+math.Abs(want[i])), "element %d", i)
	}
	require.Panics(t, func() { SwiGLUOAIMul(g, u[:2], 1.702, 7) })

	// The blocked vector exp gives the scalar expf's bits for every
	// element, whatever the length (blocks of 256, vector tails).
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 15, 16, 17, 255, 256, 257, 2880} {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i], u[i] = float32(r.NormFloat64()*6), float32(r.NormFloat64()*6)
		}
		want := make([]float32, n)
		for i := range want {
			x := min(g[i], 7)
			y := max(-7, min(u[i], 7))
			want[i] = x / (1 + expf(-1.702*x)) * (y + 1)
		}
		SwiGLUOAIMul(g, u, 1.702, 7)
		require.Equal(t, want, g, "n=%d", n)
	}
}
