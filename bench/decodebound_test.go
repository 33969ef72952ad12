package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// BenchmarkDecodeBound measures one-sequence decode of GGUF files (the
// 1B/8B files `bench/sidebyside.sh mkgguf` writes) against the read
// bandwidth measured just before in the same process on the same threads:
// of-bound = tokens/s x weight bytes per token / bandwidth. Also the
// weight bytes per CPU-second of the process (spinning workers included),
// which a loaded machine's lost time slices do not lower, and huge-frac,
// the share of the mapped file on 2 MiB pages. The files come
// from KVW_BENCH_GGUF (comma-separated); KVW_THREADS sets the threads.
//
//	KVW_BENCH_GGUF=/tmp/m/1b-q4km.gguf KVW_THREADS=2 go test ./bench/ -run '^$' -bench DecodeBound -benchtime 32x
func BenchmarkDecodeBound(b *testing.B) {
	files := os.Getenv("KVW_BENCH_GGUF")
	if files == "" {
		b.Skip("set KVW_BENCH_GGUF to GGUF files (bench/sidebyside.sh mkgguf writes them)")
	}
	if n, err := strconv.Atoi(os.Getenv("KVW_THREADS")); err == nil {
		ml.SetThreads(n)
		defer ml.SetThreads(0)
	}
	bwBuf := make([]float32, 256<<20) // 1 GiB
	for i := range bwBuf {
		bwBuf[i] = float32(i & 1023)
	}
	for _, path := range strings.Split(files, ",") {
		b.Run(filepath.Base(path), func(b *testing.B) {
			w, _, err := model.Open(path, "")
			require.NoError(b, err)
			defer w.Close()
			pool := newPool(b, w.Config, b.N+64)
			r, err := model.NewRunner(w, pool)
			require.NoError(b, err)
			tab := pool.NewTable(kvcache.RequestID(1), "bench")
			require.NoError(b, tab.Reserve(b.N+2))
			defer func() { require.NoError(b, tab.Release()) }()
			// Depth 0 as llama-bench's decode: a 1-token prompt, then b.N tokens.
			require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: []int{1}, Table: tab, Logits: true}}}))
			_, bw := ml.ReadBandwidth(bwBuf, ml.Threads(), 3)
			in := &model.Batch{Seqs: make([]model.Seq, 1)}
			b.ResetTimer()
			c0 := processCPU()
			start := time.Now()
			for i := range b.N {
				in.Seqs[0] = model.Seq{Tokens: []int{3 + i%100}, Table: tab, Logits: true}
				require.NoError(b, r.Forward(in))
			}
			sec := time.Since(start).Seconds()
			cpu := processCPU() - c0
			wb := float64(w.StepBytes())
			tps := float64(b.N) / sec
			b.ReportMetric(tps, "tokens/s")
			b.ReportMetric(tps*wb/1e9, "GB/s")
			b.ReportMetric(bw/1e9, "bwGB/s")
			b.ReportMetric(tps*wb/bw, "of-bound")
			b.ReportMetric(float64(b.N)*wb/cpu/1e9, "GB/cpu-s")
			b.ReportMetric(float64(b.N)/cpu, "tokens/cpu-s")
			// The share of the mapped file on 2 MiB pages: it moves the
			// per-CPU-second rate (page walks), and depends on how the file
			// entered the page cache and on the placement (KVWARDEN_WEIGHTS).
			if huge, res, err := mmap.HugeMapped(w.Output.Data); err == nil && res > 0 {
				b.ReportMetric(float64(huge)/float64(res), "huge-frac")
			}
			b.Logf("weights: %v", w.Placement) // why huge-frac is what it is
		})
	}
}
