package model

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// fromGGUFModernBert loads architecture "modern-bert" (ModernBERT and its
// embedding derivatives) as llama.cpp runs it: pre-LayerNorm blocks without
// biases (layer 0 has no attention norm), fused Q/K/V, NeoX RoPE, a GEGLU
// FFN (ffn_up holds the GELU half, then the linear half), a final
// output_norm, and with attention.sliding_window a symmetric window of
// sliding_window/2 positions each side on every layer but the first of
// each sliding_window_pattern (3), whose RoPE base is rope.freq_base_swa.
func fromGGUFModernBert(f *gguf.File) (*Weights, error) {
	name := f.Architecture()
	g := &ggufLoader{f: f, arch: name, used: map[string]bool{}}
	var c Config
	var err error
	get := func(dst *int, suffix string, def int) {
		if err == nil {
			*dst, err = g.uint(suffix, def)
		}
	}
	get(&c.Dim, "embedding_length", -1)
	get(&c.Hidden, "feed_forward_length", -1)
	get(&c.Layers, "block_count", -1)
	get(&c.Heads, "attention.head_count", -1)
	get(&c.MaxContext, "context_length", -1)
	get(&c.Block.Window, "attention.sliding_window", 0)
	get(&c.Block.WindowPattern, "attention.sliding_window_pattern", 3)
	if err != nil {
		return nil, err
	}
	if c.Heads == 0 || c.Dim%c.Heads != 0 {
		return nil, fmt.Errorf("model: gguf %s.embedding_length %d is not a multiple of attention.head_count %d", name, c.Dim, c.Heads)
	}
	if c.Layers > len(f.Tensors) {
		return nil, fmt.Errorf("model: gguf %s.block_count is %d but the file has %d tensors", name, c.Layers, len(f.Tensors))
	}
	// llama.cpp reads other names as GEGLU too; the gated variants of
	// other activations (Granite Embedding R2's SwiGLU) are not done here.
	switch act, _ := f.String(name + ".hidden_activation"); act {
	case "silu", "swish", "swiglu", "relu", "reglu":
		return nil, fmt.Errorf("%w: %s with hidden_activation %q (only GEGLU)", ErrUnsupported, name, act)
	}
	c.KVHeads, c.HeadDim = c.Heads, c.Dim/c.Heads
	c.RopeDim = c.HeadDim
	theta, err := g.float("rope.freq_base", 10000, false)
	if err != nil {
		return nil, err
	}
	c.RopeTheta = float32(theta)
	c.Block.RopeStyle = arch.RopeNeoX
	if c.Block.Window > 0 {
		c.Block.WindowDenseFirst, c.Block.WindowSymmetric = true, true
		local, err := g.float("rope.freq_base_swa", 10000, false)
		if err != nil {
			return nil, err
		}
		c.Block.LocalTheta = float32(local)
	}
	eps, err := g.float("attention.layer_norm_epsilon", 0, true)
	if err != nil {
		return nil, err
	}
	c.NormEps = float32(eps)
	c.Arch = name
	c.BOS, c.EOS = -1, -1
	c.Vocab = 1
	if err := g.pooling(&c); err != nil {
		return nil, err
	}
	c.NonCausal = true
	if err := c.Validate(); err != nil {
		return nil, err
	}
	enc := &Encoder{Eps: c.NormEps, RoPE: true, PreNorm: true, GEGLU: true}
	w := &Weights{Config: c, Name: "gguf", ChatTemplates: ChatTemplates(f), Encoder: enc}
	if w.Embed, err = g.matrix("token_embd", -1, c.Dim); err != nil {
		return nil, err
	}
	w.Config.Vocab = w.Embed.Rows
	if err := g.vocab(&w.Config); err != nil {
		return nil, err
	}
	c = w.Config
	w.Output = w.Embed // unused: an encoder has no logits
	if w.Norm, err = g.vector("output_norm.weight", c.Dim); err != nil {
		return nil, err
	}
	if enc.EmbNorm, err = g.vector("token_embd_norm.weight", c.Dim); err != nil {
		return nil, err
	}
	if w.Rank, err = g.rankHead(c, false); err != nil {
		return nil, err
	}
	w.Layers = make([]Layer, c.Layers)
	enc.Layers = make([]EncoderLayer, c.Layers)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		qkv, err := g.matrix(p+"attn_qkv", 3*c.Dim, c.Dim)
		if err != nil {
			return nil, err
		}
		parts := splitRows(qkv, c.Dim, c.Dim, c.Dim)
		l.Q, l.K, l.V = parts[0], parts[1], parts[2]
		for _, m := range []struct {
			dst        **ml.Matrix
			name       string
			rows, cols int
		}{{&l.O, "attn_output", c.Dim, c.Dim}, {&l.Up, "ffn_up", 2 * c.Hidden, c.Dim}, {&l.Down, "ffn_down", c.Dim, c.Hidden}} {
			if *m.dst, err = g.matrix(p+m.name, m.rows, m.cols); err != nil {
				return nil, err
			}
		}
		// Layer 0's attention norm is the identity in ModernBERT (the
		// converter writes none); llama.cpp applies one when present.
		if _, ok := f.Tensor(p + "attn_norm.weight"); ok || i > 0 {
			if l.AttnNorm, err = g.vector(p+"attn_norm.weight", c.Dim); err != nil {
				return nil, err
			}
		}
		if l.FFNNorm, err = g.vector(p+"ffn_norm.weight", c.Dim); err != nil {
			return nil, err
		}
	}
	for _, t := range f.Tensors {
		if !g.used[t.Name] {
			return nil, fmt.Errorf("%w: tensor %s (%v %v) is not part of the %s encoder this engine implements", ErrUnsupported, t.Name, t.Type, t.Dims, name)
		}
	}
	if err := w.Check(); err != nil {
		return nil, err
	}
	return w, nil
}

