package engine

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

var ngram = Speculative{Type: SpecNgram, DraftMax: 6}

func specEngine(t *testing.T, mut func(*Config)) *Engine {
	t.Helper()
	cfg := Config{ModelPath: model.BuiltinStories, KVPages: 256, MaxSeqs: 16, Poison: true}
	if mut != nil {
		mut(&cfg)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeClean(t, e) })
	return e
}

// specPrompts are prompts whose greedy continuations repeat themselves or
// the prompt (drafts accepted) and some whose drafts are mostly rejected.
var specPrompts = []string{
	"Once upon a time",
	"Lily and Tom went to the park. Lily and Tom went to the park. Lily and",
	"The cat sat on the mat. The dog sat on the log. The cat sat on",
	"Tim had a red ball. He liked to play with his red ball. One day, Tim",
	"zq xv kj pw",
}

func runAll(t *testing.T, e *Engine, reqs []Request) []Result {
	t.Helper()
	return submitAll(t, e, nil, reqs)
}

func TestSpecGreedyIdentical(t *testing.T) {
	for _, kv := range []string{"f16", "f32"} {
		t.Run(kv, func(t *testing.T) {
			var reqs []Request
			for _, p := range specPrompts {
				reqs = append(reqs, Request{Prompt: p, MaxTokens: 120, Sampling: sample.Greedy()})
			}
			plain := specEngine(t, func(c *Config) { c.KVType = kv })
			want := make([]Result, len(reqs))
			for i, r := range reqs {
				res, err := plain.Generate(t.Context(), r)
				require.NoError(t, err)
				want[i] = res
			}
			spec := specEngine(t, func(c *Config) { c.KVType = kv; c.Speculative = ngram })
			// One at a time, then all at once with every other request
			// not speculating (a mixed batch).
			for i, r := range reqs {
				res, err := spec.Generate(t.Context(), r)
				require.NoError(t, err)
				require.Equal(t, want[i].Tokens, res.Tokens, "request %d alone", i)
			}
			var batch []Request
			for k := range 3 {
				for i, r := range reqs {
					if (k+i)%2 == 1 {
						r.Speculative = &Speculative{}
					}
					batch = append(batch, r)
				}
			}
			for j, res := range runAll(t, spec, batch) {
				require.NoError(t, res.Err)
				require.Equal(t, want[j%len(reqs)].Tokens, res.Tokens, "request %d in the batch", j)
				require.Equal(t, want[j%len(reqs)].Text, res.Text)
			}
			st := spec.Stats().Spec
			t.Logf("spec stats: %+v (%.2f accepted per draft step)", st, float64(st.Accepted)/float64(st.Steps))
			require.NotZero(t, st.Accepted)
			require.Less(t, st.Accepted, st.Drafted, "some drafts rejected too")
		})
	}
}

