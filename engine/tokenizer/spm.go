package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// metaSpace is SentencePiece's visible space, U+2581 LOWER ONE EIGHTH BLOCK.
const metaSpace = "\u2581"

// minMergeScore mirrors llama2.c run.c: a merge is taken only when its score
// is strictly greater than the running best, which starts at -1e10.
const minMergeScore = -1e10

// SentencePiece is a SentencePiece-style BPE tokenizer: pieces carry scores
// and adjacent pieces are merged highest score first, with byte fallback to
// <0xNN> pieces. It reproduces llama2.c run.c's encode exactly:
//
//   - a dummy-prefix space is prepended when the text is non-empty;
//   - the text is cut into UTF-8 code points the way run.c does it (a lead
//     byte plus at most three continuation bytes) and each one is looked up;
//     a code point that is not a piece becomes one byte token per byte;
//   - then, repeatedly, the adjacent pair whose concatenation is a piece with
//     the highest score is merged, the leftmost pair winning ties.
//
// The merge loop uses a priority queue over a linked list (O(n log n))
// instead of run.c's rescan (O(n²)); the result is identical. Byte-fallback
// tokens never take part in merges, and merges only produce normal or
// user-defined pieces, so text such as "<s>" or "<0x41>" never turns into a
// control or byte token (run.c could in principle, by string concatenation;
// no real vocabulary has such pieces).
//
// A SentencePiece is immutable and safe for concurrent use.
type SentencePiece struct {
	vocab
	pieces  []string
	scores  []float32
	lookup  map[string]int32
	byteID  [256]int32
	unk     int
	meta    bool // vocabulary writes spaces as U+2581
	prefix  bool // add the dummy-prefix space
	decoded [][]byte
	lead    []bool // decoded piece starts with a space that follows-BOS decoding strips
}

// NewSentencePiece builds a SentencePiece tokenizer from plain vocabulary
// data, as found in GGUF (tokenizer.ggml.tokens, .scores, .token_type,
// .bos_token_id, .eos_token_id, .unknown_token_id) or a llama2.c tokenizer
// file. scores may be nil (all zero). types may be nil, in which case they
// are inferred the llama2.c way: unk is TypeUnknown, bos and eos are
// TypeControl, pieces spelled <0xNN> are TypeByte and the rest TypeNormal.
// bos, eos and unk are -1 when absent.
//
// Spaces: the vocabulary is taken to use U+2581 for spaces (GGUF) when more
// normal pieces contain U+2581 than contain ' ' (llama2.c files store ASCII
// spaces); Encode then writes the input's spaces as U+2581 and Decode turns
// U+2581 back into spaces.
func NewSentencePiece(pieces []string, scores []float32, types []int32, bos, eos, unk int, opts ...Option) (*SentencePiece, error) {
	cfg := newConfig(opts)
	n := len(pieces)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if scores != nil && len(scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d pieces", len(scores), n)
	}
	if types != nil && len(types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d pieces", len(types), n)
	}
	for _, v := range []struct {
		name string
		id   int
	}{{"bos", bos}, {"eos", eos}, {"unk", unk}} {
		if v.id < -1 || v.id >= n {
			return nil, fmt.Errorf("tokenizer: %s token id %d outside vocabulary of %d", v.name, v.id, n)
		}
	}
	t := &SentencePiece{
		pieces:  pieces,
		scores:  scores,
		lookup:  make(map[string]int32, n),
		unk:     unk,
		prefix:  !cfg.noPrefix,
		decoded: make([][]byte, n),
		lead:    make([]bool, n),
	}
	if t.scores == nil {
		t.scores = make([]float32, n)
	}
	for i := range t.byteID {
		t.byteID[i] = -1
	}
	metaCount, spaceCount := 0, 0
	resolved := make([]int32, n)
	for i, p := range pieces {
		typ := int32(TypeNormal)
		if types != nil {
			typ = types[i]
			if typ == 0 {
				typ = TypeNormal
			}
		} else {
			switch _, isByte := parseBytePiece(p); {
			case i == unk:
				typ = TypeUnknown
			case i == bos || i == eos:
				typ = TypeControl
			case isByte:
				typ = TypeByte
			}
		}
		resolved[i] = typ
	}
	t.initVocab(pieces, resolved, bos, eos, cfg, true, false)
	var specials []specialText
	for i, p := range pieces {
		typ := t.types[i]
		switch typ {
		case TypeNormal, TypeUserDefined:
			if _, dup := t.lookup[p]; !dup {
				t.lookup[p] = int32(i)
			}
			if strings.Contains(p, metaSpace) {
				metaCount++
			}
			if strings.Contains(p, " ") {
				spaceCount++
			}
		case TypeByte:
			if b, ok := parseBytePiece(p); ok && t.byteID[b] < 0 {
				t.byteID[b] = int32(i)
			}
		}
		if typ == TypeControl || typ == TypeUnknown || typ == TypeUserDefined {
			s := p
			if types == nil {
				// llama2.c files store BOS as "\n<s>\n": match "<s>".
				s = strings.ReplaceAll(p, metaSpace, " ")
				if tr := strings.TrimSpace(s); tr != "" {
					s = tr
				}
			}
			specials = append(specials, specialText{text: s, id: i, control: typ != TypeUserDefined})
		}
	}
	stripAttrs(cfg.modelName, specials)
	t.meta = metaCount > spaceCount
	t.special = newSpecialMatcher(specials)
	t.setBound()
	for i, p := range pieces {
		switch t.types[i] {
		case TypeControl:
			// decodes to nothing
		case TypeByte:
			if b, ok := parseBytePiece(p); ok {
				t.decoded[i] = []byte{b}
			} else {
				t.decoded[i] = []byte(p)
			}
		default:
			s := strings.ReplaceAll(p, metaSpace, " ")
			t.decoded[i] = []byte(s)
			t.lead[i] = strings.HasPrefix(s, " ")
		}
	}
	return t, nil
}

