//go:build amd64 && !purego

package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFewGroups: the passes of matmulKFew cover the n activation rows in
// the fewest groups the four-row kernels allow, sizes differing by at
// most one, larger first.
func TestFewGroups(t *testing.T) {
	cases := []struct {
		n    int
		want []int
	}{
		{1, []int{1}}, {2, []int{2}}, {4, []int{4}}, {5, []int{3, 2}},
		{6, []int{3, 3}}, {7, []int{4, 3}}, {8, []int{4, 4}}, {9, []int{3, 3, 3}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, fewGroups(c.n, nil), "n=%d", c.n)
	}
}

// TestKQuantFewRowsMatchGeneric: a product of 2 to 9 activation rows (a
// speculative verify step), computed chunk by chunk through the one-row
// kernels, rowTimes4 or the few-row kernels (matmulKFew, Q4_K and Q6_K
// with VNNI; forced on the other types it falls back to the choice),
// gives the reference dot's bits (so do Q8_0's tiles, 3 and 7 rows
// padded to 4 or 8: q8PadRows) for every type of
// matmulKSIMD on every path of fewPath, over shapes of several chunks
// whose row count is not a multiple of 8, with one and two threads and at
// every SIMD level.
func TestKQuantFewRowsMatchGeneric(t *testing.T) {
	defer SetThreads(0)
	defer func() { kqFewPath = fewAuto }()
	r := rand.New(rand.NewPCG(51, 52))
	shapes := []struct{ rows, cols int }{{3, 256}, {13, 512}, {203, 2048}, {130, 4096}}
	for _, ty := range []Type{Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0} {
		tr := ty.traits()
		for _, s := range shapes {
			w := randMatrix(t, r, ty, s.rows, s.cols)
			rb, _ := ty.RowBytes(s.cols)
			as := s.cols / tr.act.blockSize() * tr.act.blockBytes()
			for n := 2; n <= 9; n++ {
				x := randF32(r, n*s.cols)
				act := make([]byte, n*as)
				for i := range n {
					quantizeActGeneric(tr.act, act[i*as:(i+1)*as], x[i*s.cols:(i+1)*s.cols])
				}
				want := make([]float32, n*s.rows)
				matmulIntGeneric(want, act, n, w, rb, 0, s.rows)
				for _, path := range []int{fewAuto, fewOld, fewChunked, fewRow4, fewFused} {
					kqFewPath = path
					for _, threads := range []int{1, 2} {
						SetThreads(threads)
						for _, lvl := range supportedLevels() {
							saved := simdLevel()
							setSIMDLevel(lvl)
							got := make([]float32, n*s.rows)
							MatMul(got, x, n, w)
							setSIMDLevel(saved)
							requireBits(t, want, got, s.rows, fmt.Sprintf("%v %dx%d n=%d path=%d threads=%d level=%d", ty, s.rows, s.cols, n, path, threads, lvl))
						}
					}
				}
			}
		}
	}
}

// BenchmarkKQuantFewRows: the cost of a product of n = 2..8 activation
// rows in one-row products (cost_vs_1) on matrices larger than the L3
// cache (32768x2048: 38 MB in Q4_K, 55 MB in Q6_K, 71 MB in Q8_0), on each path of
// fewPath: "new" (the choice), "old" (a pass per row below 4 rows, tiles
// from 4), "chunked", "fused" (matmulKFew) and "row4" (from 4 rows). A
// speculative verify step of k drafts is n = k+1; cost_vs_1 near 1 would
// be one decode step's price. Each product is timed right after a one-row product and the
// medians of the per-iteration ratios are reported; times are the CPU
// time of the one computing thread (locked), not wall time: on a shared,
// oversubscribed machine wall time mostly measures the other processes,
// while CPU time still counts the stalls on memory.
func BenchmarkKQuantFewRows(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	const rows, cols = 32768, 2048
	defer func() { kqFewPath = fewAuto }()
	defer func() { q8FewPad = true }()
	for _, ty := range []Type{Q4_K, Q6_K, Q8_0} {
		r := rand.New(rand.NewPCG(uint64(ty), 7))
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		x := randF32(r, 8*cols)
		dst := make([]float32, 8*rows)
		for _, n := range []int{2, 3, 4, 5, 6, 7, 8} {
			b.Run(fmt.Sprintf("%v/n=%d", ty, n), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				type variant struct {
					name string
					path int
				}
				variants := []variant{{"new", fewAuto}, {"old", fewOld}, {"chunked", fewChunked}, {"fused", fewFused}}
				if ty == Q8_0 {
					// Its tiles, with (new) and without (old) q8PadRows.
					variants = variants[:2]
				} else if n >= 4 {
					variants = append(variants, variant{"row4", fewRow4})
				}
				ratios := make([][]float64, len(variants))
				timeIt := func(path, n int) float64 {
					kqFewPath = path
					q8FewPad = path != fewOld
					start := threadCPU()
					MatMul(dst[:n*rows], x[:n*cols], n, w)
					return threadCPU() - start
				}
				for range b.N {
					for k, v := range variants {
						one := timeIt(fewAuto, 1)
						ratios[k] = append(ratios[k], timeIt(v.path, n)/one)
					}
				}
				for k, v := range variants {
					slices.Sort(ratios[k])
					b.ReportMetric(ratios[k][len(ratios[k])/2], v.name+"_cost_vs_1")
				}
			})
		}
	}
}
