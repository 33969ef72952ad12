package grammar

import "unicode/utf8"

// utf8Sequences spells a set of codepoint ranges (sorted, disjoint, no
// surrogates) as UTF-8 byte patterns: each pattern is a sequence of byte
// classes, and a string of one codepoint is in the set exactly when its
// UTF-8 bytes match one pattern. All one-byte codepoints share a single
// pattern; patterns with the same tail share their first class.
func utf8Sequences(rs []cpRange) [][]byteSet {
	var ascii byteSet
	hasASCII := false
	var multi [][][2]byte
	for _, r := range rs {
		if r.lo < 0x80 {
			ascii.add(byte(r.lo), byte(min(r.hi, 0x7F)))
			hasASCII = true
			if r.hi < 0x80 {
				continue
			}
			r.lo = 0x80
		}
		splitUTF8(r.lo, r.hi, &multi)
	}
	var out [][]byteSet
	if hasASCII {
		out = append(out, []byteSet{ascii})
	}
	// Merge patterns that differ only in their first byte range.
	tails := map[string]int{}
	for _, m := range multi {
		key := string(flatten(m[1:]))
		if i, ok := tails[key]; ok {
			out[i][0].add(m[0][0], m[0][1])
			continue
		}
		seq := make([]byteSet, len(m))
		for j, br := range m {
			seq[j].add(br[0], br[1])
		}
		tails[key] = len(out)
		out = append(out, seq)
	}
	return out
}

func flatten(m [][2]byte) []byte {
	out := make([]byte, 0, 2*len(m)+1)
	out = append(out, byte(len(m)))
	for _, br := range m {
		out = append(out, br[0], br[1])
	}
	return out
}

// splitUTF8 appends byte-range sequences for codepoints lo..hi (>= 0x80):
// it splits the range until both ends encode to the same length and, at
// every position, either share the leading bytes or span full
// continuation ranges below them; then each position is one byte range.
func splitUTF8(lo, hi rune, out *[][][2]byte) {
	for _, edge := range []rune{0x7FF, 0xFFFF} {
		if lo <= edge && hi > edge {
			splitUTF8(lo, edge, out)
			splitUTF8(edge+1, hi, out)
			return
		}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				splitUTF8(lo, lo|m, out)
				splitUTF8((lo|m)+1, hi, out)
				return
			}
			if hi&m != m {
				splitUTF8(lo, (hi&^m)-1, out)
				splitUTF8(hi&^m, hi, out)
				return
			}
		}
	}
	a := utf8.AppendRune(nil, lo)
	b := utf8.AppendRune(nil, hi)
	seq := make([][2]byte, n)
	for i := range n {
		seq[i] = [2]byte{a[i], b[i]}
	}
	*out = append(*out, seq)
}
