package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file is a small backtracking regex engine for the pre-tokenizer
// expressions llama.cpp runs with C++ std::regex (ECMAScript grammar). Go's
// regexp has no lookahead, which most of those expressions need, and
// llama.cpp matches them over a transformed text, not the real code points,
// which no off-the-shelf engine reproduces:
//
//   - An expression that uses \p{N}, \p{L}, \p{P}, \p{M}, \p{S} (or \p{Lu},
//     \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}) is matched over a "collapsed" text:
//     ASCII stays as is, any other code point becomes one placeholder per
//     category (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark, 0xD5
//     symbol, 0xD0 anything else) and non-ASCII whitespace becomes \v. A
//     category class matches its placeholder plus a fixed ASCII set, so in
//     ASCII \p{L} is only A-Za-z and \p{S} does not hold '~'. Case cannot
//     be told apart outside ASCII, so [^a-z] matches every non-ASCII letter.
//   - Any other expression is matched over the code points, with non-ASCII
//     whitespace turned into \v (std::wregex's \s is ASCII only).
//
// \s is the six ASCII spaces (the C locale's isspace). An expression is
// applied to each piece the previous one produced; text a match skips over
// becomes a piece of its own.
//
// Matching is leftmost-first with backtracking (Perl/ECMAScript order), on
// an explicit stack, with a visited set of (instruction, position) so that
// no input makes it quadratic or worse: a state that failed once fails
// again, whatever the start position.

// reMode is how an expression sees the text.
type reMode uint8

const (
	reWide      reMode = iota // code points, non-ASCII whitespace as \v
	reCollapsed               // one placeholder per Unicode category
)

// Placeholders of the collapsed text.
const (
	colOther  = 0xD0
	colNumber = 0xD1
	colLetter = 0xD2
	colPunct  = 0xD3
	colMark   = 0xD4
	colSymbol = 0xD5
)

// ASCII members of each category in collapsed matching (llama.cpp's table).
const (
	asciiPunct  = "!\"#%&'()*,-./:;?@[\\]_{}"
	asciiSymbol = "$+<=>^`|"
)

// categoryNames are the \p{...} names that switch an expression to
// collapsed matching, with the placeholder each stands for.
var categoryNames = map[string]rune{
	"N": colNumber, "L": colLetter, "P": colPunct, "M": colMark, "S": colSymbol,
	"Lu": colLetter, "Ll": colLetter, "Lt": colLetter, "Lm": colLetter, "Lo": colLetter,
}