// setBound computes the token bound from the vocabulary and the byte
// fallback (again when ReadLlama2C replaces it).
func (t *SentencePiece) setBound() {
	longest := 0
	for p := range t.lookup {
		longest = max(longest, len(p))
	}
	t.bound = newTokenBound(longest, t.special.toks, func(b byte) bool { return t.unk < 0 && t.byteID[b] < 0 })
}

// parseBytePiece parses "<0xNN>" (two hex digits, either case).
func parseBytePiece(p string) (byte, bool) {
	if len(p) != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(p[3])
	lo, ok2 := hexVal(p[4])
	if !ok1 || !ok2 {
		return 0, false
	}
	return hi<<4 | lo, true
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Score returns the merge score of id (0 when out of range).
func (t *SentencePiece) Score(id int) float32 {
	if id < 0 || id >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// Decode returns the bytes id contributes after prev, with llama2.c run.c
// semantics: a leading space is stripped when prev is BOS (or -1, the start
// of the output); <0xNN> pieces yield the raw byte; control tokens yield
// nothing; U+2581 becomes a space. Out-of-range ids yield nothing. The
// returned slice is shared and must not be modified.
func (t *SentencePiece) Decode(prev, id int) []byte {
	if id < 0 || id >= len(t.decoded) {
		return nil
	}
	b := t.decoded[id]
	if t.lead[id] && (prev < 0 || (prev == t.bos && t.bos >= 0)) {
		b = b[1:]
	}
	return b[:len(b):len(b)]
}

// Encode converts text to token ids. See the type's documentation for the
// algorithm. User-defined pieces are cut out of the text first; with
// opt.Special the texts of control and unknown pieces too (llama2.c's
// "\n<s>\n" is matched as "<s>"), and a dummy-prefix space is added to
// each text fragment that follows one, as llama.cpp does. Without
// opt.Special, user text never produces control tokens.
func (t *SentencePiece) Encode(text string, opt Options) ([]int, error) {
	return t.encode(text, opt, -1)
}

// EncodeLimit is Encode that may stop once the result is known to hold
// more than limit tokens (see LimitEncoder). The merges of a fragment
// (text between special tokens) depend on all of it, so a fragment is
// either refused by its length bound or encoded whole.
func (t *SentencePiece) EncodeLimit(text string, opt Options, limit int) ([]int, error) {
	return t.encode(text, opt, max(limit, 0))
}

// encode is Encode, stopping past limit tokens unless limit < 0. A
// fragment's merges depend on all of it: it is encoded whole.
func (t *SentencePiece) encode(text string, opt Options, limit int) ([]int, error) {
	raw := func(out []int, frag string, _ int) ([]int, bool) { return t.encodeRaw(out, frag), false }
	return t.encodeFrags(text, opt, limit, len(text)/2+3, raw)
}

// spSym is one symbol of the merge list: a span of the normalized text
// holding token id, linked to its neighbours. Dead symbols have start == end.
// cand is the token the symbol and its right neighbour would merge into, or
// -1; it is kept current so that queue entries can be checked for staleness.
type spSym struct {
	start, end int32
	id         int32
	prev, next int32
	cand       int32
	merge      bool // may take part in merges (false for byte fallback)
}

// spKey packs a queue entry into one uint64 whose ascending order is the
// merge order: higher score first, then the leftmost pair.
func spKey(score float32, left int32) uint64 {
	return uint64(^orderedBits(score))<<32 | uint64(uint32(left))
}

// orderedBits maps a float32 to a uint32 with the same order (-0 == +0).
func orderedBits(f float32) uint32 {
	if f == 0 {
		f = 0
	}
	b := math.Float32bits(f)
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}

// u64Heap is a binary min-heap.
type u64Heap []uint64

func (h *u64Heap) push(k uint64) {
	*h = append(*h, k)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p] <= k {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = k
}

func (h *u64Heap) pop() uint64 {
	a := *h
	top := a[0]
	n := len(a) - 1
	k := a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && a[r] < a[l] {
			l = r
		}
		if k <= a[l] {
			break
		}
		a[i] = a[l]
		i = l
	}
	if n > 0 {
		a[i] = k
	}
	*h = a
	return top
}

// encodeRaw appends the tokens of one text fragment (no special tokens).
func (t *SentencePiece) encodeRaw(out []int, text string) []int {
	if text == "" {
		return out
	}
	if t.meta {
		text = strings.ReplaceAll(text, " ", metaSpace)
	}
	// The dummy prefix is a symbol of its own, as in run.c (which pushes
	// the " " token before looking at the text): it never joins a
	// continuation byte that starts the text.
	prefixLen := 0
	if t.prefix {
		sp := " "
		if t.meta {
			sp = metaSpace
		}
		text = sp + text
		prefixLen = len(sp)
	}
	syms := make([]spSym, 0, len(text))
	n := len(text)
	for i := 0; i < n; {
		// run.c: a lead byte plus at most three continuation bytes.
		j := i + 1
		if i == 0 && prefixLen > 0 {
			j = prefixLen
		} else {
			for j < n && text[j]&0xC0 == 0x80 && j-i < 4 {
				j++
			}
		}
		if id, ok := t.lookup[text[i:j]]; ok {
			syms = append(syms, spSym{start: int32(i), end: int32(j), id: id, merge: true})
		} else {
			for k := i; k < j; k++ {
				id := t.byteID[text[k]]
				if id < 0 {
					if t.unk < 0 {
						// No <0xNN> piece and no unknown token.
						t.dropped.Add(1)
						continue
					}
					id = int32(t.unk)
				}
				syms = append(syms, spSym{start: int32(k), end: int32(k + 1), id: id})
			}
		}
		i = j
	}
	for i := range syms {
		syms[i].prev = int32(i - 1)
		syms[i].next = int32(i + 1)
	}
	syms[len(syms)-1].next = -1

	q := make(u64Heap, 0, len(syms))
	// setCand recomputes the merge candidate of l and its right neighbour
	// and queues it.
	setCand := func(l int32) {
		if l < 0 {
			return
		}
		sl := &syms[l]
		sl.cand = -1
		r := sl.next
		if r < 0 || !sl.merge || !syms[r].merge {
			return
		}
		id, ok := t.lookup[text[sl.start:syms[r].end]]
		if !ok {
			return
		}
		sc := t.scores[id]
		if !(sc > minMergeScore) {
			return
		}
		sl.cand = id
		q.push(spKey(sc, l))
	}
	for i := range syms {
		setCand(int32(i))
	}
	for len(q) > 0 {
		k := q.pop()
		li := int32(uint32(k))
		l := &syms[li]
		// Stale unless l is alive and its current candidate has the queued
		// score. (A stale entry whose score equals the current candidate's
		// is harmless: that candidate is queued with the same key.)
		if l.start == l.end || l.cand < 0 || ^orderedBits(t.scores[l.cand]) != uint32(k>>32) {
			continue
		}
		r := &syms[l.next]
		l.end = r.end
		l.id = l.cand
		r.end = r.start
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = li
		}
		setCand(l.prev)
		setCand(li)
	}
	if len(syms) == 0 {
		return out
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, int(syms[i].id))
	}
	return out
}

var (
	_ Tokenizer    = (*SentencePiece)(nil)
	_ LimitEncoder = (*SentencePiece)(nil)
)
