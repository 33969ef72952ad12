package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gpu"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// TestRegistryCUDA: importing the package registers "cuda" for device auto,
// ahead of the CPU.
func TestRegistryCUDA(t *testing.T) {
	d, err := backend.Lookup(Name)
	require.NoError(t, err)
	require.True(t, d.Auto)
	require.Positive(t, d.Priority)
	require.NotNil(t, d.Probe, "auto probes for a driver before opening the GPU")
}

// TestSupportsKVType: the CUDA attention kernels read f32, f16 and bf16
// KV; a block-quantized type is refused by name (device auto then takes
// the CPU; a named "cuda" fails with the error).
func TestSupportsKVType(t *testing.T) {
	dense, err := model.Synthetic(model.DefaultConfig(), 1, ml.F32)
	require.NoError(t, err)
	var b Backend // Supports needs no GPU
	for _, kv := range []device.DType{device.Q8_0, device.Q4_0} {
		err := b.Supports(dense, kv)
		require.ErrorIs(t, err, backend.ErrKVTypeUnsupported)
		require.ErrorContains(t, err, kv.String())
	}
	for _, kv := range []device.DType{device.F16, device.F32} {
		require.NoError(t, b.Supports(dense, kv))
	}
}

// TestSupportsMoE: the CUDA runner runs the mixture-of-experts files
// (qwen3moe, Mixtral, gpt-oss with its sinks and clamped SwiGLU), so device
// auto keeps them on the GPU; a gating kind its host routing does not know
// is refused by name (gpu.ErrMoE, which the C API reports as unsupported).
func TestSupportsMoE(t *testing.T) {
	var b Backend
	for _, name := range []string{"qwen3moe", "mixtral", "gptoss"} {
		t.Run(name, func(t *testing.T) {
			g := testmodels.LoadArchGolden(t, name)
			w, f, err := model.LoadGGUF(g.Model)
			require.NoError(t, err)
			defer f.Close()
			require.Positive(t, w.Config.Block.MoE.Experts)
			require.NoError(t, b.Supports(w, device.F16))
			w.Config.Block.MoE.Gating = arch.GatingSoftmaxSelected + 1
			err = b.Supports(w, device.F16)
			require.ErrorIs(t, err, gpu.ErrMoE)
			require.ErrorIs(t, err, model.ErrUnsupported, "the C API reports KVW_ERR_UNSUPPORTED")
			require.ErrorContains(t, err, "expert gating")
		})
	}
}
