package main

import (
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

func init() {
	// Qwen3-30B-A3B (and Qwen3-Coder-30B-A3B): 48 layers of 32 query heads
	// of 128 on 4 KV heads with Q/K norm, each with 128 experts of width
	// 768 of which 8 are used, renormalised. At full depth it is 17 GB in
	// Q4_K_M; -layers cuts it to what the machine holds, at full width.
	shapes["30b-a3b"] = model.Config{
		Arch: "qwen3moe", Dim: 2048, Hidden: 6144, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128,
		Vocab: 151936, MaxContext: 40960, NormEps: 1e-6, RopeTheta: 1e6, RopeDim: 128, BOS: 1, EOS: 2,
		Block: arch.Block{RopeStyle: arch.RopeNeoX, QKNorm: true,
			MoE: arch.MoE{Experts: 128, Used: 8, Hidden: 768, NormTopK: true}},
	}
}

// setMoEKeys writes the metadata a mixture-of-experts shape adds to the
// dense keys (none for a dense shape).
func setMoEKeys(b *gguf.Builder, an string, cfg model.Config) {
	m := cfg.Block.MoE
	if m.Experts == 0 {
		return
	}
	b.Set(an+".attention.key_length", uint32(cfg.HeadDim))
	b.Set(an+".attention.value_length", uint32(cfg.HeadDim))
	b.Set(an+".expert_count", uint32(m.Experts))
	b.Set(an+".expert_used_count", uint32(m.Used))
	b.Set(an+".expert_feed_forward_length", uint32(m.Hidden))
}

// moeLayer adds layer prefix p's Q/K norms and mixture-of-experts FFN in
// llama-quantize's mix for 128 experts: the router stays F32 (llama.cpp
// never quantizes ffn_gate_inp), gate and up experts get the base type
// and the down experts the type ffn_down gets in that layer (more).
func moeLayer(b *gguf.Builder, p string, cfg model.Config, base, more ml.Type, tensor func(name string, t ml.Type, n, rows, cols int)) {
	m := cfg.Block.MoE
	if cfg.Block.QKNorm {
		ones := make([]float32, cfg.HeadDim)
		for i := range ones {
			ones[i] = 1
		}
		b.AddF32(p+"attn_q_norm.weight", []uint64{uint64(cfg.HeadDim)}, ones)
		b.AddF32(p+"attn_k_norm.weight", []uint64{uint64(cfg.HeadDim)}, ones)
	}
	tensor(p+"ffn_gate_inp.weight", ml.F32, 1, m.Experts, cfg.Dim)
	tensor(p+"ffn_gate_exps.weight", base, m.Experts, m.Hidden, cfg.Dim)
	tensor(p+"ffn_up_exps.weight", base, m.Experts, m.Hidden, cfg.Dim)
	tensor(p+"ffn_down_exps.weight", more, m.Experts, cfg.Dim, m.Hidden)
}
