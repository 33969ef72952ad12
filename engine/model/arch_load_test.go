package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// asArch renames the tiny model's llama.* keys to another architecture.
func (m *tinyModel) asArch(name string) *tinyModel {
	for i := range m.kvs {
		if k, ok := strings.CutPrefix(m.kvs[i].key, "llama."); ok {
			m.kvs[i].key = name + "." + k
		}
	}
	return m.set("general.architecture", name)
}

func TestFromGGUFOptionalParts(t *testing.T) {
	// Llama 3.1+: rope_freqs; and Q/K/V/O biases, used when present.
	m := newTinyModel()
	m.tensor("rope_freqs.weight").dims = []uint64{4}
	for _, b := range []struct {
		name string
		n    uint64
	}{{"attn_q", 32}, {"attn_k", 16}, {"attn_v", 16}, {"attn_output", 32}} {
		m.tensor("blk.0." + b.name + ".bias").dims = []uint64{b.n}
	}
	w, err := m.load(t)
	require.NoError(t, err)
	require.Len(t, w.RopeFreqs, 4)
	l := w.Layers[0]
	require.Equal(t, []int{32, 16, 16, 32}, []int{len(l.QBias), len(l.KBias), len(l.VBias), len(l.OBias)})

	// A bias of the wrong size, and frequency factors that are not positive.
	m = newTinyModel()
	m.tensor("rope_freqs.weight").dims = []uint64{4}
	m.tensor("rope_freqs.weight").data = make([]byte, 16)
	_, err = m.load(t)
	require.ErrorContains(t, err, "rope_freqs[0] = 0; frequency factors must be positive")
}

