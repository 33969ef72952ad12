package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// specWorkload is one speculative decoding benchmark: a model, a prompt
// and sampling; the same requests run with speculation off and on.
type specWorkload struct {
	name   string
	engine func(b *testing.B, sp engine.Speculative) *engine.Engine
	prompt func(b *testing.B, e *engine.Engine) engine.Request
	gen    int
	spec   engine.Speculative
}

func storiesSpecEngine(b *testing.B, sp engine.Speculative) *engine.Engine {
	e, err := engine.New(engine.Config{ModelPath: model.BuiltinStories, KVPages: 512, DisablePrefixCache: true, Speculative: sp})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return e
}

func q4SpecEngine(b *testing.B, sp engine.Speculative) *engine.Engine {
	w := mixModel(b, quantMixes[0]) // Q4_K_M
	e, err := engine.New(engine.Config{Weights: w, Tokenizer: tokenizer.NewBytes(), KVMemory: 128 << 20, MaxContext: 1024,
		DisablePrefixCache: true, Speculative: sp})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return e
}

// greedyText is e's greedy continuation of prompt, without speculation.
func greedyText(b *testing.B, e *engine.Engine, prompt string, n int) string {
	r, err := e.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n, Sampling: sample.Greedy(), Speculative: &engine.Speculative{}})
	require.NoError(b, err)
	return prompt + r.Text
}

// greedyTokens is the same for a token prompt.
func greedyTokens(b *testing.B, e *engine.Engine, prompt []int, n int) []int {
	r, err := e.Generate(context.Background(), engine.Request{Tokens: prompt, MaxTokens: n, Sampling: sample.Greedy(), Speculative: &engine.Speculative{}})
	require.NoError(b, err)
	return append(append([]int(nil), prompt...), r.Tokens...)
}

var specWorkloads = []specWorkload{
	{
		// A story, then a request to quote from it: the output
		// continues the quote, partly verbatim.
		name: "stories260K/quote", engine: storiesSpecEngine, gen: 128,
		prompt: func(b *testing.B, e *engine.Engine) engine.Request {
			s := greedyText(b, e, "Once upon a time", 150)
			return engine.Request{Prompt: s + "\nTom said: \"" + s[20:50], Sampling: sample.Greedy()}
		},
	},
	{
		// The quote workload with stories260K drafting for itself (a
		// draft model that always agrees: the bound of what a draft model
		// gains, minus its own cost, which here equals the model's).
		name: "stories260K/quote/draft-model", engine: storiesSpecEngine, gen: 128,
		spec: engine.Speculative{Type: engine.SpecDraft, DraftModel: model.BuiltinStories},
		prompt: func(b *testing.B, e *engine.Engine) engine.Request {
			s := greedyText(b, e, "Once upon a time", 150)
			return engine.Request{Prompt: s + "\nTom said: \"" + s[20:50], Sampling: sample.Greedy()}
		},
	},
	{
		// The model's own story: it repeats its sentences now and then.
		name: "stories260K/free", engine: storiesSpecEngine, gen: 128,
		prompt: func(*testing.B, *engine.Engine) engine.Request {
			return engine.Request{Prompt: "Once upon a time", Sampling: sample.Greedy()}
		},
	},
	{
		// Random prompt tokens, sampled at temperature 1 with 1-grams:
		// many drafts, almost all rejected (the cost of speculation).
		name: "stories260K/random", engine: storiesSpecEngine, gen: 128,
		spec: engine.Speculative{NgramMin: 1, NgramMax: 2},
		prompt: func(b *testing.B, e *engine.Engine) engine.Request {
			return engine.Request{Tokens: benchPrompt(7, 256, e.ModelConfig().Vocab), Sampling: sample.Params{Temperature: 1, Seed: 1, HasSeed: true}}
		},
	},
	{
		// The random-weight 110M shape repeats one token whatever the
		// prompt (its greedy output, and its sampled output too): every
		// draft is accepted, the bound of what speculation gains on a
		// model whose step streams its weights (a copy workload on a real
		// model sits between this and "random"). The prompt is a random
		// one followed by the model's own greedy output.
		name: "110M-Q4_K_M/loop", engine: q4SpecEngine, gen: 64,
		prompt: func(b *testing.B, e *engine.Engine) engine.Request {
			p := benchPrompt(3, 32, e.ModelConfig().Vocab)
			return engine.Request{Tokens: greedyTokens(b, e, p, 8), Sampling: sample.Greedy()}
		},
	},
}

