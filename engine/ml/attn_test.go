package ml

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// SiLUMul's vector kernels follow expf step for step: bit-identical to the
// plain-Go loop at every level, every length and every split.
func TestSiLUMulLevels(t *testing.T) {
	defer setSIMDLevel(simdLevel())
	rng := rand.New(rand.NewPCG(3, 4))
	vals := func(n int, spread float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = (rng.Float32()*2 - 1) * spread
		}
		return v
	}
	for _, lvl := range supportedLevels() {
		setSIMDLevel(lvl)
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 33, 100, 1027} {
			for _, spread := range []float32{1, 12, 200} {
				g, u := vals(n, spread), vals(n, 3)
				want := append([]float32(nil), g...)
				siluMulGeneric(want, u)
				got := append([]float32(nil), g...)
				SiLUMul(got, u)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "level %d n %d i %d g %g: %g vs %g", lvl, n, i, g[i], got[i], want[i])
				}
				// Any split gives the same bits.
				if n > 3 {
					got2 := append([]float32(nil), g...)
					SiLUMul(got2[:n/3], u[:n/3])
					SiLUMul(got2[n/3:], u[n/3:])
					require.Equal(t, got, got2)
				}
			}
		}
		// Edge values: clamps, zero, infinities, NaN, exp's boundaries.
		edge := []float32{0, float32(math.Copysign(0, -1)), 88.72283, -88.72283, 87.33654, -87.33654, 88.7229, -87.3366,
			100, -100, 1e-8, -1e-8, float32(math.Inf(1)), float32(math.Inf(-1)), 0.34657, -0.34657, 87.0, -87.0, 86.9, 88.5}
		u := make([]float32, len(edge))
		for i := range u {
			u[i] = 1.5
		}
		want := append([]float32(nil), edge...)
		siluMulGeneric(want, u)
		got := append([]float32(nil), edge...)
		SiLUMul(got, u)
		for i := range want {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "level %d g %g: %g vs %g", lvl, edge[i], got[i], want[i])
		}
		nan := []float32{float32(math.NaN()), 1}
		SiLUMul(nan, []float32{1, 1})
		require.True(t, math.IsNaN(float64(nan[0])))
	}
}

func TestExpShiftLevels(t *testing.T) {
	defer setSIMDLevel(simdLevel())
	rng := rand.New(rand.NewPCG(7, 8))
	for _, lvl := range supportedLevels() {
		setSIMDLevel(lvl)
		for _, n := range []int{1, 5, 16, 17, 40, 333} {
			x := make([]float32, n)
			for i := range x {
				x[i] = rng.Float32()*200 - 100
			}
			x[0] = float32(math.NaN())
			if n > 4 {
				x[1], x[2], x[3] = float32(math.Inf(1)), float32(math.Inf(-1)), 88.72283
			}
			for _, m := range []float32{0, 3.5, -2} {
				want := append([]float32(nil), x...)
				expShiftGeneric(want, m)
				got := append([]float32(nil), x...)
				expShift(got, m)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "level %d n %d x %g m %g: %g vs %g", lvl, n, x[i], m, got[i], want[i])
				}
			}
		}
	}
}

func attnCase(rng *rand.Rand, n, d int) (q, kv []float32, offs []int) {
	q = make([]float32, d)
	for i := range q {
		q[i] = rng.Float32()*2 - 1
	}
	kv = make([]float32, (n+3)*d*3+5)
	for i := range kv {
		kv[i] = rng.Float32()*2 - 1
	}
	offs = make([]int, n)
	for i := range offs {
		offs[i] = rng.IntN(len(kv) - d + 1)
	}
	if n > 0 {
		offs[n-1] = len(kv) - d // the very end of kv
	}
	return q, kv, offs
}

func TestAttnKernels(t *testing.T) {
	defer setSIMDLevel(simdLevel())
	rng := rand.New(rand.NewPCG(5, 6))
	for _, lvl := range supportedLevels() {
		setSIMDLevel(lvl)
		for _, d := range []int{1, 5, 16, 17, 31, 32, 48, 64, 65, 80, 128, 130} {
			for _, n := range []int{0, 1, 2, 7, 33} {
				q, kv, offs := attnCase(rng, n, d)
				const scale = 0.125
				want := make([]float32, n)
				attnScoresGeneric(want, q, kv, offs, scale)
				got := make([]float32, n)
				AttnScores(got, q, kv, offs, scale)
				for i := range want {
					require.InDelta(t, want[i], got[i], 1e-5*float64(d), "level %d d %d n %d t %d", lvl, d, n, i)
				}
				// A prefix gives the same scores: no dependence on n.
				if n > 1 {
					pre := make([]float32, n-1)
					AttnScores(pre, q, kv, offs, scale)
					require.Equal(t, got[:n-1], pre)
				}

				w := make([]float32, n)
				for i := range w {
					w[i] = rng.Float32()
				}
				base := make([]float32, d)
				for i := range base {
					base[i] = rng.Float32() - 0.5
				}
				wantO := append([]float32(nil), base...)
				attnAccumGeneric(wantO, w, kv, offs)
				gotO := append([]float32(nil), base...)
				AttnAccum(gotO, w, kv, offs)
				for i := range wantO {
					require.InDelta(t, wantO[i], gotO[i], 1e-5*float64(n+1), "level %d d %d n %d i %d", lvl, d, n, i)
				}
				// With AVX-512 element i of a longer output equals the shorter
				// one's: no dependence on how the head dimension is blocked.
				// (The AVX2 level reuses Axpy, whose scalar tail rounds twice.)
				if d > 1 && lvl != levelAVX2 {
					short := append([]float32(nil), base[:d-1]...)
					AttnAccum(short, w, kv, offs)
					require.Equal(t, gotO[:d-1], short, "level %d d %d n %d", lvl, d, n)
				}
			}
		}
	}
}

func TestAttnBounds(t *testing.T) {
	kv := make([]float32, 100)
	q := make([]float32, 16)
	require.Panics(t, func() { AttnScores(make([]float32, 1), q, kv, []int{85}, 1) })
	require.Panics(t, func() { AttnScores(make([]float32, 1), q, kv, []int{-1}, 1) })
	require.Panics(t, func() { AttnScores(make([]float32, 2), q, kv, []int{0}, 1) })
	require.Panics(t, func() { AttnAccum(q, []float32{1}, kv, []int{90}) })
	require.NotPanics(t, func() { AttnScores(make([]float32, 1), q, kv, []int{84}, 1) })
}

func BenchmarkSiLUMul(b *testing.B) {
	g := make([]float32, 65536)
	u := make([]float32, len(g))
	for i := range g {
		g[i] = float32(i%200)/20 - 5
		u[i] = 1
	}
	for _, lvl := range supportedLevels() {
		b.Run(levelName(lvl), func(b *testing.B) {
			defer setSIMDLevel(simdLevel())
			setSIMDLevel(lvl)
			x := make([]float32, len(g))
			for range b.N {
				copy(x, g)
				SiLUMul(x, u)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(g)), "ns/elem")
		})
	}
}

func levelName(l int) string {
	return [...]string{"generic", "avx2", "avx512"}[l]
}
