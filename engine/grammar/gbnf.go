package grammar

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalidGrammar is wrapped by every error Parse returns for a grammar
// it cannot use.
var ErrInvalidGrammar = errors.New("invalid grammar")

// SyntaxError is a problem at a place in a GBNF text. It wraps
// ErrInvalidGrammar. Line and Column count from 1; Column counts bytes.
type SyntaxError struct {
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "grammar: " + e.Msg
	}
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return ErrInvalidGrammar }

// maxRepeat bounds the counts of {m,n}: each count becomes rules, so a
// huge one would only exhaust memory.
const maxRepeat = 10000

type nodeKind uint8

const (
	nLit    nodeKind = iota // lit: a byte string
	nClass                  // ranges (codepoints), neg
	nRef                    // name
	nAlt                    // kids: alternatives, each an nSeq
	nSeq                    // kids: in order
	nRepeat                 // kids[0] repeated min..max times (max < 0: unbounded)
	nToken                  // one whole token: tok (neg: any other token)
)

type cpRange struct{ lo, hi rune }

// node is the parsed form of a rule body.
type node struct {
	kind      nodeKind
	lit       []byte
	ranges    []cpRange
	neg       bool
	name      string
	kids      []*node
	min, max  int
	tok       tokenRef
	line, col int
}

type ruleDef struct {
	name      string
	body      *node // nAlt
	line, col int
}

type parser struct {
	src   string
	pos   int
	rules []ruleDef
}

// lineCol turns a byte offset into 1-based line and column.
func (p *parser) lineCol(off int) (int, int) {
	line, col := 1, 1
	for i := 0; i < off && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func (p *parser) errAt(off int, format string, args ...any) error {
	l, c := p.lineCol(off)
	return &SyntaxError{Line: l, Column: c, Msg: fmt.Sprintf(format, args...)}
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// space skips blanks and comments, and newlines when newlines is set.
func (p *parser) space(newlines bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '\r' || c == '\n':
			if !newlines {
				return
			}
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

// continuation reports whether the next non-blank line starts with '|':
// a rule's alternatives may go on over several lines that way. It moves
// past the blanks only when it does.
func (p *parser) continuation() bool {
	save := p.pos
	p.space(true)
	if p.pos < len(p.src) && p.src[p.pos] == '|' {
		return true
	}
	p.pos = save
	return false
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *parser) parse() error {
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			return nil
		}
		start := p.pos
		name := p.name()
		if name == "" {
			return p.errAt(p.pos, "expected a rule name, found %q", p.peekText())
		}
		p.space(false)
		if !hasPrefixAt(p.src, p.pos, "::=") {
			return p.errAt(p.pos, "expected ::= after rule name %q", name)
		}
		p.pos += 3
		p.space(true)
		body, err := p.alternates(false)
		if err != nil {
			return err
		}
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return p.errAt(p.pos, "unexpected %q", p.peekText())
		}
		l, c := p.lineCol(start)
		p.rules = append(p.rules, ruleDef{name: name, body: body, line: l, col: c})
	}
}

func hasPrefixAt(s string, i int, pre string) bool {
	return len(s)-i >= len(pre) && s[i:i+len(pre)] == pre
}

// peekText is the next character (or "end of input") for messages.
func (p *parser) peekText() string {
	if p.pos >= len(p.src) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return string(r)
}

func (p *parser) alternates(nested bool) (*node, error) {
	l, c := p.lineCol(p.pos)
	alt := &node{kind: nAlt, line: l, col: c}
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alt.kids = append(alt.kids, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' || !nested && p.continuation() {
			p.pos++
			p.space(true)
			continue
		}
		return alt, nil
	}
}

func (p *parser) sequence(nested bool) (*node, error) {
	l, c := p.lineCol(p.pos)
	seq := &node{kind: nSeq, line: l, col: c}
	for p.pos < len(p.src) {
		start := p.pos
		ch := p.src[p.pos]
		var item *node
		switch {
		case ch == '|' || ch == ')' || ch == '\n' || ch == '\r':
			if ch == ')' && !nested {
				return nil, p.errAt(p.pos, "unexpected )")
			}
			return seq, nil
		case ch == '"':
			p.pos++
			var lit []byte
			for {
				if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
					return nil, p.errAt(start, "unterminated string literal")
				}
				if p.src[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				lit = utf8.AppendRune(lit, r)
			}
			item = &node{kind: nLit, lit: lit}
		case ch == '[':
			cls, err := p.class()
			if err != nil {
				return nil, err
			}
			item = cls
		case ch == '.':
			p.pos++
			item = &node{kind: nClass, ranges: []cpRange{{0, utf8.MaxRune}}}
		case ch == '(':
			p.pos++
			p.space(true)
			inner, err := p.alternates(true)
			if err != nil {
				return nil, err
			}
			p.space(true)
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errAt(start, "unclosed (")
			}
			p.pos++
			item = inner
		case ch == '<' || ch == '!':
			ref, err := p.token()
			if err != nil {
				return nil, err
			}
			item = &node{kind: nToken, tok: ref}
		case isWordChar(ch):
			item = &node{kind: nRef, name: p.name()}
		case ch == '*' || ch == '+' || ch == '?' || ch == '{':
			return nil, p.errAt(p.pos, "%c must follow an item", ch)
		default:
			return nil, p.errAt(p.pos, "unexpected %q", p.peekText())
		}
		item.line, item.col = p.lineCol(start)
		p.space(nested)
		for p.pos < len(p.src) {
			min, max := -1, -1
			switch p.src[p.pos] {
			case '*':
				min, max = 0, -1
				p.pos++
			case '+':
				min, max = 1, -1
				p.pos++
			case '?':
				min, max = 0, 1
				p.pos++
			case '{':
				var err error
				if min, max, err = p.braces(); err != nil {
					return nil, err
				}
			}
			if min < 0 {
				break
			}
			item = &node{kind: nRepeat, kids: []*node{item}, min: min, max: max, line: item.line, col: item.col}
			p.space(nested)
		}
		seq.kids = append(seq.kids, item)
	}
	return seq, nil
}

