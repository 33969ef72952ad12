package server

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/kvwarden/kvwarden/engine"
)

// Log-probabilities in OpenAI's two shapes. They are the model's own (the
// log-softmax of the raw logits of each step, before penalties, bias,
// temperature and filters), as the engine records them; see
// engine.TokenLogprobs.

// minLogprob stands for a token the model gives no probability (-Inf,
// which JSON cannot carry), as OpenAI reports such tokens.
const minLogprob = -9999

func finiteLogprob(v float32) float32 {
	if math.IsInf(float64(v), -1) || v != v || v < minLogprob {
		return minLogprob
	}
	return v
}

// tokenText is a token's text in context: its bytes as the tokenizer
// decodes them after prev, and the text OpenAI shows: the bytes when they
// are valid UTF-8, else each byte escaped as \xNN (a token that ends or
// starts inside a character; the bytes field has the exact value).
func (s *Server) tokenText(prev, id int) (string, []byte) {
	b := s.eng.Tokenizer().Decode(prev, id)
	if utf8.Valid(b) {
		return string(b), b
	}
	var sb strings.Builder
	for _, c := range b {
		fmt.Fprintf(&sb, `\x%02x`, c)
	}
	return sb.String(), b
}

// decode is the text of tokens after prev, invalid bytes as U+FFFD.
func (s *Server) decode(prev int, tokens []int) string {
	var b []byte
	for _, t := range tokens {
		b = append(b, s.eng.Tokenizer().Decode(prev, t)...)
		prev = t
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func runeCount(s string) int { return utf8.RuneCountInString(s) }

// alt is a token with its text and log-probability.
type alt struct {
	text    string
	bytes   []byte
	logprob float32
}

// tokenEntry is one token's record: itself and its alternatives.
type tokenEntry struct {
	alt
	top []alt
}

// tokenLogprobs are the records of consecutive tokens.
type tokenLogprobs []tokenEntry

// entry builds the record of token tok, sampled after prev.
func (s *Server) entry(prev, tok int, logprob float32, top []engine.TokenLogprob) tokenEntry {
	text, b := s.tokenText(prev, tok)
	e := tokenEntry{alt: alt{text: text, bytes: b, logprob: finiteLogprob(logprob)}, top: make([]alt, 0, len(top))}
	for _, t := range top {
		text, b := s.tokenText(prev, t.Token)
		e.top = append(e.top, alt{text: text, bytes: b, logprob: finiteLogprob(t.Logprob)})
	}
	return e
}

// add records ev, a token of choice c, and moves c past it.
func (l *tokenLogprobs) add(s *Server, c *choice, ev engine.Event) {
	*l = append(*l, s.entry(c.prev, ev.Token, ev.Logprob, ev.TopLogprobs))
	c.prev = ev.Token
}

// tokenLogprobs records the tokens of events (of choice c, in order).
func (s *Server) tokenLogprobs(c *choice, events []engine.Event) tokenLogprobs {
	var l tokenLogprobs
	for _, ev := range events {
		l.add(s, c, ev)
	}
	return l
}

// Chat shape: {"content": [{"token", "logprob", "bytes", "top_logprobs":
// [{"token", "logprob", "bytes"}]}]}.

type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float32        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []chatTopEntry `json:"top_logprobs"`
}

type chatTopEntry struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func byteList(b []byte) []int {
	out := make([]int, len(b)) // not []byte, which JSON writes as base64
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

func (l tokenLogprobs) chat() chatLogprobs {
	out := chatLogprobs{Content: make([]chatTokenLogprob, 0, len(l))}
	for _, e := range l {
		t := chatTokenLogprob{Token: e.text, Logprob: e.logprob, Bytes: byteList(e.bytes), TopLogprobs: make([]chatTopEntry, 0, len(e.top))}
		for _, a := range e.top {
			t.TopLogprobs = append(t.TopLogprobs, chatTopEntry{Token: a.text, Logprob: a.logprob, Bytes: byteList(a.bytes)})
		}
		out.Content = append(out.Content, t)
	}
	return out
}

// Completions (legacy) shape: parallel arrays; top_logprobs maps token
// text to log-probability and always holds the sampled token (so up to
// logprobs+1 entries, as OpenAI documents). The first prompt token of an
// echo has null for both: nothing predicts it. text_offset counts code
// points from the start of the choice's text.

type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// newLegacy is an empty record (arrays, never null).
func newLegacy() legacyLogprobs {
	return legacyLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
}

func (l *legacyLogprobs) push(text string, lp *float32, top map[string]float32, offset int) {
	l.Tokens = append(l.Tokens, text)
	l.TokenLogprobs = append(l.TokenLogprobs, lp)
	l.TopLogprobs = append(l.TopLogprobs, top)
	l.TextOffset = append(l.TextOffset, offset)
}

func (l *legacyLogprobs) append(m legacyLogprobs) {
	l.Tokens = append(l.Tokens, m.Tokens...)
	l.TokenLogprobs = append(l.TokenLogprobs, m.TokenLogprobs...)
	l.TopLogprobs = append(l.TopLogprobs, m.TopLogprobs...)
	l.TextOffset = append(l.TextOffset, m.TextOffset...)
}

func legacyTop(e tokenEntry) map[string]float32 {
	top := make(map[string]float32, len(e.top)+1)
	for _, a := range e.top {
		if _, dup := top[a.text]; !dup { // two tokens with one text: the likelier
			top[a.text] = a.logprob
		}
	}
	top[e.text] = e.logprob
	return top
}

// legacy is l in the completions shape, its text starting at code point
// offset.
func (l tokenLogprobs) legacy(offset int) legacyLogprobs {
	out := newLegacy()
	for _, e := range l {
		lp := e.logprob
		out.push(e.text, &lp, legacyTop(e), offset)
		offset += utf8.RuneCount(e.bytes)
	}
	return out
}

// promptLegacy is the echoed prompt's part of the completions logprobs:
// every prompt token (BOS included), the first with nulls.
func (s *Server) promptLegacy(prompt []int, lps []engine.TokenLogprobs, top int) legacyLogprobs {
	out := newLegacy()
	offset, prev := 0, -1
	for i, tok := range prompt {
		if i == 0 || i-1 >= len(lps) {
			text, b := s.tokenText(prev, tok)
			out.push(text, nil, nil, offset)
			offset += utf8.RuneCount(b)
			prev = tok
			continue
		}
		lp := lps[i-1]
		e := s.entry(prev, tok, lp.Logprob, lp.Top[:min(top, len(lp.Top))])
		v := e.logprob
		out.push(e.text, &v, legacyTop(e), offset)
		offset += utf8.RuneCount(e.bytes)
		prev = tok
	}
	return out
}
