package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/grammar"
)

var testTools = `[
 {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
   "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
   "required": ["city", "unit"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
  "properties": {"q": {"$ref": "#/$defs/query"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2}},
  "required": ["q"], "$defs": {"query": {"type": "string", "pattern": "^[a-z]{1,8}$"}}}}},
 {"type": "function", "function": {"name": "now"}}
]`

func mustTools(t *testing.T) []Tool {
	t.Helper()
	tools, err := ParseTools(json.RawMessage(testTools))
	require.NoError(t, err)
	return tools
}

// byteVocab has every byte, the pieces that end strings and containers
// (a long walk prefers them) and the end-of-generation token 0.
func byteVocab(t *testing.T) (*grammar.Vocab, [][]byte) {
	t.Helper()
	pieces := [][]byte{[]byte("</s>")}
	special := []bool{true}
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
		special = append(special, false)
	}
	for _, s := range walkClosers {
		pieces = append(pieces, []byte(s))
		special = append(special, false)
	}
	v, err := grammar.NewVocab(pieces, special, 0)
	require.NoError(t, err)
	return v, pieces
}

var walkClosers = []string{`"`, `}`, `]`, `"}`, `</think>`, `<|end|>`, `<|start|>assistant`}

// walk generates one sentence of g with random allowed tokens.
func walk(t *testing.T, g *grammar.Grammar, v *grammar.Vocab, pieces [][]byte, rng *rand.Rand) string {
	t.Helper()
	m := grammar.NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	var out []byte
	for step := 0; ; step++ {
		require.Less(t, step, 4000, "walk did not end: %q", out)
		require.NoError(t, m.Allowed(mask), "after %q", out)
		var allowed []int
		for id := range v.Size() {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				allowed = append(allowed, id)
			}
		}
		if mask[0]&1 != 0 && (rng.Float64() < 0.3 || step > 80 || len(allowed) == 1) {
			return string(out)
		}
		id := allowed[rng.IntN(len(allowed))]
		if step > 30 && rng.Float64() < 0.8 {
			// A random closer among the allowed ones, so that strings,
			// containers and think or analysis blocks end.
			var closers []int
			for _, a := range allowed {
				for _, c := range walkClosers {
					if string(pieces[a]) == c {
						closers = append(closers, a)
					}
				}
			}
			if len(closers) > 0 {
				id = closers[rng.IntN(len(closers))]
			}
		}
		if id == 0 {
			continue
		}
		require.NoError(t, m.Accept(id))
		out = append(out, pieces[id]...)
	}
}

// TestGrammarForcesValidCalls: for every family, required and named
// choices, with and without parallel calls, random sentences of the
// grammar parse back into calls of the right tools whose arguments are
// valid under the tools' schemas (checked by a real validator).
func TestGrammarForcesValidCalls(t *testing.T) {
	tools := mustTools(t)
	validators := map[string]*jsonschema.Schema{}
	for _, tl := range tools {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(tl.Parameters)))
		require.NoError(t, err)
		c := jsonschema.NewCompiler()
		require.NoError(t, c.AddResource(tl.Name+".json", doc))
		validators[tl.Name], err = c.Compile(tl.Name + ".json")
		require.NoError(t, err)
	}
	v, pieces := byteVocab(t)
	choices := []Choice{{Mode: ModeRequired}, {Mode: ModeFunction, Name: "search"}}
	seed := uint64(0)
	for _, fam := range Families {
		for _, ch := range choices {
			for _, parallel := range []bool{false, true} {
				for _, think := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s%s/parallel=%v/think=%v", fam, ch.Mode, ch.Name, parallel, think)
					seed++
					t.Run(name, func(t *testing.T) {
						f := Format{Family: fam}
						src, err := Grammar(f, tools, ch, GrammarOptions{Parallel: parallel, Think: think})
						require.NoError(t, err)
						g, err := grammar.Parse(src)
						require.NoError(t, err, src)
						rng := rand.New(rand.NewPCG(seed, 3))
						for range 8 {
							out := walk(t, g, v, pieces, rng)
							msg := Parse(out, Options{Format: f, Tools: true})
							require.NotEmpty(t, msg.Calls, "no call parsed from %q", out)
							require.Empty(t, msg.Content, "%q", out)
							if !parallel || ch.Mode == ModeFunction {
								require.Len(t, msg.Calls, 1, "%q", out)
							}
							for _, c := range msg.Calls {
								if ch.Mode == ModeFunction {
									require.Equal(t, ch.Name, c.Name)
								}
								val, ok := validators[c.Name]
								require.True(t, ok, "unknown tool %q in %q", c.Name, out)
								inst, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
								require.NoError(t, err, "arguments not JSON: %q", c.Arguments)
								require.NoError(t, val.Validate(inst), "%q", c.Arguments)
							}
						}
					})
				}
			}
		}
	}
}

