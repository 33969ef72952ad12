package model

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
	"github.com/kvwarden/kvwarden/internal/testmodels/tiny"
)

// The tiny shapes (internal/testmodels/tiny) are architectures whose
// llama.cpp golden files are not in ../shared: Phi-4-mini's phi3 with
// partial rotary and LongRoPE, glm4moe and qwen2moe. Their random-weight
// GGUFs are rebuilt here in milliseconds and llama.cpp's output on them is
// embedded in the tiny package, so these checks run everywhere, CI
// included, without model files.

// tinyTol is golden/arch's F32 tolerance (its README: an independent
// numpy implementation is within 2.1e-05 of llama.cpp on such files).
const tinyTol = 1e-3

// loadTiny rebuilds shape s's GGUF, checks that it is the file the oracle
// ran (a generator change must come with regenerated oracle data), and
// loads it.
func loadTiny(t *testing.T, s tiny.Shape, o *tiny.Oracle) *Weights {
	t.Helper()
	data, err := tiny.Build(s)
	require.NoError(t, err)
	require.Equal(t, o.GGUFSHA256, tiny.SHA256(data),
		"%s: the generated GGUF is not the one llama.cpp ran; regenerate the oracle data (tiny package documentation)", s.Name)
	require.Len(t, data, o.GGUFBytes)
	p := filepath.Join(t.TempDir(), s.Name+".gguf")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	w, f, err := LoadGGUF(p)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return w
}

// tinyMaxDiff runs every case of run through r teacher-forced (prompt
// whole, and in chunks of 3) and returns the largest |dlogit| against
// llama.cpp.
func tinyMaxDiff(t *testing.T, r *Runner, pool *kvcache.Pool, run tiny.Run, id *kvcache.RequestID) float64 {
	t.Helper()
	worst := 0.0
	for _, c := range run.Cases {
		for _, chunk := range []int{0, 3} {
			d := maxDiff(t, teacherForce(t, r, pool, *id, c, len(c.Logits64), chunk), c)
			*id++
			worst = max(worst, d)
		}
	}
	return worst
}

// tinyBatchGreedy runs all cases at once, one batch per step (every
// prompt prefilled in the first, then one token each), so that the
// mixture-of-experts layers route tokens of different sequences together,
// and returns each case's greedy tokens.
func tinyBatchGreedy(t *testing.T, r *Runner, pool *kvcache.Pool, cases []testmodels.ArchCase, id *kvcache.RequestID) [][]int {
	t.Helper()
	b := &Batch{}
	out := make([][]int, len(cases))
	n := len(cases[0].Generated)
	for _, c := range cases {
		require.Len(t, c.Generated, n)
		tab := pool.NewTable(*id, "tiny")
		*id++
		defer func() { require.NoError(t, tab.Release()) }()
		require.NoError(t, tab.Reserve(len(c.Prompt)+n))
		b.Seqs = append(b.Seqs, Seq{Tokens: c.Prompt, Table: tab, Logits: true})
	}
	for range n {
		require.NoError(t, r.Forward(b))
		for i := range b.Seqs {
			tok := sample.Argmax(b.Logits[i])
			out[i] = append(out[i], tok)
			b.Seqs[i].Tokens = []int{tok}
		}
	}
	return out
}

