package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMatMulBatch checks MatMulBatch against a float64 product for weight
// types it runs itself (F32, F16) and ones it hands to MatMul (BF16, Q8_0), over shapes with partial tiles in every dimension, at every
// SIMD level and thread count.
func TestMatMulBatch(t *testing.T) {
	defer SetThreads(0)
	saved := simdLevel()
	defer setSIMDLevel(saved)
	type shape struct{ n, rows, cols int }
	shapes := []shape{{1, 1, 1}, {1, 12, 5}, {3, 7, 3}, {31, 13, 17}, {33, 24, 64}, {70, 25, 100}, {130, 48, 160}}
	for _, ty := range []Type{F32, F16, BF16, Q8_0} {
		for _, s := range shapes {
			if s.cols%ty.BlockSize() != 0 {
				s.cols = ty.BlockSize()
			}
			r := rand.New(rand.NewPCG(uint64(ty), uint64(s.n*1000+s.rows)))
			w := randMatrix(t, r, ty, s.rows, s.cols)
			x := randF32(r, s.n*s.cols)
			want := make([]float64, s.n*s.rows)
			row := make([]float32, s.cols)
			xr := x
			if ty == BF16 {
				xr = dequantAct(actBF16, x, s.cols) // llama.cpp's bf16 activations
			}
			for j := range s.rows {
				Dequantize(row, w, j)
				for i := range s.n {
					var sum float64
					for k, v := range row {
						sum += float64(v) * float64(xr[i*s.cols+k])
					}
					want[i*s.rows+j] = sum
				}
			}
			for _, lvl := range supportedLevels() {
				setSIMDLevel(lvl)
				for _, threads := range []int{1, 3} {
					SetThreads(threads)
					got := make([]float32, s.n*s.rows)
					MatMulBatch(got, x, s.n, w)
					tol := 1e-5 * math.Sqrt(float64(s.cols))
					switch ty {
					case Q8_0:
						tol = 0.05 * math.Sqrt(float64(s.cols)) // quantized activations
					}
					for i, v := range got {
						require.InDelta(t, want[i], float64(v), tol, "%v n=%d %dx%d level=%d threads=%d output %d", ty, s.n, s.rows, s.cols, lvl, threads, i)
					}
				}
			}
		}
	}
}

// TestMatMulBatchInvarianceBatch requires MatMulBatch's output for a row to
// be bitwise identical whatever the batch size, the row's position and
// the thread count (the embeddings' guarantee under concurrency). The
// full batch packs the weights, a row alone or a window of 40 packs the
// activations: the two layouts must agree bit for bit.
func TestMatMulBatchInvarianceBatch(t *testing.T) {
	defer SetThreads(0)
	const n = 150
	require.GreaterOrEqual(t, n, bcastPackWeights)
	for _, ty := range []Type{F32, F16} {
		for _, s := range []struct{ rows, cols int }{{50, 100}, {96, 768}} {
			r := rand.New(rand.NewPCG(uint64(ty), uint64(s.rows)))
			w := randMatrix(t, r, ty, s.rows, s.cols)
			x := randF32(r, n*s.cols)
			SetThreads(1)
			ref := make([]float32, n*s.rows)
			MatMulBatch(ref, x, n, w)
			for _, threads := range []int{2, 3} {
				SetThreads(threads)
				full := make([]float32, n*s.rows)
				MatMulBatch(full, x, n, w)
				requireBits(t, ref, full, s.rows, fmt.Sprintf("%v %dx%d threads=%d", ty, s.rows, s.cols, threads))
			}
			// Each row alone, and a window of rows at another offset.
			one := make([]float32, s.rows)
			for i := range n {
				MatMulBatch(one, x[i*s.cols:(i+1)*s.cols], 1, w)
				requireBits(t, ref[i*s.rows:(i+1)*s.rows], one, s.rows, fmt.Sprintf("%v %dx%d row %d alone", ty, s.rows, s.cols, i))
			}
			win := make([]float32, 40*s.rows)
			MatMulBatch(win, x[7*s.cols:47*s.cols], 40, w)
			requireBits(t, ref[7*s.rows:47*s.rows], win, s.rows, fmt.Sprintf("%v %dx%d rows 7-46", ty, s.rows, s.cols))
		}
	}
}
