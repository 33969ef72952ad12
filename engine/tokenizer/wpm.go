package tokenizer

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// WordPiece is the BERT tokenizer (GGUF tokenizer.ggml.model = "bert",
// llama.cpp's WPM), as llama.cpp runs it:
//
//   - the text is split into words at whitespace; control characters, NUL
//     and U+FFFD are dropped; every punctuation character, every ASCII
//     symbol and every CJK ideograph is a word of its own;
//   - with tokenizer.ggml.normalizer.lowercase the text is lowercased, and
//     with strip_accents (which defaults to lowercase) decomposed (NFD)
//     with its combining marks (Mn) dropped;
//   - each word, prefixed with U+2581 (the converter writes word-initial
//     pieces as "▁piece" and continuations, "##piece", bare), is cut
//     greedily into the longest vocabulary entries from the left; a word
//     with a piece that matches nothing becomes the unknown token.
//
// Encode with BOS adds [CLS] (BOS) and with EOS the separator [SEP]
// (llama.cpp's add_special for WPM). Character classes are Go's unicode
// tables (P*, S*, Mn, C*, White_Space), which llama.cpp's own tables
// follow.
type WordPiece struct {
	vocab
	unk, sep      int
	lower, strip  bool
	maxLen        int
	decoded       [][]byte
	wordInitial   []bool
	controlTokens []bool
}

// NewWordPiece builds a WordPiece tokenizer from GGUF vocabulary data.
// bos is [CLS], sep [SEP], unk [UNK]; eos is -1 unless the file names one.
func NewWordPiece(tokens []string, types []int32, bos, eos, sep, unk int, lower, strip bool, opts ...Option) (*WordPiece, error) {
	n := len(tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	cfg := newConfig(opts)
	resolved := make([]int32, n)
	for i := range tokens {
		resolved[i] = TypeNormal
		if types != nil && types[i] != 0 {
			resolved[i] = types[i]
		}
	}
	t := &WordPiece{unk: unk, sep: sep, lower: lower, strip: strip}
	t.initVocab(tokens, resolved, bos, eos, cfg, true, false)
	var specials []specialText
	t.decoded = make([][]byte, n)
	t.wordInitial = make([]bool, n)
	t.controlTokens = make([]bool, n)
	for i, p := range tokens {
		t.maxLen = max(t.maxLen, len(p))
		switch typ := t.types[i]; typ {
		case TypeControl, TypeUnknown, TypeUserDefined:
			specials = append(specials, specialText{text: p, id: i, control: typ != TypeUserDefined})
			t.controlTokens[i] = typ != TypeUserDefined
			if typ == TypeUserDefined {
				t.decoded[i] = []byte(p)
			}
		default:
			s := strings.ReplaceAll(p, metaSpace, " ")
			t.decoded[i] = []byte(s)
			t.wordInitial[i] = strings.HasPrefix(s, " ")
		}
	}
	t.special = newSpecialMatcher(specials)
	return t, nil
}

// Sep is the separator [SEP] that ends an input (-1 when absent).
func (t *WordPiece) Sep() int { return t.sep }

// Decode gives a word-initial piece its space (none at the start or after
// BOS) and a continuation none; control tokens decode to nothing.
func (t *WordPiece) Decode(prev, id int) []byte {
	if id < 0 || id >= len(t.decoded) {
		return nil
	}
	b := t.decoded[id]
	if t.wordInitial[id] && (prev < 0 || prev == t.bos || (prev < len(t.controlTokens) && t.controlTokens[prev])) {
		b = b[1:]
	}
	return b[:len(b):len(b)]
}

// Encode tokenizes text; opt.BOS adds [CLS], opt.EOS adds [SEP].
func (t *WordPiece) Encode(text string, opt Options) ([]int, error) {
	var out []int
	if opt.BOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	for _, f := range t.special.split(text, opt.Special) {
		if f.id >= 0 {
			out = append(out, f.id)
			continue
		}
		out = t.encodeRaw(out, f.text)
	}
	if opt.EOS && t.sep >= 0 {
		out = append(out, t.sep)
	}
	return out, nil
}

func (t *WordPiece) encodeRaw(out []int, text string) []int {
	for _, word := range t.words(text) {
		w := metaSpace + word
		start := len(out)
		for i := 0; i < len(w); {
			found := false
			for j := min(len(w), i+t.maxLen); j > i; j-- {
				if id, ok := t.byText[w[i:j]]; ok {
					out = append(out, int(id))
					i = j
					found = true
					break
				}
			}
			if !found {
				out = out[:start]
				break
			}
		}
		if len(out) == start && t.unk >= 0 {
			out = append(out, t.unk)
		}
	}
	return out
}

// words is llama.cpp's WPM preprocessing (see the type's documentation).
func (t *WordPiece) words(text string) []string {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	if t.strip {
		text = norm.NFD.String(text)
	}
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range text {
		switch {
		case unicode.IsSpace(r):
			flush()
			continue
		case r == 0 || r == utf8.RuneError || unicode.Is(unicode.C, r):
			continue
		case t.strip && unicode.Is(unicode.Mn, r):
			continue
		}
		if t.lower {
			r = unicode.ToLower(r)
		}
		if unicode.IsPunct(r) || (r < 0x7F && unicode.IsSymbol(r)) || isCJK(r) {
			flush()
			words = append(words, string(r))
			continue
		}
		cur.WriteRune(r)
	}
	flush()
	return words
}

// isCJK is llama.cpp's is_chinese_char (the CJK ideograph blocks).
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}
