package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// testVocab is a synthetic vocabulary: EOS (0), BOS (1), every single
// byte, and multi-byte tokens that cross JSON structure, split UTF-8
// characters, or hold escapes.
func testVocab(t testing.TB) *Vocab {
	t.Helper()
	pieces := [][]byte{[]byte("</s>"), []byte("<s>")}
	special := []bool{true, true}
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
		special = append(special, false)
	}
	for _, s := range []string{
		`{"`, `"}`, `":`, `", "`, `": "`, `":"`, `,"`, ` "`, `"`, `true`, `false`, `null`, `nul`, `l,`,
		`12`, `345`, `-1`, `.5`, `e+`, `0.`, `00`, `9,`, `1}`, `]}`, `[{`, `},{`, `"]`, `["`, `[]`, `{}`,
		"é", "日本", "\xe6\x97", "\xa5", "\xe6", `\n`, `\"`, `\\`, `\u00e9`, `\u`, `name`, `"name"`, `abc`,
		`Hello`, ` world`, `2024-`, `-02-`, `T12:`, `:00Z`, `:00`, `-4`, "\n  ", "  ", "\n",
		`id`, `tags`, `red`, `green`, `"red"`, `AB-`, `123`, `x`, `ab`, `cd`, `😀`,
	} {
		pieces = append(pieces, []byte(s))
		special = append(special, false)
	}
	v, err := NewVocab(pieces, special, 0)
	require.NoError(t, err)
	return v
}

// closers are the pieces a long random walk prefers, so that strings,
// arrays and objects end.
var closers = map[string]bool{`"`: true, `}`: true, `]`: true, `"}`: true, `]}`: true, `"]`: true}

// randomWalk generates one sentence of g by choosing random allowed
// tokens, ending with EOS where allowed. It checks that every token the
// mask allows is accepted.
func randomWalk(t *testing.T, g *Grammar, v *Vocab, rng *rand.Rand) []byte {
	t.Helper()
	m := NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	var out []byte
	var allowed []int
	for step := 0; ; step++ {
		require.Less(t, step, 5000, "walk did not end: %q", out)
		require.NoError(t, m.Allowed(mask), "after %q", out)
		allowed = allowed[:0]
		for id := range v.Size() {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				allowed = append(allowed, id)
			}
		}
		require.NotEmpty(t, allowed)
		eosOK := mask[0]&1 != 0
		require.Equal(t, m.CanEnd(), eosOK)
		if eosOK && (rng.Float64() < 0.3 || step > 60 || len(allowed) == 1) {
			require.NoError(t, m.Accept(0))
			require.True(t, m.Done())
			return out
		}
		id := 0
		if step > 40 && rng.Float64() < 0.8 {
			for _, a := range allowed {
				if closers[string(v.pieces[a])] {
					id = a
					break
				}
			}
		}
		for id == 0 {
			id = allowed[rng.IntN(len(allowed))]
		}
		require.NoError(t, m.Accept(id), "token %q after %q", v.pieces[id], out)
		out = append(out, v.pieces[id]...)
	}
}

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	return s
}

