package tokenizer

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// readGGUFMeta is a minimal GGUF v2/v3 metadata reader for this test only
// (the real reader lives in engine/model/gguf, which this package must not
// import). It returns the key/value pairs; arrays become []any.
func readGGUFMeta(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := io.Reader(bufio.NewReaderSize(f, 1<<20))
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, err
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version < 2 || hdr.KVs > 1<<16 {
		return nil, errors.New("not a GGUF v2+ file")
	}
	rd := func(v any) error { return binary.Read(r, binary.LittleEndian, v) }
	str := func() (string, error) {
		var n uint64
		if err := rd(&n); err != nil || n > 1<<20 {
			return "", fmt.Errorf("bad string (%d): %v", n, err)
		}
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return string(b), err
	}
	var value func(typ uint32) (any, error)
	value = func(typ uint32) (any, error) {
		switch typ {
		case 0, 1, 7:
			var v uint8
			return v, rd(&v)
		case 2, 3:
			var v uint16
			return v, rd(&v)
		case 4:
			var v uint32
			return v, rd(&v)
		case 5:
			var v int32
			return v, rd(&v)
		case 6:
			var v float32
			return v, rd(&v)
		case 8:
			return str()
		case 9:
			var et uint32
			var n uint64
			if err := rd(&et); err != nil {
				return nil, err
			}
			if err := rd(&n); err != nil || n > 1<<24 {
				return nil, fmt.Errorf("bad array (%d): %v", n, err)
			}
			out := make([]any, n)
			for i := range out {
				v, err := value(et)
				if err != nil {
					return nil, err
				}
				out[i] = v
			}
			return out, nil
		case 10, 11, 12:
			var v uint64
			return v, rd(&v)
		}
		return nil, fmt.Errorf("unknown GGUF type %d", typ)
	}
	meta := map[string]any{}
	for range hdr.KVs {
		k, err := str()
		if err != nil {
			return nil, err
		}
		var typ uint32
		if err := rd(&typ); err != nil {
			return nil, err
		}
		v, err := value(typ)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
		meta[k] = v
	}
	return meta, nil
}

func ggufInt(v any) int {
	switch x := v.(type) {
	case uint32:
		return int(x)
	case int32:
		return int(x)
	case uint64:
		return int(x)
	}
	return -1
}

// TestGGUFTokenizerGolden builds the tokenizer from the GGUF conversion's
// tokenizer.ggml.* metadata (U+2581 spaces, token types) and checks the
// golden tok512 encodings and round trips.
func TestGGUFTokenizerGolden(t *testing.T) {
	meta, err := readGGUFMeta(modelFile(t, "stories260K.gguf"))
	require.NoError(t, err)
	require.Equal(t, "llama", meta["tokenizer.ggml.model"])
	toks := meta["tokenizer.ggml.tokens"].([]any)
	scs := meta["tokenizer.ggml.scores"].([]any)
	tys := meta["tokenizer.ggml.token_type"].([]any)
	pieces := make([]string, len(toks))
	scores := make([]float32, len(toks))
	types := make([]int32, len(toks))
	for i := range toks {
		pieces[i] = toks[i].(string)
		scores[i] = scs[i].(float32)
		types[i] = tys[i].(int32)
	}
	unk := -1
	if v, ok := meta["tokenizer.ggml.unknown_token_id"]; ok {
		unk = ggufInt(v)
	}
	tok, err := NewSentencePiece(pieces, scores, types,
		ggufInt(meta["tokenizer.ggml.bos_token_id"]), ggufInt(meta["tokenizer.ggml.eos_token_id"]), unk)
	require.NoError(t, err)
	require.True(t, tok.meta, "GGUF vocabulary uses U+2581")
	require.Equal(t, 1, tok.BOS())
	require.Equal(t, 2, tok.EOS())
	require.False(t, math.IsNaN(float64(tok.Score(300))))

	raw, err := os.ReadFile(goldenFile(t, "tokenizer_encode.json"))
	require.NoError(t, err)
	var g goldenEncodings
	require.NoError(t, json.Unmarshal(raw, &g))
	for _, c := range g.Tokenizers["tok512"].Cases {
		ids, err := tok.Encode(c.Text, Options{BOS: true})
		require.NoError(t, err)
		require.Equal(t, c.IDs, ids, "%q", c.Text)
		require.Equal(t, c.Text, decodeAll(tok, ids))
	}
	// "<s>" typed by a user is text, unless Special.
	ids, err := tok.Encode("<s>", Options{})
	require.NoError(t, err)
	require.NotContains(t, ids, 1)
	ids, err = tok.Encode("<s>", Options{Special: true})
	require.NoError(t, err)
	require.Equal(t, []int{1}, ids)
}
