package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

var (
	// ErrUnsupportedSchema is wrapped by the error for a JSON Schema that
	// uses a keyword (or a form of one) the converter does not implement.
	ErrUnsupportedSchema = errors.New("unsupported JSON Schema")
	// ErrInvalidSchema is wrapped by the error for a JSON Schema that is
	// not valid (or can match nothing).
	ErrInvalidSchema = errors.New("invalid JSON Schema")
)

// SchemaError is a problem with a JSON Schema: Path is the JSON pointer of
// the schema object concerned, Keyword the keyword (when one is at fault).
// It wraps ErrUnsupportedSchema or ErrInvalidSchema, so a server can
// answer 400 naming the keyword.
type SchemaError struct {
	Path    string
	Keyword string
	Msg     string
	Err     error // ErrUnsupportedSchema or ErrInvalidSchema
}

func (e *SchemaError) Error() string {
	path := e.Path
	if path == "" {
		path = "/"
	}
	if e.Keyword != "" {
		return fmt.Sprintf("grammar: JSON Schema at %s: %s: %s", path, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("grammar: JSON Schema at %s: %s", path, e.Msg)
}

func (e *SchemaError) Unwrap() error { return e.Err }

// Limits that keep generation finite where a schema leaves it open.
const (
	maxIntDigits  = 15 // digits of an integer, or of a number's integer part
	maxFracDigits = 15 // digits of a number's fraction
	maxExpDigits  = 2  // digits of a number's exponent
)

// The shared rules. space allows at most one space, or one newline and an
// indentation of up to 20 blanks, between tokens (llama.cpp's bound).
var primitives = map[string]string{
	"space":    `| " " | "\n" [ \t]{0,20}`,
	"char":     `[^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`,
	"string":   `"\"" char* "\"" space`,
	"integral": `"0" | [1-9] [0-9]{0,` + strconv.Itoa(maxIntDigits-1) + `}`,
	"integer":  `"-"? integral space`,
	"number": `"-"? integral ("." [0-9]{1,` + strconv.Itoa(maxFracDigits) + `})? ([eE] [-+]? [0-9]{1,` +
		strconv.Itoa(maxExpDigits) + `})? space`,
	"boolean": `("true" | "false") space`,
	"null":    `"null" space`,
	"value":   `object | array | string | number | boolean | null`,
	"object":  `"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`,
	"array":   `"[" space ( value ("," space value)* )? "]" space`,
	"keychar": `[^"\\\x7F\x00-\x1F]`,
	// Formats, as the string content.
	"date-fmt": `[0-9]{4} "-" ( "0" [13578] "-" day31 | "1" [02] "-" day31 | "0" [469] "-" day30 | "11-" day30 | "02-" day29 )`,
	"day31":    `"0" [1-9] | [12] [0-9] | "3" [01]`,
	"day30":    `"0" [1-9] | [12] [0-9] | "30"`,
	"day29":    `"0" [1-9] | [12] [0-9]`,
	"time-fmt": `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`,
	"uuid-fmt": `[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}`,
}

// The rules each primitive uses.
var primitiveDeps = map[string][]string{
	"string":   {"char", "space"},
	"integral": nil,
	"integer":  {"integral", "space"},
	"number":   {"integral", "space"},
	"boolean":  {"space"},
	"null":     {"space"},
	"value":    {"object", "array", "string", "number", "boolean", "null"},
	"object":   {"space", "string", "value"},
	"array":    {"space", "value"},
	"date-fmt": {"day31", "day30", "day29"},
}

// Keywords that carry no constraint: ignored on purpose.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "$schema": true, "$id": true,
	"default": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"contentEncoding": true, "contentMediaType": true, "contentSchema": true, "$anchor": true,
	"$defs": true, "definitions": true, // read through $ref
}

// Keywords the converter implements.
var supported = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

// JSONSchemaGBNF converts a JSON Schema (draft 2020-12 keywords, as
// OpenAI's strict mode and llama.cpp's converter accept them) into a GBNF
// grammar whose sentences are JSON documents valid under it. Errors are
// *SchemaError. See docs/GRAMMAR.md for the subset.
func JSONSchemaGBNF(schema []byte) (string, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return "", &SchemaError{Msg: "not JSON: " + err.Error(), Err: ErrInvalidSchema}
	}
	c := &converter{doc: doc, rules: map[string]string{}, refs: map[string]string{}}
	top, err := c.visit(doc, "", "schema")
	if err != nil {
		return "", err
	}
	c.rules["root"] = top
	c.order = append(c.order, "root")
	return c.text(), nil
}

