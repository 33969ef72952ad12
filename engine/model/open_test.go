package model

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// TestOpenTokenizers: the llama2.c pair and the GGUF conversion encode the
// golden prompts identically, through Open as the engine uses it.
func TestOpenTokenizers(t *testing.T) {
	dir := testmodels.Dir(t)
	wb, tb, err := Open(testmodels.Path(t, "stories260K.bin"), dir+"/tok512.bin")
	require.NoError(t, err)
	defer wb.Close()
	wg, tg, err := Open(testmodels.Path(t, "stories260K.gguf"), "")
	require.NoError(t, err)
	defer wg.Close()
	for _, gc := range loadGolden(t) {
		for _, tok := range []tokenizer.Tokenizer{tb, tg} {
			ids, err := tok.Encode(gc.Prompt, tokenizer.Options{BOS: true})
			require.NoError(t, err)
			require.Equal(t, gc.PromptTokenIDs, ids, "%T %q", tok, gc.Prompt)
		}
	}
	data, err := os.ReadFile(testmodels.Golden(t, "tokenizer_encode.json"))
	require.NoError(t, err)
	var enc struct {
		Tokenizers map[string]struct {
			Cases []struct {
				Text string `json:"text"`
				IDs  []int  `json:"ids"`
			} `json:"cases"`
		} `json:"tokenizers"`
	}
	require.NoError(t, json.Unmarshal(data, &enc))
	for _, c := range enc.Tokenizers["tok512"].Cases {
		ids, err := tg.Encode(c.Text, tokenizer.Options{BOS: true})
		require.NoError(t, err)
		require.Equal(t, c.IDs, ids, "GGUF tokenizer on %q", c.Text)
	}
}

func TestOpenErrors(t *testing.T) {
	_, _, err := Open(testmodels.Path(t, "stories260K.bin"), "")
	require.ErrorContains(t, err, "llama2.c checkpoint; give its tokenizer file")
	_, _, err = Open("", "tok.bin")
	require.ErrorContains(t, err, "needs a model file")
	// The 32000-token Llama 2 tokenizer is not stories260K's.
	_, _, err = Open(testmodels.Path(t, "stories260K.bin"), testmodels.Path(t, "tokenizer.bin"))
	require.ErrorContains(t, err, "more tokens than the model's vocabulary of 512")
	w, tok, err := Open("", "")
	require.NoError(t, err)
	require.Equal(t, w.Config.Vocab, tok.VocabSize())
}
