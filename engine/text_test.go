package engine

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

func byteToks(s string) []int {
	ids, _ := tokenizer.NewBytes().Encode(s, tokenizer.Options{})
	return ids
}

func TestTextStreamUTF8Boundaries(t *testing.T) {
	in := "héllo, 世界 🙂!"
	ts := newTextStream(tokenizer.NewBytes().Decode, -1, nil)
	var got strings.Builder
	for _, id := range byteToks(in) {
		s, stop := ts.push(id)
		require.False(t, stop)
		require.True(t, utf8.ValidString(s), "emitted half a character: %q", s)
		got.WriteString(s)
	}
	got.WriteString(ts.flush())
	require.Equal(t, in, got.String())
	require.Equal(t, in, ts.text())
}

func TestTextStreamInvalidBytes(t *testing.T) {
	ts := newTextStream(tokenizer.NewBytes().Decode, -1, nil)
	var got strings.Builder
	for _, b := range []byte{'a', 0xff, 'b', 0xe4, 0xb8} { // 0xe4 0xb8 is cut off at the end
		s, _ := ts.push(int(b) + model.SyntheticByteOffset)
		require.True(t, utf8.ValidString(s))
		got.WriteString(s)
	}
	tail := ts.flush()
	require.True(t, utf8.ValidString(tail))
	got.WriteString(tail)
	require.Equal(t, "a\uFFFDb\uFFFD", got.String())
}

func TestTextStreamStopStrings(t *testing.T) {
	cases := []struct {
		in, stop, want string
		stopped        bool
	}{
		{"hello world", "wor", "hello ", true},
		{"hello world", "xyz", "hello world", false},
		{"aaab", "aab", "a", true},
		{"ends with st", "stop", "ends with st", false}, // held prefix flushed at the end
		{"日本語です", "語", "日本", true},
	}
	for _, c := range cases {
		ts := newTextStream(tokenizer.NewBytes().Decode, -1, []string{c.stop, ""})
		var got strings.Builder
		stopped := false
		for _, id := range byteToks(c.in) {
			s, stop := ts.push(id)
			got.WriteString(s)
			// Nothing streamed may ever contain the stop string.
			require.NotContains(t, got.String(), c.stop)
			if stop {
				stopped = true
				break
			}
		}
		if !stopped {
			got.WriteString(ts.flush())
		}
		require.Equal(t, c.stopped, stopped, c.in)
		require.Equal(t, c.want, got.String(), c.in)
		require.Equal(t, c.want, ts.text())
	}
}

// End to end on the built-in model: a stop string cuts the text and ends
// the request with "stop"; streamed text never shows the stop string.
func TestStopStringEndToEnd(t *testing.T) {
	e, err := New(Config{KVPages: 64})
	require.NoError(t, err)
	defer e.Close()
	r, err := e.Generate(t.Context(), Request{Prompt: "Hi", MaxTokens: 40})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(r.Text), 6)
	// Pick a stop string from the middle of the known output.
	text := r.Text
	start := 0
	for start < len(text) && !utf8.RuneStart(text[start]) {
		start++
	}
	idx := min(len(text)-1, start+len(text)/2)
	for idx > 0 && !utf8.RuneStart(text[idx]) {
		idx--
	}
	_, size := utf8.DecodeRuneInString(text[idx:])
	stop := text[idx : idx+size]
	want := text[:strings.Index(text, stop)]

	st, err := e.Submit(t.Context(), Request{Prompt: "Hi", MaxTokens: 40, Stop: []string{stop}})
	require.NoError(t, err)
	var streamed strings.Builder
	for ev := range st.Events() {
		streamed.WriteString(ev.Text)
	}
	res := st.Wait()
	require.Equal(t, "stop", res.FinishReason)
	require.Equal(t, want, res.Text)
	require.Equal(t, want, streamed.String())
}
