package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// moeCase is one routing configuration of the FFN tests.
type moeCase struct {
	name          string
	moe           arch.MoE
	act           arch.Activation
	routerBias    bool
	selectBias    bool
	expertBias    bool
	shared, gated bool
}

var moeCases = []moeCase{
	{name: "qwen3moe softmax renormalised", moe: arch.MoE{Experts: 8, Used: 2, Hidden: 64, NormTopK: true}},
	{name: "qwen2moe softmax with gated shared expert", moe: arch.MoE{Experts: 6, Used: 4, Hidden: 32}, shared: true, gated: true},
	{name: "gpt-oss selected softmax with biases", moe: arch.MoE{Experts: 8, Used: 4, Hidden: 32, Gating: arch.GatingSoftmaxSelected},
		act: arch.SwiGLUOAI, routerBias: true, expertBias: true},
	{name: "glm4moe sigmoid with selection bias, scale and shared expert",
		moe:        arch.MoE{Experts: 16, Used: 4, Hidden: 32, Gating: arch.GatingSigmoid, NormTopK: true, WeightScale: 2.5},
		selectBias: true, shared: true},
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// randExperts builds a layer's experts of c (F32, or requantized to t).
func randExperts(t testing.TB, r *rand.Rand, c moeCase, dim int, typ ml.Type) *Experts {
	m := c.moe
	mat := func(rows, cols int) *ml.Matrix {
		v := randVec(r, rows*cols, 1/math.Sqrt(float64(cols)))
		if typ == ml.F32 {
			return ml.FromF32(rows, cols, v)
		}
		q, err := ml.Quantize(typ, rows, cols, v)
		require.NoError(t, err)
		return q
	}
	e := &Experts{Router: ml.FromF32(m.Experts, dim, randVec(r, m.Experts*dim, 3/math.Sqrt(float64(dim))))}
	for range m.Experts {
		e.Gate = append(e.Gate, mat(m.Hidden, dim))
		e.Up = append(e.Up, mat(m.Hidden, dim))
		e.Down = append(e.Down, mat(dim, m.Hidden))
		if c.expertBias {
			e.GateBias = append(e.GateBias, randVec(r, m.Hidden, 1))
			e.UpBias = append(e.UpBias, randVec(r, m.Hidden, 1))
			e.DownBias = append(e.DownBias, randVec(r, dim, 1))
		}
	}
	if c.routerBias {
		e.RouterBias = randVec(r, m.Experts, 1)
	}
	if c.selectBias {
		e.SelectBias = randVec(r, m.Experts, 0.5)
	}
	if c.shared {
		e.SharedGate, e.SharedUp, e.SharedDown = mat(48, dim), mat(48, dim), mat(dim, 48)
		if c.gated {
			e.SharedGateInp = randVec(r, dim, 1/math.Sqrt(float64(dim)))
		}
	}
	return e
}

// refMoE is the MoE FFN of one token in float64, written from llama.cpp's
// build_moe_ffn: every expert's FFN is computed, and the top-k by the
// selection scores are summed with their gating weights.
func refMoE(e *Experts, m arch.MoE, act arch.Activation, x []float32) []float64 {
	dim := len(x)
	row := func(w *ml.Matrix, r int) []float32 {
		out := make([]float32, w.Cols)
		ml.Dequantize(out, w, r)
		return out
	}
	mv := func(w *ml.Matrix, v []float64) []float64 {
		out := make([]float64, w.Rows)
		for r := range w.Rows {
			for i, a := range row(w, r) {
				out[r] += float64(a) * v[i]
			}
		}
		return out
	}
	xv := make([]float64, dim)
	for i, v := range x {
		xv[i] = float64(v)
	}
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	logits := mv(e.Router, xv)
	for i := range logits {
		if e.RouterBias != nil {
			logits[i] += float64(e.RouterBias[i])
		}
	}
	probs := append([]float64(nil), logits...)
	switch m.Gating {
	case arch.GatingSoftmax:
		mx, sum := math.Inf(-1), 0.0
		for _, v := range probs {
			mx = math.Max(mx, v)
		}
		for i, v := range probs {
			probs[i] = math.Exp(v - mx)
			sum += probs[i]
		}
		for i := range probs {
			probs[i] /= sum
		}
	case arch.GatingSigmoid:
		for i, v := range probs {
			probs[i] = sigmoid(v)
		}
	}
	score := append([]float64(nil), probs...)
	for i := range score {
		if e.SelectBias != nil {
			score[i] += float64(e.SelectBias[i])
		}
	}
	order := make([]int, len(score))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return score[order[a]] > score[order[b]] })
	sel := order[:m.Used]
	w := make([]float64, m.Used)
	for j, ex := range sel {
		w[j] = probs[ex]
	}
	if m.Gating == arch.GatingSoftmaxSelected {
		mx, sum := math.Inf(-1), 0.0
		for _, v := range w {
			mx = math.Max(mx, v)
		}
		for j, v := range w {
			w[j] = math.Exp(v - mx)
			sum += w[j]
		}
		for j := range w {
			w[j] /= sum
		}
	}
	if m.NormTopK {
		sum := 0.0
		for _, v := range w {
			sum += v
		}
		for j := range w {
			w[j] /= sum
		}
	}
	if m.WeightScale != 0 {
		for j := range w {
			w[j] *= float64(m.WeightScale)
		}
	}
	ffn := func(gate, up, down *ml.Matrix, gb, ub, db []float32) []float64 {
		g, u := mv(gate, xv), mv(up, xv)
		h := make([]float64, len(g))
		for i := range g {
			if gb != nil {
				g[i] += float64(gb[i])
				u[i] += float64(ub[i])
			}
			if act == arch.SwiGLUOAI {
				gi, ui := math.Min(g[i], 7), math.Max(-7, math.Min(u[i], 7))
				h[i] = gi * sigmoid(1.702*gi) * (ui + 1)
			} else {
				h[i] = g[i] * sigmoid(g[i]) * u[i]
			}
		}
		y := mv(down, h)
		for i := range y {
			if db != nil {
				y[i] += float64(db[i])
			}
		}
		return y
	}
	out := make([]float64, dim)
	for j, ex := range sel {
		var gb, ub, db []float32
		if e.GateBias != nil {
			gb, ub, db = e.GateBias[ex], e.UpBias[ex], e.DownBias[ex]
		}
		y := ffn(e.Gate[ex], e.Up[ex], e.Down[ex], gb, ub, db)
		for i := range out {
			out[i] += w[j] * y[i]
		}
	}
	if e.SharedUp != nil {
		y := ffn(e.SharedGate, e.SharedUp, e.SharedDown, nil, nil, nil)
		s := 1.0
		if e.SharedGateInp != nil {
			d := 0.0
			for i, v := range e.SharedGateInp {
				d += float64(v) * xv[i]
			}
			s = sigmoid(d)
		}
		for i := range out {
			out[i] += s * y[i]
		}
	}
	return out
}

