package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKQuantFewRowsMatchGeneric: a product of 2 to 9 activation rows (a
// speculative verify step), computed chunk by chunk through the one-row
// kernels, gives the reference dot's bits for every type of matmulKSIMD,
// over shapes of several chunks whose row count is not a multiple of 8,
// with one and two threads and at every SIMD level.
func TestKQuantFewRowsMatchGeneric(t *testing.T) {
	defer SetThreads(0)
	r := rand.New(rand.NewPCG(51, 52))
	shapes := []struct{ rows, cols int }{{3, 256}, {13, 512}, {203, 2048}, {130, 4096}}
	for _, ty := range []Type{Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
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
				for _, threads := range []int{1, 2} {
					SetThreads(threads)
					for _, lvl := range supportedLevels() {
						saved := simdLevel()
						setSIMDLevel(lvl)
						got := make([]float32, n*s.rows)
						MatMul(got, x, n, w)
						setSIMDLevel(saved)
						requireBits(t, want, got, s.rows, fmt.Sprintf("%v %dx%d n=%d threads=%d level=%d", ty, s.rows, s.cols, n, threads, lvl))
					}
				}
			}
		}
	}
}
