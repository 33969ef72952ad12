package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
)

func TestLoadLlama2CStories260K(t *testing.T) {
	path := filepath.Join(testModelsDir(t), "stories260K.bin")
	w, err := LoadLlama2C(path)
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, stories260KConfig, w.Config)
	require.Equal(t, "stories260K.bin", w.Name)
	require.Same(t, w.Embed, w.Output, "shared classifier")

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f32 := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(raw[28+4*i:])) }
	dim, vocab, L, hidden, kv := 64, 512, 5, 172, 32
	require.Equal(t, f32(0), ml.BytesF32(w.Embed.Data)[0])
	require.Equal(t, f32(vocab*dim-1), ml.BytesF32(w.Embed.Data)[vocab*dim-1])
	// The first value of each tensor lies where the layout says.
	off := vocab * dim
	require.Equal(t, f32(off+dim), w.Layers[1].AttnNorm[0])
	off += L * dim
	require.Equal(t, f32(off+2*dim*dim), ml.BytesF32(w.Layers[2].Q.Data)[0])
	off += L * dim * dim
	require.Equal(t, f32(off), ml.BytesF32(w.Layers[0].K.Data)[0])
	off += L * kv * dim
	require.Equal(t, f32(off+4*kv*dim), ml.BytesF32(w.Layers[4].V.Data)[0])
	off += L * kv * dim
	require.Equal(t, f32(off+dim*dim), ml.BytesF32(w.Layers[1].O.Data)[0])
	off += L * dim * dim
	require.Equal(t, f32(off+3*dim), w.Layers[3].FFNNorm[0])
	off += L * dim
	require.Equal(t, f32(off), ml.BytesF32(w.Layers[0].Gate.Data)[0])
	off += L * hidden * dim
	require.Equal(t, f32(off+dim*hidden), ml.BytesF32(w.Layers[1].Down.Data)[0])
	off += L * dim * hidden
	require.Equal(t, f32(off+4*hidden*dim+hidden*dim-1), ml.BytesF32(w.Layers[4].Up.Data)[hidden*dim-1])
	off += L * hidden * dim
	require.Equal(t, f32(off+dim-1), w.Norm[dim-1])
}

// llama2cFile builds a checkpoint for header h whose float i is i+0.5.
func llama2cFile(h [7]int32, extra int) []byte {
	dim, hidden, layers, heads, kvh, vocab, seq := int(h[0]), int(h[1]), int(h[2]), int(h[3]), int(h[4]), int(h[5]), int(h[6])
	kvDim := dim / heads * kvh
	n := vocab*dim + layers*(2*dim+2*dim*dim+2*kvDim*dim+3*hidden*dim) + dim + seq*dim/heads
	if vocab < 0 {
		n = -vocab*dim + layers*(2*dim+2*dim*dim+2*kvDim*dim+3*hidden*dim) + dim + seq*dim/heads - vocab*dim
	}
	n += extra
	b := make([]byte, 28+4*n)
	for i, v := range h {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[28+4*i:], math.Float32bits(float32(i)+0.5))
	}
	return b
}

func TestLlama2CUnsharedClassifier(t *testing.T) {
	h := [7]int32{16, 32, 2, 4, 2, -10, 6}
	data := llama2cFile(h, 0)
	w, err := llama2cFromBytes(data)
	require.NoError(t, err)
	require.NotSame(t, w.Embed, w.Output)
	require.Equal(t, 10, w.Config.Vocab)
	require.Equal(t, 6, w.Config.MaxContext)
	nFloats := (len(data) - 28) / 4
	out := ml.BytesF32(w.Output.Data)
	require.Len(t, out, 10*16)
	require.Equal(t, float32(nFloats-160)+0.5, out[0], "wcls follows the freq_cis tables")
	require.Equal(t, float32(nFloats-1)+0.5, out[159])

	// The same through a file, and a misaligned in-memory copy.
	path := filepath.Join(t.TempDir(), "unshared.bin")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	w2, err := LoadLlama2C(path)
	require.NoError(t, err)
	require.Equal(t, w.Output.Data, w2.Output.Data)
	require.NoError(t, w2.Close())

	buf := make([]byte, len(data)+1)
	copy(buf[1:], data)
	w3, err := llama2cFromBytes(buf[1:])
	require.NoError(t, err)
	require.Equal(t, w.Layers[1].Down.Data, w3.Layers[1].Down.Data)
}

