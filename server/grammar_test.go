package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// structuredSchemas are strict json_schema response formats over the
// keywords OpenAI's strict mode uses. Strings are bounded (maxLength,
// enum, pattern, format) so that a random model ends them.
var structuredSchemas = []struct{ name, schema string }{
	{"flat", `{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer","minimum":0,"maximum":150},"member":{"type":"boolean"}},"required":["name","age","member"],"additionalProperties":false}`},
	{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":1000},"email":{"type":["string","null"],"maxLength":12}},"required":["id","email"],"additionalProperties":false},"meta":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}},"required":["user","meta"],"additionalProperties":false}`},
	{"arrays", `{"type":"object","properties":{"scores":{"type":"array","items":{"type":"integer","minimum":-9,"maximum":9},"minItems":2,"maxItems":4},"pair":{"type":"array","prefixItems":[{"type":"boolean"},{"const":"x"}],"items":false}},"required":["scores","pair"],"additionalProperties":false}`},
	{"enums", `{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"size":{"type":"string","enum":["S","M","L","XL"]},"level":{"enum":[1,2,3,null]},"kind":{"const":"shirt"}},"required":["color","size","level","kind"],"additionalProperties":false}`},
	{"anyOf", `{"type":"object","properties":{"value":{"anyOf":[{"type":"integer","minimum":0,"maximum":99},{"type":"string","maxLength":5},{"type":"null"}]},"shape":{"oneOf":[{"type":"object","properties":{"r":{"type":"integer","minimum":1,"maximum":9}},"required":["r"],"additionalProperties":false},{"type":"object","properties":{"w":{"type":"integer","minimum":1,"maximum":9},"h":{"type":"integer","minimum":1,"maximum":9}},"required":["w","h"],"additionalProperties":false}]}},"required":["value","shape"],"additionalProperties":false}`},
	{"ref", `{"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer","minimum":-50,"maximum":50},"y":{"type":"integer","minimum":-50,"maximum":50}},"required":["x","y"],"additionalProperties":false}},"type":"object","properties":{"from":{"$ref":"#/$defs/point"},"to":{"$ref":"#/$defs/point"},"via":{"type":"array","items":{"$ref":"#/$defs/point"},"maxItems":2}},"required":["from","to","via"],"additionalProperties":false}`},
	{"recursive ref", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`},
	{"pattern", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2,4}$"},"phone":{"type":"string","pattern":"^\\+?[0-9]{3}( [0-9]{3}){2}$"}},"required":["code","phone"],"additionalProperties":false}`},
	{"formats", `{"type":"object","properties":{"day":{"type":"string","format":"date"},"at":{"type":"string","format":"time"},"when":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"}},"required":["day","at","when","id"],"additionalProperties":false}`},
	{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]},{"type":"object","properties":{"b":{"enum":["x","y"]}},"required":["b"]}]}`},
}

func schemaValidator(t *testing.T, schema string) *jsonschema.Schema {
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

// completionOutput returns the text and finish reason of a non-streamed
// chat or completions response.
func completionOutput(t *testing.T, chat bool, raw []byte) (string, string) {
	t.Helper()
	var out struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	require.Len(t, out.Choices, 1, "%s", raw)
	if chat {
		return out.Choices[0].Message.Content, out.Choices[0].FinishReason
	}
	return out.Choices[0].Text, out.Choices[0].FinishReason
}

func requireValid(t *testing.T, v *jsonschema.Schema, text string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	require.NoError(t, err, "not JSON: %q", text)
	require.NoError(t, v.Validate(inst), "%q", text)
}

// TestStructuredOutputJSONSchema: strict json_schema requests through the
// server on the built-in model at temperature > 0, on both endpoints:
// every output validates against its schema and ends with "stop".
func TestStructuredOutputJSONSchema(t *testing.T) {
	ts := start(t, setup{cfg: engine.Config{MaxContext: 512, KVPages: 128}})
	for _, sc := range structuredSchemas {
		t.Run(sc.name, func(t *testing.T) {
			v := schemaValidator(t, sc.schema)
			format := fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"out","strict":true,"schema":%s}}`, sc.schema)
			for seed := range 3 {
				chat := seed%2 == 0
				path, body := "/v1/completions", fmt.Sprintf(`{"prompt":"Reply in JSON:","max_tokens":400,"temperature":0.8,"seed":%d,"response_format":%s}`, seed, format)
				if chat {
					path, body = "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"Reply in JSON."}],"max_tokens":400,"temperature":0.8,"seed":%d,"response_format":%s}`, seed, format)
				}
				resp, raw := ts.post(t, path, "", body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				text, finish := completionOutput(t, chat, raw)
				require.Equal(t, "stop", finish, "%s: %q", path, text)
				requireValid(t, v, text)
			}
		})
	}
}

