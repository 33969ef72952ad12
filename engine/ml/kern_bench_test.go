package ml

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkKernelL2 times single-threaded n=1 products on one cache-resident
// 768x768 matrix: the kernels' compute speed without DRAM.
func BenchmarkKernelL2(b *testing.B) {
	for _, t := range []Type{F32, Q8_0, F16} {
		b.Run(t.String(), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			m, _ := Quantize(t, 256, 768, randF32(r, 256*768))
			x := randF32(r, 768)
			dst := make([]float32, 256)
			SetThreads(1)
			defer SetThreads(0)
			b.SetBytes(int64(len(m.Data)))
			for range b.N {
				MatMul(dst, x, 1, m)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(256*768/32), "ns/32elem")
		})
	}
}
