package model

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// LatentAttn holds one layer's multi-head latent attention weights
// (arch.MLA, DeepSeek-V2/V3). Q is the layer's plain attn_q when the file
// has no q LoRA; otherwise QA ([QRank][Dim]), QANorm ([QRank]) and QB
// ([Heads*(Nope+RopeDim)][QRank]) compute it. KVA is attn_kv_a_mqa
// ([KVRank+RopeDim][Dim]: the latent, then the shared rope key), KVANorm
// the latent's RMSNorm ([KVRank]); KB and VB are the per-head absorbed
// attn_k_b ([KVRank][Nope] each) and attn_v_b ([VDim][KVRank] each),
// views into the file's 3-D tensors.
type LatentAttn struct {
	QA, QB, KVA     *ml.Matrix
	QANorm, KVANorm []float32
	KB, VB          []*ml.Matrix
}

// latentAttn loads layer prefix p's latent attention into l (l.Q for a
// file without q LoRA).
func (g *ggufLoader) latentAttn(l *Layer, p string, c Config) error {
	m := c.Block.MLA
	rope := c.HeadDim - m.KVRank
	qDim := c.Heads * (m.Nope + rope)
	if _, ok := g.tensor(p + "attn_kv_b"); ok {
		return fmt.Errorf("%w: tensor %sattn_kv_b (the unsplit layout of older conversions; this engine, like llama.cpp, reads attn_k_b and attn_v_b alone: convert the model again)", ErrUnsupported, p)
	}
	a := &LatentAttn{}
	var err error
	if m.QRank > 0 {
		if a.QA, err = g.matrix(p+"attn_q_a", m.QRank, c.Dim); err != nil {
			return err
		}
		if a.QANorm, err = g.norm(p+"attn_q_a_norm", m.QRank); err != nil {
			return err
		}
		if a.QB, err = g.matrix(p+"attn_q_b", qDim, m.QRank); err != nil {
			return err
		}
	} else if l.Q, err = g.matrix(p+"attn_q", qDim, c.Dim); err != nil {
		return err
	}
	if a.KVA, err = g.matrix(p+"attn_kv_a_mqa", m.KVRank+rope, c.Dim); err != nil {
		return err
	}
	if a.KVANorm, err = g.norm(p+"attn_kv_a_norm", m.KVRank); err != nil {
		return err
	}
	if a.KB, err = g.expertMatrices(p+"attn_k_b", c.Heads, m.KVRank, m.Nope); err != nil {
		return err
	}
	if a.VB, err = g.expertMatrices(p+"attn_v_b", c.Heads, m.VDim, m.KVRank); err != nil {
		return err
	}
	l.MLA = a
	return nil
}

