package tokenizer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEOGAndBOSPolicy(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "a", "<|im_end|>", "<|im_start|>", "<end_of_turn>"}
	types := []int32{TypeUnknown, TypeControl, TypeControl, TypeNormal, TypeUserDefined, TypeControl, TypeControl}
	sp, err := NewSentencePiece(tokens, nil, types, 1, 2, 0)
	require.NoError(t, err)
	require.Equal(t, []int{2, 4, 6}, sp.EOG())
	require.True(t, sp.IsEOG(4))
	require.False(t, sp.IsEOG(5))
	require.Equal(t, TypeControl, sp.TokenType(4), "an end-of-turn text is a control token")
	require.Equal(t, 4, sp.EOT())
	require.True(t, sp.AddBOS())
	require.False(t, sp.AddEOS())
	id, ok := sp.Lookup("<|im_start|>")
	require.True(t, ok)
	require.Equal(t, 5, id)
	_, ok = sp.Lookup("nope")
	require.False(t, ok)

	sp, err = NewSentencePiece(tokens, nil, types, 1, 2, 0, WithAddBOS(false), WithAddEOS(true), WithEOT(5))
	require.NoError(t, err)
	require.False(t, sp.AddBOS())
	require.True(t, sp.AddEOS())
	require.Equal(t, []int{2, 4, 5, 6}, sp.EOG())

	var b Bytes
	require.True(t, b.IsEOG(b.EOS()))
	id, ok = b.Lookup("<0x41>")
	require.True(t, ok)
	require.Equal(t, int('A')+bytesOffset, id)
}

// TestConcurrentEncodeBPE runs one tokenizer from several goroutines (run
// with -race): Encode keeps no shared mutable state but the drop counter.
func TestConcurrentEncodeBPE(t *testing.T) {
	tok, cases := loadVocab(t, "falcon")
	want := make([][]int, len(cases))
	for i, c := range cases {
		want[i], _ = tok.Encode(c.text, Options{})
	}
	done := make(chan error, 4)
	for range 4 {
		go func() {
			for i, c := range cases {
				got, err := tok.Encode(c.text, Options{})
				if err != nil {
					done <- err
					return
				}
				if len(got) != len(want[i]) {
					done <- fmt.Errorf("%q: %d tokens, want %d", c.text, len(got), len(want[i]))
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		require.NoError(t, <-done)
	}
}
