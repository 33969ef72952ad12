package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
)

// DeepSeek's multi-head latent attention is CPU-only: the block
// description is refused by name (and as ErrMoE, so device auto runs the
// model on the CPU) before anything is uploaded.
func TestSupportsRefusesLatentAttention(t *testing.T) {
	c := model.Config{Arch: "deepseek2", Block: arch.Block{MLA: arch.MLA{KVRank: 512, Nope: 128, VDim: 128}}}
	err := supportsConfig(c)
	require.ErrorIs(t, err, ErrMoE)
	require.ErrorIs(t, err, model.ErrNotImplemented)
	require.ErrorIs(t, err, model.ErrUnsupported)
	require.ErrorContains(t, err, "deepseek2 multi-head latent attention (DeepSeek-V2/V3 MLA) is not implemented on CUDA")
	c.Block.MLA = arch.MLA{}
	require.NoError(t, supportsConfig(c))
}
