package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// ctlBytes is the byte vocabulary with two of its rarely used byte tokens
// turned into control tokens that decode to nothing, as Mistral's
// [TOOL_CALLS] and Llama 3's <|python_tag|> do.
type ctlBytes struct{ tokenizer.Bytes }

const (
	ctlToolCalls = 4 // byte 0x01's id in Bytes
	ctlPythonTag = 5
)

func (c ctlBytes) Decode(prev, id int) []byte {
	if id == ctlToolCalls || id == ctlPythonTag {
		return nil
	}
	return c.Bytes.Decode(prev, id)
}

func (c ctlBytes) Piece(id int) string {
	switch id {
	case ctlToolCalls:
		return "[TOOL_CALLS]"
	case ctlPythonTag:
		return "<|python_tag|>"
	}
	return c.Bytes.Piece(id)
}

func (c ctlBytes) Lookup(p string) (int, bool) {
	switch p {
	case "[TOOL_CALLS]":
		return ctlToolCalls, true
	case "<|python_tag|>":
		return ctlPythonTag, true
	}
	return c.Bytes.Lookup(p)
}

// TestGrammarControlTokenRequests: a grammar that asks for control tokens
// (by id and by text) gets exactly those tokens from the model, and with
// KeepTokens their text is in the output; a reference to a token the
// vocabulary lacks is refused when the grammar compiles.
func TestGrammarControlTokenRequests(t *testing.T) {
	w, err := model.Synthetic(model.DefaultConfig(), model.BuiltinSeed, 0)
	require.NoError(t, err)
	e, err := New(Config{Weights: w, Tokenizer: ctlBytes{tokenizer.NewBytes()}, KVPages: 64})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()

	require.Equal(t, map[string]int{"[TOOL_CALLS]": ctlToolCalls, "<|python_tag|>": ctlPythonTag},
		e.ControlTokens([]string{"[TOOL_CALLS]", "<|python_tag|>", "[ARGS]", "</s>"}))

	g, err := e.CompileGrammar(`root ::= <|python_tag|> <[4]> "[" [a-z]{2,5} "]"`)
	require.NoError(t, err)
	for seed := range uint64(3) {
		r, err := e.Generate(context.Background(), Request{Prompt: "Tom", MaxTokens: 20, Sampling: hot(seed), Grammar: g,
			KeepTokens: []string{"[TOOL_CALLS]", "<|python_tag|>"}})
		require.NoError(t, err)
		require.Equal(t, "stop", r.FinishReason)
		require.Equal(t, []int{ctlPythonTag, ctlToolCalls}, r.Tokens[:2])
		require.Regexp(t, `^<\|python_tag\|>\[TOOL_CALLS\]\[[a-z]{2,5}\]$`, r.Text)
	}

	_, err = e.CompileGrammar(`root ::= <|eot_id|> "a"`)
	require.ErrorIs(t, err, ErrInvalidParams)
	require.ErrorIs(t, err, ErrInvalidGrammar)
	require.ErrorContains(t, err, `line 1, column 10: token reference <|eot_id|>`)
}
