package grammar

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// matches reports whether the whole of s is a sentence of g.
func matches(g *Grammar, s string) bool {
	m := NewMatcher(g, nil)
	return m.AcceptBytes([]byte(s)) == nil && m.CanEnd()
}

func TestParseAndMatch(t *testing.T) {
	cases := []struct {
		name   string
		gbnf   string
		accept []string
		reject []string
	}{
		{"literal", `root ::= "abc"`, []string{"abc"}, []string{"", "ab", "abcd", "abd"}},
		{"alternation", `root ::= "a" | "bc" | ""`, []string{"a", "bc", ""}, []string{"b", "ab"}},
		{"grouping", `root ::= ("a" | "b") "c"`, []string{"ac", "bc"}, []string{"c", "abc"}},
		{"star", `root ::= "a"*`, []string{"", "a", "aaaa"}, []string{"b"}},
		{"plus", `root ::= "ab"+`, []string{"ab", "abab"}, []string{"", "aba"}},
		{"optional", `root ::= "a" "b"?`, []string{"a", "ab"}, []string{"b", "abb"}},
		{"exact count", `root ::= [0-9]{3}`, []string{"123"}, []string{"12", "1234"}},
		{"at least", `root ::= "x"{2,}`, []string{"xx", "xxxxx"}, []string{"x"}},
		{"between", `root ::= "x"{1,3}`, []string{"x", "xx", "xxx"}, []string{"", "xxxx"}},
		{"zero to n", `root ::= "x"{0,2} "y"`, []string{"y", "xy", "xxy"}, []string{"xxxy"}},
		{"class ranges", `root ::= [a-cx-z_]+`, []string{"abz_", "y"}, []string{"d", "A"}},
		{"negated class", `root ::= [^a-c]`, []string{"d", "é", "日", "😀", "\n"}, []string{"a", "", "dd"}},
		{"class escapes", `root ::= [\]\[\-\\\n\x41\u00e9]+`, []string{"]", "[", "-", "\\", "\n", "A", "é"}, []string{"B"}},
		{"literal escapes", `root ::= "\"\\\n\t\r\x41\u00e9\U0001F600"`, []string{"\"\\\n\t\rAé😀"}, []string{"x"}},
		{"any char", `root ::= . .`, []string{"ab", "é日", "\n😀"}, []string{"a", "abc"}},
		{"comments and newlines", "# a comment\nroot ::= ( # inside\n  \"a\"\n  | \"b\" # tail\n) x\nx ::= \"!\" # end", []string{"a!", "b!"}, []string{"a"}},
		{"continuation line", "root ::= \"a\"\n  | \"b\"\n", []string{"a", "b"}, []string{"ab"}},
		{"recursion", `root ::= "(" root ")" | ""`, []string{"", "()", "((()))"}, []string{"(()", ")("}},
		{"right recursion", `root ::= "a" root | "b"`, []string{"b", "aab"}, []string{"a", "ba"}},
		{"rule names", `root ::= my-rule_2
my-rule_2 ::= "z"`, []string{"z"}, []string{""}},
		{"nested repetition", `root ::= ("a" [0-9]?)* "."`, []string{".", "a.", "a1a2a.", "aa."}, []string{"1."}},
		{"utf8 ranges", `root ::= [\u0400-\u04FF\u4e00-\u9fff]+`, []string{"Жж", "日本"}, []string{"é", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse(c.gbnf)
			require.NoError(t, err)
			for _, s := range c.accept {
				require.True(t, matches(g, s), "should accept %q", s)
			}
			for _, s := range c.reject {
				require.False(t, matches(g, s), "should reject %q", s)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		gbnf string
		want string
	}{
		{"", "grammar: empty grammar"},
		{"# only a comment\n", "grammar: empty grammar"},
		{`a ::= "x"`, "grammar: no root rule"},
		{"root ::= b\n\nb ::= \"x\"\nc ::=  foo", `grammar: line 4, column 8: undefined rule "foo"`},
		{"root ::= \"abc", "grammar: line 1, column 10: unterminated string literal"},
		{"root ::= [abc", "grammar: line 1, column 10: unclosed character class"},
		{"root ::= (\"a\"", "grammar: line 1, column 10: unclosed ("},
		{"root ::= \"a\")", "grammar: line 1, column 13: unexpected )"},
		{"root ::= *", "grammar: line 1, column 10: * must follow an item"},
		{"root ::= \"a\"{3,1}", "grammar: line 1, column 13: repetition {3,1} has max below min"},
		{"root ::= \"a\"{2", "grammar: line 1, column 13: unclosed {"},
		{"root ::= \"a\"{99999}", "grammar: line 1, column 14: repetition count 99999 exceeds 10000"},
		{"root \"a\"", "grammar: line 1, column 6: expected ::= after rule name \"root\""},
		{"root ::= \"\\q\"", `grammar: line 1, column 11: unknown escape \q`},
		{"root ::= \"\\x4\"", `grammar: line 1, column 11: escape \x needs 2 hex digits`},
		{"root ::= [z-a]", `grammar: line 1, column 12: range 'z'-'a' is reversed`},
		{"root ::= \"a\"\nroot ::= \"b\"", `grammar: line 2, column 1: rule "root" defined twice (first at line 1)`},
		{"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", `grammar: line 2, column 1: rule "expr" is left-recursive (it can reach itself without consuming input)`},
		{"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"", `grammar: line 2, column 1: rule "a" is left-recursive (it can reach itself without consuming input)`},
		{"root ::= (\"a\"?)*", `grammar: line 1, column 10: rule "root" is left-recursive (it can reach itself without consuming input)`},
		{"root ::= <[1000", "grammar: line 1, column 10: token reference <[...]> needs a token id (digits) and ]>"},
		{"root ::= <think", "grammar: line 1, column 10: unclosed token reference (<text> ends at >, on the same line)"},
		{"root ::= !\"a\"", "grammar: line 1, column 10: ! must be followed by a token reference <...>"},
		{"root ::= <>", "grammar: line 1, column 10: empty token reference <>"},
		{"root ::= <[99999999999]>", "grammar: line 1, column 12: token id 99999999999 exceeds 2147483647"},
		{"root ::= \"a\" @", `grammar: line 1, column 14: unexpected "@"`},
		{"root ::= " + strings.Repeat(`"a"{10000} `, 300), "grammar: grammar too large (more than 2097152 elements after expanding repetitions)"},
		{"root ::= \"a\"\n ::= \"b\"", `grammar: line 2, column 2: expected a rule name, found ":"`},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			_, err := Parse(c.gbnf)
			require.Error(t, err)
			require.Equal(t, c.want, err.Error())
			require.True(t, errors.Is(err, ErrInvalidGrammar))
		})
	}
}

func TestMatcherCloneIndependent(t *testing.T) {
	g, err := Parse(`root ::= "a" ("b" | "c")`)
	require.NoError(t, err)
	m := NewMatcher(g, nil)
	require.NoError(t, m.AcceptBytes([]byte("a")))
	c := m.Clone()
	require.NoError(t, m.AcceptBytes([]byte("b")))
	require.True(t, m.CanEnd())
	require.False(t, c.CanEnd())
	require.NoError(t, c.AcceptBytes([]byte("c")))
	require.True(t, c.CanEnd())
	// A rejected byte string leaves the matcher as it was.
	require.ErrorIs(t, c.AcceptBytes([]byte("x")), ErrTokenRejected)
	require.True(t, c.CanEnd())
}

func TestMatcherWithoutVocab(t *testing.T) {
	g, err := Parse(`root ::= "a"`)
	require.NoError(t, err)
	m := NewMatcher(g, nil)
	require.Error(t, m.Accept(0))
	require.Error(t, m.Allowed(make([]uint64, 1)))
	require.NoError(t, m.AcceptBytes([]byte("a")))
	require.True(t, m.CanEnd())
}

// A hand-written JSON grammar in the style of llama.cpp's grammar files:
// multi-line rules, nested groups over several lines, comments, classes
// with escapes, bounded whitespace.
const jsonGBNF = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: bounded, so that generation ends.
ws ::= | " " | "\n" [ \t]{0,20}
`

func TestJSONGBNF(t *testing.T) {
	g, err := Parse(jsonGBNF)
	require.NoError(t, err)
	for _, s := range []string{`{}`, `{"a": [1, -2.5e+3, "x\u00e9\n", true, null, {"b": []}]}`, "{\n  \"k\": \"日本\"\n}"} {
		require.True(t, matches(g, s), s)
	}
	for _, s := range []string{`[]`, `{"a" 1}`, `{"a": tru}`, `{"a": "\q"}`, "{\"a\": \"\x01\"}"} {
		require.False(t, matches(g, s), s)
	}
}
