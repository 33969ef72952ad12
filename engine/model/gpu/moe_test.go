package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

func sigmoid(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

// TestMoERoute: the host routing of the CUDA pass selects and weights the
// experts as the CPU pass's routeTokens does for each gating of the arch
// table (the golden tests compare the whole pass with llama.cpp on a GPU),
// and groups the (token, choice) pairs by expert.
func TestMoERoute(t *testing.T) {
	softmax := func(v ...float64) []float64 {
		var s float64
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = math.Exp(x)
			s += out[i]
		}
		for i := range out {
			out[i] /= s
		}
		return out
	}
	p := softmax(1, 3, 2, 0)
	for _, tc := range []struct {
		name               string
		m                  arch.MoE
		logits             []float32
		routerBias, selBia []float32
		idx                []int32
		wts                []float64
	}{
		{"softmax, top 2 (Mixtral)", arch.MoE{Experts: 4, Used: 2, Gating: arch.GatingSoftmax},
			[]float32{1, 3, 2, 0}, nil, nil, []int32{1, 2}, []float64{p[1], p[2]}},
		{"softmax, normalised (qwen3moe)", arch.MoE{Experts: 4, Used: 2, Gating: arch.GatingSoftmax, NormTopK: true},
			[]float32{1, 3, 2, 0}, nil, nil, []int32{1, 2}, []float64{p[1] / (p[1] + p[2]), p[2] / (p[1] + p[2])}},
		{"sigmoid, selection bias, normalised and scaled (glm4moe)",
			arch.MoE{Experts: 4, Used: 2, Gating: arch.GatingSigmoid, NormTopK: true, WeightScale: 2.5},
			[]float32{0, 0, 1, -1}, nil, []float32{0, 2, 0, 0}, []int32{1, 2},
			[]float64{2.5 * sigmoid(0) / (sigmoid(0) + sigmoid(1)), 2.5 * sigmoid(1) / (sigmoid(0) + sigmoid(1))}},
		{"router bias, softmax over the selected (gpt-oss)", arch.MoE{Experts: 4, Used: 2, Gating: arch.GatingSoftmaxSelected},
			[]float32{1, 3, 2, 0}, []float32{0, 0, 0, 4}, nil, []int32{3, 1}, softmax(4, 3)},
		{"ties go to the lower expert", arch.MoE{Experts: 4, Used: 3, Gating: arch.GatingSoftmax},
			[]float32{0, 5, 0, 0}, nil, nil, []int32{1, 0, 2}, []float64{softmax(0, 5, 0, 0)[1], softmax(0, 5, 0, 0)[0], softmax(0, 5, 0, 0)[2]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rt moeRoute
			lg := append([]float32(nil), tc.logits...)
			rt.route(tc.m, lg, 1, tc.routerBias, tc.selBia)
			require.Equal(t, tc.idx, rt.idx)
			require.Len(t, rt.wts, len(tc.wts))
			for j, w := range tc.wts {
				require.InDelta(t, w, rt.wts[j], 1e-6, "choice %d", j)
			}
		})
	}

	t.Run("grouping", func(t *testing.T) {
		m := arch.MoE{Experts: 5, Used: 2, Gating: arch.GatingSoftmax}
		// Tokens choose {3,0}, {0,4}, {3,4}.
		lg := []float32{
			2, -1, -1, 3, -2,
			3, -1, -1, -2, 2,
			-1, -1, -2, 3, 2,
		}
		var rt moeRoute
		rt.route(m, lg, 3, nil, nil)
		require.Equal(t, []int32{3, 0, 0, 4, 3, 4}, rt.idx)
		require.Equal(t, []int{0, 2, 2, 2, 4, 6}, rt.start, "expert 0: 2 rows, 3: 2 rows, 4: 2 rows")
		for i, ex := range rt.idx {
			s := int(rt.slot[i])
			require.GreaterOrEqual(t, s, rt.start[ex], "pair %d", i)
			require.Less(t, s, rt.start[ex+1], "pair %d", i)
			require.Equal(t, int32(i/m.Used), rt.tok[s], "pair %d", i)
		}
		// Grouped rows keep token order within an expert.
		require.Equal(t, []int32{0, 1, 0, 2, 1, 2}, rt.tok)
	})
}

// TestGPUMoEHalf runs the carried mixture-of-experts files with the
// default f16 weights (activations reach the GEMMs, the router's
// included, as f16): a prefill of two sequences at once, so tokens of both
// share expert GEMMs, then a decode step of both. Logits are finite. (On
// the driver stand-in this checks the launches, the mid-step download of
// the router logits and the routing upload; on a GPU also the values.)
func TestGPUMoEHalf(t *testing.T) {
	d := gpuOrSkip(t)
	for _, name := range []string{"qwen3moe.Q4_K_M", "gptoss.MXFP4_MOE"} {
		t.Run(name, func(t *testing.T) {
			g := testmodels.LoadArchGolden(t, name)
			w, f, err := model.LoadGGUF(g.Model)
			require.NoError(t, err)
			defer f.Close()
			pool := gpuPool(t, d, w.Config, device.F16, 16)
			r, err := New(d, w, pool, DefaultOptions())
			require.NoError(t, err)
			defer r.Close()
			var tabs []*kvcache.PageTable
			b := model.Batch{}
			for i, c := range g.Cases[:2] {
				tab := pool.NewTable(kvcache.RequestID(i+1), "moe-half")
				defer func() { require.NoError(t, tab.Release()) }()
				require.NoError(t, tab.Reserve(len(c.Prompt)+1))
				tabs = append(tabs, tab)
				b.Seqs = append(b.Seqs, model.Seq{Tokens: c.Prompt, Table: tab, Logits: true})
			}
			require.NoError(t, r.Forward(&b))
			b = model.Batch{}
			for i, tab := range tabs {
				b.Seqs = append(b.Seqs, model.Seq{Tokens: g.Cases[i].Prompt[:1], Table: tab, Logits: true})
			}
			require.NoError(t, r.Forward(&b))
			for i := range tabs {
				require.Len(t, b.Logits[i], w.Config.Vocab)
				finite := true
				for _, v := range b.Logits[i] {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						finite = false
						break
					}
				}
				kernelOut(t).True(finite, "non-finite logits, sequence %d", i)
			}
		})
	}
}

