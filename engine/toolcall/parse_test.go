package toolcall

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

type parseCase struct {
	name   string
	format Format
	opt    func(*Options)
	out    string
	want   Message
}

func call(name, args string) Call { return Call{Name: name, Arguments: args} }

var parseCases = []parseCase{
	{"hermes one call", Format{Family: Hermes}, nil,
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		Message{Calls: []Call{call("get_weather", `{"city": "Paris"}`)}}},
	{"hermes content and two calls", Format{Family: Hermes}, nil,
		"Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"b\"}\n</tool_call>",
		Message{Content: "Let me check.", Calls: []Call{call("a", `{"x": [1, {"y": "}"}]}`), call("b", `{}`)}}},
	{"hermes unclosed stays content", Format{Family: Hermes}, nil,
		"<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1",
		Message{Content: "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1"}},
	{"hermes bare json", Format{Family: Hermes}, nil,
		`{"name": "a", "arguments": {"q": "z"}}`,
		Message{Calls: []Call{call("a", `{"q": "z"}`)}}},
	{"hermes plain json is content", Format{Family: Hermes}, nil,
		`{"answer": 42}`,
		Message{Content: `{"answer": 42}`}},
	{"qwen3 think then call", Format{Family: Hermes, Thinking: true}, nil,
		"<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
		Message{Reasoning: "The user wants weather.", Calls: []Call{call("get_weather", `{"city": "Oslo"}`)}}},
	{"reasoning kept inline", Format{Family: Hermes, Thinking: true}, func(o *Options) { o.KeepReasoning = true },
		"<think>\nhmm\n</think>\n\nHello",
		Message{Content: "<think>\nhmm\n</think>\n\nHello"}},
	{"deepseek forced-open thinking", Format{Family: DeepSeekR1, Thinking: true}, func(o *Options) { o.ThinkingOpen = true },
		"Okay, 2+2=4.\n</think>\n\nThe answer is 4.",
		Message{Reasoning: "Okay, 2+2=4.", Content: "The answer is 4."}},
	{"deepseek described-tools json call", Format{Family: DeepSeekR1, Thinking: true}, func(o *Options) { o.ThinkingOpen = true },
		"ok\n</think>\n\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}",
		Message{Reasoning: "ok", Calls: []Call{call("get_weather", `{"city": "Rome"}`)}}},
	{"deepseek call", Format{Family: DeepSeekR1, Thinking: true}, func(o *Options) { o.ThinkingOpen = true },
		"ok\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Rome\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		Message{Reasoning: "ok", Calls: []Call{call("get_weather", `{"city": "Rome"}`)}}},
	{"no tools: markup is content", Format{Family: Hermes}, func(o *Options) { o.Tools = false },
		"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>",
		Message{Content: "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"}},
	{"no tools: plain text as it is", Format{Family: Hermes}, func(o *Options) { o.Tools = false },
		" Hello,  world \n",
		Message{Content: " Hello,  world \n"}},
	{"no tools: reasoning then text", Format{Family: Hermes}, func(o *Options) { o.Tools = false },
		"<think>\nplan\n</think>\n\nOnce  upon a time.\n\n",
		Message{Reasoning: "plan", Content: "Once  upon a time."}},
	{"no tools: unclosed reasoning", Format{Family: Hermes}, func(o *Options) { o.Tools = false },
		"<think>still thinking",
		Message{Reasoning: "still thinking"}},
	{"llama3 json", Format{Family: Llama3}, nil,
		`{"name": "get_weather", "parameters": {"city": "Lima"}}`,
		Message{Calls: []Call{call("get_weather", `{"city": "Lima"}`)}}},
	{"llama3 typed json, two calls", Format{Family: Llama3}, nil,
		"{\"type\": \"function\", \"name\": \"a\", \"parameters\": {\"n\": 1}}; {\"name\": \"b\", \"parameters\": {}}",
		Message{Calls: []Call{call("a", `{"n": 1}`), call("b", `{}`)}}},
	{"llama3 python tag json", Format{Family: Llama3, PythonTag: true}, nil,
		`<|python_tag|>{"name": "a", "parameters": {"k": "v"}}`,
		Message{Calls: []Call{call("a", `{"k": "v"}`)}}},
	{"llama3 builtin call", Format{Family: Llama3, PythonTag: true}, nil,
		`<|python_tag|>brave_search.call(query="weather in Paris", count=3)`,
		Message{Calls: []Call{call("brave_search", `{"query": "weather in Paris", "count": 3}`)}}},
	{"llama3 text mentioning json later", Format{Family: Llama3}, nil,
		`Use {"name": "x"} like this.`,
		Message{Content: `Use {"name": "x"} like this.`}},
	{"mistral nemo array", Format{Family: MistralNemo}, nil,
		`[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}, "id": "abc123XYZ"}, {"name": "b", "arguments": {}}]`,
		Message{Calls: []Call{{ID: "abc123XYZ", Name: "a", Arguments: `{"x": 1}`}, call("b", `{}`)}}},
	{"mistral new format", Format{Family: Mistral}, nil,
		`[TOOL_CALLS]get_weather[ARGS]{"city": "Nice"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}`,
		Message{Calls: []Call{call("get_weather", `{"city": "Nice"}`), {ID: "a1b2c3d4e", Name: "get_time", Arguments: `{}`}}}},
	{"mistral new format after text", Format{Family: Mistral}, nil,
		"Sure.[TOOL_CALLS]f[ARGS]{\"a\": [1, 2]}",
		Message{Content: "Sure.", Calls: []Call{call("f", `{"a": [1, 2]}`)}}},
	{"phi4 object", Format{Family: Phi4}, nil,
		`<|tool_call|>{"name": "f", "arguments": {"a": "b"}}<|/tool_call|>`,
		Message{Calls: []Call{call("f", `{"a": "b"}`)}}},
	{"phi4 array", Format{Family: Phi4}, nil,
		`<|tool_call|>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"z": null}}]<|/tool_call|>`,
		Message{Calls: []Call{call("f", `{}`), call("g", `{"z": null}`)}}},
	{"granite", Format{Family: Granite}, nil,
		`<|tool_call|>[{"arguments": {"city": "Bern"}, "name": "get_weather"}]`,
		Message{Calls: []Call{call("get_weather", `{"city": "Bern"}`)}}},
	{"generic object", Format{Family: Generic}, nil,
		"```json\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n```",
		Message{Calls: []Call{call("f", `{"a": 1}`)}}},
	{"generic wrapped list", Format{Family: Generic}, nil,
		`{"tool_calls": [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": "{\"b\": 2}"}]}`,
		Message{Calls: []Call{call("f", `{"a": 1}`), call("g", `{"b": 2}`)}}},
	{"generic content", Format{Family: Generic}, nil,
		"Once upon a time {there was} a cat.",
		Message{Content: "Once upon a time {there was} a cat."}},
	{"gemma tool_code", Format{Family: Gemma}, nil,
		"```tool_code\nget_weather(city='Paris', days=2, metric=True)\n```",
		Message{Calls: []Call{call("get_weather", `{"city": "Paris", "days": 2, "metric": true}`)}}},
	{"gemma json", Format{Family: Gemma}, nil,
		"{\"name\": \"f\", \"arguments\": {\"a\": \"é\"}}",
		Message{Calls: []Call{call("f", `{"a": "é"}`)}}},
}

func (c parseCase) options() Options {
	o := Options{Format: c.format, Tools: true}
	if c.opt != nil {
		c.opt(&o)
	}
	return o
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			got := Parse(c.out, c.options())
			require.Equal(t, c.want, stripPartial(got))
		})
	}
}

