package grammar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

var (
	// ErrTokenRejected is wrapped by Accept's error for a token the
	// grammar does not allow here; the Matcher is unchanged.
	ErrTokenRejected = errors.New("grammar: token not allowed here")
	// ErrDeadEnd is returned by Allowed when no token can continue the
	// output and the grammar cannot end here (the vocabulary lacks the
	// bytes the grammar needs). The request cannot go on.
	ErrDeadEnd = errors.New("grammar: no token can continue the output and the grammar cannot end here")
	// ErrFinished is returned by Accept after an end-of-generation token.
	ErrFinished = errors.New("grammar: generation already ended")

	errNoVocab = errors.New("grammar: matcher has no vocabulary")
)

// snode is one frame of a parse stack: the element to match next (pos)
// and the frame below it (next, -1 at the bottom). Frames live in the
// Matcher's arena and are shared between stacks.
type snode struct{ pos, next int32 }

// Matcher follows one output through a grammar, token by token. It is the
// set of parse stacks (llama.cpp's design) whose tops are byte classes,
// so multi-byte characters, and characters split across tokens, are
// matched byte by byte. A Matcher is for one goroutine at a time; Clone
// gives an independent copy.
type Matcher struct {
	g *Grammar
	v *Vocab

	nodes  []snode
	tops   []int32 // stack tops, deduplicated
	accept bool    // some stack is empty: the grammar can end here
	done   bool    // an end-of-generation token was accepted

	cache *maskCache

	key   []byte
	remap []int32
	w     walker
}

// walker is the scratch of Allowed's trie walk: while it runs, stack
// frames are interned (structurally equal stacks share one index), so a
// set of stacks is a comparable state and the walk builds, lazily, the
// deterministic automaton of the grammar from the current state: each
// (state, byte) transition is computed once per walk, however many
// tokens share it.
type walker struct {
	interning bool
	intern    map[snode]int32
	ids       map[string]int32 // sorted tops -> state
	tops      [][]int32        // per state
	acc       []bool           // per state
	trans     []int32          // 256 per state: 0 unknown, -1 dead, else state+1
	depth     []int32          // state at each trie depth
	buf       []int32
	kb        []byte
	// Per state: how many trie nodes it reached, and once that passes
	// loopAfter, the bytes on which it goes back to itself (loopKnown).
	visits    []int32
	loop      []byteSet
	loopKnown []bool
}

// loopAfter is how many trie nodes a state must reach before the walk
// works out its self-loop bytes (256 transitions) to skip whole subtrees.
const loopAfter = 64

// maskCache maps a matcher state to the tokens it allows, for one grammar
// and vocabulary.
type maskCache struct {
	mu    sync.Mutex
	masks map[string][]uint64
	bytes int

	// ids are the grammar's token references resolved for the vocabulary;
	// err, when they do not resolve, fails every Allowed and Accept.
	ids []int32
	err error
}

// maxCacheBytes bounds a cache: past it the cache starts over.
const maxCacheBytes = 32 << 20

// NewMatcher returns a Matcher at the start of g's root rule, for tokens
// of v. With a nil v only AcceptBytes and CanEnd work (matching text).
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	m := &Matcher{g: g, v: v, cache: g.cacheFor(v)}
	acc := false
	m.tops = m.expand(g.rules[g.root].alts, -1, m.tops, &acc)
	m.accept = acc
	return m
}

// Clone returns an independent copy of m in the same state (sharing the
// immutable grammar and vocabulary, and the mask cache).
func (m *Matcher) Clone() *Matcher {
	c := &Matcher{g: m.g, v: m.v, accept: m.accept, done: m.done, cache: m.cache}
	c.nodes = slices.Clone(m.nodes)
	c.tops = slices.Clone(m.tops)
	return c
}

// CanEnd reports whether the output so far is a complete sentence of the
// grammar, so that an end-of-generation token may come next.
func (m *Matcher) CanEnd() bool { return m.accept && !m.done }

// Done reports whether an end-of-generation token was accepted.
func (m *Matcher) Done() bool { return m.done }

func (m *Matcher) push(pos, next int32) int32 {
	if m.w.interning {
		if i, ok := m.w.intern[snode{pos, next}]; ok {
			return i
		}
	}
	m.nodes = append(m.nodes, snode{pos, next})
	i := int32(len(m.nodes) - 1)
	if m.w.interning {
		m.w.intern[snode{pos, next}] = i
	}
	return i
}

// same reports whether two stacks hold the same frames.
func (m *Matcher) same(a, b int32) bool {
	for a != b {
		if a < 0 || b < 0 {
			return false
		}
		na, nb := m.nodes[a], m.nodes[b]
		if na.pos != nb.pos {
			return false
		}
		a, b = na.next, nb.next
	}
	return true
}

