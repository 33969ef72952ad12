package main

/*
#include "bridge.h"
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/toolcall"
)

// Tool calls and reasoning over the C ABI, JSON in and JSON out, for
// bindings (Python's create_chat_completion(tools=...)). The logic is the
// server's (engine/toolcall); see docs/TOOLS.md.

// maxChatJSON bounds the JSON a call reads.
const maxChatJSON = 64 << 20

type prepareIn struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ReasoningFormat     string          `json:"reasoning_format"`
	ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
}

// parser is what kvw_chat_parse needs to read an output. Partial (set by
// the caller) reads a prefix of an output as a stream does
// (toolcall.ParsePartial); calls then carry no generated IDs.
type parser struct {
	Options toolcall.Options `json:"options"`
	Single  bool             `json:"single"`
	Partial bool             `json:"partial,omitempty"`
}

type prepareOut struct {
	Prompt     string   `json:"prompt"`
	Grammar    *string  `json:"grammar"`
	KeepTokens []string `json:"keep_tokens"`
	Parser     parser   `json:"parser"`
}

func messageContent(raw json.RawMessage) (string, bool, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "", true, nil
	}
	var s string
	if err := json.Unmarshal(t, &s); err == nil {
		return s, false, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(t, &parts); err != nil {
		return "", false, fmt.Errorf("content must be a string, null or an array of text parts")
	}
	var b bytes.Buffer
	for _, p := range parts {
		if p.Type != "text" {
			return "", false, fmt.Errorf("content part of type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), false, nil
}

func chatPrepare(eng *engine.Engine, in []byte) (*prepareOut, error) {
	var req prepareIn
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, fmt.Errorf("request is not a JSON object of the expected shape: %w", err)
	}
	tools, err := toolcall.ParseTools(req.Tools)
	if err != nil {
		return nil, err
	}
	choice, err := toolcall.ParseChoice(req.ToolChoice, tools)
	if err != nil {
		return nil, err
	}
	if choice.Mode == toolcall.ModeNone {
		tools = nil
	}
	switch req.ReasoningFormat {
	case "", "deepseek", "auto", "none":
	default:
		return nil, fmt.Errorf("reasoning_format %q is not supported (deepseek, none or auto)", req.ReasoningFormat)
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("messages[%d].role %q: want system, developer, user, assistant or tool", i, m.Role)
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		text, null, err := messageContent(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		msg := chat.Message{Role: role, Content: text}
		extra := map[string]any{}
		if calls := bytes.TrimSpace(m.ToolCalls); len(calls) > 0 && string(calls) != "null" {
			extra["tool_calls"] = json.RawMessage(calls)
			if null {
				extra["content"] = nil // templates test "content is none"
			}
		}
		if m.Name != "" {
			extra["name"] = m.Name
		}
		if m.ToolCallID != "" {
			extra["tool_call_id"] = m.ToolCallID
		}
		if len(extra) > 0 {
			msg.Extra = extra
		}
		msgs[i] = msg
	}
	tmpl, err := eng.ChatTemplate("", len(tools) > 0)
	if err != nil {
		return nil, err
	}
	f := toolcall.DetectTemplate(tmpl)
	if msgs, err = toolcall.AdaptHistory(msgs, tmpl.Source()); err != nil {
		return nil, err
	}
	rd := toolcall.Prepare(msgs, tools, f, tmpl.Source())
	addGen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	text, err := eng.ApplyChatTemplate(rd.Messages, engine.ChatOptions{AddGenerationPrompt: addGen, Tools: rd.Tools, Vars: req.ChatTemplateKwargs})
	if err != nil {
		return nil, err
	}
	out := &prepareOut{Prompt: text, Parser: parser{
		Options: toolcall.Options{Format: f, Tools: len(tools) > 0, ThinkingOpen: toolcall.ThinkingOpen(text),
			KeepReasoning: req.ReasoningFormat == "none"},
		Single: req.ParallelToolCalls != nil && !*req.ParallelToolCalls,
	}}
	if out.Parser.Options.Tools || !out.Parser.Options.KeepReasoning {
		out.KeepTokens = f.KeepTokens()
	}
	if choice.Forced() {
		thinking := f.Thinking
		if v, ok := req.ChatTemplateKwargs["enable_thinking"].(bool); ok && !v {
			thinking = false
		}
		g, err := toolcall.Grammar(f, tools, choice, toolcall.GrammarOptions{Parallel: !out.Parser.Single, Think: thinking,
			ThinkingOpen: out.Parser.Options.ThinkingOpen, Tokens: eng.ControlTokens(f.KeepTokens())})
		if err != nil {
			return nil, err
		}
		out.Grammar = &g
	}
	return out, nil
}

type callOut struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type parseOut struct {
	Role             string    `json:"role"`
	Content          *string   `json:"content"`
	ReasoningContent *string   `json:"reasoning_content,omitempty"`
	ToolCalls        []callOut `json:"tool_calls,omitempty"`
}

func chatParse(parserJSON []byte, text string) (*parseOut, error) {
	var p parser
	if err := json.Unmarshal(parserJSON, &p); err != nil {
		return nil, fmt.Errorf("parser is not the object kvw_chat_prepare wrote: %w", err)
	}
	var msg toolcall.Message
	if p.Partial {
		msg = toolcall.ParsePartial(text, p.Options)
	} else {
		msg = toolcall.Parse(text, p.Options)
		toolcall.AssignIDs(msg.Calls, p.Options.Format.Family, nil)
	}
	if p.Single && len(msg.Calls) > 1 {
		msg.Calls = msg.Calls[:1]
	}
	out := &parseOut{Role: "assistant"}
	if msg.Content != "" || len(msg.Calls) == 0 {
		out.Content = &msg.Content
	}
	if msg.Reasoning != "" {
		out.ReasoningContent = &msg.Reasoning
	}
	for _, c := range msg.Calls {
		var co callOut
		co.ID, co.Type, co.Function.Name, co.Function.Arguments = c.ID, "function", c.Name, c.Arguments
		out.ToolCalls = append(out.ToolCalls, co)
	}
	return out, nil
}

// writeJSONOut writes v as NUL-terminated JSON into buf (kvw_detokenize's
// buffer rules).
func writeJSONOut(fn string, v any, buf *C.char, bufSize C.size_t, outLen *C.size_t) C.int32_t {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	text := bytes.TrimRight(b.Bytes(), "\n")
	*outLen = C.size_t(len(text))
	if buf == nil {
		return stOK
	}
	if uint64(bufSize) < uint64(len(text))+1 {
		return fail(stTooSmall, "%s: %d bytes plus NUL do not fit in buf_size %d", fn, len(text), uint64(bufSize))
	}
	writeStr(buf, text)
	return stOK
}

//export kvwgo_chat_prepare
func kvwgo_chat_prepare(hv C.uintptr_t, request *C.char, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_chat_prepare"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outLen == nil {
		return fail(stInvalid, "%s: out_len is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	in, st := goText(request, fn, "request_json")
	if st != stOK {
		return st
	}
	if len(in) > maxChatJSON {
		return fail(stInvalid, "%s: request_json is %d bytes, at most %d", fn, len(in), maxChatJSON)
	}
	out, err := chatPrepare(h.eng, []byte(in))
	if err != nil {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	return writeJSONOut(fn, out, buf, bufSize, outLen)
}

//export kvwgo_chat_parse
func kvwgo_chat_parse(parserJSON, text *C.char, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_chat_parse"
	defer guard(&st, fn)
	if outLen == nil {
		return fail(stInvalid, "%s: out_len is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	pj, st := goText(parserJSON, fn, "parser_json")
	if st != stOK {
		return st
	}
	t, st := goText(text, fn, "text")
	if st != stOK {
		return st
	}
	out, err := chatParse([]byte(pj), t)
	if err != nil {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	return writeJSONOut(fn, out, buf, bufSize, outLen)
}
