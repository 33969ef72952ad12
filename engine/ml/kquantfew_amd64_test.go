package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// BenchmarkKQuantFewRows: the time of a product of n = 2..8 activation
// rows against one row (cost_vs_1) on a matrix larger than the L3 cache
// (32768x2048, the rows of a 1B model's layer and more), with the chunked
// one-row path ("rows") and without it ("tiles": expanded tiles from 4
// rows, one pass per row below), each timed right after a one-row
// product; the medians of the
// per-iteration ratios are reported. Times are the CPU time of the one
// thread that computes (one thread, locked), not wall time: on a shared,
// oversubscribed machine wall time mostly measures the other processes,
// while CPU time still counts the stalls on memory. A speculative verify step of k drafts is n = k+1;
// cost_vs_1 near 1 means it costs about one decode step.
func BenchmarkKQuantFewRows(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	const rows, cols = 32768, 2048
	saved := kqFewRows
	defer func() { kqFewRows = saved }()
	for _, ty := range []Type{Q4_K, Q6_K} {
		r := rand.New(rand.NewPCG(uint64(ty), 7))
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		x := randF32(r, 8*cols)
		dst := make([]float32, 8*rows)
		for _, n := range []int{2, 3, 4, 5, 8} {
			b.Run(fmt.Sprintf("%v/n=%d", ty, n), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				variants := []struct {
					name string
					few  int
				}{{"rows", 8}, {"tiles", 1}}
				ratios := make([][]float64, len(variants))
				var oneT float64
				timeIt := func(few, n int) float64 {
					kqFewRows = few
					start := threadCPU()
					MatMul(dst[:n*rows], x[:n*cols], n, w)
					return threadCPU() - start
				}
				for range b.N {
					// The plain step between the variants: each ratio is
					// to a one-row product timed next to it.
					for k, v := range variants {
						one := timeIt(saved, 1)
						oneT += one
						ratios[k] = append(ratios[k], timeIt(v.few, n)/one)
					}
				}
				b.ReportMetric(oneT/float64(b.N*len(variants))*1000, "one_cpu_ms")
				for k, v := range variants {
					slices.Sort(ratios[k])
					b.ReportMetric(ratios[k][len(ratios[k])/2], v.name+"_cost_vs_1")
				}
			})
		}
	}
}
