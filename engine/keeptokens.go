package engine

import (
	"slices"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// Tool-call and reasoning markup is often made of control tokens
// (<|python_tag|>, [TOOL_CALLS], DeepSeek's <｜tool▁calls▁begin｜>), which
// decode to nothing. A request names the ones it needs to see
// (Request.KeepTokens), as llama.cpp's preserved tokens; they then decode
// to their text.

// MaxKeepTokens bounds Request.KeepTokens: texts past it are ignored (the C
// API rejects them, KVW_MAX_KEEP_TOKENS).
const MaxKeepTokens = 64

// keepTokens maps the ids of the given vocabulary entries that decode to
// nothing to their text. Texts that are not one such entry are ignored:
// they already decode to text, or the vocabulary lacks them.
func (e *Engine) keepTokens(texts []string) map[int][]byte {
	var keep map[int][]byte
	for i, t := range texts {
		if i == MaxKeepTokens {
			break
		}
		id, ok := e.tok.Lookup(t)
		if !ok || len(e.tok.Decode(-1, id)) > 0 {
			continue
		}
		if keep == nil {
			keep = map[int][]byte{}
		}
		keep[id] = []byte(t)
	}
	return keep
}

// keepDecode is decode with the kept tokens spelled out.
func keepDecode(decode func(prev, id int) []byte, keep map[int][]byte) func(prev, id int) []byte {
	if len(keep) == 0 {
		return decode
	}
	return func(prev, id int) []byte {
		if b, ok := keep[id]; ok {
			return b
		}
		return decode(prev, id)
	}
}

// ControlTokens returns the ids of those texts that are each one control
// token of the model's vocabulary (a token that decodes to nothing, not
// an end of generation), so that a grammar can ask for the token itself
// (<[id]>) rather than have the model spell its text from pieces: what a
// forced tool call's markup needs (toolcall.GrammarOptions.Tokens).
func (e *Engine) ControlTokens(texts []string) map[string]int {
	var ids map[string]int
	for _, t := range texts {
		id, ok := e.tok.Lookup(t)
		if !ok || id >= e.mcfg.Vocab {
			continue
		}
		// A tokenizer of another package reports no token types: there a
		// token that decodes to nothing is a control token, as keepTokens
		// has it.
		if b, special := tokenizer.TokenBytes(e.tok, id); !special && len(b) > 0 || slices.Contains(e.eos, id) {
			continue
		}
		if ids == nil {
			ids = map[string]int{}
		}
		ids[t] = id
	}
	return ids
}
