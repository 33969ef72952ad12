package toolcall

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// templatesDir is ../shared/templates, skipped (or failed under CI) when absent.
func templatesDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(testmodels.Dir(t), "..", "templates")
	if _, err := os.Stat(d); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("templates not found at %s: %v", d, err)
		}
		t.Skipf("templates not found at %s", d)
	}
	return d
}

type renders struct {
	Tools         json.RawMessage `json:"tools"`
	Conversations map[string][]struct {
		Role       string          `json:"role"`
		Content    *string         `json:"content"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"conversations"`
	Renders map[string]map[string]struct {
		BOS string `json:"bos"`
		EOS string `json:"eos"`
		Out string `json:"out"`
	} `json:"renders"`
}

func loadRenders(t *testing.T) renders {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "renders.json"))
	require.NoError(t, err)
	var r renders
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

func loadTemplate(t *testing.T, dir, name string) *chat.Template {
	t.Helper()
	path := filepath.Join(dir, name+".jinja")
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join("testdata", name+".jinja")
	}
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	tmpl, err := chat.Parse(string(src))
	require.NoError(t, err)
	return tmpl
}

func pinned() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) }

// messagesOf builds the conversation as the server does from OpenAI
// messages: a null content with tool_calls is nil, tool_calls raw JSON.
func (r renders) messagesOf(t *testing.T, conv string) []chat.Message {
	t.Helper()
	var out []chat.Message
	for _, m := range r.Conversations[conv] {
		msg := chat.Message{Role: m.Role}
		extra := map[string]any{}
		if m.Content != nil {
			msg.Content = *m.Content
		} else {
			extra["content"] = nil
		}
		if len(m.ToolCalls) > 0 {
			extra["tool_calls"] = m.ToolCalls
		}
		if m.ToolCallID != "" {
			extra["tool_call_id"] = m.ToolCallID
		}
		if len(extra) > 0 {
			msg.Extra = extra
		}
		out = append(out, msg)
	}
	return out
}

// expectedFamilies is what Detect must say of each template.
var expectedFamilies = map[string]Family{
	"HuggingFaceTB-SmolLM3-3B":                    Generic,
	"Mistral-Small-3.2-24B-Instruct-2506":         Mistral,
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use": Hermes,
	"Qwen-Qwen2.5-7B-Instruct":                    Hermes,
	"Qwen-Qwen3-0.6B":                             Hermes,
	"deepseek-ai-DeepSeek-R1-Distill-Llama-8B":    DeepSeekR1,
	"google-gemma-2-2b-it":                        Gemma,
	"ibm-granite-granite-3.3-2B-Instruct":         Granite,
	"meta-llama-Llama-3.1-8B-Instruct":            Llama3,
	"meta-llama-Llama-3.2-3B-Instruct":            Llama3,
	"microsoft-Phi-3.5-mini-instruct":             Generic,
	"mistralai-Mistral-Nemo-Instruct-2407":        MistralNemo,
	"microsoft-Phi-4-mini-instruct":               Phi4,
}

// TestRenderWithTools renders the conversations of testdata/renders.json
// (made by gen_renders.py with Python's jinja2 the way transformers does)
// through Prepare and the chat renderer. Templates that print the tools
// variable (and Phi-4-mini's, which reads them from the system message)
// must match transformers byte for byte; the others get the tools
// described in the conversation and must still render (or raise as
// transformers does).
func TestRenderWithTools(t *testing.T) {
	dir := templatesDir(t)
	r := loadRenders(t)
	tools, err := ParseTools(r.Tools)
	require.NoError(t, err)
	names := make([]string, 0, len(r.Renders))
	for n := range r.Renders {
		names = append(names, n)
	}
	sort.Strings(names)
	require.Len(t, names, len(expectedFamilies))
	for _, name := range names {
		tmpl := loadTemplate(t, dir, name)
		f := DetectTemplate(tmpl)
		require.Equal(t, expectedFamilies[name], f.Family, name)
		for conv, want := range r.Renders[name] {
			t.Run(name+"/"+conv, func(t *testing.T) {
				msgs, err := AdaptHistory(r.messagesOf(t, conv), tmpl.Source())
				require.NoError(t, err)
				rd := Prepare(msgs, tools, f, tmpl.Source())
				got, err := tmpl.Render(chat.Input{Messages: rd.Messages, Tools: rd.Tools, AddGenerationPrompt: true,
					BOSToken: want.BOS, EOSToken: want.EOS, Now: pinned})
				if msg, ok := strings.CutPrefix(want.Out, "ERROR: "); ok {
					var raised *chat.RaiseError
					require.ErrorAs(t, err, &raised)
					require.Equal(t, msg, raised.Message)
					return
				}
				require.NoError(t, err)
				if f.Tools || f.Family == Phi4 {
					if strings.Contains(tmpl.Source(), "tojson(indent") {
						// engine/chat's tojson(indent=n) sorts object keys
						// (Python keeps their order): the same bytes,
						// in another order within objects.
						require.Equal(t, sortedBytes(want.Out), sortedBytes(got))
						return
					}
					require.Equal(t, want.Out, got)
					return
				}
				// Described in the conversation instead.
				require.Contains(t, got, ToolPrompt(tools))
				if conv == "history" {
					require.Contains(t, got, "get_weather")
					require.Contains(t, got, `{"temperature": 21}`)
				}
			})
		}
	}
}

