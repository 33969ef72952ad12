package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestRegistryCPU: importing the package registers "cpu" as device auto's
// last resort, and it runs every KV type over its own memory.
func TestRegistryCPU(t *testing.T) {
	d, err := backend.Lookup(Name)
	require.NoError(t, err)
	require.True(t, d.Auto)
	require.Zero(t, d.Priority)

	c, err := backend.Resolve(backend.Auto, nil)
	require.NoError(t, err)
	w, err := model.Synthetic(model.DefaultConfig(), 1, ml.F32)
	require.NoError(t, err)
	for _, kv := range []device.DType{device.F32, device.F16, device.Q8_0, device.Q4_0} {
		b, err := c.Supported(w, kv, nil)
		require.NoError(t, err)
		require.Equal(t, Name, b.Name(), "the only Auto backend in this binary")
	}
	b, err := c.Supported(w, device.F16, nil)
	require.NoError(t, err)
	mc := w.Config
	pool, err := kvcache.New(b, kvcache.Config{
		Geometry: kvcache.Geometry{PageSize: 16, Layers: mc.Layers, KVHeads: mc.KVHeads, HeadDim: mc.HeadDim, DType: device.F16}, Pages: 8,
	})
	require.NoError(t, err)
	defer pool.Close()
	r, err := b.NewRunner(w, pool, backend.RunnerOptions{MaxContext: 64})
	require.NoError(t, err)
	require.NotNil(t, r)
}
