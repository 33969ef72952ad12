package embedtest

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// BERTSpec describes a random-weight BERT GGUF (BGE / MiniLM shaped, tiny).
type BERTSpec struct {
	Pooling int  // GGUF pooling_type: 1 mean, 2 cls, 4 rank
	Rank    bool // writes the classification head (cls, cls.output)
	Lower   bool // tokenizer.ggml.normalizer.lowercase
	// Nomic writes architecture nomic-bert (nomic-embed-text): RoPE
	// (freq_base 1000) instead of position embeddings, fused attn_qkv, a
	// SwiGLU FFN without biases.
	Nomic bool
	// Modern writes architecture modern-bert (ModernBERT): pre-LayerNorm
	// blocks without biases (none before layer 0's attention), fused
	// attn_qkv, NeoX RoPE (freq_base 160000, 10000 on local layers), a
	// GEGLU FFN, a final output_norm and a symmetric sliding window of
	// ModernWindow on every layer but the first of each 3.
	Modern bool
	// Jina writes architecture jina-bert-v2 (jina-embeddings-v2): BERT
	// with ALiBi instead of position embeddings, LayerNorms of Q and K,
	// attn_norm_2, and a GEGLU FFN (ffn_up of twice the rows) or, with
	// JinaGate, a GELU-gated one (ffn_gate).
	Jina, JinaGate bool
	// Activation, when set, is written as modern-bert.hidden_activation.
	Activation string
	// Type is the matrices' weight type (F32, the zero value; F16, BF16,
	// Q8_0 or Q4_0); vectors stay F32.
	Type ml.Type
}

// ModernWindow is the sliding_window of Modern files: 4 positions each
// side, so inputs of a dozen tokens or more see it.
const ModernWindow = 8

// BERT dimensions of the files WriteBERT builds.
const (
	BERTDim     = 32
	BERTHidden  = 64
	BERTLayers  = 2
	BERTHeads   = 4
	BERTContext = 64
)

// BERTVocab is the WordPiece vocabulary WriteBERT writes, as llama.cpp's
// converter stores it: [PAD] and unused slots, [UNK] 100, [CLS] 101, [SEP]
// 102, [MASK] 103, word-initial pieces prefixed with U+2581 and
// continuations bare: every ASCII letter both ways, a few words and
// suffixes, and punctuation.
func BERTVocab() (tokens []string, types []int32) {
	add := func(s string, t int32) { tokens, types = append(tokens, s), append(types, t) }
	add("[PAD]", 3)
	for i := 1; i < 100; i++ {
		add(fmt.Sprintf("[unused%d]", i), 5)
	}
	add("[UNK]", 2)
	add("[CLS]", 3)
	add("[SEP]", 3)
	add("[MASK]", 3)
	for c := 'a'; c <= 'z'; c++ {
		add("\u2581"+string(c), 1)
		add(string(c), 1)
	}
	for _, w := range []string{"the", "quick", "brown", "fox", "jump", "hello", "world", "cat", "dog", "paris", "capital", "france", "what", "is", "of"} {
		add("\u2581"+w, 1)
	}
	for _, s := range []string{"ing", "ed", "ly"} { // "s" is a letter already: texts are unique, as llama.cpp requires
		add(s, 1)
	}
	for _, p := range []string{",", ".", "!", "?", "'", "-", "$"} {
		add("\u2581"+p, 1)
	}
	return tokens, types
}

// rng is splitmix64, for weights that are the same on every machine.
type rng uint64

func (r *rng) next() float32 {
	*r += 0x9E3779B97F4A7C15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float32(z>>40)/float32(1<<24)*2 - 1 // uniform in [-1, 1)
}

// WriteBERT writes a random-weight BERT file and returns its path and the
// weights as the engine loads them (for references).
func WriteBERT(t testing.TB, s BERTSpec) (string, *model.Weights) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bert.gguf")
	require.NoError(t, WriteBERTFile(path, s))
	w, _, err := model.Load(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	return path, w
}

// WriteBERTFile writes the file WriteBERT describes to path.
func WriteBERTFile(path string, s BERTSpec) error {
	return bertBuilder(s, TinyBERT).WriteFile(path)
}