// moeGGUF writes a small random-weight file of an MoE architecture whose
// shared-expert paths no golden file has: qwen2moe (two MoE layers, a
// shared expert with its sigmoid gate, Q/K/V biases) and glm4moe (a
// leading dense layer, sigmoid router with selection bias, normalised and
// scaled weights, an ungated shared expert, partial rotary).
func moeGGUF(t *testing.T, name string) string {
	const dim, heads, kvHeads, hd, vocab, experts, used, hidden, expHidden = 64, 4, 2, 16, 48, 8, 2, 96, 32
	rng := rand.New(rand.NewPCG(5, 6))
	b := gguf.NewBuilder()
	b.Set("general.architecture", name)
	p := name + "."
	layers, dense := 2, 0
	if name == "glm4moe" {
		layers, dense = 3, 1
		b.Set(p+"leading_dense_block_count", uint32(dense))
		b.Set(p+"expert_weights_norm", true)
		b.Set(p+"expert_weights_scale", float32(1.5))
		b.Set(p+"expert_gating_func", uint32(2))
		b.Set(p+"expert_shared_count", uint32(1))
		b.Set(p+"rope.dimension_count", uint32(hd/2))
	} else {
		b.Set(p+"expert_shared_feed_forward_length", uint32(hidden))
	}
	for k, v := range map[string]uint32{
		"block_count": uint32(layers), "context_length": 256, "embedding_length": dim, "feed_forward_length": hidden,
		"attention.head_count": heads, "attention.head_count_kv": kvHeads, "attention.key_length": hd, "attention.value_length": hd,
		"expert_count": experts, "expert_used_count": used, "expert_feed_forward_length": expHidden,
	} {
		b.Set(p+k, v)
	}
	b.Set(p+"attention.layer_norm_rms_epsilon", float32(1e-5))
	b.Set(p+"rope.freq_base", float32(10000))
	add := func(name string, scale float64, dims ...uint64) {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		b.AddF32(name, dims, v)
	}
	ones := func(name string, n uint64) {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1 + float32(rng.NormFloat64()*0.1)
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
		q := fmt.Sprintf("blk.%d.", l)
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
		// A wide router: well-separated expert scores, so that the GPU's
		// and the CPU's rounding select the same experts.
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
	}
	path := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, b.WriteFile(path))
	return path
}

// TestGPUMoEMatchesCPU runs synthetic qwen2moe and glm4moe files (the
// shared expert with and without its gate, a leading dense layer, the
// sigmoid router with selection bias) on the CPU runner and the GPU runner
// with f32 weights and KV: a batch of a chunked prefill, a short prompt and
// a single token, over several steps. Bound: 1e-3 relative on the logits,
// as TestGPUBatchMatchesCPU.
func TestGPUMoEMatchesCPU(t *testing.T) {
	d := gpuOrSkip(t)
	for _, name := range []string{"qwen2moe", "glm4moe"} {
		t.Run(name, func(t *testing.T) {
			w, f, err := model.LoadGGUF(moeGGUF(t, name))
			require.NoError(t, err)
			defer f.Close()
			c := w.Config
			require.NotNil(t, w.Layers[len(w.Layers)-1].MoE.SharedUp)
			cpuPool, err := kvcache.New(cpu.New(), kvcache.Config{
				Geometry: kvcache.Geometry{PageSize: 16, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: device.F32}, Pages: 32})
			require.NoError(t, err)
			defer cpuPool.Close()
			cr, err := model.NewRunner(w, cpuPool)
			require.NoError(t, err)
			gp := gpuPool(t, d, c, device.F32, 32)
			gr, err := New(d, w, gp, Options{Weights: device.F32})
			require.NoError(t, err)
			defer gr.Close()
			prompts := [][]int{{1, 5, 9, 2, 40, 41, 7, 8, 30, 31, 12}, {3, 3, 7}, {17}}
			var ct, gt []*kvcache.PageTable
			for i := range prompts {
				ct = append(ct, cpuPool.NewTable(kvcache.RequestID(i+1), "t"))
				gt = append(gt, gp.NewTable(kvcache.RequestID(i+1), "t"))
				require.NoError(t, ct[i].Reserve(32))
				require.NoError(t, gt[i].Reserve(32))
			}
			next := append([][]int(nil), prompts...)
			for step := range 4 {
				var cb, gb model.Batch
				for i := range prompts {
					toks := next[i][:min(len(next[i]), 6)] // chunked prefill
					cb.Seqs = append(cb.Seqs, model.Seq{Tokens: toks, Table: ct[i], Logits: true})
					gb.Seqs = append(gb.Seqs, model.Seq{Tokens: toks, Table: gt[i], Logits: true})
				}
				require.NoError(t, cr.Forward(&cb))
				require.NoError(t, gr.Forward(&gb))
				for i := range prompts {
					kernelOut(t).Less(relErr(gb.Logits[i], cb.Logits[i]), 1e-3, "step %d seq %d", step, i)
					if len(next[i]) > 6 {
						next[i] = next[i][6:]
					} else {
						next[i] = []int{sample.Argmax(cb.Logits[i])}
					}
				}
			}
		})
	}
}