// isWhiteSpace is Unicode White_Space, llama.cpp's is_whitespace flag.
func isWhiteSpace(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// collapse maps a code point to what collapsed matching sees.
func collapse(r rune) rune {
	switch {
	case r < 0x80:
		return r
	case isWhiteSpace(r):
		return '\v'
	case unicode.IsNumber(r):
		return colNumber
	case unicode.IsLetter(r):
		return colLetter
	case unicode.IsPunct(r):
		return colPunct
	case unicode.IsMark(r):
		return colMark
	case unicode.IsSymbol(r):
		return colSymbol
	}
	return colOther
}

func wide(r rune) rune {
	if r >= 0x80 && isWhiteSpace(r) {
		return '\v'
	}
	return r
}

// reRange is an inclusive range of (transformed) code points.
type reRange struct{ lo, hi rune }

// reClass is a set of code points.
type reClass struct {
	ranges []reRange
	neg    bool
}

func (c *reClass) has(r rune) bool {
	in := false
	for _, rg := range c.ranges {
		if r >= rg.lo && r <= rg.hi {
			in = true
			break
		}
	}
	return in != c.neg
}

type reOp uint8

const (
	opClass reOp = iota // consume one code point in cls
	opSplit             // try x, then y
	opJmp               // go to x
	opLook              // zero-width lookahead: sub must (or, neg, must not) match here
	opBegin             // start of the piece
	opEnd               // end of the piece
	opMatch
)

type reInst struct {
	op   reOp
	x, y int
	cls  *reClass
	sub  *reProg
	neg  bool
}

// reProg is a compiled expression.
type reProg struct {
	src   string
	mode  reMode
	insts []reInst
}

// AST of the parser.
type reNode struct {
	kind     byte // 'c' class, '|' alt, '.' concat, '*' repeat, '=' look, '^' '$'
	cls      *reClass
	subs     []*reNode
	min, max int // repeat bounds, max < 0 unbounded
	neg      bool
}

type reParser struct {
	src  string
	pos  int
	mode reMode
}

// compileRegex compiles one of llama.cpp's pre-tokenizer expressions.
func compileRegex(src string) (*reProg, error) {
	mode := reWide
	for name := range categoryNames {
		if strings.Contains(src, `\p{`+name+`}`) {
			mode = reCollapsed
			break
		}
	}
	p := &reParser{src: src, mode: mode}
	n, err := p.alt()
	if err != nil {
		return nil, fmt.Errorf("tokenizer: regex %q: %w", src, err)
	}
	if p.pos != len(src) {
		return nil, fmt.Errorf("tokenizer: regex %q: unexpected %q at %d", src, src[p.pos], p.pos)
	}
	if nullable(n) {
		return nil, fmt.Errorf("tokenizer: regex %q matches the empty string", src)
	}
	prog := &reProg{src: src, mode: mode}
	if err := prog.emit(n); err != nil {
		return nil, fmt.Errorf("tokenizer: regex %q: %w", src, err)
	}
	prog.insts = append(prog.insts, reInst{op: opMatch})
	return prog, nil
}

func (p *reParser) more() bool { return p.pos < len(p.src) }
func (p *reParser) peek() byte { return p.src[p.pos] }

func (p *reParser) alt() (*reNode, error) {
	var subs []*reNode
	for {
		c, err := p.concat()
		if err != nil {
			return nil, err
		}
		subs = append(subs, c)
		if !p.more() || p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(subs) == 1 {
		return subs[0], nil
	}
	return &reNode{kind: '|', subs: subs}, nil
}

func (p *reParser) concat() (*reNode, error) {
	n := &reNode{kind: '.'}
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		a, err = p.quantifier(a)
		if err != nil {
			return nil, err
		}
		n.subs = append(n.subs, a)
	}
	return n, nil
}

func (p *reParser) quantifier(a *reNode) (*reNode, error) {
	for p.more() {
		lo, hi := 0, 0
		switch c := p.peek(); c {
		case '*':
			lo, hi = 0, -1
			p.pos++
		case '+':
			lo, hi = 1, -1
			p.pos++
		case '?':
			lo, hi = 0, 1
			p.pos++
		case '{':
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unterminated {")
			}
			body := p.src[p.pos+1 : p.pos+end]
			var err error
			if i := strings.IndexByte(body, ','); i < 0 {
				lo, err = strconv.Atoi(body)
				hi = lo
			} else {
				lo, err = strconv.Atoi(body[:i])
				if err == nil && body[i+1:] == "" {
					hi = -1
				} else if err == nil {
					hi, err = strconv.Atoi(body[i+1:])
				}
			}
			if err != nil || lo < 0 || (hi >= 0 && hi < lo) || lo > 1000 || hi > 1000 {
				return nil, fmt.Errorf("bad repetition {%s}", body)
			}
			p.pos += end + 1
		default:
			return a, nil
		}
		if p.more() && (p.peek() == '?' || p.peek() == '+') {
			return nil, fmt.Errorf("lazy and possessive quantifiers are not supported")
		}
		if a.kind == '=' || a.kind == '^' || a.kind == '$' {
			return nil, fmt.Errorf("quantified assertion")
		}
		a = &reNode{kind: '*', subs: []*reNode{a}, min: lo, max: hi}
	}
	return a, nil
}

func (p *reParser) atom() (*reNode, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		kind, neg := byte('g'), false
		if strings.HasPrefix(p.src[p.pos:], "?:") {
			p.pos += 2
		} else if strings.HasPrefix(p.src[p.pos:], "?=") {
			kind = '='
			p.pos += 2
		} else if strings.HasPrefix(p.src[p.pos:], "?!") {
			kind, neg = '=', true
			p.pos += 2
		} else if p.more() && p.peek() == '?' {
			return nil, fmt.Errorf("unsupported group at %d", p.pos)
		}
		n, err := p.alt()
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		if kind == '=' {
			return &reNode{kind: '=', subs: []*reNode{n}, neg: neg}, nil
		}
		return n, nil
	case '[':
		cls, err := p.class()
		if err != nil {
			return nil, err
		}
		return &reNode{kind: 'c', cls: cls}, nil
	case '^':
		p.pos++
		return &reNode{kind: '^'}, nil
	case '$':
		p.pos++
		return &reNode{kind: '$'}, nil
	case '.':
		p.pos++
		return &reNode{kind: 'c', cls: &reClass{neg: true, ranges: []reRange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}}}, nil
	case '*', '+', '?', '{', ')':
		return nil, fmt.Errorf("unexpected %q at %d", c, p.pos)
	case '\\':
		cls := &reClass{}
		if err := p.escape(cls, false); err != nil {
			return nil, err
		}
		return &reNode{kind: 'c', cls: cls}, nil
	}
	r, size := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += size
	return &reNode{kind: 'c', cls: &reClass{ranges: []reRange{{r, r}}}}, nil
}

