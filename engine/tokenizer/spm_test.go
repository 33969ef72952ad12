package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func refLookup(pieces []string) map[string]int {
	lookup := map[string]int{}
	for i, p := range pieces {
		if _, ok := lookup[p]; !ok {
			lookup[p] = i
		}
	}
	return lookup
}

// refEncodeWith is a line-by-line port of llama2.c run.c's encode(text,
// bos=1, eos=0), O(n²) rescans included, used as the reference for the
// priority-queue implementation.
func refEncodeWith(lookup map[string]int, pieces []string, scores []float32, text string) []int {
	str := func(s string) int {
		if id, ok := lookup[s]; ok {
			return id
		}
		return -1
	}
	tokens := []int{1}
	if text != "" {
		tokens = append(tokens, str(" "))
	}
	var buf []byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c&0xC0 != 0x80 {
			buf = buf[:0]
		}
		buf = append(buf, c)
		if i+1 < len(text) && text[i+1]&0xC0 == 0x80 && len(buf) < 4 {
			continue
		}
		if id := str(string(buf)); id != -1 {
			tokens = append(tokens, id)
		} else {
			for _, b := range buf {
				tokens = append(tokens, int(b)+3)
			}
		}
		buf = buf[:0]
	}
	for {
		best, bestID, bestIdx := float32(-1e10), -1, -1
		for i := 0; i < len(tokens)-1; i++ {
			id := str(pieces[tokens[i]] + pieces[tokens[i+1]])
			if id != -1 && scores[id] > best {
				best, bestID, bestIdx = scores[id], id, i
			}
		}
		if bestIdx == -1 {
			break
		}
		tokens[bestIdx] = bestID
		tokens = append(tokens[:bestIdx+1], tokens[bestIdx+2:]...)
	}
	return tokens
}

func TestEncodeMatchesRunC(t *testing.T) {
	for _, load := range []func(testing.TB) *SentencePiece{loadTok512, loadLlama32000} {
		tok := load(t)
		rng := rand.New(rand.NewPCG(3, 4))
		texts := append([]string(nil), roundTripTexts...)
		for range 300 {
			texts = append(texts, randomText(rng, 60))
		}
		texts = append(texts, strings.Repeat("ab", 300), strings.Repeat(" ", 50), strings.Repeat("the ", 100))
		lookup := refLookup(tok.pieces)
		for _, text := range texts {
			got, err := tok.Encode(text, Options{BOS: true})
			require.NoError(t, err)
			require.Equal(t, refEncodeWith(lookup, tok.pieces, tok.scores, text), got, "vocab %d text %q", tok.VocabSize(), text)
		}
	}
}

// toGGUFStyle rewrites a llama2.c vocabulary the way llama.cpp's converter
// stores it: U+2581 for spaces, "<s>"/"</s>" control pieces and explicit
// token types.
func toGGUFStyle(tok *SentencePiece) (pieces []string, types []int32) {
	for i, p := range tok.pieces {
		typ := tok.types[i]
		switch i {
		case 1:
			p = "<s>"
		case 2:
			p = "</s>"
		}
		if typ == TypeNormal {
			p = strings.ReplaceAll(p, " ", metaSpace)
		}
		pieces = append(pieces, p)
		types = append(types, typ)
	}
	return pieces, types
}

func TestGGUFStyleVocabMatches(t *testing.T) {
	for _, load := range []func(testing.TB) *SentencePiece{loadTok512, loadLlama32000} {
		ref := load(t)
		pieces, types := toGGUFStyle(ref)
		tok, err := NewSentencePiece(pieces, ref.scores, types, 1, 2, 0)
		require.NoError(t, err)
		require.True(t, tok.meta)
		require.False(t, ref.meta)
		rng := rand.New(rand.NewPCG(5, 6))
		texts := append([]string(nil), roundTripTexts...)
		for range 100 {
			texts = append(texts, randomText(rng, 60))
		}
		for _, text := range texts {
			want, err := ref.Encode(text, Options{BOS: true, EOS: true})
			require.NoError(t, err)
			got, err := tok.Encode(text, Options{BOS: true, EOS: true})
			require.NoError(t, err)
			require.Equal(t, want, got, "%q", text)
			require.Equal(t, text, decodeAll(tok, got))
		}
		require.Equal(t, "<s>", tok.Piece(1))
	}
}

