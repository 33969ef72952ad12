package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit"],"additionalProperties":false}}},` +
	`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["zone"],"additionalProperties":false}}}]`

var weatherSchemas = map[string]string{
	"get_weather": `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit"],"additionalProperties":false}`,
	"get_time":    `{"type":"object","properties":{"zone":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["zone"],"additionalProperties":false}`,
}

type toolCallJSON struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessageJSON struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent *string        `json:"reasoning_content"`
	ToolCalls        []toolCallJSON `json:"tool_calls"`
}

// chatResult reads a non-streamed chat response.
func chatResult(t *testing.T, raw []byte) (chatMessageJSON, string) {
	t.Helper()
	var out struct {
		Choices []struct {
			Message      chatMessageJSON `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	require.Len(t, out.Choices, 1, "%s", raw)
	return out.Choices[0].Message, out.Choices[0].FinishReason
}

// streamResult adds a chat stream's deltas up as a client does, checking
// that a call's first delta has its id, type and name and later ones only
// arguments.
func streamResult(t *testing.T, raw []byte) (chatMessageJSON, string) {
	t.Helper()
	events, done := sse(t, strings.NewReader(string(raw)))
	require.True(t, done, "%s", raw)
	var msg chatMessageJSON
	var content, reasoning strings.Builder
	finish := ""
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		var chunk struct {
			Choices []struct {
				Delta        chatMessageJSON `json:"delta"`
				FinishReason *string         `json:"finish_reason"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(b, &chunk))
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
			if c.Delta.ReasoningContent != nil {
				reasoning.WriteString(*c.Delta.ReasoningContent)
			}
			for _, tc := range c.Delta.ToolCalls {
				require.NotNil(t, tc.Index, "%s", b)
				if *tc.Index == len(msg.ToolCalls) {
					require.NotEmpty(t, tc.ID, "%s", b)
					require.Equal(t, "function", tc.Type)
					require.NotEmpty(t, tc.Function.Name)
					msg.ToolCalls = append(msg.ToolCalls, tc)
					continue
				}
				require.Less(t, *tc.Index, len(msg.ToolCalls))
				require.Empty(t, tc.Function.Name, "the name comes once")
				msg.ToolCalls[*tc.Index].Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	c, r := content.String(), reasoning.String()
	msg.Content, msg.ReasoningContent = &c, &r
	return msg, finish
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestToolChoiceForced: tool_choice "required" and a named function on the
// built-in-style random model at temperature > 0, streamed and not: the
// grammar makes every answer a call of an offered tool (the named one)
// whose arguments validate against its parameters (a real JSON Schema
// validator), with finish_reason "tool_calls".
func TestToolChoiceForced(t *testing.T) {
	ts := start(t, setup{cfg: engine.Config{MaxContext: 1024, KVPages: 192}})
	validators := map[string]*jsonschema.Schema{}
	for name, sc := range weatherSchemas {
		validators[name] = schemaValidator(t, sc)
	}
	for _, c := range []struct{ name, choice string }{
		{"required", `"required"`},
		{"named", `{"type":"function","function":{"name":"get_time"}}`},
	} {
		for _, stream := range []bool{false, true} {
			for seed := range 3 {
				t.Run(fmt.Sprintf("%s/stream=%v/seed=%d", c.name, stream, seed), func(t *testing.T) {
					body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":%s,"tool_choice":%s,`+
						`"temperature":0.8,"seed":%d,"max_tokens":300,"stream":%v,"parallel_tool_calls":%v}`, weatherTools, c.choice, seed, stream, seed != 1)
					resp, raw := ts.post(t, "/v1/chat/completions", "", body)
					require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
					var msg chatMessageJSON
					var finish string
					if stream {
						msg, finish = streamResult(t, raw)
					} else {
						msg, finish = chatResult(t, raw)
					}
					require.Equal(t, "tool_calls", finish, "%s", raw)
					require.NotEmpty(t, msg.ToolCalls, "%s", raw)
					require.Empty(t, str(msg.Content), "%s", raw)
					if seed == 1 {
						require.Len(t, msg.ToolCalls, 1, "parallel_tool_calls false")
					}
					for _, tc := range msg.ToolCalls {
						if c.name == "named" {
							require.Equal(t, "get_time", tc.Function.Name)
						}
						require.True(t, strings.HasPrefix(tc.ID, "call_"), tc.ID)
						v, ok := validators[tc.Function.Name]
						require.True(t, ok, "unknown tool %q", tc.Function.Name)
						requireValid(t, v, tc.Function.Arguments)
					}
				})
			}
		}
	}
}

// scripted starts a server whose model answers with exactly text (a
// llama-server grammar of one literal), under the given chat template.
func scripted(t *testing.T, template string) *testServer {
	t.Helper()
	src, err := os.ReadFile(sharedFile(t, "templates", template))
	require.NoError(t, err)
	return start(t, setup{cfg: engine.Config{MaxContext: 4096, KVPages: 512, ChatTemplate: string(src)}})
}

func literal(t *testing.T, text string) string {
	t.Helper()
	b, err := json.Marshal(text)
	require.NoError(t, err)
	return mustMarshal(t, "root ::= "+string(b))
}

// TestToolCallsAuto: tool_choice auto under real templates; the model's
// answer (fixed by a grammar) in the family's markup comes back as
// tool_calls, with the text around it as content and never a piece of
// markup, streamed and not.
func TestToolCallsAuto(t *testing.T) {
	cases := []struct {
		template, out, content string
		calls                  [][2]string
	}{
		{"Qwen-Qwen2.5-7B-Instruct.jinja",
			"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>",
			"Let me check.", [][2]string{{"get_weather", `{"city": "Paris", "unit": "celsius"}`}, {"get_time", `{"zone": "CET"}`}}},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja",
			`{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "celsius"}}`,
			"", [][2]string{{"get_weather", `{"city": "Oslo", "unit": "celsius"}`}}},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja",
			`[TOOL_CALLS]get_time[ARGS]{"zone": "UTC"}`,
			"", [][2]string{{"get_time", `{"zone": "UTC"}`}}},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja",
			`[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "EST"}, "id": "abcdef123"}]`,
			"", [][2]string{{"get_time", `{"zone": "EST"}`}}},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "Plain answer, no call.", "Plain answer, no call.", nil},
	}
	for _, c := range cases {
		t.Run(c.template, func(t *testing.T) {
			ts := scripted(t, c.template)
			for _, stream := range []bool{false, true} {
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Weather?"}],"tools":%s,"max_tokens":400,"stream":%v,"grammar":%s}`,
					weatherTools, stream, literal(t, c.out))
				resp, raw := ts.post(t, "/v1/chat/completions", "", body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				var msg chatMessageJSON
				var finish string
				if stream {
					msg, finish = streamResult(t, raw)
					for _, m := range []string{"<tool_call", "[TOOL_CALLS", "{\"name\""} {
						require.NotContains(t, str(msg.Content), m)
					}
				} else {
					msg, finish = chatResult(t, raw)
				}
				require.Equal(t, c.content, str(msg.Content))
				require.Len(t, msg.ToolCalls, len(c.calls), "%s", raw)
				for i, want := range c.calls {
					require.Equal(t, want[0], msg.ToolCalls[i].Function.Name)
					require.Equal(t, want[1], msg.ToolCalls[i].Function.Arguments)
				}
				if len(c.calls) > 0 {
					require.Equal(t, "tool_calls", finish)
				} else {
					require.Equal(t, "stop", finish)
				}
			}
		})
	}
}

