package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBytesRoundTrip(t *testing.T) {
	tok := NewBytes()
	for _, s := range []string{"", "hello", "héllo wörld", "日本語", "🙂🙃", "  \t\n  ", "<s>"} {
		ids, err := tok.Encode(s, Options{BOS: true})
		require.NoError(t, err)
		require.Equal(t, tok.BOS(), ids[0])
		require.Len(t, ids, len(s)+1)
		var out []byte
		prev := -1
		for _, id := range ids {
			require.Less(t, id, tok.VocabSize())
			out = append(out, tok.Decode(prev, id)...)
			prev = id
		}
		require.Equal(t, s, string(out))
		for _, id := range ids[1:] {
			require.NotEqual(t, tok.BOS(), id, "plain text never yields a control token")
		}
	}
	require.Equal(t, "</s>", tok.Piece(tok.EOS()))
	require.Empty(t, tok.Decode(-1, tok.EOS()))
}
