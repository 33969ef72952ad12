package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMatMulGroupMatchesMatMul requires a grouped product to give, bit for
// bit, what separate MatMul calls give, for groups of one weight type and
// mixed groups (several activation formats), every SIMD level, thread
// count and a few batch sizes; row counts that are not multiples of the
// kernels' 4- and 16-row groups cover their leftover paths.
func TestMatMulGroupMatchesMatMul(t *testing.T) {
	defer SetThreads(0)
	const K = 512
	groups := [][]Type{
		{Q4_0, Q4_0, Q4_0},
		{F16, F16},
		{Q4_K, Q4_K, Q6_K},
		{Q4_0, Q6_K, F16, Q8_0, F32},
	}
	rowsOf := []int{768, 77, 130, 37, 256}
	for gi, g := range groups {
		r := rand.New(rand.NewPCG(uint64(gi), 9))
		ws := make([]*Matrix, len(g))
		for j, ty := range g {
			ws[j] = randMatrix(t, r, ty, rowsOf[j], K)
		}
		for _, lvl := range supportedLevels() {
			saved := simdLevel()
			setSIMDLevel(lvl)
			for _, threads := range []int{1, 2, 3} {
				SetThreads(threads)
				for _, n := range []int{1, 3, 9} {
					x := randF32(r, n*K)
					dsts := make([][]float32, len(ws))
					for j, w := range ws {
						dsts[j] = make([]float32, n*w.Rows)
					}
					MatMulGroup(dsts, x, n, ws)
					for j, w := range ws {
						want := make([]float32, n*w.Rows)
						MatMul(want, x, n, w)
						requireBits(t, want, dsts[j], w.Rows, fmt.Sprintf("group %v matrix %d (%v) level=%d threads=%d n=%d", g, j, w.Type, lvl, threads, n))
					}
				}
			}
			setSIMDLevel(saved)
		}
	}
	bad, err := Quantize(F32, 4, K, make([]float32, 4*K))
	require.NoError(t, err)
	require.Panics(t, func() { MatMulGroup([][]float32{make([]float32, 3)}, make([]float32, K), 1, []*Matrix{bad}) })
}
