package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// softmaxRef is Softmax's reference arithmetic written out in scalar Go.
func softmaxRef(x []float32) {
	m := maxOfGeneric(x)
	expShiftGeneric(x, m)
	var sum float32
	for _, e := range x {
		sum += e
	}
	divByGeneric(x, sum)
}

// TestSoftmaxLevels requires Softmax (vector max and division) to equal
// the scalar reference bit for bit at every SIMD level, for lengths
// around the 16- and 32-lane steps, the largest value anywhere (tail
// included), ties, signed zeros and -Inf entries.
func TestSoftmaxLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, lvl := range supportedLevels() {
		saved := simdLevel()
		setSIMDLevel(lvl)
		for n := 1; n <= 70; n++ {
			for trial := range 6 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 4)
				}
				switch trial {
				case 1:
					x[n-1] = 50 // the max in the tail
				case 2:
					x[r.IntN(n)] = 50
					x[r.IntN(n)] = 50
				case 3:
					for i := range x {
						x[i] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
					}
				case 4:
					x[r.IntN(n)] = float32(math.Inf(-1))
				case 5:
					for i := range x {
						x[i] = -x[i] * x[i] // all negative
					}
				}
				want := append([]float32(nil), x...)
				softmaxRef(want)
				Softmax(x)
				requireBits(t, want, x, n, fmt.Sprintf("level=%d n=%d trial=%d", lvl, n, trial))
			}
		}
		setSIMDLevel(saved)
	}
	require.Equal(t, float32(3), maxOf([]float32{-1, 3, 2}))
}

// TestAddLevels requires Add to equal the scalar loop bit for bit at every
// SIMD level, for lengths around the 16- and 32-lane steps.
func TestAddLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, lvl := range supportedLevels() {
		saved := simdLevel()
		setSIMDLevel(lvl)
		for n := 0; n <= 70; n++ {
			dst, x := randF32(r, n), randF32(r, n)
			want := append([]float32(nil), dst...)
			addGeneric(want, x)
			Add(dst, x)
			requireBits(t, want, dst, max(n, 1), fmt.Sprintf("level=%d n=%d", lvl, n))
		}
		setSIMDLevel(saved)
	}
}
