package grammar

import (
	"errors"
	"fmt"
	"strconv"
)

// Token references (<[id]>, <text>, !<...>) match one whole token of the
// vocabulary, llama.cpp's "preserved tokens": control tokens such as
// Mistral's [TOOL_CALLS] or Llama 3's <|python_tag|> decode to no text,
// so no byte class can ask for them, and spelling their text from
// ordinary tokens is not what the model was trained to write. A positive
// reference allows exactly that token there, never its spelling by
// pieces; a negated one allows any one ordinary token but that one.

// ErrUnknownToken is wrapped by the error of a grammar whose token
// reference does not name one token of the vocabulary it is used with.
// It also wraps ErrInvalidGrammar.
var ErrUnknownToken = fmt.Errorf("%w: token reference not in the vocabulary", ErrInvalidGrammar)

// maxTokenID bounds <[id]>: larger ids are no vocabulary's.
const maxTokenID = 1<<31 - 1

// tokenRef is a token reference as written: by id, or (id < 0) by text.
type tokenRef struct {
	id   int
	text string
	neg  bool
}

func (r tokenRef) String() string {
	s := r.text
	if r.id >= 0 {
		s = "<[" + strconv.Itoa(r.id) + "]>"
	}
	if r.neg {
		s = "!" + s
	}
	return s
}

// tokenElem is a token reference of the compiled grammar, where it was.
type tokenElem struct {
	ref       tokenRef
	line, col int
}

// WithNames returns a copy of v (sharing its trie) whose tokens can be
// referred to by text in a grammar (<|python_tag|>): names[id] is token
// id's text as the vocabulary lists it ("[TOOL_CALLS]", "<|eot_id|>").
// Without names, a reference by text finds only an ordinary token whose
// bytes are the text.
func (v *Vocab) WithNames(names []string) (*Vocab, error) {
	if len(names) != v.n {
		return nil, fmt.Errorf("grammar: %d token names for a vocabulary of %d", len(names), v.n)
	}
	c := *v
	c.names = make(map[string]int32, len(names))
	for id := len(names) - 1; id >= 0; id-- {
		// The first id wins where a name repeats.
		if names[id] != "" {
			c.names[names[id]] = int32(id)
		}
	}
	return &c, nil
}

// lookup finds the token a reference names.
func (v *Vocab) lookup(r tokenRef) (int32, error) {
	if r.id >= 0 {
		if r.id >= v.n {
			return 0, fmt.Errorf("token %d is outside the vocabulary of %d", r.id, v.n)
		}
		return int32(r.id), nil
	}
	if id, ok := v.names[r.text]; ok {
		return id, nil
	}
	if v.names == nil {
		for id, p := range v.pieces {
			if !v.special[id] && string(p) == r.text {
				return int32(id), nil
			}
		}
	}
	return 0, fmt.Errorf("no token of the vocabulary is %q (a token reference names one whole token; spell text with a string literal)", r.text)
}

// resolveTokens gives the token id of each of g's token references for v.
func (g *Grammar) resolveTokens(v *Vocab) ([]int32, error) {
	ids := make([]int32, len(g.tokens))
	for i, te := range g.tokens {
		id, err := v.lookup(te.ref)
		if err == nil && isEOG(v, id) {
			err = fmt.Errorf("token %d ends the generation; it is allowed exactly where the root rule can end, and cannot be referenced", id)
		}
		if err != nil {
			return nil, &SyntaxError{Line: te.line, Column: te.col, Msg: fmt.Sprintf("token reference %s: %v", te.ref, err)}
		}
		ids[i] = id
	}
	return ids, nil
}

func isEOG(v *Vocab, id int32) bool {
	for _, e := range v.eog {
		if int32(e) == id {
			return true
		}
	}
	return false
}

// CheckVocab reports whether every token reference of g names a token of
// v. A Matcher of g for v whose references do not resolve fails every
// Allowed and Accept with this error. The error wraps ErrUnknownToken and
// is a *SyntaxError giving the reference's place.
func (g *Grammar) CheckVocab(v *Vocab) error {
	if v == nil || len(g.tokens) == 0 {
		return nil
	}
	return g.cacheFor(v).err
}

// tokenError keeps the place of a resolution error (a *SyntaxError) and
// marks it as ErrUnknownToken.
type tokenError struct{ *SyntaxError }

func (e tokenError) Unwrap() []error { return []error{e.SyntaxError, ErrUnknownToken} }

func asTokenError(err error) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		return tokenError{se}
	}
	return fmt.Errorf("%w: %w", ErrUnknownToken, err)
}
