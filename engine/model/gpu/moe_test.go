package gpu

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/device"
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
