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
	return OpenWith(modelPath, tokenizerPath, LoadOptions{})
}

// OpenWith is Open with options.
func OpenWith(modelPath, tokenizerPath string, o LoadOptions) (*Weights, tokenizer.Tokenizer, error) {
	if modelPath == "" || IsBuiltin(modelPath) {
		if tokenizerPath != "" {
			return nil, nil, fmt.Errorf("model: a tokenizer path (%s) needs a model file, not the built-in model", tokenizerPath)
		}
		if modelPath == "" {
			modelPath = BuiltinSynthetic
		}
		return openBuiltin(modelPath)
	}
	w, f, err := LoadWith(modelPath, o)
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
	tok, err := tokenizer.FromMetadata(f)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return tok, nil
}