// expand adds to tops the stacks that start each alternative at alts on
// top of rest, with rule references expanded until every top is a byte
// class. An alternative that completes the whole stack sets *acc.
func (m *Matcher) expand(alts []int32, rest int32, tops []int32, acc *bool) []int32 {
	for _, a := range alts {
		tops = m.expandAt(a, rest, tops, acc)
	}
	return tops
}

func (m *Matcher) expandAt(pos, rest int32, tops []int32, acc *bool) []int32 {
	g := m.g
	for {
		e := g.elems[pos]
		switch e.kind {
		case eEnd:
			if rest < 0 {
				*acc = true
				return tops
			}
			n := m.nodes[rest]
			pos, rest = n.pos, n.next
		case eByte, eToken, eTokenNot:
			// Terminals: a byte class, or a whole token.
			if m.w.interning {
				// Interned: equal stacks are equal indexes.
				t := m.push(pos, rest)
				if slices.Contains(tops, t) {
					return tops
				}
				return append(tops, t)
			}
			for _, t := range tops {
				if n := m.nodes[t]; n.pos == pos && m.same(n.next, rest) {
					return tops
				}
			}
			return append(tops, m.push(pos, rest))
		case eRule:
			cont := rest
			// A reference at the end of an alternative needs no frame to
			// come back to: this keeps right recursion (repetition) flat.
			if g.elems[pos+1].kind != eEnd {
				cont = m.push(pos+1, rest)
			}
			return m.expand(g.rules[e.arg].alts, cont, tops, acc)
		}
	}
}

// advance appends to dst the stacks of src that take byte c, moved past it.
func (m *Matcher) advance(src []int32, c byte, dst []int32, acc *bool) []int32 {
	g := m.g
	for _, t := range src {
		n := m.nodes[t]
		// A token reference is never matched byte by byte.
		if e := g.elems[n.pos]; e.kind == eByte && g.sets[e.arg].has(c) {
			dst = m.expandAt(n.pos+1, n.next, dst, acc)
		}
	}
	return dst
}

// AcceptBytes moves the matcher past b, or returns an error wrapping
// ErrTokenRejected and leaves it unchanged when the grammar does not allow
// b here.
func (m *Matcher) AcceptBytes(b []byte) error {
	if m.done {
		return ErrFinished
	}
	base := len(m.nodes)
	if len(b) == 0 {
		return nil
	}
	tops, acc, err := m.advanceBytes(m.tops, b)
	if err != nil {
		m.nodes = m.nodes[:base]
		return err
	}
	m.tops, m.accept = tops, acc
	m.compact()
	return nil
}

// advanceBytes returns the stacks of tops that take all of b, moved past
// it (a new slice), and whether the grammar can end after b.
func (m *Matcher) advanceBytes(tops []int32, b []byte) ([]int32, bool, error) {
	acc := false
	for i, c := range b {
		acc = false
		tops = m.advance(tops, c, nil, &acc)
		if len(tops) == 0 && !(acc && i == len(b)-1) {
			return nil, false, fmt.Errorf("%w: byte %d (%q) of %q", ErrTokenRejected, i, c, b)
		}
	}
	return tops, acc, nil
}

// advanceToken appends to dst the stacks of src whose top is a token
// reference that id matches, moved past it.
func (m *Matcher) advanceToken(src []int32, id int32, dst []int32, acc *bool) []int32 {
	g := m.g
	ids := m.cache.ids
	for _, t := range src {
		n := m.nodes[t]
		e := g.elems[n.pos]
		switch {
		case e.kind == eToken && ids[e.arg] == id,
			e.kind == eTokenNot && ids[e.arg] != id && m.v.ordinary[id>>6]&(1<<(id&63)) != 0:
			dst = m.expandAt(n.pos+1, n.next, dst, acc)
		}
	}
	return dst
}

// Accept moves the matcher past token id. An end-of-generation token is
// accepted only where CanEnd; after it the matcher is Done. Other special
// tokens are never accepted. On error the matcher is unchanged.
func (m *Matcher) Accept(id int) error {
	if m.done {
		return ErrFinished
	}
	v := m.v
	if v == nil {
		return errNoVocab
	}
	if id < 0 || id >= v.n {
		return fmt.Errorf("%w: token %d outside vocabulary of %d", ErrTokenRejected, id, v.n)
	}
	if slices.Contains(v.eog, id) {
		if !m.CanEnd() {
			return fmt.Errorf("%w: end of generation (token %d) before the grammar is complete", ErrTokenRejected, id)
		}
		m.done = true
		return nil
	}
	if m.cache.err != nil {
		return m.cache.err
	}
	base := len(m.nodes)
	var tops []int32
	acc := false
	var byteErr error
	if !v.special[id] && len(v.pieces[id]) > 0 {
		tops, acc, byteErr = m.advanceBytes(m.tops, v.pieces[id])
	}
	if len(m.g.tokens) > 0 {
		// Stacks waiting for a whole token: the same stacks may also have
		// come through the bytes, so expandAt's deduplication applies.
		tops = m.advanceToken(m.tops, int32(id), tops, &acc)
	}
	if len(tops) == 0 && !acc {
		m.nodes = m.nodes[:base]
		switch {
		case byteErr != nil:
			return fmt.Errorf("token %d: %w", id, byteErr)
		case v.special[id]:
			return fmt.Errorf("%w: special token %d (a grammar allows one only where a token reference names it)", ErrTokenRejected, id)
		case len(v.pieces[id]) == 0:
			return fmt.Errorf("%w: token %d is empty", ErrTokenRejected, id)
		}
		return fmt.Errorf("%w: token %d", ErrTokenRejected, id)
	}
	m.tops, m.accept = tops, acc
	m.compact()
	return nil
}

