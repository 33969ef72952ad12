package chat

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHarmonyTemplate renders gpt-oss's harmony chat template, as gpt-oss
// GGUF files ship it (testdata/openai-gpt-oss-120b.jinja, from llama.cpp's
// models/templates), and compares byte for byte with what Python's jinja2
// renders under transformers' settings (testdata/harmony_renders.py wrote
// harmony_renders.json): a system prompt becoming the developer message,
// a plain conversation, and tools with a tool call, a tool result,
// reasoning_effort and thinking.
func TestHarmonyTemplate(t *testing.T) {
	src, err := os.ReadFile("testdata/openai-gpt-oss-120b.jinja")
	require.NoError(t, err)
	tmpl, err := Parse(string(src))
	require.NoError(t, err)
	b, err := os.ReadFile("testdata/harmony_renders.json")
	require.NoError(t, err)
	var cases []struct {
		Name     string                       `json:"name"`
		Messages []map[string]json.RawMessage `json:"messages"`
		Tools    []json.RawMessage            `json:"tools"`
		Vars     map[string]any               `json:"vars"`
		Out      string                       `json:"out"`
	}
	require.NoError(t, json.Unmarshal(b, &cases))
	require.Len(t, cases, 3)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			in := Input{AddGenerationPrompt: true, BOSToken: "<|startoftext|>", EOSToken: "<|return|>", Vars: c.Vars, Now: pinned}
			for _, m := range c.Messages {
				var msg Message
				require.NoError(t, json.Unmarshal(m["role"], &msg.Role))
				require.NoError(t, json.Unmarshal(m["content"], &msg.Content))
				for k, v := range m {
					if k == "role" || k == "content" {
						continue
					}
					if msg.Extra == nil {
						msg.Extra = map[string]any{}
					}
					msg.Extra[k] = v
				}
				in.Messages = append(in.Messages, msg)
			}
			for _, tool := range c.Tools {
				in.Tools = append(in.Tools, tool)
			}
			got, err := tmpl.Render(in)
			require.NoError(t, err)
			require.Equal(t, c.Out, got)
		})
	}
}
