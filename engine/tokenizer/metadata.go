package tokenizer

import (
	"errors"
	"fmt"
)

// Metadata is the read access to GGUF key/value metadata that FromMetadata
// needs; engine/model/gguf.File provides it.
type Metadata interface {
	String(key string) (string, bool)
	Bool(key string) (bool, bool)
	Uint(key string) (uint64, bool)
	Strings(key string) ([]string, bool)
	Float32s(key string) ([]float32, bool)
	Int32s(key string) ([]int32, bool)
}

// ErrNoVocabulary is returned when metadata has no tokenizer.
var ErrNoVocabulary = errors.New("tokenizer: GGUF has no tokenizer.ggml.tokens")

// ErrUnsupportedModel is returned for a tokenizer.ggml.model other than
// "llama" and "gpt2".
var ErrUnsupportedModel = errors.New("tokenizer: tokenizer model not implemented")

// FromMetadata builds the tokenizer a GGUF file's tokenizer.ggml.* metadata
// describes: "llama" (SentencePiece BPE) or "gpt2" (byte-level BPE), with
// its special-token ids, end-of-generation set, add_bos/add_eos policy and
// pre-tokenizer, the way llama.cpp reads them.
func FromMetadata(md Metadata) (Tokenizer, error) {
	kind, _ := md.String("tokenizer.ggml.model")
	tokens, ok := md.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, ErrNoVocabulary
	}
	types, _ := md.Int32s("tokenizer.ggml.token_type")
	if types != nil && len(types) != len(tokens) {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(types), len(tokens))
	}
	id := func(key string, def int) int {
		if v, ok := md.Uint(key); ok && v < uint64(len(tokens)) {
			return int(v)
		}
		if def >= len(tokens) {
			return -1
		}
		return def
	}
	var opts []Option
	if v, ok := md.Bool("tokenizer.ggml.add_bos_token"); ok {
		opts = append(opts, WithAddBOS(v))
	}
	if v, ok := md.Bool("tokenizer.ggml.add_eos_token"); ok {
		opts = append(opts, WithAddEOS(v))
	}
	opts = append(opts, WithEOT(id("tokenizer.ggml.eot_token_id", -1)), WithEOM(id("tokenizer.ggml.eom_token_id", -1)))
	for _, k := range []string{"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"} {
		if v := id(k, -1); v >= 0 {
			opts = append(opts, WithEOG(v))
		}
	}
	if name, ok := md.String("general.name"); ok {
		opts = append(opts, WithModelName(name))
	}
	switch kind {
	case "llama":
		scores, _ := md.Float32s("tokenizer.ggml.scores")
		if v, ok := md.Bool("tokenizer.ggml.add_space_prefix"); ok && !v {
			opts = append(opts, WithoutDummyPrefix())
		}
		return NewSentencePiece(tokens, scores, types, id("tokenizer.ggml.bos_token_id", 1), id("tokenizer.ggml.eos_token_id", 2), id("tokenizer.ggml.unknown_token_id", 0), opts...)
	case "gpt2":
		merges, _ := md.Strings("tokenizer.ggml.merges")
		pre, _ := md.String("tokenizer.ggml.pre")
		bos, eos := id("tokenizer.ggml.bos_token_id", 11), id("tokenizer.ggml.eos_token_id", 11)
		if pre == "chatglm-bpe" || pre == "chatglm4" || pre == "glm4" {
			bos = id("tokenizer.ggml.bos_token_id", -1)
		}
		return NewGPT2(tokens, types, merges, bos, eos, pre, opts...)
	case "bert":
		// llama.cpp: lowercase only when the file says so; strip_accents
		// follows lowercase unless given.
		lower, _ := md.Bool("tokenizer.ggml.normalizer.lowercase")
		strip := lower
		if v, ok := md.Bool("tokenizer.ggml.normalizer.strip_accents"); ok {
			strip = v
		}
		return NewWordPiece(tokens, types, id("tokenizer.ggml.bos_token_id", 101), id("tokenizer.ggml.eos_token_id", -1),
			id("tokenizer.ggml.seperator_token_id", 102), id("tokenizer.ggml.unknown_token_id", 100), lower, strip, opts...)
	case "":
		return nil, fmt.Errorf("%w: GGUF has no tokenizer.ggml.model", ErrUnsupportedModel)
	}
	return nil, fmt.Errorf("%w: %q (supported: llama, gpt2, bert)", ErrUnsupportedModel, kind)
}
