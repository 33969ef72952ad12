package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestEchoPoolLayouts: the echo stand-in runs on two-plane pools and on
// K-only ones (latent attention's layout, which takes no V row): it
// writes each token's id and reads its context back through ReadKV.
func TestEchoPoolLayouts(t *testing.T) {
	const sep = 99
	for _, kOnly := range []bool{false, true} {
		pool, err := kvcache.New(cpu.New(), kvcache.Config{
			Geometry: kvcache.Geometry{PageSize: 4, Layers: 2, KVHeads: 1, HeadDim: 2, DType: device.F32, KOnly: kOnly},
			Pages:    4, Poison: true,
		})
		require.NoError(t, err)
		e, err := NewEcho(pool, sep, "")
		require.NoError(t, err)
		e.SetVocab(128)
		tab := pool.NewTable(1, "t")
		prompt := []int{1, 5, 6, 7, sep}
		want := EchoOutput(prompt, sep, 3)
		require.NoError(t, tab.Reserve(len(prompt)+len(want)))
		b := &model.Batch{Seqs: []model.Seq{{Tokens: prompt, Table: tab, Logits: true}}}
		var got []int
		for range want {
			require.NoError(t, e.Forward(b), "K-only %v", kOnly)
			next := 0
			for i, x := range b.Logits[0] {
				if x > b.Logits[0][next] {
					next = i
				}
			}
			got = append(got, next)
			b.Seqs[0].Tokens = []int{next}
		}
		require.Equal(t, want, got, "K-only %v", kOnly)
		require.NoError(t, tab.Release())
		require.NoError(t, pool.Close())
	}
}
