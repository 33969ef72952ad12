//go:build linux

package mmap

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPlacement times a load in each mode from the state a file is
// in after a download or copy: page cache in 4 KiB folios (the file is
// rewritten with 4 KiB writes before every load, outside the timer). A
// load is MapWith plus one read of every page, which decode pays at the
// first token anyway. The modes alternate within each iteration, so a
// loaded machine weighs on all of them alike. Per mode: load-s (mean),
// huge-frac (share of the weights on 2 MiB pages) and cache-MiB (the
// file's page cache after the load: a copy should leave none); and
// auto-again-load-s, a second auto load of the file just placed.
//
//	KVW_BENCH_GGUF=/work/scratch/speed/1b-q4km.gguf go test ./engine/model/gguf/mmap -run '^$' -bench Placement -benchtime 3x
func BenchmarkPlacement(b *testing.B) {
	src := os.Getenv("KVW_BENCH_GGUF")
	if src == "" {
		b.Skip("set KVW_BENCH_GGUF to a GGUF file (it is copied, not changed)")
	}
	path := filepath.Join(b.TempDir(), "w.gguf")
	modes := []Mode{ModeMap, ModeAuto, ModeRecache, ModeCopy}
	load := make(map[Mode]float64)
	huge := make(map[Mode]float64)
	cached := make(map[Mode]float64)
	var chosen Placement
	var again float64
	b.ResetTimer()
	for range b.N {
		for _, m := range modes {
			b.StopTimer()
			rewrite4K(b, src, path)
			b.StartTimer()
			t0 := time.Now()
			r, err := MapWith(path, Options{Mode: m})
			require.NoError(b, err)
			var sink byte
			for i := 0; i < len(r.Data); i += 4096 {
				sink ^= r.Data[i]
			}
			runtime.KeepAlive(sink)
			load[m] += time.Since(t0).Seconds()
			b.StopTimer()
			h, res, err := HugeMapped(r.Data)
			require.NoError(b, err)
			huge[m] += float64(h) / float64(max(res, 1))
			require.NoError(b, r.Close())
			if m == ModeAuto {
				chosen = r.Placement
				// The next load of the same file: the probe only.
				b.StartTimer()
				t0 := time.Now()
				r, err := MapWith(path, Options{Mode: m})
				require.NoError(b, err)
				for i := 0; i < len(r.Data); i += 4096 {
					sink ^= r.Data[i]
				}
				runtime.KeepAlive(sink)
				again += time.Since(t0).Seconds()
				b.StopTimer()
				require.NoError(b, r.Close())
			}
			cached[m] += float64(cachedBytes(b, path)) / (1 << 20)
			b.StartTimer()
		}
	}
	n := float64(b.N)
	for _, m := range modes {
		b.ReportMetric(load[m]/n, string(m)+"-load-s")
		b.ReportMetric(huge[m]/n, string(m)+"-huge-frac")
		b.ReportMetric(cached[m]/n, string(m)+"-cache-MiB")
	}
	b.ReportMetric(again/n, "auto-again-load-s")
	b.Logf("auto: %v", chosen)
}

// rewrite4K copies src to dst with 4 KiB writes and syncs it: a page
// cache of 4 KiB folios, clean.
func rewrite4K(b *testing.B, src, dst string) {
	in, err := os.Open(src)
	require.NoError(b, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(b, err)
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			_, werr := out.Write(buf[:n])
			require.NoError(b, werr)
		}
		if err == io.EOF {
			break
		}
		require.NoError(b, err)
	}
	require.NoError(b, out.Sync())
	require.NoError(b, out.Close())
}
