package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"

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

// FuzzPreTokenizers checks, for every pre-tokenizer kind on arbitrary
// bytes, that the pre-tokens are non-empty and cover the text exactly.
func FuzzPreTokenizers(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	f.Add("\xff\xfe\xc3 invalid \u3000\u00a0x~~IMGIMGABZ<sentinel:1>")
	var pts []*preTokenizer
	for _, name := range PreTokenizers() {
		pt, _, err := newPreTokenizer(name)
		require.NoError(f, err, name)
		pts = append(pts, pt)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, pt := range pts {
			pieces := splitPieces(pt.split, text)
			for _, p := range pieces {
				require.NotEmpty(t, p)
			}
			require.Equal(t, text, strings.Join(pieces, ""))
		}
	})
}

// FuzzVocabEncode encodes arbitrary bytes with real vocabularies, special
// parsing on and off: no panic, and plain text decodes back unless a byte
// had no token.
func FuzzVocabEncode(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	f.Add("<|endoftext|>  ü\v<s></s>")
	var toks []Tokenizer
	for _, name := range []string{"deepseek-llm", "mpt", "phi-3"} {
		tok, _ := loadVocab(f, name)
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range toks {
			d := tok
			before := d.DroppedBytes()
			ids, err := tok.Encode(text, Options{})
			require.NoError(t, err)
			if d.DroppedBytes() == before && utf8.ValidString(text) && !strings.HasPrefix(text, " ") {
				require.Equal(t, text, decodeAll(tok, ids))
			}
			_, err = tok.Encode(text, Options{Special: true, BOS: true, EOS: true})
			require.NoError(t, err)
		}
	})
}
