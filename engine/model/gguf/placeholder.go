package gguf

import "fmt"

// Token ids of PlaceholderVocab.
const (
	PlaceholderUNK = 0
	PlaceholderBOS = 1
	PlaceholderEOS = 2
	// PlaceholderBytes is the id of byte token <0x00>; the 256 byte tokens
	// follow it.
	PlaceholderBytes = 3
)

// PlaceholderVocab sets a SentencePiece ("llama") vocabulary of n tokens
// for random-weight test and benchmark models that are fed token ids:
// <unk>, <s> (BOS), </s> (EOS), the 256 byte tokens, then distinct filler
// pieces. Only its size and special ids matter; llama.cpp and kvwarden
// both load it. n must be at least PlaceholderBytes+256.
func (b *Builder) PlaceholderVocab(n int) *Builder {
	if n < PlaceholderBytes+256 {
		b.fail(fmt.Errorf("gguf: placeholder vocabulary of %d tokens, want at least %d", n, PlaceholderBytes+256))
		return b
	}
	toks := make([]string, n)
	scores := make([]float32, n)
	types := make([]int32, n) // llama.cpp's token types: 1 normal, 2 unknown, 3 control, 6 byte
	for i := range toks {
		switch {
		case i == PlaceholderUNK:
			toks[i], types[i] = "<unk>", 2
		case i == PlaceholderBOS:
			toks[i], types[i] = "<s>", 3
		case i == PlaceholderEOS:
			toks[i], types[i] = "</s>", 3
		case i < PlaceholderBytes+256:
			toks[i], types[i] = fmt.Sprintf("<0x%02X>", i-PlaceholderBytes), 6
		default:
			toks[i], types[i] = fmt.Sprintf("\u2581t%d", i), 1
			scores[i] = -float32(i)
		}
	}
	b.Set("tokenizer.ggml.model", "llama")
	b.Set("tokenizer.ggml.tokens", toks)
	b.Set("tokenizer.ggml.scores", scores)
	b.Set("tokenizer.ggml.token_type", types)
	b.Set("tokenizer.ggml.bos_token_id", uint32(PlaceholderBOS))
	b.Set("tokenizer.ggml.eos_token_id", uint32(PlaceholderEOS))
	b.Set("tokenizer.ggml.unknown_token_id", uint32(PlaceholderUNK))
	return b
}
