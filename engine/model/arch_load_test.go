package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

	// LongRoPE (128k files) is refused by name.
	lr := newTinyModel().asArch("phi3")
	lr.drop("blk.0.attn_q.weight").drop("blk.0.attn_k.weight").drop("blk.0.attn_v.weight").drop("blk.0.ffn_gate.weight")
	lr.tensor("blk.0.attn_qkv.weight").dims = []uint64{32, 32 + 16 + 16}
	lr.tensor("blk.0.ffn_up.weight").dims = []uint64{32, 2 * 64}
	lr.tensor("rope_factors_long.weight").dims = []uint64{4}
	_, err = lr.load(t)
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "rope scaling type longrope (tensor rope_factors_long.weight")

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
