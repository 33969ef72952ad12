package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvwarden/kvwarden/engine/chat"
)

// ArgumentsAsObjects rewrites the OpenAI tool_calls of an assistant
// message (function.arguments a JSON string) so that arguments are JSON
// objects, which is what the templates print with tojson or iterate over
// (transformers' convention; vLLM converts the same way). Arguments that
// are not a string holding a JSON object are left alone. Key order is
// kept. Errors name what is malformed.
func ArgumentsAsObjects(raw json.RawMessage) (json.RawMessage, error) {
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, fmt.Errorf("%w: tool_calls must be an array", ErrInvalid)
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, c := range calls {
		if i > 0 {
			b.WriteString(", ")
		}
		keys, vals, err := orderedObject(c)
		if err != nil {
			return nil, fmt.Errorf("%w: tool_calls[%d] must be an object", ErrInvalid, i)
		}
		for k, key := range keys {
			if key != "function" {
				continue
			}
			fk, fv, err := orderedObject(vals[k])
			if err != nil {
				return nil, fmt.Errorf("%w: tool_calls[%d].function must be an object", ErrInvalid, i)
			}
			for j, fkey := range fk {
				var s string
				if fkey == "arguments" && json.Unmarshal(fv[j], &s) == nil {
					if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
						fv[j] = json.RawMessage(t)
					}
				}
			}
			vals[k] = writeObject(fk, fv)
		}
		b.Write(writeObject(keys, vals))
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("not an object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, kt.(string))
		vals = append(vals, v)
	}
	return keys, vals, nil
}

