// Package model owns the Llama architecture: its hyperparameters, its
// weights and the loaders that read them (GGUF, llama2.c checkpoints), and
// the batched forward pass that reads and writes K/V only through the page
// tables of engine/kvcache.
package model

import (
	"fmt"
	"io"

	"github.com/kvwarden/kvwarden/engine/ml"
)

// Config holds the hyperparameters of a Llama-family decoder.
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
	// RopeScaling is "" (none) or "linear"; RopeScale is the factor.
	RopeScaling string
	RopeScale   float32

	BOS, EOS int // -1 when absent
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
	return nil
}

// Layer holds one transformer block. Matrices are row-major with Rows =
// output features: Q is [Heads*HeadDim][Dim], K and V are [KVDim][Dim], O is
// [Dim][Heads*HeadDim], Gate and Up are [Hidden][Dim], Down is [Dim][Hidden].
// Q and K rotate adjacent pairs (i, i+1) within each head, as llama2.c and
// llama.cpp's GGUF files for architecture "llama" expect.
type Layer struct {
	AttnNorm []float32
	Q, K, V  *ml.Matrix
	O        *ml.Matrix
	FFNNorm  []float32
	Gate     *ml.Matrix // w1
	Up       *ml.Matrix // w3
	Down     *ml.Matrix // w2
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
	// ChatTemplates are the file's chat templates: tokenizer.chat_template
	// under "" and tokenizer.chat_template.<name> under <name>. Nil when the
	// file has none (llama2.c checkpoints never do).
	ChatTemplates map[string]string

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
			return fmt.Errorf("model: tensor %s missing", name)
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
	if len(w.Layers) != c.Layers {
		return fmt.Errorf("model: %d layers loaded, config says %d", len(w.Layers), c.Layers)
	}
	for i, l := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		for _, e := range []error{
			vec(p+"attn_norm", l.AttnNorm, c.Dim),
			mat(p+"attn_q", l.Q, qDim, c.Dim),
			mat(p+"attn_k", l.K, c.KVDim(), c.Dim),
			mat(p+"attn_v", l.V, c.KVDim(), c.Dim),
			mat(p+"attn_output", l.O, c.Dim, qDim),
			vec(p+"ffn_norm", l.FFNNorm, c.Dim),
			mat(p+"ffn_gate", l.Gate, c.Hidden, c.Dim),
			mat(p+"ffn_up", l.Up, c.Hidden, c.Dim),
			mat(p+"ffn_down", l.Down, c.Dim, c.Hidden),
		} {
			if e != nil {
				return e
			}
		}
	}
	return nil
}
