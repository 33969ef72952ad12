package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func splitPieces(s splitter, text string) []string {
	pieces := []string{}
	start := 0
	for _, end := range s(text, nil) {
		pieces = append(pieces, text[start:end])
		start = end
	}
	return pieces
}

func TestSplitLlama3(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"", []string{}},
		{"Hello world", []string{"Hello", " world"}},
		{"hello  world", []string{"hello", " ", " world"}},
		{"I'M here, they'RE", []string{"I", "'M", " here", ",", " they", "'RE"}},
		{"1234567", []string{"123", "456", "7"}},
		{"a\n\nb", []string{"a", "\n\n", "b"}},
		{"x \n y", []string{"x", " \n", " y"}},
		{"  !!!\n\nabc", []string{" ", " !!!\n\n", "abc"}},
		{"trailing  ", []string{"trailing", "  "}},
		{"$foo", []string{"$foo"}},
		{"日本語 😀!", []string{"日本語", " 😀!"}},
	} {
		require.Equal(t, tc.want, splitPieces(splitLlama3, tc.text), "%q", tc.text)
	}
}

func TestSplitGPT2(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"I'M here", []string{"I", "'", "M", " here"}},
		{"I'm 1234567", []string{"I", "'m", " 1234567"}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"$foo", []string{"$", "foo"}},
	} {
		require.Equal(t, tc.want, splitPieces(splitGPT2, tc.text), "%q", tc.text)
	}
}

// TestSplitVectors compares the hand-written splitters with the regexes as
// run by Python's `regex` module (which has lookahead) on 419 strings mixing
// letters, digits of several scripts, Unicode spaces, CR/LF, contractions,
// punctuation, combining marks and emoji. testdata/pretok_vectors.json was
// generated once by testdata/gen_pretok_vectors.py (not needed to run tests).
func TestSplitVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/pretok_vectors.json")
	require.NoError(t, err)
	var vecs []struct {
		Text   string   `json:"text"`
		Llama3 []string `json:"llama3"`
		GPT2   []string `json:"gpt2"`
	}
	require.NoError(t, json.Unmarshal(raw, &vecs))
	require.Greater(t, len(vecs), 400)
	for _, v := range vecs {
		require.Equal(t, v.Llama3, splitPieces(splitLlama3, v.Text), "llama3 %q", v.Text)
		require.Equal(t, v.GPT2, splitPieces(splitGPT2, v.Text), "gpt2 %q", v.Text)
	}
}

// TestPreTokenizerVectors compares every pre-tokenizer kind with
// testdata/pretok_llamacpp.json, made once by
// testdata/gen_pretok_llamacpp.py: an independent Python model of
// llama.cpp's unicode_regex_split (Python's re over the same collapsed
// text) on 320 texts mixing scripts, marks, digits, Unicode spaces, CR/LF,
// contractions and the ASCII symbols whose category llama.cpp narrows.
func TestPreTokenizerVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/pretok_llamacpp.json")
	require.NoError(t, err)
	var vecs []struct {
		Pre    string   `json:"pre"`
		Text   string   `json:"text"`
		Pieces []string `json:"pieces"`
	}
	require.NoError(t, json.Unmarshal(raw, &vecs))
	require.Greater(t, len(vecs), 7000)
	cache := map[string]*preTokenizer{}
	for _, v := range vecs {
		pt, ok := cache[v.Pre]
		if !ok {
			pt, _, err = newPreTokenizer(v.Pre)
			require.NoError(t, err, v.Pre)
			cache[v.Pre] = pt
		}
		require.Equal(t, v.Pieces, splitPieces(pt.split, v.Text), "%s %q", v.Pre, v.Text)
	}
	require.Len(t, cache, 23)
}

// TestPreTokenizerLongRuns splits long runs that make a plain backtracking
// matcher quadratic (deepseek-llm's \s+$ retried at every space of a run
// that does not end the text; tekken's case classes over one long word).
func TestPreTokenizerLongRuns(t *testing.T) {
	const n = 50000
	spaces := strings.Repeat(" ", n) + "x"
	for _, tc := range []struct {
		pre, text string
		pieces    int
	}{
		{"deepseek-llm", spaces, 2},
		{"tekken", strings.Repeat("A", n), 1},
		{"tekken", strings.Repeat("é", n) + "!", 2},
		{"gpt-4o", strings.Repeat("aB", n), n + 1}, // "a", "Ba", ..., "B"
		{"default", strings.Repeat("~", n) + "1", 2},
	} {
		pt, _, err := newPreTokenizer(tc.pre)
		require.NoError(t, err)
		pieces := splitPieces(pt.split, tc.text)
		require.Equal(t, tc.pieces, len(pieces), tc.pre)
		require.True(t, tc.text == strings.Join(pieces, ""), tc.pre)
	}
}

// TestPreTokenizerNames: every name the issue lists is accepted, and an
// unknown one is refused with the list.
func TestPreTokenizerNames(t *testing.T) {
	for _, name := range []string{"", "default", "llama-bpe", "llama3", "qwen2", "deepseek-llm", "deepseek-coder",
		"deepseek-v3", "falcon", "falcon3", "mpt", "starcoder", "refact", "olmo", "smollm", "tekken", "command-r",
		"gpt-4o", "dbrx", "smaug-bpe", "stablelm2", "phi-2", "chatglm4", "chatglm-bpe", "bloom", "poro-chat", "viking",
		"jais", "exaone", "minerva-7b", "pixtral", "gpt-2"} {
		_, _, err := newPreTokenizer(name)
		require.NoError(t, err, name)
	}
	_, _, err := newPreTokenizer("kimi-k2")
	require.ErrorIs(t, err, ErrUnknownPreTokenizer)
	require.ErrorContains(t, err, "minerva-7b")
}
