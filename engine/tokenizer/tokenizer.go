// Package tokenizer owns the mapping between text and token IDs, following
// llama.cpp: SentencePiece-style BPE (llama2.c tokenizer files and GGUF
// tokenizer.ggml.model = "llama") and byte-level BPE (GGUF
// tokenizer.ggml.model = "gpt2") with every pre-tokenizer llama.cpp knows
// (tokenizer.ggml.pre), special and user-defined tokens cut out of the text
// first, the end-of-generation set, and add_bos/add_eos policy.
package tokenizer

import (
	"errors"
	"fmt"
)

// Options controls Encode.
type Options struct {
	BOS bool // prepend the BOS token when the vocabulary has one
	EOS bool // append the EOS token when the vocabulary has one
	// Special parses special-token text in the input: control-token text
	// such as "<s>" or "<|im_start|>" becomes the control token. Off by
	// default: user text never produces control tokens. (User-defined
	// tokens are split out of the text either way, as llama.cpp does.)
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
	// IsEOG reports whether id ends a generation: EOS, EOT
	// (tokenizer.ggml.eot_token_id), EOM and the control tokens whose text
	// ends a turn (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, ...), as
	// llama.cpp computes them.
	IsEOG(id int) bool
	// EOG returns the end-of-generation ids in ascending order (a copy).
	EOG() []int
	// AddBOS and AddEOS say whether a prompt gets BOS / EOS
	// (tokenizer.ggml.add_bos_token / add_eos_token, or llama.cpp's default
	// for the tokenizer model when absent).
	AddBOS() bool
	AddEOS() bool
	// Lookup returns the id of the vocabulary entry spelled exactly piece
	// (as Piece returns it), of any token type: the chat template's
	// bos_token and eos_token, "<|im_end|>", ...
	Lookup(piece string) (int, bool)
	// DroppedBytes counts the input bytes, since the tokenizer was built,
	// that had no token and were left out, as llama.cpp leaves them out
	// (falcon has no token for \v).
	DroppedBytes() uint64
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

// ErrTooManyTokens: EncodeLimit stopped because the text encodes to more
// tokens than the limit. The error is a *LimitError.
var ErrTooManyTokens = errors.New("tokenizer: too many tokens")

// LimitError says that a text encodes to at least AtLeast tokens, more
// than Limit; encoding stopped there.
type LimitError struct {
	AtLeast int
	Limit   int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("tokenizer: text encodes to at least %d tokens, more than the limit of %d", e.AtLeast, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrTooManyTokens }

// LimitEncoder is implemented by tokenizers that can stop encoding early
// (every tokenizer of this package).
type LimitEncoder interface {
	// EncodeLimit returns what Encode returns, except that once the
	// encoding is known to hold more than limit tokens it may stop and
	// return a *LimitError instead. It never stops for a text whose
	// encoding fits.
	EncodeLimit(text string, opt Options, limit int) ([]int, error)
	// MinTokens is a lower bound on the length of Encode(text, opt), for
	// any opt, computed in one pass over text's bytes without allocating:
	// a text that cannot fit is refused without being tokenized.
	MinTokens(text string) int
}

// EncodeLimit encodes text with t, but may stop with a *LimitError
// (wrapping ErrTooManyTokens) once the encoding is known to hold more than
// limit tokens, so that the cost of refusing a long text is bounded by the
// limit rather than the text. Otherwise it returns t.Encode's result,
// which the caller compares with the limit: a text that fits always gets
// it, and so does one that did not fit only once it was encoded whole. A
// Tokenizer that is not a LimitEncoder encodes the whole text.
func EncodeLimit(t Tokenizer, text string, opt Options, limit int) ([]int, error) {
	if le, ok := t.(LimitEncoder); ok {
		return le.EncodeLimit(text, opt, limit)
	}
	return t.Encode(text, opt)
}

// MinTokens is a lower bound on the tokens of text under t, from one pass
// over its bytes (0 when t is not a LimitEncoder).
func MinTokens(t Tokenizer, text string) int {
	if le, ok := t.(LimitEncoder); ok {
		return le.MinTokens(text)
	}
	return 0
}