func TestSentencePieceRoundTrip(t *testing.T) {
	for _, load := range []func(testing.TB) *SentencePiece{loadTok512, loadLlama32000} {
		tok := load(t)
		for _, text := range roundTripTexts {
			for _, opt := range []Options{{BOS: true}, {}, {BOS: true, EOS: true}} {
				ids, err := tok.Encode(text, opt)
				require.NoError(t, err)
				require.Equal(t, text, decodeAll(tok, ids), "vocab %d %q %+v", tok.VocabSize(), text, opt)
			}
		}
		ids, err := tok.Encode("", Options{BOS: true})
		require.NoError(t, err)
		require.Equal(t, []int{1}, ids, "empty string is just BOS")
		ids, err = tok.Encode("", Options{})
		require.NoError(t, err)
		require.Empty(t, ids)
	}
}

func TestSentencePieceSpecial(t *testing.T) {
	tok := loadLlama32000(t)
	for _, tc := range []struct {
		text    string
		special bool
		want    []int
	}{
		{"<s>", false, nil},
		{"</s>", false, nil},
		{"<unk>", false, nil},
		{"<s>", true, []int{1}},
		{"</s>", true, []int{2}},
		{"<unk>", true, []int{0}},
	} {
		ids, err := tok.Encode(tc.text, Options{Special: tc.special})
		require.NoError(t, err)
		if tc.want != nil {
			require.Equal(t, tc.want, ids, "%q", tc.text)
			continue
		}
		for _, id := range ids {
			require.Equal(t, TypeNormal, tok.TokenType(id), "%q gave %q", tc.text, tok.Piece(id))
		}
		require.Equal(t, tc.text, decodeAll(tok, ids))
	}
	// Text after a special token gets its own dummy prefix, as in llama.cpp.
	a, err := tok.Encode("<s>Hello</s>", Options{Special: true})
	require.NoError(t, err)
	hello, err := tok.Encode("Hello", Options{})
	require.NoError(t, err)
	require.Equal(t, append(append([]int{1}, hello...), 2), a)
}

func TestSentencePieceDecode(t *testing.T) {
	tok := loadTok512(t)
	for _, tc := range []struct {
		name     string
		prev, id int
		want     string
	}{
		{"bos is control", -1, 1, ""},
		{"eos is control", 5, 2, ""},
		{"byte", 1, 3 + 'A', "A"},
		{"byte 0x20 not stripped", 1, 3 + ' ', " "},
		{"strip after bos", 1, 261, "a"},
		{"strip at start", -1, 261, "a"},
		{"keep space mid-stream", 300, 261, " a"},
		{"out of range", 0, 512, ""},
		{"negative", 0, -3, ""},
		{"unk verbatim", 5, 0, "<unk>"},
	} {
		require.Equal(t, tc.want, string(tok.Decode(tc.prev, tc.id)), tc.name)
	}
	require.Equal(t, " a", tok.Piece(261))
}

func TestNewSentencePieceErrors(t *testing.T) {
	p := []string{"<unk>", "a", "b"}
	for _, tc := range []struct {
		name          string
		pieces        []string
		scores        []float32
		types         []int32
		bos, eos, unk int
	}{
		{"empty", nil, nil, nil, -1, -1, -1},
		{"scores length", p, []float32{0}, nil, -1, -1, -1},
		{"types length", p, nil, []int32{1, 1}, -1, -1, -1},
		{"bos range", p, nil, nil, 3, -1, -1},
		{"eos range", p, nil, nil, -1, -2, -1},
		{"unk range", p, nil, nil, -1, -1, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSentencePiece(tc.pieces, tc.scores, tc.types, tc.bos, tc.eos, tc.unk)
			require.Error(t, err)
		})
	}
	// No byte pieces and no unk: unencodable bytes are dropped and counted.
	tok, err := NewSentencePiece([]string{"a", " "}, nil, nil, -1, -1, -1)
	require.NoError(t, err)
	ids, err := tok.Encode("zaz", Options{})
	require.NoError(t, err)
	require.Equal(t, []int{1, 0}, ids)
	require.Equal(t, uint64(2), tok.DroppedBytes())
	// With unk it maps to unk.
	tok, err = NewSentencePiece([]string{"<unk>", "a", " "}, nil, nil, -1, -1, 0)
	require.NoError(t, err)
	ids, err = tok.Encode("az", Options{})
	require.NoError(t, err)
	require.Equal(t, []int{2, 1, 0}, ids)
	// Without the dummy prefix.
	tok, err = NewSentencePiece([]string{"<unk>", "a", " "}, nil, nil, -1, -1, 0, WithoutDummyPrefix())
	require.NoError(t, err)
	ids, err = tok.Encode("a", Options{})
	require.NoError(t, err)
	require.Equal(t, []int{1}, ids)
}