// compact copies the live frames to the front of the arena, dropping the
// ones earlier states and walks left behind.
func (m *Matcher) compact() {
	if cap(m.remap) < len(m.nodes) {
		m.remap = make([]int32, len(m.nodes))
	}
	remap := m.remap[:len(m.nodes)]
	for i := range remap {
		remap[i] = -1
	}
	var out []snode
	var move func(i int32) int32
	move = func(i int32) int32 {
		if i < 0 {
			return -1
		}
		if remap[i] >= 0 {
			return remap[i]
		}
		n := m.nodes[i]
		next := move(n.next)
		out = append(out, snode{n.pos, next})
		remap[i] = int32(len(out) - 1)
		return remap[i]
	}
	for k, t := range m.tops {
		m.tops[k] = move(t)
	}
	m.nodes = append(m.nodes[:0], out...)
}

// stateKey encodes the set of stacks, independent of arena layout and
// order, as the mask cache's key.
func (m *Matcher) stateKey() []byte {
	type enc struct{ lo, hi int }
	buf := m.key[:0]
	var spans []enc
	for _, t := range m.tops {
		lo := len(buf)
		for ; t >= 0; t = m.nodes[t].next {
			buf = binary.AppendUvarint(buf, uint64(m.nodes[t].pos)+1)
		}
		buf = append(buf, 0)
		spans = append(spans, enc{lo, len(buf)})
	}
	slices.SortFunc(spans, func(a, b enc) int { return compareBytes(buf[a.lo:a.hi], buf[b.lo:b.hi]) })
	key := make([]byte, 0, len(buf)+1)
	for _, s := range spans {
		key = append(key, buf[s.lo:s.hi]...)
	}
	m.key = buf
	return key
}

func compareBytes(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}

// Allowed sets in mask (MaskWords long; bit id%64 of word id/64) exactly
// the tokens that may come next: the tokens whose whole byte string keeps
// the grammar alive, and the end-of-generation tokens where CanEnd. It
// returns ErrDeadEnd when it allows none and the grammar cannot end. Masks are cached by state, so a
// state seen before costs a copy.
func (m *Matcher) Allowed(mask []uint64) error {
	if m.v == nil {
		return errNoVocab
	}
	if len(mask) < m.v.MaskWords() {
		return fmt.Errorf("grammar: mask of %d words for a vocabulary of %d tokens", len(mask), m.v.n)
	}
	clear(mask)
	if m.done {
		return ErrFinished
	}
	if m.cache.err != nil {
		return m.cache.err
	}
	any := false
	if len(m.tops) > 0 {
		key := m.stateKey()
		m.cache.mu.Lock()
		cached, ok := m.cache.masks[string(key)]
		m.cache.mu.Unlock()
		if !ok {
			cached = make([]uint64, m.v.MaskWords())
			m.walk(cached)
			m.tokenMask(cached)
			m.cache.mu.Lock()
			if m.cache.bytes > maxCacheBytes {
				clear(m.cache.masks)
				m.cache.bytes = 0
			}
			m.cache.masks[string(key)] = cached
			m.cache.bytes += 8*len(cached) + len(key)
			m.cache.mu.Unlock()
		}
		for i, w := range cached {
			mask[i] = w
			if w != 0 {
				any = true
			}
		}
	}
	if m.accept {
		for _, id := range m.v.eog {
			mask[id>>6] |= 1 << (id & 63)
			any = true
		}
	}
	if !any && !m.accept {
		return ErrDeadEnd
	}
	return nil
}

