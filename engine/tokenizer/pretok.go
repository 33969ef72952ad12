package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// A splitter cuts text into pre-tokens; BPE runs inside each one. It returns
// the byte offsets where pre-tokens end (the last one is len(text)).
type splitter func(text string, ends []int) []int

// Character classes of the pre-tokenizer patterns. \s is Unicode White_Space
// (unicode.IsSpace), \p{L} letters and \p{N} numbers, as in llama.cpp and
// the Oniguruma regexes Hugging Face tokenizers use.
func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isCRLF(r rune) bool   { return r == '\r' || r == '\n' }

// runeText gives rune-indexed access to a string with byte offsets.
type runeText struct {
	runes []rune
	offs  []int // byte offset of each rune, plus len(text) at the end
}

func newRuneText(text string) runeText {
	n := utf8.RuneCountInString(text)
	rt := runeText{runes: make([]rune, 0, n), offs: make([]int, 0, n+1)}
	for i, r := range text {
		rt.runes = append(rt.runes, r)
		rt.offs = append(rt.offs, i)
	}
	rt.offs = append(rt.offs, len(text))
	return rt
}

// at returns the rune at i, or -1 past the end.
func (rt runeText) at(i int) rune {
	if i < 0 || i >= len(rt.runes) {
		return -1
	}
	return rt.runes[i]
}

// spaceRun returns the end of the whitespace run starting at i.
func (rt runeText) spaceRun(i int) int {
	for i < len(rt.runes) && isSpace(rt.runes[i]) {
		i++
	}
	return i
}

// whitespaceTail implements the shared tail of both patterns,
// `\s+(?!\S)|\s+`, at position i, which holds whitespace: a run of two or
// more followed by a non-space gives its last whitespace character to the
// next pre-token (so " world" keeps its space).
func (rt runeText) whitespaceTail(i int) int {
	j := rt.spaceRun(i)
	if j-i > 1 && j < len(rt.runes) {
		return j - 1
	}
	return j
}

// splitLlama3 implements the Llama 3 pre-tokenizer regex
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// by hand (Go's regexp has no lookahead), following the alternatives in
// order with the regex's backtracking worked out, as llama.cpp's
// unicode_regex_split_custom_llama3 does.
func splitLlama3(text string, ends []int) []int {
	rt := newRuneText(text)
	n := len(rt.runes)
	for i := 0; i < n; {
		i = llama3Next(rt, i)
		ends = append(ends, rt.offs[i])
	}
	return ends
}

func llama3Next(rt runeText, i int) int {
	n := len(rt.runes)
	r := rt.runes[i]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' && i+1 < n {
		c1 := unicode.ToLower(rt.runes[i+1])
		if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
			return i + 2
		}
		if i+2 < n {
			c2 := unicode.ToLower(rt.runes[i+2])
			if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
				return i + 3
			}
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isCRLF(r) && !isNumber(r) && (isLetter(r) || (i+1 < n && isLetter(rt.runes[i+1]))) {
		j := i + 1
		for j < n && isLetter(rt.runes[j]) {
			j++
		}
		return j
	}
	// \p{N}{1,3}
	if isNumber(r) {
		j := i + 1
		for j < n && j-i < 3 && isNumber(rt.runes[j]) {
			j++
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	isOther := func(c rune) bool { return c >= 0 && !isSpace(c) && !isLetter(c) && !isNumber(c) }
	j := i
	if r == ' ' {
		j++
	}
	if isOther(rt.at(j)) {
		for isOther(rt.at(j)) {
			j++
		}
		for isCRLF(rt.at(j)) {
			j++
		}
		return j
	}
	// \s*[\r\n]+ : ends after the last CR/LF of the whitespace run.
	if isSpace(r) {
		end := rt.spaceRun(i)
		for k := end - 1; k >= i; k-- {
			if isCRLF(rt.runes[k]) {
				return k + 1
			}
		}
		// \s+(?!\S)|\s+
		return rt.whitespaceTail(i)
	}
	return i + 1 // unreachable: every rune is a letter, number, space or other
}

// splitGPT2 implements the GPT-2 pre-tokenizer regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(text string, ends []int) []int {
	rt := newRuneText(text)
	n := len(rt.runes)
	for i := 0; i < n; {
		i = gpt2Next(rt, i)
		ends = append(ends, rt.offs[i])
	}
	return ends
}

func gpt2Next(rt runeText, i int) int {
	n := len(rt.runes)
	r := rt.runes[i]
	if r == '\'' && i+1 < n {
		c1 := rt.runes[i+1]
		if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
			return i + 2
		}
		if i+2 < n {
			c2 := rt.runes[i+2]
			if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
				return i + 3
			}
		}
	}
	j := i
	if r == ' ' {
		j++
	}
	isOther := func(c rune) bool { return c >= 0 && !isSpace(c) && !isLetter(c) && !isNumber(c) }
	for _, class := range []func(rune) bool{isLetter, isNumber, isOther} {
		if c := rt.at(j); c >= 0 && class(c) {
			k := j + 1
			for k < n && class(rt.runes[k]) {
				k++
			}
			return k
		}
	}
	if isSpace(r) {
		return rt.whitespaceTail(i)
	}
	return i + 1 // unreachable
}
