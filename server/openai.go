package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/kvwarden/kvwarden/engine/chat"
)

// apiError is an error in the OpenAI JSON shape:
// {"error":{"message":..,"type":..,"param":..,"code":..}}.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// Reason labels the rejection metric.
	Reason string `json:"-"`
	// RetryAfter, when > 0, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
	// closeConn answers with Connection: close.
	closeConn bool
}

func (e *apiError) Error() string { return e.Message }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func badRequest(param, code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...),
		Param: strp(param), Code: strp(code), Reason: "bad_request"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kvwarden"`)
	}
	if e.closeConn {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, e.Status, map[string]any{"error": e})
}

// decodeBody reads the JSON body into v. It maps a body over the limit to
// 413, malformed JSON to 400, and a known field of the wrong type to 400
// naming the field. Unknown fields are ignored, as OpenAI clients send
// fields this server does not know.
//
// The body is read as JSON whatever the Content-Type is when it is absent,
// application/json, or application/x-www-form-urlencoded (what `curl -d`
// sends unless told otherwise), as llama-server does; other media types
// get 415.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) *apiError {
	if ct := r.Header.Get("Content-Type"); !jsonMediaType(ct) {
		return &apiError{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Reason: "bad_request",
			Message: fmt.Sprintf("Content-Type %q: want application/json", ct)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Reason: "body_too_large",
				Code: strp("request_too_large"), Message: fmt.Sprintf("request body exceeds %d bytes", mb.Limit)}
		}
		return bodyReadError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "invalid_json", "empty request body: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "sampling.")
			if field == "" {
				return badRequest("", "invalid_json", "the request body must be a JSON object, got %s", te.Value)
			}
			return badRequest(field, "invalid_type", "%s: expected %s, got %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return badRequest("", "invalid_json", "malformed JSON at byte %d: %v", se.Offset, se)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return badRequest("", "invalid_json", "malformed JSON: unexpected end of input")
		}
		return badRequest("", "invalid_json", "malformed JSON: %v", err)
	}
	if dec.More() {
		return badRequest("", "invalid_json", "malformed JSON: data after the top-level object")
	}
	return nil
}

func jsonMediaType(ct string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(ct), ";")
	switch strings.TrimSpace(mt) {
	case "", "application/json", "application/x-www-form-urlencoded":
		return true
	}
	return false
}

// jsonInt is an integer field that also accepts an integral JSON float
// (1000.0, 1e3), as Python clients send them; 1000.5 is an error naming
// the field.
type jsonInt int64

func (n *jsonInt) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		return nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		*n = jsonInt(v)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		what := "number " + s
		if err != nil {
			what = jsonValueKind(s)
		}
		return &json.UnmarshalTypeError{Value: what, Type: reflect.TypeFor[int64]()}
	}
	*n = jsonInt(f)
	return nil
}

// jsonValueKind names the kind of a JSON value, as encoding/json's errors
// do ("string", "bool", ...).
func jsonValueKind(s string) string {
	switch {
	case strings.HasPrefix(s, `"`):
		return "string"
	case s == "true" || s == "false":
		return "bool"
	case strings.HasPrefix(s, "["):
		return "array"
	case strings.HasPrefix(s, "{"):
		return "object"
	}
	return "number " + s
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return goKind
}