// walk sets in mask the tokens the current stacks allow, walking the
// vocabulary trie depth first and skipping every subtree whose prefix no
// stack takes.
func (m *Matcher) walk(mask []uint64) {
	v := m.v
	w := &m.w
	base := int32(len(m.nodes))
	w.interning = true
	if w.intern == nil {
		w.intern = map[snode]int32{}
		w.ids = map[string]int32{}
	}
	var root []int32
	for _, t := range m.tops {
		root = append(root, m.internChain(t))
	}
	w.tops, w.acc, w.trans = w.tops[:0], w.acc[:0], w.trans[:0]
	w.visits, w.loop, w.loopKnown = w.visits[:0], w.loop[:0], w.loopKnown[:0]
	if cap(w.depth) < v.maxDepth+1 {
		w.depth = make([]int32, v.maxDepth+1)
	}
	w.depth = w.depth[:v.maxDepth+1]
	w.depth[0] = m.state(root, false)
	trans := w.trans
	for i := int32(1); i < int32(len(v.tb)); {
		d := v.tdepth[i]
		from := w.depth[d-1]
		c := v.tb[i]
		next := trans[int(from)<<8|int(c)]
		if next == 0 {
			next = m.step(from, c)
			trans = w.trans
		}
		if next < 0 {
			i = v.tend[i]
			continue
		}
		st := next - 1
		if sub := v.sub[i]; sub != 0 {
			if !w.loopKnown[st] {
				if w.visits[st]++; w.visits[st] == loopAfter {
					m.computeLoop(st)
					trans = w.trans
				}
			}
			if w.loopKnown[st] && subsetOf(&v.subSets[sub], &w.loop[st]) {
				// Every descendant stays in this state: all allowed.
				for _, id := range v.toks[v.tlo[i]:v.tlo[v.tend[i]]] {
					mask[id>>6] |= 1 << (id & 63)
				}
				i = v.tend[i]
				continue
			}
		}
		for _, id := range v.nodeToks(i) {
			mask[id>>6] |= 1 << (id & 63)
		}
		if len(w.tops[st]) == 0 {
			i = v.tend[i]
			continue
		}
		w.depth[d] = st
		i++
	}
	w.interning = false
	clear(w.intern)
	clear(w.ids)
	m.nodes = m.nodes[:base]
}

// internChain returns the interned copy of stack t.
func (m *Matcher) internChain(t int32) int32 {
	if t < 0 {
		return -1
	}
	n := m.nodes[t]
	return m.push(n.pos, m.internChain(n.next))
}

// state returns the walk state of a set of interned stacks.
func (m *Matcher) state(tops []int32, acc bool) int32 {
	w := &m.w
	slices.Sort(tops)
	w.kb = w.kb[:0]
	if acc {
		w.kb = append(w.kb, 1)
	} else {
		w.kb = append(w.kb, 0)
	}
	for _, t := range tops {
		w.kb = binary.LittleEndian.AppendUint32(w.kb, uint32(t))
	}
	if id, ok := w.ids[string(w.kb)]; ok {
		return id
	}
	id := int32(len(w.tops))
	w.ids[string(w.kb)] = id
	w.tops = append(w.tops, slices.Clone(tops))
	w.acc = append(w.acc, acc)
	for range 256 {
		w.trans = append(w.trans, 0)
	}
	w.visits = append(w.visits, 0)
	w.loop = append(w.loop, byteSet{})
	w.loopKnown = append(w.loopKnown, false)
	return id
}

// computeLoop finds the bytes on which state st goes back to itself.
func (m *Matcher) computeLoop(st int32) {
	w := &m.w
	var loop byteSet
	for c := range 256 {
		next := w.trans[int(st)<<8|c]
		if next == 0 {
			next = m.step(st, byte(c))
		}
		if next == st+1 {
			loop.add(byte(c), byte(c))
		}
	}
	w.loop[st] = loop
	w.loopKnown[st] = true
}

func subsetOf(a, b *byteSet) bool {
	return a[0]&^b[0] == 0 && a[1]&^b[1] == 0 && a[2]&^b[2] == 0 && a[3]&^b[3] == 0
}

// step computes and records the transition of state from on byte c:
// -1 when no stack takes c, else the next state + 1.
func (m *Matcher) step(from int32, c byte) int32 {
	w := &m.w
	acc := false
	w.buf = m.advance(w.tops[from], c, w.buf[:0], &acc)
	next := int32(-1)
	if len(w.buf) > 0 || acc {
		next = m.state(w.buf, acc) + 1
	}
	w.trans[int(from)<<8|int(c)] = next
	return next
}

// tokenMask adds to mask the tokens that the stacks waiting for a whole
// token allow.
func (m *Matcher) tokenMask(mask []uint64) {
	if len(m.g.tokens) == 0 {
		return
	}
	ids := m.cache.ids
	for _, t := range m.tops {
		e := m.g.elems[m.nodes[t].pos]
		switch e.kind {
		case eToken:
			id := ids[e.arg]
			mask[id>>6] |= 1 << (id & 63)
		case eTokenNot:
			id := ids[e.arg]
			for i, w := range m.v.ordinary {
				if i == int(id>>6) {
					w &^= 1 << (id & 63)
				}
				mask[i] |= w
			}
		}
	}
}