// TestStructuredOutputForms: json_object (an object), llama-cpp-python's
// json_object with a schema, llama-server's grammar and json_schema body
// fields, and a streamed json_schema request.
func TestStructuredOutputForms(t *testing.T) {
	ts := start(t, setup{cfg: engine.Config{MaxContext: 512, KVPages: 128}})
	const schema = `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5},"s":{"enum":["a","b"]}},"required":["n","s"],"additionalProperties":false}`
	v := schemaValidator(t, schema)
	chatMsgs := `"messages":[{"role":"user","content":"JSON please"}],"temperature":0.7,"max_tokens":300`

	t.Run("json_object", func(t *testing.T) {
		for seed := range 3 {
			for _, chat := range []bool{true, false} {
				path, body := "/v1/completions", fmt.Sprintf(`{"prompt":"x","temperature":0.7,"max_tokens":300,"seed":%d,"response_format":{"type":"json_object"}}`, seed)
				if chat {
					path, body = "/v1/chat/completions", fmt.Sprintf(`{%s,"seed":%d,"response_format":{"type":"json_object"}}`, chatMsgs, seed)
				}
				resp, raw := ts.post(t, path, "", body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				text, finish := completionOutput(t, chat, raw)
				require.True(t, strings.HasPrefix(text, "{"), "%q", text)
				if finish == "stop" { // an unbounded object may also run to max_tokens
					var obj map[string]any
					require.NoError(t, json.Unmarshal([]byte(text), &obj), "%q", text)
				} else {
					require.Equal(t, "length", finish)
				}
			}
		}
	})
	for _, c := range []struct{ name, field string }{
		{"json_object with schema", `"response_format":{"type":"json_object","schema":` + schema + `}`},
		{"llama-server json_schema", `"json_schema":` + schema},
		{"llama-server grammar", `"grammar":` + mustMarshal(t, `root ::= "{\"n\":" [1-5] ",\"s\":\"" [ab] "\"}"`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, "/v1/chat/completions", "", `{`+chatMsgs+`,`+c.field+`}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			text, finish := completionOutput(t, true, raw)
			require.Equal(t, "stop", finish, "%q", text)
			requireValid(t, v, text)
		})
	}
	t.Run("stream", func(t *testing.T) {
		for _, chat := range []bool{true, false} {
			path, body := "/v1/completions", `{"prompt":"x","temperature":0.7,"max_tokens":300,"stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"o","schema":`+schema+`}}}`
			if chat {
				path, body = "/v1/chat/completions", `{`+chatMsgs+`,"stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"o","strict":true,"schema":`+schema+`}}}`
			}
			resp, raw := ts.post(t, path, "", body)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			events, done := sse(t, strings.NewReader(string(raw)))
			require.True(t, done)
			var text strings.Builder
			finish := ""
			for _, ev := range events {
				for _, ch := range ev["choices"].([]any) {
					c := ch.(map[string]any)
					if chat {
						if d, ok := c["delta"].(map[string]any); ok {
							if s, ok := d["content"].(string); ok {
								text.WriteString(s)
							}
						}
					} else if s, ok := c["text"].(string); ok {
						text.WriteString(s)
					}
					if f, ok := c["finish_reason"].(string); ok {
						finish = f
					}
				}
			}
			require.Equal(t, "stop", finish, "%q", text.String())
			requireValid(t, v, text.String())
		}
	})
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestStructuredOutputErrors: a grammar or schema the engine cannot use is
// a 400 whose param and message name the problem.
func TestStructuredOutputErrors(t *testing.T) {
	ts := start(t, setup{echo: true})
	chat := `"messages":[{"role":"user","content":"hi"}]`
	rf := func(schema string) string {
		return `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}`
	}
	for _, c := range []struct {
		name, path, body, code, param, msg string
	}{
		{"invalid grammar", "/v1/completions", `{"prompt":"a","grammar":"root ::= \"a\" foo"}`, "invalid_value", "grammar", `grammar: line 1, column 14: undefined rule "foo"`},
		{"grammar syntax", "/v1/chat/completions", `{` + chat + `,"grammar":"root ::= \"a\"\nx ::= [a-"}`, "invalid_value", "grammar", "line 2"},
		{"grammar not a string", "/v1/completions", `{"prompt":"a","grammar":{"root":"x"}}`, "invalid_type", "grammar", "string"},
		{"unsupported keyword", "/v1/chat/completions", `{` + chat + `,` + rf(`{"type":"object","properties":{"a":{"type":"integer","multipleOf":3}}}`) + `}`, "unsupported_value", "response_format.json_schema.schema", "multipleOf"},
		{"unsupported keyword json_schema field", "/v1/completions", `{"prompt":"a","json_schema":{"type":"string","contains":{}}}`, "unsupported_value", "json_schema", "contains"},
		{"invalid schema", "/v1/chat/completions", `{` + chat + `,` + rf(`{"type":"integer","minimum":5,"maximum":1}`) + `}`, "invalid_value", "response_format.json_schema.schema", "minimum"},
		{"missing ref", "/v1/completions", `{"prompt":"a",` + rf(`{"$ref":"#/$defs/nope"}`) + `}`, "invalid_value", "response_format.json_schema.schema", "nope"},
		{"schema not an object", "/v1/completions", `{"prompt":"a","json_schema":"{}"}`, "invalid_type", "json_schema", "JSON Schema object"},
		{"json_schema not an object", "/v1/chat/completions", `{` + chat + `,"response_format":{"type":"json_schema","json_schema":[1]}}`, "invalid_type", "response_format.json_schema", "name and schema"},
		{"two constraints", "/v1/chat/completions", `{` + chat + `,"response_format":{"type":"json_object"},"grammar":"root ::= \"a\""}`, "invalid_value", "grammar", "give one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, raw := ts.post(t, c.path, "", c.body)
			e := requireAPIError(t, resp, raw, http.StatusBadRequest, c.code)
			require.NotNil(t, e.Error.Param, "%s", raw)
			require.Equal(t, c.param, *e.Error.Param)
			require.Contains(t, e.Error.Message, c.msg)
		})
	}
}
