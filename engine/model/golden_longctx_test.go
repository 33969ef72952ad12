package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// TestGoldenArchLongRoPEContext checks that the runner's context size picks
// LongRoPE's factor set as llama.cpp does (README of golden/arch): the
// golden run had a context of 256 over an original context of 64, so any
// runner for more than 64 tokens uses the long factors and reproduces it,
// at every position, the 5-token prompt included; a runner for at most 64
// tokens uses the short factors and is far off (llama.cpp's own distance
// between the two sets here is 8.1, bug_sensitivity.moe.json).
func TestGoldenArchLongRoPEContext(t *testing.T) {
	g := testmodels.LoadArchGolden(t, "phi3-longrope")
	w, f, err := LoadGGUF(g.Model)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, 64, w.Config.Block.Scaling.OrigContext)
	require.NotNil(t, w.RopeLong)
	require.NotNil(t, w.RopeShort)
	pool := newTestPool(t, w.Config, 64)
	id := kvcache.RequestID(1)
	for _, ctx := range []int{65, 128, 256} {
		r, err := NewRunnerContext(w, pool, ctx)
		require.NoError(t, err)
		for ci, c := range g.Cases {
			d := maxDiff(t, teacherForce(t, r, pool, id, c, len(c.Logits64), 0), c)
			id++
			require.LessOrEqual(t, d, 1e-3, "context %d case %d", ctx, ci)
		}
	}
	short, err := NewRunnerContext(w, pool, 64)
	require.NoError(t, err)
	c := g.Cases[0]
	d := maxDiff(t, teacherForce(t, short, pool, id, c, len(c.Logits64), 0), c)
	t.Logf("short factors: max |dlogit| %.3g", d)
	require.Greater(t, d, 1.0)

	// The factor sets survive requantization (Requantize keeps them).
	q, err := Requantize(w, ml.F32)
	require.NoError(t, err)
	require.Equal(t, w.RopeLong, q.RopeFactors(65))
	require.Equal(t, w.RopeShort, q.RopeFactors(64))
}