// FromJSONSchema compiles a JSON Schema into a Grammar (JSONSchemaGBNF,
// then Parse).
func FromJSONSchema(schema []byte) (*Grammar, error) {
	src, err := JSONSchemaGBNF(schema)
	if err != nil {
		return nil, err
	}
	g, err := Parse(src)
	if err != nil {
		// A reference cycle that consumes nothing ({"$ref": "#"} inside
		// anyOf, say) is left recursion in the grammar.
		return nil, &SchemaError{Msg: fmt.Sprintf("cannot be generated: %v", err), Err: ErrInvalidSchema}
	}
	return g, nil
}

// JSONObjectGBNF is the grammar of OpenAI's json_object mode: any JSON
// object, with the same whitespace and number bounds as the schemas'.
// Nesting depth is not bounded: the matcher keeps one stack frame per
// level, and the model's own output closes them.
func JSONObjectGBNF() string {
	c := &converter{rules: map[string]string{}}
	c.use("object")
	c.rules["root"] = "object"
	c.order = append(c.order, "root")
	return c.text()
}

type converter struct {
	doc   any
	rules map[string]string
	order []string
	refs  map[string]string // $ref target -> rule name
}

func (c *converter) text() string {
	var b strings.Builder
	names := slices.Clone(c.order)
	// root first, then the rest in creation order.
	slices.SortStableFunc(names, func(a, b string) int {
		switch {
		case a == "root" && b != "root":
			return -1
		case b == "root" && a != "root":
			return 1
		}
		return 0
	})
	for _, n := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", n, c.rules[n])
	}
	return b.String()
}

// use adds a shared rule (and the ones it needs) and returns its name.
func (c *converter) use(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	c.rules[name] = primitives[name]
	c.order = append(c.order, name)
	for _, d := range primitiveDeps[name] {
		c.use(d)
	}
	return name
}

var ruleNameBad = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// add adds a rule with a name derived from hint and returns the name.
func (c *converter) add(hint, body string) string {
	base := strings.Trim(ruleNameBad.ReplaceAllString(hint, "-"), "-")
	if base == "" {
		base = "r"
	}
	name := base
	for i := 1; ; i++ {
		old, taken := c.rules[name]
		if !taken {
			break
		}
		if old == body {
			return name
		}
		name = base + "-" + strconv.Itoa(i)
	}
	c.rules[name] = body
	c.order = append(c.order, name)
	return name
}

func unsupported(path, kw, format string, args ...any) error {
	return &SchemaError{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, args...), Err: ErrUnsupportedSchema}
}

func invalid(path, kw, format string, args ...any) error {
	return &SchemaError{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidSchema}
}

