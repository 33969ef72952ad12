package server

import (
	"errors"
	"strings"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/grammar"
	"github.com/kvwarden/kvwarden/engine/toolcall"
)

// Tool calls and reasoning content on /v1/chat/completions.
//
// The request's tools are rendered into the model's own chat template
// (engine/toolcall.Prepare), the output is parsed in the format the
// template shows (toolcall.Detect) into tool_calls and reasoning_content,
// streamed as OpenAI deltas. tool_choice "required" or a named function is
// enforced with a grammar (toolcall.Grammar), so even a weak model returns
// a call whose arguments validate against the tool's parameters. See
// docs/TOOLS.md.

// Reasoning formats (--reasoning-format, and the request's
// reasoning_format, as llama-server names them).
const (
	// ReasoningDeepSeek puts <think>…</think> in reasoning_content.
	ReasoningDeepSeek = "deepseek"
	// ReasoningNone leaves it inline in the content.
	ReasoningNone = "none"
)

// ValidReasoningFormat reports whether f is a reasoning format this server
// knows ("auto" is llama-server's name for its default, deepseek here).
func ValidReasoningFormat(f string) bool {
	switch f {
	case ReasoningDeepSeek, ReasoningNone, "auto":
		return true
	}
	return false
}

// chatPlan is a chat request once its conversation is rendered.
type chatPlan struct {
	prompt  string
	tools   []toolcall.Tool
	choice  toolcall.Choice
	opts    toolcall.Options
	keep    []string // control tokens the output must spell out
	grammar string   // GBNF forcing a call (required / named tool_choice)
	single  bool     // parallel_tool_calls false: one call at most
}

// takeTools moves tools and tool_choice out of the sampling fields, which
// the completions endpoint refuses, into the chat request's own.
func (b *chatRequest) takeTools() {
	if !isNull(b.Tools) {
		b.toolsRaw, b.Tools = b.Tools, nil
	}
	if !isNull(b.ToolChoice) {
		b.toolChoiceRaw, b.ToolChoice = b.ToolChoice, nil
	}
}

func toolError(err error) *apiError {
	var re *toolcall.RequestError
	if errors.As(err, &re) {
		return badRequest(re.Param, "invalid_value", "%s: %s", re.Param, re.Msg)
	}
	return badRequest("tools", "invalid_value", "%v", err)
}

// prepareChat validates tools, tool_choice and reasoning_format, renders
// the conversation and works out how to read the output.
func (s *Server) prepareChat(body *chatRequest) (*chatPlan, *apiError) {
	body.takeTools()
	tools, err := toolcall.ParseTools(body.toolsRaw)
	if err != nil {
		return nil, toolError(err)
	}
	choice, err := toolcall.ParseChoice(body.toolChoiceRaw, tools)
	if err != nil {
		return nil, toolError(err)
	}
	if choice.Mode == toolcall.ModeNone {
		tools = nil // not rendered, not parsed
	}
	rf := s.reasoningFormat
	if body.ReasoningFormat != nil {
		rf = *body.ReasoningFormat
		if !ValidReasoningFormat(rf) {
			return nil, badRequest("reasoning_format", "unsupported_value",
				"reasoning_format %q is not supported (deepseek, none or auto)", rf)
		}
	}
	msgs, e := chatMessages(body.Messages)
	if e != nil {
		return nil, e
	}
	tmpl, err := s.eng.ChatTemplate("", len(tools) > 0)
	if err != nil {
		return nil, templateError(err)
	}
	f := s.toolFormat(tmpl)
	msgs, err = toolcall.AdaptHistory(msgs, tmpl.Source())
	if err != nil {
		return nil, badRequest("messages", "invalid_value", "%v", err)
	}
	rd := toolcall.Prepare(msgs, tools, f, tmpl.Source())
	addGen := true
	if body.AddGenerationPrompt != nil {
		addGen = *body.AddGenerationPrompt
	}
	text, err := s.eng.ApplyChatTemplate(rd.Messages, engine.ChatOptions{
		AddGenerationPrompt: addGen, Tools: rd.Tools, Vars: body.ChatTemplateKwargs,
	})
	if err != nil {
		return nil, templateError(err)
	}
	plan := &chatPlan{
		prompt: text, tools: tools, choice: choice,
		opts: toolcall.Options{Format: f, Tools: len(tools) > 0, ThinkingOpen: toolcall.ThinkingOpen(text),
			KeepReasoning: rf == ReasoningNone},
		single: body.ParallelToolCalls != nil && !*body.ParallelToolCalls,
	}
	if plan.opts.Tools || !plan.opts.KeepReasoning {
		plan.keep = f.KeepTokens()
	}
	if choice.Forced() {
		thinking := f.Thinking
		if v, ok := body.ChatTemplateKwargs["enable_thinking"].(bool); ok && !v {
			thinking = false
		}
		g, err := toolcall.Grammar(f, tools, choice, toolcall.GrammarOptions{
			Parallel: !plan.single, Think: thinking, ThinkingOpen: plan.opts.ThinkingOpen,
			Tokens: s.eng.ControlTokens(f.KeepTokens()),
		})
		if err != nil {
			if errors.Is(err, toolcall.ErrInvalid) {
				return nil, toolError(err)
			}
			code := "invalid_value"
			if errors.Is(err, grammar.ErrUnsupportedSchema) {
				code = "unsupported_value"
			}
			return nil, badRequest("tools", code, "tool_choice %q needs a grammar of the tools' parameters: %s", choice.Mode,
				strings.Replace(err.Error(), "grammar: ", "", 1))
		}
		plan.grammar = g
	}
	return plan, nil
}