// class parses [...] at p.pos.
func (p *reParser) class() (*reClass, error) {
	p.pos++ // [
	cls := &reClass{}
	if p.more() && p.peek() == '^' {
		cls.neg = true
		p.pos++
	}
	first := true
	for {
		if !p.more() {
			return nil, fmt.Errorf("unterminated [")
		}
		if p.peek() == ']' && !first {
			p.pos++
			return cls, nil
		}
		first = false
		var lo rune
		if p.peek() == '\\' {
			single := &reClass{}
			if err := p.escape(single, true); err != nil {
				return nil, err
			}
			if len(single.ranges) != 1 || single.ranges[0].lo != single.ranges[0].hi || single.neg {
				cls.ranges = append(cls.ranges, single.ranges...)
				if single.neg {
					return nil, fmt.Errorf("negated escape inside a class")
				}
				continue
			}
			lo = single.ranges[0].lo
		} else {
			r, size := utf8.DecodeRuneInString(p.src[p.pos:])
			p.pos += size
			lo = r
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if p.peek() == '\\' {
				single := &reClass{}
				if err := p.escape(single, true); err != nil {
					return nil, err
				}
				if len(single.ranges) != 1 || single.ranges[0].lo != single.ranges[0].hi {
					return nil, fmt.Errorf("bad range end")
				}
				hi = single.ranges[0].lo
			} else {
				r, size := utf8.DecodeRuneInString(p.src[p.pos:])
				p.pos += size
				hi = r
			}
			if hi < lo {
				return nil, fmt.Errorf("bad range %q-%q", lo, hi)
			}
		}
		cls.ranges = append(cls.ranges, reRange{lo, hi})
	}
}

var asciiSpaces = []reRange{{'\t', '\r'}, {' ', ' '}}

// escape parses a backslash escape at p.pos into cls.
func (p *reParser) escape(cls *reClass, inClass bool) error {
	p.pos++ // backslash
	if !p.more() {
		return fmt.Errorf("trailing backslash")
	}
	c := p.peek()
	p.pos++
	lit := func(r rune) { cls.ranges = append(cls.ranges, reRange{r, r}) }
	switch c {
	case 's':
		cls.ranges = append(cls.ranges, asciiSpaces...)
	case 'S':
		if inClass {
			return fmt.Errorf(`\S inside a class`)
		}
		cls.ranges = append(cls.ranges, asciiSpaces...)
		cls.neg = true
	case 'd':
		cls.ranges = append(cls.ranges, reRange{'0', '9'})
	case 'D':
		if inClass {
			return fmt.Errorf(`\D inside a class`)
		}
		cls.ranges = append(cls.ranges, reRange{'0', '9'})
		cls.neg = true
	case 'r':
		lit('\r')
	case 'n':
		lit('\n')
	case 't':
		lit('\t')
	case 'v':
		lit('\v')
	case 'f':
		lit('\f')
	case 'p':
		end := strings.IndexByte(p.src[p.pos:], '}')
		if !p.more() || p.peek() != '{' || end < 0 {
			return fmt.Errorf(`bad \p`)
		}
		name := p.src[p.pos+1 : p.pos+end]
		p.pos += end + 1
		code, ok := categoryNames[name]
		if !ok || p.mode != reCollapsed {
			return fmt.Errorf(`unsupported \p{%s}`, name)
		}
		lit(code)
		var ascii string
		switch code {
		case colNumber:
			cls.ranges = append(cls.ranges, reRange{'0', '9'})
		case colLetter:
			cls.ranges = append(cls.ranges, reRange{'A', 'Z'}, reRange{'a', 'z'})
		case colPunct:
			ascii = asciiPunct
		case colSymbol:
			ascii = asciiSymbol
		}
		for _, r := range ascii {
			lit(r)
		}
	default:
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return fmt.Errorf(`unsupported escape \%c`, c)
		}
		r, size := utf8.DecodeRuneInString(p.src[p.pos-1:])
		p.pos += size - 1
		lit(r)
	}
	return nil
}

