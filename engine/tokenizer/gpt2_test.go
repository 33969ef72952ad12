package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// testGPT2 builds a small byte-level vocabulary: the 256 byte tokens (id =
// byte), then one token per merge result, then special tokens.
func testGPT2(t testing.TB, pre string) (*GPT2, map[string]int) {
	t.Helper()
	var tokens []string
	var types []int32
	ids := map[string]int{}
	add := func(s string, typ int32) {
		if _, ok := ids[s]; ok {
			return
		}
		ids[s] = len(tokens)
		tokens = append(tokens, s)
		types = append(types, typ)
	}
	for b := 0; b < 256; b++ {
		add(string(byteToRune[b]), TypeNormal)
	}
	merges := []string{
		"Ġ w", "o r", "h e", "l l", "he ll", "hell o", "Ġw or", "Ġwor l", "Ġworl d",
		"Ġ Ġ", "b c", "a b", "a bc", "a a", "Ġ h", "Ġh ello", "Ċ Ċ",
		"Ã ©", // é = C3 A9
	}
	for _, m := range merges {
		for i := 1; i < len(m); i++ {
			if m[i] == ' ' {
				add(m[:i]+m[i+1:], TypeNormal)
				break
			}
		}
	}
	add("ello", TypeNormal)                // reachable only without merges (ignore_merges)
	merges = append(merges, "ll o", "q q") // "q q": result not in the vocabulary, ignored
	add("llo", TypeNormal)
	add("xyz", TypeNormal) // no merge produces it
	add("<|begin_of_text|>", TypeControl)
	add("<|end_of_text|>", TypeControl)
	add("<tool>", TypeUserDefined)
	tok, err := NewGPT2(tokens, types, merges, ids["<|begin_of_text|>"], ids["<|end_of_text|>"], pre)
	require.NoError(t, err)
	return tok, ids
}

func TestByteToUnicode(t *testing.T) {
	require.Equal(t, 'Ġ', byteToRune[' '])
	require.Equal(t, 'Ċ', byteToRune['\n'])
	require.Equal(t, rune(0x100), byteToRune[0])
	require.Equal(t, 'Ń', byteToRune[0xAD])
	require.Equal(t, 'A', byteToRune['A'])
	require.Equal(t, 'ÿ', byteToRune[0xFF])
	require.Len(t, runeToByte, 256)
}

