package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
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

// kvQuantBenchConfig is one Llama-3.2-1B layer shape (dim 2048, FFN 8192,
// 32 query heads on 8 KV heads of 64) in 2 layers with a 4096-token
// vocabulary: per layer, the weights read and the KV read per token are
// those of the 1B model, so the decode time's split between them (what a
// KV type changes) is the 1B's, at a fraction of the memory and set-up.
func kvQuantBenchConfig() model.Config {
	return model.Config{
		Dim: 2048, Hidden: 8192, Layers: 2, Heads: 32, KVHeads: 8, HeadDim: 64,
		Vocab: 4096, MaxContext: 1 << 15,
		NormEps: 1e-5, RopeTheta: 500000, RopeDim: 64,
		BOS: 1, EOS: 2,
	}
}

var (
	kvQuantW    *model.Weights
	kvQuantErr  error
	kvQuantOnce sync.Once
)

// BenchmarkKVQuantDecode measures one-sequence decode (tokens/s) with an
// f16, q8_0 and q4_0 KV cache at KV depths 0, 4096 and 16384, on the
// 1B-layer shape above with Q4_0 weights. The cache is filled to the
// depth directly (random rows through the pool's row writer; prefilling
// 16k tokens would take minutes on a small machine and is not what is
// measured); then each type decodes 4 tokens in turn, twelve rounds, so
// the types share the machine's load and their ratio (q8_0/f16, q4_0/f16
// speed) is meaningful on a busy machine even when the absolute rates are
// not. KV bytes per token (all layers, K and V) come from the pool's page
// size (KV_KiB/token, of the model run) and are scaled to the 16-layer 1B
// as 1B_KV_KiB/token. KVWARDEN_KVBENCH_MODEL=file.gguf runs a model file
// instead (the figures side by side with llama-bench -d in RESULTS.md);
// 1B_KV_KiB/token then scales its layer count to 16.
//
//	go test ./bench/ -run '^$' -bench KVQuantDecode -benchtime 1x
func BenchmarkKVQuantDecode(b *testing.B) {
	kvQuantOnce.Do(func() {
		if path := os.Getenv("KVWARDEN_KVBENCH_MODEL"); path != "" {
			kvQuantW, _, kvQuantErr = model.Open(path, "")
			return
		}
		kvQuantW, kvQuantErr = model.Synthetic(kvQuantBenchConfig(), 7, ml.Q4_0)
	})
	require.NoError(b, kvQuantErr)
	w := kvQuantW
	c := w.Config
	types := []device.DType{device.F16, device.Q8_0, device.Q4_0}
	const steps, rounds, ps = 4, 12, 16
	for _, depth := range []int{0, 4096, 16384} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			b.StopTimer()
			total := depth + b.N*rounds*steps + 1
			type side struct {
				r    *model.Runner
				tab  *kvcache.PageTable
				busy time.Duration
				pb   int64
			}
			sides := make([]*side, len(types))
			for i, dt := range types {
				geo := kvcache.Geometry{PageSize: ps, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: dt}
				pool, err := kvcache.New(cpu.New(), kvcache.Config{Geometry: geo, Pages: total/ps + 2})
				require.NoError(b, err)
				b.Cleanup(func() { _ = pool.Close() })
				r, err := model.NewRunner(w, pool)
				require.NoError(b, err)
				tab := pool.NewTable(1, "bench")
				require.NoError(b, tab.Reserve(total))
				fillKV(b, tab, c, depth)
				sides[i] = &side{r: r, tab: tab, pb: geo.PageBytes()}
			}
			b.StartTimer()
			tok := 5
			var r8, r4 []float64
			for range b.N {
				for range rounds {
					var d [3]time.Duration
					for i, s := range sides {
						t0 := time.Now()
						for range steps {
							bt := &model.Batch{Seqs: []model.Seq{{Tokens: []int{tok}, Table: s.tab, Logits: true}}}
							require.NoError(b, s.r.Forward(bt))
						}
						d[i] = time.Since(t0)
						s.busy += d[i]
					}
					r8 = append(r8, float64(d[0])/float64(d[1]))
					r4 = append(r4, float64(d[0])/float64(d[2]))
				}
			}
			n := float64(b.N * rounds * steps)
			rate := make([]float64, len(types))
			for i, s := range sides {
				rate[i] = n / s.busy.Seconds()
				b.ReportMetric(rate[i], types[i].String()+"_tok/s")
				perTok := float64(s.pb) / ps
				b.ReportMetric(perTok/1024, types[i].String()+"_KV_KiB/token")
				b.ReportMetric(perTok*16/float64(c.Layers)/1024, types[i].String()+"_1B_KV_KiB/token")
			}
			b.ReportMetric(rate[1]/rate[0], "q8_0/f16_speed")
			b.ReportMetric(rate[2]/rate[0], "q4_0/f16_speed")
			// Medians of the per-round ratios: robust to a round that lost
			// time slices to other processes.
			b.ReportMetric(medianOf(r8), "q8_0/f16_median")
			b.ReportMetric(medianOf(r4), "q4_0/f16_median")
		})
	}
}

func medianOf(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// fillKV writes depth positions of random K and V rows (unit scale, as
// normed and roped keys are) and advances the table over them.
func fillKV(b *testing.B, tab *kvcache.PageTable, c model.Config, depth int) {
	r := rand.New(rand.NewPCG(1, 2))
	k, v := make([]float32, c.KVDim()), make([]float32, c.KVDim())
	for pos := range depth {
		for l := range c.Layers {
			for j := range k {
				k[j], v[j] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			require.NoError(b, tab.WriteKV(pos, l, k, v))
		}
	}
	if depth > 0 {
		require.NoError(b, tab.Advance(depth))
	}
}