// TestReasoningContent: a Qwen 3 <think> block goes to reasoning_content
// (streamed as delta.reasoning_content), or stays inline with
// reasoning_format "none" (per request, or the server's option).
func TestReasoningContent(t *testing.T) {
	ts := scripted(t, "Qwen-Qwen3-0.6B.jinja")
	out := "<think>\nThe user greets me.\n</think>\n\nHello there!"
	for _, stream := range []bool{false, true} {
		for _, rf := range []string{"", "deepseek", "none"} {
			t.Run(fmt.Sprintf("stream=%v/format=%q", stream, rf), func(t *testing.T) {
				extra := ""
				if rf != "" {
					extra = fmt.Sprintf(`,"reasoning_format":%q`, rf)
				}
				body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":200,"stream":%v,"grammar":%s%s}`,
					stream, literal(t, out), extra)
				resp, raw := ts.post(t, "/v1/chat/completions", "", body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				var msg chatMessageJSON
				if stream {
					msg, _ = streamResult(t, raw)
				} else {
					msg, _ = chatResult(t, raw)
				}
				if rf == "none" {
					require.Equal(t, out, str(msg.Content))
					require.Empty(t, str(msg.ReasoningContent))
					return
				}
				require.Equal(t, "The user greets me.", str(msg.ReasoningContent))
				require.Equal(t, "Hello there!", str(msg.Content))
			})
		}
	}
}

// TestToolRequestErrors: malformed tools, clashing names, a tool_choice
// naming a missing tool, a schema keyword the grammar cannot enforce and an
// unknown reasoning_format are each a 400 naming the problem.
func TestToolRequestErrors(t *testing.T) {
	ts := start(t, setup{})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, fields, param, msg string
	}{
		{"tools not an array", `"tools":{"type":"function"}`, "tools", "array"},
		{"tool without name", `"tools":[{"type":"function","function":{}}]`, "tools[0].function.name", "required"},
		{"bad tool name", `"tools":[{"type":"function","function":{"name":"get weather"}}]`, "tools[0].function.name", "letters"},
		{"clashing names", `"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`, "tools[1].function.name", "unique"},
		{"tool_choice missing tool", `"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"book_flight"}}`, "tool_choice", "book_flight"},
		{"tool_choice unknown", `"tools":` + weatherTools + `,"tool_choice":"sometimes"`, "tool_choice", "want"},
		{"unsupported schema keyword", `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}}}],"tool_choice":"required"`, "tools", "multipleOf"},
		{"grammar with forced tool", `"tools":` + weatherTools + `,"tool_choice":"required","grammar":"root ::= \"x\""`, "tool_choice", "grammar"},
		{"reasoning_format", `"reasoning_format":"deepseek-legacy"`, "reasoning_format", "deepseek-legacy"},
		{"tool_calls not an array", `"messages":[{"role":"assistant","content":null,"tool_calls":{}}]`, "messages[0].tool_calls", "array"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := msgs + "," + c.fields
			if strings.HasPrefix(c.fields, `"messages"`) {
				fields = c.fields
			}
			resp, raw := ts.post(t, "/v1/chat/completions", "", "{"+fields+"}")
			eb := requireAPIError(t, resp, raw, http.StatusBadRequest, "")
			require.NotNil(t, eb.Error.Param, "%s", raw)
			require.Equal(t, c.param, *eb.Error.Param, "%s", raw)
			require.Contains(t, eb.Error.Message, c.msg)
		})
	}
	// Completions still refuse tools.
	resp, raw := ts.post(t, "/v1/completions", "", `{"prompt":"a","tools":`+weatherTools+`}`)
	requireAPIError(t, resp, raw, http.StatusBadRequest, "unsupported_value")
}