// TestTinyOracle checks kvwarden against llama.cpp (d32676d) on each tiny
// shape, at each context size llama.cpp ran it with (Phi-4-mini's: one at
// its LongRoPE original context, short factors, and one above, long
// factors): every greedy token equal, each prompt alone and all batched
// together, and the teacher-forced logits within tinyTol with the prompt
// prefilled whole and in chunks of 3.
func TestTinyOracle(t *testing.T) {
	for _, s := range tiny.Shapes {
		t.Run(s.Name, func(t *testing.T) {
			o, err := tiny.Load(s.Name)
			require.NoError(t, err)
			w := loadTiny(t, s, o)
			require.Equal(t, s.Arch, w.Config.Arch)
			require.Equal(t, s.Layers, w.Config.Layers, "decoder layers (NextN layers are skipped)")
			require.Equal(t, s.RopeDim, w.Config.RopeDim)
			if s.Tied {
				require.Same(t, w.Embed, w.Output, "tied output")
			}
			pool := newTestPool(t, w.Config, 16)
			id := kvcache.RequestID(1)
			for _, run := range o.Runs {
				r, err := NewRunnerContext(w, pool, run.NCtx)
				require.NoError(t, err)
				for ci, c := range run.Cases {
					got, _, _ := greedy(t, r, pool, id, c.Prompt, len(c.Generated), 0)
					id++
					require.Equal(t, c.Generated, got, "n_ctx %d case %d greedy", run.NCtx, ci)
				}
				for ci, got := range tinyBatchGreedy(t, r, pool, run.Cases, &id) {
					require.Equal(t, run.Cases[ci].Generated, got, "n_ctx %d case %d greedy, batched", run.NCtx, ci)
				}
				d := tinyMaxDiff(t, r, pool, run, &id)
				t.Logf("n_ctx %d: max |dlogit| %.3g", run.NCtx, d)
				require.LessOrEqual(t, d, tinyTol, "n_ctx %d", run.NCtx)
			}
			require.Equal(t, pool.Pages(), pool.FreePages())
		})
	}
}

// TestTinyOracleFeaturesMatter shows that the oracle data pin down each
// feature the tiny shapes stand for: the same model with one feature
// switched off (or the other LongRoPE factor set chosen) is further than
// tinyTol from llama.cpp, so TestTinyOracle would catch an engine that
// got it wrong.
func TestTinyOracleFeaturesMatter(t *testing.T) {
	// onMoE applies f to every mixture-of-experts layer.
	onMoE := func(f func(e *Experts)) func(t *testing.T, w *Weights) {
		return func(t *testing.T, w *Weights) {
			n := 0
			for i := range w.Layers {
				if e := w.Layers[i].MoE; e != nil {
					f(e)
					n++
				}
			}
			require.NotZero(t, n, "no mixture-of-experts layer")
		}
	}
	// fullRotary rotates all head dimensions (an engine ignoring
	// rope.dimension_count), with LongRoPE factors of 1 for the extra
	// pairs.
	fullRotary := func(_ *testing.T, w *Weights) {
		pad := func(f []float32) []float32 {
			if f == nil {
				return nil
			}
			out := append([]float32(nil), f...)
			for len(out) < w.Config.HeadDim/2 {
				out = append(out, 1)
			}
			return out
		}
		w.RopeLong, w.RopeShort = pad(w.RopeLong), pad(w.RopeShort)
		w.Config.RopeDim = w.Config.HeadDim
	}
	for _, tc := range []struct {
		shape, name string
		// run is the index of the oracle run compared; ctx, when not 0,
		// the context size the runner is made for instead of the run's.
		run, ctx int
		mutate   func(t *testing.T, w *Weights)
	}{
		{shape: "phi4-mini", name: "long factors at the short context", run: 0, ctx: 1024},
		{shape: "phi4-mini", name: "short factors at the long context", run: 1, ctx: 256},
		{shape: "phi4-mini", name: "full rotary", run: 1, mutate: fullRotary},
		{shape: "phi4-mini", name: "no LongRoPE attention factor", run: 1, mutate: func(_ *testing.T, w *Weights) { w.Config.Block.Scaling.Mscale = 0 }},
		{shape: "glm4moe", name: "full rotary", mutate: fullRotary},
		{shape: "glm4moe", name: "no selection bias", mutate: onMoE(func(e *Experts) { e.SelectBias = nil })},
		{shape: "glm4moe", name: "no top-k normalisation", mutate: func(_ *testing.T, w *Weights) { w.Config.Block.MoE.NormTopK = false }},
		{shape: "glm4moe", name: "no routed weight scale", mutate: func(_ *testing.T, w *Weights) { w.Config.Block.MoE.WeightScale = 0 }},
		{shape: "glm4moe", name: "no shared expert", mutate: onMoE(func(e *Experts) { e.SharedGate, e.SharedUp, e.SharedDown = nil, nil, nil })},
		{shape: "qwen2moe", name: "ungated shared expert", mutate: onMoE(func(e *Experts) { e.SharedGateInp = nil })},
		{shape: "qwen2moe", name: "top-k renormalised", mutate: func(_ *testing.T, w *Weights) { w.Config.Block.MoE.NormTopK = true }},
		{shape: "qwen2moe", name: "no q/k/v biases", mutate: func(_ *testing.T, w *Weights) {
			for i := range w.Layers {
				w.Layers[i].QBias, w.Layers[i].KBias, w.Layers[i].VBias = nil, nil, nil
			}
		}},
		{shape: "deepseek2", name: "no yarn mscale in the attention scale", mutate: noMLAMscale},
		{shape: "deepseek2-lite", name: "no yarn mscale in the attention scale", mutate: noMLAMscale},
		{shape: "deepseek2", name: "neox rope", mutate: func(_ *testing.T, w *Weights) { w.Config.Block.RopeStyle = arch.RopeNeoX }},
		{shape: "deepseek2", name: "no expert groups", mutate: func(_ *testing.T, w *Weights) { w.Config.Block.MoE.Groups = 0 }},
		{shape: "deepseek2", name: "no q LoRA norm", mutate: func(_ *testing.T, w *Weights) {
			for i := range w.Layers {
				w.Layers[i].MLA.QANorm = ones(len(w.Layers[i].MLA.QANorm))
			}
		}},
		{shape: "deepseek2-lite", name: "no latent norm", mutate: func(_ *testing.T, w *Weights) {
			for i := range w.Layers {
				w.Layers[i].MLA.KVANorm = ones(len(w.Layers[i].MLA.KVANorm))
			}
		}},
		{shape: "deepseek2-lite", name: "softmax weights renormalised", mutate: func(_ *testing.T, w *Weights) { w.Config.Block.MoE.NormTopK = true }},
	} {
		t.Run(tc.shape+"/"+tc.name, func(t *testing.T) {
			s, err := tiny.ByName(tc.shape)
			require.NoError(t, err)
			o, err := tiny.Load(tc.shape)
			require.NoError(t, err)
			w := loadTiny(t, s, o)
			if tc.mutate != nil {
				tc.mutate(t, w)
			}
			run := o.Runs[tc.run]
			ctx := run.NCtx
			if tc.ctx != 0 {
				ctx = tc.ctx
			}
			pool := newTestPool(t, w.Config, 16)
			r, err := NewRunnerContext(w, pool, ctx)
			require.NoError(t, err)
			id := kvcache.RequestID(1)
			d := tinyMaxDiff(t, r, pool, run, &id)
			t.Logf("max |dlogit| %.3g", d)
			require.Greater(t, d, 10*tinyTol, "the oracle data do not tell this feature apart")
		})
	}
}

