package ml

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExpf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(x float32) {
		want := math.Exp(float64(x))
		got := float64(expf(x))
		if want < 1e-37 { // below float32's normal range: only require tininess
			require.Less(t, got, 1e-37, "x=%g", x)
			return
		}
		if math.IsInf(want, 1) || want > math.MaxFloat32 {
			require.True(t, math.IsInf(got, 1) || got > 3.3e38, "x=%g got %g", x, got)
			return
		}
		require.InEpsilon(t, want, got, 4e-7, "x=%g", x)
	}
	for range 200000 {
		check(rng.Float32()*180 - 90)
	}
	for _, x := range []float32{0, -0, 1, -1, 1e-8, -1e-8, 0.34657, -0.34657, 88.7, -87.3, 88.72, -87.33} {
		check(x)
	}
	require.True(t, math.IsInf(float64(expf(100)), 1))
	require.Zero(t, expf(-100))
	require.True(t, math.IsNaN(float64(expf(float32(math.NaN())))))
}