func nullable(n *reNode) bool {
	switch n.kind {
	case 'c':
		return false
	case '|':
		for _, s := range n.subs {
			if nullable(s) {
				return true
			}
		}
		return false
	case '.':
		for _, s := range n.subs {
			if !nullable(s) {
				return false
			}
		}
		return true
	case '*':
		return n.min == 0 || nullable(n.subs[0])
	}
	return true // assertions
}

func (prog *reProg) add(in reInst) int {
	prog.insts = append(prog.insts, in)
	return len(prog.insts) - 1
}

func (prog *reProg) emit(n *reNode) error {
	switch n.kind {
	case 'c':
		prog.add(reInst{op: opClass, cls: n.cls})
	case '^':
		prog.add(reInst{op: opBegin})
	case '$':
		prog.add(reInst{op: opEnd})
	case '.':
		for _, s := range n.subs {
			if err := prog.emit(s); err != nil {
				return err
			}
		}
	case '|':
		var jumps []int
		for i, s := range n.subs {
			split := -1
			if i < len(n.subs)-1 {
				split = prog.add(reInst{op: opSplit})
				prog.insts[split].x = split + 1
			}
			if err := prog.emit(s); err != nil {
				return err
			}
			if split >= 0 {
				jumps = append(jumps, prog.add(reInst{op: opJmp}))
				prog.insts[split].y = len(prog.insts)
			}
		}
		for _, j := range jumps {
			prog.insts[j].x = len(prog.insts)
		}
	case '=':
		sub := &reProg{src: prog.src, mode: prog.mode}
		if err := sub.emit(n.subs[0]); err != nil {
			return err
		}
		sub.insts = append(sub.insts, reInst{op: opMatch})
		prog.add(reInst{op: opLook, sub: sub, neg: n.neg})
	case '*':
		body := n.subs[0]
		if nullable(body) && n.max != n.min {
			return fmt.Errorf("repeated expression can match the empty string")
		}
		for i := 0; i < n.min; i++ {
			if err := prog.emit(body); err != nil {
				return err
			}
		}
		if n.max < 0 {
			// L: split body, out; body; jmp L
			split := prog.add(reInst{op: opSplit})
			prog.insts[split].x = split + 1
			if err := prog.emit(body); err != nil {
				return err
			}
			prog.add(reInst{op: opJmp, x: split})
			prog.insts[split].y = len(prog.insts)
			return nil
		}
		// Optional copies nest: x{0,2} is (x(x)?)?.
		var splits []int
		for i := n.min; i < n.max; i++ {
			split := prog.add(reInst{op: opSplit})
			prog.insts[split].x = split + 1
			splits = append(splits, split)
			if err := prog.emit(body); err != nil {
				return err
			}
		}
		for _, s := range splits {
			prog.insts[s].y = len(prog.insts)
		}
	default:
		return fmt.Errorf("internal: node %q", n.kind)
	}
	return nil
}