// TestSpecSameOutputWithEveryFeature: logprobs, stop strings, grammars,
// penalties, seeded sampling and last logits give the same results with
// speculation as without, in one busy batch.
func TestSpecSameOutputWithEveryFeature(t *testing.T) {
	plain := specEngine(t, nil)
	spec := specEngine(t, func(c *Config) { c.Speculative = ngram; c.MaxBatchTokens = 96 })
	repeat := "Lily and Tom went to the park. Lily and Tom went to the park. Lily and"
	var reqs []Request
	add := func(r Request) { reqs = append(reqs, r) }
	add(Request{Prompt: repeat, MaxTokens: 80, Sampling: sample.Greedy(), Logprobs: true, TopLogprobs: 3})
	// A stop string from the middle of the greedy output.
	free, err := plain.Generate(t.Context(), Request{Prompt: repeat, MaxTokens: 80, Sampling: sample.Greedy()})
	require.NoError(t, err)
	mid := len(free.Text) / 2
	add(Request{Prompt: repeat, MaxTokens: 80, Sampling: sample.Greedy(), Stop: []string{free.Text[mid : mid+5]}})
	add(Request{Prompt: repeat, MaxTokens: 80, Sampling: sample.Greedy(), LastLogits: true})
	for seed := range uint64(4) {
		add(Request{Prompt: repeat, MaxTokens: 80, Sampling: hot(seed), Logprobs: true})
	}
	pen := hot(9)
	pen.RepeatPenalty, pen.RepeatLastN, pen.FrequencyPenalty = 1.1, 16, 0.3
	add(Request{Prompt: repeat, MaxTokens: 80, Sampling: pen})
	g, err := spec.CompileGrammar(`root ::= ("Lily and Tom went to the " ("park" | "shop") ". ")+ "The end."`)
	require.NoError(t, err)
	gp, err := plain.CompileGrammar(`root ::= ("Lily and Tom went to the " ("park" | "shop") ". ")+ "The end."`)
	require.NoError(t, err)
	grammarAt := len(reqs)
	add(Request{Prompt: repeat, MaxTokens: 120, Sampling: sample.Greedy(), Grammar: g, Logprobs: true})
	add(Request{Prompt: repeat, MaxTokens: 120, Sampling: hot(3), Grammar: g})
	add(Request{Prompt: "zq xv kj pw", MaxTokens: 60, Sampling: hot(5)})

	want := make([]Result, len(reqs))
	for i, r := range reqs {
		if r.Grammar != nil {
			r.Grammar = gp
		}
		res, err := plain.Generate(t.Context(), r)
		require.NoError(t, err)
		want[i] = res
	}
	got := runAll(t, spec, append(reqs, reqs...))
	for j, res := range got {
		i := j % len(reqs)
		require.NoError(t, res.Err, "request %d", j)
		require.Equal(t, want[i].Tokens, res.Tokens, "request %d", j)
		require.Equal(t, want[i].Text, res.Text, "request %d", j)
		require.Equal(t, want[i].FinishReason, res.FinishReason, "request %d", j)
		require.Equal(t, want[i].Logprobs, res.Logprobs, "request %d", j)
		require.Equal(t, want[i].Logits, res.Logits, "request %d", j)
	}
	require.Equal(t, "stop", want[1].FinishReason, "the stop string matched")
	require.Equal(t, "stop", want[grammarAt].FinishReason, "the grammar completed: %q", want[grammarAt].Text)
	require.NotEmpty(t, want[2].Logits)
	st := spec.Stats()
	require.NotZero(t, st.Spec.Accepted)
	require.Zero(t, st.IsolationFailures)
}

// TestSpecRequestOptions: a request's own setting overrides the engine's,
// and bad settings are refused at admission with the field named.
func TestSpecRequestOptions(t *testing.T) {
	e := specEngine(t, nil)
	r := Request{Prompt: "Lily and Tom went to the park. Lily and Tom went to the park. Lily and", MaxTokens: 40, Sampling: sample.Greedy()}
	off, err := e.Generate(t.Context(), r)
	require.NoError(t, err)
	require.Zero(t, e.Stats().Spec.Steps, "the engine default is off")
	r.Speculative = &Speculative{Type: SpecNgram, DraftMax: 4, NgramMin: 1, NgramMax: 3}
	on, err := e.Generate(t.Context(), r)
	require.NoError(t, err)
	require.Equal(t, off.Tokens, on.Tokens)
	st := e.Stats().Spec
	require.NotZero(t, st.Steps)
	require.LessOrEqual(t, st.Drafted, 4*st.Steps, "at most DraftMax per step")

	for _, bad := range []Speculative{
		{Type: "eagle"},
		{Type: SpecNgram, DraftMax: -1},
		{Type: SpecNgram, DraftMax: MaxDraftTokens + 1},
		{Type: SpecNgram, NgramMin: 3, NgramMax: 2},
		{Type: SpecNgram, NgramMax: MaxNgram + 1},
		{Type: SpecDraft, DraftModel: "draft.gguf"}, // a request cannot load one
		{Type: SpecDraft},                           // this engine has no draft model
		{Type: SpecNgram, DraftModel: "draft.gguf"},
	} {
		r.Speculative = &bad
		_, err := e.Submit(t.Context(), r)
		require.ErrorIs(t, err, ErrInvalidParams, "%+v", bad)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "Request.Speculative", ce.Field)
		if bad.Type != SpecDraft {
			require.ErrorIs(t, Config{Speculative: bad}.Validate(), ErrInvalidParams, "%+v", bad)
		}
	}
	require.ErrorContains(t, Config{Speculative: Speculative{Type: SpecDraft}}.Validate(), "needs a draft model")
}

