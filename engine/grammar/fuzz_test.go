package grammar

import (
	"errors"
	"testing"
)

// FuzzParse: any text either compiles or gives ErrInvalidGrammar, and a
// compiled grammar can be matched without a panic, as bytes and as tokens
// of a vocabulary with control tokens (token references).
func FuzzParse(f *testing.F) {
	v := ctlVocab(f)
	mask := make([]uint64, v.MaskWords())
	for _, s := range []string{
		`root ::= "a" [b-d]* ("e" | f){2,3}` + "\nf ::= [^x] .",
		`root ::= ( "a"` + "\n | \"b\" ) # c",
		`root ::= "\u00e9\U0001F600\x41" [\]\-]? x`,
		`root ::= r` + "\nr ::= r \"a\"",
		"root ::= [",
		`root ::= <[1]> "[" (!<[3]>)* <|python_tag|> <[2]>?`,
		"root ::= !<think",
		JSONObjectGBNF(),
	} {
		f.Add(s, []byte(`{"a": 1}`))
	}
	f.Fuzz(func(t *testing.T, src string, input []byte) {
		g, err := Parse(src)
		if err != nil {
			if !errors.Is(err, ErrInvalidGrammar) {
				t.Fatalf("error does not wrap ErrInvalidGrammar: %v", err)
			}
			return
		}
		m := NewMatcher(g, nil)
		for i := range input {
			if m.AcceptBytes(input[i:i+1]) != nil {
				break
			}
		}
		m.CanEnd()
		if g.CheckVocab(v) != nil {
			return
		}
		m = NewMatcher(g, v)
		for _, c := range input {
			if m.Allowed(mask) != nil || m.Accept(int(c)%v.Size()) != nil {
				break
			}
		}
	})
}

// FuzzJSONSchema: any document either converts or gives a *SchemaError.
func FuzzJSONSchema(f *testing.F) {
	for _, c := range schemaCases {
		f.Add(c.schema)
	}
	f.Add(`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`)
	f.Add(`{"type":"string","pattern":"^(a|[b-\\d]{2,}?)+$"}`)
	f.Fuzz(func(t *testing.T, schema string) {
		_, err := FromJSONSchema([]byte(schema))
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("not a *SchemaError: %v", err)
			}
		}
	})
}
