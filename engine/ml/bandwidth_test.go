package ml

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSumF32(t *testing.T) {
	for _, n := range []int{1, 3, 16, 17, 255, 4096 + 5} {
		p := make([]float32, n)
		want := float32(0)
		for i := range p {
			p[i] = float32(i % 7) // small integers: every order of addition is exact
			want += p[i]
		}
		require.Equal(t, want, sumF32(p), "n=%d", n)
	}
}

func TestReadBandwidth(t *testing.T) {
	buf := make([]float32, 1<<20)
	best, median := ReadBandwidth(buf, 2, 3)
	require.Greater(t, median, 0.0)
	require.GreaterOrEqual(t, best, median)
	best, median = ReadBandwidth(nil, 2, 3)
	require.Zero(t, best)
	require.Zero(t, median)
}
