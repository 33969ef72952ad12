package grammar

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// ctlVocab is a Mistral/Llama-3-like vocabulary: 0 is the end of
// generation, 1..3 are control tokens that decode to nothing (as
// TokenBytes gives them), and the ordinary pieces can spell their texts.
func ctlVocab(t testing.TB) *Vocab {
	t.Helper()
	names := []string{"</s>", "[TOOL_CALLS]", "<|python_tag|>", "</think>",
		"[", "]", "TOOL", "_CALLS", "[TOOL", "<|", "python", "_tag", "|>", "a", "b", "{", "}", "<", "think", ">", "/"}
	pieces := make([][]byte, len(names))
	special := make([]bool, len(names))
	for id, n := range names {
		if id <= 3 {
			special[id] = true
			continue
		}
		pieces[id] = []byte(n)
	}
	v, err := NewVocab(pieces, special, 0)
	require.NoError(t, err)
	v, err = v.WithNames(names)
	require.NoError(t, err)
	return v
}

// TestTokenReferenceMask: a token reference allows exactly its token
// there, never the text spelled by ordinary pieces; after it the grammar
// goes on with bytes.
func TestTokenReferenceMask(t *testing.T) {
	v := ctlVocab(t)
	cases := []struct {
		name, gbnf string
		first      map[int]bool
	}{
		{"by id (Mistral's [TOOL_CALLS] has no <text> form)", `root ::= <[1]> "[" [ab]+ "]"`, set(1)},
		{"by text", `root ::= <|python_tag|> "[" [ab]+ "]"`, set(2)},
		{"alternative with text", `root ::= (<[1]> | "[TOOL_CALLS]") "[" [ab]+ "]"`, set(1, 4, 8)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse(c.gbnf)
			require.NoError(t, err)
			require.NoError(t, g.CheckVocab(v))
			m := NewMatcher(g, v)
			require.Equal(t, c.first, allowedSet(t, m, v))
			require.ErrorIs(t, m.Clone().Accept(3), ErrTokenRejected, "another control token")
			ref := 1
			if strings.Contains(c.gbnf, "python") {
				ref = 2
			}
			if !c.first[8] {
				require.ErrorIs(t, m.Clone().Accept(8), ErrTokenRejected, "the text spelled by pieces")
			}
			require.NoError(t, m.Accept(ref))
			require.Equal(t, set(4), allowedSet(t, m, v))
			for _, id := range []int{4, 13, 14, 5} {
				require.NoError(t, m.Accept(id))
			}
			require.True(t, m.CanEnd())
			require.Equal(t, set(0), allowedSet(t, m, v))
		})
	}
}

// TestNegatedTokenReference: !<x> takes any one ordinary token but x
// (llama.cpp's "thinking ::= !</think>*"); control tokens and the end of
// generation stay out.
func TestNegatedTokenReference(t *testing.T) {
	v := ctlVocab(t)
	g, err := Parse(`root ::= (!<[3]>)* <[3]> "a"`)
	require.NoError(t, err)
	m := NewMatcher(g, v)
	want := set(3)
	for id := 4; id < v.Size(); id++ {
		want[id] = true
	}
	require.Equal(t, want, allowedSet(t, m, v))
	for _, id := range []int{6, 17, 18, 19, 10} {
		require.NoError(t, m.Accept(id))
		require.Equal(t, want, allowedSet(t, m, v))
	}
	require.ErrorIs(t, m.Clone().Accept(1), ErrTokenRejected)
	require.ErrorIs(t, m.Clone().Accept(0), ErrTokenRejected)
	require.NoError(t, m.Accept(3))
	require.Equal(t, set(13), allowedSet(t, m, v))
	require.NoError(t, m.Accept(13))
	require.True(t, m.CanEnd())
}