func TestNgramDraft(t *testing.T) {
	for _, tc := range []struct {
		name       string
		toks       []int
		nmin, nmax int
		k          int
		want       []int
	}{
		{"longest suffix wins", []int{1, 2, 3, 9, 2, 3, 7, 1, 2, 3}, 1, 3, 4, []int{9, 2, 3, 7}},
		{"most recent occurrence", []int{5, 1, 6, 5, 1, 8, 5, 1}, 2, 2, 2, []int{8, 5}},
		{"draft ends at the context", []int{4, 4, 4}, 1, 2, 8, []int{4}},
		{"no match", []int{1, 2, 3, 4}, 1, 3, 4, nil},
		{"below the minimum", []int{1, 2, 7, 2}, 2, 3, 4, nil},
		{"k bounds", []int{1, 2, 3, 4, 5, 1}, 1, 1, 2, []int{2, 3}},
		{"a loop drafts past the latest occurrence", []int{9, 7, 7, 7, 7}, 2, 2, 3, []int{7, 7}},
		{"most recent occurrence long enough", []int{9, 7, 7, 7, 7}, 2, 2, 2, []int{7, 7}},
		{"earliest when none is long enough", []int{3, 1, 2, 5, 1, 2, 6, 1, 2}, 2, 2, 9, []int{5, 1, 2, 6, 1, 2}},
		{"too short", []int{1}, 1, 3, 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ngramDraft(tc.toks, tc.nmin, tc.nmax, tc.k))
		})
	}
}

// pageAudit wraps the model's runner and checks the page accounting of
// every step: each sequence's table holds exactly the pages its written
// tokens and this step's tokens need (rejected drafts left no page
// behind), and the pool's owned and sealed pages are exactly those of the
// step's tables (with every sequence in every step and no prefix cache).
type pageAudit struct {
	inner   Runner
	pool    *kvcache.Pool
	ps      int
	steps   int
	drafted int
	errs    []string
}

func (a *pageAudit) Forward(b *model.Batch) error {
	held := 0
	for _, s := range b.Seqs {
		need := (s.Table.Written() + len(s.Tokens) + a.ps - 1) / a.ps
		if s.Table.Len() != need {
			a.errs = append(a.errs, fmt.Sprintf("step %d: table of request %d holds %d pages, needs %d (%d written, %d fed)",
				a.steps, s.Table.Request(), s.Table.Len(), need, s.Table.Written(), len(s.Tokens)))
		}
		held += s.Table.Len()
		if s.Draft > 0 {
			a.drafted++
		}
	}
	if st := a.pool.Stats(); st.Owned+st.Sealed != held {
		a.errs = append(a.errs, fmt.Sprintf("step %d: pool has %d owned and %d sealed pages, the step's tables hold %d", a.steps, st.Owned, st.Sealed, held))
	}
	a.steps++
	a.errs = a.errs[:min(len(a.errs), 8)] // the first few tell the story
	return a.inner.Forward(b)
}

