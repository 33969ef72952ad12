// Package tiny writes tiny random-weight GGUF files (F32, dim 64-96, two
// layers, a 320-token placeholder vocabulary) of architectures whose
// llama.cpp golden data is not part of ../shared, and embeds llama.cpp's
// output on them (testdata/<shape>.json), so that kvwarden's forward pass
// is checked against llama.cpp in CI without committing model weights.
//
// The files are a pure function of the Shape: every weight comes from one
// math/rand/v2 PCG stream (PCG-DXSM, whose output is specified) seeded by
// Shape.Seed, consumed in tensor order and turned into floats with exact
// arithmetic, so the bytes are identical on every machine and Go version.
// Each testdata file records the SHA-256 of the GGUF it was made from;
// a test that regenerates the file compares it, so a change to the
// generator cannot silently desynchronise from the oracle data.
//
// Regenerating the oracle data (after changing a shape or adding one)
// needs a llama.cpp tree with a CPU build (libllama in build/bin) and g++:
// the generator compiles golden_run, the libllama runner of
// ../shared/golden/arch/tools, into a temporary directory (nothing is
// written to ../shared) and runs it. From the repository root:
//
//	go run ./internal/testmodels/tiny/cmd/oracle -llama /path/to/llama.cpp \
//	    -llama-commit $(git -C /path/to/llama.cpp rev-parse HEAD)
//
// and then `go test ./engine/model -run TestTinyOracle`. The committed
// data come from llama.cpp d32676d77426540327835040d5d3279728f0b4c8.
//
// To add a shape, add a Shape to Shapes and run the generator; the tests
// in engine/model run every shape and fail for one without oracle data.
// The common fields cover a Llama-style block with optional biases, Q/K
// norm, partial rotary, LongRoPE and a mixture-of-experts FFN (softmax or
// sigmoid router, selection bias, dense leading layers, shared experts
// with or without a gate). An architecture with another attention block
// writes its tensors in the Attention hook and its extra metadata in
// Keys, keeping the built-in FFN: a deepseek2-like shape would put MLA's
// low-rank attention tensors and attention.*_lora_rank keys there and
// describe its routed and shared experts with MoE (deepseek2Shape does).
package tiny

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// Special token ids of the placeholder vocabulary (gguf.PlaceholderVocab:
// <unk>, <s>, </s>, then the 256 byte tokens, then filler pieces).
const (
	UNK = gguf.PlaceholderUNK
	BOS = gguf.PlaceholderBOS
	EOS = gguf.PlaceholderEOS
	// FirstNormal is the first id a prompt may use (the byte tokens and
	// fillers); the oracle draws prompts from [FirstNormal, Vocab).
	FirstNormal = gguf.PlaceholderBytes
)

// LongRoPE is Phi-3/Phi-4-style LongRoPE: rope_factors_short/long
// ([RopeDim/2] frequency divisors each) and the original context. llama.cpp
// uses the long factors when its per-sequence context (n_ctx rounded up to
// a multiple of 256) exceeds OrigContext, else the short ones.
type LongRoPE struct {
	OrigContext int
	// Long and Short are the factors, AttnFactor rope.scaling.attn_factor.
	// Literal values: the bytes must not depend on a platform's
	// transcendental functions.
	Long, Short []float32
	AttnFactor  float32
}

// MoE is a mixture-of-experts FFN.
type MoE struct {
	Experts, Used, Hidden int
	// LeadingDense layers have a dense FFN (Shape.Hidden wide).
	LeadingDense int
	// Sigmoid gating (expert_gating_func 2) instead of softmax; with
	// SelectBias an exp_probs_b bias for the selection.
	Sigmoid, SelectBias bool
	// Norm writes expert_weights_norm true; Scale, when not 0,
	// expert_weights_scale.
	Norm  bool
	Scale float32
	// SharedCount > 0 adds that many shared experts (width Hidden each,
	// expert_shared_count, glm4moe style); SharedHidden > 0 one shared
	// expert of that width (expert_shared_feed_forward_length, qwen2moe
	// style). SharedGate adds ffn_gate_inp_shexp (sigmoid gate).
	SharedCount, SharedHidden int
	SharedGate                bool
}

