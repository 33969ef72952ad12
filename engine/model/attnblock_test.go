package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestAttentionBlockedBits requires the blocked prefill attention to give
// every row the bits of the row-by-row path: a prompt chunk after an
// earlier chunk (so the span crosses pages and tiles), next to a second
// sequence in the same step, for grouped-query shapes with and without
// the four-head kernels and with soft-capped and ALiBi scores.
func TestAttentionBlockedBits(t *testing.T) {
	base := DefaultConfig()
	base.Dim, base.Hidden, base.Layers = 256, 256, 2
	tests := []struct {
		name       string
		heads, kvh int
		headDim    int
		softcap    float32
		alibi      float32
	}{
		{"gqa4 d64", 8, 2, 64, 0, 0},
		{"gqa3 d64", 6, 2, 64, 0, 0},
		{"mha d32", 4, 4, 32, 0, 0},
		{"gqa4 d64 softcap", 8, 2, 64, 30, 0},
		{"gqa4 d64 alibi", 8, 2, 64, 0, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = tc.heads, tc.kvh, tc.headDim, tc.headDim
			c.Block.AttnSoftcap, c.Block.ALiBi = tc.softcap, tc.alibi
			w, err := Synthetic(c, 7, ml.F32)
			require.NoError(t, err)
			var ref [][]float32
			// Row by row, blocked, and blocked one row per unit (the
			// scores bound at its floor).
			for _, scoreBytes := range []int{0, attnScoreBytes, 1} {
				saved := attnScoreBytes
				attnBlocked = scoreBytes != 0
				if scoreBytes != 0 {
					attnScoreBytes = scoreBytes
				}
				got := prefillHidden(t, w, []int{70, 300}, 45)
				attnBlocked, attnScoreBytes = true, saved
				if ref == nil {
					ref = got
					continue
				}
				for i := range ref {
					require.Len(t, got[i], len(ref[i]))
					for j := range ref[i] {
						require.Equal(t, math.Float32bits(ref[i][j]), math.Float32bits(got[i][j]),
							fmt.Sprintf("sequence %d value %d: %v vs %v", i, j, got[i][j], ref[i][j]))
					}
				}
			}
		})
	}
}

// prefillHidden feeds sequence 0 a first chunk of chunks[0] tokens alone,
// then its next chunks[1] tokens together with a second sequence's
// other tokens in one step, on an f16 cache, and returns the hidden
// states of that step.
func prefillHidden(t *testing.T, w *Weights, chunks []int, other int) [][]float32 {
	c := w.Config
	pool, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: c.KVGeometry(16, device.F16),
		Pages:    (chunks[0]+chunks[1]+other)/16 + 4,
		Poison:   true,
	})
	require.NoError(t, err)
	defer pool.Close()
	r, err := NewRunner(w, pool)
	require.NoError(t, err)
	toks := func(n, seed int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 3 + (i*seed+seed)%200
		}
		return out
	}
	a := pool.NewTable(kvcache.RequestID(1), "t")
	b := pool.NewTable(kvcache.RequestID(2), "t")
	require.NoError(t, a.Reserve(chunks[0]+chunks[1]))
	require.NoError(t, b.Reserve(other))
	require.NoError(t, r.Forward(&Batch{Seqs: []Seq{{Tokens: toks(chunks[0], 5), Table: a}}}))
	step := &Batch{Seqs: []Seq{
		{Tokens: toks(chunks[1], 7), Table: a, Hidden: true, Logits: true},
		{Tokens: toks(other, 11), Table: b, Hidden: true},
	}}
	require.NoError(t, r.Forward(step))
	out := make([][]float32, len(step.Hidden))
	for i, h := range step.Hidden {
		out[i] = append([]float32(nil), h...)
	}
	return out
}
