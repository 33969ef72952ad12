package model

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrefetchProgress(t *testing.T) {
	w, _, err := Open(BuiltinStories, "")
	require.NoError(t, err)
	defer w.Close()
	// The checkpoint minus its 28-byte header and the unused freq_cis
	// tables (2 x 512 x 4 floats); the tied output is the embedding.
	const want = 1_056_540 - 28 - 2*512*4*4
	require.Equal(t, int64(want), w.WeightBytes())
	var calls [][2]int64
	w.Prefetch(func(done, total int64) { calls = append(calls, [2]int64{done, total}) })
	require.NotEmpty(t, calls)
	last := int64(0)
	for _, c := range calls {
		require.Equal(t, int64(want), c[1])
		require.GreaterOrEqual(t, c[0], last, "monotonic")
		last = c[0]
	}
	require.Equal(t, [2]int64{want, want}, calls[len(calls)-1])
	w.Prefetch(nil) // no callback: just the reads
}
