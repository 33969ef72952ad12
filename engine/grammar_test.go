package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

func grammarEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := New(Config{ModelPath: model.BuiltinStories, KVPages: 256, MaxSeqs: 8})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

func validatorFor(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("schema.json", doc))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	return s
}

func hot(seed uint64) sample.Params {
	return sample.Params{Temperature: 0.9, TopP: 1, RepeatPenalty: 1, Seed: seed, HasSeed: true}
}

// TestGrammarJSONSchemaRequests runs schema-constrained requests at once
// on the built-in stories model at temperature > 0: each output validates
// and ends with "stop" before max tokens.
func TestGrammarJSONSchemaRequests(t *testing.T) {
	e := grammarEngine(t)
	schemas := []string{
		`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false}`,
		`{"type":"object","properties":{"tags":{"type":"array","items":{"enum":["red","green","blue"]},"minItems":1,"maxItems":3},"ok":{"type":"boolean"}},"required":["tags","ok"],"additionalProperties":false}`,
		`{"$defs":{"p":{"type":"object","properties":{"x":{"type":"integer","minimum":-5,"maximum":5}},"required":["x"],"additionalProperties":false}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"anyOf":[{"$ref":"#/$defs/p"},{"type":"null"}]},"d":{"type":"string","format":"date"}},"required":["a","b","d"],"additionalProperties":false}`,
	}
	var wg sync.WaitGroup
	results := make([]Result, 2*len(schemas))
	for i := range results {
		g, err := e.CompileJSONSchema([]byte(schemas[i%len(schemas)]))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 400, Sampling: hot(uint64(i)), Grammar: g})
		}()
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.Err, "request %d", i)
		require.Equal(t, "stop", r.FinishReason, "request %d: %q", i, r.Text)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text))
		require.NoError(t, err, "request %d: not JSON: %q", i, r.Text)
		require.NoError(t, validatorFor(t, schemas[i%len(schemas)]).Validate(inst), "request %d: %q", i, r.Text)
	}
}

// TestGrammarStopsWhenComplete: a grammar with nothing after its end stops
// the request without waiting for the model's end token.
func TestGrammarStopsWhenComplete(t *testing.T) {
	e := grammarEngine(t)
	g, err := e.CompileGrammar(`root ::= ("yes" | "no") " it was " [a-z]{2,4} "."`)
	require.NoError(t, err)
	for seed := range uint64(4) {
		r, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 100, Sampling: hot(seed), Grammar: g})
		require.NoError(t, err)
		require.Equal(t, "stop", r.FinishReason)
		require.Regexp(t, `^(yes|no) it was [a-z]{2,4}\.$`, r.Text)
	}
	// The same output without the grammar is free text.
	r, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 20, Sampling: hot(0)})
	require.NoError(t, err)
	require.NotRegexp(t, `^(yes|no) it was`, r.Text)
}

func TestGrammarJSONObject(t *testing.T) {
	e := grammarEngine(t)
	g := e.JSONObjectGrammar()
	r, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 60, Sampling: sample.Greedy(), Grammar: g})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(r.Text, "{"), "%q", r.Text)
	if r.FinishReason == "stop" {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text))
		require.NoError(t, err, "%q", r.Text)
		require.IsType(t, map[string]any{}, v)
	}
}

func TestGrammarCompileErrors(t *testing.T) {
	e := grammarEngine(t)
	for _, tc := range []struct {
		name, gbnf, schema string
		is                 error
		msg                string
	}{
		{name: "undefined rule", gbnf: "root ::= foo", is: ErrInvalidGrammar, msg: "line 1, column 10"},
		{name: "syntax", gbnf: "root ::= \"a\"\nx ::= (", is: ErrInvalidGrammar, msg: "line 2"},
		{name: "no root", gbnf: `a ::= "x"`, is: ErrInvalidGrammar, msg: "root"},
		{name: "unsupported keyword", schema: `{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}`, is: ErrUnsupportedSchema, msg: "multipleOf"},
		{name: "not json", schema: `{"type":`, is: ErrInvalidSchema, msg: "not JSON"},
		{name: "bad ref", schema: `{"$ref":"#/$defs/missing"}`, is: ErrInvalidSchema, msg: "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.schema != "" {
				_, err = e.CompileJSONSchema([]byte(tc.schema))
			} else {
				_, err = e.CompileGrammar(tc.gbnf)
			}
			require.ErrorIs(t, err, ErrInvalidParams)
			require.ErrorIs(t, err, tc.is)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	_, err := e.Submit(context.Background(), Request{Prompt: "x", Grammar: &Grammar{}})
	require.ErrorIs(t, err, ErrInvalidParams)
}

// noX is a byte vocabulary without a token for 'x'.
type noX struct{ tokenizer.Bytes }

func (n noX) Decode(prev, id int) []byte {
	b := n.Bytes.Decode(prev, id)
	if bytes.Equal(b, []byte("x")) {
		return nil
	}
	return b
}

// TestGrammarDeadEnd: when the vocabulary cannot spell what the grammar
// needs, the request fails with ErrGrammarDeadEnd rather than looping.
func TestGrammarDeadEnd(t *testing.T) {
	w, err := model.Synthetic(model.DefaultConfig(), model.BuiltinSeed, 0)
	require.NoError(t, err)
	e, err := New(Config{Weights: w, Tokenizer: noX{tokenizer.NewBytes()}, KVPages: 64})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	g, err := e.CompileGrammar(`root ::= "ab" "x"`)
	require.NoError(t, err)
	r, err := e.Generate(context.Background(), Request{Prompt: "hi", MaxTokens: 20, Sampling: hot(1), Grammar: g})
	require.ErrorIs(t, err, ErrGrammarDeadEnd)
	require.Equal(t, "error", r.FinishReason)
	require.Equal(t, "ab", r.Text)
}

// TestGrammarMatcherPerRequest: requests sharing one compiled Grammar
// (and its mask cache) each follow it from the start with their own
// matcher, interleaved in one batch.
func TestGrammarMatcherPerRequest(t *testing.T) {
	e := grammarEngine(t)
	g, err := e.CompileGrammar(`root ::= "[" [0-9] ("," [0-9]){3} "]"`)
	require.NoError(t, err)
	var streams []*Stream
	for i := range 6 {
		st, err := e.Submit(context.Background(), Request{Prompt: fmt.Sprintf("Tom had %d", i), MaxTokens: 50, Sampling: hot(uint64(i)), Grammar: g})
		require.NoError(t, err)
		streams = append(streams, st)
	}
	for _, st := range streams {
		r := st.Wait()
		require.NoError(t, r.Err)
		require.Equal(t, "stop", r.FinishReason)
		require.Regexp(t, `^\[[0-9](,[0-9]){3}\]$`, r.Text)
	}
}
