package model

import (
	"fmt"
	"math"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// Encoder holds what a BERT-style encoder has beyond the decoder block's
// tensors. Layer.Q/K/V/O and their biases, Layer.Up and Layer.Down are
// used as in a decoder; Layer.AttnNorm is attn_output_norm (applied after
// the attention residual) and Layer.FFNNorm is layer_output_norm (after
// the FFN residual), both LayerNorms with the biases kept here. There is
// no final norm: the last layer's output is the embedding.
type Encoder struct {
	TokenTypes *ml.Matrix // [types][Dim]; row 0 is added ("sentence A"); nil when absent
	Pos        *ml.Matrix // [context][Dim] absolute position embeddings (bert); nil with RoPE
	// RoPE (nomic-bert): NeoX rotation of Q and K instead of position
	// embeddings; Gated: a SwiGLU FFN (silu(gate) * up) instead of GELU.
	RoPE, Gated bool
	// PreNorm (modern-bert): Layer.AttnNorm and Layer.FFNNorm are
	// LayerNorms without bias applied before attention and the FFN (nil
	// AttnNorm: the identity), Weights.Norm the final output_norm; GEGLU:
	// ffn_up's first Hidden rows go through GELU and multiply the rest.
	PreNorm, GEGLU bool
	// GELUGated (jina-bert-v2 with ffn_gate): gelu(gate·x) * (up·x + b).
	GELUGated         bool
	EmbNorm, EmbNormB []float32 // token_embd_norm (EmbNormB nil: no bias)
	Eps               float32   // LayerNorm epsilon
	Layers            []EncoderLayer
}

// RankHead is the classification head of a reranker (pooling rank), each
// part optional as in llama.cpp: cls (dense + tanh, BERT), then cls.output
// (BERT; Qwen3-Reranker's yes/no rows), then a softmax for Qwen3.
type RankHead struct {
	Cls, ClsOut   *ml.Matrix
	ClsB, ClsOutB []float32
	Softmax       bool
	// Last pools the last token (Qwen3-Reranker), else the first (BERT).
	Last bool
}

// EncoderLayer holds one encoder layer's LayerNorm and FFN biases, and
// jina-bert-v2's optional parts: LayerNorms of Q and K (over all heads,
// after their biases) and attn_norm_2 (the layer input added again after
// the attention norm, then normed).
type EncoderLayer struct {
	AttnNormB, FFNNormB          []float32
	UpB, DownB                   []float32
	QNorm, QNormB, KNorm, KNormB []float32
	Norm2, Norm2B                []float32
}

// IsEncoder reports whether the weights are an encoder (BERT): no
// logits, bidirectional attention over the whole input in one step.
func (w *Weights) IsEncoder() bool { return w.Encoder != nil }

// fromGGUFBert loads architecture "bert" (BGE, all-MiniLM, E5, mxbai, and
// BERT cross-encoders with a classification head) and "nomic-bert"
// (nomic-embed-text v1 / v1.5: RoPE instead of position embeddings, a
// SwiGLU FFN, Q/K/V fused or not).
func fromGGUFBert(f *gguf.File) (*Weights, error) {
	name := f.Architecture()
	nomic := name == "nomic-bert"
	jina := name == "jina-bert-v2"
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
	if err != nil {
		return nil, err
	}
	if c.Heads == 0 || c.Dim%c.Heads != 0 {
		return nil, fmt.Errorf("model: gguf %s.embedding_length %d is not a multiple of attention.head_count %d", name, c.Dim, c.Heads)
	}
	if c.Layers > len(f.Tensors) {
		return nil, fmt.Errorf("model: gguf %s.block_count is %d but the file has %d tensors", name, c.Layers, len(f.Tensors))
	}
	if moe, _ := g.uint("moe_every_n_layers", 0); moe > 0 {
		return nil, fmt.Errorf("%w: %s with mixture-of-experts layers (nomic-embed-text v2)", ErrUnsupported, name)
	}
	c.KVHeads, c.HeadDim = c.Heads, c.Dim/c.Heads
	c.RopeDim, c.RopeTheta = c.HeadDim, 10000 // unused by bert: absolute positions
	if nomic {
		theta, err := g.float("rope.freq_base", 10000, false)
		if err != nil {
			return nil, err
		}
		c.RopeTheta = float32(theta)
		c.Block.RopeStyle = arch.RopeNeoX
	}
	if jina {
		c.Block.ALiBi = 8 // llama.cpp's f_max_alibi_bias for jina-bert-v2
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
	c.NonCausal = true // whatever attention.causal says: BERT is bidirectional
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{Config: c, Name: "gguf", ChatTemplates: ChatTemplates(f), Encoder: &Encoder{Eps: c.NormEps, RoPE: nomic, Gated: nomic}}
	if w.Embed, err = g.matrix("token_embd", -1, c.Dim); err != nil {
		return nil, err
	}
	w.Config.Vocab = w.Embed.Rows
	if err := g.vocab(&w.Config); err != nil {
		return nil, err
	}
	c = w.Config
	w.Output = w.Embed // unused: an encoder has no logits
	w.Norm = make([]float32, c.Dim)
	enc := w.Encoder
	if _, ok := g.tensor("token_types"); ok {
		if enc.TokenTypes, err = g.matrix("token_types", -1, c.Dim); err != nil {
			return nil, err
		}
	}
	if !nomic && !jina {
		if enc.Pos, err = g.matrix("position_embd", -1, c.Dim); err != nil {
			return nil, err
		}
	}
	if enc.EmbNorm, err = g.vector("token_embd_norm.weight", c.Dim); err != nil {
		return nil, err
	}
	if enc.EmbNormB, err = g.vector("token_embd_norm.bias", c.Dim); err != nil {
		return nil, err
	}
	if !nomic {
		if w.Rank, err = g.rankHead(c, true); err != nil {
			return nil, err
		}
	}
	w.Layers = make([]Layer, c.Layers)
	enc.Layers = make([]EncoderLayer, c.Layers)
	for i := range w.Layers {
		l, el := &w.Layers[i], &enc.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		// jina-bert-v2's FFN, as llama.cpp picks it: a GELU-gated one with
		// ffn_gate, else GEGLU when ffn_up has twice the rows, else BERT's.
		upRows := c.Hidden
		if jina {
			_, enc.GELUGated = g.tensor(p + "ffn_gate")
			if t, ok := g.tensor(p + "ffn_up"); ok && !enc.GELUGated && len(t.Dims) == 2 && t.Dims[1] == uint64(2*c.Hidden) {
				upRows, enc.GEGLU = 2*c.Hidden, true
			}
		}
		mats := []struct {
			dst        **ml.Matrix
			name       string
			rows, cols int
		}{
			{&l.O, "attn_output", c.Dim, c.Dim}, {&l.Up, "ffn_up", upRows, c.Dim}, {&l.Down, "ffn_down", c.Dim, c.Hidden},
		}
		if _, fused := g.tensor(p + "attn_qkv"); fused {
			qkv, err := g.matrix(p+"attn_qkv", 3*c.Dim, c.Dim)
			if err != nil {
				return nil, err
			}
			parts := splitRows(qkv, c.Dim, c.Dim, c.Dim)
			l.Q, l.K, l.V = parts[0], parts[1], parts[2]
		} else {
			mats = append(mats, []struct {
				dst        **ml.Matrix
				name       string
				rows, cols int
			}{{&l.Q, "attn_q", c.Dim, c.Dim}, {&l.K, "attn_k", c.Dim, c.Dim}, {&l.V, "attn_v", c.Dim, c.Dim}}...)
		}
		if nomic || enc.GELUGated {
			mats = append(mats, struct {
				dst        **ml.Matrix
				name       string
				rows, cols int
			}{&l.Gate, "ffn_gate", c.Hidden, c.Dim})
		}
		for _, m := range mats {
			if *m.dst, err = g.matrix(p+m.name, m.rows, m.cols); err != nil {
				return nil, err
			}
		}
		for _, v := range []struct {
			dst  *[]float32
			name string
			n    int
			opt  bool
		}{
			{&l.AttnNorm, "attn_output_norm.weight", c.Dim, false}, {&el.AttnNormB, "attn_output_norm.bias", c.Dim, false},
			{&l.FFNNorm, "layer_output_norm.weight", c.Dim, false}, {&el.FFNNormB, "layer_output_norm.bias", c.Dim, false},
			{&l.QBias, "attn_q.bias", c.Dim, true}, {&l.KBias, "attn_k.bias", c.Dim, true}, {&l.VBias, "attn_v.bias", c.Dim, true},
			{&l.OBias, "attn_output.bias", c.Dim, true}, {&el.UpB, "ffn_up.bias", upRows, true}, {&el.DownB, "ffn_down.bias", c.Dim, true},
			{&el.QNorm, "attn_q_norm.weight", c.Dim, true}, {&el.QNormB, "attn_q_norm.bias", c.Dim, true},
			{&el.KNorm, "attn_k_norm.weight", c.Dim, true}, {&el.KNormB, "attn_k_norm.bias", c.Dim, true},
			{&el.Norm2, "attn_norm_2.weight", c.Dim, true}, {&el.Norm2B, "attn_norm_2.bias", c.Dim, true},
		} {
			if _, ok := f.Tensor(p + v.name); !ok && v.opt {
				continue
			}
			if *v.dst, err = g.vector(p+v.name, v.n); err != nil {
				return nil, err
			}
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

// checkEncoder is Check's layer part for an encoder.
func (w *Weights) checkEncoder() error {
	c, enc := w.Config, w.Encoder
	if len(w.Layers) != c.Layers || len(enc.Layers) != c.Layers {
		return fmt.Errorf("model: %d layers loaded, config says %d", len(w.Layers), c.Layers)
	}
	if !enc.RoPE && c.Block.ALiBi == 0 && (enc.Pos == nil || enc.Pos.Cols != c.Dim || enc.Pos.Rows < 1) {
		return fmt.Errorf("%w: encoder position embeddings missing or not [context][%d]", ErrUnsupported, c.Dim)
	}
	if enc.Gated || enc.GELUGated {
		for i, l := range w.Layers {
			if l.Gate == nil || l.Gate.Rows != c.Hidden || l.Gate.Cols != c.Dim {
				return fmt.Errorf("model: encoder layer %d has no ffn_gate of %dx%d", i, c.Hidden, c.Dim)
			}
		}
	}
	if enc.TokenTypes != nil && enc.TokenTypes.Cols != c.Dim {
		return fmt.Errorf("model: token_types has %d columns, want %d", enc.TokenTypes.Cols, c.Dim)
	}
	if len(enc.EmbNorm) != c.Dim || (len(enc.EmbNormB) != c.Dim && (!enc.PreNorm || enc.EmbNormB != nil)) {
		return fmt.Errorf("model: token_embd_norm has %d/%d values, want %d", len(enc.EmbNorm), len(enc.EmbNormB), c.Dim)
	}
	if enc.PreNorm {
		return w.checkPreNormEncoder()
	}
	upRows := c.Hidden
	if enc.GEGLU {
		upRows = 2 * c.Hidden
	}
	for i, l := range w.Layers {
		el := enc.Layers[i]
		for _, m := range []struct {
			m          *ml.Matrix
			rows, cols int
		}{{l.Q, c.Dim, c.Dim}, {l.K, c.Dim, c.Dim}, {l.V, c.Dim, c.Dim}, {l.O, c.Dim, c.Dim}, {l.Up, upRows, c.Dim}, {l.Down, c.Dim, c.Hidden}} {
			if m.m == nil || m.m.Rows != m.rows || m.m.Cols != m.cols {
				return fmt.Errorf("model: encoder layer %d has a matrix missing or of the wrong shape", i)
			}
		}
		for _, v := range []struct {
			v   []float32
			n   int
			opt bool
		}{{l.AttnNorm, c.Dim, false}, {el.AttnNormB, c.Dim, false}, {l.FFNNorm, c.Dim, false}, {el.FFNNormB, c.Dim, false},
			{l.QBias, c.Dim, true}, {l.KBias, c.Dim, true}, {l.VBias, c.Dim, true}, {l.OBias, c.Dim, true}, {el.UpB, upRows, true}, {el.DownB, c.Dim, true},
			{el.QNorm, c.Dim, true}, {el.KNorm, c.Dim, true}, {el.Norm2, c.Dim, true}} {
			if (v.v != nil || !v.opt) && len(v.v) != v.n {
				return fmt.Errorf("model: encoder layer %d has a vector of %d values, want %d", i, len(v.v), v.n)
			}
		}
	}
	return nil
}

// LayerNorm sets dst = (x - mean) / sqrt(var + eps) * w + b, with the
// mean and variance accumulated in float64.
func LayerNorm(dst, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := sum / float64(len(x))
	var ss float64
	for _, v := range x {
		d := float64(v) - mean
		ss += d * d
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	for i, v := range x {
		y := float32((float64(v) - mean) * inv)
		y *= w[i]
		if b != nil {
			y += b[i]
		}
		dst[i] = y
	}
}

// forwardEncoder is Forward for an encoder: every sequence's whole input
// in this step (its table holds nothing yet), each token attending to all
// tokens of its own sequence through the paged K/V, as the decoder's
// attention does. It produces hidden states, never logits.
func (r *Runner) forwardEncoder(b *Batch, n int) error {
	c, enc := r.cfg, r.w.Encoder
	dim, hid := c.Dim, c.Hidden
	rows := make([]row, 0, n)
	for i, s := range b.Seqs {
		if s.Logits {
			return fmt.Errorf("%w: an encoder (%s) computes embeddings, not logits", ErrNotImplemented, c.Arch)
		}
		if s.Table.Written() != 0 {
			return fmt.Errorf("%w: an encoder input split across steps (sequence %d starts at %d)", ErrNotImplemented, i, s.Table.Written())
		}
		if enc.Pos != nil && len(s.Tokens) > enc.Pos.Rows {
			return fmt.Errorf("model: sequence %d has %d tokens, the encoder's position embeddings cover %d", i, len(s.Tokens), enc.Pos.Rows)
		}
		pages := s.Table.Pages()
		for j := range s.Tokens {
			rows = append(rows, row{seq: i, pos: j, pages: pages, last: len(s.Tokens) - 1})
		}
	}
	r.x = ml.Grow(r.x, n*dim)
	r.xb = ml.Grow(r.xb, n*dim)
	r.q = ml.Grow(r.q, n*dim)
	r.k = ml.Grow(r.k, n*dim)
	r.v = ml.Grow(r.v, n*dim)
	r.att = ml.Grow(r.att, n*dim)
	upRows := hid
	if enc.GEGLU {
		upRows = 2 * hid
	}
	r.hb = ml.Grow(r.hb, n*upRows)
	r.hb2 = ml.Grow(r.hb2, n*hid)
	r.lx = ml.Grow(r.lx, 2*dim)
	var ropeDim int
	if enc.RoPE {
		// One table per distinct RoPE base (modern-bert's local layers
		// have their own).
		ropeDim = r.ropes[0].Dim()
		for k, rp := range r.ropes {
			r.tabs[k] = ml.Grow(r.tabs[k], n*ropeDim)
			for i, rw := range rows {
				rp.Fill(r.tabs[k][i*ropeDim:(i+1)*ropeDim], rw.pos)
			}
		}
	}

	// Embeddings: token + token type 0 + absolute position, LayerNorm.
	ti := 0
	for _, s := range b.Seqs {
		for j, t := range s.Tokens {
			x := r.x[ti*dim : (ti+1)*dim]
			ml.Dequantize(x, r.w.Embed, t)
			tmp := r.lx[:dim]
			if enc.TokenTypes != nil {
				ml.Dequantize(tmp, enc.TokenTypes, 0)
				ml.Add(x, tmp)
			}
			if enc.Pos != nil {
				ml.Dequantize(tmp, enc.Pos, j)
				ml.Add(x, tmp)
			}
			LayerNorm(x, x, enc.EmbNorm, enc.EmbNormB, enc.Eps)
			ti++
		}
	}
	locs := make([][2]int, n)
	for i, rw := range rows {
		p, sl, err := b.Seqs[rw.seq].Table.Location(rw.pos)
		if err != nil {
			return fmt.Errorf("model: locate KV slot: %w", err)
		}
		locs[i] = [2]int{int(p), sl}
	}
	bias := func(v, bv []float32) {
		if bv == nil {
			return
		}
		for i := range n {
			ml.Add(v[i*len(bv):(i+1)*len(bv)], bv)
		}
	}
	for l := range c.Layers {
		L, EL := &r.w.Layers[l], &enc.Layers[l]
		// Pre-norm (modern-bert): attention reads the normed input, the
		// residual stays in r.x.
		in := r.x[:n*dim]
		if enc.PreNorm && L.AttnNorm != nil {
			in = r.xb[:n*dim]
			for i := range n {
				LayerNorm(in[i*dim:(i+1)*dim], r.x[i*dim:(i+1)*dim], L.AttnNorm, nil, enc.Eps)
			}
		}
		// MatMulBatch: the whole step's tokens in one product per
		// matrix, each output independent of the batch's other rows.
		ml.MatMulBatch(r.q[:n*dim], in, n, L.Q)
		ml.MatMulBatch(r.k[:n*dim], in, n, L.K)
		ml.MatMulBatch(r.v[:n*dim], in, n, L.V)
		bias(r.q[:n*dim], L.QBias)
		bias(r.k[:n*dim], L.KBias)
		bias(r.v[:n*dim], L.VBias)
		if EL.QNorm != nil || EL.KNorm != nil { // jina-bert-v2
			for i := range n {
				if EL.QNorm != nil {
					q := r.q[i*dim : (i+1)*dim]
					LayerNorm(q, q, EL.QNorm, EL.QNormB, enc.Eps)
				}
				if EL.KNorm != nil {
					k := r.k[i*dim : (i+1)*dim]
					LayerNorm(k, k, EL.KNorm, EL.KNormB, enc.Eps)
				}
			}
		}
		for i := range n {
			if enc.RoPE {
				cs := r.tabs[r.ropeOf[l]][i*ropeDim : (i+1)*ropeDim]
				ml.RoPEApplyNeoX(r.q[i*dim:(i+1)*dim], c.HeadDim, cs)
				ml.RoPEApplyNeoX(r.k[i*dim:(i+1)*dim], c.HeadDim, cs)
			}
			page := uint32(locs[i][0])
			r.kv.put(r.geo.KOffset(page, l, locs[i][1]), r.k[i*dim:(i+1)*dim])
			r.kv.put(r.geo.VOffset(page, l, locs[i][1]), r.v[i*dim:(i+1)*dim])
		}
		r.attention(l, rows)
		ml.MatMulBatch(r.xb[:n*dim], r.att[:n*dim], n, L.O)
		bias(r.xb[:n*dim], L.OBias)
		if enc.PreNorm {
			r.preNormFFN(L, n)
			continue
		}
		if EL.Norm2 != nil {
			copy(r.k[:n*dim], r.x[:n*dim]) // the layer input (K is in the cache now)
		}
		for i := range n {
			x := r.x[i*dim : (i+1)*dim]
			ml.Add(x, r.xb[i*dim:(i+1)*dim])
			LayerNorm(x, x, L.AttnNorm, EL.AttnNormB, enc.Eps)
			if EL.Norm2 != nil {
				ml.Add(x, r.k[i*dim:(i+1)*dim])
				LayerNorm(x, x, EL.Norm2, EL.Norm2B, enc.Eps)
			}
		}
		ffnOut := r.hb[:n*hid]
		switch {
		case enc.GELUGated:
			ml.MatMulBatch(r.hb[:n*hid], r.x[:n*dim], n, L.Gate)
			ml.MatMulBatch(r.hb2[:n*hid], r.x[:n*dim], n, L.Up)
			bias(r.hb2[:n*hid], EL.UpB)
			hb, hb2 := r.hb[:n*hid], r.hb2[:n*hid]
			ml.Parallel(n*hid, 8192, func(lo, hi int) {
				ml.GELUTanhSlice(hb[lo:hi])
				for i := lo; i < hi; i++ {
					hb[i] *= hb2[i]
				}
			})
		case enc.GEGLU:
			ml.MatMulBatch(r.hb[:n*2*hid], r.x[:n*dim], n, L.Up)
			bias(r.hb[:n*2*hid], EL.UpB)
			ffnOut = r.hb2[:n*hid]
			geglu(ffnOut, r.hb[:n*2*hid], n, hid)
		case enc.Gated:
			ml.MatMulBatch(r.hb[:n*hid], r.x[:n*dim], n, L.Gate)
			ml.MatMulBatch(r.hb2[:n*hid], r.x[:n*dim], n, L.Up)
			hb, hb2 := r.hb[:n*hid], r.hb2[:n*hid]
			ml.Parallel(n*hid, 8192, func(lo, hi int) { ml.SiLUMul(hb[lo:hi], hb2[lo:hi]) })
		default:
			ml.MatMulBatch(r.hb[:n*hid], r.x[:n*dim], n, L.Up)
			bias(r.hb[:n*hid], EL.UpB)
			hb := r.hb[:n*hid]
			ml.Parallel(n*hid, 8192, func(lo, hi int) { ml.GELUTanhSlice(hb[lo:hi]) })
		}
		ml.MatMulBatch(r.xb[:n*dim], ffnOut, n, L.Down)
		bias(r.xb[:n*dim], EL.DownB)
		for i := range n {
			x := r.x[i*dim : (i+1)*dim]
			ml.Add(x, r.xb[i*dim:(i+1)*dim])
			LayerNorm(x, x, L.FFNNorm, EL.FFNNormB, enc.Eps)
		}
	}

	if enc.PreNorm {
		for i := range n {
			x := r.x[i*dim : (i+1)*dim]
			LayerNorm(x, x, r.w.Norm, nil, enc.Eps)
		}
	}

	if cap(b.Logits) < len(b.Seqs) {
		b.Logits = make([][]float32, len(b.Seqs))
	}
	b.Logits = b.Logits[:len(b.Seqs)]
	clear(b.Logits)
	if cap(b.Hidden) < len(b.Seqs) {
		b.Hidden = make([][]float32, len(b.Seqs))
	}
	b.Hidden = b.Hidden[:len(b.Seqs)]
	clear(b.Hidden)
	start := 0
	for i, s := range b.Seqs {
		if s.Hidden {
			m := len(s.Tokens)
			b.Hidden[i] = r.x[start*dim : (start+m)*dim : (start+m)*dim]
		}
		start += len(s.Tokens)
	}
	b.Advance()
	return nil
}

// rankHead loads cls and cls.output when the file has them (nil when
// neither): BERT's dense layer only when cls is allowed.
func (g *ggufLoader) rankHead(c Config, cls bool) (*RankHead, error) {
	var h RankHead
	var err error
	if _, ok := g.tensor("cls"); ok && cls {
		if h.Cls, err = g.matrix("cls", c.Dim, c.Dim); err != nil {
			return nil, err
		}
		if _, ok := g.f.Tensor("cls.bias"); ok {
			if h.ClsB, err = g.vector("cls.bias", c.Dim); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := g.tensor("cls.output"); ok {
		if h.ClsOut, err = g.matrix("cls.output", -1, c.Dim); err != nil {
			return nil, err
		}
		if _, ok := g.f.Tensor("cls.output.bias"); ok {
			if h.ClsOutB, err = g.vector("cls.output.bias", h.ClsOut.Rows); err != nil {
				return nil, err
			}
		}
	}
	if h.Cls == nil && h.ClsOut == nil {
		return nil, nil
	}
	// llama.cpp: Qwen3 rerankers pool the last token and end in a softmax.
	h.Softmax = c.Arch == "qwen3"
	h.Last = c.Arch == "qwen3"
	return &h, nil
}

// RankScores applies the classification head of a reranker (pooling
// rank) to the pooled hidden state h, as llama.cpp does: tanh(cls·h +
// cls.bias) when cls is present, then cls.output·(that) + cls.output.bias,
// then (Qwen3) a softmax. The first value is the relevance score.
func (w *Weights) RankScores(h []float32) ([]float32, error) {
	enc := w.Rank
	if enc == nil {
		return nil, fmt.Errorf("%w: the model has no classification head (cls, cls.output)", ErrUnsupported)
	}
	cur := append([]float32(nil), h...)
	if enc.Cls != nil {
		out := make([]float32, enc.Cls.Rows)
		ml.MatMul(out, cur, 1, enc.Cls)
		if enc.ClsB != nil {
			ml.Add(out, enc.ClsB)
		}
		for i, v := range out {
			out[i] = float32(math.Tanh(float64(v)))
		}
		cur = out
	}
	if enc.ClsOut != nil {
		out := make([]float32, enc.ClsOut.Rows)
		ml.MatMul(out, cur, 1, enc.ClsOut)
		if enc.ClsOutB != nil {
			ml.Add(out, enc.ClsOutB)
		}
		cur = out
	}
	if enc.Softmax {
		ml.Softmax(cur)
	}
	return cur, nil
}
