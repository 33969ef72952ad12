package ml

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkIntLevels768 is BenchmarkKQuantLevels on a 768x768 matrix
// (stories110M's attention projections) with the generic level too, for
// the types whose kernels came last and their nearest relatives. One
// thread; one activation row and 32. Reports multiply-adds per second
// (cpu-GMAC/s: per CPU second of this thread, steadier on a shared
// machine).
func BenchmarkIntLevels768(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	const rows, cols = 768, 768
	names := []string{levelGeneric: "generic", levelAVX2: "avx2", levelAVX512: "avx512"}
	for _, ty := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q4_K} {
		r := rand.New(rand.NewPCG(uint64(ty), 3))
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 32} {
			x := randF32(r, n*cols)
			dst := make([]float32, n*rows)
			for _, lvl := range supportedLevels() {
				b.Run(fmt.Sprintf("%v/n=%d/%s", ty, n, names[lvl]), func(b *testing.B) {
					saved := simdLevel()
					setSIMDLevel(lvl)
					defer setSIMDLevel(saved)
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					cpu0 := threadCPU()
					for range b.N {
						MatMul(dst, x, n, w)
					}
					macs := float64(b.N) * rows * cols * float64(n)
					b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
					b.ReportMetric(macs/(threadCPU()-cpu0)/1e9, "cpu-GMAC/s")
				})
			}
		}
	}
}
