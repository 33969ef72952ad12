package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// Seed 0 is a seed like any other; "no seed" is HasSeed false.
func TestSeedZeroIsAFixedSeed(t *testing.T) {
	e, err := New(Config{KVPages: 32, Device: "cpu"})
	require.NoError(t, err)
	defer e.Close()
	run := func(p sample.Params) []int {
		r, err := e.Generate(t.Context(), Request{Prompt: "hello", MaxTokens: 24, Sampling: p})
		require.NoError(t, err)
		require.NotEmpty(t, r.Tokens)
		return r.Tokens
	}
	hot := func(seed uint64, has bool) sample.Params {
		return sample.Params{Temperature: 1.5, TopP: 1, RepeatPenalty: 1, Seed: seed, HasSeed: has}
	}
	zero := run(hot(0, true))
	require.Equal(t, zero, run(hot(0, true)), "seed 0 twice: the same output")
	seven := run(hot(7, true))
	require.Equal(t, seven, run(hot(7, true)))
	require.NotEqual(t, zero, seven, "different seeds, different outputs")
	// Without a seed every request gets its own random state.
	require.NotEqual(t, run(hot(0, false)), run(hot(0, false)))
}

func TestConfigThreads(t *testing.T) {
	defer ml.SetThreads(ml.Threads())
	e, err := New(Config{KVPages: 8, Threads: 1, Device: "cpu"})
	require.NoError(t, err)
	require.Equal(t, 1, e.Config().Threads)
	require.Equal(t, 1, ml.Threads(), "the setting reaches the CPU worker pool")
	_, err = e.Generate(t.Context(), Request{Prompt: "hi", MaxTokens: 2})
	require.NoError(t, err)
	require.NoError(t, e.Close())

	e, err = New(Config{KVPages: 8, Device: "cpu"})
	require.NoError(t, err)
	defer e.Close()
	require.Equal(t, ml.PhysicalCores(), e.Config().Threads, "default: the physical cores")
	require.Equal(t, ml.PhysicalCores(), ml.Threads())
}
