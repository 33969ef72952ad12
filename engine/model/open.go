package model

import (
	"fmt"
	"path/filepath"

	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// BuiltinSeed is the seed of the built-in synthetic model's weights.
const BuiltinSeed = 0x6b7677617264656e // "kvwarden"

// Open loads a model and its tokenizer: a GGUF file carries its own
// tokenizer; a llama2.c checkpoint needs tokenizerPath (a llama2.c
// tokenizer file). A built-in name (BuiltinStories, BuiltinSynthetic)
// needs no file at all; an empty modelPath selects BuiltinSynthetic
// (random weights, byte-level vocabulary), which tests and benchmarks use.
func Open(modelPath, tokenizerPath string) (*Weights, tokenizer.Tokenizer, error) {
	if modelPath == "" || IsBuiltin(modelPath) {
		if tokenizerPath != "" {
			return nil, nil, fmt.Errorf("model: a tokenizer path (%s) needs a model file, not the built-in model", tokenizerPath)
		}
		if modelPath == "" {
			modelPath = BuiltinSynthetic
		}
		return openBuiltin(modelPath)
	}
	w, f, err := Load(modelPath)
	if err != nil {
		return nil, nil, err
	}
	var tok tokenizer.Tokenizer
	switch {
	case f != nil && tokenizerPath == "":
		tok, err = TokenizerFromGGUF(f)
	case tokenizerPath != "":
		tok, err = tokenizer.LoadLlama2C(tokenizerPath, w.Config.Vocab)
	default:
		err = fmt.Errorf("model: %s is a llama2.c checkpoint; give its tokenizer file too (e.g. tok512.bin)", filepath.Base(modelPath))
	}
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	if tok.VocabSize() != w.Config.Vocab {
		w.Close()
		return nil, nil, fmt.Errorf("model: tokenizer has %d tokens, model %s has %d", tok.VocabSize(), filepath.Base(modelPath), w.Config.Vocab)
	}
	return w, tok, nil
}

// TokenizerFromGGUF builds the tokenizer described by a GGUF file's
// tokenizer.ggml.* metadata: "llama" (SentencePiece BPE) or "gpt2"
// (byte-level BPE).
func TokenizerFromGGUF(f *gguf.File) (tokenizer.Tokenizer, error) {
	kind, _ := f.String("tokenizer.ggml.model")
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("model: GGUF has no tokenizer.ggml.tokens")
	}
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	id := func(key string) int {
		if v, ok := f.Uint(key); ok && v < uint64(len(tokens)) {
			return int(v)
		}
		return -1
	}
	bos, eos := id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id")
	switch kind {
	case "llama":
		scores, _ := f.Float32s("tokenizer.ggml.scores")
		var opts []tokenizer.SPOption
		if v, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok && !v {
			opts = append(opts, tokenizer.WithoutDummyPrefix())
		}
		return tokenizer.NewSentencePiece(tokens, scores, types, bos, eos, id("tokenizer.ggml.unknown_token_id"), opts...)
	case "gpt2":
		merges, _ := f.Strings("tokenizer.ggml.merges")
		pre, _ := f.String("tokenizer.ggml.pre")
		return tokenizer.NewGPT2(tokens, types, merges, bos, eos, pre)
	case "":
		return nil, fmt.Errorf("model: GGUF has no tokenizer.ggml.model")
	}
	return nil, fmt.Errorf("model: tokenizer model %q is not implemented (supported: llama, gpt2)", kind)
}