// BenchmarkSpeculative: decode tokens/s with n-gram speculation off and
// on, alternating within each iteration on the same engine weights so
// that both see the same machine load; the ratio is on/off. Also reported:
// draft tokens accepted per verifying step, and tokens generated per
// sequence step with speculation on. Greedy workloads check that both
// runs give the same tokens.
func BenchmarkSpeculative(b *testing.B) {
	for _, wl := range specWorkloads {
		for _, k := range []int{4, 8} {
			b.Run(fmt.Sprintf("%s/draft=%d", wl.name, k), func(b *testing.B) {
				sp := wl.spec
				sp.DraftMax = k
				if sp.Type == "" {
					sp.Type = engine.SpecNgram
				}
				off := wl.engine(b, engine.Speculative{})
				on := wl.engine(b, sp)
				req := wl.prompt(b, off)
				req.MaxTokens, req.Tenant = wl.gen, "bench"
				var offT, onT time.Duration
				var offN, onN int
				before := on.Stats()
				b.ResetTimer()
				for range b.N {
					r0, err := off.Generate(context.Background(), req)
					require.NoError(b, err)
					r1, err := on.Generate(context.Background(), req)
					require.NoError(b, err)
					require.Equal(b, r0.Tokens, r1.Tokens, "speculation changed the output")
					offT, offN = offT+r0.Timings.Decode, offN+r0.Timings.DecodeTokens
					onT, onN = onT+r1.Timings.Decode, onN+r1.Timings.DecodeTokens
				}
				b.StopTimer()
				after := on.Stats()
				steps := after.Spec.Steps - before.Spec.Steps
				offRate, onRate := float64(offN)/offT.Seconds(), float64(onN)/onT.Seconds()
				b.ReportMetric(offRate, "off_tok/s")
				b.ReportMetric(onRate, "on_tok/s")
				b.ReportMetric(onRate/offRate, "ratio")
				if steps > 0 {
					b.ReportMetric(float64(after.Spec.Accepted-before.Spec.Accepted)/float64(steps), "accepted/draftstep")
				}
				b.ReportMetric(float64(after.GeneratedTokens-before.GeneratedTokens)/float64(after.Steps-before.Steps), "tokens/step")
				if steps > 0 && after.Spec.DraftTime > before.Spec.DraftTime {
					b.ReportMetric(float64((after.Spec.DraftTime-before.Spec.DraftTime).Microseconds())/1000/float64(steps), "draft_ms/draftstep")
					b.ReportMetric(offT.Seconds()*1000/float64(offN), "plain_ms/tok")
				}
			})
		}
	}
}