func TestLlama2CErrors(t *testing.T) {
	good := [7]int32{16, 32, 2, 4, 2, 10, 6}
	hdr := func(mod func(h *[7]int32)) []byte {
		h := good
		mod(&h)
		b := make([]byte, 28+1024)
		for i, v := range h {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
		return b
	}
	valid := llama2cFile(good, 0)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "llama2c: file is 0 bytes, too short for the 28-byte header"},
		{"short header", valid[:20], "llama2c: file is 20 bytes, too short for the 28-byte header"},
		{"truncated", valid[:len(valid)-4], "llama2c: file is truncated: 19512 bytes, but the header (dim 16, hidden_dim 32, n_layers 2, n_heads 4, n_kv_heads 2, vocab_size 10, seq_len 6) needs 19516"},
		{"trailing bytes", llama2cFile(good, 3), "llama2c: file is 19528 bytes, 12 more than the header (dim 16, hidden_dim 32, n_layers 2, n_heads 4, n_kv_heads 2, vocab_size 10, seq_len 6) implies; not a legacy llama2.c checkpoint?"},
		{"negative dim", hdr(func(h *[7]int32) { h[0] = -16 }), "llama2c: header dim at offset 0 is -16, must be positive"},
		{"zero layers", hdr(func(h *[7]int32) { h[2] = 0 }), "llama2c: header n_layers at offset 8 is 0, must be positive"},
		{"zero kv heads", hdr(func(h *[7]int32) { h[4] = 0 }), "llama2c: header n_kv_heads at offset 16 is 0, must be positive"},
		{"zero vocab", hdr(func(h *[7]int32) { h[5] = 0 }), "llama2c: header vocab_size at offset 20 is 0"},
		{"min vocab", hdr(func(h *[7]int32) { h[5] = math.MinInt32 }), "llama2c: header vocab_size at offset 20 is -2147483648"},
		{"heads do not divide dim", hdr(func(h *[7]int32) { h[3] = 3 }), "llama2c: header (dim 16, hidden_dim 32, n_layers 2, n_heads 3, n_kv_heads 2, vocab_size 10, seq_len 6): dim is not a multiple of n_heads"},
		{"bad GQA", hdr(func(h *[7]int32) { h[4] = 3 }), "llama2c: header (dim 16, hidden_dim 32, n_layers 2, n_heads 4, n_kv_heads 3, vocab_size 10, seq_len 6): n_heads must be a multiple of n_kv_heads and dim/n_heads even"},
		{"huge dims", hdr(func(h *[7]int32) { h[0], h[1], h[2], h[5] = 1<<30, 1<<30, 1<<30, 1<<30 }),
			"llama2c: header (dim 1073741824, hidden_dim 1073741824, n_layers 1073741824, n_heads 4, n_kv_heads 2, vocab_size 1073741824, seq_len 6) implies an impossibly large model"},
		{"large dim", hdr(func(h *[7]int32) { h[0] = 1 << 20 }),
			"llama2c: file is truncated: 1052 bytes, but the header (dim 1048576, hidden_dim 32, n_layers 2, n_heads 4, n_kv_heads 2, vocab_size 10, seq_len 6) needs 26389153579036"},
		{"export v1 magic", func() []byte {
			b := make([]byte, 256)
			binary.LittleEndian.PutUint32(b, 0x616b3432)
			binary.LittleEndian.PutUint32(b[4:], 1)
			return b
		}(), `llama2c: file starts with magic "ak42" (llama2.c export version 1); only legacy version-0 checkpoints are supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := llama2cFromBytes(c.data)
			require.Nil(t, w)
			require.EqualError(t, err, c.want)
		})
	}

	_, err := LoadLlama2C(filepath.Join(t.TempDir(), "missing.bin"))
	require.ErrorIs(t, err, os.ErrNotExist)
	path := filepath.Join(t.TempDir(), "trunc.bin")
	require.NoError(t, os.WriteFile(path, valid[:100], 0o644))
	_, err = LoadLlama2C(path)
	require.ErrorContains(t, err, "trunc.bin: llama2c: file is truncated: 100 bytes")
}