// moeRunner is a Runner with just what moeFFN reads.
func moeRunner(dim int, m arch.MoE, act arch.Activation) *Runner {
	return &Runner{cfg: Config{Dim: dim, Block: arch.Block{MoE: m, Activation: act}}}
}

// TestMoEFFNMatchesReference checks the routed FFN of every gating
// flavour (softmax, sigmoid with selection bias, softmax over the selected
// logits; renormalisation, weight scale, router and expert biases, gated
// and ungated shared experts) against a float64 reference for batches of
// 1, 5 and 37 tokens, and that a token's output is bitwise the same
// whatever else the batch holds (tokens are grouped by expert).
func TestMoEFFNMatchesReference(t *testing.T) {
	const dim = 64
	for _, c := range moeCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(c.name))))
			e := randExperts(t, r, c, dim, ml.F32)
			run := moeRunner(dim, c.moe, c.act)
			x := randVec(r, 37*dim, 1)
			alone := make([]float32, 37*dim)
			for i := range 37 {
				run.moeFFN(e, x[i*dim:(i+1)*dim], 1, alone[i*dim:(i+1)*dim])
			}
			for i := range 37 {
				want := refMoE(e, c.moe, c.act, x[i*dim:(i+1)*dim])
				for j, v := range want {
					require.InDelta(t, v, alone[i*dim+j], 1e-4*(1+math.Abs(v)), "token %d value %d", i, j)
				}
			}
			for _, n := range []int{5, 37} {
				out := make([]float32, n*dim)
				run.moeFFN(e, x[:n*dim], n, out)
				require.Equal(t, alone[:n*dim], out, "batch of %d: a token's result must not depend on the batch", n)
			}
		})
	}
}

