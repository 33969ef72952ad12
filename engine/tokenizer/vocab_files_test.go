package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mapMeta adapts readGGUFMeta's map to Metadata.
type mapMeta map[string]any

func (m mapMeta) String(k string) (string, bool) { s, ok := m[k].(string); return s, ok }
func (m mapMeta) Bool(k string) (bool, bool) {
	switch v := m[k].(type) {
	case uint8:
		return v != 0, true
	case bool:
		return v, true
	}
	return false, false
}
func (m mapMeta) Uint(k string) (uint64, bool) {
	switch v := m[k].(type) {
	case uint32:
		return uint64(v), true
	case int32:
		return uint64(v), v >= 0
	case uint64:
		return v, true
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	}
	return 0, false
}
func (m mapMeta) Strings(k string) ([]string, bool) {
	a, ok := m[k].([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(a))
	for i, v := range a {
		if out[i], ok = v.(string); !ok {
			return nil, false
		}
	}
	return out, true
}
func (m mapMeta) Float32s(k string) ([]float32, bool) {
	a, ok := m[k].([]any)
	if !ok {
		return nil, false
	}
	out := make([]float32, len(a))
	for i, v := range a {
		if out[i], ok = v.(float32); !ok {
			return nil, false
		}
	}
	return out, true
}
func (m mapMeta) Int32s(k string) ([]int32, bool) {
	a, ok := m[k].([]any)
	if !ok {
		return nil, false
	}
	out := make([]int32, len(a))
	for i, v := range a {
		if out[i], ok = v.(int32); !ok {
			return nil, false
		}
	}
	return out, true
}

// vocabDir is ../shared/vocab beside the model directory.
func vocabDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join(modelDir(t), "..", "vocab")
	if _, err := os.Stat(d); err != nil {
		missingData(t, "vocabulary test files missing: "+err.Error())
	}
	return d
}

var vocabFiles = []string{"llama-spm", "phi-3", "gpt-2", "deepseek-llm", "falcon", "mpt"}

type vocabCase struct {
	text string
	ids  []int
}

type loadedVocab struct {
	tok   Tokenizer
	cases []vocabCase
}

// vocabCache keeps loaded vocabularies for the package's tests (tokenizers
// are immutable; tests run one at a time).
var vocabCache = map[string]loadedVocab{}

// loadVocab builds the tokenizer of ggml-vocab-NAME.gguf and reads its
// cases, in llama.cpp's test-tokenizer-0 format.
func loadVocab(t testing.TB, name string) (Tokenizer, []vocabCase) {
	t.Helper()
	if v, ok := vocabCache[name]; ok {
		return v.tok, v.cases
	}
	tok, cases := readVocab(t, name)
	vocabCache[name] = loadedVocab{tok, cases}
	return tok, cases
}

func readVocab(t testing.TB, name string) (Tokenizer, []vocabCase) {
	t.Helper()
	base := filepath.Join(vocabDir(t), "ggml-vocab-"+name+".gguf")
	meta, err := readGGUFMeta(base)
	require.NoError(t, err)
	tok, err := FromMetadata(mapMeta(meta))
	require.NoError(t, err)
	inp, err := os.ReadFile(base + ".inp")
	require.NoError(t, err)
	out, err := os.ReadFile(base + ".out")
	require.NoError(t, err)
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	// The file ends with the separator line.
	if n := len(texts); n > 0 && texts[n-1] == "" {
		texts = texts[:n-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, len(texts), "%s: inputs and outputs", name)
	cases := make([]vocabCase, len(texts))
	for i, line := range lines {
		ids := []int{}
		for _, f := range strings.Fields(line) {
			v, err := strconv.Atoi(f)
			require.NoError(t, err)
			ids = append(ids, v)
		}
		cases[i] = vocabCase{text: texts[i], ids: ids}
	}
	return tok, cases
}

// TestVocabFiles runs every case of llama.cpp's tokenizer test
// vocabularies: add_special and parse_special off, as test-tokenizer-0.
func TestVocabFiles(t *testing.T) {
	for _, name := range vocabFiles {
		t.Run(name, func(t *testing.T) {
			tok, cases := loadVocab(t, name)
			require.Greater(t, len(cases), 30)
			for _, c := range cases {
				ids, err := tok.Encode(c.text, Options{})
				require.NoError(t, err, "%q", c.text)
				require.Equal(t, c.ids, ids, "%s: %q", name, c.text)
			}
		})
	}
}

// TestVocabFilesRoundTrip decodes every case back to its text. The
// exceptions are the ones llama.cpp has too: bytes the vocabulary has no
// token for (falcon lacks \v and others) are dropped.
func TestVocabFilesRoundTrip(t *testing.T) {
	for _, name := range vocabFiles {
		t.Run(name, func(t *testing.T) {
			tok, cases := loadVocab(t, name)
			dropper := tok
			checked := 0
			for _, c := range cases {
				before := dropper.DroppedBytes()
				ids, err := tok.Encode(c.text, Options{})
				require.NoError(t, err)
				if dropper.DroppedBytes() != before {
					continue
				}
				checked++
				require.Equal(t, c.text, decodeAll(tok, ids), "%s: %q", name, c.text)
			}
			require.Greater(t, checked, len(cases)*3/4)
		})
	}
}