// Shape is one tiny model.
type Shape struct {
	Name string // testdata/<Name>.json
	Arch string // general.architecture
	Seed uint64
	// Notes say what the shape stands for; they go into the oracle data.
	Notes string

	Dim, Hidden, Layers, Heads, KVHeads, HeadDim, RopeDim int
	Vocab, Context                                        int
	RopeTheta, NormEps                                    float32
	// WriteHeadDim writes attention.key_length/value_length.
	WriteHeadDim bool
	Tied         bool // no output.weight: the embeddings serve
	QKVBias      bool
	QKNorm       bool
	// FusedPhi3 stores attn_qkv and ffn_up as gate|up (phi3).
	FusedPhi3 bool
	// PostAttnFFNNorm names the pre-FFN norm post_attention_norm (glm4moe).
	PostAttnFFNNorm bool
	LongRoPE        *LongRoPE
	MoE             *MoE
	// NextN trailing multi-token-prediction layers (nextn_predict_layers),
	// written after the Layers decoder layers; llama.cpp and kvwarden
	// load and skip them.
	NextN int

	// Keys, when set, writes the architecture's extra metadata (an is the
	// architecture name, the key prefix). Attention, when set, writes a
	// layer's attention tensors (p is the prefix "blk.N.", attn_norm
	// included) instead of the built-in ones; FFN likewise its FFN tensors
	// (the pre-FFN norm included). For shapes the common fields do not
	// cover.
	Keys      func(g *Gen, an string)
	Attention func(g *Gen, p string, layer int)
	FFN       func(g *Gen, p string, layer int)

	// Contexts are the llama.cpp context sizes (multiples of 256) the
	// oracle runs the model with; 0 stands for Context. LongRoPE shapes
	// list one at or below OrigContext and one above, to exercise both
	// factor sets.
	Contexts []int
}

// Shapes are the tiny models with oracle data in testdata.
var Shapes = []Shape{
	{
		Name: "phi4-mini", Arch: "phi3", Seed: 1,
		Notes: "Phi-4-mini-like phi3: partial rotary (12 of 16 head dims, 0.75), GQA 6/2, LongRoPE (original context 256, " +
			"context 1024, attn_factor sqrt(1+ln 4/ln 256)), tied output, fused attn_qkv and gate|up",
		Dim: 96, Hidden: 128, Layers: 2, Heads: 6, KVHeads: 2, HeadDim: 16, RopeDim: 12,
		Vocab: 320, Context: 1024, RopeTheta: 10000, NormEps: 1e-5,
		Tied: true, FusedPhi3: true,
		// Phi-like made-up factors (golden/arch's phi3-longrope shape:
		// long rising geometrically 1.08 -> 64, short 1 -> 1.3, rounded as
		// Hugging Face configs are); the attention factor is the
		// converter's sqrt(1 + ln(1024/256)/ln(256)) = sqrt(1.25).
		LongRoPE: &LongRoPE{OrigContext: 256,
			Long:       []float32{1.08, 2.44, 5.53, 12.5, 28.29, 64},
			Short:      []float32{1, 1.01, 1.05, 1.11, 1.19, 1.3},
			AttnFactor: 1.118034},
		Contexts: []int{256, 1024},
	},
	{
		Name: "glm4moe", Arch: "glm4moe", Seed: 2,
		Notes: "GLM-4.5-like glm4moe: q/k/v biases, q/k norm, partial NeoX rotary (16 of 32), GQA 4/2, dense layer 0, " +
			"MoE layer 1 (4 experts, top-2, sigmoid router with exp_probs_b, normalised weights scaled by 2.5, one " +
			"shared expert), one NextN layer (blk.2) that is loaded and skipped, tied output",
		Dim: 64, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, RopeDim: 16,
		Vocab: 320, Context: 256, RopeTheta: 1e6, NormEps: 1e-5,
		WriteHeadDim: true, Tied: true, QKVBias: true, QKNorm: true, PostAttnFFNNorm: true, NextN: 1,
		MoE: &MoE{Experts: 4, Used: 2, Hidden: 32, LeadingDense: 1, Sigmoid: true, SelectBias: true,
			Norm: true, Scale: 2.5, SharedCount: 1},
		Keys: func(g *Gen, an string) {
			g.B.Set(an+".expert_group_count", uint32(1))
			g.B.Set(an+".expert_group_used_count", uint32(1))
		},
	},
	{
		Name: "qwen2moe", Arch: "qwen2moe", Seed: 3,
		Notes: "Qwen1.5-MoE-like qwen2moe: q/k/v biases, NeoX rotary, GQA 4/2, MoE in every layer (4 experts, top-2, " +
			"softmax router, weights not renormalised), shared expert of width 64 scaled by sigmoid(ffn_gate_inp_shexp.x), " +
			"untied output",
		Dim: 64, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, RopeDim: 16,
		Vocab: 320, Context: 256, RopeTheta: 1e6, NormEps: 1e-6,
		QKVBias: true,
		MoE:     &MoE{Experts: 4, Used: 2, Hidden: 32, SharedHidden: 64, SharedGate: true},
	},
	deepseek2Shape("deepseek2", 4, 24, true),
	deepseek2Shape("deepseek2-lite", 5, 0, false),
}