func TestFromGGUFFusedPhi3(t *testing.T) {
	m := newTinyModel().asArch("phi3")
	m.drop("blk.0.attn_q.weight").drop("blk.0.attn_k.weight").drop("blk.0.attn_v.weight").drop("blk.0.ffn_gate.weight")
	m.tensor("blk.0.attn_qkv.weight").dims = []uint64{32, 32 + 16 + 16}
	m.tensor("blk.0.ffn_up.weight").dims = []uint64{32, 2 * 64}
	f, err := gguf.Parse(m.bytes(t))
	require.NoError(t, err)
	w, err := FromGGUF(f)
	require.NoError(t, err)
	require.Equal(t, "phi3", w.Config.Arch)
	require.Equal(t, arch.RopeNeoX, w.Config.Block.RopeStyle)
	qkv, _ := f.Tensor("blk.0.attn_qkv.weight")
	up, _ := f.Tensor("blk.0.ffn_up.weight")
	l := w.Layers[0]
	const row = 32 * 4 // bytes of one F32 row
	// Views into the fused tensors, rows in order Q, K, V and gate, up.
	require.Same(t, &qkv.Data[0], &l.Q.Data[0])
	require.Same(t, &qkv.Data[32*row], &l.K.Data[0])
	require.Same(t, &qkv.Data[48*row], &l.V.Data[0])
	require.Equal(t, []int{32, 16, 16}, []int{l.Q.Rows, l.K.Rows, l.V.Rows})
	require.Same(t, &up.Data[0], &l.Gate.Data[0])
	require.Same(t, &up.Data[64*row], &l.Up.Data[0])
	require.Equal(t, []int{64, 64}, []int{l.Gate.Rows, l.Up.Rows})

	// LongRoPE (Phi-3/3.5 128k files): both factor sets load; the context
	// size against the original context length chooses one (llama.cpp's
	// get_rope_factors); the attention factor scales the rotation.
	longRoPE := func() *tinyModel {
		lr := newTinyModel().asArch("phi3")
		lr.drop("blk.0.attn_q.weight").drop("blk.0.attn_k.weight").drop("blk.0.attn_v.weight").drop("blk.0.ffn_gate.weight")
		lr.tensor("blk.0.attn_qkv.weight").dims = []uint64{32, 32 + 16 + 16}
		lr.tensor("blk.0.ffn_up.weight").dims = []uint64{32, 2 * 64}
		lr.tensor("rope_factors_long.weight").data = ml.F32Bytes([]float32{1, 2, 4, 8})
		lr.tensor("rope_factors_long.weight").dims = []uint64{4}
		lr.tensor("rope_factors_short.weight").data = ml.F32Bytes([]float32{1, 1, 1.5, 2})
		lr.tensor("rope_factors_short.weight").dims = []uint64{4}
		return lr.set("phi3.rope.scaling.original_context_length", uint32(16)).set("phi3.rope.scaling.attn_factor", float32(1.25))
	}
	w, err = longRoPE().load(t)
	require.NoError(t, err)
	require.Equal(t, arch.Scaling{OrigContext: 16, Mscale: 1.25}, w.Config.Block.Scaling)
	require.Equal(t, 64, w.Config.MaxContext)
	for _, c := range []struct {
		ctx  int
		want []float32
	}{{64, w.RopeLong}, {17, w.RopeLong}, {16, w.RopeShort}, {8, w.RopeShort}} {
		require.Equal(t, c.want, w.RopeFactors(c.ctx), "context %d", c.ctx)
	}
	require.Equal(t, []float32{1, 2, 4, 8}, w.RopeLong)
	require.Equal(t, []float32{1, 1, 1.5, 2}, w.RopeShort)
	// Without original_context_length the file's context length is the
	// original one (llama.cpp's n_ctx_orig_yarn = n_ctx_train).
	w, err = longRoPE().set("phi3.rope.scaling.original_context_length", nil).load(t)
	require.NoError(t, err)
	require.Equal(t, w.RopeShort, w.RopeFactors(64))
	require.Equal(t, w.RopeLong, w.RopeFactors(65))
	// Bad factor sets are refused by name.
	bad := longRoPE()
	bad.tensor("rope_factors_short.weight").data = ml.F32Bytes([]float32{1, 0, 1, 1})
	_, err = bad.load(t)
	require.ErrorContains(t, err, "rope_factors_short[1] = 0; frequency factors must be positive")
	bad = longRoPE()
	bad.tensor("rope_factors_long.weight").data = ml.F32Bytes([]float32{1, 2})
	bad.tensor("rope_factors_long.weight").dims = []uint64{2}
	_, err = bad.load(t)
	require.ErrorContains(t, err, "rope_factors_long")

	// The fused tensor is required; a separate one is refused as unused.
	m.tensor("blk.0.attn_q.weight").dims = []uint64{32, 32}
	_, err = m.load(t)
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "tensor blk.0.attn_q.weight (F32 [32 32]) is not part of the phi3 block")
}

func TestFromGGUFRequiredByDescription(t *testing.T) {
	// qwen3 needs per-head Q/K norm weights.
	m := newTinyModel().asArch("qwen3")
	_, err := m.load(t)
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "gguf tensor blk.0.attn_q_norm is missing (architecture qwen3 needs it)")
	m.tensor("blk.0.attn_q_norm.weight").dims = []uint64{8}
	m.tensor("blk.0.attn_k_norm.weight").dims = []uint64{8}
	w, err := m.load(t)
	require.NoError(t, err)
	require.Len(t, w.Layers[0].QNorm, 8)

	// gemma2 needs post-norms; Q/K norm tensors would be refused.
	m = newTinyModel().asArch("gemma2")
	m.tensor("blk.0.post_attention_norm.weight").dims = []uint64{32}
	_, err = m.load(t)
	require.ErrorContains(t, err, "gguf tensor blk.0.post_ffw_norm is missing (architecture gemma2 needs it)")
	m.tensor("blk.0.post_ffw_norm.weight").dims = []uint64{32}
	w, err = m.load(t)
	require.NoError(t, err)
	b := w.Config.Block
	require.Equal(t, arch.GeGLU, b.Activation)
	require.InDelta(t, 5.656854, b.EmbedScale, 1e-5) // sqrt(32)
	require.Equal(t, float32(50), b.AttnSoftcap)
	require.Equal(t, float32(30), b.FinalSoftcap)
	require.Equal(t, 4096, b.Window)
}