// sampling are the parameters both endpoints share.
type sampling struct {
	Model            string          `json:"model"`
	MaxTokens        *jsonInt        `json:"max_tokens"`
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	Seed             *jsonInt        `json:"seed"`
	N                *jsonInt        `json:"n"`
	Stream           bool            `json:"stream"`
	StreamOptions    *streamOptions  `json:"stream_options"`
	Stop             json.RawMessage `json:"stop"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	LogitBias        map[string]any  `json:"logit_bias"`
	User             string          `json:"user"`

	// Extensions, under the names vLLM and llama-server use.
	TopK              *jsonInt `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	RepetitionPenalty *float64 `json:"repetition_penalty"` // vLLM: over the whole context
	RepeatPenalty     *float64 `json:"repeat_penalty"`     // llama.cpp: over the last repeat_last_n tokens
	RepeatLastN       *jsonInt `json:"repeat_last_n"`

	// Refused when set (400 instead of being ignored): neither endpoint
	// implements tools, structured output or log probabilities.
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	Functions      json.RawMessage `json:"functions"`
	FunctionCall   json.RawMessage `json:"function_call"`
	ResponseFormat json.RawMessage `json:"response_format"`
	TopLogprobs    json.RawMessage `json:"top_logprobs"`

	// llama-server's grammar and json_schema (grammar.go).
	constraintFields
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	sampling
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	BestOf   *jsonInt        `json:"best_of"`
	Logprobs json.RawMessage `json:"logprobs"`
	Suffix   *string         `json:"suffix"`
	// ParseSpecial (llama-server's parse_special) lets special-token text in
	// the prompt ("<|im_start|>") become the special token. Off by default:
	// prompt text is untrusted.
	ParseSpecial bool `json:"parse_special"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *jsonInt      `json:"max_completion_tokens"`
	Logprobs            *bool         `json:"logprobs"`
	// llama-server extensions: variables for the chat template (e.g.
	// enable_thinking) and, for /apply-template, whether to end with the
	// assistant's turn header (default true).
	ChatTemplateKwargs  map[string]any `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool          `json:"add_generation_prompt"`
	// Tool calls and reasoning (tools.go): parallel_tool_calls (OpenAI),
	// reasoning_format (llama-server's per-request override).
	ParallelToolCalls *bool   `json:"parallel_tool_calls"`
	ReasoningFormat   *string `json:"reasoning_format"`
	// tools and tool_choice, taken out of sampling by takeTools.
	toolsRaw, toolChoiceRaw json.RawMessage
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// params is what a request asks of the engine, validated.
type params struct {
	maxTokens     int // 0: the engine's default / context
	temperature   float64
	topP          float64
	topK          int
	minP          float64
	repeatPenalty float64 // 1: off
	repeatLastN   int
	seed          *uint64 // nil: no seed given (the engine picks one)
	stop          []string
	stream        bool
	includeUsage  bool
	// choices.go, logprobs.go
	choices
}

// DefaultRepeatLastN is the window of repeat_penalty when the request sets
// no repeat_last_n (llama.cpp's default). repetition_penalty, vLLM's name,
// applies to the whole context, as vLLM does.
const DefaultRepeatLastN = 64

// unsupported names the request fields no endpoint implements, with a
// check that they are set to something other than "off".
func (s *sampling) unsupported() *apiError {
	set := func(raw json.RawMessage, off ...string) bool {
		if isNull(raw) {
			return false
		}
		t := string(bytes.TrimSpace(raw))
		for _, o := range off {
			if t == o {
				return false
			}
		}
		return true
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		off  []string
		why  string
	}{
		{"tools", s.Tools, []string{"[]"}, "tool calling is not supported"},
		{"tool_choice", s.ToolChoice, []string{`"none"`, `"auto"`}, "tool calling is not supported"},
		{"functions", s.Functions, []string{"[]"}, "function calling is not supported"},
		{"function_call", s.FunctionCall, []string{`"none"`, `"auto"`}, "function calling is not supported"},
	} {
		if set(f.raw, f.off...) {
			return badRequest(f.name, "unsupported_value", "%s: %s", f.name, f.why)
		}
	}
	return nil
}

// validate checks the shared sampling fields. defMax is the default
// max_tokens when absent (0 = up to the context).
func (s *sampling) validate(defMax int) (params, *apiError) {
	p := params{maxTokens: defMax, temperature: 1, topP: 1, repeatPenalty: 1, stream: s.Stream}
	if e := s.unsupported(); e != nil {
		return p, e
	}
	if s.MaxTokens != nil {
		if *s.MaxTokens < 1 || *s.MaxTokens > math.MaxInt32 {
			return p, badRequest("max_tokens", "invalid_value", "max_tokens must be in [1, %d], got %d", math.MaxInt32, *s.MaxTokens)
		}
		p.maxTokens = int(*s.MaxTokens)
	}
	if s.Temperature != nil {
		t := *s.Temperature
		if math.IsNaN(t) || t < 0 || t > 2 {
			return p, badRequest("temperature", "invalid_value", "temperature must be in [0, 2], got %v", t)
		}
		p.temperature = t
	}
	if s.TopP != nil {
		v := *s.TopP
		if math.IsNaN(v) || v <= 0 || v > 1 {
			return p, badRequest("top_p", "invalid_value", "top_p must be in (0, 1], got %v", v)
		}
		p.topP = v
	}
	if s.TopK != nil {
		// -1 is vLLM's "off", as 0 is ours and llama.cpp's.
		if *s.TopK < -1 || *s.TopK > math.MaxInt32 {
			return p, badRequest("top_k", "invalid_value", "top_k must be >= 0 (0 or -1: off), got %d", *s.TopK)
		}
		p.topK = max(int(*s.TopK), 0)
	}
	if s.MinP != nil {
		v := *s.MinP
		if math.IsNaN(v) || v < 0 || v > 1 {
			return p, badRequest("min_p", "invalid_value", "min_p must be in [0, 1], got %v", v)
		}
		p.minP = v
	}
	if e := s.penalty(&p); e != nil {
		return p, e
	}
	if s.Seed != nil {
		v := uint64(*s.Seed)
		p.seed = &v
	}
	if e := s.choiceParams(&p); e != nil {
		return p, e
	}
	stop, err := parseStop(s.Stop)
	if err != nil {
		return p, err
	}
	p.stop = stop
	if s.StreamOptions != nil {
		if !s.Stream {
			return p, badRequest("stream_options", "invalid_value", "stream_options is only allowed with stream: true")
		}
		p.includeUsage = s.StreamOptions.IncludeUsage
	}
	return p, nil
}

// penalty reads repetition_penalty (vLLM), repeat_penalty (llama.cpp) and
// repeat_last_n. Giving both penalties with different values is an error.
func (s *sampling) penalty(p *params) *apiError {
	name, v := "", 1.0
	switch {
	case s.RepetitionPenalty != nil && s.RepeatPenalty != nil && *s.RepetitionPenalty != *s.RepeatPenalty:
		return badRequest("repeat_penalty", "invalid_value", "repetition_penalty (%v) and repeat_penalty (%v) disagree: give one",
			*s.RepetitionPenalty, *s.RepeatPenalty)
	case s.RepeatPenalty != nil:
		name, v = "repeat_penalty", *s.RepeatPenalty
		p.repeatLastN = DefaultRepeatLastN
	case s.RepetitionPenalty != nil:
		name, v = "repetition_penalty", *s.RepetitionPenalty
		p.repeatLastN = -1
	}
	if name != "" && (math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v > 10) {
		return badRequest(name, "invalid_value", "%s must be in (0, 10] (1: off), got %v", name, v)
	}
	p.repeatPenalty = v
	if s.RepeatLastN != nil {
		if *s.RepeatLastN < -1 || *s.RepeatLastN > math.MaxInt32 {
			return badRequest("repeat_last_n", "invalid_value", "repeat_last_n must be >= -1 (-1: the whole context, 0: off), got %d", *s.RepeatLastN)
		}
		p.repeatLastN = int(*s.RepeatLastN)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or an array of strings")
	}
	if len(many) > 4 {
		return nil, badRequest("stop", "invalid_value", "stop has %d strings, at most 4", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// chatMessages turns a request's messages into the conversation the chat
// template renders. Roles are checked ("developer", OpenAI's newer name for
// the system role, is passed as "system", which templates know); content
// parts are joined into text; tool_calls, tool_call_id and name are passed
// through for templates that print them.
func chatMessages(msgs []chatMessage) ([]chat.Message, *apiError) {
	if len(msgs) == 0 {
		return nil, badRequest("messages", "missing_required_parameter", "messages must hold at least one message")
	}
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		role := m.Role
		switch role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value", "messages[%d].role %q: want system, developer, user, assistant or tool", i, role)
		}
		if role == "developer" {
			role = "system"
		}
		text, err := messageText(m.Content)
		if err != nil {
			err.Param = strp(fmt.Sprintf("messages[%d].content", i))
			return nil, err
		}
		msg := chat.Message{Role: role, Content: text}
		extra := map[string]any{}
		if isNull(m.Content) && !isNull(m.ToolCalls) {
			// A tool-calling turn without text: templates test "content
			// is none" (DeepSeek). Elsewhere null content is "".
			extra["content"] = nil
		}
		if m.Name != "" {
			extra["name"] = m.Name
		}
		if m.ToolCallID != "" {
			extra["tool_call_id"] = m.ToolCallID
		}
		if !isNull(m.ToolCalls) {
			// Raw JSON keeps the order of keys, which tojson prints.
			var calls []json.RawMessage
			if err := json.Unmarshal(m.ToolCalls, &calls); err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "invalid_type", "tool_calls must be an array")
			}
			extra["tool_calls"] = json.RawMessage(m.ToolCalls)
		}
		if len(extra) > 0 {
			msg.Extra = extra
		}
		out[i] = msg
	}
	return out, nil
}

