package engine

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// TestSpecDraftModel: with a draft model, greedy and seeded sampled output
// are the tokens without speculation, alone and in a batch, with the
// draft model's pages scrubbed or poisoned on release and step checksums
// on: stories260K drafting for itself, so greedy requests accept most
// drafts and sampled ones reject many.
func TestSpecDraftModel(t *testing.T) {
	var reqs []Request
	for i, p := range specPrompts {
		reqs = append(reqs, Request{Prompt: p, MaxTokens: 60, Sampling: sample.Greedy()},
			Request{Prompt: p, MaxTokens: 60, Sampling: sample.Params{Temperature: 0.8, Seed: uint64(i), HasSeed: true}})
	}
	plain := specEngine(t, nil)
	want := runAll(t, plain, reqs)

	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"zero", func(c *Config) { c.ZeroOnRelease = true }},
		{"poison", nil}, // specEngine poisons
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := specEngine(t, func(c *Config) {
				c.Speculative = Speculative{Type: SpecDraft, DraftModel: model.BuiltinStories, DraftMax: 5}
				c.KVChecksum = ChecksumStep
				if tc.mod != nil {
					tc.mod(c)
				}
			})
			for j, r := range reqs[:4] {
				got, err := e.Generate(t.Context(), r)
				require.NoError(t, err)
				require.Equal(t, want[j].Tokens, got.Tokens, "request %d alone", j)
			}
			for j, got := range runAll(t, e, reqs) {
				require.NoError(t, got.Err)
				require.Equal(t, want[j].Tokens, got.Tokens, "request %d in the batch", j)
			}
			st := e.Stats()
			t.Logf("spec stats: %+v", st.Spec)
			require.NotZero(t, st.Spec.Accepted, "%+v", st.Spec)
			require.Less(t, st.Spec.Accepted, st.Spec.Drafted, "some drafts rejected (the sampled requests)")
			require.Zero(t, st.IsolationFailures)
			draftPoolClean(t, e)
		})
	}

	// A request asks for the engine's draft model; an engine without one
	// refuses; a draft model of another vocabulary is refused by name.
	e := specEngine(t, func(c *Config) { c.Speculative = Speculative{Type: SpecDraft, DraftModel: model.BuiltinStories} })
	r := reqs[0]
	r.Speculative = &Speculative{Type: SpecNgram}
	got, err := e.Generate(t.Context(), r)
	require.NoError(t, err)
	require.Equal(t, want[0].Tokens, got.Tokens)
	_, err = New(Config{ModelPath: model.BuiltinStories, Speculative: Speculative{Type: SpecDraft, DraftModel: model.BuiltinSynthetic}})
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorContains(t, err, "vocabulary")
	_, err = New(Config{ModelPath: model.BuiltinStories, Speculative: Speculative{Type: SpecDraft, DraftModel: filepath.Join(t.TempDir(), "none.gguf")}})
	require.ErrorContains(t, err, "draft model")
}

// draftPoolClean checks the draft model's pool once every request ended:
// no page owned (no draft KV or scratch table outlives its sequence) and
// every released page scrubbed or poisoned.
func draftPoolClean(t *testing.T, e *Engine) {
	t.Helper()
	d := e.draft.pool.Stats()
	require.Zero(t, d.Owned, "draft KV outlived its sequence: %+v", d)
	require.NotZero(t, d.Releases)
	require.Equal(t, d.Releases, d.Scrubs, "every released draft page scrubbed or poisoned")
	require.Zero(t, e.Stats().BookkeepingErrors)
}

// TestSpecDraftModelRejects: a draft model that disagrees with the model
// (the synthetic model under another seed, same vocabulary), so most
// drafts are rejected and the draft KV is rolled back and advanced over
// the model's tokens instead: greedy and seeded output identical to
// decoding without speculation, alone and in a batch (draft steps
// batched over the sequences).
func TestSpecDraftModelRejects(t *testing.T) {
	w, err := model.Synthetic(model.DefaultConfig(), model.BuiltinSeed+1, ml.F32)
	require.NoError(t, err)
	mk := func(sp Speculative) *Engine {
		e, err := New(Config{Weights: w, Tokenizer: tokenizer.NewBytes(), KVPages: 256, MaxSeqs: 16, ZeroOnRelease: true,
			KVChecksum: ChecksumStep, Speculative: sp})
		require.NoError(t, err)
		t.Cleanup(func() { closeClean(t, e) })
		return e
	}
	var reqs []Request
	for i := range 6 {
		p := tenantPrompt(i%3, i, 5+7*i)
		reqs = append(reqs, Request{Tokens: p, MaxTokens: 40, Sampling: sample.Greedy(), Tenant: fmt.Sprint(i % 3)},
			Request{Tokens: p, MaxTokens: 40, Sampling: sample.Params{Temperature: 0.9, Seed: uint64(i), HasSeed: true}, Tenant: fmt.Sprint(i % 3)})
	}
	want := runAll(t, mk(Speculative{}), reqs)
	e := mk(Speculative{Type: SpecDraft, DraftModel: model.BuiltinSynthetic, DraftMax: 6})
	for j, r := range reqs[:2] {
		got, err := e.Generate(t.Context(), r)
		require.NoError(t, err)
		require.Equal(t, want[j].Tokens, got.Tokens, "request %d alone", j)
	}
	for j, got := range runAll(t, e, reqs) {
		require.NoError(t, got.Err)
		require.Equal(t, want[j].Tokens, got.Tokens, "request %d in the batch", j)
	}
	st := e.Stats()
	t.Logf("spec stats: %+v", st.Spec)
	require.NotZero(t, st.Spec.Drafted)
	require.Less(t, st.Spec.Accepted, st.Spec.Drafted/2, "the draft model disagrees with the model")
	require.Zero(t, st.IsolationFailures)
	draftPoolClean(t, e)
}

