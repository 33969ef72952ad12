package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestF16Vectors requires the vector conversions of every SIMD level to
// match the scalar F16ToF32/F32ToF16 bit for bit: all 65536 halves, and
// floats around every rounding case (ties, subnormals, overflow, NaN).
func TestF16Vectors(t *testing.T) {
	halves := make([]uint16, 1<<16+5) // odd length: vector tails
	for i := range halves {
		halves[i] = uint16(i)
	}
	r := rand.New(rand.NewPCG(3, 4))
	floats := make([]float32, 0, 5000)
	for range 3000 {
		floats = append(floats, math.Float32frombits(r.Uint32()))
	}
	for _, h := range []uint16{0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7c00} {
		f := F16ToF32(h)
		next := F16ToF32(h + 1)
		floats = append(floats, f, (f+next)/2, math.Nextafter32((f+next)/2, 0), math.Nextafter32((f+next)/2, 1e9), -f)
	}
	floats = append(floats, 65520, 65519.99, 1e-8, -1e-8, 6e-8, float32(math.NaN()), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)))
	for _, lvl := range supportedLevels() {
		saved := simdLevel()
		setSIMDLevel(lvl)
		got := make([]float32, len(halves))
		F16sToF32s(got, halves)
		back := make([]uint16, len(floats))
		F32sToF16s(back, floats)
		setSIMDLevel(saved)
		// NaNs stay NaN (hardware quiets signalling NaNs; the KV cache
		// only ever holds the quiet poison NaN); every other value is exact.
		for i, h := range halves {
			if want := F16ToF32(h); want != want {
				require.True(t, got[i] != got[i], "level %d half %#04x", lvl, h)
				continue
			}
			require.Equal(t, math.Float32bits(F16ToF32(h)), math.Float32bits(got[i]), "level %d half %#04x", lvl, h)
		}
		for i, f := range floats {
			if f != f {
				require.True(t, back[i]&0x7c00 == 0x7c00 && back[i]&0x3ff != 0, "level %d float %#08x", lvl, math.Float32bits(f))
				continue
			}
			require.Equal(t, F32ToF16(f), back[i], "level %d float %v (%#08x)", lvl, f, math.Float32bits(f))
		}
	}
}

// TestAttnF16 requires the f16 attention kernels to equal the f32 kernels
// on the converted cache, bit for bit, at every level, for head widths
// with and without vector tails and spans across several chunks.
func TestAttnF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{8, 12, 32, 64, 100, 128} {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, attnChunk, attnChunk + 3, 3*attnChunk + 1} {
			const stride = 3
			kv16 := make([]uint16, (n*stride+2)*d)
			for i := range kv16 {
				kv16[i] = F32ToF16(float32(r.NormFloat64()))
			}
			kv32 := make([]float32, len(kv16))
			cvtF16F32Generic(kv32, kv16)
			offs := make([]int, n)
			for t := range offs {
				offs[t] = (r.IntN(n*stride) + 1) * d
			}
			q := randF32(r, d)
			w := randF32(r, n)
			for _, lvl := range supportedLevels() {
				name := fmt.Sprintf("d=%d n=%d level=%d", d, n, lvl)
				saved := simdLevel()
				setSIMDLevel(lvl)
				want, got := make([]float32, n), make([]float32, n)
				AttnScores(want, q, kv32, offs, 0.125)
				AttnScoresF16(got, q, kv16, offs, 0.125)
				requireBits(t, want, got, n, name+" scores")
				wo, go16 := randF32(r, d), make([]float32, d)
				copy(go16, wo)
				AttnAccum(wo, w, kv32, offs)
				AttnAccumF16(go16, w, kv16, offs)
				setSIMDLevel(saved)
				requireBits(t, wo, go16, d, name+" accum")
			}
		}
	}
}
