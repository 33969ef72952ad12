package engine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// EmbedTokenCounts predicts the per-token results' lengths (PoolingNone)
// for texts, token arrays and truncated inputs, and refuses what Embed
// refuses, naming the input.
func TestEmbedTokenCounts(t *testing.T) {
	path, _ := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 2, Lower: true})
	e := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 64})
	long := strings.Repeat("hello world ", 40)
	for _, tc := range []struct {
		name string
		req  EmbedRequest
	}{
		{"texts", EmbedRequest{Inputs: []string{"Hello, World!", "the quick brown fox jumps over the lazy dog"}}},
		{"tokens", EmbedRequest{Tokens: [][]int{embedtest.Tokens(5, 1), embedtest.Tokens(17, 2)}}},
		{"truncated", EmbedRequest{Inputs: []string{long, "short"}, Truncate: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts, err := e.EmbedTokenCounts(t.Context(), tc.req)
			require.NoError(t, err)
			tc.req.Pooling = model.PoolingNone
			res, err := e.Embed(t.Context(), tc.req)
			require.NoError(t, err)
			require.Len(t, counts, len(res.Data))
			for i, d := range res.Data {
				require.Equal(t, d.Tokens, counts[i], "input %d", i)
				require.Len(t, d.PerToken, counts[i], "input %d", i)
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		_, err := e.EmbedTokenCounts(t.Context(), EmbedRequest{Inputs: []string{"fine", long}})
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, 1, fe.Index)
		require.ErrorIs(t, err, ErrPromptTooLong)
		_, err = e.EmbedTokenCounts(t.Context(), EmbedRequest{Inputs: []string{""}})
		require.ErrorIs(t, err, ErrEmptyPrompt)
	})
}
