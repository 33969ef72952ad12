package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkQuantMatMul measures MatMul for every quantized type on a
// 768x768 matrix (stories110M's attention shape), one thread, for one
// activation row (decode) and 32 (a batch): "int" is the integer product
// MatMul uses, "f32" the decode-then-float path (matmulRows) for
// comparison. Reports multiply-adds per second.
func BenchmarkQuantMatMul(b *testing.B) {
	SetThreads(1)
	defer SetThreads(0)
	const rows, cols = 768, 768
	for _, ty := range SupportedTypes() {
		if ty.BlockSize() == 1 {
			continue
		}
		r := rand.New(rand.NewPCG(uint64(ty), 1))
		w, err := NewMatrix(ty, rows, cols, randBlocks(r, ty, rows*cols/ty.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 32} {
			x := randF32(r, n*cols)
			dst := make([]float32, n*rows)
			rb, _ := ty.RowBytes(cols)
			for _, path := range []string{"int", "f32"} {
				b.Run(fmt.Sprintf("%v/n=%d/%s", ty, n, path), func(b *testing.B) {
					for range b.N {
						if path == "int" {
							MatMul(dst, x, n, w)
						} else {
							matmulRows(dst, x, n, w, rb, 0, rows)
						}
					}
					b.ReportMetric(float64(b.N)*rows*cols*float64(n)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}
