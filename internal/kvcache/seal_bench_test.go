package kvcache

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// The cost of sealing host-tier copies (AES-256-GCM under a per-tenant
// key). Each benchmark runs a sealed and a plain pool interleaved, op by
// op, in one process, so the ratio it reports comes from the same moments
// of a machine others load: sealed-GB/s, plain-GB/s, and
// sealed/plain (1.0 = free).

// BenchmarkSealedSwap: SwapOut plus SwapIn of a 1024-token sequence (64
// pages of 256 KiB). Throughput counts raw page bytes each way once.
func BenchmarkSealedSwap(b *testing.B) {
	g := Geometry{PageSize: 16, Layers: 8, KVHeads: 8, HeadDim: 64, DType: device.F32}
	const tokens = 1024
	for _, comp := range []string{"none", "zstd"} {
		b.Run(comp, func(b *testing.B) {
			ring, err := kvseal.NewRandom(func() []byte { return []byte("bench") })
			require.NoError(b, err)
			defer ring.Close()
			pools := [2]*Pool{}
			tables := [2]*PageTable{}
			for i := range pools {
				pools[i] = benchPool(b, g, 2*tokens/g.PageSize, func(c *Config) {
					c.HostTierBytes = 2 * tokens / 16 * (g.PageBytes() + 64)
					c.Compression = comp
					if i == 0 {
						c.Sealer = ring
					}
				})
				tables[i] = pools[i].NewTable(1, "a")
				require.NoError(b, fillSequence(pools[i], tables[i], tokens, kvData[0].fn))
			}
			raw := int64(tokens/g.PageSize) * g.PageBytes()
			var spent [2]time.Duration
			b.ResetTimer()
			for range b.N {
				for i, p := range pools {
					t0 := time.Now()
					s, err := p.SwapOut(tables[i])
					if err != nil {
						b.Fatal(err)
					}
					tables[i] = p.NewTable(1, "a")
					if err := p.SwapIn(s, tables[i]); err != nil {
						b.Fatal(err)
					}
					spent[i] += time.Since(t0)
				}
			}
			b.StopTimer()
			reportSealed(b, raw, spent)
		})
	}
}

