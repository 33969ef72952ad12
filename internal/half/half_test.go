package half

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestF16Conversion(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f {
			require.True(t, F16ToF32(F32ToF16(f)) != F16ToF32(F32ToF16(f)), "NaN %#x", h)
			continue
		}
		require.Equal(t, uint16(h), F32ToF16(f), "round trip %#x (%g)", h, f)
	}
	require.Equal(t, float32(1), F16ToF32(0x3c00))
	require.Equal(t, float32(-2), F16ToF32(0xc000))
	require.Equal(t, float32(65504), F16ToF32(0x7bff))
	require.Equal(t, float32(math.Ldexp(1, -24)), F16ToF32(1))
	require.Equal(t, uint16(0x7c00), F32ToF16(1e6))
	require.Equal(t, uint16(0), F32ToF16(1e-9))
	// Ties round to even: 1 + 2^-11 is halfway between 1 and 1+2^-10.
	require.Equal(t, uint16(0x3c00), F32ToF16(1+1.0/2048))
	require.Equal(t, uint16(0x3c02), F32ToF16(1+3.0/2048))
	// Compare with float64 rounding on random normal-range values.
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		f := float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(30)-15)))
		h := F32ToF16(f)
		g := F16ToF32(h)
		// g must be the nearest f16: neighbours are no closer.
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 {
				continue
			}
			require.LessOrEqual(t, math.Abs(float64(g)-float64(f)), math.Abs(float64(F16ToF32(nb))-float64(f)), "%g -> %#x", f, h)
		}
	}
}

func TestBF16Conversion(t *testing.T) {
	require.Equal(t, float32(1), BF16ToF32(0x3f80))
	require.Equal(t, uint16(0x3f80), F32ToBF16(1))
	require.Equal(t, uint16(0x3f80), F32ToBF16(math.Float32frombits(0x3f808000))) // tie to even
	require.Equal(t, uint16(0x3f82), F32ToBF16(math.Float32frombits(0x3f818000)))
	nan := F32ToBF16(float32(math.NaN()))
	require.True(t, BF16ToF32(nan) != BF16ToF32(nan))
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if f == f {
			require.Equal(t, uint16(h), F32ToBF16(f))
		}
	}
}
