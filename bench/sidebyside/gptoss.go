package main

import (
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// gpt-oss-20b's YaRN: factor 32 over the original 4096 tokens, with
// llama.cpp's default betas (the converter writes none; they are written
// here so that neither side relies on its own defaults).
const (
	gptossOrigContext = 4096
	gptossYaRNFactor  = 32
)

func init() {
	// gpt-oss-20b: 24 layers of width 2880, 64 query heads of 64 on 8 KV
	// heads with Q/K/V/O biases and attention sinks, a sliding window of
	// 128 on every other layer (the even ones), NeoX RoPE with YaRN, and
	// in every layer 32 experts of width 2880 (with biases, clamped
	// SwiGLU) of which 4 are used, softmaxed among themselves. The output
	// is not tied; the vocabulary is o200k_harmony's 201088. The whole file
	// is 12 GB in MXFP4_MOE; -layers cuts it at full width.
	shapes["gptoss-20b"] = model.Config{
		Arch: "gpt-oss", Dim: 2880, Hidden: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64,
		Vocab: 201088, MaxContext: 131072, NormEps: 1e-5, RopeTheta: 150000, RopeDim: 64, BOS: 1, EOS: 2,
		Block: arch.Block{RopeStyle: arch.RopeNeoX, Activation: arch.SwiGLUOAI, Window: 128, WindowPattern: 2,
			Scaling: arch.Scaling{Kind: arch.ScalingYaRN, Factor: gptossYaRNFactor, OrigContext: gptossOrigContext,
				ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1},
			MoE: arch.MoE{Experts: 32, Used: 4, Hidden: 2880}},
	}
	// llama-quantize's MXFP4_MOE (what ggml-org's gpt-oss GGUFs are): the
	// 3-D expert tensors MXFP4, every other matrix Q8_0 (token embeddings
	// and output included); the router, norms, biases and sinks F32.
	fileTypes["mxfp4_moe"] = fileType{base: ml.Q8_0, more: ml.Q8_0, output: ml.Q8_0, experts: ml.MXFP4, ftype: 38}
}

// setGptOssKeys writes the metadata gpt-oss adds to the common and MoE
// keys, as the converter does (GptOssModel.set_gguf_parameters).
func setGptOssKeys(b *gguf.Builder, an string, cfg model.Config) {
	if cfg.Arch != "gpt-oss" {
		return
	}
	s := cfg.Block.Scaling
	b.Set(an+".attention.sliding_window", uint32(cfg.Block.Window))
	b.Set(an+".rope.scaling.type", "yarn")
	b.Set(an+".rope.scaling.factor", s.Factor)
	b.Set(an+".rope.scaling.original_context_length", uint32(s.OrigContext))
	b.Set(an+".rope.scaling.yarn_beta_fast", s.BetaFast)
	b.Set(an+".rope.scaling.yarn_beta_slow", s.BetaSlow)
}

// gptossLayer adds layer prefix p's tensors after the attention norm:
// Q/K/V/O with their biases, the sinks, the pre-FFN norm (stored as
// post_attention_norm), the router with its bias and the experts with
// theirs. vec adds a random F32 vector of n values.
func gptossLayer(p string, cfg model.Config, ft fileType, norm func(name string),
	vec func(name string, n int), tensor func(name string, t ml.Type, n, rows, cols int)) {
	m := cfg.Block.MoE
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	tensor(p+"attn_q.weight", ft.base, 1, qDim, cfg.Dim)
	vec(p+"attn_q.bias", qDim)
	tensor(p+"attn_k.weight", ft.base, 1, kvDim, cfg.Dim)
	vec(p+"attn_k.bias", kvDim)
	tensor(p+"attn_v.weight", ft.base, 1, kvDim, cfg.Dim)
	vec(p+"attn_v.bias", kvDim)
	tensor(p+"attn_output.weight", ft.base, 1, cfg.Dim, qDim)
	vec(p+"attn_output.bias", cfg.Dim)
	vec(p+"attn_sinks.weight", cfg.Heads)
	norm(p + "post_attention_norm.weight")
	exps := ft.base
	if ft.experts != ml.F32 {
		exps = ft.experts
	}
	tensor(p+"ffn_gate_inp.weight", ml.F32, 1, m.Experts, cfg.Dim)
	vec(p+"ffn_gate_inp.bias", m.Experts)
	tensor(p+"ffn_gate_exps.weight", exps, m.Experts, m.Hidden, cfg.Dim)
	tensor(p+"ffn_gate_exps.bias", ml.F32, 1, m.Experts, m.Hidden)
	tensor(p+"ffn_up_exps.weight", exps, m.Experts, m.Hidden, cfg.Dim)
	tensor(p+"ffn_up_exps.bias", ml.F32, 1, m.Experts, m.Hidden)
	tensor(p+"ffn_down_exps.weight", exps, m.Experts, cfg.Dim, m.Hidden)
	tensor(p+"ffn_down_exps.bias", ml.F32, 1, m.Experts, cfg.Dim)
}
