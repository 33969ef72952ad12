package tokenizer

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// limitTokenizers are the tokenizers EncodeLimit is checked on: the
// built-in bytes, the small GPT-2 vocabulary, and whichever of the
// llama2.c and llama.cpp test vocabularies are present.
func limitTokenizers(t *testing.T) map[string]Tokenizer {
	toks := map[string]Tokenizer{"bytes": NewBytes()}
	g, _ := testGPT2(t, "llama-bpe")
	toks["gpt2-small"] = g
	if testing.Short() {
		return toks
	}
	toks["tok512"] = loadTok512(t)
	for _, name := range vocabFiles {
		tok, _ := loadVocab(t, name)
		toks[name] = tok
	}
	return toks
}

// limitTexts are texts with special-token text, whitespace runs (phi-3's
// rstrip eats them), the vocabularies' own test cases and random text.
func limitTexts(t *testing.T) []string {
	texts := []string{
		"", " ", "hello world", "<s> hi </s>", "<|user|>   \n x<|end|>\n\n  y", "<|im_start|>user\nhi<|im_end|>",
		strings.Repeat("  ", 40), strings.Repeat("ab", 50), "\v\v a\vb", "<|endoftext|><|endoftext|>",
		// Bytes without a token (falcon's \v) and whitespace stripped
		// beside special tokens (phi-3) encode to nothing: a long text of
		// them still fits.
		strings.Repeat("\v", 3000) + "hi", "<|end|>" + strings.Repeat(" \n", 1500) + "x<|user|>" + strings.Repeat("\t", 999),
	}
	if !testing.Short() {
		_, cases := loadVocab(t, "llama-spm")
		for _, c := range cases {
			texts = append(texts, c.text)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 150 {
		texts = append(texts, randomText(rng, 60))
	}
	return texts
}

// TestEncodeLimitAgreesWithEncode is the property EncodeLimit keeps: for
// any limit, a text whose full encoding fits gets exactly Encode's result,
// and one that stops early encodes to more than the limit, at least as
// many tokens as the error says; one that does not stop gets Encode's
// result. MinTokens never exceeds the real count.
func TestEncodeLimitAgreesWithEncode(t *testing.T) {
	texts := limitTexts(t)
	for name, tok := range limitTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			stopped := 0
			for _, text := range texts {
				for _, opt := range []Options{{}, {Special: true}, {BOS: true, EOS: true, Special: true}} {
					full, err := tok.Encode(text, opt)
					require.NoError(t, err)
					n := len(full)
					require.LessOrEqual(t, MinTokens(tok, text), n, "%q %+v", text, opt)
					limits := []int{0, n - 2, n - 1, n, n + 1, rng.IntN(n + 1)}
					for _, limit := range limits {
						if limit < 0 {
							continue
						}
						ids, err := EncodeLimit(tok, text, opt, limit)
						if n <= limit || err == nil {
							require.NoError(t, err, "%q fits %d tokens (encodes to %d)", text, limit, n)
							require.Equal(t, full, ids, "%q", text)
							continue
						}
						var le *LimitError
						require.ErrorAs(t, err, &le, "%q: %d tokens, limit %d", text, n, limit)
						require.ErrorIs(t, err, ErrTooManyTokens)
						require.Nil(t, ids)
						require.Equal(t, limit, le.Limit)
						require.Greater(t, le.AtLeast, limit)
						require.LessOrEqual(t, le.AtLeast, n, "%q: at least %d, but it encodes to %d", text, le.AtLeast, n)
						stopped++
					}
				}
			}
			require.Positive(t, stopped, "no text stopped early")
		})
	}
}

// TestEncodeLimitBoundedWork: refusing a 1 MiB text at a limit of 512
// tokens costs next to nothing on every vocabulary, those that drop bytes
// (falcon) or strip whitespace (phi-3) included; the full encoding
// allocates tens of MB.
func TestEncodeLimitBoundedWork(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1<<20/45)
	allocs := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for name, tok := range limitTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			var err error
			limited := allocs(func() { _, err = EncodeLimit(tok, text, Options{}, 512) })
			var le *LimitError
			require.True(t, errors.As(err, &le), "err %v", err)
			require.Greater(t, le.AtLeast, 512)
			full := allocs(func() { _, err = tok.Encode(text, Options{}) })
			require.NoError(t, err)
			t.Logf("refusing 1 MiB: %d bytes allocated (full encoding: %d)", limited, full)
			require.Less(t, limited, uint64(64<<10), "bytes allocated to refuse 1 MiB")
		})
	}
}
