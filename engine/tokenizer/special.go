package tokenizer

import (
	"sort"
	"strings"
)

// specialMatcher cuts special-token texts out of input text before
// pre-tokenization, the way llama.cpp's tokenizer_st_partition does:
// user-defined tokens always (mpt's two-space token, deepseek's "ü"),
// control and unknown tokens only when special parsing is on. Longer texts
// are cut first, each at every place it occurs in what is still plain
// text, leftmost first; a token with the lstrip or rstrip attribute also
// removes the ASCII whitespace beside it.
type specialMatcher struct {
	toks []specialText // by rank: longest first, then lowest id
	// Indices into toks by first byte: every token (special parsing on),
	// user-defined tokens only (off).
	byFirst, userByFirst map[byte][]int32
}

type specialText struct {
	text    string
	id      int
	control bool // control or unknown: cut only with special parsing
	lstrip  bool
	rstrip  bool
}

func newSpecialMatcher(texts []specialText) specialMatcher {
	m := specialMatcher{byFirst: make(map[byte][]int32), userByFirst: make(map[byte][]int32)}
	for _, t := range texts {
		if t.text != "" {
			m.toks = append(m.toks, t)
		}
	}
	sort.SliceStable(m.toks, func(i, j int) bool {
		a, b := m.toks[i], m.toks[j]
		if len(a.text) != len(b.text) {
			return len(a.text) > len(b.text)
		}
		return a.id < b.id
	})
	for i, t := range m.toks {
		m.byFirst[t.text[0]] = append(m.byFirst[t.text[0]], int32(i))
		if !t.control {
			m.userByFirst[t.text[0]] = append(m.userByFirst[t.text[0]], int32(i))
		}
	}
	return m
}

// fragment is either raw text (id < 0) or a special token.
type fragment struct {
	text string
	id   int
}

// isCSpace is C's isspace in the C locale.
func isCSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

type specialHit struct {
	rank int32
	pos  int32
}

// split cuts text into raw-text and special-token fragments; parse says
// whether control and unknown tokens are recognised too.
func (m specialMatcher) split(text string, parse bool) []fragment {
	var hits []specialHit
	byFirst := m.userByFirst
	if parse {
		byFirst = m.byFirst
	}
	if len(byFirst) > 0 {
		for i := 0; i < len(text); i++ {
			for _, k := range byFirst[text[i]] {
				if strings.HasPrefix(text[i:], m.toks[k].text) {
					hits = append(hits, specialHit{rank: k, pos: int32(i)})
				}
			}
		}
	}
	if len(hits) == 0 {
		if text == "" {
			return nil
		}
		return []fragment{{text: text, id: -1}}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].rank != hits[j].rank {
			return hits[i].rank < hits[j].rank
		}
		return hits[i].pos < hits[j].pos
	})
	const (
		raw     = 0
		removed = 1
		start   = 2 // first byte of a cut token
	)
	state := make([]byte, len(text))
	tokenAt := map[int]int32{}
outer:
	for _, h := range hits {
		t := &m.toks[h.rank]
		p, end := int(h.pos), int(h.pos)+len(t.text)
		for i := p; i < end; i++ {
			if state[i] != raw {
				continue outer
			}
		}
		state[p] = start
		for i := p + 1; i < end; i++ {
			state[i] = removed
		}
		tokenAt[p] = h.rank
		if t.lstrip {
			for i := p - 1; i >= 0 && state[i] == raw && isCSpace(text[i]); i-- {
				state[i] = removed
			}
		}
		if t.rstrip {
			for i := end; i < len(text) && state[i] == raw && isCSpace(text[i]); i++ {
				state[i] = removed
			}
		}
	}
	var out []fragment
	rawStart := -1
	flush := func(i int) {
		if rawStart >= 0 {
			out = append(out, fragment{text: text[rawStart:i], id: -1})
			rawStart = -1
		}
	}
	for i := 0; i < len(text); i++ {
		switch state[i] {
		case raw:
			if rawStart < 0 {
				rawStart = i
			}
		case start:
			flush(i)
			out = append(out, fragment{id: m.toks[tokenAt[i]].id})
		default:
			flush(i)
		}
	}
	flush(len(text))
	return out
}

// stripAttrs gives special tokens llama.cpp's per-model strip attributes
// (GGUF does not record them): Phi-3's special tokens, "</s>" included,
// remove the whitespace after them, except "<unk>", "<s>" and
// "<|endoftext|>".
func stripAttrs(modelName string, specials []specialText) {
	name := strings.ToLower(modelName)
	if !strings.Contains(name, "phi-3") && !strings.Contains(name, "phi3") {
		return
	}
	for i := range specials {
		switch specials[i].text {
		case "<unk>", "<s>", "<|endoftext|>":
		default:
			specials[i].rstrip = true
		}
	}
}
