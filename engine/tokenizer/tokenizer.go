// Package tokenizer owns the mapping between text and token IDs:
// SentencePiece-style BPE (llama2.c tokenizer files and GGUF
// tokenizer.ggml.model = "llama") and GPT-2 byte-level BPE (GGUF
// tokenizer.ggml.model = "gpt2", Llama 3 style).
package tokenizer

// Options controls Encode.
type Options struct {
	BOS bool // prepend the BOS token when the vocabulary has one
	EOS bool // append the EOS token when the vocabulary has one
	// Special lets control-token text such as "<s>" in the input become the
	// control token. Off by default: user text never produces control tokens.
	Special bool
}

// Tokenizer converts text to token IDs and back. Implementations are
// immutable after construction and safe for concurrent use.
type Tokenizer interface {
	Encode(text string, opt Options) ([]int, error)
	// Decode returns the bytes that token id contributes to the output when
	// it follows token prev (-1 at the start). The bytes may be part of a
	// multi-byte UTF-8 sequence; streaming callers buffer incomplete ones.
	// Control tokens decode to nothing.
	Decode(prev, id int) []byte
	// Piece is the vocabulary entry of id, for display and debugging.
	Piece(id int) string
	VocabSize() int
	BOS() int // -1 when absent
	EOS() int // -1 when absent
}

// Token types as stored in GGUF tokenizer.ggml.token_type (llama.cpp's
// llama_token_type). Zero (undefined) is treated like TypeNormal.
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)
