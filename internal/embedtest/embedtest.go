// Package embedtest builds random-weight embedding model files (GGUF) for
// the tests of every surface: decoder architectures with a pooling type.
package embedtest

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// Spec describes a random-weight embedding GGUF.
type Spec struct {
	Arch      string // "llama" (e5-mistral-like) or "qwen3" (Qwen3-Embedding-like)
	Pooling   int    // GGUF pooling_type; -1 writes no key (a generative model)
	NonCausal bool   // writes attention.causal = false
	AddEOS    bool
	// Type is the matrices' weight type (F32, the zero value; F16, BF16,
	// Q8_0 or Q4_0); norms stay F32.
	Type ml.Type
	// Reranker writes a Qwen3-Reranker-style head: cls.output with two
	// rows (classifier.output_labels yes, no) and a rerank template
	// (tokenizer.chat_template.rerank, RerankTemplate). Set Pooling 4.
	Reranker bool
	// Shape is the model's size; nil is the tests' tiny shape (Vocab
	// tokens, 2 layers of 64). Its Vocab sets the vocabulary's size.
	Shape *model.Config
}

// Qwen3Embedding06B is Qwen3-Embedding-0.6B's shape (for benchmarks: the
// file is about 640 MB at Q8_0) with Write's token IDs (BOS 1, EOS 2).
var Qwen3Embedding06B = model.Config{Dim: 1024, Hidden: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
	Vocab: 151669, MaxContext: 32768, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 128, BOS: 1, EOS: 2}

// RerankTemplate is the rerank template Write stores with Reranker.
const RerankTemplate = "<s>query: {query}\ndocument: {document}"

// Vocab is the vocabulary size of the files Write builds: a SentencePiece
// vocabulary of <unk>, <s>, </s>, the 256 byte tokens and filler pieces.
const Vocab = 320

// Write writes m with random weights (model.Synthetic, F32) and
// norms that are not all ones, so that every norm weight matters, and
// returns its path and the weights the reference reads.
func Write(t testing.TB, m Spec) (string, *model.Weights) {
	t.Helper()
	cfg := model.Config{
		Dim: 64, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: Vocab, MaxContext: 512, NormEps: 1e-6, RopeTheta: 10000, RopeDim: 16,
		BOS: 1, EOS: 2,
	}
	if m.Shape != nil {
		cfg = *m.Shape
	}
	w, err := model.Synthetic(cfg, 0x656d6264, m.Type)
	require.NoError(t, err)
	norm := func(n, salt int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 0.75 + 0.5*float32((i*7+salt)%11)/11
		}
		return v
	}
	w.Norm = norm(cfg.Dim, 99)
	for l := range w.Layers {
		L := &w.Layers[l]
		L.AttnNorm, L.FFNNorm = norm(cfg.Dim, 2*l), norm(cfg.Dim, 2*l+1)
		if m.Arch == "qwen3" {
			L.QNorm, L.KNorm = norm(cfg.HeadDim, 3*l+5), norm(cfg.HeadDim, 3*l+6)
		}
	}
	w.Config.NonCausal = m.NonCausal

	b := gguf.NewBuilder()
	a := m.Arch
	b.Set("general.architecture", a)
	b.Set(a+".context_length", uint32(cfg.MaxContext))
	b.Set(a+".embedding_length", uint32(cfg.Dim))
	b.Set(a+".feed_forward_length", uint32(cfg.Hidden))
	b.Set(a+".block_count", uint32(cfg.Layers))
	b.Set(a+".attention.head_count", uint32(cfg.Heads))
	b.Set(a+".attention.head_count_kv", uint32(cfg.KVHeads))
	b.Set(a+".attention.key_length", uint32(cfg.HeadDim))
	b.Set(a+".attention.value_length", uint32(cfg.HeadDim))
	b.Set(a+".attention.layer_norm_rms_epsilon", cfg.NormEps)
	b.Set(a+".rope.freq_base", cfg.RopeTheta)
	if m.Pooling >= 0 {
		b.Set(a+".pooling_type", uint32(m.Pooling))
	}
	if m.NonCausal {
		b.Set(a+".attention.causal", false)
	}
	b.PlaceholderVocab(cfg.Vocab)
	b.Set("tokenizer.ggml.add_eos_token", m.AddEOS)
	mat := func(name string, x *ml.Matrix) {
		b.AddTensor(name, x.Type, []uint64{uint64(x.Cols), uint64(x.Rows)}, x.Data)
	}
	vec := func(name string, v []float32) { b.AddF32(name, []uint64{uint64(len(v))}, v) }
	if m.Reranker {
		b.Set(a+".classifier.output_labels", []string{"yes", "no"})
		b.Set("tokenizer.chat_template.rerank", RerankTemplate)
		head, err := model.Synthetic(model.Config{Dim: cfg.Dim, Hidden: 32, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: cfg.Dim,
			Vocab: 2, MaxContext: 8, NormEps: 1e-6, RopeTheta: 10000, BOS: -1, EOS: -1}, 0x72616e6b, ml.F32)
		require.NoError(t, err)
		w.Rank = &model.RankHead{ClsOut: head.Embed, Softmax: true, Last: true}
		mat("cls.output.weight", head.Embed)
	}
	mat("token_embd.weight", w.Embed)
	vec("output_norm.weight", w.Norm)
	for i, l := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", l.AttnNorm)
		mat(p+"attn_q.weight", l.Q)
		mat(p+"attn_k.weight", l.K)
		mat(p+"attn_v.weight", l.V)
		mat(p+"attn_output.weight", l.O)
		vec(p+"ffn_norm.weight", l.FFNNorm)
		mat(p+"ffn_gate.weight", l.Gate)
		mat(p+"ffn_up.weight", l.Up)
		mat(p+"ffn_down.weight", l.Down)
		if l.QNorm != nil {
			vec(p+"attn_q_norm.weight", l.QNorm)
			vec(p+"attn_k_norm.weight", l.KNorm)
		}
	}
	path := filepath.Join(t.TempDir(), a+".gguf")
	require.NoError(t, b.WriteFile(path))
	return path, w
}

// Tokens is a deterministic token array of n IDs inside Vocab (and inside
// BERTVocab: the IDs run from 3 to 119).
func Tokens(n, salt int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 3 + (i*37+salt*101)%117
	}
	return out
}