// toolFormat is the tool-call format of a template, probed once.
func (s *Server) toolFormat(t *chat.Template) toolcall.Format {
	if f, ok := s.toolFormats.Load(t); ok {
		return f.(toolcall.Format)
	}
	f := toolcall.DetectTemplate(t)
	s.toolFormats.Store(t, f)
	return f
}

// apply sets what the plan needs of the engine request.
func (pl *chatPlan) apply(req *engine.Request) {
	req.KeepTokens = pl.keep
}

// constrain sets the grammar of a forced tool_choice, once the tenant is
// known: compiled grammars are cached per tenant (grammar.go), so an agent
// sending the same tools each turn finds the masks computed.
func (pl *chatPlan) constrain(s *Server, tenant string, req *engine.Request) *apiError {
	if pl == nil || pl.grammar == "" {
		return nil
	}
	if req.Grammar != nil {
		return badRequest("tool_choice", "invalid_value",
			"tool_choice %q forces a call, which cannot be combined with response_format, grammar or json_schema", pl.choice.Mode)
	}
	g, err := s.grammars.get(s.eng, tenant, &constraintSpec{kind: kindGBNF, text: pl.grammar, param: "tool_choice"})
	if err != nil {
		// The grammar is built from the tools' schemas, which converted
		// already: a failure here is the server's.
		s.log.Error("tool_choice grammar does not compile", "err", err)
		return internalError("")
	}
	req.Grammar = g
	return nil
}

// post is what reads the chat output: nil when nothing needs parsing
// (no tools, reasoning left inline), so text streams as it is.
func (pl *chatPlan) post() *chatPost {
	if pl == nil || (!pl.opts.Tools && pl.opts.KeepReasoning) {
		return nil
	}
	return &chatPost{plan: pl, stream: toolcall.NewStream(pl.opts, nil)}
}

// again is a fresh reader of the same plan, for another choice of the
// request (n > 1): each choice's output is parsed on its own.
func (cp *chatPost) again() *chatPost {
	if cp == nil {
		return nil
	}
	return cp.plan.post()
}

// chatPost turns one chat output into reasoning_content, content and
// tool_calls; a request's generate loop owns it (one per choice).
type chatPost struct {
	plan   *chatPlan
	stream *toolcall.Stream
	called bool
}

type toolCallOut struct {
	Index    *int         `json:"index,omitempty"` // deltas only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chunks turns generated text into stream chunks.
func (sh shaper) chunks(text string) []any {
	if sh.post == nil {
		return []any{sh.chunk(text)}
	}
	return sh.post.deltas(sh, sh.post.stream.Feed(text))
}

// flush is the stream's last deltas, after the output ended.
func (sh shaper) flush() []any {
	if sh.post == nil {
		return nil
	}
	ds, _ := sh.post.stream.Finish()
	return sh.post.deltas(sh, ds)
}

// finishReason is "tool_calls" when the model stopped after calling.
func (sh shaper) finishReason(reason string) string {
	if sh.post != nil && sh.post.called && reason == "stop" {
		return "tool_calls"
	}
	return reason
}

func (cp *chatPost) deltas(sh shaper, ds []toolcall.Delta) []any {
	outs := cp.deltaOuts(ds)
	out := make([]any, 0, len(outs))
	for i := range outs {
		out = append(out, chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model,
			SystemFingerprint: sh.fp, Choices: []chatChoice{{Delta: &outs[i]}}})
	}
	return out
}

// deltaOuts turns parsed deltas into the chunk deltas of a choice.
func (cp *chatPost) deltaOuts(ds []toolcall.Delta) []chatOut {
	out := make([]chatOut, 0, len(ds))
	for _, d := range ds {
		var o chatOut
		switch {
		case d.Call != nil:
			if cp.plan.single && d.Call.Index > 0 {
				continue
			}
			cp.called = true
			i := d.Call.Index
			tc := toolCallOut{Index: &i, Function: toolFunction{Name: d.Call.Name, Arguments: d.Call.Arguments}}
			if d.Call.Name != "" {
				tc.ID, tc.Type = d.Call.ID, "function"
			}
			o.ToolCalls = []toolCallOut{tc}
		case d.Reasoning != "":
			r := d.Reasoning
			o.ReasoningContent = &r
		default:
			c := d.Content
			o.Content = &c
		}
		out = append(out, o)
	}
	return out
}

// full is the non-streamed chat response of a parsed output.
func (cp *chatPost) full(sh shaper, text, finish string, u usage) any {
	out, finish := cp.message(text, finish)
	return chatResponse{ID: sh.id, Object: "chat.completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []chatChoice{{Message: out, FinishReason: &finish}}, Usage: &u}
}

// message is the assistant message of a whole output, and its finish
// reason ("tool_calls" when the model stopped after calling).
func (cp *chatPost) message(text, finish string) (*chatOut, string) {
	msg := toolcall.Parse(text, cp.plan.opts)
	toolcall.AssignIDs(msg.Calls, cp.plan.opts.Format.Family, nil)
	if cp.plan.single && len(msg.Calls) > 1 {
		msg.Calls = msg.Calls[:1]
	}
	out := &chatOut{Role: "assistant"}
	if msg.Content != "" || len(msg.Calls) == 0 {
		out.Content = &msg.Content
	}
	if msg.Reasoning != "" {
		out.ReasoningContent = &msg.Reasoning
	}
	for _, c := range msg.Calls {
		out.ToolCalls = append(out.ToolCalls, toolCallOut{ID: c.ID, Type: "function",
			Function: toolFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if len(msg.Calls) > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	return out, finish
}
