package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// GPT2 is a GPT-2 style byte-level BPE tokenizer (GGUF tokenizer.ggml.model
// = "gpt2", as used by Llama 3). Text is split into pre-tokens by a
// pre-tokenizer pattern, each pre-token's bytes are mapped to printable
// characters with GPT-2's byte-to-unicode table, and adjacent symbols are
// merged lowest merge rank first (leftmost on ties), as llama.cpp and
// Hugging Face tokenizers do.
//
// A GPT2 is immutable and safe for concurrent use.
type GPT2 struct {
	vocab
	lookup  map[string]int32
	byteTok [256]int32 // token of each byte's mapped character
	merges  map[uint64]gpt2Merge
	pre     string
	split   *preTokenizer
	// ignoreMerges: a pre-token that is itself a token is emitted as is
	// (Llama 3's "ignore_merges": true).
	ignoreMerges bool
	decoded      [][]byte
}

type gpt2Merge struct {
	rank int32
	id   int32
}

// byteToRune is GPT-2's bytes_to_unicode table: printable Latin-1 bytes map
// to themselves, the others to U+0100 and up in order.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// ErrUnknownPreTokenizer is returned for a tokenizer.ggml.pre that
// llama.cpp does not know either.
var ErrUnknownPreTokenizer = errors.New("tokenizer: unknown pre-tokenizer")

// NewGPT2 builds a byte-level BPE tokenizer from plain vocabulary data, as
// found in GGUF: tokens (tokenizer.ggml.tokens, in byte-mapped form), types
// (tokenizer.ggml.token_type; nil means all normal), merges
// (tokenizer.ggml.merges, "left right", highest priority first), bos and
// eos (-1 when absent) and pre (tokenizer.ggml.pre): "llama-bpe", "llama3"
// or "llama-v3" select the Llama 3 pattern; "gpt2", "gpt-2", "default" or
// "" the GPT-2 pattern. Other names are an error rather than a silently
// different split.
//
// Merges whose parts or result are not in the vocabulary are ignored (they
// could never produce a token).
func NewGPT2(tokens []string, types []int32, merges []string, bos, eos int, pre string, opts ...Option) (*GPT2, error) {
	cfg := newConfig(opts)
	n := len(tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if types != nil && len(types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(types), n)
	}
	if bos < -1 || bos >= n {
		return nil, fmt.Errorf("tokenizer: bos token id %d outside vocabulary of %d", bos, n)
	}
	if eos < -1 || eos >= n {
		return nil, fmt.Errorf("tokenizer: eos token id %d outside vocabulary of %d", eos, n)
	}
	split, p, err := newPreTokenizer(pre)
	if err != nil {
		return nil, err
	}
	t := &GPT2{
		lookup:       make(map[string]int32, n),
		merges:       make(map[uint64]gpt2Merge, len(merges)),
		pre:          pre,
		split:        split,
		ignoreMerges: p.ignoreMerges,
		decoded:      make([][]byte, n),
	}
	resolved := make([]int32, n)
	for i := range resolved {
		resolved[i] = TypeNormal
		if types != nil && types[i] != 0 {
			resolved[i] = types[i]
		}
	}
	t.initVocab(tokens, resolved, bos, eos, cfg, p.addBOS, false)
	var specials []specialText
	for i, tok := range tokens {
		typ := t.types[i]
		switch typ {
		case TypeControl, TypeUnknown, TypeUnused:
		default:
			if _, dup := t.lookup[tok]; !dup {
				t.lookup[tok] = int32(i)
			}
		}
		switch typ {
		case TypeControl:
			// decodes to nothing
		case TypeUserDefined:
			t.decoded[i] = []byte(tok)
		default:
			var b []byte
			for _, r := range tok {
				if c, ok := runeToByte[r]; ok {
					b = append(b, c)
				} else {
					b = utf8.AppendRune(b, r)
				}
			}
			t.decoded[i] = b
		}
		if typ == TypeControl || typ == TypeUnknown || typ == TypeUserDefined {
			specials = append(specials, specialText{text: tok, id: i, control: typ != TypeUserDefined})
		}
	}
	stripAttrs(cfg.modelName, specials)
	t.special = newSpecialMatcher(specials)
	for b := range t.byteTok {
		id, ok := t.byText[string(byteToRune[b])]
		if !ok {
			id = -1
		}
		t.byteTok[b] = id
	}
	longest := 0
	for _, tok := range tokens {
		longest = max(longest, len(tok))
	}
	t.bound = newTokenBound(longest, t.special.toks, func(b byte) bool { return t.byteTok[b] < 0 })
	for rank, m := range merges {
		sp := -1
		if len(m) > 1 {
			sp = strings.IndexByte(m[1:], ' ')
		}
		if sp < 0 {
			return nil, fmt.Errorf("tokenizer: merge %d %q is not \"left right\"", rank, m)
		}
		left, right := m[:sp+1], m[sp+2:]
		l, ok1 := t.byText[left]
		r, ok2 := t.byText[right]
		id, ok3 := t.byText[left+right]
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		key := uint64(uint32(l))<<32 | uint64(uint32(r))
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = gpt2Merge{rank: int32(rank), id: id}
		}
	}
	return t, nil
}

