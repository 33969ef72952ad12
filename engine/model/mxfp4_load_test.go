package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// mxfp4Blocks returns n random MXFP4 blocks with scales of weight-like
// magnitude (2^-8..2^-5 per unit code).
func mxfp4Blocks(r *rand.Rand, n int) []byte {
	b := make([]byte, 17*n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for i := 0; i < n; i++ {
		b[17*i] = byte(120 + r.IntN(4))
	}
	return b
}

// TestFromGGUFMXFP4 loads a model whose attention and FFN matrices are
// MXFP4: they stay MXFP4 views of the file, decode to the values of the
// format, and the model runs, within activation-quantization error of the
// same model requantized to F32.
func TestFromGGUFMXFP4(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 2))
	m := newTinyModel()
	mats := []string{"blk.0.attn_q.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}
	for _, name := range mats {
		tt := m.tensor(name)
		n := int(tt.dims[0] * tt.dims[1])
		tt.typ, tt.data = gguf.TypeMXFP4, mxfp4Blocks(r, n/32)
	}
	m.drop("output.weight") // tied to the random embeddings
	emb := m.tensor("token_embd.weight")
	emb.data = ml.F32Bytes(randVals(r, int(emb.dims[0]*emb.dims[1])))
	w, err := m.load(t)
	require.NoError(t, err)
	l := w.Layers[0]
	for _, mat := range []*ml.Matrix{l.Q, l.O, l.Gate, l.Up, l.Down} {
		require.Equal(t, ml.MXFP4, mat.Type)
	}
	// Element 17 of row 0 of ffn_down: high nibble of byte 1 of block 0.
	blk := m.tensor("blk.0.ffn_down.weight").data
	row := make([]float32, l.Down.Cols)
	ml.Dequantize(row, l.Down, 0)
	codes := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	want := codes[blk[2]>>4&7] * math.Ldexp(1, int(blk[0])-127)
	if blk[2]>>7 != 0 {
		want = -want
	}
	require.Equal(t, float32(want), row[17])

	fw, err := Requantize(w, ml.F32)
	require.NoError(t, err)
	pool := newTestPool(t, w.Config, 8)
	prompt := []int{1, 3, 5, 7, 2}
	logits := func(w *Weights) []float32 {
		run, err := NewRunner(w, pool)
		require.NoError(t, err)
		_, after, _ := greedy(t, run, pool, kvcache.RequestID(len(prompt)), prompt, 1, 0)
		return after
	}
	native, ref := logits(w), logits(fw)
	require.Len(t, native, w.Config.Vocab)
	var spread, worst float64
	for i := range native {
		require.False(t, math.IsNaN(float64(native[i])))
		worst = math.Max(worst, math.Abs(float64(native[i]-ref[i])))
		spread = math.Max(spread, math.Abs(float64(ref[i]-ref[0])))
	}
	require.Greater(t, spread, 0.1, "logits %v", ref)
	// Five quantized products, each about 1% RMS off (ml.TestIntAccuracy).
	require.Less(t, worst, 0.05*spread, "native %v, f32 %v", native, ref)
}

func randVals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}
