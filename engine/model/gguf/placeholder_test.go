package gguf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlaceholderVocab(t *testing.T) {
	data, err := NewBuilder().PlaceholderVocab(300).Bytes()
	require.NoError(t, err)
	f, err := Parse(data)
	require.NoError(t, err)
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	require.Len(t, toks, 300)
	require.Equal(t, "<s>", toks[PlaceholderBOS])
	require.Equal(t, "</s>", toks[PlaceholderEOS])
	require.Equal(t, "<0x00>", toks[PlaceholderBytes])
	require.Equal(t, "<0xFF>", toks[PlaceholderBytes+255])
	seen := map[string]bool{}
	for _, s := range toks {
		require.False(t, seen[s], "duplicate piece %q", s)
		seen[s] = true
	}
	bos, ok := f.Uint("tokenizer.ggml.bos_token_id")
	require.True(t, ok)
	require.EqualValues(t, PlaceholderBOS, bos)

	_, err = NewBuilder().PlaceholderVocab(PlaceholderBytes + 255).Bytes()
	require.ErrorContains(t, err, "placeholder vocabulary of 258 tokens")
}