// deepseek2Shape is a DeepSeek-style deepseek2 model: multi-head latent
// attention (4 heads; kv_lora_rank 16, 8 rotated and 16 non-rotated
// query/key dims, value width 16; a q LoRA of rank qRank, or plain attn_q
// when 0), YaRN factor 4 over an original context of 64 with a
// mscale_all_dim, a dense layer 0 and an MoE layer 1 with shared experts.
// v3 makes it DeepSeek-V3-like (sigmoid router with exp_probs_b, 2 expert
// groups of which 1 is used, weights normalised and scaled by 2.5, one
// shared expert, mscale_all_dim 1.0), else V2-Lite-like (softmax router
// without a gating key, no groups, weights neither normalised nor scaled,
// two shared experts, mscale_all_dim 0.707).
func deepseek2Shape(name string, seed uint64, qRank int, v3 bool) Shape {
	const dim, heads, rank, rope, nope, vdim = 64, 4, 16, 8, 16, 16
	s := Shape{
		Name: name, Arch: "deepseek2", Seed: seed,
		Dim: dim, Hidden: 128, Layers: 2, Heads: heads, KVHeads: 1, HeadDim: rank + rope, RopeDim: rope,
		Vocab: 320, Context: 256, RopeTheta: 10000, NormEps: 1e-6,
		MoE: &MoE{Experts: 8, Used: 2, Hidden: 32, LeadingDense: 1, SharedCount: 2},
	}
	mscale := float32(0.707)
	if v3 {
		s.Notes = "DeepSeek-V3-like deepseek2: multi-head latent attention (4 heads, q LoRA rank 24, kv_lora_rank 16, " +
			"8 rotated + 16 non-rotated q/k dims, value 16, normal rope on the rotated dims only), YaRN factor 4 over " +
			"original context 64 with mscale_all_dim 1.0 (yarn_log_multiplier 0.1), dense layer 0, MoE layer 1 " +
			"(8 experts in 2 groups of which the best is kept, a group scoring its 2 best experts, top-2, sigmoid router with exp_probs_b, normalised " +
			"weights scaled by 2.5, one shared expert), untied output"
		s.MoE = &MoE{Experts: 8, Used: 2, Hidden: 32, LeadingDense: 1, Sigmoid: true, SelectBias: true,
			Norm: true, Scale: 2.5, SharedCount: 1}
		mscale = 1
	} else {
		s.Notes = "DeepSeek-V2-Lite-like deepseek2: multi-head latent attention with plain attn_q (q_lora_rank 0; " +
			"otherwise as the deepseek2 shape), YaRN factor 4 over 64 with mscale_all_dim 0.707, dense layer 0, MoE " +
			"layer 1 (8 experts, top-2, softmax router without a gating key, weights neither normalised nor scaled, " +
			"two shared experts), untied output"
	}
	s.Keys = func(g *Gen, an string) {
		for _, kv := range []struct {
			key string
			v   int
		}{
			{"attention.q_lora_rank", qRank}, {"attention.kv_lora_rank", rank}, {"attention.key_length", rank + rope},
			{"attention.value_length", rank}, {"attention.key_length_mla", nope + rope},
			{"attention.value_length_mla", vdim}, {"rope.scaling.original_context_length", 64},
		} {
			g.B.Set(an+"."+kv.key, uint32(kv.v))
		}
		g.B.Set(an+".rope.scaling.type", "yarn")
		g.B.Set(an+".rope.scaling.factor", float32(4))
		// The converter writes 0.1*mscale_all_dim.
		g.B.Set(an+".rope.scaling.yarn_log_multiplier", 0.1*mscale)
		if v3 {
			g.B.Set(an+".expert_group_count", uint32(2))
			g.B.Set(an+".expert_group_used_count", uint32(1))
		}
	}
	s.Attention = func(g *Gen, p string, _ int) {
		g.Norm(p+"attn_norm.weight", dim)
		if qRank > 0 {
			g.Mat(p+"attn_q_a.weight", 1, qRank, dim)
			g.Norm(p+"attn_q_a_norm.weight", qRank)
			g.Mat(p+"attn_q_b.weight", 1, heads*(nope+rope), qRank)
		} else {
			g.Mat(p+"attn_q.weight", 1, heads*(nope+rope), dim)
		}
		g.Mat(p+"attn_kv_a_mqa.weight", 1, rank+rope, dim)
		g.Norm(p+"attn_kv_a_norm.weight", rank)
		g.Mat(p+"attn_k_b.weight", heads, rank, nope) // ggml dims {nope, rank, heads}
		g.Mat(p+"attn_v_b.weight", heads, vdim, rank) // {rank, vdim, heads}
		g.Mat(p+"attn_output.weight", 1, dim, heads*vdim)
	}
	return s
}

