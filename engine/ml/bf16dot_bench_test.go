package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkBF16Levels times a BF16 product at every SIMD level (level 0:
// the Go emulation), one activation row and a prefill-shaped batch.
func BenchmarkBF16Levels(b *testing.B) {
	saved := simdLevel()
	defer setSIMDLevel(saved)
	const rows, cols = 512, 768
	r := rand.New(rand.NewPCG(1, 2))
	m, err := Quantize(BF16, rows, cols, randF32(r, rows*cols))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 32} {
		x := randF32(r, n*cols)
		dst := make([]float32, n*rows)
		for _, lvl := range supportedLevels() {
			b.Run(fmt.Sprintf("n=%d/level=%d", n, lvl), func(b *testing.B) {
				setSIMDLevel(lvl)
				kernelBench(b, 2*rows*cols*float64(n)/1e9, "GFLOP/s", func() { MatMul(dst, x, n, m) })
			})
		}
	}
}