// BERTShape is the size of a BERT file: TinyBERT for tests, BGEBase for
// benchmarks.
type BERTShape struct {
	Dim, Hidden, Layers, Heads, Context, Vocab int
}

var (
	TinyBERT = BERTShape{Dim: BERTDim, Hidden: BERTHidden, Layers: BERTLayers, Heads: BERTHeads, Context: BERTContext}
	// BGEBase is bge-base-en-v1.5's shape (BERT-base).
	BGEBase = BERTShape{Dim: 768, Hidden: 3072, Layers: 12, Heads: 12, Context: 512, Vocab: 30522}
)

// BERTBytes is a random-weight BERT GGUF of the given shape, in memory.
func BERTBytes(s BERTSpec, shape BERTShape) ([]byte, error) {
	return bertBuilder(s, shape).Bytes()
}

func bertBuilder(s BERTSpec, shape BERTShape) *gguf.Builder {
	r := rng(0x62657274)
	tokens, types := BERTVocab()
	for i := len(tokens); i < shape.Vocab; i++ {
		tokens, types = append(tokens, fmt.Sprintf("[pad%d]", i)), append(types, 5)
	}
	BERTDim, BERTHidden, BERTLayers, BERTContext := shape.Dim, shape.Hidden, shape.Layers, shape.Context
	b := gguf.NewBuilder()
	a := "bert"
	switch {
	case s.Nomic:
		a = "nomic-bert"
		b.Set(a+".rope.freq_base", float32(1000))
	case s.Jina:
		a = "jina-bert-v2"
	case s.Modern:
		a = "modern-bert"
		b.Set(a+".rope.freq_base", float32(160000))
		b.Set(a+".rope.freq_base_swa", float32(10000))
		b.Set(a+".attention.sliding_window", uint32(ModernWindow))
		b.Set(a+".attention.sliding_window_pattern", uint32(3))
		if s.Activation != "" {
			b.Set(a+".hidden_activation", s.Activation)
		}
	}
	b.Set("general.architecture", a)
	b.Set(a+".context_length", uint32(BERTContext))
	b.Set(a+".embedding_length", uint32(BERTDim))
	b.Set(a+".feed_forward_length", uint32(BERTHidden))
	b.Set(a+".block_count", uint32(BERTLayers))
	b.Set(a+".attention.head_count", uint32(shape.Heads))
	b.Set(a+".attention.layer_norm_epsilon", float32(1e-12))
	b.Set(a+".attention.causal", false)
	b.Set(a+".pooling_type", uint32(s.Pooling))
	b.Set("tokenizer.ggml.model", "bert")
	b.Set("tokenizer.ggml.tokens", tokens)
	b.Set("tokenizer.ggml.token_type", types)
	b.Set("tokenizer.ggml.token_type_count", uint32(2))
	b.Set("tokenizer.ggml.bos_token_id", uint32(101))
	b.Set("tokenizer.ggml.seperator_token_id", uint32(102))
	b.Set("tokenizer.ggml.unknown_token_id", uint32(100))
	b.Set("tokenizer.ggml.padding_token_id", uint32(0))
	b.Set("tokenizer.ggml.normalizer.lowercase", s.Lower)
	mat := func(name string, rows, cols int, scale float32) {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = r.next() * scale / float32(math.Sqrt(float64(cols)))
		}
		// The token-type and position tables stay F32 as the converter
		// writes them (llama.cpp adds the type row as an f32 view).
		if s.Type == ml.F32 || name == "token_types.weight" || name == "position_embd.weight" {
			b.AddF32(name, []uint64{uint64(cols), uint64(rows)}, v)
			return
		}
		m, err := ml.Quantize(s.Type, rows, cols, v)
		if err != nil {
			panic(err) // the shapes are this package's own: multiples of every block size
		}
		b.AddTensor(name, s.Type, []uint64{uint64(cols), uint64(rows)}, m.Data)
	}
	vec := func(name string, n int, base, spread float32) {
		v := make([]float32, n)
		for i := range v {
			v[i] = base + spread*r.next()
		}
		b.AddF32(name, []uint64{uint64(n)}, v)
	}
	mat("token_embd.weight", len(tokens), BERTDim, 4)
	if s.Modern {
		modernBlocks(s, shape, mat, vec)
		return b
	}
	mat("token_types.weight", 2, BERTDim, 4)
	if !s.Nomic && !s.Jina {
		mat("position_embd.weight", BERTContext, BERTDim, 4)
	}
	vec("token_embd_norm.weight", BERTDim, 1, 0.2)
	vec("token_embd_norm.bias", BERTDim, 0, 0.1)
	for i := range BERTLayers {
		p := fmt.Sprintf("blk.%d.", i)
		if s.Nomic {
			mat(p+"attn_qkv.weight", 3*BERTDim, BERTDim, 1.7)
			mat(p+"attn_output.weight", BERTDim, BERTDim, 1.7)
		} else {
			for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
				mat(p+n+".weight", BERTDim, BERTDim, 1.7)
				vec(p+n+".bias", BERTDim, 0, 0.1)
			}
		}
		vec(p+"attn_output_norm.weight", BERTDim, 1, 0.2)
		vec(p+"attn_output_norm.bias", BERTDim, 0, 0.1)
		if s.Jina {
			for _, n := range []string{"attn_q_norm", "attn_k_norm", "attn_norm_2"} {
				vec(p+n+".weight", BERTDim, 1, 0.2)
				vec(p+n+".bias", BERTDim, 0, 0.1)
			}
			up := 2 * BERTHidden
			if s.JinaGate {
				up = BERTHidden
				mat(p+"ffn_gate.weight", BERTHidden, BERTDim, 1.7)
			}
			mat(p+"ffn_up.weight", up, BERTDim, 1.7)
			vec(p+"ffn_up.bias", up, 0, 0.1)
			mat(p+"ffn_down.weight", BERTDim, BERTHidden, 1.7)
			vec(p+"ffn_down.bias", BERTDim, 0, 0.1)
		} else if s.Nomic {
			mat(p+"ffn_gate.weight", BERTHidden, BERTDim, 1.7)
			mat(p+"ffn_up.weight", BERTHidden, BERTDim, 1.7)
			mat(p+"ffn_down.weight", BERTDim, BERTHidden, 1.7)
		} else {
			mat(p+"ffn_up.weight", BERTHidden, BERTDim, 1.7)
			vec(p+"ffn_up.bias", BERTHidden, 0, 0.1)
			mat(p+"ffn_down.weight", BERTDim, BERTHidden, 1.7)
			vec(p+"ffn_down.bias", BERTDim, 0, 0.1)
		}
		vec(p+"layer_output_norm.weight", BERTDim, 1, 0.2)
		vec(p+"layer_output_norm.bias", BERTDim, 0, 0.1)
	}
	if s.Rank {
		mat("cls.weight", BERTDim, BERTDim, 1.7)
		vec("cls.bias", BERTDim, 0, 0.1)
		mat("cls.output.weight", 1, BERTDim, 1.7)
		vec("cls.output.bias", 1, 0, 0.1)
	}
	return b
}

// modernBlocks writes a modern-bert file's tensors after token_embd.
func modernBlocks(s BERTSpec, shape BERTShape, mat func(string, int, int, float32), vec func(string, int, float32, float32)) {
	dim, hid := shape.Dim, shape.Hidden
	vec("token_embd_norm.weight", dim, 1, 0.2)
	for i := range shape.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		if i > 0 {
			vec(p+"attn_norm.weight", dim, 1, 0.2)
		}
		mat(p+"attn_qkv.weight", 3*dim, dim, 1.7)
		mat(p+"attn_output.weight", dim, dim, 1.7)
		vec(p+"ffn_norm.weight", dim, 1, 0.2)
		mat(p+"ffn_up.weight", 2*hid, dim, 1.7)
		mat(p+"ffn_down.weight", dim, hid, 1.7)
	}
	vec("output_norm.weight", dim, 1, 0.2)
}
