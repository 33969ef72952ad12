package model

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// Names of the built-in models, accepted wherever a model path is.
const (
	// BuiltinStories is Andrej Karpathy's TinyStories 260K checkpoint and
	// its 512-token tokenizer (MIT, from llama2.c), compiled into the
	// binary: a model that writes short stories with no download. Source
	// and licence: engine/model/builtin/README.md and LICENSE.
	BuiltinStories = "builtin:stories260K"
	// BuiltinSynthetic is the synthetic model of DefaultConfig with random
	// weights (seed BuiltinSeed) and a byte-level vocabulary, for tests
	// and benchmarks: its output is gibberish. An empty model path selects
	// it too.
	BuiltinSynthetic = "builtin:synthetic"
)

// BuiltinPrefix starts the name of every built-in model.
const BuiltinPrefix = "builtin:"

//go:embed builtin/stories260K.bin
var stories260KBin []byte

//go:embed builtin/tok512.bin
var tok512Bin []byte

// IsBuiltin reports whether a model path names a built-in model.
func IsBuiltin(path string) bool { return strings.HasPrefix(path, BuiltinPrefix) }

// openBuiltin loads a built-in model by name.
func openBuiltin(name string) (*Weights, tokenizer.Tokenizer, error) {
	switch name {
	case BuiltinSynthetic:
		w, err := Synthetic(DefaultConfig(), BuiltinSeed, ml.F32)
		if err != nil {
			return nil, nil, err
		}
		return w, tokenizer.NewBytes(), nil
	case BuiltinStories:
		// The weights alias the embedded bytes (read-only use, no copy).
		w, err := llama2cFromBytes(stories260KBin)
		if err != nil {
			return nil, nil, fmt.Errorf("model: %s: %w", name, err)
		}
		w.Name = "stories260K"
		tok, err := tokenizer.ReadLlama2C(bytes.NewReader(tok512Bin), w.Config.Vocab)
		if err != nil {
			return nil, nil, fmt.Errorf("model: %s: %w", name, err)
		}
		return w, tok, nil
	}
	return nil, nil, fmt.Errorf("model: unknown built-in model %q (built-in: %s, %s)", name, BuiltinStories, BuiltinSynthetic)
}