func TestSpecRollbackPageAccounting(t *testing.T) {
	w, tok, err := model.Open(model.BuiltinStories, "")
	require.NoError(t, err)
	var audit *pageAudit
	hooks := TestHooks{NewRunner: func(pool *kvcache.Pool) (Runner, error) {
		r, err := model.NewRunner(w, pool)
		audit = &pageAudit{inner: r, pool: pool, ps: pool.Geometry().PageSize}
		return audit, err
	}}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"zero on release, step checksums", func(c *Config) { c.ZeroOnRelease = true; c.KVChecksum = ChecksumStep }},
		{"poison", func(c *Config) { c.Poison = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Weights: w, Tokenizer: tok, KVPages: 256, PageSize: 4, DisablePrefixCache: true, Speculative: ngram}
			tc.mut(&cfg)
			e, err := New(cfg, WithTestHooks(hooks))
			require.NoError(t, err)
			defer closeClean(t, e)
			plain := specEngine(t, func(c *Config) { c.PageSize = 4 })
			var reqs []Request
			for _, p := range specPrompts {
				reqs = append(reqs, Request{Prompt: p, MaxTokens: 100, Sampling: sample.Greedy()})
			}
			for j, res := range runAll(t, e, append(reqs, reqs...)) {
				require.NoError(t, res.Err)
				want, err := plain.Generate(t.Context(), reqs[j%len(reqs)])
				require.NoError(t, err)
				require.Equal(t, want.Tokens, res.Tokens)
			}
			require.Empty(t, audit.errs)
			require.NotZero(t, audit.drafted)
			st := e.Stats()
			require.NotZero(t, st.Spec.Accepted)
			require.Less(t, st.Spec.Accepted, st.Spec.Drafted)
			require.Zero(t, st.IsolationFailures)
			require.Zero(t, st.Pool.ChecksumFailures)
			waitPoolIdle(t, e)
			require.Equal(t, st.Pool.Pages, e.Stats().Pool.Free, "every page back")
		})
	}
}

// TestSpecPrefixCacheSeesVerifiedTokensOnly: with the prefix cache on,
// a request that speculates publishes its pages, and a later request
// that extends its context is served them and continues exactly as a
// request without cache or speculation would.
func TestSpecPrefixCacheSeesVerifiedTokensOnly(t *testing.T) {
	plain := specEngine(t, func(c *Config) { c.DisablePrefixCache = true })
	spec := specEngine(t, func(c *Config) { c.Speculative = ngram; c.KVChecksum = ChecksumStep; c.ZeroOnRelease = true })
	for _, p := range specPrompts[1:4] {
		r := Request{Prompt: p, MaxTokens: 90, Sampling: sample.Greedy(), Tenant: "t"}
		first, err := spec.Generate(t.Context(), r)
		require.NoError(t, err)
		want, err := plain.Generate(t.Context(), r)
		require.NoError(t, err)
		require.Equal(t, want.Tokens, first.Tokens)
		ext := Request{Tokens: append(slices.Clone(first.PromptTokens), first.Tokens[:60]...), MaxTokens: 30, Sampling: sample.Greedy(), Tenant: "t"}
		second, err := spec.Generate(t.Context(), ext)
		require.NoError(t, err)
		require.Equal(t, (len(ext.Tokens)-1)/16*16, second.CachedTokens, "the generated pages were published")
		want, err = plain.Generate(t.Context(), ext)
		require.NoError(t, err)
		require.Equal(t, want.Tokens, second.Tokens)
	}
	st := spec.Stats()
	require.NotZero(t, st.Spec.Accepted)
	require.Zero(t, st.IsolationFailures)
	require.Zero(t, st.Pool.ChecksumFailures)
}