// Decode returns the bytes of id: the byte-mapped characters turned back
// into bytes. Control tokens decode to nothing; user-defined tokens to their
// text. prev is not used: byte-level BPE keeps spaces inside tokens. The
// returned slice is shared and must not be modified.
func (t *GPT2) Decode(prev, id int) []byte {
	if id < 0 || id >= len(t.decoded) {
		return nil
	}
	b := t.decoded[id]
	return b[:len(b):len(b)]
}

// Encode converts text to token ids. User-defined tokens are cut out of
// the text first; with opt.Special control-token texts too (and the
// lstrip/rstrip attributes apply), as llama.cpp does. A byte whose
// character has no token is left out and counted (DroppedBytes).
func (t *GPT2) Encode(text string, opt Options) ([]int, error) {
	return t.encode(text, opt, -1)
}

// EncodeLimit is Encode that may stop once the result is known to hold
// more than limit tokens (see LimitEncoder): pre-tokens are merged
// independently, so it stops after the first pre-token that goes past
// limit.
func (t *GPT2) EncodeLimit(text string, opt Options, limit int) ([]int, error) {
	return t.encode(text, opt, max(limit, 0))
}

// encode is Encode, stopping past limit tokens unless limit < 0.
func (t *GPT2) encode(text string, opt Options, limit int) ([]int, error) {
	return t.encodeFrags(text, opt, limit, len(text)/3+3, t.encodeRaw)
}

// gpSym is a symbol of one pre-token: token id, byte length, linked list.
type gpSym struct {
	id         int32
	size       int32 // bytes covered; 0 when merged away
	prev, next int32
}

type gpPair struct {
	rank        int32
	left, right int32
	size        int32
	id          int32
}

func gpLess(a, b gpPair) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.left < b.left
}

type gpQueue []gpPair

func (q *gpQueue) push(p gpPair) {
	*q = append(*q, p)
	h := *q
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !gpLess(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *gpQueue) pop() gpPair {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && gpLess(h[r], h[l]) {
			m = r
		}
		if !gpLess(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// encodeRaw appends the tokens of plain text: pre-tokens, then BPE merges
// inside each, as llama.cpp's llm_tokenizer_bpe_session. With limit >= 0
// it stops as soon as out holds more than limit tokens with pre-tokens
// left, and says so.
func (t *GPT2) encodeRaw(out []int, text string, limit int) ([]int, bool) {
	if text == "" {
		return out, false
	}
	ends := t.split.split(text, make([]int, 0, len(text)/4+1))
	var (
		syms   []gpSym
		q      gpQueue
		mapped strings.Builder
	)
	start := 0
	for _, end := range ends {
		if limit >= 0 && len(out) > limit {
			return out, true
		}
		chunk := text[start:end]
		start = end
		if t.ignoreMerges {
			mapped.Reset()
			for i := 0; i < len(chunk); i++ {
				mapped.WriteRune(byteToRune[chunk[i]])
			}
			if id, ok := t.byText[mapped.String()]; ok {
				out = append(out, int(id))
				continue
			}
		}
		syms = syms[:0]
		for i := 0; i < len(chunk); i++ {
			// A byte without a token stays a symbol (it keeps its
			// neighbours apart) that merges with nothing and is dropped.
			syms = append(syms, gpSym{id: t.byteTok[chunk[i]], size: 1, prev: int32(i - 1), next: int32(i + 1)})
		}
		syms[len(syms)-1].next = -1
		q = q[:0]
		try := func(l, r int32) {
			if l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0 {
				return
			}
			m, ok := t.merges[uint64(uint32(syms[l].id))<<32|uint64(uint32(syms[r].id))]
			if !ok {
				return
			}
			q.push(gpPair{rank: m.rank, left: l, right: r, size: syms[l].size + syms[r].size, id: m.id})
		}
		for i := 1; i < len(syms); i++ {
			try(int32(i-1), int32(i))
		}
		for len(q) > 0 {
			p := q.pop()
			l, r := &syms[p.left], &syms[p.right]
			if l.size == 0 || r.size == 0 || l.next != p.right || l.size+r.size != p.size {
				continue
			}
			l.id = p.id
			l.size += r.size
			r.size = 0
			l.next = r.next
			if r.next >= 0 {
				syms[r.next].prev = p.left
			}
			try(l.prev, p.left)
			try(p.left, l.next)
		}
		for i := int32(0); i >= 0; i = syms[i].next {
			if syms[i].id < 0 {
				t.dropped.Add(1)
				continue
			}
			out = append(out, int(syms[i].id))
		}
	}
	return out, false
}

var (
	_ Tokenizer    = (*GPT2)(nil)
	_ LimitEncoder = (*GPT2)(nil)
)
