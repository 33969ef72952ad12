package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestF16MatMulMatchesF32 requires an F16 product to equal, bit for bit,
// the F32 product over the same (exactly decoded) weights at every SIMD
// level, thread count and batch size: the half-width kernels (the in-place
// f16 GEMM with AVX-512, the decoded tiles otherwise, the matvecs) must
// keep the F32 kernels' arithmetic. (BF16 products have their own,
// llama.cpp's: TestBF16MatMulMatchesRef.) Shapes
// cover K tails (K%16 != 0), weight rows left over from groups of four
// (and of eight, for the one-row matvecs), activation rows left over from
// groups of four, and several tiles per thread (K=2061: four rows per
// tile).
func TestF16MatMulMatchesF32(t *testing.T) {
	defer SetThreads(0)
	type shape struct{ rows, cols int }
	for _, ty := range []Type{F16} {
		t.Run(ty.String(), func(t *testing.T) {
			for _, s := range []shape{{7, 20}, {50, 100}, {37, 768}, {23, 2061}, {130, 2048}, {44, 64}} {
				r := rand.New(rand.NewPCG(7, uint64(s.cols)))
				wh := randMatrix(t, r, ty, s.rows, s.cols)
				dec := make([]float32, s.rows*s.cols)
				for i := 0; i < s.rows; i++ {
					Dequantize(dec[i*s.cols:(i+1)*s.cols], wh, i)
				}
				w32, err := Quantize(F32, s.rows, s.cols, dec)
				require.NoError(t, err)
				for _, lvl := range supportedLevels() {
					saved := simdLevel()
					setSIMDLevel(lvl)
					for _, threads := range []int{1, 2, 3} {
						SetThreads(threads)
						for _, n := range []int{1, 3, 4, 9, 16} {
							x := randF32(r, n*s.cols)
							want := make([]float32, n*s.rows)
							got := make([]float32, n*s.rows)
							MatMul(want, x, n, w32)
							MatMul(got, x, n, wh)
							requireBits(t, want, got, s.rows, fmt.Sprintf("%v %dx%d level=%d threads=%d n=%d", ty, s.rows, s.cols, lvl, threads, n))
						}
					}
					setSIMDLevel(saved)
				}
			}
		})
	}
}
