package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// A modern-bert file loads as a pre-norm GEGLU encoder with its window on
// layer 1 (not 0: the first of each pattern is global) and the local RoPE
// base; the gated activations llama.cpp also reads (SwiGLU, ReGLU) are
// refused naming the key.
func TestFromGGUFModernBert(t *testing.T) {
	for _, tc := range []struct {
		act string
		ok  bool
	}{{"", true}, {"gelu", true}, {"geglu", true}, {"swiglu", false}, {"silu", false}, {"reglu", false}} {
		t.Run("act="+tc.act, func(t *testing.T) {
			data, err := embedtest.BERTBytes(embedtest.BERTSpec{Pooling: 1, Modern: true, Activation: tc.act}, embedtest.TinyBERT)
			require.NoError(t, err)
			f, err := gguf.Parse(data)
			require.NoError(t, err)
			w, err := model.FromGGUF(f)
			if !tc.ok {
				require.ErrorIs(t, err, model.ErrUnsupported)
				require.ErrorContains(t, err, "hidden_activation")
				return
			}
			require.NoError(t, err)
			c := w.Config
			require.True(t, w.IsEncoder() && w.Encoder.PreNorm && w.Encoder.GEGLU && c.NonCausal)
			require.Equal(t, embedtest.ModernWindow, c.Block.Window)
			require.True(t, c.Block.WindowSymmetric)
			require.False(t, c.Block.Local(0))
			require.True(t, c.Block.Local(1))
			require.Nil(t, w.Layers[0].AttnNorm)
			require.NotNil(t, w.Layers[1].AttnNorm)
			require.Equal(t, 2*c.Hidden, w.Layers[0].Up.Rows)
			theta, _ := c.Block.LayerRope(1, c.RopeTheta)
			require.Equal(t, float32(10000), theta)
			require.Equal(t, float32(160000), c.RopeTheta)
		})
	}
}