// BenchmarkSealedSpill: the prefix cache's spill and restore of one
// retained 256 KiB page: OffloadRetained, wait, Restore into a fresh
// table, Discard.
func BenchmarkSealedSpill(b *testing.B) {
	g := Geometry{PageSize: 16, Layers: 8, KVHeads: 8, HeadDim: 64, DType: device.F32}
	ring, err := kvseal.NewRandom(func() []byte { return []byte("bench") })
	require.NoError(b, err)
	defer ring.Close()
	pools := [2]*Pool{}
	refs := [2]PageRef{}
	for i := range pools {
		pools[i] = benchPool(b, g, 4, func(c *Config) {
			c.HostTierBytes = 4 * (g.PageBytes() + 64)
			if i == 0 {
				c.Sealer = ring
			}
		})
		t := pools[i].NewTable(1, "a")
		require.NoError(b, fillSequence(pools[i], t, g.PageSize, kvData[0].fn))
		refs[i] = t.Refs()[0]
		require.NoError(b, pools[i].Retain(refs[i], "a"))
		require.NoError(b, t.Release())
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for n := range b.N {
		for i, p := range pools {
			t0 := time.Now()
			h, err := p.OffloadRetained(refs[i], "a")
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Wait(); err != nil {
				b.Fatal(err)
			}
			t := p.NewTable(RequestID(n+2), "a")
			if _, err := p.Restore(h, t); err != nil {
				b.Fatal(err)
			}
			h.Discard()
			spent[i] += time.Since(t0)
			if err := t.Release(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reportSealed(b, g.PageBytes(), spent)
}

// BenchmarkSeal is AES-256-GCM alone over a 256 KiB page, each way.
func BenchmarkSeal(b *testing.B) {
	ring, err := kvseal.NewRandom(func() []byte { return []byte("bench") })
	require.NoError(b, err)
	defer ring.Close()
	page := bytes.Repeat([]byte{1, 2, 3, 4}, 64<<10)
	ad := []byte("page identity")
	sealed, err := ring.Seal(nil, "a", ad, page)
	require.NoError(b, err)
	buf := make([]byte, 0, len(page)+kvseal.Overhead)
	b.Run("seal", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for range b.N {
			if _, err := ring.Seal(buf[:0], "a", ad, page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for range b.N {
			if _, err := ring.Open(buf[:0], "a", ad, sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func reportSealed(b *testing.B, raw int64, spent [2]time.Duration) {
	gbs := func(d time.Duration) float64 { return float64(raw) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbs(spent[0]), "sealed-GB/s")
	b.ReportMetric(gbs(spent[1]), "plain-GB/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "sealed/plain")
}

// BenchmarkSwapPaths: SwapOut plus SwapIn of a 1024-token sequence (64
// pages of 256 KiB, no compression) through each path, op by op in one
// process, so the ratios come from the same moments of a loaded machine:
//
//	plain1   no sealer, restores on one goroutine
//	plain    no sealer, restores in parallel runs (restoreWorkers)
//	staged1  sealed through a staging copy of each page, one restorer
//	         (the path before sealing straight out of the arena)
//	direct1  sealed straight out of and into the CPU arena, one restorer
//	direct   sealed straight out of and into the arena, parallel runs
//
// Reported: each path's GB/s (raw page bytes each way once) from its
// fastest op (the machine's load only ever adds time, so the fastest op is
// the closest to the path's own cost), and the sealed/plain ratios of the
// old paths (staged1/plain1) and the new ones (direct/plain) from those.
func BenchmarkSwapPaths(b *testing.B) {
	g := Geometry{PageSize: 16, Layers: 8, KVHeads: 8, HeadDim: 64, DType: device.F32}
	const tokens = 1024
	ring, err := kvseal.NewRandom(func() []byte { return []byte("bench") })
	require.NoError(b, err)
	defer ring.Close()
	paths := []struct {
		name           string
		sealed, staged bool
		oneRestorer    bool
		pool           *Pool
		table          *PageTable
		best           time.Duration
	}{
		{name: "plain1", oneRestorer: true},
		{name: "plain"},
		{name: "staged1", sealed: true, staged: true, oneRestorer: true},
		{name: "direct1", sealed: true, oneRestorer: true},
		{name: "direct", sealed: true},
	}
	for i := range paths {
		x := &paths[i]
		x.pool = benchPool(b, g, 2*tokens/g.PageSize, func(c *Config) {
			c.HostTierBytes = 2 * tokens / 16 * (g.PageBytes() + 64)
			if x.sealed {
				c.Sealer = ring
			}
		})
		x.pool.host.staged, x.pool.host.oneRestorer = x.staged, x.oneRestorer
		x.table = x.pool.NewTable(1, "a")
		require.NoError(b, fillSequence(x.pool, x.table, tokens, kvData[0].fn))
	}
	raw := int64(tokens/g.PageSize) * g.PageBytes()
	b.ResetTimer()
	for range b.N {
		for i := range paths {
			x := &paths[i]
			t0 := time.Now()
			s, err := x.pool.SwapOut(x.table)
			if err != nil {
				b.Fatal(err)
			}
			x.table = x.pool.NewTable(1, "a")
			if err := x.pool.SwapIn(s, x.table); err != nil {
				b.Fatal(err)
			}
			if d := time.Since(t0); x.best == 0 || d < x.best {
				x.best = d
			}
		}
	}
	b.StopTimer()
	byName := map[string]time.Duration{}
	for _, x := range paths {
		byName[x.name] = x.best
		b.ReportMetric(float64(raw)/x.best.Seconds()/1e9, x.name+"-GB/s")
	}
	b.ReportMetric(byName["plain1"].Seconds()/byName["staged1"].Seconds(), "staged1/plain1")
	b.ReportMetric(byName["plain"].Seconds()/byName["direct"].Seconds(), "direct/plain")
	b.ReportMetric(byName["staged1"].Seconds()/byName["direct"].Seconds(), "direct/staged1")
}