// reMatcher runs programs over one transformed text. It is not safe for
// concurrent use; each Encode call makes its own.
type reMatcher struct {
	text    []rune // transformed code points
	stack   []reThread
	visited []uint64 // bit (pos-base)*len(insts)+pc
	base    int      // first position the visited bits cover
}

type reThread struct{ pc, pos int }

// lookahead reports whether sub matches at pos (plain backtracking: the
// sub-expressions are a class or two long).
func (m *reMatcher) lookahead(sub *reProg, pc, pos, end int) bool {
	for {
		in := &sub.insts[pc]
		switch in.op {
		case opMatch:
			return true
		case opClass:
			if pos >= end || !in.cls.has(m.text[pos]) {
				return false
			}
			pos++
			pc++
		case opJmp:
			pc = in.x
		case opSplit:
			if m.lookahead(sub, in.x, pos, end) {
				return true
			}
			pc = in.y
		case opLook:
			if m.lookahead(in.sub, 0, pos, end) == in.neg {
				return false
			}
			pc++
		case opEnd:
			if pos != end {
				return false
			}
			pc++
		case opBegin:
			return false // not used in lookaheads
		}
	}
}

// matchAt returns the end of the leftmost-first match of prog starting at
// start, within [begin, end). The visited bits persist across calls until
// reset, which is valid because a failed state fails for every start.
func (m *reMatcher) matchAt(prog *reProg, start, begin, end int) (int, bool) {
	n := len(prog.insts)
	m.stack = append(m.stack[:0], reThread{0, start})
	for len(m.stack) > 0 {
		t := m.stack[len(m.stack)-1]
		m.stack = m.stack[:len(m.stack)-1]
		pc, pos := t.pc, t.pos
		for {
			bit := (pos-m.base)*n + pc
			if m.visited[bit>>6]&(1<<(bit&63)) != 0 {
				break
			}
			m.visited[bit>>6] |= 1 << (bit & 63)
			in := &prog.insts[pc]
			ok := true
			switch in.op {
			case opMatch:
				return pos, true
			case opClass:
				if pos >= end || !in.cls.has(m.text[pos]) {
					ok = false
				} else {
					pos++
					pc++
				}
			case opJmp:
				pc = in.x
			case opSplit:
				m.stack = append(m.stack, reThread{in.y, pos})
				pc = in.x
			case opLook:
				if m.lookahead(in.sub, 0, pos, end) == in.neg {
					ok = false
				} else {
					pc++
				}
			case opBegin:
				if pos != begin {
					ok = false
				} else {
					pc++
				}
			case opEnd:
				if pos != end {
					ok = false
				} else {
					pc++
				}
			}
			if !ok {
				break
			}
		}
	}
	return 0, false
}

// forgetRow clears the visited bits of position pos. After a match ending
// at pos, the states of the successful path may be visited at pos (and
// only there, among positions the next search can reach); every other
// visited state failed and fails again.
func (m *reMatcher) forgetRow(n, pos int) {
	for b, hi := (pos-m.base)*n, (pos-m.base+1)*n; b < hi; b++ {
		m.visited[b>>6] &^= 1 << (b & 63)
	}
}

// split applies prog to each piece of pieces (lengths in code points) and
// returns the new piece lengths.
func (m *reMatcher) split(prog *reProg, pieces []int) []int {
	n := len(prog.insts)
	out := make([]int, 0, len(pieces)*2)
	start := 0
	for _, size := range pieces {
		begin, end := start, start+size
		start = end
		// Visited bits for positions [begin, end] of this piece.
		need := ((size+1)*n + 63) / 64
		if cap(m.visited) < need {
			m.visited = make([]uint64, need)
		} else {
			m.visited = m.visited[:need]
			clear(m.visited)
		}
		m.base = begin
		last := begin // end of the previous match
		for pos := begin; pos < end; {
			me, ok := m.matchAt(prog, pos, begin, end)
			if !ok {
				pos++
				continue
			}
			if pos > last {
				out = append(out, pos-last)
			}
			out = append(out, me-pos)
			last = me
			m.forgetRow(n, me)
			pos = me
		}
		if last < end {
			out = append(out, end-last)
		}
	}
	return out
}
