package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// modelDir returns the shared model directory: $KVWARDEN_TEST_MODELS, or
// ../shared/models next to the module root (found by walking up to go.mod).
// It skips the test when the directory is missing, or fails it when $CI is
// set.
func modelDir(t testing.TB) string {
	t.Helper()
	return testmodels.RequireDir(t)
}

func missingData(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func modelFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(modelDir(t), name)
	if _, err := os.Stat(p); err != nil {
		missingData(t, "test model file missing: "+err.Error())
	}
	return p
}

// goldenDir is ../golden next to the model directory.
func goldenFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(modelDir(t), "..", "golden", name)
	if _, err := os.Stat(p); err != nil {
		missingData(t, "golden file missing: "+err.Error())
	}
	return p
}

func loadTok512(t testing.TB) *SentencePiece {
	t.Helper()
	tok, err := LoadLlama2C(modelFile(t, "tok512.bin"), 512)
	require.NoError(t, err)
	return tok
}

func loadLlama32000(t testing.TB) *SentencePiece {
	t.Helper()
	tok, err := LoadLlama2C(modelFile(t, "tokenizer.bin"), 32000)
	require.NoError(t, err)
	return tok
}

type goldenEncodings struct {
	Tokenizers map[string]struct {
		File  string `json:"file"`
		Cases []struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"cases"`
	} `json:"tokenizers"`
}

func TestGoldenEncodings(t *testing.T) {
	raw, err := os.ReadFile(goldenFile(t, "tokenizer_encode.json"))
	require.NoError(t, err)
	var g goldenEncodings
	require.NoError(t, json.Unmarshal(raw, &g))

	for _, tc := range []struct {
		key  string
		load func(testing.TB) *SentencePiece
	}{
		{"tok512", loadTok512},
		{"llama2_32000", loadLlama32000},
	} {
		t.Run(tc.key, func(t *testing.T) {
			cases := g.Tokenizers[tc.key].Cases
			require.Len(t, cases, 16)
			tok := tc.load(t)
			for _, c := range cases {
				ids, err := tok.Encode(c.Text, Options{BOS: true})
				require.NoError(t, err)
				require.Equal(t, c.IDs, ids, "text %q", c.Text)
				// Decoding after BOS gives the text back.
				require.Equal(t, c.Text, decodeAll(tok, ids), "round trip of %q", c.Text)
			}
		})
	}
}

// decodeAll decodes ids the way a streaming caller does.
func decodeAll(tok Tokenizer, ids []int) string {
	var out []byte
	prev := -1
	for _, id := range ids {
		out = append(out, tok.Decode(prev, id)...)
		prev = id
	}
	return string(out)
}