// visit returns a GBNF expression for schema s at path; name hints the
// name of the rule it may create.
func (c *converter) visit(s any, path, name string) (string, error) {
	switch s := s.(type) {
	case bool:
		if !s {
			return "", invalid(path, "", "the false schema matches nothing")
		}
		return c.use("value"), nil
	case *object:
	default:
		return "", invalid(path, "", "a schema must be an object or a boolean, not %s", jsonKind(s))
	}
	o := s.(*object)
	var kws []string
	for _, k := range o.keys {
		if annotations[k] {
			continue
		}
		if !supported[k] {
			return "", unsupported(path, k, "keyword is not supported")
		}
		kws = append(kws, k)
	}
	has := func(k string) bool { _, ok := o.m[k]; return ok }
	others := func(allowed ...string) error {
		for _, k := range kws {
			if !slices.Contains(allowed, k) {
				return k2err(path, k, allowed)
			}
		}
		return nil
	}
	switch {
	case has("$ref"):
		if err := others("$ref"); err != nil {
			return "", err
		}
		return c.ref(o.m["$ref"], path)
	case has("const") || has("enum"):
		kw := "enum"
		vals, ok := o.m["enum"].([]any)
		if has("const") {
			kw, vals, ok = "const", []any{o.m["const"]}, true
		}
		// The values fix the output; "type" may narrow them, other
		// constraints beside them are not checked, so not accepted.
		if err := others(kw, "type"); err != nil {
			return "", err
		}
		if !ok || len(vals) == 0 {
			return "", invalid(path, "enum", "must be a non-empty array")
		}
		var alts []string
		for i, v := range vals {
			if _, typed := o.m["type"]; typed {
				types, err := schemaTypes(o, path)
				if err != nil {
					return "", err
				}
				if !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
					continue
				}
			}
			var buf bytes.Buffer
			if err := encodeCompact(&buf, v); err != nil {
				return "", invalid(fmt.Sprintf("%s/%s/%d", path, kw, i), "", "%v", err)
			}
			alts = append(alts, buf.String())
		}
		if len(alts) == 0 {
			return "", invalid(path, kw, "no value has the schema's type")
		}
		return c.add(name, "("+literalsExpr(alts)+") "+c.use("space")), nil
	case has("anyOf") || has("oneOf"):
		kw := "anyOf"
		if !has(kw) {
			kw = "oneOf"
		}
		if err := others(kw); err != nil {
			return "", err
		}
		subs, ok := o.m[kw].([]any)
		if !ok || len(subs) == 0 {
			return "", invalid(path, kw, "must be a non-empty array")
		}
		var alts []string
		for i, sub := range subs {
			e, err := c.visit(sub, fmt.Sprintf("%s/%s/%d", path, kw, i), fmt.Sprintf("%s-%d", name, i))
			if err != nil {
				return "", err
			}
			alts = append(alts, e)
		}
		return c.add(name, strings.Join(alts, " | ")), nil
	case has("allOf"):
		// A single branch (as older pydantic wraps a $ref) is that branch.
		if subs, ok := o.m["allOf"].([]any); ok && len(subs) == 1 && len(kws) == 1 {
			return c.visit(subs[0], path+"/allOf/0", name)
		}
		return c.allOf(o, path, name)
	}
	types, err := schemaTypes(o, path)
	if err != nil {
		return "", err
	}
	var alts []string
	for _, t := range types {
		hint := name
		if len(types) > 1 {
			hint += "-" + t
		}
		e, err := c.typed(t, o, path, hint)
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.add(name, strings.Join(alts, " | ")), nil
}

// hasType reports whether JSON value v is of JSON Schema type t.
func hasType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case *object:
		return t == "object"
	case json.Number:
		if t == "number" {
			return true
		}
		if t == "integer" {
			f, err := v.Float64()
			return err == nil && f == math.Trunc(f)
		}
	}
	return false
}

func k2err(path, k string, with []string) error {
	return unsupported(path, k, "keyword together with %s is not supported", strings.Join(with, ", "))
}

// schemaTypes lists the types a schema allows: its "type", or what its
// keywords imply, or every type.
func schemaTypes(o *object, path string) ([]string, error) {
	all := []string{"object", "array", "string", "number", "boolean", "null"}
	t, ok := o.m["type"]
	if !ok {
		has := func(ks ...string) bool {
			for _, k := range ks {
				if _, ok := o.m[k]; ok {
					return true
				}
			}
			return false
		}
		switch {
		case has("properties", "required", "additionalProperties"):
			return []string{"object"}, nil
		case has("items", "prefixItems", "minItems", "maxItems"):
			return []string{"array"}, nil
		case has("minLength", "maxLength", "pattern", "format"):
			return []string{"string"}, nil
		case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
			return []string{"number"}, nil
		}
		return all, nil
	}
	var list []string
	switch t := t.(type) {
	case string:
		list = []string{t}
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, invalid(path, "type", "must be a string or an array of strings")
			}
			list = append(list, s)
		}
	default:
		return nil, invalid(path, "type", "must be a string or an array of strings")
	}
	if len(list) == 0 {
		return nil, invalid(path, "type", "empty type array matches nothing")
	}
	for _, s := range list {
		if s != "integer" && !slices.Contains(all, s) {
			return nil, invalid(path, "type", "unknown type %q", s)
		}
	}
	// "integer" is within "number": listing both is just "number".
	if slices.Contains(list, "number") {
		list = slices.DeleteFunc(list, func(s string) bool { return s == "integer" })
	}
	return list, nil
}

func (c *converter) typed(t string, o *object, path, name string) (string, error) {
	switch t {
	case "object":
		return c.object(o, path, name)
	case "array":
		return c.array(o, path, name)
	case "string":
		return c.str(o, path, name)
	case "integer":
		return c.integer(o, path, name)
	case "number":
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := o.m[k]; ok {
				return "", unsupported(path, k, "bounds are supported on integers only, not on numbers")
			}
		}
		return c.use("number"), nil
	case "boolean":
		return c.use("boolean"), nil
	case "null":
		return c.use("null"), nil
	}
	return "", invalid(path, "type", "unknown type %q", t)
}