func llama2CFile(maxLen int32, entries ...any) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, maxLen)
	for _, e := range entries {
		switch v := e.(type) {
		case string:
			_ = binary.Write(&b, binary.LittleEndian, float32(0))
			_ = binary.Write(&b, binary.LittleEndian, int32(len(v)))
			b.WriteString(v)
		case []byte:
			b.Write(v)
		}
	}
	return b.Bytes()
}

func TestReadLlama2CErrors(t *testing.T) {
	negLen := llama2CFile(4, "<unk>", "a")
	negLen = append(negLen, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff) // score, len -1
	huge := llama2CFile(4, "<unk>", "a")
	huge = append(huge, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f)
	for _, tc := range []struct {
		name  string
		data  []byte
		vocab int
		want  string
	}{
		{"vocab zero", llama2CFile(4, "a"), 0, "vocab size 0"},
		{"vocab too small", llama2CFile(4, "a", "b"), 2, "too small"},
		{"empty file", nil, 3, "truncated reading max_token_length"},
		{"bad max len", llama2CFile(-1), 3, "max_token_length -1"},
		{"truncated header", llama2CFile(4, "<unk>", []byte{1, 2}), 3, "truncated reading score and length of token 1 at offset 17"},
		{"truncated bytes", llama2CFile(4, "<unk>", []byte{0, 0, 0, 0, 5, 0, 0, 0, 'a'}), 3, "truncated reading bytes of token 1"},
		{"negative length", negLen, 3, "token 2 length -1 at offset"},
		{"huge length", huge, 3, "token 2 length 2147483647"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLlama2C(bytes.NewReader(tc.data), tc.vocab)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := LoadLlama2C(filepath.Join(t.TempDir(), "missing.bin"), 3)
	require.ErrorIs(t, err, os.ErrNotExist)

	tok, err := ReadLlama2C(bytes.NewReader(llama2CFile(5, "<unk>", "\n<s>\n", "\n</s>\n", " ", "a", " a")), 6)
	require.NoError(t, err)
	require.Equal(t, 6, tok.VocabSize())
	require.Equal(t, 1, tok.BOS())
	require.Equal(t, 2, tok.EOS())
	require.Equal(t, TypeControl, tok.TokenType(1))
	require.Equal(t, TypeUnknown, tok.TokenType(0))
	require.False(t, math.IsNaN(float64(tok.Score(4))))
}

func TestConcurrentEncode(t *testing.T) {
	tok := loadTok512(t)
	want, err := tok.Encode("Once upon a time", Options{BOS: true})
	require.NoError(t, err)
	done := make(chan []int)
	for range 8 {
		go func() {
			ids, _ := tok.Encode("Once upon a time", Options{BOS: true})
			done <- ids
		}()
	}
	for range 8 {
		require.Equal(t, want, <-done)
	}
}

const benchText = `Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ` +
	`One day, she saw a big, red ball. She wanted to play with it, but it was too high. ` +
	`Lily's mom said, "Lily, let's go to the park." Lily was sad and didn't know what to do. ` +
	`Then, she had an idea. She went to the tree and started to climb. 日本語 🙂 café.`

func BenchmarkEncodeLlama32000(b *testing.B) {
	tok := loadLlama32000(b)
	text := strings.Repeat(benchText+"\n", 8)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.Encode(text, Options{BOS: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRunCReference(b *testing.B) {
	tok := loadLlama32000(b)
	text := strings.Repeat(benchText+"\n", 8)
	lookup := refLookup(tok.pieces)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		refEncodeWith(lookup, tok.pieces, tok.scores, text)
	}
}
