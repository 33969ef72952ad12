package engine_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// These tests use only the exported API, as a program embedding the engine
// does (package engine_test); the package's own tests reach its internals.

func newBuiltin(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 256})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

// Breaking out of All closes the stream, which aborts the request; once
// Wait returns, the request holds no page.
func TestPublicStreamCloseReleasesPages(t *testing.T) {
	e := newBuiltin(t)
	st, err := e.Submit(t.Context(), engine.Request{
		Prompt: "Once upon a time", Tenant: "alice", MaxTokens: 200, Sampling: sample.Params{Temperature: 0},
	})
	require.NoError(t, err)
	for ev, err := range st.All() {
		require.NoError(t, err)
		require.False(t, ev.Done, "the request ended before it was closed")
		break // stops reading: All closes the stream
	}
	r := st.Wait()
	// The engine does not wait for readers, so the request may have ended
	// on its own before the close reached it; either way it is over.
	require.Contains(t, []string{"abort", "length", "stop"}, r.FinishReason)
	p := e.Stats().Pool
	require.Zero(t, p.Owned, "pages still owned after Wait: %+v", p)
	require.Positive(t, p.Allocs)
}

// Greedy decoding of the same prompt is reproducible across requests and
// tenants: the second tenant's result does not depend on the first's KV.
func TestPublicGreedyIsReproducibleAcrossTenants(t *testing.T) {
	e := newBuiltin(t)
	req := engine.Request{Prompt: "The cat", MaxTokens: 24, Sampling: sample.Params{Temperature: 0}}
	var texts []string
	for _, tenant := range []string{"alice", "bob", "alice"} {
		req.Tenant = tenant
		r, err := e.Generate(t.Context(), req)
		require.NoError(t, err)
		require.Len(t, r.Tokens, 24)
		texts = append(texts, r.Text)
	}
	require.Equal(t, texts[0], texts[1])
	require.Equal(t, texts[0], texts[2])
	require.NotEmpty(t, texts[0])
}

// Bad requests are typed errors from Submit, before anything runs (a
// MaxTokens beyond the context is not one: generation stops at the limit).
func TestPublicRejections(t *testing.T) {
	e := newBuiltin(t)
	for _, tc := range []struct {
		name string
		req  engine.Request
		want error
	}{
		{"empty prompt", engine.Request{Prompt: ""}, engine.ErrEmptyPrompt},
		{"prompt alone too long", engine.Request{Prompt: strings.Repeat("once upon a time ", 100)}, engine.ErrPromptTooLong},
		{"bad sampling", engine.Request{Prompt: "hi", Sampling: sample.Params{Temperature: -1}}, engine.ErrInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Submit(t.Context(), tc.req)
			require.ErrorIs(t, err, tc.want)
		})
	}
	require.Zero(t, e.Stats().Pool.Allocs, "a rejected request allocated pages")
}