// TestSpecDraftLengthAdapts: the draft length follows what drafts achieve,
// and fully rejected one-token drafts back off exponentially.
func TestSpecDraftLengthAdapts(t *testing.T) {
	sp := newSpecSeq(&Speculative{Type: SpecNgram, DraftMax: 8})
	require.Equal(t, 8, sp.n)
	type st struct{ n, skip, backoff int }
	for _, step := range []struct {
		drafted, accepted int
		want              st
	}{
		{8, 3, st{4, 0, 1}},  // partly accepted: what was accepted plus one
		{4, 4, st{8, 0, 1}},  // all accepted: double
		{8, 0, st{1, 0, 1}},  // none of several: one
		{1, 0, st{1, 1, 2}},  // a rejected single token: skip 1 step
		{1, 0, st{1, 2, 4}},  // again: skip 2
		{1, 0, st{1, 4, 8}},  // 4
		{1, 0, st{1, 8, 16}}, // 8
		{1, 0, st{1, 16, 16}},
		{1, 1, st{2, 0, 1}}, // accepted: the backoff resets
		{2, 2, st{4, 0, 1}},
	} {
		sp.skip = 0 // a sequence drafts only once its skip ran out
		sp.verified(step.drafted, step.accepted)
		require.Equal(t, step.want, st{sp.n, sp.skip, sp.backoff}, "after %d of %d accepted", step.accepted, step.drafted)
	}
	require.Nil(t, newSpecSeq(nil))
}

// TestSpecUnderPreemption: with a pool too small for the batch, requests
// that speculate are preempted (swapped to the host tier, or freed and
// recomputed) and come back with the same greedy output.
func TestSpecUnderPreemption(t *testing.T) {
	plain := specEngine(t, nil)
	var reqs []Request
	for k := range 3 {
		for _, p := range specPrompts {
			reqs = append(reqs, Request{Prompt: p, MaxTokens: 100, Sampling: sample.Greedy(), Tenant: string(rune('a' + k))})
		}
	}
	want := make([][]int, len(specPrompts))
	for i, r := range reqs[:len(specPrompts)] {
		res, err := plain.Generate(t.Context(), r)
		require.NoError(t, err)
		want[i] = res.Tokens
	}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"swap", func(c *Config) { c.HostTierBytes = 16 << 20 }},
		{"recompute", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			var once sync.Once
			release := func() { once.Do(func() { close(gate) }) }
			cfg := Config{ModelPath: model.BuiltinStories, KVPages: 14, MaxContext: 160, Speculative: ngram, ZeroOnRelease: true}
			if tc.mut != nil {
				tc.mut(&cfg)
			}
			e, err := New(cfg, WithTestHooks(TestHooks{Faults: &Faults{AbortAt: func(uint64, State) bool {
				<-gate
				return false
			}}}))
			require.NoError(t, err)
			// Cleanups run last-in first-out: the gate opens before Close,
			// even when the test fails before submitAll opens it.
			t.Cleanup(func() { closeClean(t, e) })
			t.Cleanup(release)
			for j, res := range submitAll(t, e, release, reqs) {
				require.NoError(t, res.Err)
				require.Equal(t, want[j%len(specPrompts)], res.Tokens, "request %d", j)
			}
			st := e.Stats()
			require.NotZero(t, st.Preemptions)
			if cfg.HostTierBytes > 0 {
				require.NotZero(t, st.SwapIns)
			}
			require.NotZero(t, st.Spec.Accepted)
			require.Zero(t, st.IsolationFailures)
			waitPoolIdle(t, e)
		})
	}
}

// TestSpecStopsAtMaxContext: a request that runs until the context is
// full drafts no token past it and ends exactly as without speculation.
func TestSpecStopsAtMaxContext(t *testing.T) {
	plain := specEngine(t, func(c *Config) { c.MaxContext = 72 })
	spec := specEngine(t, func(c *Config) { c.MaxContext = 72; c.Speculative = Speculative{Type: SpecNgram, DraftMax: 16} })
	for _, p := range specPrompts {
		r := Request{Prompt: p, MaxTokens: MaxTokensUntilEnd, Sampling: sample.Greedy()}
		want, err := plain.Generate(t.Context(), r)
		require.NoError(t, err)
		got, err := spec.Generate(t.Context(), r)
		require.NoError(t, err)
		require.Equal(t, want.Tokens, got.Tokens)
		require.Equal(t, want.FinishReason, got.FinishReason)
		require.LessOrEqual(t, len(got.PromptTokens)+len(got.Tokens), 72)
	}
	require.NotZero(t, spec.Stats().Spec.Accepted)
	waitPoolIdle(t, spec)
}
