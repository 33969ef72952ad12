package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// BenchmarkPrefillDepth measures one prefill chunk of one sequence at a KV
// depth, as llama-bench's pp512 at -d D: the chunk's tokens attend to D
// earlier positions. The earlier positions are marked written without
// computing them (their f16 K/V are zeros, which cost attention the same
// as real ones), so a 32k depth costs one chunk, not a 32k-token prefill.
// A 4096-token prefill in the engine's 512-token chunks (its default
// MaxBatchTokens) is the eight chunks at depths 0, 512, ..., 3584.
//
// KVW_BENCH_GGUF names the GGUF file(s), KVW_DEPTHS the depths (default
// 0,4096), KVW_CHUNK the chunk (default 512), KVW_THREADS the threads.
// Reported: tokens/s of the chunk, and tokens per CPU-second of the
// process, which a loaded machine's lost time slices do not lower.
//
//	KVW_BENCH_GGUF=/work/scratch/speed/1b-q4km.gguf KVW_DEPTHS=0,4096 go test ./bench/ -run '^$' -bench PrefillDepth -benchtime 1x
func BenchmarkPrefillDepth(b *testing.B) {
	files := os.Getenv("KVW_BENCH_GGUF")
	if files == "" {
		b.Skip("set KVW_BENCH_GGUF to GGUF files (bench/sidebyside.sh mkgguf writes them)")
	}
	if n, err := strconv.Atoi(os.Getenv("KVW_THREADS")); err == nil {
		ml.SetThreads(n)
		defer ml.SetThreads(0)
	}
	chunk := envInt(b, "KVW_CHUNK", 512)
	depths := []int{0, 4096}
	if s := os.Getenv("KVW_DEPTHS"); s != "" {
		depths = depths[:0]
		for _, f := range strings.Split(s, ",") {
			d, err := strconv.Atoi(f)
			require.NoError(b, err, "KVW_DEPTHS")
			depths = append(depths, d)
		}
	}
	for _, path := range strings.Split(files, ",") {
		w, _, err := model.Open(path, "")
		require.NoError(b, err)
		for _, depth := range depths {
			b.Run(fmt.Sprintf("%s/depth=%d/chunk=%d", filepath.Base(path), depth, chunk), func(b *testing.B) {
				prefillAtDepth(b, w, depth, chunk)
			})
		}
		require.NoError(b, w.Close())
	}
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(b, err, name)
	return n
}

func prefillAtDepth(b *testing.B, w *model.Weights, depth, chunk int) {
	c := w.Config
	const ps = 16
	pool, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: kvcache.Geometry{PageSize: ps, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: device.F16},
		Pages:    (depth+chunk+ps-1)/ps + 1,
	})
	require.NoError(b, err)
	defer pool.Close()
	r, err := model.NewRunnerContext(w, pool, depth+chunk)
	require.NoError(b, err)
	toks := make([]int, chunk)
	for i := range toks {
		toks[i] = 3 + i%100
	}
	b.ResetTimer()
	var sec, cpuSec float64
	for range b.N {
		b.StopTimer()
		tab := pool.NewTable(kvcache.RequestID(1), "bench")
		require.NoError(b, tab.Reserve(depth+chunk))
		require.NoError(b, tab.Advance(depth))
		b.StartTimer()
		c0, t0 := processCPU(), time.Now()
		require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: toks, Table: tab, Logits: true}}}))
		sec += time.Since(t0).Seconds()
		cpuSec += processCPU() - c0
		b.StopTimer()
		require.NoError(b, tab.Release())
		b.StartTimer()
	}
	tokens := float64(b.N * chunk)
	b.ReportMetric(tokens/sec, "tokens/s")
	b.ReportMetric(tokens/cpuSec, "tokens/cpu-s")
}