func writeObject(keys []string, vals []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteString(": ")
		b.Write(vals[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Render is what a conversation with tools becomes for one template.
type Render struct {
	Messages []chat.Message
	// Tools is the tools variable (nil: none).
	Tools []any
}

// Prepare adapts a conversation with tools to a template:
//   - a template that prints the tools variable gets the tools there, as
//     transformers passes them;
//   - Phi-4-mini's reads them from the system message's "tools" field (a
//     JSON string), so they go there;
//   - any other template (no tool support, e.g. Gemma 2, Phi-3.5) gets the
//     tools described in the first system or user message, with the
//     generic call format, and, when it does not render tool_calls or the
//     tool role (hist false), the calls and tool results of the history
//     as text.
//
// tools nil (or tool_choice "none") leaves the conversation alone.
func Prepare(msgs []chat.Message, tools []Tool, f Format, templateSrc string) Render {
	if len(tools) == 0 {
		return Render{Messages: msgs}
	}
	raw := make([]any, len(tools))
	for i, t := range tools {
		raw[i] = t.Raw
	}
	switch {
	case f.Family == Phi4:
		return Render{Messages: phi4Tools(msgs, tools)}
	case f.Tools:
		return Render{Messages: msgs, Tools: raw}
	}
	out := describeTools(msgs, tools)
	if !strings.Contains(templateSrc, "tool_calls") {
		out = historyAsText(out)
	}
	return Render{Messages: out}
}

func functionsJSON(tools []Tool, sep string) string {
	var b strings.Builder
	for i, t := range tools {
		if i > 0 {
			b.WriteString(sep)
		}
		keys, vals, err := orderedObject(t.Raw)
		fn := t.Raw
		if err == nil {
			for k, key := range keys {
				if key == "function" {
					fn = vals[k]
				}
			}
		}
		b.WriteString(pyDumps(fn))
	}
	return b.String()
}

func phi4Tools(msgs []chat.Message, tools []Tool) []chat.Message {
	list := "[" + functionsJSON(tools, ", ") + "]"
	out := make([]chat.Message, 0, len(msgs)+1)
	if len(msgs) == 0 || msgs[0].Role != "system" {
		out = append(out, chat.Message{Role: "system", Content: "You are a helpful assistant with some tools."})
	}
	out = append(out, msgs...)
	sys := out[0]
	extra := map[string]any{}
	for k, v := range sys.Extra {
		extra[k] = v
	}
	extra["tools"] = list
	sys.Extra = extra
	out[0] = sys
	return out
}

// ToolPrompt is the text that describes the tools to a model whose
// template has no place for them; it asks for the generic call format.
func ToolPrompt(tools []Tool) string {
	return "You can call the following tools (JSON Schema definitions):\n" + functionsJSON(tools, "\n") +
		"\n\nTo call a tool, answer with only a JSON object: {\"name\": <tool name>, \"arguments\": <arguments object>}. Otherwise answer normally."
}

func describeTools(msgs []chat.Message, tools []Tool) []chat.Message {
	out := append([]chat.Message(nil), msgs...)
	text := ToolPrompt(tools)
	for i, m := range out {
		switch m.Role {
		case "system":
			out[i].Content = m.Content + "\n\n" + text
			return out
		case "user":
			out[i].Content = text + "\n\n" + m.Content
			return out
		}
	}
	return append([]chat.Message{{Role: "user", Content: text}}, out...)
}

// historyAsText writes assistant tool calls as the generic JSON and tool
// results as user turns (consecutive ones merged, for templates that
// insist on alternating roles).
func historyAsText(msgs []chat.Message) []chat.Message {
	var out []chat.Message
	for _, m := range msgs {
		switch {
		case m.Role == "assistant" && m.Extra["tool_calls"] != nil:
			text := m.Content
			if raw, ok := m.Extra["tool_calls"].(json.RawMessage); ok {
				var calls []struct {
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				}
				_ = json.Unmarshal(raw, &calls)
				for _, c := range calls {
					if text != "" {
						text += "\n"
					}
					args := c.Function.Arguments
					var s string
					if json.Unmarshal(args, &s) == nil {
						args = json.RawMessage(s)
					}
					name, _ := json.Marshal(c.Function.Name)
					text += `{"name": ` + string(name) + `, "arguments": ` + string(args) + `}`
				}
			}
			out = append(out, chat.Message{Role: "assistant", Content: text})
		case m.Role == "tool":
			text := "Tool result"
			if id, ok := m.Extra["tool_call_id"].(string); ok && id != "" {
				text += " (" + id + ")"
			}
			text += ": " + m.Content
			if n := len(out); n > 0 && out[n-1].Role == "user" {
				out[n-1].Content += "\n\n" + text
				continue
			}
			out = append(out, chat.Message{Role: "user", Content: text})
		case m.Role == "user" && len(out) > 0 && out[len(out)-1].Role == "user" && strings.HasPrefix(out[len(out)-1].Content, "Tool result"):
			out[len(out)-1].Content += "\n\n" + m.Content
		default:
			out = append(out, m)
		}
	}
	return out
}

// probeTool is a tool whose name no template prints by itself.
var probeTool = json.RawMessage(`{"type": "function", "function": {"name": "kvwarden_probe_fn", "description": "probe", "parameters": {"type": "object", "properties": {}}}}`)

// Probe reports whether a template prints the tools variable: it renders
// a one-line conversation with a probe tool and looks for its name, as
// llama.cpp's template capability check does. (A template may mention
// "tools" and still read something else, e.g. SmolLM3's xml_tools.)
func Probe(t *chat.Template) bool {
	out, err := t.Render(chat.Input{
		Messages:            []chat.Message{{Role: "user", Content: "Hi"}},
		AddGenerationPrompt: true,
		Tools:               []any{probeTool},
	})
	return err == nil && strings.Contains(out, "kvwarden_probe_fn")
}

// DetectTemplate is Detect with Format.Tools set by Probe.
func DetectTemplate(t *chat.Template) Format {
	f := Detect(t.Source())
	f.Tools = f.Family != Phi4 && Probe(t)
	return f
}

// NullContent reports whether a template tests a message's content
// against none (DeepSeek R1's does, for tool-calling turns). Any other
// template gets "" for an assistant turn whose content is null, since most
// concatenate it with strings.
func NullContent(templateSrc string) bool {
	return strings.Contains(templateSrc, "['content'] is none") || strings.Contains(templateSrc, ".content is none") ||
		strings.Contains(templateSrc, "['content'] is not none") || strings.Contains(templateSrc, ".content is not none")
}

// StringArguments reports whether a template concatenates tool call
// arguments as text (DeepSeek R1's), so they must stay the OpenAI string.
func StringArguments(templateSrc string) bool {
	return strings.Contains(templateSrc, "['arguments'] +")
}

// AdaptHistory prepares the tool calls of a conversation's history for a
// template: their arguments become objects (ArgumentsAsObjects) unless
// the template concatenates them as text, and a null content becomes ""
// unless the template tests for none. Messages are copied, not changed.
func AdaptHistory(msgs []chat.Message, templateSrc string) ([]chat.Message, error) {
	nullOK, asString := NullContent(templateSrc), StringArguments(templateSrc)
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if m.Extra == nil {
			continue
		}
		extra := make(map[string]any, len(m.Extra))
		for k, v := range m.Extra {
			extra[k] = v
		}
		if c, ok := extra["content"]; ok && c == nil && !nullOK {
			delete(extra, "content")
		}
		if raw, ok := extra["tool_calls"].(json.RawMessage); ok && !asString {
			conv, err := ArgumentsAsObjects(raw)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			extra["tool_calls"] = conv
		}
		out[i].Extra = extra
	}
	return out, nil
}

// pyDumps re-encodes JSON the way Python's json.dumps writes it (", " and
// ": " separators, no indentation, keys in their order, non-ASCII kept):
// what a template's author saw when the model was trained.
func pyDumps(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b bytes.Buffer
	if err := pyValueOut(dec, &b); err != nil {
		return string(raw)
	}
	return b.String()
}

func pyValueOut(dec *json.Decoder, b *bytes.Buffer) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := t.(type) {
	case json.Delim:
		closer := byte('}')
		if v == '[' {
			closer = ']'
		}
		b.WriteByte(byte(v))
		for n := 0; dec.More(); n++ {
			if n > 0 {
				b.WriteString(", ")
			}
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				writePyString(b, k.(string))
				b.WriteString(": ")
			}
			if err := pyValueOut(dec, b); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteByte(closer)
	case string:
		writePyString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[v])
	case nil:
		b.WriteString("null")
	}
	return nil
}

func writePyString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}
