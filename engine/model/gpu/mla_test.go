package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
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

// TestRunnerRefusesKOnlyPool: the kernels address V PageSize rows after K
// in a two-plane page, so a K-only pool (latent attention's) is refused
// by name before anything touches the device, whatever the model.
func TestRunnerRefusesKOnlyPool(t *testing.T) {
	c := model.DefaultConfig()
	for _, kOnly := range []bool{true, false} {
		g := c.KVGeometry(16, device.F16)
		g.KOnly = kOnly
		pool, err := kvcache.New(cpu.New(), kvcache.Config{Geometry: g, Pages: 2})
		require.NoError(t, err)
		_, err = newRunner(nil, c, nil, pool, Options{})
		require.NoError(t, pool.Close())
		if kOnly {
			require.ErrorIs(t, err, model.ErrNotImplemented)
			require.ErrorContains(t, err, "K-only KV pool")
			continue
		}
		// A two-plane pool passes the geometry checks and stops at the
		// arena, which is not device memory here.
		require.ErrorContains(t, err, "is not device memory")
	}
}
