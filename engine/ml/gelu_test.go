package ml

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// GELUTanhSlice agrees with the float64 GELUTanh within a few ulps (1e-6
// relative, or 1e-7 absolute near zero) over the range that matters, and
// saturates to 0 and x at the ends.
func TestGELUTanhSlice(t *testing.T) {
	var xs []float32
	for v := -12.0; v <= 12; v += 0.001 {
		xs = append(xs, float32(v))
	}
	xs = append(xs, -100, 100, 0, float32(math.Copysign(0, -1)))
	got := append([]float32(nil), xs...)
	GELUTanhSlice(got)
	for i, x := range xs {
		want := float64(GELUTanh(x))
		require.InDelta(t, want, float64(got[i]), math.Max(1e-7, 1e-6*math.Abs(want)), "x = %g", x)
	}
}