func stripPartial(m Message) Message {
	for i := range m.Calls {
		m.Calls[i].partial = false
	}
	if len(m.Calls) == 0 {
		m.Calls = nil
	}
	return m
}

// collect concatenates a stream's deltas into a message and checks their
// shape: a call's first delta names it, later ones only add arguments,
// indexes come in order.
func collect(t *testing.T, ds []Delta, m *Message) {
	t.Helper()
	for _, d := range ds {
		switch {
		case d.Call != nil:
			c := d.Call
			if c.Index == len(m.Calls) {
				require.NotEmpty(t, c.Name, "a call's first delta names it")
				require.NotEmpty(t, c.ID)
				m.Calls = append(m.Calls, Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
				continue
			}
			require.Less(t, c.Index, len(m.Calls))
			require.Empty(t, c.Name)
			m.Calls[c.Index].Arguments += c.Arguments
		case d.Reasoning != "":
			m.Reasoning += d.Reasoning
		default:
			require.NotEmpty(t, d.Content)
			m.Content += d.Content
		}
	}
}

// TestStreamEqualsParse feeds every case byte by byte and in random-ish
// chunks; the deltas must add up to Parse's result, and no content delta
// may hold a piece of markup.
func TestStreamEqualsParse(t *testing.T) {
	for _, c := range parseCases {
		if strings.Contains(c.name, "unclosed") {
			continue // a stream sent the call before the output was cut
		}
		for _, step := range []int{1, 2, 3, 7, 1 << 20} {
			t.Run(fmt.Sprintf("%s/step%d", c.name, step), func(t *testing.T) {
				want := Parse(c.out, c.options())
				ids := 0
				s := NewStream(c.options(), func() string { ids++; return fmt.Sprint("id", ids) })
				var got Message
				for i := 0; i < len(c.out); {
					j := min(i+step, len(c.out))
					ds := s.Feed(c.out[i:j])
					for _, d := range ds {
						if d.Content != "" && len(want.Calls) > 0 {
							for _, m := range []string{"<tool_call", "[TOOL_CALLS", "<|tool_call", "<|python_tag", "```"} {
								require.NotContains(t, d.Content, m, "markup leaked into content")
							}
						}
					}
					collect(t, ds, &got)
					i = j
				}
				ds, final := s.Finish()
				collect(t, ds, &got)
				require.Equal(t, final.Calls, got.Calls)
				for i := range got.Calls {
					got.Calls[i].ID = want.Calls[i].ID
				}
				require.Equal(t, stripPartial(want), stripPartial(got))
			})
		}
	}
}

// TestStreamSplitsUTF8 feeds text cut inside a multi-byte character: the
// parser works on bytes, the result must still be whole.
func TestStreamSplitsUTF8(t *testing.T) {
	out := "<think>é思考</think>Réponse <tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"日本\"}}</tool_call>"
	o := Options{Format: Format{Family: Hermes}, Tools: true}
	s := NewStream(o, nil)
	var got Message
	for i := 0; i < len(out); i++ {
		collect(t, s.Feed(out[i:i+1]), &got)
	}
	ds, _ := s.Finish()
	collect(t, ds, &got)
	require.True(t, utf8.ValidString(got.Reasoning+got.Content))
	require.Equal(t, "é思考", got.Reasoning)
	require.Equal(t, "Réponse", got.Content)
	require.Equal(t, `{"s": "日本"}`, got.Calls[0].Arguments)
	require.True(t, strings.HasPrefix(got.Calls[0].ID, "call_"))
}

func TestParsePhi4CommaSeparated(t *testing.T) {
	out := `<|tool_call|>{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}`
	got := Parse(out, Options{Format: Format{Family: Phi4}, Tools: true})
	require.Equal(t, []Call{call("f", `{"a": 1}`), call("g", `{}`)}, stripPartial(got).Calls)
	require.Empty(t, got.Content)
}

// TestStreamCutInsideCall: an output cut inside a call the stream already
// sent ends without the call's markup coming out as content.
func TestStreamCutInsideCall(t *testing.T) {
	out := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2"
	s := NewStream(Options{Format: Format{Family: Hermes}, Tools: true}, nil)
	var got Message
	collect(t, s.Feed(out), &got)
	ds, final := s.Finish()
	collect(t, ds, &got)
	require.Empty(t, got.Content)
	require.Len(t, got.Calls, 1)
	require.Equal(t, `{"a": [1, 2`, got.Calls[0].Arguments)
	require.Equal(t, got.Calls[0].Name, final.Calls[0].Name)
}

// TestParsePartial: every prefix's partial parse extends the previous one
// and never shows markup in the content; the whole text's partial parse
// agrees with Parse on the calls.
func TestParsePartial(t *testing.T) {
	out := "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>"
	o := Options{Format: Format{Family: Hermes}, Tools: true}
	var prev Message
	for i := 1; i <= len(out); i++ {
		m := ParsePartial(out[:i], o)
		require.True(t, strings.HasPrefix(m.Content, prev.Content), "%q", out[:i])
		require.NotContains(t, m.Content, "<")
		require.GreaterOrEqual(t, len(m.Calls), len(prev.Calls))
		for j := range prev.Calls {
			require.True(t, strings.HasPrefix(m.Calls[j].Arguments, prev.Calls[j].Arguments))
		}
		prev = m
	}
	require.Equal(t, stripPartial(Parse(out, o)), stripPartial(prev))
}

// Harmony (gpt-oss) outputs, as the model writes them after the
// generation prompt "<|start|>assistant" (<|call|> and <|return|> end the
// generation and are not in the text).
var harmonyCases = []parseCase{
	{"harmony answer", Format{Family: Harmony}, nil,
		"<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
		Message{Reasoning: "User says hi.", Content: "Hello!"}},
	{"harmony call", Format{Family: Harmony}, nil,
		"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
		Message{Reasoning: "Need weather.", Calls: []Call{call("get_weather", `{"city": "Paris"}`)}}},
	{"harmony recipient first", Format{Family: Harmony}, nil,
		"<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}",
		Message{Content: "Checking.", Calls: []Call{call("get_time", `{}`)}}},
}

func TestHarmony(t *testing.T) {
	for _, c := range harmonyCases {
		t.Run(c.name, func(t *testing.T) {
			o := c.options()
			require.Equal(t, c.want, stripPartial(Parse(c.out, o)))
			s := NewStream(o, func() string { return "id" })
			var got Message
			for i := 0; i < len(c.out); i++ {
				ds := s.Feed(c.out[i : i+1])
				for _, d := range ds {
					require.NotContains(t, d.Content+d.Reasoning, "<|", "markup leaked")
				}
				collect(t, ds, &got)
			}
			ds, _ := s.Finish()
			collect(t, ds, &got)
			for i := range got.Calls {
				got.Calls[i].ID = ""
			}
			require.Equal(t, c.want, stripPartial(got))
		})
	}
	f := Detect("{{- '<|start|>assistant<|channel|>final<|message|>' }}")
	require.Equal(t, Harmony, f.Family)
	require.Contains(t, f.KeepTokens(), "<|channel|>")
}