// endMarkers end an assistant turn in the templates; the engine stops at
// them (end-of-generation tokens), so they are not in an output.
var endMarkers = []string{"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|end|>", "<｜end▁of▁sentence｜>", "<|end_of_text|>", "<end_of_turn>"}

// TestTemplateCallsParseBack takes each template's own rendering of an
// assistant turn with a tool call (the text after the generation prompt,
// up to its end-of-turn marker): exactly what a model trained on the
// template writes. Parsing it, whole and byte by byte, must give back the
// call.
func TestTemplateCallsParseBack(t *testing.T) {
	dir := templatesDir(t)
	r := loadRenders(t)
	tools, err := ParseTools(r.Tools)
	require.NoError(t, err)
	for name := range expectedFamilies {
		t.Run(name, func(t *testing.T) {
			tmpl := loadTemplate(t, dir, name)
			f := DetectTemplate(tmpl)
			if f.Family == Phi4 || !strings.Contains(tmpl.Source(), "tool_calls") {
				t.Skip("the template does not render tool calls")
			}
			all, err := AdaptHistory(r.messagesOf(t, "history"), tmpl.Source())
			require.NoError(t, err)
			bos, eos := r.Renders[name]["ask"].BOS, r.Renders[name]["ask"].EOS
			render := func(msgs []chat.Message, gen bool) string {
				rd := Prepare(msgs, tools, f, tmpl.Source())
				out, err := tmpl.Render(chat.Input{Messages: rd.Messages, Tools: rd.Tools, AddGenerationPrompt: gen,
					BOSToken: bos, EOSToken: eos, Now: pinned})
				require.NoError(t, err)
				return out
			}
			prompt := render(all[:2], true)
			turn := render(all[:3], false)
			// The turn starts after the end of the generation prompt
			// (whose "<think>\n", for DeepSeek R1, the turns lack; Mistral
			// Nemo moves the system text, so no plain prefix works).
			head := strings.TrimSuffix(prompt, "<think>\n")
			tail := head[len(head)-7:]
			i := strings.LastIndex(turn, tail)
			require.GreaterOrEqual(t, i, 0, "%q\n%q", prompt, turn)
			out := turn[i+len(tail):]
			for _, m := range endMarkers {
				if i := strings.Index(out, m); i >= 0 {
					out = out[:i]
				}
			}
			t.Logf("%s writes %q", f.Family, out)
			o := Options{Format: f, Tools: true}
			msg := Parse(out, o)
			require.Len(t, msg.Calls, 1, "%q", out)
			require.Equal(t, "get_weather", msg.Calls[0].Name)
			require.JSONEq(t, `{"city": "Paris", "unit": "celsius"}`, msg.Calls[0].Arguments)
			require.Empty(t, msg.Content)

			s := NewStream(o, func() string { return "id" })
			var got Message
			for i := 0; i < len(out); i++ {
				collect(t, s.Feed(out[i:i+1]), &got)
			}
			ds, _ := s.Finish()
			collect(t, ds, &got)
			require.Equal(t, msg.Calls[0].Name, got.Calls[0].Name)
			require.Equal(t, msg.Calls[0].Arguments, got.Calls[0].Arguments)
			require.Equal(t, msg.Content, got.Content)
			require.Equal(t, msg.Reasoning, got.Reasoning)
		})
	}
}

// TestAdaptHistory: arguments become objects (key order kept), a null
// content becomes absent unless the template tests for none.
func TestAdaptHistory(t *testing.T) {
	calls := json.RawMessage(`[{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [2]}"}}]`)
	msgs := []chat.Message{{Role: "assistant", Extra: map[string]any{"content": nil, "tool_calls": calls}}}
	got, err := AdaptHistory(msgs, "{{ message.content }}")
	require.NoError(t, err)
	require.Equal(t, `[{"id": "x", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [2]}}}]`,
		string(got[0].Extra["tool_calls"].(json.RawMessage)))
	_, hasContent := got[0].Extra["content"]
	require.False(t, hasContent)
	require.Equal(t, calls, msgs[0].Extra["tool_calls"], "the input is not changed")

	got, err = AdaptHistory(msgs, "{% if message['content'] is none %}{{ tool['function']['arguments'] + '' }}{% endif %}")
	require.NoError(t, err)
	require.Equal(t, calls, got[0].Extra["tool_calls"])
	require.Contains(t, got[0].Extra, "content")

	_, err = AdaptHistory([]chat.Message{{Role: "assistant", Extra: map[string]any{"tool_calls": json.RawMessage(`{}`)}}}, "")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, fmt.Sprintf("messages[%d]", 0))
}

func sortedBytes(s string) string {
	b := []byte(s)
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return string(b)
}
