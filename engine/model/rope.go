package model

import (
	"math"

	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// Rope holds the rotary frequencies of one RoPE configuration (base,
// scaling, frequency factors) and fills the cos/sin table of a position.
// Layers with different bases (Gemma 3's local and global layers) have
// one Rope each. The GPU runner builds its tables with the same code, so
// both backends rotate by identical angles.
type Rope struct {
	freq    []float32 // per pair: radians per position, factors applied
	scaling arch.Scaling
	// YaRN: ramp bounds in pair indices.
	low, high float32
	// mscale multiplies cos and sin: llama.cpp's attn_factor, times YaRN's
	// magnitude correction (see magnitude).
	mscale float32
}

// NewRope computes the frequencies of ropeDim rotated dimensions:
// freq[j] = 1/theta^(2j/ropeDim) in float32 (as llama2.c's run.c), divided
// by factors[j] when factors is not nil (Llama 3's rope_freqs, LongRoPE's
// long or short factors: Weights.RopeFactors).
func NewRope(theta float32, ropeDim int, factors []float32, s arch.Scaling) *Rope {
	r := &Rope{freq: make([]float32, ropeDim/2), scaling: s, mscale: magnitude(s)}
	for j := range r.freq {
		e := float32(2*j) / float32(ropeDim)
		f := 1 / float32(math.Pow(float64(theta), float64(e)))
		if factors != nil {
			f /= factors[j]
		}
		r.freq[j] = f
	}
	if s.Kind == arch.ScalingYaRN {
		// ggml_rope_yarn_corr_dims: the dimensions whose wavelength fits
		// beta_fast resp. beta_slow times into the original context.
		corr := func(beta float32) float64 {
			return float64(ropeDim) * math.Log(float64(s.OrigContext)/(float64(beta)*2*math.Pi)) / (2 * math.Log(float64(theta)))
		}
		r.low = float32(max(0, math.Floor(corr(s.BetaFast))))
		r.high = float32(min(float64(ropeDim-1), math.Ceil(corr(s.BetaSlow))))
	}
	return r
}

// magnitude is the factor on cos and sin (arch.Scaling.Magnitude: llama.cpp's
// attn_factor times YaRN's magnitude correction).
func magnitude(s arch.Scaling) float32 { return s.Magnitude() }

// Dim is the number of rotated dimensions (the table length).
func (r *Rope) Dim() int { return 2 * len(r.freq) }

// Fill writes the cos (even index) and sin (odd index) of every pair's
// angle at position pos into cs (length Dim()).
func (r *Rope) Fill(cs []float32, pos int) {
	p := float32(pos)
	s := r.scaling
	switch s.Kind {
	case arch.ScalingLinear:
		p /= s.Factor
	case arch.ScalingYaRN:
		for j, f := range r.freq {
			extrap := p * f
			interp := extrap / s.Factor
			theta := interp
			if s.ExtFactor != 0 {
				// rope_yarn_ramp: 1 below low, 0 above high.
				y := (float32(j) - r.low) / max(0.001, r.high-r.low)
				mix := (1 - min(1, max(0, y))) * s.ExtFactor
				theta = interp*(1-mix) + extrap*mix
			}
			cs[2*j] = float32(math.Cos(float64(theta))) * r.mscale
			cs[2*j+1] = float32(math.Sin(float64(theta))) * r.mscale
		}
		return
	}
	for j, f := range r.freq {
		val := p * f
		cs[2*j] = float32(math.Cos(float64(val))) * r.mscale
		cs[2*j+1] = float32(math.Sin(float64(val))) * r.mscale
	}
}

// ropes returns the distinct Rope configurations of a model and, per
// layer, the index of the one it uses.
func ropes(c Config, factors []float32) ([]*Rope, []int) {
	rd := c.RopeDim
	if rd == 0 {
		rd = c.HeadDim
	}
	type key struct {
		theta float32
		s     arch.Scaling
	}
	var out []*Rope
	idx := map[key]int{}
	per := make([]int, c.Layers)
	for l := range c.Layers {
		th, s := c.Block.LayerRope(l, c.RopeTheta)
		k := key{th, s}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, NewRope(th, rd, factors, s))
		}
		per[l] = i
	}
	return out, per
}

// Ropes returns the distinct RoPE configurations of a model (per-layer
// bases and scaling of c.Block, frequency factors such as Weights.RopeFreqs
// or nil) and, per layer, the index of the one it uses.
func Ropes(c Config, factors []float32) ([]*Rope, []int) { return ropes(c, factors) }