// noMLAMscale drops YaRN's mscale_all_dim correction from deepseek2's
// attention scale (1/sqrt(key_length_mla) as without YaRN).
func noMLAMscale(_ *testing.T, w *Weights) {
	w.Config.Block.AttnScale = float32(1 / math.Sqrt(float64(w.Config.Block.MLA.Nope+w.Config.RopeDim)))
}

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// TestTinyBuildDeterministic checks that the generator is a pure function
// of the shape and that its files carry what the shapes say, NextN layer
// included.
func TestTinyBuildDeterministic(t *testing.T) {
	for _, s := range tiny.Shapes {
		t.Run(s.Name, func(t *testing.T) {
			a, err := tiny.Build(s)
			require.NoError(t, err)
			b, err := tiny.Build(s)
			require.NoError(t, err)
			require.Equal(t, a, b)
			s2 := s
			s2.Seed++
			c, err := tiny.Build(s2)
			require.NoError(t, err)
			require.NotEqual(t, tiny.SHA256(a), tiny.SHA256(c), "the seed must matter")
			f, err := gguf.Parse(a)
			require.NoError(t, err)
			n, ok := f.Uint(s.Arch + ".block_count")
			require.True(t, ok)
			require.EqualValues(t, s.Layers+s.NextN, n)
			if s.NextN > 0 {
				_, ok := f.Tensor("blk." + strconv.Itoa(s.Layers) + ".nextn.eh_proj.weight")
				require.True(t, ok, "NextN layer tensors present")
			}
		})
	}
}
