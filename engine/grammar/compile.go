package grammar

import (
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

type elemKind uint8

const (
	eEnd      elemKind = iota // end of an alternative
	eByte                     // one byte in sets[arg]
	eRule                     // rules[arg]
	eToken                    // the one token tokens[arg] names
	eTokenNot                 // any one ordinary token but tokens[arg]
)

type elem struct {
	kind elemKind
	arg  int32
}

// byteSet is a set of byte values.
type byteSet [4]uint64

func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) add(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

type rule struct {
	name string // the user's rule; helper rules carry the name of the rule they came from
	alts []int32
	line int
	col  int
}

// Grammar is a compiled grammar: rules whose alternatives are sequences of
// byte classes and rule references, with characters already spelled as
// UTF-8 bytes. It is immutable and safe for concurrent use.
type Grammar struct {
	elems []elem
	rules []rule
	sets  []byteSet
	root  int32
	src   string
	// tokens are the token references, resolved per vocabulary (their
	// ids live in the vocabulary's maskCache).
	tokens []tokenElem

	// Masks computed for this grammar, per vocabulary, shared by all its
	// matchers: a server that keeps compiled grammars pays for a state once.
	cacheMu sync.Mutex
	caches  map[*Vocab]*maskCache
}

func (g *Grammar) cacheFor(v *Vocab) *maskCache {
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	c, ok := g.caches[v]
	if !ok {
		if g.caches == nil {
			g.caches = map[*Vocab]*maskCache{}
		}
		c = &maskCache{masks: map[string][]uint64{}}
		if len(g.tokens) > 0 && v != nil {
			if c.ids, c.err = g.resolveTokens(v); c.err != nil {
				c.err = asTokenError(c.err)
			}
		}
		g.caches[v] = c
	}
	return c
}

// resetCache forgets every computed mask (for benchmarks).
func (g *Grammar) resetCache() {
	g.cacheMu.Lock()
	g.caches = nil
	g.cacheMu.Unlock()
}

// String returns the GBNF text the grammar was parsed from.
func (g *Grammar) String() string { return g.src }

// Parse compiles a GBNF grammar (llama.cpp's format) whose start rule is
// root. Errors wrap ErrInvalidGrammar and, when they concern a place in
// the text, are *SyntaxError with its line and column.
func Parse(src string) (*Grammar, error) {
	p := &parser{src: src}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if len(p.rules) == 0 {
		return nil, &SyntaxError{Msg: "empty grammar"}
	}
	b := &builder{
		g:      &Grammar{src: src},
		byName: map[string]int32{},
		setIdx: map[byteSet]int32{},
		class:  map[string]int32{},
	}
	for _, r := range p.rules {
		if first, dup := b.byName[r.name]; dup {
			fr := b.g.rules[first]
			return nil, &SyntaxError{Line: r.line, Column: r.col,
				Msg: fmt.Sprintf("rule %q defined twice (first at line %d)", r.name, fr.line)}
		}
		b.byName[r.name] = int32(len(b.g.rules))
		b.g.rules = append(b.g.rules, rule{name: r.name, line: r.line, col: r.col})
	}
	root, ok := b.byName["root"]
	if !ok {
		return nil, &SyntaxError{Msg: "no root rule"}
	}
	b.g.root = root
	for i, r := range p.rules {
		if err := b.ruleBody(int32(i), r.body); err != nil {
			return nil, err
		}
		if b.err != nil {
			return nil, b.err
		}
	}
	if err := b.g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return b.g, nil
}

// maxElems bounds a compiled grammar (16 MiB of elements): counted
// repetitions multiply, and a grammar is user input.
const maxElems = 1 << 21

var errTooBig = &SyntaxError{Msg: fmt.Sprintf("grammar too large (more than %d elements after expanding repetitions)", maxElems)}

type builder struct {
	err    error // errTooBig once the limit is passed
	g      *Grammar
	byName map[string]int32
	setIdx map[byteSet]int32
	class  map[string]int32 // helper rules of non-ASCII classes, by ranges
}

func (b *builder) set(s byteSet) int32 {
	if i, ok := b.setIdx[s]; ok {
		return i
	}
	i := int32(len(b.g.sets))
	b.g.sets = append(b.g.sets, s)
	b.setIdx[s] = i
	return i
}

// newRule adds an empty helper rule made for a part of rule owner.
func (b *builder) newRule(owner int32, n *node) int32 {
	o := b.g.rules[owner]
	i := int32(len(b.g.rules))
	b.g.rules = append(b.g.rules, rule{name: o.name, line: n.line, col: n.col})
	return i
}

// addAlt appends one alternative (its elements and an end) to rule r.
func (b *builder) addAlt(r int32, seq []elem) {
	if len(b.g.elems)+len(seq) >= maxElems {
		b.err = errTooBig
		seq = nil
	}
	b.g.rules[r].alts = append(b.g.rules[r].alts, int32(len(b.g.elems)))
	b.g.elems = append(b.g.elems, seq...)
	b.g.elems = append(b.g.elems, elem{kind: eEnd})
}

func (b *builder) ruleBody(r int32, body *node) error {
	for _, alt := range body.kids {
		seq, err := b.seq(r, alt, nil)
		if err != nil {
			return err
		}
		b.addAlt(r, seq)
	}
	return nil
}

// seq appends the elements of n to out. Rules made for n's parts belong to
// owner.
func (b *builder) seq(owner int32, n *node, out []elem) ([]elem, error) {
	switch n.kind {
	case nSeq:
		for _, k := range n.kids {
			var err error
			if out, err = b.seq(owner, k, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	case nLit:
		for _, c := range n.lit {
			var s byteSet
			s.add(c, c)
			out = append(out, elem{eByte, b.set(s)})
		}
		return out, nil
	case nAlt:
		if len(n.kids) == 1 {
			return b.seq(owner, n.kids[0], out)
		}
	}
	e, err := b.unit(owner, n)
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}

// unit returns one element matching n: a byte class or a rule.
func (b *builder) unit(owner int32, n *node) (elem, error) {
	switch n.kind {
	case nRef:
		r, ok := b.byName[n.name]
		if !ok {
			return elem{}, &SyntaxError{Line: n.line, Column: n.col, Msg: fmt.Sprintf("undefined rule %q", n.name)}
		}
		return elem{eRule, r}, nil
	case nClass:
		return b.classUnit(owner, n), nil
	case nLit:
		if len(n.lit) == 1 {
			var s byteSet
			s.add(n.lit[0], n.lit[0])
			return elem{eByte, b.set(s)}, nil
		}
	case nRepeat:
		return b.repeat(owner, n)
	case nToken:
		kind := eToken
		if n.tok.neg {
			kind = eTokenNot
		}
		b.g.tokens = append(b.g.tokens, tokenElem{ref: n.tok, line: n.line, col: n.col})
		return elem{kind, int32(len(b.g.tokens) - 1)}, nil
	}
	// A sequence, a literal or a group: a rule of its own.
	r := b.newRule(owner, n)
	if n.kind == nAlt {
		if err := b.ruleBody(r, n); err != nil {
			return elem{}, err
		}
	} else {
		seq, err := b.seq(owner, n, nil)
		if err != nil {
			return elem{}, err
		}
		b.addAlt(r, seq)
	}
	return elem{eRule, r}, nil
}

func (b *builder) repeat(owner int32, n *node) (elem, error) {
	x, err := b.unit(owner, n.kids[0])
	if err != nil {
		return elem{}, err
	}
	if len(b.g.elems)+n.min+2*max(n.max-n.min, 0) >= maxElems {
		return elem{}, errTooBig
	}
	var pre []elem
	for range n.min {
		pre = append(pre, x)
	}
	var tail []elem
	switch {
	case n.max < 0:
		// star ::= x star | (empty)
		star := b.newRule(owner, n)
		b.addAlt(star, []elem{x, {eRule, star}})
		b.addAlt(star, nil)
		tail = []elem{{eRule, star}}
	case n.max > n.min:
		// opt_k ::= x opt_(k-1) | (empty), opt_1 ::= x | (empty)
		var prev []elem
		for range n.max - n.min {
			o := b.newRule(owner, n)
			b.addAlt(o, append([]elem{x}, prev...))
			b.addAlt(o, nil)
			prev = []elem{{eRule, o}}
		}
		tail = prev
	}
	seq := append(pre, tail...)
	if len(seq) == 1 {
		return seq[0], nil
	}
	r := b.newRule(owner, n)
	b.addAlt(r, seq)
	return elem{eRule, r}, nil
}

// classUnit compiles a character class over codepoints into UTF-8 byte
// classes: a single byte class when it holds only ASCII, else a rule with
// one alternative per UTF-8 byte pattern.
func (b *builder) classUnit(owner int32, n *node) elem {
	rs := normalize(n.ranges, n.neg)
	key := fmt.Sprint(rs)
	if r, ok := b.class[key]; ok {
		return elem{eRule, r}
	}
	seqs := utf8Sequences(rs)
	if len(seqs) == 1 && len(seqs[0]) == 1 {
		return elem{eByte, b.set(seqs[0][0])}
	}
	r := b.newRule(owner, n)
	for _, s := range seqs {
		seq := make([]elem, len(s))
		for i, set := range s {
			seq[i] = elem{eByte, b.set(set)}
		}
		b.addAlt(r, seq)
	}
	b.class[key] = r
	return elem{eRule, r}
}

// normalize sorts and merges ranges, complements them when neg, and drops
// the surrogates, which UTF-8 cannot carry.
func normalize(in []cpRange, neg bool) []cpRange {
	rs := slices.Clone(in)
	slices.SortFunc(rs, func(a, b cpRange) int { return int(a.lo - b.lo) })
	var m []cpRange
	for _, r := range rs {
		if len(m) > 0 && r.lo <= m[len(m)-1].hi+1 {
			m[len(m)-1].hi = max(m[len(m)-1].hi, r.hi)
			continue
		}
		m = append(m, r)
	}
	if neg {
		var c []cpRange
		next := rune(0)
		for _, r := range m {
			if r.lo > next {
				c = append(c, cpRange{next, r.lo - 1})
			}
			next = r.hi + 1
		}
		if next <= utf8.MaxRune {
			c = append(c, cpRange{next, utf8.MaxRune})
		}
		m = c
	}
	var out []cpRange
	for _, r := range m {
		if r.lo <= 0xDFFF && r.hi >= 0xD800 {
			if r.lo < 0xD800 {
				out = append(out, cpRange{r.lo, 0xD7FF})
			}
			if r.hi > 0xDFFF {
				out = append(out, cpRange{0xE000, r.hi})
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// checkLeftRecursion refuses a rule that can reach itself without
// consuming a byte: expanding it would never end.
func (g *Grammar) checkLeftRecursion() error {
	nullable := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r := range g.rules {
			if nullable[r] {
				continue
			}
			for _, a := range g.rules[r].alts {
				if g.nullableFrom(a, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// state: 0 unvisited, 1 on the path, 2 done.
	state := make([]uint8, len(g.rules))
	var visit func(r int32) error
	visit = func(r int32) error {
		state[r] = 1
		for _, a := range g.rules[r].alts {
			for p := a; g.elems[p].kind == eRule; p++ {
				s := g.elems[p].arg
				switch state[s] {
				case 1:
					rr := g.rules[s]
					return &SyntaxError{Line: rr.line, Column: rr.col,
						Msg: fmt.Sprintf("rule %q is left-recursive (it can reach itself without consuming input)", rr.name)}
				case 0:
					if err := visit(s); err != nil {
						return err
					}
				}
				if !nullable[s] {
					break
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range g.rules {
		if state[r] == 0 {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *Grammar) nullableFrom(p int32, nullable []bool) bool {
	for ; ; p++ {
		switch e := g.elems[p]; e.kind {
		case eEnd:
			return true
		case eByte, eToken, eTokenNot:
			return false
		case eRule:
			if !nullable[e.arg] {
				return false
			}
		}
	}
}