// ByName is the shape called name.
func ByName(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("tiny: no shape %q", name)
}

// Gen writes one file: the builder and the weight stream.
type Gen struct {
	B   *gguf.Builder
	rng *rand.PCG
}

// Uniform returns n values uniform in [-sqrt3 std, sqrt3 std) (variance
// std²) from the stream. The arithmetic is exact up to the single final
// rounding, so no platform's fused multiply-add can change a bit.
func (g *Gen) Uniform(n int, std float64) []float32 {
	c := math.Sqrt(3) * std
	out := make([]float32, n)
	for i := range out {
		u := int64(g.rng.Uint64()>>40) - 1<<23 // 24 bits, centred
		out[i] = float32(float64(u) / (1 << 23) * c)
	}
	return out
}

// Mat adds an F32 matrix of rows x cols (n > 1: n of them, a 3-D tensor
// of experts) with entries of standard deviation 1/sqrt(cols), so that
// activations keep their scale through the layers.
func (g *Gen) Mat(name string, n, rows, cols int) {
	dims := []uint64{uint64(cols), uint64(rows)}
	if n > 1 {
		dims = append(dims, uint64(n))
	}
	g.B.AddF32(name, dims, g.Uniform(n*rows*cols, 1/math.Sqrt(float64(cols))))
}

// Vec adds a vector of n values of standard deviation std around centre.
func (g *Gen) Vec(name string, n int, centre, std float64) {
	v := g.Uniform(n, std)
	for i := range v {
		v[i] += float32(centre)
	}
	g.B.AddF32(name, []uint64{uint64(n)}, v)
}

// Norm adds a norm weight: 1 with a jitter of 0.1, so that a norm applied
// without its weight is caught.
func (g *Gen) Norm(name string, n int) { g.Vec(name, n, 1, 0.1) }