// ref resolves a local $ref ("#", "#/$defs/x", any JSON pointer into the
// document) to a rule, made once per target so that recursion works.
func (c *converter) ref(v any, path string) (string, error) {
	ref, ok := v.(string)
	if !ok {
		return "", invalid(path, "$ref", "must be a string")
	}
	if name, ok := c.refs[ref]; ok {
		return name, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return "", unsupported(path, "$ref", "only references inside the schema (#...) are supported, not %q", ref)
	}
	target, err := pointer(c.doc, ref[1:])
	if err != nil {
		return "", invalid(path, "$ref", "%q: %v", ref, err)
	}
	hint := ref[strings.LastIndexByte(ref, '/')+1:]
	if hint == "" {
		hint = "root-ref"
	}
	// A placeholder body unique to ref, so that add never merges it with
	// another reference still being built.
	name := c.add("ref-"+hint, "\x00"+ref)
	c.refs[ref] = name
	body, err := c.visit(target, ref[1:], name+"-body")
	if err != nil {
		return "", err
	}
	c.rules[name] = body
	return name, nil
}

// pointer follows a JSON pointer (RFC 6901, URI-fragment form) in doc.
func pointer(doc any, p string) (any, error) {
	if p == "" {
		return doc, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("not a JSON pointer")
	}
	cur := doc
	for _, part := range strings.Split(p[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if u, err := urlUnescape(part); err == nil {
			part = u
		}
		switch x := cur.(type) {
		case *object:
			v, ok := x.m[part]
			if !ok {
				return nil, fmt.Errorf("no %q", part)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no index %q", part)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("no %q", part)
		}
	}
	return cur, nil
}

func urlUnescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s)+0 && i+2 <= len(s)-1 {
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b = append(b, byte(v))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b), nil
}

// literalsExpr is a GBNF expression matching exactly the strings lits,
// factored by common prefix so that a long enum keeps few parse stacks.
func literalsExpr(lits []string) string {
	type tnode struct {
		kids []rune
		next map[rune]*tnode
		end  bool
	}
	root := &tnode{next: map[rune]*tnode{}}
	for _, l := range lits {
		t := root
		for _, r := range l {
			k, ok := t.next[r]
			if !ok {
				k = &tnode{next: map[rune]*tnode{}}
				t.next[r] = k
				t.kids = append(t.kids, r)
			}
			t = k
		}
		t.end = true
	}
	var emit func(t *tnode) string
	emit = func(t *tnode) string {
		var alts []string
		if t.end {
			alts = append(alts, `""`)
		}
		for _, r := range t.kids {
			// Follow a chain of single children into one literal.
			run := []rune{r}
			k := t.next[r]
			for !k.end && len(k.kids) == 1 {
				run = append(run, k.kids[0])
				k = k.next[k.kids[0]]
			}
			rest := ""
			if len(k.kids) > 0 {
				rest = " " + emit(k)
			}
			alts = append(alts, gbnfLiteral(string(run))+rest)
		}
		if len(alts) == 1 {
			return alts[0]
		}
		return "(" + strings.Join(alts, " | ") + ")"
	}
	return emit(root)
}

type prop struct {
	name   string
	schema any
}

func (c *converter) object(o *object, path, name string) (string, error) {
	_, hasProps := o.m["properties"]
	_, hasAdditional := o.m["additionalProperties"]
	_, hasRequired := o.m["required"]
	if !hasProps && !hasAdditional && !hasRequired {
		return c.use("object"), nil // {"type":"object"}: any object
	}
	var props []prop
	if p, ok := o.m["properties"]; ok {
		po, ok := p.(*object)
		if !ok {
			return "", invalid(path, "properties", "must be an object")
		}
		for _, k := range po.keys {
			props = append(props, prop{k, po.m[k]})
		}
	}
	required := map[string]bool{}
	if r, ok := o.m["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return "", invalid(path, "required", "must be an array of strings")
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return "", invalid(path, "required", "must be an array of strings")
			}
			required[s] = true
			if !slices.ContainsFunc(props, func(p prop) bool { return p.name == s }) {
				if o.m["additionalProperties"] == false {
					return "", invalid(path, "required", "property %q is required but additionalProperties is false and it is not in properties", s)
				}
				props = append(props, prop{s, true})
			}
		}
	}
	return c.objectRule(props, required, o.m["additionalProperties"], path, name)
}

