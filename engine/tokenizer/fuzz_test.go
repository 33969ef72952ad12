package tokenizer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSentencePiece checks, on arbitrary bytes, that the priority-queue
// encoder matches the run.c port and that decoding gives the text back.
func FuzzSentencePiece(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	f.Add("\xff\xfe\xc3 invalid")
	tok := loadTok512(f)
	lookup := refLookup(tok.pieces)
	f.Fuzz(func(t *testing.T, text string) {
		ids, err := tok.Encode(text, Options{BOS: true})
		require.NoError(t, err)
		require.Equal(t, refEncodeWith(lookup, tok.pieces, tok.scores, text), ids)
		require.Equal(t, text, decodeAll(tok, ids))
	})
}

// FuzzGPT2 checks byte-level round trips on arbitrary bytes, with and
// without special-token parsing.
func FuzzGPT2(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	f.Add("<|begin_of_text|>x<tool>")
	tok, _ := testGPT2(f, "llama-bpe")
	f.Fuzz(func(t *testing.T, text string) {
		ids, err := tok.Encode(text, Options{})
		require.NoError(t, err)
		require.Equal(t, text, decodeAll(tok, ids))
		ids, err = tok.Encode(text, Options{Special: true})
		require.NoError(t, err)
		// Control tokens decode to nothing; the rest comes back in order.
		strip := strings.NewReplacer("<|begin_of_text|>", "", "<|end_of_text|>", "")
		require.Equal(t, strip.Replace(text), decodeAll(tok, ids))
	})
}
