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
