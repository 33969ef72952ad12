// Package bench holds kvwarden's cross-package benchmarks: the forward pass
// on the stories110M-shaped synthetic model (decode, batched decode and
// prefill, with this machine's memory bandwidth measured in the same run),
// and the engine and server suites. Figures go into RESULTS.md.
package bench

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

var (
	modelsMu sync.Mutex
	models   = map[ml.Type]*model.Weights{}
)

// stories110M returns the synthetic stories110M-shaped model in type t,
// generated once per process.
func stories110M(b *testing.B, t ml.Type) *model.Weights {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if w := models[t]; w != nil {
		return w
	}
	w, err := model.Synthetic(model.Stories110MConfig(), 42, t)
	require.NoError(b, err)
	models[t] = w
	return w
}

var (
	bwOnce sync.Once
	bwGBs  float64
)

// bandwidth measures this machine's read bandwidth in GB/s: the best of a
// few passes summing a 512 MiB buffer on every core, with the same SIMD dot
// kernel the forward pass uses. Measured once per run, beside the figures
// it qualifies.
func bandwidth() float64 {
	bwOnce.Do(func() {
		const n = 128 << 20 // float32s = 512 MiB
		buf := make([]float32, n)
		ones := make([]float32, 1<<16)
		for i := range buf {
			buf[i] = float32(i & 7)
		}
		for i := range ones {
			ones[i] = 1
		}
		threads := runtime.GOMAXPROCS(0)
		best := 0.0
		for range 5 {
			start := time.Now()
			var wg sync.WaitGroup
			per := n / threads
			for t := range threads {
				wg.Add(1)
				go func(part []float32) {
					defer wg.Done()
					var s float32
					for i := 0; i < len(part); i += len(ones) {
						s += ml.Dot(part[i:i+len(ones)], ones)
					}
					_ = s
				}(buf[t*per : (t+1)*per])
			}
			wg.Wait()
			best = max(best, float64(n*4)/time.Since(start).Seconds()/1e9)
		}
		bwGBs = best
	})
	return bwGBs
}

func newPool(b *testing.B, c model.Config, tokens int) *kvcache.Pool {
	pages := (tokens + 15) / 16
	p, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: kvcache.Geometry{PageSize: 16, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: device.F32},
		Pages:    pages,
	})
	require.NoError(b, err)
	b.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkDecode measures decode tokens/s at batch 1, 8 and 32 with a
// 32-token context per sequence. At batch 1 it also reports the efficiency:
// tokens/s x weight bytes per token / measured read bandwidth.
func BenchmarkDecode(b *testing.B) {
	for _, typ := range []ml.Type{ml.F32, ml.Q8_0} {
		for _, batch := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%v/batch=%d", typ, batch), func(b *testing.B) {
				w := stories110M(b, typ)
				bw := bandwidth()
				const ctx, window = 32, 64
				pool := newPool(b, w.Config, batch*(ctx+window+16))
				r, err := model.NewRunner(w, pool)
				require.NoError(b, err)
				id := kvcache.RequestID(1)
				tabs := make([]*kvcache.PageTable, batch)
				reset := func() {
					for i := range tabs {
						if tabs[i] != nil {
							require.NoError(b, tabs[i].Release())
						}
						tabs[i] = pool.NewTable(id, "bench")
						id++
						require.NoError(b, tabs[i].Reserve(ctx+window))
						prompt := make([]int, ctx)
						for j := range prompt {
							prompt[j] = 1 + (i*31+j*7)%(w.Config.Vocab-1)
						}
						require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: prompt, Table: tabs[i]}}}))
					}
				}
				reset()
				batchIn := &model.Batch{Seqs: make([]model.Seq, batch)}
				b.ResetTimer()
				var busy time.Duration
				for i := range b.N {
					if tabs[0].Written() >= ctx+window {
						b.StopTimer()
						reset()
						b.StartTimer()
					}
					for s := range tabs {
						batchIn.Seqs[s] = model.Seq{Tokens: []int{3 + (i+s)%100}, Table: tabs[s], Logits: true}
					}
					start := time.Now()
					require.NoError(b, r.Forward(batchIn))
					busy += time.Since(start)
				}
				tps := float64(b.N*batch) / busy.Seconds()
				b.ReportMetric(tps, "tokens/s")
				b.ReportMetric(bw, "GB/s-mem")
				if batch == 1 {
					b.ReportMetric(tps*float64(w.StepBytes())/1e9/bw, "efficiency")
				}
				for _, t := range tabs {
					require.NoError(b, t.Release())
				}
			})
		}
	}
}

// BenchmarkPrefill measures prefill tokens/s for a 512-token prompt.
func BenchmarkPrefill(b *testing.B) {
	for _, typ := range []ml.Type{ml.F32, ml.Q8_0} {
		b.Run(typ.String(), func(b *testing.B) {
			w := stories110M(b, typ)
			const n = 512
			pool := newPool(b, w.Config, n+16)
			r, err := model.NewRunner(w, pool)
			require.NoError(b, err)
			prompt := make([]int, n)
			for j := range prompt {
				prompt[j] = 1 + (j*7)%(w.Config.Vocab-1)
			}
			b.ResetTimer()
			for i := range b.N {
				tab := pool.NewTable(kvcache.RequestID(i+1), "bench")
				require.NoError(b, tab.Reserve(n))
				require.NoError(b, r.Forward(&model.Batch{Seqs: []model.Seq{{Tokens: prompt, Table: tab, Logits: true}}}))
				require.NoError(b, tab.Release())
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