// TestMoEFFNQuantizedGrouping: with quantized experts (activation-
// quantizing kernels) a token's result is bitwise the same alone and in a
// batch whose tokens share experts, and it follows the dequantized
// reference to quantization accuracy.
func TestMoEFFNQuantizedGrouping(t *testing.T) {
	const dim = 256
	for _, typ := range []ml.Type{ml.Q8_0, ml.Q4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			c := moeCases[0]
			c.moe.Hidden = 256
			r := rand.New(rand.NewPCG(2, uint64(typ)))
			e := randExperts(t, r, c, dim, typ)
			run := moeRunner(dim, c.moe, c.act)
			n := 24
			x := randVec(r, n*dim, 1)
			batch := make([]float32, n*dim)
			run.moeFFN(e, x, n, batch)
			for i := range n {
				one := make([]float32, dim)
				run.moeFFN(e, x[i*dim:(i+1)*dim], 1, one)
				require.Equal(t, one, batch[i*dim:(i+1)*dim], "token %d", i)
				want := refMoE(e, c.moe, c.act, x[i*dim:(i+1)*dim])
				worst := 0.0
				for j, v := range want {
					worst = math.Max(worst, math.Abs(v-float64(one[j])))
				}
				require.Less(t, worst, 0.05, "token %d vs the dequantized reference", i)
			}
		})
	}
}

// moeGGUF writes a small random-weight GGUF of an MoE architecture.
// glm4moe: one leading dense layer, two MoE layers with a shared expert
// and a selection bias, and one trailing next-token-prediction layer that
// the loader must skip. qwen2moe: two MoE layers with a gated shared
// expert and Q/K/V biases.
func moeGGUF(t *testing.T, name string) string {
	const dim, heads, kvHeads, hd, vocab, experts, used, hidden, expHidden = 64, 4, 2, 16, 32, 8, 2, 96, 32
	r := rand.New(rand.NewPCG(3, 4))
	b := gguf.NewBuilder()
	b.Set("general.architecture", name)
	p := name + "."
	layers, dense, nextn := 2, 0, 0
	if name == "glm4moe" {
		layers, dense, nextn = 4, 1, 1
		b.Set(p+"leading_dense_block_count", uint32(dense))
		b.Set(p+"nextn_predict_layers", uint32(nextn))
		b.Set(p+"expert_weights_norm", true)
		b.Set(p+"expert_weights_scale", float32(1.5))
		b.Set(p+"expert_gating_func", uint32(2))
		b.Set(p+"expert_shared_count", uint32(1))
		b.Set(p+"rope.dimension_count", uint32(hd/2))
	} else {
		b.Set(p+"expert_shared_feed_forward_length", uint32(hidden))
	}
	b.Set(p+"block_count", uint32(layers))
	b.Set(p+"context_length", uint32(256))
	b.Set(p+"embedding_length", uint32(dim))
	b.Set(p+"feed_forward_length", uint32(hidden))
	b.Set(p+"attention.head_count", uint32(heads))
	b.Set(p+"attention.head_count_kv", uint32(kvHeads))
	b.Set(p+"attention.key_length", uint32(hd))
	b.Set(p+"attention.value_length", uint32(hd))
	b.Set(p+"attention.layer_norm_rms_epsilon", float32(1e-5))
	b.Set(p+"rope.freq_base", float32(10000))
	b.Set(p+"expert_count", uint32(experts))
	b.Set(p+"expert_used_count", uint32(used))
	b.Set(p+"expert_feed_forward_length", uint32(expHidden))
	add := func(name string, scale float64, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		b.AddF32(name, dims, randVec(r, int(n), scale))
	}
	ones := func(name string, n uint64) {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1 + float32(r.NormFloat64()*0.1)
		}
		b.AddF32(name, []uint64{n}, v)
	}
	w := func(cols uint64) float64 { return 1 / math.Sqrt(float64(cols)) }
	add("token_embd.weight", 1, dim, vocab)
	ones("output_norm.weight", dim)
	add("output.weight", w(dim), dim, vocab)
	ffnNorm := "ffn_norm"
	if name == "glm4moe" {
		ffnNorm = "post_attention_norm"
	}
	for l := range layers {
		q := "blk." + itoa(l) + "."
		ones(q+"attn_norm.weight", dim)
		add(q+"attn_q.weight", w(dim), dim, heads*hd)
		add(q+"attn_k.weight", w(dim), dim, kvHeads*hd)
		add(q+"attn_v.weight", w(dim), dim, kvHeads*hd)
		add(q+"attn_q.bias", 0.5, heads*hd)
		add(q+"attn_k.bias", 0.5, kvHeads*hd)
		add(q+"attn_v.bias", 0.5, kvHeads*hd)
		add(q+"attn_output.weight", w(heads*hd), heads*hd, dim)
		ones(q+ffnNorm+".weight", dim)
		if l < dense {
			add(q+"ffn_gate.weight", w(dim), dim, hidden)
			add(q+"ffn_up.weight", w(dim), dim, hidden)
			add(q+"ffn_down.weight", w(hidden), hidden, dim)
			continue
		}
		add(q+"ffn_gate_inp.weight", 3*w(dim), dim, experts)
		add(q+"ffn_gate_exps.weight", w(dim), dim, expHidden, experts)
		add(q+"ffn_up_exps.weight", w(dim), dim, expHidden, experts)
		add(q+"ffn_down_exps.weight", w(expHidden), expHidden, dim, experts)
		sh := uint64(hidden)
		if name == "glm4moe" {
			sh = expHidden
			add(q+"exp_probs_b.bias", 0.3, experts)
		} else {
			add(q+"ffn_gate_inp_shexp.weight", w(dim), dim)
		}
		add(q+"ffn_gate_shexp.weight", w(dim), dim, sh)
		add(q+"ffn_up_shexp.weight", w(dim), dim, sh)
		add(q+"ffn_down_shexp.weight", w(sh), sh, dim)
		if l >= layers-nextn {
			// llama.cpp's NextN tensors: present in the file, not run.
			add(q+"nextn.eh_proj.weight", w(2*dim), 2*dim, dim)
			ones(q+"nextn.enorm.weight", dim)
			ones(q+"nextn.hnorm.weight", dim)
		}
	}
	path := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, b.WriteFile(path))
	return path
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}