// checkLatent verifies layer p's latent attention weights against c.
func checkLatent(p string, l Layer, c Config, mat func(string, *ml.Matrix, int, int) error, vec func(string, []float32, int) error) error {
	m := c.Block.MLA
	a := l.MLA
	if a == nil {
		return fmt.Errorf("%w: layer %s has no latent attention weights", ErrUnsupported, p)
	}
	if l.K != nil || l.V != nil || l.QBias != nil || l.KBias != nil || l.VBias != nil || l.QNorm != nil || l.KNorm != nil || l.Sinks != nil {
		return fmt.Errorf("model: layer %s has both latent attention and K/V projections, biases, norms or sinks", p)
	}
	rope := c.HeadDim - m.KVRank
	qDim := c.Heads * (m.Nope + rope)
	errs := []error{
		mat(p+"attn_kv_a_mqa", a.KVA, m.KVRank+rope, c.Dim),
		vec(p+"attn_kv_a_norm", a.KVANorm, m.KVRank),
		mat(p+"attn_output", l.O, c.Dim, c.Heads*m.VDim),
	}
	if m.QRank > 0 {
		if l.Q != nil {
			return fmt.Errorf("model: layer %s has both attn_q and the q LoRA", p)
		}
		errs = append(errs, mat(p+"attn_q_a", a.QA, m.QRank, c.Dim), vec(p+"attn_q_a_norm", a.QANorm, m.QRank), mat(p+"attn_q_b", a.QB, qDim, m.QRank))
	} else {
		if a.QA != nil || a.QB != nil {
			return fmt.Errorf("model: layer %s has a q LoRA but attention.q_lora_rank is 0", p)
		}
		errs = append(errs, mat(p+"attn_q", l.Q, qDim, c.Dim))
	}
	if len(a.KB) != c.Heads || len(a.VB) != c.Heads {
		return fmt.Errorf("model: layer %s has %d/%d attn_k_b/attn_v_b heads, want %d", p, len(a.KB), len(a.VB), c.Heads)
	}
	for h := range c.Heads {
		errs = append(errs, mat(fmt.Sprintf("%sattn_k_b[head %d]", p, h), a.KB[h], m.KVRank, m.Nope),
			mat(fmt.Sprintf("%sattn_v_b[head %d]", p, h), a.VB[h], m.VDim, m.KVRank))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// mlaScratch holds the latent attention's buffers, reused between steps.
type mlaScratch struct {
	q, qa, kva, in, abs, vo, out []float32
	dsts, xs                     [][]float32
	ns                           []int
	mats                         []*ml.Matrix
}

// latentAttention computes layer l's attention for the n rows of xb (the
// normalised activations) into xb: queries absorbed into the latent
// space, one latent K row per token written to its own sequence's page
// (the values are read from the same row: Block.MLA), attention over the
// row's own sequence, then attn_v_b per head and attn_output.
func (r *Runner) latentAttention(l int, xb []float32, rows []row, locs []struct {
	page uint32
	slot int
}, cs []float32) {
	c := r.cfg
	L := &r.w.Layers[l]
	a := L.MLA
	m := c.Block.MLA
	s := &r.mla
	n, dim, H, hd := len(rows), c.Dim, c.Heads, c.HeadDim
	R := m.KVRank
	P := hd - R
	kq := m.Nope + P // a query head before absorption
	ropeDim := len(cs) / n
	rope := ml.RoPEApply
	if c.Block.RopeStyle == arch.RopeNeoX {
		rope = ml.RoPEApplyNeoX
	}
	s.q = ml.Grow(s.q, n*H*kq)
	s.kva = ml.Grow(s.kva, n*hd)
	qm := L.Q
	if a.QA != nil {
		qm = a.QA
		s.qa = ml.Grow(s.qa, n*m.QRank)
		r.dsts = append(r.dsts[:0], s.qa[:n*m.QRank], s.kva[:n*hd])
	} else {
		r.dsts = append(r.dsts[:0], s.q[:n*H*kq], s.kva[:n*hd])
	}
	r.mats = append(r.mats[:0], qm, a.KVA)
	ml.MatMulGroup(r.dsts, xb[:n*dim], n, r.mats)
	if a.QA != nil {
		for i := range n {
			row := s.qa[i*m.QRank : (i+1)*m.QRank]
			ml.RMSNorm(row, row, a.QANorm, c.NormEps)
		}
		ml.MatMul(s.q[:n*H*kq], s.qa[:n*m.QRank], n, a.QB)
	}

	// K: the normalised latent, then the rotated shared key; stored once
	// per token (one KV head).
	for i := range n {
		k := s.kva[i*hd : (i+1)*hd]
		ml.RMSNorm(k[:R], k[:R], a.KVANorm, c.NormEps)
		rope(k[R:], P, cs[i*ropeDim:(i+1)*ropeDim])
		r.kv.put(r.geo.KOffset(locs[i].page, l, locs[i].slot), k)
	}

	// Queries: each head's nope part through attn_k_b[head] into the
	// latent space, its rope part rotated, back to back as [latent | rope].
	s.in = ml.Grow(s.in, n*H*max(m.Nope, R))
	s.abs = ml.Grow(s.abs, n*H*R)
	s.dsts, s.xs, s.ns, s.mats = s.dsts[:0], s.xs[:0], s.ns[:0], s.mats[:0]
	for h := range H {
		in := s.in[h*n*m.Nope : (h+1)*n*m.Nope]
		for i := range n {
			copy(in[i*m.Nope:(i+1)*m.Nope], s.q[(i*H+h)*kq:(i*H+h)*kq+m.Nope])
		}
		s.dsts = append(s.dsts, s.abs[h*n*R:(h+1)*n*R])
		s.xs = append(s.xs, in)
		s.ns = append(s.ns, n)
		s.mats = append(s.mats, a.KB[h])
	}
	ml.MatMulEach(s.dsts, s.xs, s.ns, s.mats)
	for i := range n {
		for h := range H {
			dst := r.q[(i*H+h)*hd : (i*H+h+1)*hd]
			copy(dst[:R], s.abs[(h*n+i)*R:(h*n+i+1)*R])
			copy(dst[R:], s.q[(i*H+h)*kq+m.Nope:(i*H+h+1)*kq])
			rope(dst[R:], P, cs[i*ropeDim:(i+1)*ropeDim])
		}
	}

	r.attention(l, rows)

	// Each head's attention-weighted latent (its first R values) through
	// attn_v_b[head], then attn_output over the heads.
	s.vo = ml.Grow(s.vo, n*H*m.VDim)
	s.out = ml.Grow(s.out, n*H*m.VDim)
	s.dsts, s.xs, s.ns, s.mats = s.dsts[:0], s.xs[:0], s.ns[:0], s.mats[:0]
	for h := range H {
		in := s.in[h*n*R : (h+1)*n*R]
		for i := range n {
			copy(in[i*R:(i+1)*R], r.att[(i*H+h)*hd:(i*H+h)*hd+R])
		}
		s.dsts = append(s.dsts, s.vo[h*n*m.VDim:(h+1)*n*m.VDim])
		s.xs = append(s.xs, in)
		s.ns = append(s.ns, n)
		s.mats = append(s.mats, a.VB[h])
	}
	ml.MatMulEach(s.dsts, s.xs, s.ns, s.mats)
	for i := range n {
		for h := range H {
			copy(s.out[(i*H+h)*m.VDim:(i*H+h+1)*m.VDim], s.vo[(h*n+i)*m.VDim:(h*n+i+1)*m.VDim])
		}
	}
	ml.MatMul(xb[:n*dim], s.out[:n*H*m.VDim], n, L.O)
}
