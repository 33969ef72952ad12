package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

func kvPool(t *testing.T, c Config, dt device.DType) *kvcache.Pool {
	t.Helper()
	p, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: c.KVGeometry(16, dt),
		Pages:    16, Poison: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// The CPU forward pass runs on an f16 KV pool: logits stay close to the
// f32 pool's (the cache rounds K and V to half precision), the output is
// the same whether the prompt is fed at once or in chunks, and a closed
// pool is refused rather than its unmapped arena read.
func TestForwardF16KV(t *testing.T) {
	w, err := Synthetic(DefaultConfig(), 3, ml.F32)
	require.NoError(t, err)
	prompt := []int{SyntheticBOS, 40, 41, 200, 7, 99, 100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
	var ref []float32
	for _, dt := range []device.DType{device.F32, device.F16} {
		pool := kvPool(t, w.Config, dt)
		r, err := NewRunner(w, pool)
		require.NoError(t, err)
		run := func(id kvcache.RequestID, chunk int) []float32 {
			tab := pool.NewTable(id, "t")
			defer func() { require.NoError(t, tab.Release()) }()
			require.NoError(t, tab.Reserve(len(prompt)))
			var logits []float32
			for i := 0; i < len(prompt); i += chunk {
				end := min(i+chunk, len(prompt))
				b := &Batch{Seqs: []Seq{{Tokens: prompt[i:end], Table: tab, Logits: end == len(prompt)}}}
				require.NoError(t, r.Forward(b))
				if end == len(prompt) {
					logits = append([]float32(nil), b.Logits[0]...)
				}
			}
			return logits
		}
		whole := run(1, len(prompt))
		for _, chunk := range []int{1, 3, 7} {
			require.Equal(t, whole, run(kvcache.RequestID(10+chunk), chunk), "%v chunk %d", dt, chunk)
		}
		if ref == nil {
			ref = whole
		} else {
			d := maxAbsDiff(ref, whole)
			t.Logf("f16 vs f32 KV: max |dlogit| %.3g", d)
			require.Less(t, d, 0.05)
			require.NotZero(t, d, "f16 KV should round")
		}
		require.NoError(t, pool.Close())
		tab := pool.NewTable(99, "t")
		err = r.Forward(&Batch{Seqs: []Seq{{Tokens: prompt[:1], Table: tab}}})
		require.ErrorIs(t, err, kvcache.ErrClosed)
	}
}