// Bias adds a bias of standard deviation 0.1.
func (g *Gen) Bias(name string, n int) { g.Vec(name, n, 0, 0.1) }

// Build returns the shape's GGUF file.
func Build(s Shape) ([]byte, error) {
	if s.Layers <= 0 || s.Dim <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0 || s.Vocab < FirstNormal+256 {
		return nil, fmt.Errorf("tiny: shape %q is incomplete (layers, dim, heads, head dim, vocab >= %d)", s.Name, FirstNormal+256)
	}
	g := &Gen{B: gguf.NewBuilder(), rng: rand.NewPCG(s.Seed, 0x6b7677617264656e)}
	b, an := g.B, s.Arch
	b.Set("general.architecture", an)
	b.Set("general.name", "kvwarden tiny "+s.Name+" (random weights)")
	b.Set("general.file_type", uint32(0))
	b.Set(an+".context_length", uint32(s.Context))
	b.Set(an+".embedding_length", uint32(s.Dim))
	b.Set(an+".feed_forward_length", uint32(s.Hidden))
	b.Set(an+".block_count", uint32(s.Layers+s.NextN))
	b.Set(an+".attention.head_count", uint32(s.Heads))
	b.Set(an+".attention.head_count_kv", uint32(s.KVHeads))
	b.Set(an+".attention.layer_norm_rms_epsilon", s.NormEps)
	b.Set(an+".rope.freq_base", s.RopeTheta)
	b.Set(an+".rope.dimension_count", uint32(s.RopeDim))
	if s.WriteHeadDim {
		b.Set(an+".attention.key_length", uint32(s.HeadDim))
		b.Set(an+".attention.value_length", uint32(s.HeadDim))
	}
	if s.NextN > 0 {
		b.Set(an+".nextn_predict_layers", uint32(s.NextN))
	}
	if r := s.LongRoPE; r != nil {
		b.Set(an+".rope.scaling.original_context_length", uint32(r.OrigContext))
		b.Set(an+".rope.scaling.attn_factor", r.AttnFactor)
	}
	if m := s.MoE; m != nil {
		b.Set(an+".expert_count", uint32(m.Experts))
		b.Set(an+".expert_used_count", uint32(m.Used))
		b.Set(an+".expert_feed_forward_length", uint32(m.Hidden))
		if m.SharedHidden > 0 {
			b.Set(an+".expert_shared_feed_forward_length", uint32(m.SharedHidden))
		}
		if m.SharedCount > 0 {
			b.Set(an+".expert_shared_count", uint32(m.SharedCount))
		}
		if m.LeadingDense > 0 {
			b.Set(an+".leading_dense_block_count", uint32(m.LeadingDense))
		}
		if m.Sigmoid {
			b.Set(an+".expert_gating_func", uint32(2))
		}
		if m.Scale != 0 {
			b.Set(an+".expert_weights_scale", m.Scale)
		}
		if m.Norm {
			b.Set(an+".expert_weights_norm", true)
		}
	}
	if s.Keys != nil {
		s.Keys(g, an)
	}
	b.PlaceholderVocab(s.Vocab)

	if r := s.LongRoPE; r != nil {
		if len(r.Long) != s.RopeDim/2 || len(r.Short) != s.RopeDim/2 {
			return nil, fmt.Errorf("tiny: shape %q: %d long and %d short LongRoPE factors, want %d", s.Name, len(r.Long), len(r.Short), s.RopeDim/2)
		}
		b.AddF32("rope_factors_long.weight", []uint64{uint64(len(r.Long))}, r.Long)
		b.AddF32("rope_factors_short.weight", []uint64{uint64(len(r.Short))}, r.Short)
	}
	g.Mat("token_embd.weight", 1, s.Vocab, s.Dim)
	for i := range s.Layers + s.NextN {
		p := fmt.Sprintf("blk.%d.", i)
		if s.Attention != nil {
			s.Attention(g, p, i)
		} else {
			s.attention(g, p)
		}
		if s.FFN != nil {
			s.FFN(g, p, i)
		} else {
			s.ffn(g, p, i)
		}
		if i >= s.Layers {
			// NextN (multi-token prediction) tensors, as GLM-4.5 files
			// carry them; nothing reads them in the decoder's pass.
			g.Mat(p+"nextn.eh_proj.weight", 1, s.Dim, 2*s.Dim)
			g.Norm(p+"nextn.enorm.weight", s.Dim)
			g.Norm(p+"nextn.hnorm.weight", s.Dim)
			g.Norm(p+"nextn.shared_head_norm.weight", s.Dim)
		}
	}
	g.Norm("output_norm.weight", s.Dim)
	if !s.Tied {
		g.Mat("output.weight", 1, s.Vocab, s.Dim)
	}
	return b.Bytes()
}

