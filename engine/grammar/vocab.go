package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Vocab is a tokenizer's vocabulary as the matcher sees it: each token's
// bytes in generated text, which tokens are special (never produced under
// a grammar) and which end a generation. Build it once per tokenizer; it
// is immutable and safe for concurrent use.
type Vocab struct {
	n       int
	pieces  [][]byte
	special []bool
	eog     []int

	// The trie of the non-special tokens' bytes, in preorder: node 0 is
	// the root (the empty prefix), node i adds byte tb[i] at depth
	// tdepth[i], its subtree is i..tend[i]-1, and the tokens spelled by
	// exactly its path are toks[tlo[i]:tlo[i+1]].
	tb       []byte
	tdepth   []int32
	tend     []int32
	tlo      []int32
	toks     []int32
	maxDepth int
	// sub[i] indexes subSets: the bytes of node i's descendants (subSets[0]
	// is empty: leaves). A state that loops to itself on all of them
	// allows the whole subtree at once.
	sub     []int32
	subSets []byteSet

	// ordinary marks the tokens a negated token reference (!<...>) may
	// match: not special, not empty.
	ordinary []uint64
	// names maps token texts to ids for references by text (WithNames).
	names map[string]int32
}

// NewVocab builds the vocabulary of len(pieces) tokens: pieces[id] is the
// bytes token id adds to the output (for SentencePiece with U+2581 turned
// into a space and <0xNN> into its byte; for byte-level BPE the unmapped
// bytes), special[id] marks control tokens, and eog lists the
// end-of-generation tokens, which a Matcher allows exactly where its
// grammar can end. Empty non-special pieces are never allowed either: they
// would not move the output on.
func NewVocab(pieces [][]byte, special []bool, eog ...int) (*Vocab, error) {
	n := len(pieces)
	if special != nil && len(special) != n {
		return nil, fmt.Errorf("grammar: %d special flags for %d pieces", len(special), n)
	}
	v := &Vocab{n: n, pieces: pieces, special: make([]bool, n)}
	copy(v.special, special)
	for _, id := range eog {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("grammar: end-of-generation token %d outside vocabulary of %d", id, n)
		}
		v.special[id] = true
		v.eog = append(v.eog, id)
	}
	ids := make([]int32, 0, n)
	v.ordinary = make([]uint64, v.MaskWords())
	for id, p := range pieces {
		if !v.special[id] && len(p) > 0 {
			ids = append(ids, int32(id))
			v.ordinary[id>>6] |= 1 << (id & 63)
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(pieces[a], pieces[b]) })
	v.tb, v.tdepth, v.tend = []byte{0}, []int32{0}, []int32{0}
	v.tlo = []int32{0}
	var path []int32 // node indexes of the current path, root excluded
	var prev []byte
	closeTo := func(depth int) {
		for len(path) > depth {
			v.tend[path[len(path)-1]] = int32(len(v.tb))
			path = path[:len(path)-1]
		}
	}
	for _, id := range ids {
		p := pieces[id]
		common := 0
		for common < len(p) && common < len(prev) && common < len(path) && p[common] == prev[common] {
			common++
		}
		closeTo(common)
		for d := common; d < len(p); d++ {
			i := int32(len(v.tb))
			v.tb = append(v.tb, p[d])
			v.tdepth = append(v.tdepth, int32(d+1))
			v.tend = append(v.tend, 0)
			v.tlo = append(v.tlo, int32(len(v.toks)))
			path = append(path, i)
		}
		// Tokens are added in node order: a token sorts after its prefixes
		// and before its extensions.
		v.toks = append(v.toks, id)
		v.maxDepth = max(v.maxDepth, len(p))
		prev = p
	}
	closeTo(0)
	v.tend[0] = int32(len(v.tb))
	v.tlo = append(v.tlo, int32(len(v.toks)))
	v.subtreeBytes()
	return v, nil
}

// subtreeBytes fills sub and subSets, children before parents.
func (v *Vocab) subtreeBytes() {
	n := len(v.tb)
	v.sub = make([]int32, n)
	v.subSets = []byteSet{{}}
	idx := map[byteSet]int32{{}: 0}
	for i := n - 1; i >= 0; i-- {
		var s byteSet
		for c := i + 1; c < int(v.tend[i]); c = int(v.tend[c]) {
			cs := v.subSets[v.sub[c]]
			for w := range s {
				s[w] |= cs[w]
			}
			s.add(v.tb[c], v.tb[c])
		}
		k, ok := idx[s]
		if !ok {
			k = int32(len(v.subSets))
			v.subSets = append(v.subSets, s)
			idx[s] = k
		}
		v.sub[i] = k
	}
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.n }

// MaskWords is the length of the []uint64 bitset Allowed fills.
func (v *Vocab) MaskWords() int { return (v.n + 63) / 64 }

// nodeToks are the tokens whose bytes are exactly node i's path.
func (v *Vocab) nodeToks(i int32) []int32 { return v.toks[v.tlo[i]:v.tlo[i+1]] }