// checkPreNormEncoder is checkEncoder for a pre-norm encoder (modern-bert):
// no biases, an optional attention norm, a GEGLU ffn_up of 2*Hidden rows
// (or Hidden without GEGLU), a final norm.
func (w *Weights) checkPreNormEncoder() error {
	c, enc := w.Config, w.Encoder
	if len(w.Norm) != c.Dim {
		return fmt.Errorf("model: output_norm has %d values, want %d", len(w.Norm), c.Dim)
	}
	upRows := c.Hidden
	if enc.GEGLU {
		upRows = 2 * c.Hidden
	}
	for i, l := range w.Layers {
		for _, m := range []struct {
			m          *ml.Matrix
			rows, cols int
		}{{l.Q, c.Dim, c.Dim}, {l.K, c.Dim, c.Dim}, {l.V, c.Dim, c.Dim}, {l.O, c.Dim, c.Dim}, {l.Up, upRows, c.Dim}, {l.Down, c.Dim, c.Hidden}} {
			if m.m == nil || m.m.Rows != m.rows || m.m.Cols != m.cols {
				return fmt.Errorf("model: encoder layer %d has a matrix missing or of the wrong shape", i)
			}
		}
		if (l.AttnNorm != nil && len(l.AttnNorm) != c.Dim) || len(l.FFNNorm) != c.Dim {
			return fmt.Errorf("model: encoder layer %d has norms of %d/%d values, want %d", i, len(l.AttnNorm), len(l.FFNNorm), c.Dim)
		}
	}
	return nil
}

// preNormFFN finishes a pre-norm encoder layer once r.xb holds the
// attention output: x += xb, then x += down(geglu(up(LayerNorm(x)))), as
// llama.cpp's modern-bert graph (ggml_geglu: GELU of the first half of
// each ffn_up row times the second half).
func (r *Runner) preNormFFN(L *Layer, n int) {
	enc := r.w.Encoder
	dim, hid := r.cfg.Dim, r.cfg.Hidden
	for i := range n {
		x := r.x[i*dim : (i+1)*dim]
		ml.Add(x, r.xb[i*dim:(i+1)*dim])
		LayerNorm(r.xb[i*dim:(i+1)*dim], x, L.FFNNorm, nil, enc.Eps)
	}
	ml.MatMulBatch(r.hb[:n*2*hid], r.xb[:n*dim], n, L.Up)
	out := r.hb2[:n*hid]
	geglu(out, r.hb[:n*2*hid], n, hid)
	ml.MatMulBatch(r.xb[:n*dim], out, n, L.Down)
	for i := range n {
		ml.Add(r.x[i*dim:(i+1)*dim], r.xb[i*dim:(i+1)*dim])
	}
}

// geglu sets out (n x hid) to GELU of the first half of each row of h
// (n x 2hid, overwritten) times its second half, as ggml_geglu.
func geglu(out, h []float32, n, hid int) {
	ml.Parallel(n, max(1, 8192/hid), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := h[i*2*hid : i*2*hid+hid]
			ml.GELUTanhSlice(g)
			o := out[i*hid : (i+1)*hid]
			for j, v := range h[i*2*hid+hid : (i+1)*2*hid] {
				o[j] = g[j] * v
			}
		}
	})
}
