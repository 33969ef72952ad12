package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestKVGeometryLatentMemory: latent attention's pool is K-only, so a
// token takes layers x (kv_lora_rank + rope dims) x element size, as in
// llama.cpp's cache, half what a K and V plane would; other models keep
// both planes.
func TestKVGeometryLatentMemory(t *testing.T) {
	mla := arch.Block{MLA: arch.MLA{KVRank: 512, Nope: 128, VDim: 128}}
	for _, tc := range []struct {
		name  string
		c     Config
		dt    device.DType
		bytes int64 // KV bytes per token
	}{
		// DeepSeek-V3 / R1 / Kimi-K2: 61 layers, 512 + 64 = 576.
		{"DeepSeek-V3 f16", Config{Layers: 61, KVHeads: 1, HeadDim: 576, Block: mla}, device.F16, 61 * 576 * 2}, // 68.6 KiB
		{"DeepSeek-V3 q8_0", Config{Layers: 61, KVHeads: 1, HeadDim: 576, Block: mla}, device.Q8_0, 61 * 576 / 32 * 34},
		// DeepSeek-V2-Lite: 27 layers.
		{"DeepSeek-V2-Lite f16", Config{Layers: 27, KVHeads: 1, HeadDim: 576, Block: mla}, device.F16, 27 * 576 * 2}, // 30.4 KiB
		// Llama-3.2-1B: K and V, 16 layers x 8 KV heads x 64.
		{"Llama-3.2-1B f16", Config{Layers: 16, KVHeads: 8, HeadDim: 64}, device.F16, 16 * 2 * 512 * 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.c.KVGeometry(16, tc.dt)
			require.Equal(t, tc.c.KOnlyKV(), g.KOnly)
			require.Equal(t, tc.bytes, g.TokenBytes())
			require.Equal(t, 16*tc.bytes, g.PageBytes())
			if g.KOnly {
				two := g
				two.KOnly = false
				require.Equal(t, 2*g.PageBytes(), two.PageBytes(), "a V plane would double it")
			}
		})
	}
}

// TestDeepseek2KVMemory: the deepseek2 file's pool takes layers x
// (kv_lora_rank + rope dims) x 2 bytes per token in f16.
func TestDeepseek2KVMemory(t *testing.T) {
	w, err := newTinyDeepseek2().load(t)
	require.NoError(t, err)
	c := w.Config
	require.Equal(t, 8+4, c.HeadDim) // kv_lora_rank 8 + 4 rotated dims
	g := c.KVGeometry(16, device.F16)
	require.True(t, g.KOnly)
	require.Equal(t, int64(c.Layers*(8+4)*2), g.TokenBytes())
	require.Equal(t, int64(16*c.Layers*(8+4)*2), g.PageBytes())
}

// TestRunnerRefusesPlaneMismatch: a runner runs only on a pool of its
// model's shape: latent attention on a K-only pool (not on one with an
// unused V plane), every other model on a pool with V rows.
func TestRunnerRefusesPlaneMismatch(t *testing.T) {
	mla, err := newTinyDeepseek2().load(t)
	require.NoError(t, err)
	llama, err := Synthetic(DefaultConfig(), 1, ml.F32)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		w     *Weights
		kOnly bool
		want  string
	}{
		{"deepseek2 on two planes", mla, false, "pool has 2 KV planes, the model needs 1"},
		{"llama on K only", llama, true, "pool has 1 KV planes, the model needs 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.w.Config.KVGeometry(16, device.F32)
			g.KOnly = tc.kOnly
			pool, err := kvcache.New(cpu.New(), kvcache.Config{Geometry: g, Pages: 2})
			require.NoError(t, err)
			defer pool.Close()
			_, err = NewRunner(tc.w, pool)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestDeepseek2KOnlyPoisonedPool: latent attention writes and reads its
// K-only pages and nothing else. The sequence's pages sit between free,
// NaN-poisoned ones; after a prefill of a whole page and decode steps
// into the next one, the full page holds no poison (it is all K rows),
// every other free page is still all poison, and the logits are finite
// (a read of a neighbour, or of a V plane where the next page begins,
// would make them NaN).
func TestDeepseek2KOnlyPoisonedPool(t *testing.T) {
	w, err := newTinyDeepseek2().load(t)
	require.NoError(t, err)
	pool := newTestPool(t, w.Config, 6)
	require.True(t, pool.Geometry().KOnly)
	r, err := NewRunner(w, pool)
	require.NoError(t, err)
	arena := pool.Arena().(interface{ Float32s() []float32 }).Float32s()
	pe := pool.Geometry().PageElems()
	page := func(i uint32) []float32 { return arena[int(i)*pe : int(i+1)*pe] }

	// Page 0 goes to a table released at once (scrubbed back to poison),
	// so the sequence's pages 1 and 2 have poisoned pages on both sides.
	pad := pool.NewTable(1, "pad")
	require.NoError(t, pad.Reserve(16))
	prompt := make([]int, 16)
	for i := range prompt {
		prompt[i] = 1 + i%7
	}
	tab := pool.NewTable(2, "mla")
	require.NoError(t, tab.Reserve(len(prompt)+3))
	require.NoError(t, pad.Release())
	require.Equal(t, []uint32{1, 2}, tab.Pages())
	b := &Batch{Seqs: []Seq{{Tokens: prompt, Table: tab, Logits: true}}}
	finite := func() {
		for _, v := range b.Logits[0] {
			require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
		}
	}
	require.NoError(t, r.Forward(b))
	finite()
	for range 3 {
		b.Seqs[0].Tokens = []int{4}
		require.NoError(t, r.Forward(b))
		finite()
	}
	require.Equal(t, 19, tab.Written())
	for _, x := range page(1) {
		require.False(t, math.IsNaN(float64(x)), "the full page holds K rows only")
	}
	for _, i := range []uint32{0, 3, 4, 5} {
		for _, x := range page(i) {
			require.True(t, math.IsNaN(float64(x)), "free page %d written", i)
		}
	}
	require.NoError(t, tab.Release())
}