func TestGPT2Encode(t *testing.T) {
	tok, ids := testGPT2(t, "llama-bpe")
	g2, _ := testGPT2(t, "gpt2")
	id := func(s ...string) []int {
		var out []int
		for _, p := range s {
			v, ok := ids[p]
			require.True(t, ok, p)
			out = append(out, v)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		tok  *GPT2
		text string
		opt  Options
		want []int
	}{
		{"empty", tok, "", Options{}, []int{}},
		{"empty bos", tok, "", Options{BOS: true}, id("<|begin_of_text|>")},
		{"hello world", tok, "hello world", Options{BOS: true, EOS: true}, id("<|begin_of_text|>", "hello", "Ġworld", "<|end_of_text|>")},
		{"rank beats position", tok, "abc", Options{}, id("abc")},
		{"leftmost on ties", tok, "aaa", Options{}, id("aa", "a")},
		{"pairs", tok, "aaaa", Options{}, id("aa", "aa")},
		{"double space", tok, "hello  world", Options{}, id("hello", "Ġ", "Ġworld")},
		{"newlines", tok, "a\n\n\nb", Options{}, id("a", "ĊĊ", "Ċ", "b")},
		{"utf8", tok, "é", Options{}, id("Ã©")},
		{"ignore merges", tok, "xyz", Options{}, id("xyz")},
		{"gpt2 keeps merges", g2, "xyz", Options{}, id("x", "y", "z")},
		{"ignore merges whole word", tok, "ello", Options{}, id("ello")},
		{"gpt2 merges ello", g2, "ello", Options{}, id("e", "llo")},
		{"special off", tok, "<|end_of_text|>", Options{}, id(strings.Split("<|end_of_text|>", "")...)},
		{"user-defined always", tok, "x<tool>y", Options{}, id("x", "<tool>", "y")},
		{"special on", tok, "<|begin_of_text|>hello<tool>", Options{Special: true}, id("<|begin_of_text|>", "hello", "<tool>")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.tok.Encode(tc.text, tc.opt)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestGPT2SpecialNotFromText(t *testing.T) {
	tok, ids := testGPT2(t, "llama-bpe")
	for _, text := range []string{"<|begin_of_text|>", "x<|end_of_text|>y", "<tool>"} {
		got, err := tok.Encode(text, Options{})
		require.NoError(t, err)
		for _, id := range got {
			require.NotEqual(t, TypeControl, tok.TokenType(id), "%q produced %q", text, tok.Piece(id))
		}
		require.Equal(t, text, decodeAll(tok, got))
	}
	got, err := tok.Encode("<|end_of_text|>", Options{Special: true})
	require.NoError(t, err)
	require.Equal(t, []int{ids["<|end_of_text|>"]}, got)
	require.Empty(t, tok.Decode(-1, ids["<|end_of_text|>"]), "control tokens decode to nothing")
	require.Equal(t, "<tool>", string(tok.Decode(-1, ids["<tool>"])))
}

var roundTripTexts = []string{
	"",
	"a",
	"Hello world",
	"hello  world",
	"  leading and trailing  ",
	"   ",
	"\n",
	"line one\nline two\r\n\r\nend",
	"tabs\tand\t\ttabs",
	"whitespace runs:     \t \n\n\n   x",
	"café naïve résumé Ωμέγα",
	"日本語のテキスト、中文文本。",
	"emoji 🙂👍🏽🇯🇵 ok",
	"mixed 123 4567 89,000.5 ٣٤ ²",
	"quotes \"'s 'll 'RE don't\"",
	"<s> </s> <unk> <0x41>",
	"\x00\x01\x7f",
}

func TestGPT2RoundTrip(t *testing.T) {
	for _, pre := range []string{"llama-bpe", "gpt2"} {
		tok, _ := testGPT2(t, pre)
		texts := append([]string(nil), roundTripTexts...)
		texts = append(texts, "\xff\xfe invalid \xc3")
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			texts = append(texts, randomText(rng, 40))
		}
		for _, text := range texts {
			for _, opt := range []Options{{}, {BOS: true, EOS: true}} {
				ids, err := tok.Encode(text, opt)
				require.NoError(t, err)
				require.Equal(t, text, decodeAll(tok, ids), "%s %q", pre, text)
			}
		}
	}
}

func TestNewGPT2Errors(t *testing.T) {
	toks := []string{"a", "b", "ab"}
	for _, tc := range []struct {
		name   string
		tokens []string
		types  []int32
		merges []string
		bos    int
		pre    string
	}{
		{"empty", nil, nil, nil, -1, "gpt2"},
		{"types length", toks, []int32{1}, nil, -1, "gpt2"},
		{"bos range", toks, nil, nil, 3, "gpt2"},
		{"bad merge", toks, nil, []string{"ab"}, -1, "gpt2"},
		{"unknown pre", toks, nil, nil, -1, "qwen9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewGPT2(tc.tokens, tc.types, tc.merges, tc.bos, -1, tc.pre)
			require.Error(t, err)
		})
	}
	_, err := NewGPT2(toks, nil, nil, -1, -1, "qwen9")
	require.ErrorIs(t, err, ErrUnknownPreTokenizer)
	require.ErrorContains(t, err, "deepseek-coder", "the error lists the known names")
	tok, err := NewGPT2(toks, nil, []string{"a b"}, -1, -1, "gpt2")
	require.NoError(t, err)
	// A byte without a token is dropped and counted, as llama.cpp does; it
	// still keeps its neighbours from merging.
	ids, err := tok.Encode("acb", Options{})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, ids)
	require.Equal(t, uint64(1), tok.DroppedBytes())
}

// randomText draws up to n atoms from a mix of scripts, spaces and symbols.
func randomText(rng *rand.Rand, n int) string {
	atoms := []string{"a", "b", "c", "e", "h", "l", "o", "w", "r", "d", "x", "y", "z", "T", "é", "ß", "日", "本", "😀", "👍🏽",
		"1", "7", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "'", "'s", "!", ".", ",", "<", ">", "s", "0x", "\u0301", "hello", " world"}
	var s []byte
	for range rng.IntN(n + 1) {
		s = append(s, atoms[rng.IntN(len(atoms))]...)
	}
	if !utf8.Valid(s) {
		panic("invalid")
	}
	return string(s)
}
