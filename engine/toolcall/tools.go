package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about a request's tools or
// tool_choice (a *RequestError), so a server answers 400.
var ErrInvalid = errors.New("invalid tool request")

// RequestError names the request field at fault (for OpenAI's "param").
type RequestError struct {
	Param string
	Msg   string
}

func (e *RequestError) Error() string { return e.Param + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *RequestError) Unwrap() error { return ErrInvalid }

func reqErr(param, format string, args ...any) error {
	return &RequestError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Tool is one function tool of a request.
type Tool struct {
	Name string
	// Parameters is the JSON Schema of the arguments ({"type":"object"}
	// when the tool gave none).
	Parameters json.RawMessage
	// Raw is the tool definition as the request gave it (key order kept,
	// for templates that print it with tojson).
	Raw json.RawMessage
}

// MaxTools bounds the tools of one request.
const MaxTools = 128

// ParseTools checks a request's tools: an array of {"type": "function",
// "function": {"name", "description"?, "parameters"?, "strict"?}} with
// distinct names of at most 64 letters, digits, '_' or '-'.
func ParseTools(raw json.RawMessage) ([]Tool, error) {
	if isNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, reqErr("tools", "must be an array of tool objects")
	}
	if len(list) > MaxTools {
		return nil, reqErr("tools", "has %d tools, at most %d", len(list), MaxTools)
	}
	seen := map[string]int{}
	tools := make([]Tool, 0, len(list))
	for i, t := range list {
		param := fmt.Sprintf("tools[%d]", i)
		var def struct {
			Type     *string `json:"type"`
			Function *struct {
				Name       *string         `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &def); err != nil {
			return nil, reqErr(param, "must be an object {\"type\": \"function\", \"function\": {...}}: %v", err)
		}
		switch {
		case def.Type == nil:
			return nil, reqErr(param+".type", "is required (\"function\")")
		case *def.Type != "function":
			return nil, reqErr(param+".type", "%q is not supported (only \"function\")", *def.Type)
		case def.Function == nil:
			return nil, reqErr(param+".function", "is required")
		case def.Function.Name == nil:
			return nil, reqErr(param+".function.name", "is required")
		}
		name := *def.Function.Name
		if name == "" || len(name) > 64 || !validToolName(name) {
			return nil, reqErr(param+".function.name", "%q: a name is 1 to 64 letters, digits, '_' or '-'", name)
		}
		if j, dup := seen[name]; dup {
			return nil, reqErr(param+".function.name", "%q is also the name of tools[%d]: tool names must be unique", name, j)
		}
		seen[name] = i
		params := def.Function.Parameters
		if isNull(params) {
			params = json.RawMessage(`{"type": "object", "properties": {}}`)
		} else if b := bytes.TrimSpace(params); len(b) == 0 || b[0] != '{' {
			return nil, reqErr(param+".function.parameters", "must be a JSON Schema object")
		}
		tools = append(tools, Tool{Name: name, Parameters: params, Raw: t})
	}
	return tools, nil
}

func validToolName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Mode is what tool_choice asks for.
type Mode string

const (
	ModeNone     Mode = "none"     // no tools rendered, nothing parsed
	ModeAuto     Mode = "auto"     // the model decides; the parser detects a call
	ModeRequired Mode = "required" // the output must be at least one call
	ModeFunction Mode = "function" // the output must be a call of Choice.Name
)

// Choice is a request's tool_choice.
type Choice struct {
	Mode Mode
	Name string // ModeFunction only
}

// Forced reports whether the output must be a call (enforced by grammar).
func (c Choice) Forced() bool { return c.Mode == ModeRequired || c.Mode == ModeFunction }

// ParseChoice reads tool_choice: "none", "auto", "required", or
// {"type": "function", "function": {"name": ...}} naming one of tools.
// Absent, it is "auto" with tools and "none" without, as OpenAI has it.
func ParseChoice(raw json.RawMessage, tools []Tool) (Choice, error) {
	if isNull(raw) {
		if len(tools) == 0 {
			return Choice{Mode: ModeNone}, nil
		}
		return Choice{Mode: ModeAuto}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch Mode(s) {
		case ModeNone:
			return Choice{Mode: ModeNone}, nil
		case ModeAuto:
			if len(tools) == 0 {
				// Nothing to call: clients send "auto" with an empty list.
				return Choice{Mode: ModeNone}, nil
			}
			return Choice{Mode: ModeAuto}, nil
		case ModeRequired:
			if len(tools) == 0 {
				return Choice{}, reqErr("tool_choice", "%q needs tools, and the request has none", s)
			}
			return Choice{Mode: Mode(s)}, nil
		}
		return Choice{}, reqErr("tool_choice", "%q: want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" || obj.Function == nil || obj.Function.Name == "" {
		return Choice{}, reqErr("tool_choice", "want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	for _, t := range tools {
		if t.Name == obj.Function.Name {
			return Choice{Mode: ModeFunction, Name: t.Name}, nil
		}
	}
	return Choice{}, reqErr("tool_choice", "names the function %q, which is not among the request's tools", obj.Function.Name)
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