var schemaCases = []struct {
	name    string
	schema  string
	valid   []string // must be accepted by the matcher
	invalid []string // must be rejected
}{
	{"string", `{"type":"string"}`, []string{`"abc"`, `"a\"b\\c\n\u00e9"`, `"日本"`}, []string{`abc`, `"a`, `"\x"`, "\"a\nb\""}},
	{"integer", `{"type":"integer"}`, []string{`0`, `-12`, `123456789012345`}, []string{`01`, `1.5`, `1234567890123456`, `-`}},
	{"number", `{"type":"number"}`, []string{`0`, `-1.25`, `3e10`, `2.5E-3`}, []string{`.5`, `1.`, `+1`, `1e`}},
	{"boolean and null", `{"type":["boolean","null"]}`, []string{`true`, `false`, `null`}, []string{`0`, `"true"`}},
	{"flat object", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false}`,
		[]string{`{"name":"x","age":3}`, `{ "name": "x", "age": 3, "ok": true }`}, []string{`{"age":3,"name":"x"}`, `{"name":"x"}`, `{"name":"x","age":3,"zz":1}`}},
	{"optional only", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"null"}}}`,
		[]string{`{}`, `{"b":"x"}`, `{"a":1,"c":null}`, `{"a":1,"b":"","c":null}`}, []string{`{,}`, `{"c":null,"a":1}`, `{"a":1,}`}},
	{"nested with arrays", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},"required":["id","tags"]},"minItems":1,"maxItems":4}},"required":["items"]}`,
		[]string{`{"items":[{"id":1,"tags":[]}]}`}, []string{`{"items":[]}`, `{"items":[{"id":0,"tags":[]}]}`, `{"items":[{"id":1,"tags":["a","b","c","d"]}]}`}},
	{"enum heavy", `{"type":"object","properties":{"color":{"enum":["red","green","blue","cyan","magenta","yellow","black","white"]},"size":{"enum":["S","M","L","XL",1,2,null,true]},"kind":{"const":"shirt"}},"required":["color","size","kind"]}`,
		[]string{`{"color":"red","size":"XL","kind":"shirt"}`, `{"color":"blue","size":null,"kind":"shirt"}`}, []string{`{"color":"pink","size":"S","kind":"shirt"}`, `{"color":"red","size":3,"kind":"shirt"}`}},
	{"anyOf", `{"anyOf":[{"type":"integer"},{"type":"string","minLength":2}]}`, []string{`5`, `"ab"`}, []string{`"a"`, `true`}},
	{"oneOf disjoint", `{"oneOf":[{"type":"object","properties":{"cat":{"const":true}},"required":["cat"],"additionalProperties":false},{"type":"array","maxItems":1,"items":{"type":"null"}}]}`, []string{`{"cat":true}`, `[null]`, `[]`}, []string{`[null,null]`}},
	{"allOf of objects", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"$ref":"#/$defs/b"}],"$defs":{"b":{"properties":{"b":{"type":"string"}},"required":["b"]}}}`,
		[]string{`{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`}, []string{`{"a":1}`, `{"b":"x"}`, `{"a":"1","b":"x"}`}},
	{"recursive ref", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		[]string{`{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}`}, []string{`{"v":1,"kids":[{"w":2}]}`}},
	{"definitions", `{"definitions":{"p":{"type":"integer","minimum":0}},"type":"array","items":{"$ref":"#/definitions/p"}}`, []string{`[1,2]`, `[]`}, []string{`[-1]`}},
	{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":{"type":"boolean"},"minItems":2,"maxItems":4}`,
		[]string{`["a",1]`, `["a",1,true,false]`}, []string{`["a"]`, `[1,"a"]`, `["a",1,true,false,true]`}},
	{"tuple only", `{"type":"array","prefixItems":[{"type":"string"},{"type":"null"}]}`, []string{`[]`, `["x"]`, `["x",null]`}, []string{`["x",null,1]`}},
	{"string lengths", `{"type":"string","minLength":2,"maxLength":4}`, []string{`"ab"`, `"日本語!"`, `"\n\n"`}, []string{`"a"`, `"abcde"`}},
	{"pattern", `{"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|y)?$"}`, []string{`"AB-123"`, `"ZZ-000y"`}, []string{`"AB-12"`, `"ab-123"`, `"AB-123z"`}},
	{"pattern unanchored", `{"type":"string","pattern":"a+b"}`, []string{`"xxab"`, `"aab"`, `"ab!"`}, []string{`"ba"`}},
	{"pattern escapes", `{"type":"string","pattern":"^[\"\\\\ ]+\\.\\w*[^a-z]?$"}`, []string{`"\"\\ .x_9"`, `" .A"`}, []string{`"a."`}},
	{"pattern dot and quantifiers", `{"type":"string","pattern":"^(?:ab|c.){1,2}d*?$"}`, []string{`"ab"`, `"cxab"`, `"abcédd"`}, []string{`""`, `"ababab"`}},
	{"date", `{"type":"string","format":"date"}`, []string{`"2024-02-29"`, `"1999-12-31"`}, []string{`"2024-02-30"`, `"2024-04-31"`, `"2024-13-01"`}},
	{"time", `{"type":"string","format":"time"}`, []string{`"12:00:00Z"`, `"23:59:59.5+02:00"`}, []string{`"24:00:00Z"`, `"12:00:00"`}},
	{"date-time", `{"type":"string","format":"date-time"}`, []string{`"2024-01-02T03:04:05Z"`}, []string{`"2024-01-02 03:04:05Z"`}},
	{"uuid", `{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
	{"integer bounds", `{"type":"integer","minimum":-15,"exclusiveMaximum":250}`, []string{`-15`, `0`, `249`, `7`}, []string{`-16`, `250`, `1000`}},
	{"integer exclusive", `{"type":"integer","exclusiveMinimum":99,"maximum":1000000}`, []string{`100`, `1000000`, `54321`}, []string{`99`, `1000001`, `0`}},
	{"integer min only", `{"type":"integer","minimum":7}`, []string{`7`, `999999999999999`}, []string{`6`, `-1`, `1000000000000000`}},
	{"additionalProperties schema", `{"type":"object","properties":{"name":{"type":"string"}},"additionalProperties":{"type":"integer"}}`,
		[]string{`{"name":"x","n":1}`, `{"x":1,"y":2}`, `{"nam":3}`, `{"names":3}`}, []string{`{"name":"x","name":1}`, `{"k":"v"}`}},
	{"additionalProperties true", `{"type":"object","additionalProperties":true}`, []string{`{}`, `{"a":[1,{"b":null}]}`}, []string{`[]`}},
	{"type array", `{"type":["string","integer","null"]}`, []string{`"a"`, `1`, `null`}, []string{`1.5`, `true`}},
	{"empty schema", `{}`, []string{`{"a":[true]}`, `1.5`, `"s"`}, []string{`tru`}},
	{"unicode const", `{"const":{"名前":"é","n":[1,null]}}`, []string{`{"名前":"é","n":[1,null]}`}, []string{`{"n":[1,null],"名前":"é"}`}},
	{"enum with type", `{"type":"string","enum":["a",1,"b",null]}`, []string{`"a"`, `"b"`}, []string{`1`, `null`}},
	{"allOf single ref", `{"$defs":{"c":{"enum":["x","y"]}},"properties":{"c":{"allOf":[{"$ref":"#/$defs/c"}],"description":"d"}},"required":["c"]}`, []string{`{"c":"x"}`}, []string{`{"c":"z"}`}},
	{"odd property names", `{"type":"object","properties":{"q\"k\\":{"type":"integer"},"日本":{"type":"null"}},"required":["q\"k\\"],"additionalProperties":{"type":"boolean"}}`,
		[]string{`{"q\"k\\":1}`, `{"q\"k\\":1,"日本":null,"x":true}`, `{"q\"k\\":1,"q":false}`}, []string{`{"q\"k\\":1,"日本":true}`, `{}`, `{"q\"k\\":1,"q"":true}`}},
	{"annotations", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t","description":"d","examples":[1],"default":1,"$comment":"c","type":"integer"}`, []string{`1`}, []string{`"1"`}},
}

func TestJSONSchemaRandomWalks(t *testing.T) {
	v := testVocab(t)
	for i, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, err := FromJSONSchema([]byte(c.schema))
			require.NoError(t, err)
			validator := compileSchema(t, c.schema)
			for _, s := range c.valid {
				require.NoError(t, validator.Validate(mustJSON(t, s)), "test case itself: %s", s)
				require.True(t, matches(g, s), "should accept %s\n%s", s, g)
			}
			for _, s := range c.invalid {
				require.False(t, matches(g, s), "should reject %s\n%s", s, g)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for range 40 {
				out := randomWalk(t, g, v, rng)
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
				require.NoError(t, err, "not JSON: %q", out)
				require.NoError(t, validator.Validate(inst), "%q", out)
			}
		})
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	require.NoError(t, err, s)
	return v
}

// TestFormatsRandomWalks checks the generated dates and times with the
// standard library's calendar rules, beyond the validator's defaults.
func TestFormatsRandomWalks(t *testing.T) {
	v := testVocab(t)
	cases := map[string]*regexp.Regexp{
		"date":      regexp.MustCompile(`^"\d{4}-\d\d-\d\d"\s*$`),
		"time":      regexp.MustCompile(`^"\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)"\s*$`),
		"date-time": regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)"\s*$`),
		"uuid":      regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"\s*$`),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for f, re := range cases {
		g, err := FromJSONSchema([]byte(`{"type":"string","format":"` + f + `"}`))
		require.NoError(t, err)
		for range 30 {
			out := randomWalk(t, g, v, rng)
			require.Regexp(t, re, string(out))
		}
	}
}