// BenchmarkSpecDraftModelGGUF: draft-model speculation between two GGUF
// files of one vocabulary, KVWARDEN_SPEC_TARGET drafted for by
// KVWARDEN_SPEC_DRAFT (skipped without them), greedy, speculation off and
// on alternating within each iteration. Reported: the ratio on/off,
// accepted draft tokens per verifying step, and the draft model's time per
// verifying step against the time of a plain decode step. Random-weight
// models accept almost nothing: that measures what drafting costs when it
// fails.
func BenchmarkSpecDraftModelGGUF(b *testing.B) {
	target, draft := os.Getenv("KVWARDEN_SPEC_TARGET"), os.Getenv("KVWARDEN_SPEC_DRAFT")
	if target == "" || draft == "" {
		b.Skip("set KVWARDEN_SPEC_TARGET and KVWARDEN_SPEC_DRAFT to two GGUF files of one vocabulary")
	}
	gen := 32
	if n, err := strconv.Atoi(os.Getenv("KVWARDEN_SPEC_GEN")); err == nil && n > 0 {
		gen = n
	}
	ks := []int{4}
	if v := os.Getenv("KVWARDEN_SPEC_DRAFTMAX"); v != "" {
		ks = ks[:0]
		for _, f := range strings.Split(v, ",") {
			k, err := strconv.Atoi(f)
			require.NoError(b, err, "KVWARDEN_SPEC_DRAFTMAX")
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		b.Run(fmt.Sprintf("draft=%d", k), func(b *testing.B) {
			mk := func(sp engine.Speculative) *engine.Engine {
				e, err := engine.New(engine.Config{ModelPath: target, KVMemory: 256 << 20, MaxContext: 512, MaxSeqs: 2, DisablePrefixCache: true, Speculative: sp})
				require.NoError(b, err)
				b.Cleanup(func() { _ = e.Close() })
				return e
			}
			off := mk(engine.Speculative{})
			on := mk(engine.Speculative{Type: engine.SpecDraft, DraftModel: draft, DraftMax: k})
			req := engine.Request{Tokens: benchPrompt(5, 64, off.ModelConfig().Vocab), MaxTokens: gen, Sampling: sample.Greedy(), Tenant: "bench"}
			var offT, onT time.Duration
			var offN, onN int
			distinct := map[int]bool{}
			before := on.Stats()
			b.ResetTimer()
			for range b.N {
				r0, err := off.Generate(context.Background(), req)
				require.NoError(b, err)
				r1, err := on.Generate(context.Background(), req)
				require.NoError(b, err)
				require.Equal(b, r0.Tokens, r1.Tokens, "speculation changed the output")
				for _, t := range r0.Tokens {
					distinct[t] = true
				}
				offT, offN = offT+r0.Timings.Decode, offN+r0.Timings.DecodeTokens
				onT, onN = onT+r1.Timings.Decode, onN+r1.Timings.DecodeTokens
			}
			b.StopTimer()
			after := on.Stats()
			offRate, onRate := float64(offN)/offT.Seconds(), float64(onN)/onT.Seconds()
			b.ReportMetric(offRate, "off_tok/s")
			b.ReportMetric(onRate, "on_tok/s")
			b.ReportMetric(onRate/offRate, "ratio")
			b.ReportMetric(offT.Seconds()*1000/float64(offN), "plain_ms/tok")
			// A random-weight model may fall into a loop of a few tokens,
			// which any draft predicts: the distinct tokens generated say
			// whether the output is one.
			b.ReportMetric(float64(len(distinct)), "distinct_tokens")
			if steps := after.Spec.Steps - before.Spec.Steps; steps > 0 {
				b.ReportMetric(float64(after.Spec.Accepted-before.Spec.Accepted)/float64(steps), "accepted/draftstep")
				b.ReportMetric(float64(after.Spec.Accepted-before.Spec.Accepted)/float64(after.Spec.Drafted-before.Spec.Drafted), "acceptance")
				b.ReportMetric(float64((after.Spec.DraftTime-before.Spec.DraftTime).Microseconds())/1000/float64(steps), "draft_ms/draftstep")
			}
		})
	}
}

// BenchmarkSpecVerifyStep: the forward pass of one sequence's decode step
// with k draft tokens (k+1 rows, logits for each) against the plain step
// (k = 0), alternating in the same loop, on the 110M-shaped Q4_K_M model
// at a 128-token context. Each step's drafts are rolled back, so
// cost_vs_plain is what a fully rejected draft costs: one token for the
// price of k+1 rows. A step with a accepted tokens yields a+1 tokens, so
// speculation gains when (a+1) > cost_vs_plain.
func BenchmarkSpecVerifyStep(b *testing.B) {
	w := mixModel(b, quantMixes[0])
	for _, k := range []int{1, 3, 7} {
		b.Run(fmt.Sprintf("draft=%d", k), func(b *testing.B) {
			const ctx = 128
			c := w.Config
			pool, err := kvcache.New(cpu.New(), kvcache.Config{
				Geometry: kvcache.Geometry{PageSize: 16, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: device.F16},
				Pages:    64,
			})
			require.NoError(b, err)
			defer pool.Close()
			r, err := model.NewRunner(w, pool)
			require.NoError(b, err)
			var id kvcache.RequestID
			newTable := func() *kvcache.PageTable {
				id++
				t := pool.NewTable(id, "bench")
				require.NoError(b, t.Reserve(ctx))
				require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: benchPrompt(int(id), ctx, c.Vocab), Table: t}}}))
				return t
			}
			plain, spec := newTable(), newTable()
			tokens := benchPrompt(99, k+1, c.Vocab)
			step := func(t *kvcache.PageTable, n int) time.Duration {
				require.NoError(b, t.Reserve(t.Written()+n))
				start := time.Now()
				require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: tokens[:n], Table: t, Logits: true, Draft: n - 1}}}))
				d := time.Since(start)
				require.NoError(b, t.Rollback())
				return d
			}
			var plainT, specT time.Duration
			b.ResetTimer()
			for range b.N {
				if plain.Written() > ctx+200 {
					b.StopTimer()
					require.NoError(b, plain.Release())
					require.NoError(b, spec.Release())
					plain, spec = newTable(), newTable()
					b.StartTimer()
				}
				plainT += step(plain, 1)
				specT += step(spec, k+1)
			}
			b.ReportMetric(float64(plainT.Microseconds())/float64(b.N)/1000, "plain_ms")
			b.ReportMetric(float64(specT.Microseconds())/float64(b.N)/1000, "draft_ms")
			b.ReportMetric(float64(specT)/float64(plainT), "cost_vs_plain")
		})
	}
}

