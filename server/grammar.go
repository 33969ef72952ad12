package server

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/grammar"
)

// Structured output: OpenAI's response_format (json_object, and
// json_schema with name, schema and strict), llama-cpp-python's
// {"type":"json_object","schema":{...}}, and llama-server's body fields
// grammar (GBNF) and json_schema. Each becomes engine.Request.Grammar; a
// grammar or schema the engine cannot use is a 400 naming the problem
// (line and column, or the schema path and keyword).

// constraintFields are llama-server's request fields that ask for
// constrained output; with sampling.ResponseFormat, all of them.
type constraintFields struct {
	Grammar    json.RawMessage `json:"grammar"`     // GBNF text
	JSONSchema json.RawMessage `json:"json_schema"` // a schema object
}

func (s *sampling) constraint() *sampling { return s }

// responseFormat is OpenAI's response_format object.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema"` // OpenAI: {name, schema, strict, description}
	Schema     json.RawMessage `json:"schema"`      // llama-cpp-python / llama-server: with json_object
}

type jsonSchemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// grammarKind says which compiler a constraint goes to.
type grammarKind byte

const (
	kindGBNF       grammarKind = 'g'
	kindJSONSchema grammarKind = 's'
	kindJSONObject grammarKind = 'o'
)

// constraintSpec is what a request asks for, before compiling: param
// names the request field for errors.
type constraintSpec struct {
	kind  grammarKind
	text  string
	param string
}

// spec reads the constraint fields; nil when the request asks for none.
func (c *sampling) spec() (*constraintSpec, *apiError) {
	var specs []*constraintSpec
	if !isNull(c.ResponseFormat) {
		sp, e := parseResponseFormat(c.ResponseFormat)
		if e != nil {
			return nil, e
		}
		if sp != nil {
			specs = append(specs, sp)
		}
	}
	if !isNull(c.Grammar) {
		var g string
		if err := json.Unmarshal(c.Grammar, &g); err != nil {
			return nil, badRequest("grammar", "invalid_type", "grammar must be a string of GBNF")
		}
		if strings.TrimSpace(g) != "" {
			specs = append(specs, &constraintSpec{kind: kindGBNF, text: g, param: "grammar"})
		}
	}
	if !isNull(c.JSONSchema) {
		if t := bytes.TrimSpace(c.JSONSchema); len(t) == 0 || (t[0] != '{' && t[0] != 't') {
			return nil, badRequest("json_schema", "invalid_type", "json_schema must be a JSON Schema object")
		}
		specs = append(specs, &constraintSpec{kind: kindJSONSchema, text: string(c.JSONSchema), param: "json_schema"})
	}
	switch len(specs) {
	case 0:
		return nil, nil
	case 1:
		return specs[0], nil
	}
	return nil, badRequest(specs[1].param, "invalid_value", "%s and %s both constrain the output; give one", specs[0].param, specs[1].param)
}

func parseResponseFormat(raw json.RawMessage) (*constraintSpec, *apiError) {
	const param = "response_format"
	var rf responseFormat
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, badRequest(param, "invalid_type", "response_format must be an object with a type")
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		if !isNull(rf.Schema) {
			return &constraintSpec{kind: kindJSONSchema, text: string(rf.Schema), param: param + ".schema"}, nil
		}
		return &constraintSpec{kind: kindJSONObject, param: param}, nil
	case "json_schema":
		if isNull(rf.JSONSchema) {
			if !isNull(rf.Schema) { // llama-server accepts the schema here too
				return &constraintSpec{kind: kindJSONSchema, text: string(rf.Schema), param: param + ".schema"}, nil
			}
			return nil, badRequest(param+".json_schema", "invalid_value", "response_format of type json_schema needs a json_schema object")
		}
		var js jsonSchemaFormat
		if err := json.Unmarshal(rf.JSONSchema, &js); err != nil {
			return nil, badRequest(param+".json_schema", "invalid_type", "response_format.json_schema must be an object with name and schema")
		}
		if isNull(js.Schema) {
			// No schema: any JSON value, as OpenAI and llama-server allow.
			return &constraintSpec{kind: kindJSONSchema, text: "{}", param: param + ".json_schema.schema"}, nil
		}
		return &constraintSpec{kind: kindJSONSchema, text: string(js.Schema), param: param + ".json_schema.schema"}, nil
	}
	return nil, badRequest(param+".type", "unsupported_value", "response_format type %q is not supported (text, json_object or json_schema)", rf.Type)
}

// constrain compiles the constraint of body (if any) into req.Grammar.
func (s *Server) constrain(req *engine.Request, c *sampling) *apiError {
	sp, e := c.spec()
	if e != nil || sp == nil {
		return e
	}
	// A forced tool_choice's grammar comes later (chatPlan.constrain), and
	// that is where the two are refused together.
	g, err := s.grammars.get(s.eng, req.Tenant, sp)
	if err != nil {
		code := "invalid_value"
		if errors.Is(err, engine.ErrUnsupportedSchema) {
			code = "unsupported_value"
		}
		return badRequest(sp.param, code, "%s: %s", sp.param, grammarMessage(err))
	}
	req.Grammar = g
	return nil
}

// grammarCacheSize bounds the compiled grammars kept. Each holds the masks
// computed for it (up to 32 MiB, usually far less), so that requests
// repeating a schema, the common case, find them computed.
const grammarCacheSize = 16

// grammarCache keeps recently used compiled grammars, least recently used
// out first. Keys include the tenant: a grammar's mask cache makes a
// repeated schema faster, and that must not tell one tenant what another
// asked for. The zero value is ready.
type grammarCache struct {
	mu  sync.Mutex
	lru *list.List // of *grammarEntry, most recent first
	idx map[string]*list.Element
}

type grammarEntry struct {
	key string
	g   *engine.Grammar
}

func (c *grammarCache) get(eng *engine.Engine, tenant string, sp *constraintSpec) (*engine.Grammar, error) {
	key := tenant + "\x00" + string(sp.kind) + sp.text
	c.mu.Lock()
	if el, ok := c.idx[key]; ok {
		c.lru.MoveToFront(el)
		g := el.Value.(*grammarEntry).g
		c.mu.Unlock()
		return g, nil
	}
	c.mu.Unlock()
	var g *engine.Grammar
	var err error
	switch sp.kind {
	case kindGBNF:
		g, err = eng.CompileGrammar(sp.text)
	case kindJSONSchema:
		g, err = eng.CompileJSONSchema([]byte(sp.text))
	default:
		g = eng.JSONObjectGrammar()
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idx == nil {
		c.idx, c.lru = map[string]*list.Element{}, list.New()
	}
	if el, ok := c.idx[key]; ok { // compiled meanwhile by another request
		return el.Value.(*grammarEntry).g, nil
	}
	c.idx[key] = c.lru.PushFront(&grammarEntry{key: key, g: g})
	for c.lru.Len() > grammarCacheSize {
		el := c.lru.Back()
		c.lru.Remove(el)
		delete(c.idx, el.Value.(*grammarEntry).key)
	}
	return g, nil
}

// grammarMessage is the client's message for a compile error: the
// grammar package's own error (place, keyword), without the wrapping.
func grammarMessage(err error) string {
	var se *grammar.SyntaxError
	var sce *grammar.SchemaError
	switch {
	case errors.As(err, &se):
		err = se
	case errors.As(err, &sce):
		err = sce
	}
	return strings.TrimPrefix(err.Error(), "grammar: ")
}
