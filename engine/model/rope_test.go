package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

func TestRopeTables(t *testing.T) {
	const dim = 16
	cs, ref := make([]float32, dim), make([]float32, dim)

	// No scaling: exactly llama2.c's table (ml.RoPETable).
	r := NewRope(10000, dim, nil, arch.Scaling{})
	for _, pos := range []int{0, 1, 17, 500} {
		r.Fill(cs, pos)
		ml.RoPETable(ref, dim, pos, 10000, 1)
		require.Equal(t, ref, cs, "pos %d", pos)
	}

	angle := func(cs []float32, j int) float64 { return math.Atan2(float64(cs[2*j+1]), float64(cs[2*j])) }
	freq := func(j int) float64 { return math.Pow(10000, -2*float64(j)/dim) }

	// Frequency factors divide each pair's frequency (Llama 3 rope_freqs).
	ff := []float32{1, 1, 2, 4, 8, 16, 32, 32}
	NewRope(10000, dim, ff, arch.Scaling{}).Fill(cs, 3)
	for j := range dim / 2 {
		require.InDelta(t, 3*freq(j)/float64(ff[j]), angle(cs, j), 1e-5, "pair %d", j)
	}

	// Linear: positions divided by the factor.
	NewRope(10000, dim, nil, arch.Scaling{Kind: arch.ScalingLinear, Factor: 4}).Fill(cs, 3)
	for j := range dim / 2 {
		require.InDelta(t, 0.75*freq(j), angle(cs, j), 1e-5, "pair %d", j)
	}

	// YaRN (ggml's rope_yarn): pairs below the ramp keep the extrapolated
	// angle, pairs above it are interpolated, and cos/sin carry the
	// magnitude 1 + 0.1 ln(factor).
	y := arch.Scaling{Kind: arch.ScalingYaRN, Factor: 4, OrigContext: 4096, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	yr := NewRope(10000, dim, nil, y)
	corr := func(beta float64) float64 { return dim * math.Log(4096/(beta*2*math.Pi)) / (2 * math.Log(10000)) }
	require.Equal(t, float32(math.Floor(corr(32))), yr.low)
	require.Equal(t, float32(math.Min(dim-1, math.Ceil(corr(1)))), yr.high)
	yr.Fill(cs, 1)
	mscale := 1 + 0.1*math.Log(4)
	for j := range dim / 2 {
		require.InDelta(t, mscale, math.Hypot(float64(cs[2*j]), float64(cs[2*j+1])), 1e-5)
		switch {
		case float32(j) <= yr.low:
			require.InDelta(t, freq(j), angle(cs, j), 1e-5, "pair %d extrapolated", j)
		case float32(j) >= yr.high:
			require.InDelta(t, freq(j)/4, angle(cs, j), 1e-5, "pair %d interpolated", j)
		}
	}
	// Without the ramp (ext_factor 0) YaRN is linear interpolation.
	y.ExtFactor = 0
	NewRope(10000, dim, nil, y).Fill(cs, 3)
	for j := range dim / 2 {
		require.InDelta(t, 0.75*freq(j), angle(cs, j), 1e-5, "pair %d", j)
	}
}

// NeoX RoPE rotates (i, i+d/2) by the same angles adjacent RoPE applies to
// (2i, 2i+1): applying it equals permuting, rotating adjacent, permuting back.
func TestRoPENeoXIsPermutedAdjacent(t *testing.T) {
	const hd, heads = 8, 2
	cs := make([]float32, hd)
	NewRope(100, hd, nil, arch.Scaling{}).Fill(cs, 5)
	v := []float32{1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8}
	neox := append([]float32(nil), v...)
	ml.RoPEApplyNeoX(neox, hd, cs)
	perm := make([]float32, len(v))
	for h := range heads {
		for i := range hd / 2 {
			perm[h*hd+2*i], perm[h*hd+2*i+1] = v[h*hd+i], v[h*hd+i+hd/2]
		}
	}
	ml.RoPEApply(perm, hd, cs)
	for h := range heads {
		for i := range hd / 2 {
			require.Equal(t, perm[h*hd+2*i], neox[h*hd+i])
			require.Equal(t, perm[h*hd+2*i+1], neox[h*hd+i+hd/2])
		}
	}
}

// TestRopeMagnitude checks the factor on cos and sin against llama.cpp's
// arithmetic: rope.scaling.attn_factor (Mscale) for every kind, YaRN's
// 1 + 0.1 ln(factor) on top when the ramp is on (yarn_attn_factor then
// ignored), yarn_attn_factor when it is off, nothing for a YaRN factor
// <= 1.
func TestRopeMagnitude(t *testing.T) {
	const dim = 16
	yarn := arch.Scaling{Kind: arch.ScalingYaRN, Factor: 4, OrigContext: 64, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	withMs := func(s arch.Scaling, ms float32) arch.Scaling { s.Mscale = ms; return s }
	with := func(s arch.Scaling, f func(*arch.Scaling)) arch.Scaling { f(&s); return s }
	ln4 := 1 + 0.1*math.Log(4)
	for _, c := range []struct {
		name string
		s    arch.Scaling
		want float64
	}{
		{"none", arch.Scaling{}, 1},
		{"LongRoPE attention factor", arch.Scaling{OrigContext: 64, Mscale: 1.1547005}, 1.1547005},
		{"linear with attention factor", arch.Scaling{Kind: arch.ScalingLinear, Factor: 2, Mscale: 0.5}, 0.5},
		{"yarn", yarn, ln4},
		{"yarn ignores yarn_attn_factor under the ramp", with(yarn, func(s *arch.Scaling) { s.AttnFactor = 3 }), ln4},
		{"yarn with attention factor", withMs(yarn, 1.5), 1.5 * ln4},
		{"yarn without ramp", with(yarn, func(s *arch.Scaling) { s.ExtFactor, s.AttnFactor = 0, 0.75 }), 0.75},
		{"yarn factor below 1", with(yarn, func(s *arch.Scaling) { s.Factor = 0.5 }), 1},
	} {
		cs := make([]float32, dim)
		for _, pos := range []int{0, 3, 100} {
			NewRope(10000, dim, nil, c.s).Fill(cs, pos)
			for j := range dim / 2 {
				require.InDelta(t, c.want, math.Hypot(float64(cs[2*j]), float64(cs[2*j+1])), 2e-6, "%s pos %d pair %d", c.name, pos, j)
			}
		}
	}
	// The magnitude leaves the angles alone: LongRoPE's factors divide the
	// frequencies as rope_freqs do.
	ff := []float32{1, 1.5, 2, 4, 8, 16, 32, 64}
	cs, ref := make([]float32, dim), make([]float32, dim)
	NewRope(10000, dim, ff, arch.Scaling{Mscale: 1.25}).Fill(cs, 7)
	NewRope(10000, dim, ff, arch.Scaling{}).Fill(ref, 7)
	for i := range cs {
		require.Equal(t, ref[i]*1.25, cs[i])
	}
}
