package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
)

// TestGPUSpeculative runs speculation on the CUDA runner: draft rows'
// logits come back per position and the tables advance over verified
// tokens only, so greedy output equals the same engine's without
// speculation and the pages all come back. It skips without a CUDA driver
// (KVWARDEN_CUDA_STANDIN=1 runs the plumbing on the stand-in).
func TestGPUSpeculative(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA GPU: %v", err)
	}
	dir := modelsDir(t)
	plain := storiesEngine(t, dir, func(c *Config) { c.Device = "cuda" })
	spec := storiesEngine(t, dir, func(c *Config) { c.Device = "cuda"; c.Speculative = ngram; c.ZeroOnRelease = true })
	var reqs []Request
	for _, p := range specPrompts {
		reqs = append(reqs, Request{Prompt: p, MaxTokens: 100, Sampling: sample.Greedy()})
	}
	want := make([][]int, len(reqs))
	for i, r := range reqs {
		res, err := plain.Generate(t.Context(), r)
		require.NoError(t, err)
		want[i] = res.Tokens
	}
	for j, res := range runAll(t, spec, append(reqs, reqs...)) {
		require.NoError(t, res.Err)
		kernelOut(t).Equal(want[j%len(reqs)], res.Tokens, "request %d", j)
	}
	st := spec.Stats()
	require.NotZero(t, st.Spec.Drafted)
	require.Zero(t, st.IsolationFailures)
	waitPoolIdle(t, spec)
}
