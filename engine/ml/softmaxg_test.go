package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSoftmaxStrided requires SoftmaxStrided to give each row Softmax's
// bits at every SIMD level, for row counts with and without leftovers
// after the groups of four, and to leave the gaps between rows alone.
func TestSoftmaxStrided(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, lvl := range supportedLevels() {
		saved := simdLevel()
		setSIMDLevel(lvl)
		for _, g := range []int{1, 3, 4, 9} {
			for _, n := range []int{1, 17, 333} {
				stride := n + 5
				x := make([]float32, g*stride)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 5)
				}
				x[0] = float32(math.Inf(-1))
				want := append([]float32(nil), x...)
				for j := range g {
					Softmax(want[j*stride : j*stride+n])
				}
				SoftmaxStrided(x, stride, g, n)
				requireBits(t, want, x, g, fmt.Sprintf("level=%d g=%d n=%d", lvl, g, n))
			}
		}
		setSIMDLevel(saved)
	}
	require.Panics(t, func() { SoftmaxStrided(make([]float32, 10), 4, 3, 5) })
	require.Panics(t, func() { SoftmaxStrided(make([]float32, 10), 4, 3, 4) })
}