// TestMoEArchitecturesLoadAndRun loads synthetic qwen2moe and glm4moe
// files (glm4moe: a leading dense layer, partial rotary, sigmoid router
// with selection bias and scale, shared expert, and a trailing
// next-token-prediction layer that is skipped) and checks that a batch of
// sequences decodes to exactly the logits each gets alone.
func TestMoEArchitecturesLoadAndRun(t *testing.T) {
	for _, name := range []string{"qwen2moe", "glm4moe"} {
		t.Run(name, func(t *testing.T) {
			w, f, err := LoadGGUF(moeGGUF(t, name))
			require.NoError(t, err)
			defer f.Close()
			c := w.Config
			switch name {
			case "glm4moe":
				require.Equal(t, 3, c.Layers, "the next-token-prediction layer is not part of the decoder")
				require.Equal(t, arch.MoE{Experts: 8, Used: 2, Hidden: 32, Gating: arch.GatingSigmoid, NormTopK: true, WeightScale: 1.5, LeadingDense: 1}, c.Block.MoE)
				require.Equal(t, 8, c.RopeDim)
				require.NotNil(t, w.Layers[0].Gate)
				require.Nil(t, w.Layers[0].MoE)
				require.NotNil(t, w.Layers[1].MoE.SelectBias)
				require.Nil(t, w.Layers[1].MoE.SharedGateInp)
			case "qwen2moe":
				require.Equal(t, arch.MoE{Experts: 8, Used: 2, Hidden: 32}, c.Block.MoE)
				require.NotNil(t, w.Layers[0].MoE.SharedGateInp)
				require.NotNil(t, w.Layers[0].QBias)
			}
			// Prefetch and WeightBytes cover the experts (mapped in place).
			var experts int64
			for _, l := range w.Layers {
				if l.MoE != nil {
					for x := range l.MoE.Gate {
						experts += int64(len(l.MoE.Gate[x].Data) + len(l.MoE.Up[x].Data) + len(l.MoE.Down[x].Data))
					}
				}
			}
			require.Positive(t, experts)
			require.Greater(t, w.WeightBytes(), experts)
			pool := newTestPool(t, c, 32)
			r, err := NewRunner(w, pool)
			require.NoError(t, err)
			prompts := [][]int{{1, 5, 9, 2}, {3, 3, 7, 30, 11, 12, 4}, {17}}
			alone := make([][]float32, len(prompts))
			for i, p := range prompts {
				tab := pool.NewTable(kvcache.RequestID(100+i), "a")
				require.NoError(t, tab.Reserve(len(p)))
				b := &Batch{Seqs: []Seq{{Tokens: p, Table: tab, Logits: true}}}
				require.NoError(t, r.Forward(b))
				alone[i] = append([]float32(nil), b.Logits[0]...)
				for _, v := range alone[i] {
					require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
				}
				require.NoError(t, tab.Release())
			}
			b := &Batch{}
			for i, p := range prompts {
				tab := pool.NewTable(kvcache.RequestID(200+i), "a")
				require.NoError(t, tab.Reserve(len(p)))
				defer func() { require.NoError(t, tab.Release()) }()
				b.Seqs = append(b.Seqs, Seq{Tokens: p, Table: tab, Logits: true})
			}
			require.NoError(t, r.Forward(b))
			for i := range prompts {
				require.Equal(t, alone[i], b.Logits[i], "sequence %d batched", i)
			}
		})
	}
}

