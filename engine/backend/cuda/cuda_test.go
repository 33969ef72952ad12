package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
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

// TestSupportsMoE: the CUDA runner refuses a mixture-of-experts model
// (gpu.ErrMoE, which the C API reports as unsupported), so device auto
// moves it to the CPU; a dense model stays.
func TestSupportsMoE(t *testing.T) {
	moe := testmodels.LoadArchGolden(t, "qwen3moe")
	w, f, err := model.LoadGGUF(moe.Model)
	require.NoError(t, err)
	defer f.Close()
	var b Backend
	err = b.Supports(w, device.F16)
	require.ErrorIs(t, err, gpu.ErrMoE)
	require.ErrorIs(t, err, model.ErrUnsupported, "the C API reports KVW_ERR_UNSUPPORTED")
	require.ErrorContains(t, err, "qwen3moe has 8 experts")
}
