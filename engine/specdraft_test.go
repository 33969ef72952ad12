package engine

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
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
			d := e.draft.pool.Stats()
			require.Zero(t, d.Owned, "no draft KV outlives a step")
			require.NotZero(t, d.Releases)
			require.Equal(t, d.Releases, d.Scrubs, "every released draft page scrubbed or poisoned")
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