// TestTokenReferenceUnknown: a reference the vocabulary cannot resolve is
// an error naming it and its place, from CheckVocab and from every use of
// a matcher.
func TestTokenReferenceUnknown(t *testing.T) {
	v := ctlVocab(t)
	cases := []struct{ gbnf, want string }{
		{"root ::= (\"a\"\n  <|eot_id|>)", `grammar: line 2, column 3: token reference <|eot_id|>: no token of the vocabulary is "<|eot_id|>" (a token reference names one whole token; spell text with a string literal)`},
		{`root ::= <[21]>`, `grammar: line 1, column 10: token reference <[21]>: token 21 is outside the vocabulary of 21`},
		{`root ::= "a" !<[0]>`, `grammar: line 1, column 14: token reference !<[0]>: token 0 ends the generation; it is allowed exactly where the root rule can end, and cannot be referenced`},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			g, err := Parse(c.gbnf)
			require.NoError(t, err)
			err = g.CheckVocab(v)
			require.EqualError(t, err, c.want)
			require.ErrorIs(t, err, ErrUnknownToken)
			require.ErrorIs(t, err, ErrInvalidGrammar)
			var se *SyntaxError
			require.True(t, errors.As(err, &se))
			m := NewMatcher(g, v)
			require.ErrorIs(t, m.Allowed(make([]uint64, v.MaskWords())), ErrUnknownToken)
			require.ErrorIs(t, m.Accept(13), ErrUnknownToken)
		})
	}
	// Without names, <text> finds an ordinary token spelled so.
	plain, err := NewVocab([][]byte{[]byte("</s>"), []byte("<think>"), []byte("<")}, []bool{true, false, false}, 0)
	require.NoError(t, err)
	g, err := Parse(`root ::= <think> "<"`)
	require.NoError(t, err)
	require.NoError(t, g.CheckVocab(plain))
	require.Equal(t, set(1), allowedSet(t, NewMatcher(g, plain), plain))
}

// TestTokenReferenceMaskAgreesWithAccept: with token references mixed
// into byte rules, the mask is exactly the set of tokens Accept takes, in
// every state of random walks.
func TestTokenReferenceMaskAgreesWithAccept(t *testing.T) {
	v := ctlVocab(t)
	grammars := []string{
		`root ::= (<[1]> "[" [ab{}]* "]" | <|python_tag|> "{" [ab]* "}" | "a" <[3]>)+`,
		`root ::= "<" (!<[19]>)* ">" (<[1]> | "[TOOL")? "b"*`,
		`root ::= ([ab] | <[2]> [<|>]+)* <[3]>`,
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, src := range grammars {
		g, err := Parse(src)
		require.NoError(t, err)
		for range 20 {
			m := NewMatcher(g, v)
			for step := 0; step < 15 && !m.Done(); step++ {
				allowed := allowedSet(t, m, v)
				var ids []int
				for id := range v.Size() {
					err := m.Clone().Accept(id)
					require.Equal(t, allowed[id], err == nil, "%s: token %d", src, id)
					if allowed[id] {
						ids = append(ids, id)
					}
				}
				require.NoError(t, m.Accept(ids[rng.IntN(len(ids))]))
			}
		}
	}
}

// TestTokenReferenceRealVocab: Phi-3's vocabulary (llama.cpp's test file)
// has <|assistant|> as a control token; a reference to it allows that
// token alone, and the generated text after it is matched as bytes.
func TestTokenReferenceRealVocab(t *testing.T) {
	tok := loadVocabFile(t, vocabPath(t, "phi-3"))
	n := tok.VocabSize()
	pieces := make([][]byte, n)
	special := make([]bool, n)
	names := make([]string, n)
	for id := range n {
		pieces[id], special[id] = tokenizer.TokenBytes(tok, id)
		names[id] = tok.Piece(id)
	}
	eos, ok := tok.Lookup("<|end|>")
	require.True(t, ok)
	v, err := NewVocab(pieces, special, eos)
	require.NoError(t, err)
	v, err = v.WithNames(names)
	require.NoError(t, err)
	ctl, ok := tok.Lookup("<|assistant|>")
	require.True(t, ok)
	require.True(t, special[ctl], "<|assistant|> is a control token of Phi-3")

	g, err := Parse(`root ::= <|assistant|> " yes"`)
	require.NoError(t, err)
	require.NoError(t, g.CheckVocab(v))
	m := NewMatcher(g, v)
	require.Equal(t, set(ctl), allowedSet(t, m, v))
	require.NoError(t, m.Accept(ctl))
	yes, ok := tok.Lookup("▁yes")
	require.True(t, ok)
	require.Equal(t, " yes", string(pieces[yes]))
	require.True(t, allowedSet(t, m, v)[yes])
	require.NoError(t, m.Accept(yes))
	require.Equal(t, set(eos), allowedSet(t, m, v))
}
