package tokenizer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpecialAttributes checks llama.cpp's partition rules on a small
// vocabulary: longest text first, user-defined tokens cut even without
// special parsing, Phi-3's rstrip.
func TestSpecialAttributes(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "<|user|>", "<|end|>", "ab", "bcd", "x", "\u2581", "\u2581x", "<|endoftext|>"}
	types := []int32{TypeUnknown, TypeControl, TypeControl, TypeControl, TypeControl, TypeUserDefined, TypeUserDefined, TypeNormal, TypeNormal, TypeNormal, TypeControl}
	plain, err := NewSentencePiece(tokens, nil, types, 1, 2, 0)
	require.NoError(t, err)
	phi, err := NewSentencePiece(tokens, nil, types, 1, 2, 0, WithModelName("Phi3 Mini 4k Instruct"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		tok  *SentencePiece
		text string
		opt  Options
		want []int
	}{
		// "bcd" is longer than "ab" and is cut first, as llama.cpp does
		// (a left-to-right scan would take "ab").
		{"longest first", plain, "abcd", Options{}, []int{8, 0, 6}},
		{"user-defined without parsing", plain, "x ab", Options{}, []int{9, 8, 5}},
		{"control needs parsing", plain, "<|end|>", Options{}, nil},
		{"control with parsing", plain, "<|user|>x", Options{Special: true}, []int{3, 9}},
		{"no rstrip", plain, "<|user|> x", Options{Special: true}, []int{3, 8, 9}},
		{"phi-3 rstrip", phi, "<|user|>  \n x<|end|>\n", Options{Special: true}, []int{3, 9, 4}},
		{"phi-3 no rstrip after <s>", phi, "<s> x", Options{Special: true}, []int{1, 8, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.tok.Encode(tc.text, tc.opt)
			require.NoError(t, err)
			if tc.want == nil {
				require.NotContains(t, got, 4)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestFalconDropsBytes: falcon has no token for \v; llama.cpp drops it.
func TestFalconDropsBytes(t *testing.T) {
	tok, _ := loadVocab(t, "falcon")
	g := tok.(*GPT2)
	before := g.DroppedBytes()
	ids, err := tok.Encode("a\vb", Options{})
	require.NoError(t, err)
	require.Equal(t, "ab", decodeAll(tok, ids))
	require.Equal(t, before+1, g.DroppedBytes())
}

// TestVocabFilesMetadata checks what the six files say about BOS and
// end of generation, against llama.cpp's rules.
func TestVocabFilesMetadata(t *testing.T) {
	for _, tc := range []struct {
		name   string
		addBOS bool
		eog    []string
	}{
		{"llama-spm", true, []string{"</s>"}},
		{"gpt-2", false, []string{"<|endoftext|>"}},
		{"mpt", false, []string{"<|endoftext|>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, _ := loadVocab(t, tc.name)
			require.Equal(t, tc.addBOS, tok.AddBOS())
			var eog []string
			for _, id := range tok.EOG() {
				require.True(t, tok.IsEOG(id))
				eog = append(eog, tok.Piece(id))
			}
			require.Equal(t, tc.eog, eog)
			id, ok := tok.Lookup(tc.eog[0])
			require.True(t, ok)
			require.True(t, tok.IsEOG(id))
		})
	}
	tok, _ := loadVocab(t, "phi-3")
	var eog []string
	for _, id := range tok.EOG() {
		eog = append(eog, tok.Piece(id))
	}
	require.Subset(t, eog, []string{"<|end|>", "<|endoftext|>"}, strings.Join(eog, " "))
}