// templateError maps a chat template failure to its HTTP answer: 400 with
// the template's own message when it raised (e.g. a model that refuses a
// system message), or when the conversation made it exceed a limit; 500
// when the model's template does not parse (the server's problem).
func templateError(err error) *apiError {
	var raised *chat.RaiseError
	switch {
	case errors.As(err, &raised):
		return badRequest("messages", "chat_template_error", "the model's chat template refused the conversation: %s", raised.Message)
	case errors.Is(err, chat.ErrSyntax):
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: strp("chat_template_error"),
			Reason: "error", Message: err.Error()}
	}
	return badRequest("messages", "chat_template_error", "%v", err)
}

// messageText reads a message's content: a string, null, or an array of
// {"type":"text","text":...} parts.
func messageText(raw json.RawMessage) (string, *apiError) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest("", "invalid_type", "message content must be a string or an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", badRequest("", "unsupported_value", "content part of type %q is not supported (text only)", p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// Response shapes.

type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details,omitempty"`
}

type tokenDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int      `json:"index"`
	Message      *chatOut `json:"message,omitempty"`
	Delta        *chatOut `json:"delta,omitempty"`
	Logprobs     any      `json:"logprobs"`
	FinishReason *string  `json:"finish_reason"`
}

type chatOut struct {
	Role             string        `json:"role,omitempty"`
	Content          *string       `json:"content,omitempty"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

func (r *completionRequest) requestedModel() string { return r.Model }
func (r *chatRequest) requestedModel() string       { return r.Model }