// newTinyMoE is newTinyModel (llama) with a Mixtral-style FFN: 4 experts
// of width 16, 2 used, with a gated shared expert and expert biases, so
// that the fuzzer starts from a file every MoE tensor kind is in.
func newTinyMoE() *tinyModel {
	const dim, hidden, experts = 32, 16, 4
	m := newTinyModel().drop("blk.0.ffn_gate.weight").drop("blk.0.ffn_up.weight").drop("blk.0.ffn_down.weight")
	m.set("llama.expert_count", uint32(experts)).set("llama.expert_used_count", uint32(2)).set("llama.expert_feed_forward_length", uint32(hidden))
	add := func(name string, dims ...uint64) {
		m.tensors = append(m.tensors, tinyTensor{name: name, typ: gguf.TypeF32, dims: dims})
	}
	add("blk.0.ffn_gate_inp.weight", dim, experts)
	add("blk.0.ffn_gate_exps.weight", dim, hidden, experts)
	add("blk.0.ffn_up_exps.weight", dim, hidden, experts)
	add("blk.0.ffn_down_exps.weight", hidden, dim, experts)
	add("blk.0.ffn_gate_exps.bias", hidden, experts)
	add("blk.0.ffn_down_exps.bias", dim, experts)
	add("blk.0.ffn_gate_inp_shexp.weight", dim)
	add("blk.0.ffn_gate_shexp.weight", dim, 8)
	add("blk.0.ffn_up_shexp.weight", dim, 8)
	add("blk.0.ffn_down_shexp.weight", 8, dim)
	return m
}

// TestTinyMoELoads: the fuzzer's MoE seed is a valid file, and its
// experts are views of the 3-D tensors.
func TestTinyMoELoads(t *testing.T) {
	w, err := newTinyMoE().load(t)
	require.NoError(t, err)
	e := w.Layers[0].MoE
	require.NotNil(t, e)
	require.Len(t, e.Gate, 4)
	require.Equal(t, 16, e.Gate[3].Rows)
	require.Len(t, e.GateBias, 4)
	require.Nil(t, e.UpBias)
	require.Equal(t, 8, e.SharedUp.Rows)
	require.Len(t, e.SharedGateInp, 32)
	_, err = newTinyMoE().set("llama.expert_feed_forward_length", uint32(8)).load(t)
	require.ErrorContains(t, err, "blk.0.ffn_gate_exps.weight has dims [32 16 4], want [32 8 4]")
}

// TestExpertsReadInPlace: a quantized file's experts are views of its
// mapped 3-D tensors (expert x at x times the expert's bytes), not copies,
// so decode reads only the routed experts' rows from the file.
func TestExpertsReadInPlace(t *testing.T) {
	g := testmodels.LoadArchGolden(t, "qwen3moe.Q4_K_M")
	w, f, err := LoadGGUF(g.Model)
	require.NoError(t, err)
	defer f.Close()
	for l, layer := range w.Layers {
		for _, m := range []struct {
			name  string
			views []*ml.Matrix
		}{{"ffn_gate_exps", layer.MoE.Gate}, {"ffn_up_exps", layer.MoE.Up}, {"ffn_down_exps", layer.MoE.Down}} {
			ti, ok := f.Tensor(fmt.Sprintf("blk.%d.%s.weight", l, m.name))
			require.True(t, ok)
			per := len(ti.Data) / len(m.views)
			for x, v := range m.views {
				require.Equal(t, ti.Type, v.Type)
				require.Same(t, &ti.Data[x*per], &v.Data[0], "layer %d %s expert %d", l, m.name, x)
				require.Len(t, v.Data, per)
			}
		}
	}
}