// objectRule builds an object of props (required ones first, then the
// optional ones, each in schema order) and, when additional is true or a
// schema, further properties with other names.
func (c *converter) objectRule(props []prop, required map[string]bool, additional any, path, name string) (string, error) {
	type item struct {
		expr string
		kind byte // 'r' required, 'o' optional, '*' repeated
	}
	var items []item
	var names []string
	for _, req := range []bool{true, false} {
		for _, p := range props {
			if required[p.name] != req {
				continue
			}
			v, err := c.visit(p.schema, path+"/properties/"+p.name, name+"-"+p.name)
			if err != nil {
				return "", err
			}
			kv := c.add(name+"-"+p.name+"-kv", gbnfLiteral(jsonString(p.name))+" "+c.use("space")+` ":" `+c.use("space")+" "+v)
			kind := byte('o')
			if req {
				kind = 'r'
			}
			items = append(items, item{kv, kind})
			names = append(names, p.name)
		}
	}
	switch a := additional.(type) {
	case nil, bool:
		if a == true {
			key := c.notNames(names, name)
			kv := c.add(name+"-additional-kv", key+` ":" `+c.use("space")+" "+c.use("value"))
			items = append(items, item{kv, '*'})
		}
	case *object:
		v, err := c.visit(a, path+"/additionalProperties", name+"-additional")
		if err != nil {
			return "", err
		}
		key := c.notNames(names, name)
		kv := c.add(name+"-additional-kv", key+` ":" `+c.use("space")+" "+v)
		items = append(items, item{kv, '*'})
	default:
		return "", invalid(path, "additionalProperties", "must be a boolean or a schema")
	}
	sp := c.use("space")
	comma := `"," ` + sp + " "
	// after[i]: items i.. once something was written (each needs a comma).
	after := make([]string, len(items)+1)
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		var body string
		switch it.kind {
		case 'r':
			body = comma + it.expr + " " + after[i+1]
		case 'o':
			body = "(" + comma + it.expr + ")? " + after[i+1]
		case '*':
			body = "(" + comma + it.expr + ")*"
		}
		after[i] = c.add(fmt.Sprintf("%s-after-%d", name, i), body)
	}
	// first(i): items i.. with nothing written yet.
	var first func(i int) string
	first = func(i int) string {
		if i == len(items) {
			return ""
		}
		it := items[i]
		switch it.kind {
		case 'r':
			return it.expr + " " + after[i+1]
		case 'o':
			rest := first(i + 1)
			if rest == "" {
				return "(" + it.expr + " " + after[i+1] + ")?"
			}
			return "(" + it.expr + " " + after[i+1] + " | " + rest + ")"
		}
		return "(" + it.expr + " " + after[i] + ")?"
	}
	return c.add(name, `"{" `+sp+" "+first(0)+` "}" `+sp), nil
}

// notNames is an expression for a JSON string key (with its quotes and
// trailing space) that is none of names, so that an additional property
// never repeats a listed one. Such keys use no escapes.
func (c *converter) notNames(names []string, hint string) string {
	kc := c.use("keychar")
	sp := c.use("space")
	if len(names) == 0 {
		return `"\"" ` + kc + `* "\"" ` + sp
	}
	type tnode struct {
		kids map[rune]*tnode
		end  bool
	}
	root := &tnode{kids: map[rune]*tnode{}}
	for _, n := range names {
		if strings.ContainsFunc(n, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 || r == 0x7F }) {
			continue // needs an escape: an additional key (no escapes) never spells it
		}
		t := root
		for _, r := range n {
			k, ok := t.kids[r]
			if !ok {
				k = &tnode{kids: map[rune]*tnode{}}
				t.kids[r] = k
			}
			t = k
		}
		t.end = true
	}
	n := 0
	var rule func(t *tnode) string
	rule = func(t *tnode) string {
		n++
		name := fmt.Sprintf("%s-key-%d", hint, n)
		var alts []string
		if !t.end {
			alts = append(alts, `"\""`)
		}
		keys := make([]rune, 0, len(t.kids))
		for r := range t.kids {
			keys = append(keys, r)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		// Any other key character leaves every name behind.
		excl := []cpRange{{'"', '"'}, {'\\', '\\'}, {0, 0x1F}, {0x7F, 0x7F}}
		for _, r := range keys {
			excl = append(excl, cpRange{r, r})
		}
		if cls := classExpr(normalize(excl, true)); cls != "" {
			alts = append(alts, cls+" "+kc+`* "\""`)
		}
		for _, r := range keys {
			alts = append(alts, gbnfLiteral(string(r))+" "+rule(t.kids[r]))
		}
		return c.add(name, strings.Join(alts, " | "))
	}
	return `"\"" ` + rule(root) + " " + sp
}

