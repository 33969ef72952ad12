package model

import (
	"crypto/md5"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// TestBuiltinStoriesChecksum pins the embedded files to the genuine
// llama2.c stories260K and tok512 (a look-alike checkpoint with permuted
// matrices exists; see builtin/README.md).
func TestBuiltinStoriesChecksum(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		md5  string
	}{
		{"stories260K.bin", stories260KBin, "961b3bc7c4d82d90ca963f02b7e0de5d"},
		{"tok512.bin", tok512Bin, "2b4a5ca2ec4199f7a12e1b9a2d6f2d82"},
	} {
		sum := md5.Sum(c.data)
		require.Equal(t, c.md5, hex.EncodeToString(sum[:]), c.name)
	}
}

func TestOpenBuiltin(t *testing.T) {
	w, tok, err := Open(BuiltinStories, "")
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, stories260KConfig, w.Config)
	require.Equal(t, "stories260K", w.Name)
	require.Equal(t, 512, tok.VocabSize())
	ids, err := tok.Encode("Once upon a time", tokenizer.Options{BOS: true})
	require.NoError(t, err)
	require.Equal(t, 1, ids[0])

	s, stok, err := Open(BuiltinSynthetic, "")
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, SyntheticName, s.Name)
	require.Equal(t, SyntheticVocab, stok.VocabSize())

	_, _, err = Open("builtin:nope", "")
	require.ErrorContains(t, err, `unknown built-in model "builtin:nope"`)
	_, _, err = Open(BuiltinStories, "tok512.bin")
	require.ErrorContains(t, err, "needs a model file")
}
