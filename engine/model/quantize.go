package model

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/ml"
)

// Requantize returns a copy of w whose matrices are stored as t (norm
// vectors stay f32). It measures quantization error on a real model and
// makes Q8_0/F16 variants of synthetic benchmark models. Tied embeddings
// stay tied. Like llama.cpp's quantizer, a matrix whose rows do not divide
// into whole blocks of t (stories260K's FFN width is 172) keeps its type.
func Requantize(w *Weights, t ml.Type) (*Weights, error) {
	conv := func(name string, m *ml.Matrix) (*ml.Matrix, error) {
		if m == nil || m.Type == t || m.Cols%t.BlockSize() != 0 {
			return m, nil
		}
		f := make([]float32, m.Rows*m.Cols)
		for r := range m.Rows {
			ml.Dequantize(f[r*m.Cols:(r+1)*m.Cols], m, r)
		}
		q, err := ml.Quantize(t, m.Rows, m.Cols, f)
		if err != nil {
			return nil, fmt.Errorf("model: requantize %s to %v: %w", name, t, err)
		}
		return q, nil
	}
	out := &Weights{Config: w.Config, Name: fmt.Sprintf("%s (%v)", w.Name, t), Norm: w.Norm, ChatTemplates: w.ChatTemplates,
		RopeFreqs: w.RopeFreqs, RopeLong: w.RopeLong, RopeShort: w.RopeShort}
	var err error
	if out.Embed, err = conv("token_embd", w.Embed); err != nil {
		return nil, err
	}
	if w.Output == w.Embed {
		out.Output = out.Embed
	} else if out.Output, err = conv("output", w.Output); err != nil {
		return nil, err
	}
	out.Layers = make([]Layer, len(w.Layers))
	for i, l := range w.Layers {
		nl := l // vectors (norms, biases) are shared; matrices are replaced
		for _, p := range []struct {
			dst **ml.Matrix
			src *ml.Matrix
			n   string
		}{{&nl.Q, l.Q, "attn_q"}, {&nl.K, l.K, "attn_k"}, {&nl.V, l.V, "attn_v"}, {&nl.O, l.O, "attn_output"},
			{&nl.Gate, l.Gate, "ffn_gate"}, {&nl.Up, l.Up, "ffn_up"}, {&nl.Down, l.Down, "ffn_down"}} {
			if *p.dst, err = conv(fmt.Sprintf("blk.%d.%s", i, p.n), p.src); err != nil {
				return nil, err
			}
		}
		if l.MoE != nil {
			e := *l.MoE
			if e.Router, err = conv(fmt.Sprintf("blk.%d.ffn_gate_inp", i), l.MoE.Router); err != nil {
				return nil, err
			}
			for _, p := range []struct {
				dst *[]*ml.Matrix
				n   string
			}{{&e.Gate, "ffn_gate_exps"}, {&e.Up, "ffn_up_exps"}, {&e.Down, "ffn_down_exps"}} {
				src := *p.dst
				*p.dst = make([]*ml.Matrix, len(src))
				for x, m := range src {
					if (*p.dst)[x], err = conv(fmt.Sprintf("blk.%d.%s[%d]", i, p.n, x), m); err != nil {
						return nil, err
					}
				}
			}
			for _, p := range []struct {
				dst **ml.Matrix
				n   string
			}{{&e.SharedGate, "ffn_gate_shexp"}, {&e.SharedUp, "ffn_up_shexp"}, {&e.SharedDown, "ffn_down_shexp"}} {
				if *p.dst, err = conv(fmt.Sprintf("blk.%d.%s", i, p.n), *p.dst); err != nil {
					return nil, err
				}
			}
			nl.MoE = &e
		}
		if l.MLA != nil {
			a := *l.MLA
			for _, p := range []struct {
				dst **ml.Matrix
				n   string
			}{{&a.QA, "attn_q_a"}, {&a.QB, "attn_q_b"}, {&a.KVA, "attn_kv_a_mqa"}} {
				if *p.dst, err = conv(fmt.Sprintf("blk.%d.%s", i, p.n), *p.dst); err != nil {
					return nil, err
				}
			}
			for _, p := range []struct {
				dst *[]*ml.Matrix
				n   string
			}{{&a.KB, "attn_k_b"}, {&a.VB, "attn_v_b"}} {
				src := *p.dst
				*p.dst = make([]*ml.Matrix, len(src))
				for h, m := range src {
					if (*p.dst)[h], err = conv(fmt.Sprintf("blk.%d.%s[head %d]", i, p.n, h), m); err != nil {
						return nil, err
					}
				}
			}
			nl.MLA = &a
		}
		out.Layers[i] = nl
	}
	return out, out.Check()
}
