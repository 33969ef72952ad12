package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkMatMulBatch compares MatMulBatch with MatMul on one thread for
// BERT-base's products over an encoder step of 4096 tokens (32 x 128):
//
//	go test ./engine/ml -run '^$' -bench MatMulBatch -benchtime 3x
func BenchmarkMatMulBatch(b *testing.B) {
	defer SetThreads(0)
	SetThreads(1)
	const n = 4096
	for _, s := range []struct{ rows, cols int }{{768, 768}, {3072, 768}, {768, 3072}} {
		r := rand.New(rand.NewPCG(1, 2))
		w := FromF32(s.rows, s.cols, randF32(r, s.rows*s.cols))
		x := randF32(r, n*s.cols)
		dst := make([]float32, n*s.rows)
		for _, f := range []struct {
			name string
			mul  func(dst, x []float32, n int, w *Matrix)
		}{{"MatMul", MatMul}, {"MatMulBatch", MatMulBatch}} {
			b.Run(fmt.Sprintf("%s/%dx%d", f.name, s.rows, s.cols), func(b *testing.B) {
				cpu0 := processCPU()
				for b.Loop() {
					f.mul(dst, x, n, w)
				}
				flop := 2 * float64(n*s.rows*s.cols) * float64(b.N)
				b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				// Per CPU second: on a shared machine the wall-clock rate
				// falls with the load, this one much less.
				b.ReportMetric(flop/(processCPU()-cpu0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}
