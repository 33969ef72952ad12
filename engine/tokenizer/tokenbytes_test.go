package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTokenBytes(t *testing.T) {
	b := NewBytes()
	for _, id := range []int{0, 1, 2, -1, 259} {
		got, special := TokenBytes(b, id)
		require.True(t, special, "id %d", id)
		require.Empty(t, got)
	}
	got, special := TokenBytes(b, 'a'+3)
	require.False(t, special)
	require.Equal(t, []byte("a"), got)

	spm, _ := loadVocab(t, "llama-spm")
	for piece, want := range map[string]string{"▁the": " the", "<0x41>": "A", "<0xE6>": "\xe6", "ing": "ing"} {
		id, ok := spm.Lookup(piece)
		require.True(t, ok, piece)
		got, special := TokenBytes(spm, id)
		require.False(t, special, piece)
		require.Equal(t, want, string(got), piece)
	}
	for _, piece := range []string{"<s>", "</s>", "<unk>"} {
		id, ok := spm.Lookup(piece)
		require.True(t, ok, piece)
		_, special := TokenBytes(spm, id)
		require.True(t, special, piece)
	}

	gpt2, _ := loadVocab(t, "gpt-2")
	id, ok := gpt2.Lookup("Ġthe")
	require.True(t, ok)
	got, special = TokenBytes(gpt2, id)
	require.False(t, special)
	require.Equal(t, " the", string(got))
	eot, ok := gpt2.Lookup("<|endoftext|>")
	require.True(t, ok)
	_, special = TokenBytes(gpt2, eot)
	require.True(t, special)
}
