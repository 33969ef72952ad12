package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func newTestWordPiece(t *testing.T, lower, strip bool) *WordPiece {
	t.Helper()
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁world", "▁jump", "ing", "s", "▁,", "▁!", "▁$", "▁héllo",
		"▁cafe", "▁café", "▁中", "▁文", "▁Hello", "▁a", "b", "▁ab"}
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = TypeNormal
	}
	types[0], types[1], types[2], types[3] = TypeControl, TypeUnknown, TypeControl, TypeControl
	wp, err := NewWordPiece(toks, types, 2, -1, 3, 1, lower, strip)
	require.NoError(t, err)
	return wp
}

// llama.cpp's WPM rules, piece by piece.
func TestWordPieceEncode(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lower, strip bool
		text         string
		opt          Options
		want         []string
	}{
		{"lowercase and punctuation split", true, true, "Hello, World!", Options{}, []string{"▁hello", "▁,", "▁world", "▁!"}},
		{"case kept without lowercase", false, false, "Hello", Options{}, []string{"▁Hello"}},
		{"continuation pieces", true, true, "jumping jumps", Options{}, []string{"▁jump", "ing", "▁jump", "s"}},
		{"longest match first", true, true, "ab", Options{}, []string{"▁ab"}},
		{"unknown word is one [UNK]", true, true, "hello xyz world", Options{}, []string{"▁hello", "[UNK]", "▁world"}},
		{"accents stripped", true, true, "Héllo café", Options{}, []string{"▁hello", "▁cafe"}},
		{"accents kept when strip_accents is off", true, false, "Héllo café", Options{}, []string{"▁héllo", "▁café"}},
		{"CJK ideographs are words", true, true, "中文", Options{}, []string{"▁中", "▁文"}},
		{"ASCII symbols are words", true, true, "$hello", Options{}, []string{"▁$", "▁hello"}},
		{"control characters dropped", true, true, "hel\x00lo\u200b", Options{}, []string{"▁hello"}},
		{"whitespace of every kind", true, true, "hello\t\n\u3000world", Options{}, []string{"▁hello", "▁world"}},
		{"[CLS] and [SEP] with BOS and EOS", true, true, "hello", Options{BOS: true, EOS: true}, []string{"[CLS]", "▁hello", "[SEP]"}},
		{"special text parsed only when asked", true, true, "[SEP]", Options{Special: true}, []string{"[SEP]"}},
		{"empty", true, true, "", Options{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wp := newTestWordPiece(t, tc.lower, tc.strip)
			ids, err := wp.Encode(tc.text, tc.opt)
			require.NoError(t, err)
			var got []string
			for _, id := range ids {
				got = append(got, wp.Piece(id))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestWordPieceDecode(t *testing.T) {
	wp := newTestWordPiece(t, true, true)
	ids, err := wp.Encode("hello jumping world", Options{BOS: true, EOS: true})
	require.NoError(t, err)
	var out []byte
	prev := -1
	for _, id := range ids {
		out = append(out, wp.Decode(prev, id)...)
		prev = id
	}
	require.Equal(t, "hello jumping world", string(out))
	require.Equal(t, 3, wp.Sep())
	require.True(t, wp.AddBOS())
	require.False(t, wp.AddEOS())
}
