package main

import (
	"math"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// phi4MiniOrigContext is Phi-4-mini's original context (LongRoPE's short
// factors up to it, the long ones beyond).
const phi4MiniOrigContext = 4096

func init() {
	// Phi-4-mini (3.8B): phi3 with 24 query heads of 128 on 8 KV heads,
	// rotary on 96 of the 128 dimensions (partial_rotary_factor 0.75),
	// LongRoPE to 128k, embeddings tied to the output and a 200k
	// vocabulary.
	shapes["phi4-mini"] = model.Config{
		Arch: "phi3", Dim: 3072, Hidden: 8192, Layers: 32, Heads: 24, KVHeads: 8, HeadDim: 128,
		Vocab: 200064, MaxContext: 131072, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 96, BOS: 1, EOS: 2,
	}
}

// tiedOutput reports whether the shape has no output matrix of its own
// (the token embeddings serve, quantized as the output matrix would be).
func tiedOutput(cfg model.Config) bool { return cfg.Arch == "phi3" }

// setPhi3Keys writes phi3's LongRoPE metadata and factor tensors, as the
// converter writes them for Phi-4-mini: the original context, the
// attention factor sqrt(1 + ln(s)/ln(orig)) of the scale s, and
// [RopeDim/2] short and long frequency divisors (made up: smooth ramps
// from 1, the long ones steeper, as Phi's are).
func setPhi3Keys(b *gguf.Builder, an string, cfg model.Config) {
	if cfg.Arch != "phi3" {
		return
	}
	scale := float64(cfg.MaxContext) / phi4MiniOrigContext
	b.Set(an+".rope.scaling.original_context_length", uint32(phi4MiniOrigContext))
	b.Set(an+".rope.scaling.attn_factor", float32(math.Sqrt(1+math.Log(scale)/math.Log(phi4MiniOrigContext))))
	n := cfg.RopeDim / 2
	short, long := make([]float32, n), make([]float32, n)
	for i := range n {
		f := float64(i) / float64(n-1)
		short[i] = float32(1 + 0.5*f*f)
		long[i] = float32(1 + 30*f*f)
	}
	b.AddF32("rope_factors_long.weight", []uint64{uint64(n)}, long)
	b.AddF32("rope_factors_short.weight", []uint64{uint64(n)}, short)
}

// phi3Layer adds layer prefix p's fused matrices: attn_qkv (Q, K then V
// rows, Q5_K in llama-quantize's Q4_K_M mix) and ffn_up (gate rows, then
// up), after the attention norm.
func phi3Layer(p string, cfg model.Config, ft fileType, more ml.Type, mat func(name string, t ml.Type, rows, cols int)) {
	qkv := ft.base
	if ft == fileTypes["q4_k_m"] { // llama-quantize gives attn_qkv Q5_K
		qkv = ml.Q5_K
	}
	mat(p+"attn_qkv.weight", qkv, (cfg.Heads+2*cfg.KVHeads)*cfg.HeadDim, cfg.Dim)
	mat(p+"attn_output.weight", ft.base, cfg.Dim, cfg.Heads*cfg.HeadDim)
	mat(p+"ffn_up.weight", ft.base, 2*cfg.Hidden, cfg.Dim)
	mat(p+"ffn_down.weight", more, cfg.Dim, cfg.Hidden)
}
