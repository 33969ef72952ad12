package model

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// BenchmarkDecodeTune compares variants of one-sequence decode taking
// turns every 4 tokens of one sequence, so a busy machine's load and the
// growing depth fall on all alike: "base" as configured; "split" with
// attention split across the worker pool from 1<<13 (depth 4 on the 1B
// shape) instead of attnSplitCost; "gap" with 500 us of the caller's own
// work before each token (not timed), longer than the pool's spin, as an
// engine's work between steps (sampling, streaming) can be. Per variant: milliseconds and CPU-milliseconds
// per token of Forward.
//
//	KVW_BENCH_GGUF=/work/scratch/speed/1b-q4km.gguf KVW_THREADS=2 go test ./engine/model -run '^$' -bench DecodeTune -benchtime 96x
func BenchmarkDecodeTune(b *testing.B) {
	files := os.Getenv("KVW_BENCH_GGUF")
	if files == "" {
		b.Skip("set KVW_BENCH_GGUF to GGUF files")
	}
	if n, err := strconv.Atoi(os.Getenv("KVW_THREADS")); err == nil {
		ml.SetThreads(n)
		defer ml.SetThreads(0)
	}
	base := attnSplitCost
	defer func() { attnSplitCost = base }()
	variants := []struct {
		name  string
		cost  int
		pause time.Duration
	}{{"base", base, 0}, {"split", 1 << 13, 0}, {"gap", base, 500 * time.Microsecond}}
	for _, path := range strings.Split(files, ",") {
		b.Run(filepath.Base(path), func(b *testing.B) {
			w, _, err := Open(path, "")
			require.NoError(b, err)
			defer w.Close()
			pool, err := kvcache.New(cpu.New(), kvcache.Config{
				Geometry: kvcache.Geometry{PageSize: 16, Layers: w.Config.Layers, KVHeads: w.Config.KVHeads, HeadDim: w.Config.HeadDim, DType: device.F32},
				Pages:    (b.N+64)/16 + 2,
			})
			require.NoError(b, err)
			defer pool.Close()
			r, err := NewRunner(w, pool)
			require.NoError(b, err)
			tab := pool.NewTable(kvcache.RequestID(1), "bench")
			require.NoError(b, tab.Reserve(b.N+2))
			defer func() { require.NoError(b, tab.Release()) }()
			require.NoError(b, r.Forward(&Batch{Seqs: []Seq{{Tokens: []int{1}, Table: tab, Logits: true}}}))
			in := &Batch{Seqs: make([]Seq, 1)}
			wall := make([]time.Duration, len(variants))
			cpuS := make([]float64, len(variants))
			count := make([]int, len(variants))
			b.ResetTimer()
			for i := 0; i < b.N; {
				v := (i / 4) % len(variants)
				attnSplitCost = variants[v].cost
				for k := 0; k < 4 && i < b.N; k, i = k+1, i+1 {
					// Busy, as sampling and streaming keep the caller's
					// thread busy between steps.
					for t := time.Now(); time.Since(t) < variants[v].pause; {
					}
					c0, t0 := processCPU(), time.Now()
					in.Seqs[0] = Seq{Tokens: []int{3 + i%100}, Table: tab, Logits: true}
					require.NoError(b, r.Forward(in))
					wall[v] += time.Since(t0)
					cpuS[v] += processCPU() - c0
					count[v]++
				}
			}
			for v, vr := range variants {
				if count[v] == 0 {
					continue
				}
				b.ReportMetric(float64(wall[v].Microseconds())/1e3/float64(count[v]), vr.name+"-ms/tok")
				b.ReportMetric(cpuS[v]*1e3/float64(count[v]), vr.name+"-cpu-ms/tok")
			}
		})
	}
}