// classExpr writes normalized ranges as one GBNF character class.
func classExpr(rs []cpRange) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('[')
	for _, x := range rs {
		b.WriteString(classChar(x.lo))
		if x.hi != x.lo {
			b.WriteByte('-')
			b.WriteString(classChar(x.hi))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// allOf merges object schemas (directly or through $ref): their
// properties and required lists.
func (c *converter) allOf(o *object, path, name string) (string, error) {
	subs, ok := o.m["allOf"].([]any)
	if !ok || len(subs) == 0 {
		return "", invalid(path, "allOf", "must be a non-empty array")
	}
	var props []prop
	required := map[string]bool{}
	merge := func(s *object, at string, outer bool) error {
		for _, k := range s.keys {
			if annotations[k] {
				continue
			}
			switch k {
			case "type":
				if s.m[k] != "object" {
					return unsupported(at, "allOf", "only objects can be combined (type %v)", s.m[k])
				}
			case "properties":
				po, ok := s.m[k].(*object)
				if !ok {
					return invalid(at, "properties", "must be an object")
				}
				for _, pk := range po.keys {
					if slices.ContainsFunc(props, func(p prop) bool { return p.name == pk }) {
						return unsupported(at, "allOf", "property %q is defined in more than one branch", pk)
					}
					props = append(props, prop{pk, po.m[pk]})
				}
			case "required":
				list, ok := s.m[k].([]any)
				if !ok {
					return invalid(at, "required", "must be an array of strings")
				}
				for _, x := range list {
					str, ok := x.(string)
					if !ok {
						return invalid(at, "required", "must be an array of strings")
					}
					required[str] = true
				}
			case "additionalProperties":
				// JSON Schema applies it to the properties beside it only,
				// which is rarely what was meant.
				return unsupported(at, "additionalProperties", "together with allOf is not supported")
			case "allOf":
				if !outer {
					return unsupported(at, "allOf", "nested allOf is not supported")
				}
			default:
				return unsupported(at, k, "keyword inside allOf is not supported (only objects with properties, required and additionalProperties combine)")
			}
		}
		return nil
	}
	if err := merge(o, path, true); err != nil {
		return "", err
	}
	for i, sub := range subs {
		at := fmt.Sprintf("%s/allOf/%d", path, i)
		// Follow $refs.
		for hops := 0; ; hops++ {
			so, ok := sub.(*object)
			if !ok {
				return "", unsupported(at, "allOf", "branches must be object schemas")
			}
			r, isRef := so.m["$ref"].(string)
			if !isRef {
				break
			}
			if hops > 32 || !strings.HasPrefix(r, "#") {
				return "", unsupported(at, "$ref", "%q cannot be merged into allOf", r)
			}
			t, err := pointer(c.doc, r[1:])
			if err != nil {
				return "", invalid(at, "$ref", "%q: %v", r, err)
			}
			sub, at = t, r[1:]
		}
		if err := merge(sub.(*object), at, false); err != nil {
			return "", err
		}
	}
	for r := range required {
		if !slices.ContainsFunc(props, func(p prop) bool { return p.name == r }) {
			props = append(props, prop{r, true})
		}
	}
	return c.objectRule(props, required, nil, path, name)
}

func (c *converter) array(o *object, path, name string) (string, error) {
	var prefix []string
	if p, ok := o.m["prefixItems"]; ok {
		list, ok := p.([]any)
		if !ok {
			return "", invalid(path, "prefixItems", "must be an array of schemas")
		}
		for i, s := range list {
			e, err := c.visit(s, fmt.Sprintf("%s/prefixItems/%d", path, i), fmt.Sprintf("%s-%d", name, i))
			if err != nil {
				return "", err
			}
			prefix = append(prefix, e)
		}
	}
	// item: the schema of items past the prefix; "" when there can be none.
	item := ""
	switch it := o.m["items"].(type) {
	case nil:
		if _, ok := o.m["items"]; ok {
			return "", invalid(path, "items", "must be a schema")
		}
		if prefix == nil {
			item = c.use("value")
		}
		// With prefixItems and no items, only the prefix is generated.
	case bool:
		if it {
			item = c.use("value")
		}
	case *object:
		e, err := c.visit(it, path+"/items", name+"-item")
		if err != nil {
			return "", err
		}
		item = e
	default:
		return "", unsupported(path, "items", "an array of schemas (old tuple form) is not supported; use prefixItems")
	}
	minN, err := count(o, "minItems", path)
	if err != nil {
		return "", err
	}
	maxN, err := count(o, "maxItems", path)
	if err != nil {
		return "", err
	}
	if maxN < 0 && item == "" {
		maxN = len(prefix)
	}
	if maxN >= 0 && maxN < minN {
		return "", invalid(path, "maxItems", "is below minItems")
	}
	if item == "" && minN > len(prefix) {
		return "", invalid(path, "minItems", "asks for more items than prefixItems allows")
	}
	if maxN > maxRepeat || minN > maxRepeat {
		return "", unsupported(path, "maxItems", "counts above %d are not supported", maxRepeat)
	}
	sp := c.use("space")
	comma := `"," ` + sp + " "
	at := func(i int) string {
		if i < len(prefix) {
			return prefix[i]
		}
		return item
	}
	// tail(i): items from position i on, i >= 1 written already.
	var tail func(i int) string
	tail = func(i int) string {
		if maxN >= 0 && i >= maxN {
			return ""
		}
		if i >= len(prefix) {
			if item == "" {
				return ""
			}
			lo := max(minN-i, 0)
			hi := "" // unbounded
			if maxN >= 0 {
				hi = strconv.Itoa(maxN - i)
			}
			return "(" + comma + item + "){" + strconv.Itoa(lo) + "," + hi + "}"
		}
		e := comma + at(i) + " " + tail(i+1)
		if i < minN {
			return e
		}
		return "(" + e + ")?"
	}
	body := `"[" ` + sp + " "
	switch {
	case maxN == 0:
	case minN > 0:
		body += at(0) + " " + tail(1) + " "
	default:
		body += "(" + at(0) + " " + tail(1) + ")? "
	}
	return c.add(name, body+`"]" `+sp), nil
}

// count reads a non-negative integer keyword (-1 when absent).
func count(o *object, kw, path string) (int, error) {
	v, ok := o.m[kw]
	if !ok {
		return -1, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, invalid(path, kw, "must be a non-negative integer")
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || i < 0 {
		f, ferr := n.Float64()
		if ferr != nil || f < 0 || f != math.Trunc(f) {
			return 0, invalid(path, kw, "must be a non-negative integer")
		}
		i = int64(f)
	}
	if i > math.MaxInt32 {
		i = math.MaxInt32
	}
	return int(i), nil
}

func (c *converter) str(o *object, path, name string) (string, error) {
	minN, err := count(o, "minLength", path)
	if err != nil {
		return "", err
	}
	maxN, err := count(o, "maxLength", path)
	if err != nil {
		return "", err
	}
	pat, hasPat := o.m["pattern"]
	fmtv, hasFmt := o.m["format"]
	sp := c.use("space")
	if hasPat || hasFmt {
		if minN >= 0 || maxN >= 0 {
			kw := "minLength"
			if minN < 0 {
				kw = "maxLength"
			}
			return "", unsupported(path, kw, "together with pattern or format is not supported")
		}
		if hasPat && hasFmt {
			return "", unsupported(path, "format", "together with pattern is not supported")
		}
	}
	if hasPat {
		p, ok := pat.(string)
		if !ok {
			return "", invalid(path, "pattern", "must be a string")
		}
		e, err := patternExpr(p, c.use("char"))
		if err != nil {
			return "", unsupported(path, "pattern", "%v", err)
		}
		return c.add(name, `"\"" `+e+` "\"" `+sp), nil
	}
	if hasFmt {
		f, _ := fmtv.(string)
		var body string
		switch f {
		case "date":
			body = c.use("date-fmt")
		case "time":
			body = c.use("time-fmt")
		case "date-time":
			body = c.use("date-fmt") + ` "T" ` + c.use("time-fmt")
		case "uuid":
			body = c.use("uuid-fmt")
		default:
			return "", unsupported(path, "format", "format %q is not supported (supported: date, time, date-time, uuid)", fmtv)
		}
		return c.add(name, `"\"" `+body+` "\"" `+sp), nil
	}
	if minN < 0 && maxN < 0 {
		return c.use("string"), nil
	}
	if maxN >= 0 && maxN < max(minN, 0) {
		return "", invalid(path, "maxLength", "is below minLength")
	}
	if maxN > maxRepeat || minN > maxRepeat {
		return "", unsupported(path, "maxLength", "lengths above %d are not supported", maxRepeat)
	}
	rep := "{" + strconv.Itoa(max(minN, 0)) + ","
	if maxN >= 0 {
		rep += strconv.Itoa(maxN)
	}
	rep += "}"
	return c.add(name, `"\"" `+c.use("char")+rep+` "\"" `+sp), nil
}

func (c *converter) integer(o *object, path, name string) (string, error) {
	limit := int64(math.Pow10(maxIntDigits)) - 1
	lo, hi := -limit, limit
	bounded := false
	for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := o.m[kw]
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			if _, isBool := v.(bool); isBool {
				return "", unsupported(path, kw, "the draft-04 boolean form is not supported; give the bound as a number")
			}
			return "", invalid(path, kw, "must be a number")
		}
		f, err := n.Float64()
		if err != nil {
			return "", invalid(path, kw, "must be a number")
		}
		bounded = true
		switch kw {
		case "minimum":
			lo = max(lo, clampInt(math.Ceil(f), limit))
		case "exclusiveMinimum":
			lo = max(lo, clampInt(math.Floor(f)+1, limit))
		case "maximum":
			hi = min(hi, clampInt(math.Floor(f), limit))
		case "exclusiveMaximum":
			hi = min(hi, clampInt(math.Ceil(f)-1, limit))
		}
	}
	if !bounded {
		return c.use("integer"), nil
	}
	if lo > hi {
		return "", invalid(path, "minimum", "no integer lies within the bounds")
	}
	return c.add(name, "("+intRange(lo, hi)+") "+c.use("space")), nil
}

func clampInt(f float64, limit int64) int64 {
	l := float64(limit)
	return int64(max(min(f, l+1), -l-1))
}

// intRange is a GBNF expression for the decimal integers lo..hi, exactly.
func intRange(lo, hi int64) string {
	var alts []string
	if lo < 0 {
		nhi := min(hi, -1)
		alts = append(alts, `"-" (`+posRange(-nhi, -lo)+")")
	}
	if lo <= 0 && hi >= 0 {
		alts = append(alts, `"0"`)
	}
	if hi > 0 {
		alts = append(alts, posRange(max(lo, 1), hi))
	}
	return strings.Join(alts, " | ")
}

// posRange covers a..b (1 <= a <= b) one digit count at a time.
func posRange(a, b int64) string {
	var alts []string
	da, db := len(strconv.FormatInt(a, 10)), len(strconv.FormatInt(b, 10))
	for l := da; l <= db; l++ {
		lo, hi := max(a, pow10(l-1)), min(b, pow10(l)-1)
		alts = append(alts, sameLen(strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)))
	}
	return strings.Join(alts, " | ")
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// sameLen covers the digit strings x..y of one length, x <= y.
func sameLen(x, y string) string {
	if x == y {
		return `"` + x + `"`
	}
	if x[0] == y[0] {
		return `"` + x[:1] + `" (` + sameLen(x[1:], y[1:]) + ")"
	}
	rest := len(x) - 1
	anyRest := ""
	if rest > 0 {
		anyRest = " [0-9]{" + strconv.Itoa(rest) + "}"
	}
	var alts []string
	lowStart, highEnd := x[0], y[0]
	if strings.Trim(x[1:], "0") != "" {
		alts = append(alts, `"`+x[:1]+`" (`+sameLen(x[1:], strings.Repeat("9", rest))+")")
		lowStart++
	}
	var tailAlt string
	if strings.Trim(y[1:], "9") != "" {
		tailAlt = `"` + y[:1] + `" (` + sameLen(strings.Repeat("0", rest), y[1:]) + ")"
		highEnd--
	}
	if lowStart <= highEnd {
		alts = append(alts, "["+string(lowStart)+"-"+string(highEnd)+"]"+anyRest)
	}
	if tailAlt != "" {
		alts = append(alts, tailAlt)
	}
	return strings.Join(alts, " | ")
}