// TestSpecDraftModelUnderPreemption: with a main pool too small for the
// batch, sequences drafting with a draft model are preempted (swapped or
// recomputed; their draft KV released and recomputed when they draft
// again) and finish with the greedy output of decoding alone.
func TestSpecDraftModelUnderPreemption(t *testing.T) {
	plain := specEngine(t, nil)
	var reqs []Request
	for k := range 3 {
		for _, p := range specPrompts {
			reqs = append(reqs, Request{Prompt: p, MaxTokens: 100, Sampling: sample.Greedy(), Tenant: string(rune('a' + k))})
		}
	}
	want := runAll(t, plain, reqs[:len(specPrompts)])
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
			cfg := Config{ModelPath: model.BuiltinStories, KVPages: 14, MaxContext: 160, ZeroOnRelease: true,
				Speculative: Speculative{Type: SpecDraft, DraftModel: model.BuiltinStories, DraftMax: 6}}
			if tc.mut != nil {
				tc.mut(&cfg)
			}
			e, err := New(cfg, WithTestHooks(TestHooks{Faults: &Faults{AbortAt: func(uint64, State) bool {
				<-gate
				return false
			}}}))
			require.NoError(t, err)
			t.Cleanup(func() { closeClean(t, e) })
			t.Cleanup(release)
			for j, res := range submitAll(t, e, release, reqs) {
				require.NoError(t, res.Err)
				require.Equal(t, want[j%len(specPrompts)].Tokens, res.Tokens, "request %d", j)
			}
			st := e.Stats()
			require.NotZero(t, st.Preemptions)
			require.NotZero(t, st.Spec.Accepted)
			require.Zero(t, st.IsolationFailures)
			waitPoolIdle(t, e)
			draftPoolClean(t, e)
		})
	}
}

// TestSpecDraftModelAbort: requests aborted while drafting give their
// draft KV back.
func TestSpecDraftModelAbort(t *testing.T) {
	e := specEngine(t, func(c *Config) {
		c.Speculative = Speculative{Type: SpecDraft, DraftModel: model.BuiltinStories, DraftMax: 4}
		c.ZeroOnRelease = true
	})
	var streams []*Stream
	for i, p := range specPrompts {
		st, err := e.Submit(t.Context(), Request{Prompt: p, MaxTokens: MaxTokensUntilEnd, Sampling: sample.Greedy(), Tenant: fmt.Sprint(i)})
		require.NoError(t, err)
		streams = append(streams, st)
	}
	for _, st := range streams {
		// Some tokens first, so that the request has drafted.
		for range 12 {
			if _, ok := <-st.Events(); !ok {
				break
			}
		}
		require.NoError(t, e.Abort(st.ID()))
	}
	aborted := 0
	for _, st := range streams {
		if err := st.Wait().Err; err != nil {
			require.ErrorIs(t, err, ErrAborted)
			aborted++
		}
	}
	require.NotZero(t, aborted)
	require.NotZero(t, e.Stats().Spec.Drafted)
	waitPoolIdle(t, e)
	draftPoolClean(t, e)
}

// TestSpecDraftModelPoolFull: a draft pool far too small for the batch's
// contexts: sequences give up their draft KV to the ones drafting, or
// draft nothing, and the output is still that of decoding alone.
func TestSpecDraftModelPoolFull(t *testing.T) {
	draftPoolPagesForTest = 40 // 160 tokens: about one context
	t.Cleanup(func() { draftPoolPagesForTest = 0 })
	var reqs []Request
	for i, p := range specPrompts {
		reqs = append(reqs, Request{Prompt: p + " " + p, MaxTokens: 80, Sampling: sample.Greedy(), Tenant: fmt.Sprint(i % 2)})
	}
	want := runAll(t, specEngine(t, nil), reqs)
	e := specEngine(t, func(c *Config) {
		c.Speculative = Speculative{Type: SpecDraft, DraftModel: model.BuiltinStories, DraftMax: 6}
		c.ZeroOnRelease = true
	})
	require.Equal(t, 40, e.draft.pool.Stats().Pages)
	for j, got := range runAll(t, e, reqs) {
		require.NoError(t, got.Err)
		require.Equal(t, want[j].Tokens, got.Tokens, "request %d", j)
	}
	st := e.Stats()
	t.Logf("spec stats: %+v", st.Spec)
	require.NotZero(t, st.Spec.Accepted)
	require.Zero(t, st.IsolationFailures)
	draftPoolClean(t, e)
}
