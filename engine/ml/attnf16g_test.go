package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAttnF16Group checks the grouped f16 kernels against the one-head
// ones bit for bit, at every SIMD level, over head dimensions with and
// without the grouped kernels' fast path (multiples of 32 and 64), head
// counts with leftovers after the groups of four, and scattered offsets.
func TestAttnF16Group(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{32, 64, 80, 96, 128} {
		for _, g := range []int{1, 2, 4, 5, 8} {
			for _, n := range []int{1, 3, 4, 37, 300} {
				rows := 2*n + 2
				kv := make([]uint16, rows*d)
				F32sToF16s(kv, randF32(r, rows*d))
				offs := make([]int, n)
				for i := range offs {
					offs[i] = r.IntN(rows) * d
				}
				q, w, out0 := randF32(r, g*d), randF32(r, g*n), randF32(r, g*d)
				for _, lvl := range supportedLevels() {
					name := fmt.Sprintf("d=%d g=%d n=%d level=%d", d, g, n, lvl)
					saved := simdLevel()
					setSIMDLevel(lvl)
					want, got := make([]float32, g*n), make([]float32, g*n)
					wantO := append([]float32(nil), out0...)
					gotO := append([]float32(nil), out0...)
					for h := range g {
						AttnScoresF16(want[h*n:(h+1)*n], q[h*d:(h+1)*d], kv, offs, 0.3)
						AttnAccumF16(wantO[h*d:(h+1)*d], w[h*n:(h+1)*n], kv, offs)
					}
					AttnScoresF16Group(got, q, g, kv, offs, 0.3)
					AttnAccumF16Group(gotO, w, g, kv, offs)
					setSIMDLevel(saved)
					requireBits(t, want, got, g*n, name+" scores")
					requireBits(t, wantO, gotO, g*d, name+" accum")
				}
			}
		}
	}
}

func TestAttnF16GroupBounds(t *testing.T) {
	kv := make([]uint16, 128)
	tests := []struct {
		name string
		f    func()
	}{
		{"scores offset past the end", func() { AttnScoresF16Group(make([]float32, 4), make([]float32, 256), 4, kv, []int{65}, 1) }},
		{"scores negative offset", func() { AttnScoresF16Group(make([]float32, 4), make([]float32, 256), 4, kv, []int{-1}, 1) }},
		{"scores heads do not divide", func() { AttnScoresF16Group(make([]float32, 3), make([]float32, 128), 2, kv, []int{0}, 1) }},
		{"scores too few offsets", func() { AttnScoresF16Group(make([]float32, 8), make([]float32, 256), 4, kv, []int{0}, 1) }},
		{"accum offset past the end", func() { AttnAccumF16Group(make([]float32, 256), make([]float32, 4), 4, kv, []int{65}) }},
		{"accum heads do not divide", func() { AttnAccumF16Group(make([]float32, 129), make([]float32, 2), 2, kv, []int{0}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { require.Panics(t, tc.f) })
	}
}

// TestAttnF16Strided requires scoring and accumulating a span tile by
// tile into strided rows to give the bits of doing it whole, at every
// SIMD level: the blocked prefill attention relies on it.
func TestAttnF16Strided(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, d := range []int{64, 96, 128} {
		for _, g := range []int{1, 4, 6} {
			const n = 333
			kv := make([]uint16, (n+5)*d)
			F32sToF16s(kv, randF32(r, len(kv)))
			offs := make([]int, n)
			for i := range offs {
				offs[i] = r.IntN(n+5) * d
			}
			q, out0 := randF32(r, g*d), randF32(r, g*d)
			for _, lvl := range supportedLevels() {
				for _, tile := range []int{1, 7, 64, 128} {
					name := fmt.Sprintf("d=%d g=%d level=%d tile=%d", d, g, lvl, tile)
					saved := simdLevel()
					setSIMDLevel(lvl)
					want := make([]float32, g*n)
					AttnScoresF16Group(want, q, g, kv, offs, 0.2)
					wantO := append([]float32(nil), out0...)
					AttnAccumF16Group(wantO, want, g, kv, offs)

					const ds = n + 11 // rows wider than the span
					got := make([]float32, g*ds)
					gotO := append([]float32(nil), out0...)
					for t0 := 0; t0 < n; t0 += tile {
						t1 := min(t0+tile, n)
						AttnScoresF16Strided(got[t0:], ds, q, g, kv, offs[t0:t1], 0.2)
					}
					for t0 := 0; t0 < n; t0 += tile {
						t1 := min(t0+tile, n)
						AttnAccumF16Strided(gotO, got[t0:], ds, g, kv, offs[t0:t1])
					}
					setSIMDLevel(saved)
					for h := range g {
						requireBits(t, want[h*n:(h+1)*n], got[h*ds:h*ds+n], 1, fmt.Sprintf("%s head %d scores", name, h))
					}
					requireBits(t, wantO, gotO, g*d, name+" accum")
				}
			}
		}
	}
	require.Panics(t, func() {
		AttnScoresF16Strided(make([]float32, 10), 4, make([]float32, 128), 2, make([]uint16, 64), []int{0, 0, 0, 0, 0}, 1)
	})
	require.Panics(t, func() {
		AttnAccumF16Strided(make([]float32, 128), make([]float32, 7), 4, 2, make([]uint16, 64), []int{0, 0, 0, 0})
	})
}
