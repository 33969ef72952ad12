package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// BenchmarkEngineDiskTier: time to first token of a request whose first
// n tokens (512, 1024, 4096) an earlier engine process prefilled and wrote to
// the disk tier on its graceful Close: cold (prefix cache off: the whole
// prompt prefilled) against a disk hit after the "restart" (the prefix's
// pages read, authenticated, decompressed, uploaded and verified), on the
// 110M-shaped model (f16 KV). Each op makes the engines afresh; the page
// cache of the OS is warm (the files were just written). The 4096-token
// case runs with a context of n+256 (the others 2048, as first measured).
func BenchmarkEngineDiskTier(b *testing.B) {
	w := weights110M(b)
	vocab := w.Config.Vocab
	key := filepath.Join(b.TempDir(), "kv.key")
	require.NoError(b, os.WriteFile(key, bytes.Repeat([]byte{7}, 32), 0o600))
	for _, n := range []int{512, 1024, 4096} {
		b.Run(fmt.Sprintf("prefix=%d", n), func(b *testing.B) {
			mc := 2048
			if n+256 > mc {
				mc = n + 256
			}
			shared := benchPrompt(4242, n, vocab)
			req := func(i int) engine.Request {
				return engine.Request{Tokens: append(slices.Clone(shared), benchPrompt(i, 16, vocab)...), MaxTokens: 1, Tenant: "t"}
			}
			measure := func(e *engine.Engine, i int) (time.Duration, int) {
				t0 := time.Now()
				r, err := e.Generate(context.Background(), req(i))
				require.NoError(b, err)
				return time.Since(t0), r.CachedTokens
			}
			var cold, disk time.Duration
			var cached int
			var files int
			for i := range b.N {
				dir := b.TempDir()
				withDisk := func(c *engine.Config) {
					c.MaxContext = mc
					c.KVDisk, c.KVDiskBudget, c.KVKeyFile = dir, 1<<30, key
				}
				eOff := engineFor(b, w, func(c *engine.Config) { c.DisablePrefixCache, c.MaxContext = true, mc })
				_, _ = measure(eOff, -1)
				d, _ := measure(eOff, i)
				cold += d
				_ = eOff.Close()

				e1 := engineFor(b, w, withDisk)
				_, _ = measure(e1, -1)
				require.NoError(b, e1.Close()) // writes the prefix to disk
				files = e1.Stats().Disk.Files
				e2 := engineFor(b, w, withDisk)
				d, c := measure(e2, i)
				disk += d
				cached = c
				_ = e2.Close()
			}
			b.ReportMetric(float64(cold.Microseconds())/1000/float64(b.N), "ttft_cold_ms")
			b.ReportMetric(float64(disk.Microseconds())/1000/float64(b.N), "ttft_disk_ms")
			b.ReportMetric(float64(cold)/float64(disk), "speedup")
			b.ReportMetric(float64(cached), "cached_tokens")
			b.ReportMetric(float64(files), "disk_files")
		})
	}
}

// BenchmarkEngineDiskTierPressure: decode throughput while the tiers are
// under pressure, encryption on against off, on the 110M-shaped model (f16
// KV). Each wave runs conc requests with prompts no earlier wave used, on
// a device pool that holds little more than one wave, so admitting a wave
// evicts the previous waves' prefix pages to a small host tier, which
// spills its oldest to the disk tier; the disk writer compresses, seals
// and fsyncs them while the wave decodes. Two engines run the same waves
// alternately (sealed: every page leaving the pool under AES-256-GCM;
// plain: TestHooks.UnsafePlainTiers), so sealed/plain compares the same
// moments of a loaded machine.
func BenchmarkEngineDiskTierPressure(b *testing.B) {
	w := weights110M(b)
	key := filepath.Join(b.TempDir(), "kv.key")
	require.NoError(b, os.WriteFile(key, bytes.Repeat([]byte{7}, 32), 0o600))
	const conc, prompt, gen, waves = 4, 256, 32, 3
	mk := func(plain bool) *engine.Engine {
		return engineFor(b, w, func(c *engine.Config) {
			c.KVType, c.MaxContext = "f16", 512
			// 36 KiB a token: the pool holds ~1.5 waves, the host tier
			// ~0.5 wave (uncompressed), so every wave pushes pages to disk.
			c.KVMemory, c.HostTierBytes = 64<<20, 16<<20
			c.KVDisk, c.KVDiskBudget, c.KVKeyFile = b.TempDir(), 1<<30, key
		}, engine.WithTestHooks(engine.TestHooks{UnsafePlainTiers: plain}))
	}
	sealed, plain := mk(false), mk(true)
	var rs, rp float64
	for i := range b.N {
		for v := range waves {
			seed := 1 + (i*waves+v)*10
			rs += decodeRate(b, sealed, conc, prompt, gen, seed)
			rp += decodeRate(b, plain, conc, prompt, gen, seed)
		}
	}
	n := float64(b.N * waves)
	b.ReportMetric(rs/n, "decode_tok/s_sealed")
	b.ReportMetric(rp/n, "decode_tok/s_plain")
	b.ReportMetric(rs/rp, "sealed/plain")
	for name, e := range map[string]*engine.Engine{"sealed": sealed, "plain": plain} {
		s := e.Stats()
		require.Positive(b, s.PrefixSpills, "%s: pages spilled to the host tier", name)
		require.Positive(b, s.Disk.Writes+s.Disk.Skipped+s.Disk.Dropped, "%s: the host tier spilled to disk", name)
		b.ReportMetric(float64(s.Disk.Writes)/n, "disk_writes/wave_"+name)
		b.ReportMetric(float64(s.Disk.Skipped+s.Disk.Dropped)/n, "disk_skipped/wave_"+name)
	}
}
