package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// BenchmarkEngineDiskTier: time to first token of a request whose first
// n tokens (512, 1024) an earlier engine process prefilled and wrote to
// the disk tier on its graceful Close: cold (prefix cache off: the whole
// prompt prefilled) against a disk hit after the "restart" (the prefix's
// pages read, authenticated, decompressed, uploaded and verified), on the
// 110M-shaped model (f16 KV). Each op makes the engines afresh; the page
// cache of the OS is warm (the files were just written).
func BenchmarkEngineDiskTier(b *testing.B) {
	w := weights110M(b)
	vocab := w.Config.Vocab
	key := filepath.Join(b.TempDir(), "kv.key")
	require.NoError(b, os.WriteFile(key, bytes.Repeat([]byte{7}, 32), 0o600))
	for _, n := range []int{512, 1024} {
		b.Run(map[int]string{512: "prefix=512", 1024: "prefix=1024"}[n], func(b *testing.B) {
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
					c.MaxContext = 2048
					c.KVDisk, c.KVDiskBudget, c.KVKeyFile = dir, 1<<30, key
				}
				eOff := engineFor(b, w, func(c *engine.Config) { c.DisablePrefixCache, c.MaxContext = true, 2048 })
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