// attention writes the built-in attention tensors of layer prefix p.
func (s Shape) attention(g *Gen, p string) {
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	g.Norm(p+"attn_norm.weight", s.Dim)
	if s.FusedPhi3 {
		g.Mat(p+"attn_qkv.weight", 1, q+2*kv, s.Dim)
	} else {
		g.Mat(p+"attn_q.weight", 1, q, s.Dim)
		g.Mat(p+"attn_k.weight", 1, kv, s.Dim)
		g.Mat(p+"attn_v.weight", 1, kv, s.Dim)
	}
	if s.QKVBias {
		g.Bias(p+"attn_q.bias", q)
		g.Bias(p+"attn_k.bias", kv)
		g.Bias(p+"attn_v.bias", kv)
	}
	if s.QKNorm {
		g.Norm(p+"attn_q_norm.weight", s.HeadDim)
		g.Norm(p+"attn_k_norm.weight", s.HeadDim)
	}
	g.Mat(p+"attn_output.weight", 1, s.Dim, q)
}

// ffn writes the built-in FFN tensors of layer i (prefix p).
func (s Shape) ffn(g *Gen, p string, i int) {
	if s.PostAttnFFNNorm {
		g.Norm(p+"post_attention_norm.weight", s.Dim)
	} else {
		g.Norm(p+"ffn_norm.weight", s.Dim)
	}
	m := s.MoE
	if m == nil || i < m.LeadingDense {
		if s.FusedPhi3 {
			g.Mat(p+"ffn_up.weight", 1, 2*s.Hidden, s.Dim) // gate rows, then up
		} else {
			g.Mat(p+"ffn_gate.weight", 1, s.Hidden, s.Dim)
			g.Mat(p+"ffn_up.weight", 1, s.Hidden, s.Dim)
		}
		g.Mat(p+"ffn_down.weight", 1, s.Dim, s.Hidden)
		return
	}
	g.Mat(p+"ffn_gate_inp.weight", 1, m.Experts, s.Dim)
	if m.SelectBias {
		// Large enough to change which experts are selected.
		g.Vec(p+"exp_probs_b.bias", m.Experts, 0, 0.3)
	}
	g.Mat(p+"ffn_gate_exps.weight", m.Experts, m.Hidden, s.Dim)
	g.Mat(p+"ffn_up_exps.weight", m.Experts, m.Hidden, s.Dim)
	g.Mat(p+"ffn_down_exps.weight", m.Experts, s.Dim, m.Hidden)
	shared := m.SharedHidden + m.SharedCount*m.Hidden
	if shared == 0 {
		return
	}
	if m.SharedGate {
		g.Vec(p+"ffn_gate_inp_shexp.weight", s.Dim, 0, 1/math.Sqrt(float64(s.Dim)))
	}
	g.Mat(p+"ffn_gate_shexp.weight", 1, shared, s.Dim)
	g.Mat(p+"ffn_up_shexp.weight", 1, shared, s.Dim)
	g.Mat(p+"ffn_down_shexp.weight", 1, s.Dim, shared)
}

// SHA256 is the hex SHA-256 of data.
func SHA256(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}
