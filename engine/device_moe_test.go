package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gpu"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// TestCPUOnlyForMoE: device auto moves a mixture-of-experts model to the
// CPU (the CUDA runner refuses it with gpu.ErrMoE); an explicit "cuda"
// keeps the refusal, and a dense model stays on CUDA.
func TestCPUOnlyForMoE(t *testing.T) {
	moe := testmodels.LoadArchGolden(t, "qwen3moe")
	w, f, err := model.LoadGGUF(moe.Model)
	require.NoError(t, err)
	defer f.Close()
	dense, err := model.Synthetic(model.DefaultConfig(), 1, ml.F32)
	require.NoError(t, err)
	for _, tc := range []struct {
		device string
		w      *model.Weights
		cpu    bool
	}{
		{"auto", w, true}, {"", w, true}, {"cuda", w, false},
		{"auto", dense, false}, {"cuda", dense, false},
	} {
		err := cpuOnly(tc.device, tc.w)
		if tc.cpu {
			require.ErrorIs(t, err, gpu.ErrMoE, "device %q", tc.device)
			require.ErrorIs(t, err, ErrUnsupported, "the C API reports KVW_ERR_UNSUPPORTED")
			require.ErrorContains(t, err, "qwen3moe has 8 experts")
			continue
		}
		require.NoError(t, err, "device %q", tc.device)
	}
}