// braces parses {m}, {m,} or {m,n}.
func (p *parser) braces() (int, int, error) {
	start := p.pos
	p.pos++
	num := func() (int, bool, error) {
		p.space(false)
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if s == p.pos {
			return 0, false, nil
		}
		v, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || v > maxRepeat {
			return 0, false, p.errAt(s, "repetition count %s exceeds %d", p.src[s:p.pos], maxRepeat)
		}
		p.space(false)
		return v, true, nil
	}
	min, ok, err := num()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, p.errAt(p.pos, "expected a number in {}")
	}
	max := min
	if p.pos < len(p.src) && p.src[p.pos] == ',' {
		p.pos++
		v, ok, err := num()
		if err != nil {
			return 0, 0, err
		}
		max = -1
		if ok {
			max = v
		}
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		return 0, 0, p.errAt(start, "unclosed {")
	}
	p.pos++
	if max >= 0 && max < min {
		return 0, 0, p.errAt(start, "repetition {%d,%d} has max below min", min, max)
	}
	return min, max, nil
}

// char reads one character of a literal or class: a UTF-8 character or
// an escape.
func (p *parser) char() (rune, error) {
	c := p.src[p.pos]
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errAt(p.pos, "invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	start := p.pos
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errAt(start, "unfinished escape")
	}
	e := p.src[p.pos]
	p.pos++
	switch e {
	case 'n':
		return '\n', nil
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case '\\', '"', '\'', '[', ']', '-', '^', '/', '.':
		return rune(e), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if len(p.src)-p.pos < n {
			return 0, p.errAt(start, "escape \\%c needs %d hex digits", e, n)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return 0, p.errAt(start, "escape \\%c needs %d hex digits", e, n)
		}
		if v > utf8.MaxRune {
			return 0, p.errAt(start, "escape %s is beyond U+10FFFF", p.src[start:p.pos+n])
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.errAt(start, "unknown escape \\%c", e)
}

func (p *parser) class() (*node, error) {
	start := p.pos
	p.pos++
	cls := &node{kind: nClass}
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		cls.neg = true
		p.pos++
	}
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return nil, p.errAt(start, "unclosed character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return cls, nil
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			at := p.pos
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errAt(at, "range %q-%q is reversed", lo, hi)
			}
		}
		cls.ranges = append(cls.ranges, cpRange{lo, hi})
	}
}

// token parses a token reference, llama.cpp's syntax: <[id]> names a
// token by id, <text> by its whole text (the angle brackets are part of
// the text: <|python_tag|>, <think>), and a leading ! matches any one
// token but that one.
func (p *parser) token() (tokenRef, error) {
	start := p.pos
	ref := tokenRef{id: -1}
	if p.src[p.pos] == '!' {
		ref.neg = true
		p.pos++
		if p.pos >= len(p.src) || p.src[p.pos] != '<' {
			return ref, p.errAt(start, "! must be followed by a token reference <...>")
		}
	}
	open := p.pos
	if hasPrefixAt(p.src, p.pos, "<[") {
		p.pos += 2
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if s == p.pos || !hasPrefixAt(p.src, p.pos, "]>") {
			return ref, p.errAt(open, "token reference <[...]> needs a token id (digits) and ]>")
		}
		id, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || id > maxTokenID {
			return ref, p.errAt(s, "token id %s exceeds %d", p.src[s:p.pos], maxTokenID)
		}
		p.pos += 2
		ref.id = id
		return ref, nil
	}
	end := strings.IndexAny(p.src[p.pos+1:], ">\n")
	if end < 0 || p.src[p.pos+1+end] != '>' {
		return ref, p.errAt(open, "unclosed token reference (<text> ends at >, on the same line)")
	}
	p.pos += end + 2
	ref.text = p.src[open:p.pos]
	if ref.text == "<>" {
		return ref, p.errAt(open, "empty token reference <>")
	}
	return ref, nil
}
