package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// keepTok is a vocabulary with one control token (id 7, "<|python_tag|>")
// and one normal token (id 8, "[ARGS]").
type keepTok struct{ tokenizer.Tokenizer }

func (keepTok) Lookup(p string) (int, bool) {
	switch p {
	case "<|python_tag|>":
		return 7, true
	case "[ARGS]":
		return 8, true
	}
	return 0, false
}

func (keepTok) Decode(prev, id int) []byte {
	if id == 8 {
		return []byte("[ARGS]")
	}
	if id == 7 {
		return nil // a control token
	}
	return []byte{byte('a' + id)}
}

func TestKeepTokens(t *testing.T) {
	e := &Engine{tok: keepTok{}}
	keep := e.keepTokens([]string{"<|python_tag|>", "[ARGS]", "<missing>"})
	require.Equal(t, map[int][]byte{7: []byte("<|python_tag|>")}, keep, "only tokens that decode to nothing")
	dec := keepDecode(keepTok{}.Decode, keep)
	var out []byte
	for _, id := range []int{0, 7, 8, 1} {
		out = append(out, dec(-1, id)...)
	}
	require.Equal(t, "a<|python_tag|>[ARGS]b", string(out))
	require.Nil(t, e.keepTokens(nil))
	require.Empty(t, string(keepDecode(keepTok{}.Decode, nil)(-1, 7)), "without KeepTokens control tokens stay silent")
}
