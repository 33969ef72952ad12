package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// TestGPULongRoPEContext checks that the GPU runner builds its RoPE tables
// from the factor set model.NewRunnerContext would use: LongRoPE's long
// factors for a context above the original one (the model's own context
// when Options.MaxContext is 0), the short ones otherwise.
func TestGPULongRoPEContext(t *testing.T) {
	d := gpuOrSkip(t)
	g := testmodels.LoadArchGolden(t, "phi3-longrope")
	w, f, err := model.LoadGGUF(g.Model)
	require.NoError(t, err)
	defer f.Close()
	pool := gpuPool(t, d, w.Config, device.F32, 16)
	var tables [][]*model.Rope
	for _, c := range []struct{ opt, ctx int }{{0, w.Config.MaxContext}, {65, 65}, {64, 64}} {
		r, err := New(d, w, pool, Options{Weights: device.F32, MaxContext: c.opt})
		require.NoError(t, err)
		want, _ := model.Ropes(r.cfg, w.RopeFactors(c.ctx))
		require.Equal(t, want, r.ropes, "MaxContext %d", c.opt)
		tables = append(tables, r.ropes)
		r.Close()
	}
	require.Equal(t, tables[0], tables[1])
	require.NotEqual(t, tables[1], tables[2], "long and short factors give different tables")
}