func TestGrammarThinkingOpen(t *testing.T) {
	tools := mustTools(t)
	src, err := Grammar(Format{Family: Hermes}, tools, Choice{Mode: ModeFunction, Name: "now"}, GrammarOptions{ThinkingOpen: true})
	require.NoError(t, err)
	g, err := grammar.Parse(src)
	require.NoError(t, err)
	m := grammar.NewMatcher(g, nil)
	out := "I should call now.</think>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"
	require.NoError(t, m.AcceptBytes([]byte(out)))
	require.True(t, m.CanEnd())
	msg := Parse(out, Options{Format: Format{Family: Hermes}, Tools: true, ThinkingOpen: true})
	require.Equal(t, "I should call now.", msg.Reasoning)
	require.Equal(t, []Call{call("now", "{}")}, msg.Calls)
}

func TestGrammarRefusesUnsupportedSchema(t *testing.T) {
	tools, err := ParseTools(json.RawMessage(`[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"number","multipleOf":3}}}}}]`))
	require.NoError(t, err)
	_, err = Grammar(Format{Family: Hermes}, tools, Choice{Mode: ModeRequired}, GrammarOptions{})
	require.ErrorIs(t, err, grammar.ErrUnsupportedSchema)
	require.ErrorContains(t, err, "multipleOf")
	require.ErrorContains(t, err, "tools[0] (f)")
}

func TestParseToolsAndChoiceErrors(t *testing.T) {
	cases := []struct {
		name, tools, choice, param, msg string
	}{
		{"not an array", `{"type":"function"}`, ``, "tools", "array"},
		{"missing type", `[{"function":{"name":"f"}}]`, ``, "tools[0].type", "required"},
		{"other type", `[{"type":"code_interpreter"}]`, ``, "tools[0].type", "not supported"},
		{"missing function", `[{"type":"function"}]`, ``, "tools[0].function", "required"},
		{"missing name", `[{"type":"function","function":{}}]`, ``, "tools[0].function.name", "required"},
		{"bad name", `[{"type":"function","function":{"name":"a b"}}]`, ``, "tools[0].function.name", "letters"},
		{"clashing names", `[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`, ``, "tools[1].function.name", "unique"},
		{"parameters not object", `[{"type":"function","function":{"name":"f","parameters":[1]}}]`, ``, "tools[0].function.parameters", "JSON Schema object"},
		{"choice names missing tool", `[{"type":"function","function":{"name":"f"}}]`, `{"type":"function","function":{"name":"g"}}`, "tool_choice", `"g"`},
		{"choice unknown string", `[{"type":"function","function":{"name":"f"}}]`, `"always"`, "tool_choice", "want"},
		{"required without tools", ``, `"required"`, "tool_choice", "needs tools"},
		{"choice malformed object", `[{"type":"function","function":{"name":"f"}}]`, `{"type":"function"}`, "tool_choice", "want"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tools, err := ParseTools(json.RawMessage(c.tools))
			if err == nil {
				_, err = ParseChoice(json.RawMessage(c.choice), tools)
			}
			require.ErrorIs(t, err, ErrInvalid)
			var re *RequestError
			require.True(t, errors.As(err, &re))
			require.Equal(t, c.param, re.Param)
			require.Contains(t, re.Msg, c.msg)
		})
	}
	tools := mustTools(t)
	ch, err := ParseChoice(nil, tools)
	require.NoError(t, err)
	require.Equal(t, ModeAuto, ch.Mode)
	ch, err = ParseChoice(json.RawMessage(`{"type":"function","function":{"name":"now"}}`), tools)
	require.NoError(t, err)
	require.Equal(t, Choice{Mode: ModeFunction, Name: "now"}, ch)
	require.Equal(t, json.RawMessage(`{"type": "object", "properties": {}}`), tools[2].Parameters)
}
