package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkMatMulTokenBlock measures large products (Llama-3.2-1B's FFN
// down projection, 2048x8192) for many activation rows with token blocking
// off and on, in one process: tokens/s (activation rows per second) and
// GMAC/s.
//
//	go test ./engine/ml -run '^$' -bench MatMulTokenBlock -benchtime 2x
func BenchmarkMatMulTokenBlock(b *testing.B) {
	const rows, cols = 2048, 8192
	for _, ty := range []Type{Q4_K, Q8_0, F16} {
		r := rand.New(rand.NewPCG(uint64(ty), 7))
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{512, 2048} {
			x := randF32(r, n*cols)
			dst := make([]float32, n*rows)
			for _, blocked := range []bool{false, true} {
				b.Run(fmt.Sprintf("%v/n=%d/blocked=%v", ty, n, blocked), func(b *testing.B) {
					saved := tokenBlockBytes
					if !blocked {
						tokenBlockBytes = 0
					}
					defer func() { tokenBlockBytes = saved }()
					for range b.N {
						MatMul(dst, x, n, w)
					}
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(b.N*n)/sec, "tokens/s")
					b.ReportMetric(float64(b.N)*rows*cols*float64(n)/sec/1e9, "GMAC/s")
				})
			}
		}
	}
}
