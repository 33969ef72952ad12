package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
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