func TestJSONObjectMode(t *testing.T) {
	g, err := Parse(JSONObjectGBNF())
	require.NoError(t, err)
	for _, s := range []string{`{}`, `{"a":1}`, `{ "a" : [ 1, 2.5, "x", null, true, { "b": {} } ] }`} {
		require.True(t, matches(g, s), s)
	}
	for _, s := range []string{`[]`, `1`, `"x"`, `{"a"}`, `{"a":1,}`, "{" + strings.Repeat(" ", 30) + "}"} {
		require.False(t, matches(g, s), s)
	}
	v := testVocab(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 30 {
		out := randomWalk(t, g, v, rng)
		var obj map[string]any
		require.NoError(t, json.Unmarshal(out, &obj), "%q", out)
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	cases := []struct {
		schema   string
		want     string
		sentinel error
	}{
		{`{"type":"string","minLength":1,"not":{"const":"x"}}`, `grammar: JSON Schema at /: not: keyword is not supported`, ErrUnsupportedSchema},
		{`{"properties":{"a":{"type":"integer","multipleOf":2}}}`, `grammar: JSON Schema at /properties/a: multipleOf: keyword is not supported`, ErrUnsupportedSchema},
		{`{"type":"object","minProperties":1}`, `grammar: JSON Schema at /: minProperties: keyword is not supported`, ErrUnsupportedSchema},
		{`{"type":"array","uniqueItems":true}`, `grammar: JSON Schema at /: uniqueItems: keyword is not supported`, ErrUnsupportedSchema},
		{`{"type":"string","format":"email"}`, `grammar: JSON Schema at /: format: format "email" is not supported (supported: date, time, date-time, uuid)`, ErrUnsupportedSchema},
		{`{"type":"number","minimum":0}`, `grammar: JSON Schema at /: minimum: bounds are supported on integers only, not on numbers`, ErrUnsupportedSchema},
		{`{"$ref":"https://example.com/s.json"}`, `grammar: JSON Schema at /: $ref: only references inside the schema (#...) are supported, not "https://example.com/s.json"`, ErrUnsupportedSchema},
		{`{"$ref":"#/$defs/missing"}`, `grammar: JSON Schema at /: $ref: "#/$defs/missing": no "$defs"`, ErrInvalidSchema},
		{`{"type":"string","pattern":"(a)\\1"}`, "", ErrUnsupportedSchema},
		{`{"type":"string","pattern":"(?=a)"}`, "", ErrUnsupportedSchema},
		{`{"type":"string","pattern":"a^b"}`, "", ErrUnsupportedSchema},
		{`{"type":"integer","minimum":5,"maximum":4}`, `grammar: JSON Schema at /: minimum: no integer lies within the bounds`, ErrInvalidSchema},
		{`{"type":"integer","exclusiveMinimum":true}`, "", ErrUnsupportedSchema},
		{`{"type":"strin"}`, `grammar: JSON Schema at /: type: unknown type "strin"`, ErrInvalidSchema},
		{`{"anyOf":[]}`, `grammar: JSON Schema at /: anyOf: must be a non-empty array`, ErrInvalidSchema},
		{`{"type":"object","anyOf":[{"required":["a"]}]}`, `grammar: JSON Schema at /: type: keyword together with anyOf is not supported`, ErrUnsupportedSchema},
		{`{"allOf":[{"type":"string"},{"maxLength":3}]}`, "", ErrUnsupportedSchema},
		{`false`, `grammar: JSON Schema at /: the false schema matches nothing`, ErrInvalidSchema},
		{`{"type":"array","items":[{"type":"string"}]}`, "", ErrUnsupportedSchema},
		{`{"type":"array","minItems":3,"maxItems":2}`, "", ErrInvalidSchema},
		{`{"type":"string","pattern":"a","maxLength":3}`, "", ErrUnsupportedSchema},
		{`{"if":{},"then":{}}`, `grammar: JSON Schema at /: if: keyword is not supported`, ErrUnsupportedSchema},
		{`{"type":`, "", ErrInvalidSchema},
		{`{"enum":["a","bb"],"minLength":2}`, `grammar: JSON Schema at /: minLength: keyword together with enum, type is not supported`, ErrUnsupportedSchema},
		{`{"type":"integer","const":"x"}`, `grammar: JSON Schema at /: const: no value has the schema's type`, ErrInvalidSchema},
		{`{"properties":{"a":{}},"required":["b"],"additionalProperties":false}`, `grammar: JSON Schema at /: required: property "b" is required but additionalProperties is false and it is not in properties`, ErrInvalidSchema},
		{`[1]`, "", ErrInvalidSchema},
	}
	for _, c := range cases {
		t.Run(c.schema, func(t *testing.T) {
			_, err := FromJSONSchema([]byte(c.schema))
			require.Error(t, err)
			require.True(t, errors.Is(err, c.sentinel), "%v", err)
			var se *SchemaError
			require.ErrorAs(t, err, &se)
			if c.want != "" {
				require.Equal(t, c.want, err.Error())
			}
		})
	}
}

func TestIntRangeExact(t *testing.T) {
	bounds := [][2]int64{{0, 0}, {1, 9}, {5, 5}, {-9, 9}, {-123, -7}, {10, 99}, {7, 1234}, {-1000, 1000}, {38, 412}, {99, 101}, {100, 199}, {0, 100000}}
	for _, b := range bounds {
		g, err := Parse("root ::= " + intRange(b[0], b[1]))
		require.NoError(t, err, intRange(b[0], b[1]))
		for n := b[0] - 30; n <= b[1]+30; n++ {
			if n > b[0]+2000 && n < b[1]-2000 {
				continue
			}
			s := strings.TrimSpace(strings.ReplaceAll(jsonNumber(n), " ", ""))
			require.Equal(t, n >= b[0] && n <= b[1], matches(g, s), "%d in [%d,%d]", n, b[0], b[1])
		}
		require.False(t, matches(g, "0"+jsonNumber(b[1])), "leading zero")
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

func jsonUnmarshal(b []byte) (any, error) { return jsonschema.UnmarshalJSON(bytes.NewReader(b)) }

// TestLargeEnum: the values are factored by prefix, exactly.
func TestLargeEnum(t *testing.T) {
	var vals []string
	for i := range 2000 {
		vals = append(vals, fmt.Sprintf(`"v_%d"`, i*7919%100000))
	}
	vals = append(vals, `"v_"`, `"é"`, `"éa"`, `12`, `null`)
	schema := `{"enum":[` + strings.Join(vals, ",") + `]}`
	g, err := FromJSONSchema([]byte(schema))
	require.NoError(t, err)
	for _, v := range vals {
		require.True(t, matches(g, v), v)
	}
	for _, v := range []string{`"v_1"`, `"v_79"`, `"v_79190x"`, `"v"`, `"éb"`, `1`, `"null"`} {
		require.False(t, matches(g, v), v)
	}
	// Few parse stacks where the values part.
	m := NewMatcher(g, nil)
	require.NoError(t, m.AcceptBytes([]byte(`"v_`)))
	require.Less(t, len(m.tops), 20)
	validator := compileSchema(t, schema)
	v := testVocab(t)
	rng := rand.New(rand.NewPCG(8, 8))
	for range 20 {
		out := randomWalk(t, g, v, rng)
		inst, err := jsonUnmarshal(out)
		require.NoError(t, err, "%q", out)
		require.NoError(t, validator.Validate(inst), "%q", out)
	}
}