// BenchmarkSpeculativeBatch: the 110M-shaped loop workload (every draft
// accepted) with 4 and 16 requests at once, half of them speculating in
// the "mixed" runs: generated tokens per second of wall time with
// speculation off and on, alternating within each iteration. A batch
// step already holds several rows, so drafts add less than at batch 1.
func BenchmarkSpeculativeBatch(b *testing.B) {
	for _, conc := range []int{4, 16} {
		for _, mixed := range []bool{false, true} {
			name := fmt.Sprintf("110M-Q4_K_M/loop/conc=%d", conc)
			if mixed {
				name += "/mixed"
			}
			b.Run(name, func(b *testing.B) {
				sp := engine.Speculative{Type: engine.SpecNgram, DraftMax: 8}
				off := q4SpecEngine(b, engine.Speculative{})
				on := q4SpecEngine(b, sp)
				reqs := make([]engine.Request, conc)
				for i := range reqs {
					p := benchPrompt(100+i, 32, off.ModelConfig().Vocab)
					reqs[i] = engine.Request{Tokens: greedyTokens(b, off, p, 8), Sampling: sample.Greedy(), MaxTokens: 48, Tenant: "bench"}
				}
				run := func(e *engine.Engine, spec bool) (int, time.Duration) {
					start := time.Now()
					streams := make([]*engine.Stream, conc)
					for i, r := range reqs {
						if !spec || (mixed && i%2 == 1) {
							r.Speculative = &engine.Speculative{}
						}
						st, err := e.Submit(context.Background(), r)
						require.NoError(b, err)
						streams[i] = st
					}
					n := 0
					for _, st := range streams {
						res := st.Wait()
						require.NoError(b, res.Err)
						n += len(res.Tokens)
					}
					return n, time.Since(start)
				}
				var offN, onN int
				var offT, onT time.Duration
				before := on.Stats()
				b.ResetTimer()
				for range b.N {
					n, d := run(off, false)
					offN, offT = offN+n, offT+d
					n, d = run(on, true)
					onN, onT = onN+n, onT+d
				}
				b.StopTimer()
				after := on.Stats()
				offRate, onRate := float64(offN)/offT.Seconds(), float64(onN)/onT.Seconds()
				b.ReportMetric(offRate, "off_tok/s")
				b.ReportMetric(onRate, "on_tok/s")
				b.ReportMetric(onRate/offRate, "ratio")
				if steps := after.Spec.Steps - before.Spec.Steps; steps > 0 {
					b.ReportMetric(float64(after.Spec.Accepted-before.Spec.Accepted)/float64(steps), "accepted/draftstep")
				}
			})
		}
	}
}
