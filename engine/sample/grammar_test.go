package sample

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func maskOf(n int, ids ...int) []uint64 {
	m := make([]uint64, (n+63)/64)
	for _, id := range ids {
		m[id>>6] |= 1 << (id & 63)
	}
	return m
}

func TestSampleMasked(t *testing.T) {
	const n = 200
	base := make([]float32, n)
	for i := range base {
		base[i] = float32(i % 7)
	}
	base[5] = 50   // by far the most likely, but not allowed
	base[130] = 3  // allowed
	base[131] = 4  // allowed, best of the allowed
	base[199] = 40 // not allowed
	mask := maskOf(n, 64, 130, 131)

	logits := append([]float32(nil), base...)
	id, err := New(Greedy()).SampleMasked(logits, nil, mask)
	require.NoError(t, err)
	require.Equal(t, 131, id)

	seen := map[int]int{}
	for seed := range uint64(300) {
		p := DefaultParams()
		p.Temperature, p.TopK, p.MinP, p.Seed = 2, 0, 0, seed
		logits := append([]float32(nil), base...)
		id, err := New(p).SampleMasked(logits, []int{131, 5}, mask)
		require.NoError(t, err)
		seen[id]++
	}
	for id := range seen {
		require.Contains(t, []int{64, 130, 131}, id)
	}
	require.Greater(t, seen[130], 0, "sampling stays random among the allowed tokens")
	require.Greater(t, seen[131], 0)

	_, err = New(Greedy()).SampleMasked(append([]float32(nil), base...), nil, maskOf(n))
	require.ErrorIs(t, err, ErrNoAllowedToken)

	// Allowed tokens the model rules out entirely: still an allowed token.
	logits = append([]float32(nil), base...)
	logits[64], logits[130], logits[131] = float32(math.Inf(-1)), float32(math.NaN()), float32(math.Inf(-1))
	p := DefaultParams()
	p.Seed = 1
	id, err = New(p).SampleMasked(logits, nil, mask)
	require.NoError(t, err)
	require.Equal(t, 64, id)
}

func TestApplyMask(t *testing.T) {
	logits := []float32{1, 2, 3, 4}
	ApplyMask(logits, maskOf(4, 1, 3))
	inf := float32(math.Inf(-1))
	require.Equal(t, []float32{inf, 2, inf, 4}, logits)
	// A short mask disallows the ids past it.
	logits = make([]float32, 70)
	ApplyMask(logits, []uint64{1})
	require.Equal(t, float32(0), logits[0])
	require.Equal(t, inf, logits[69])
}
