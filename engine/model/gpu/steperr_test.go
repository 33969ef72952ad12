package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
)

// TestGPUStepFailureWaitsForDevice fails a launch, or a cuBLAS GEMM, in the
// middle of a forward step and checks that Forward returns the error only
// once the device has finished the work the step had already queued (so the
// engine may drop the step's page leases and the next step may refill the
// pinned buffers), that the tables were not advanced, and that the next step
// runs. Fault injection needs the driver stand-in (KVWARDEN_CUDA_STANDIN=1).
func TestGPUStepFailureWaitsForDevice(t *testing.T) {
	d := gpuOrSkip(t)
	if !cuda.StandIn() {
		t.Skip("fault injection needs the CUDA stand-in (KVWARDEN_CUDA_STANDIN=1)")
	}
	c := model.DefaultConfig()
	w, err := model.Synthetic(c, 42, ml.F32)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, fail string
		opt        Options
	}{
		{"K/V write kernel", "kv_write_f32", Options{Weights: device.F32, NoBLAS: true}},
		{"attention kernel", "kv_attention_f32_f32", Options{Weights: device.F32, NoBLAS: true}},
		{"cuBLAS GEMM", "cublas", Options{Weights: device.F32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := gpuPool(t, d, c, device.F32, 16)
			r, err := New(d, w, pool, tc.opt)
			require.NoError(t, err)
			defer r.Close()
			tab := pool.NewTable(1, "t")
			require.NoError(t, tab.Reserve(32))
			b := model.Batch{Seqs: []model.Seq{{Tokens: []int{1, 5, 9, 13}, Table: tab, Logits: true}}}

			cuda.StandInFailLaunch(tc.fail, 2) // the second one: work is queued before it
			err = r.Forward(&b)
			require.Error(t, err)
			require.Contains(t, err.Error(), "gpu: forward step")
			require.Zero(t, cuda.StandInQueued(), "Forward returned while the device still had the step's work queued")
			require.Zero(t, tab.Written(), "a failed step advanced the table")

			cuda.StandInFailLaunch("", 0)
			require.NoError(t, r.Forward(&b))
			require.Equal(t, 4, tab.Written())
		})
	}
}
