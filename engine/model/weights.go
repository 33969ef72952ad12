// Package model owns decoder models: their hyperparameters, their weights
// and the loaders that read them (GGUF through the architecture registry of
// engine/model/arch, llama2.c checkpoints), and the batched CPU forward
// pass, which interprets the arch.Block description and reads and writes
// K/V only through the page tables of internal/kvcache.
package model

import (
	"fmt"
	"io"
	"math"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// ErrUnsupported is wrapped by errors about models the engine cannot run:
// an unknown architecture, tensor type or RoPE scaling type, or a missing
// or unexpected tensor. The C API reports it as KVW_ERR_UNSUPPORTED.
var ErrUnsupported = arch.ErrUnsupported

// Config holds the hyperparameters of a decoder.
type Config struct {
	Dim        int // model width
	Hidden     int // FFN width
	Layers     int
	Heads      int // query heads
	KVHeads    int // key/value heads (GQA when < Heads)
	HeadDim    int // Dim / Heads unless the file says otherwise
	Vocab      int
	MaxContext int // context length the model claims

	NormEps   float32 // RMSNorm epsilon
	RopeTheta float32 // RoPE frequency base
	RopeDim   int     // rotated dimensions per head (HeadDim when 0)

	// Arch is the GGUF architecture name ("llama" for llama2.c files and
	// synthetic models); Block describes its transformer block (the zero
	// value is Llama's).
	Arch  string
	Block arch.Block

	BOS, EOS int // -1 when absent

	// Pooling is the file's <arch>.pooling_type (PoolingUnset when it has
	// none: a generative model); NonCausal is <arch>.attention.causal
	// false (every token attends to the whole input, which must then be
	// computed in one step).
	Pooling   Pooling
	NonCausal bool
}

// KVDim is the width of one token's K (or V) vector in one layer.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// Validate checks that the shapes are consistent. Loaders call it before
// touching tensor data.
func (c Config) Validate() error {
	switch {
	case c.Dim <= 0, c.Hidden <= 0, c.Layers <= 0, c.Heads <= 0, c.KVHeads <= 0, c.Vocab <= 0, c.HeadDim <= 0:
		return fmt.Errorf("model: non-positive dimension in %+v", c)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("model: %d heads is not a multiple of %d KV heads", c.Heads, c.KVHeads)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("model: head dim %d is odd; RoPE needs pairs", c.HeadDim)
	case c.RopeDim < 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0:
		return fmt.Errorf("model: rope dim %d invalid for head dim %d", c.RopeDim, c.HeadDim)
	case c.NormEps <= 0:
		return fmt.Errorf("model: norm epsilon %g must be positive", c.NormEps)
	case c.RopeTheta <= 0:
		return fmt.Errorf("model: rope theta %g must be positive", c.RopeTheta)
	}
	return c.Block.Validate()
}

// Layer holds one transformer block. Matrices are row-major with Rows =
// output features: Q is [Heads*HeadDim][Dim], K and V are [KVDim][Dim], O is
// [Dim][Heads*HeadDim], Gate and Up are [Hidden][Dim], Down is [Dim][Hidden].
// Config.Block says how Q and K rotate and which optional parts apply.
type Layer struct {
	AttnNorm []float32
	Q, K, V  *ml.Matrix
	O        *ml.Matrix
	FFNNorm  []float32
	Gate     *ml.Matrix // w1
	Up       *ml.Matrix // w3
	Down     *ml.Matrix // w2

	// Optional biases (nil: none), added after the product.
	QBias, KBias, VBias, OBias []float32
	// QNorm and KNorm are the per-head RMSNorm weights ([HeadDim]) when
	// Block.QKNorm.
	QNorm, KNorm []float32
	// PostAttnNorm and PostFFNNorm ([Dim]) when Block.PostNorms.
	PostAttnNorm, PostFFNNorm []float32
	// Sinks ([Heads]), when not nil, add one logit per query head to the
	// attention softmax that has no value (gpt-oss's attn_sinks).
	Sinks []float32
	// MoE is the mixture-of-experts FFN of a layer for which
	// Config.Block.MoELayer holds; Gate, Up and Down are nil there.
	MoE *Experts
	// MLA is the latent attention of a Block.MLA model (K and V are nil,
	// Q is attn_q or nil for a q LoRA, O is [Dim][Heads*MLA.VDim]).
	MLA *LatentAttn
}

// Weights is a loaded model. Embed is [Vocab][Dim]; Output is [Vocab][Dim]
// and may be the same matrix as Embed (tied embeddings).
type Weights struct {
	Config Config
	Name   string // human-readable origin, e.g. the file name or "synthetic"
	Embed  *ml.Matrix
	Layers []Layer
	Norm   []float32
	Output *ml.Matrix
	// RopeFreqs, when not nil, divides each rotary frequency ([RopeDim/2]
	// values): Llama 3.1+ RoPE scaling as GGUF files carry it.
	RopeFreqs []float32
	// RopeLong and RopeShort, when not nil, are LongRoPE's two sets of
	// frequency divisors (rope_factors_long/short, [RopeDim/2] values), of
	// which a runner uses one: see RopeFactors.
	RopeLong, RopeShort []float32
	// ChatTemplates are the file's chat templates: tokenizer.chat_template
	// under "" and tokenizer.chat_template.<name> under <name>. Nil when the
	// file has none (llama2.c checkpoints never do).
	ChatTemplates map[string]string
	// Encoder, when set, makes the model a BERT-style encoder (bert.go).
	Encoder *Encoder
	// Rank is a reranker's classification head (pooling rank), or nil.
	Rank *RankHead
	// Placement says how a loader placed the file in memory (mapped,
	// recached or copied; 2 MiB or 4 KiB pages) and why; zero for weights
	// not loaded from a file.
	Placement mmap.Placement

	closer io.Closer // releases a memory map, if any
}

// Close releases the file mapping behind the weights, if any. The weights
// must not be used afterwards.
func (w *Weights) Close() error {
	if w == nil || w.closer == nil {
		return nil
	}
	c := w.closer
	w.closer = nil
	return c.Close()
}

// RopeFactors is the set of RoPE frequency divisors (nil: none) that a
// runner for requests of up to maxContext tokens uses, chosen as llama.cpp's
// get_rope_factors chooses: RopeFreqs when the model has them, else
// LongRoPE's long factors when maxContext exceeds the original context
// length (Scaling.OrigContext, or the model's MaxContext when the file
// does not say), else its short ones. llama.cpp compares its per-sequence
// context size, so the choice holds for every position of every request
// (Hugging Face instead switches by the current sequence length).
func (w *Weights) RopeFactors(maxContext int) []float32 {
	if w.RopeFreqs != nil {
		return w.RopeFreqs
	}
	orig := w.Config.Block.Scaling.OrigContext
	if orig <= 0 {
		orig = w.Config.MaxContext
	}
	if maxContext > orig {
		return w.RopeLong
	}
	return w.RopeShort
}

// SetCloser records what Close releases. Loaders use it.
func (w *Weights) SetCloser(c io.Closer) { w.closer = c }

// Check verifies every tensor against Config, so a loader can hand over
// weights that the forward pass can trust.
func (w *Weights) Check() error {
	c := w.Config
	if err := c.Validate(); err != nil {
		return err
	}
	qDim := c.Heads * c.HeadDim
	mat := func(name string, m *ml.Matrix, rows, cols int) error {
		if m == nil {
			return fmt.Errorf("%w: tensor %s missing", ErrUnsupported, name)
		}
		if m.Rows != rows || m.Cols != cols {
			return fmt.Errorf("model: tensor %s is %dx%d, want %dx%d", name, m.Rows, m.Cols, rows, cols)
		}
		rb, err := m.Type.RowBytes(m.Cols)
		if err != nil {
			return fmt.Errorf("model: tensor %s: %w", name, err)
		}
		if len(m.Data) != rb*m.Rows {
			return fmt.Errorf("model: tensor %s has %d bytes, want %d", name, len(m.Data), rb*m.Rows)
		}
		return nil
	}
	vec := func(name string, v []float32, n int) error {
		if len(v) != n {
			return fmt.Errorf("model: tensor %s has %d values, want %d", name, len(v), n)
		}
		return nil
	}
	if err := mat("token_embd", w.Embed, c.Vocab, c.Dim); err != nil {
		return err
	}
	if err := mat("output", w.Output, c.Vocab, c.Dim); err != nil {
		return err
	}
	if err := vec("output_norm", w.Norm, c.Dim); err != nil {
		return err
	}
	for _, rf := range []struct {
		name string
		v    []float32
	}{{"rope_freqs", w.RopeFreqs}, {"rope_factors_long", w.RopeLong}, {"rope_factors_short", w.RopeShort}} {
		if rf.v == nil {
			continue
		}
		rd := c.RopeDim
		if rd == 0 {
			rd = c.HeadDim
		}
		if err := vec(rf.name, rf.v, rd/2); err != nil {
			return err
		}
		for i, f := range rf.v {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("model: %s[%d] = %g; frequency factors must be positive", rf.name, i, f)
			}
		}
	}
	opt := func(name string, v []float32, n int) error {
		if v == nil {
			return nil
		}
		return vec(name, v, n)
	}
	need := func(name string, v []float32, n int, want bool) error {
		if !want {
			if v != nil {
				return fmt.Errorf("model: tensor %s is present but the block description does not use it", name)
			}
			return nil
		}
		if v == nil {
			return fmt.Errorf("%w: tensor %s missing", ErrUnsupported, name)
		}
		return vec(name, v, n)
	}
	if w.Encoder != nil {
		return w.checkEncoder()
	}
	if len(w.Layers) != c.Layers {
		return fmt.Errorf("model: %d layers loaded, config says %d", len(w.Layers), c.Layers)
	}
	for i, l := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ffn := []error{
			mat(p+"ffn_gate", l.Gate, c.Hidden, c.Dim),
			mat(p+"ffn_up", l.Up, c.Hidden, c.Dim),
			mat(p+"ffn_down", l.Down, c.Dim, c.Hidden),
		}
		if c.Block.MoELayer(i) {
			ffn = []error{checkExperts(p, l, c, mat, vec)}
		} else if l.MoE != nil {
			ffn = []error{fmt.Errorf("model: layer %d has experts but the block description makes it dense", i)}
		}
		attn := []error{
			mat(p+"attn_q", l.Q, qDim, c.Dim),
			mat(p+"attn_k", l.K, c.KVDim(), c.Dim),
			mat(p+"attn_v", l.V, c.KVDim(), c.Dim),
			mat(p+"attn_output", l.O, c.Dim, qDim),
		}
		if c.Block.MLA.KVRank > 0 {
			attn = []error{checkLatent(p, l, c, mat, vec)}
		} else if l.MLA != nil {
			attn = []error{fmt.Errorf("model: layer %d has latent attention weights but the block description has none", i)}
		}
		ffn = append(attn, ffn...)
		for _, e := range append([]error{
			vec(p+"attn_norm", l.AttnNorm, c.Dim),
			vec(p+"ffn_norm", l.FFNNorm, c.Dim),
			opt(p+"attn_q.bias", l.QBias, qDim),
			opt(p+"attn_k.bias", l.KBias, c.KVDim()),
			opt(p+"attn_v.bias", l.VBias, c.KVDim()),
			opt(p+"attn_output.bias", l.OBias, c.Dim),
			need(p+"attn_q_norm", l.QNorm, c.HeadDim, c.Block.QKNorm),
			need(p+"attn_k_norm", l.KNorm, c.HeadDim, c.Block.QKNorm),
			need(p+"post_attention_norm", l.PostAttnNorm, c.Dim, c.Block.PostNorms),
			need(p+"post_ffw_norm", l.PostFFNNorm, c.Dim, c.Block.PostNorms),
			opt(p+"attn_sinks", l.Sinks, c.Heads),
		}, ffn...) {
			if e != nil {
				return e
			}
		}
	}
	return nil
}
