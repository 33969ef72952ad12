package bench

// Engine benchmarks (issue 4). Run, for example:
//
//	go test ./bench/ -run '^$' -bench 'Engine' -benchtime 1x -timeout 30m
//
// Each benchmark op is one full workload; use -benchtime 1x (or 2x) on small
// machines. Figures are reported with b.ReportMetric.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

var (
	engine110MOnce sync.Once
	engine110M     *model.Weights
	engine110MErr  error
)

// weights110M is the stories110M-shaped synthetic model (dim 768, hidden
// 2048, 12 layers, 12 heads, vocab 32000), f32.
func weights110M(b *testing.B) *model.Weights {
	engine110MOnce.Do(func() {
		engine110M, engine110MErr = model.Synthetic(model.Stories110MConfig(), 110, ml.F32)
	})
	require.NoError(b, engine110MErr)
	return engine110M
}

func engineFor(b *testing.B, w *model.Weights, mut func(*engine.Config), opts ...engine.Option) *engine.Engine {
	cfg := engine.Config{Weights: w, Tokenizer: tokenizer.NewBytes(), KVMemory: 512 << 20, MaxContext: 1024}
	if mut != nil {
		mut(&cfg)
	}
	e, err := engine.New(cfg, opts...)
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return e
}

func benchPrompt(i, n, vocab int) []int {
	p := make([]int, n)
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for j := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[j] = 3 + int(x%uint64(vocab-3))
	}
	return p
}

type loadResult struct {
	tokens     int
	wall       time.Duration
	ttft, itl  []time.Duration
	cachedToks int
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// runLoad submits conc requests at once (prompt tokens each, gen new
// tokens, greedy) and measures throughput, TTFT and inter-token times from
// the stream events as a client sees them.
func runLoad(b *testing.B, e *engine.Engine, conc, prompt, gen, seed int) loadResult {
	vocab := e.ModelConfig().Vocab
	var mu sync.Mutex
	var res loadResult
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			st, err := e.Submit(context.Background(), engine.Request{
				Tokens: benchPrompt(seed*1000+i, prompt, vocab), MaxTokens: gen, Tenant: "bench",
			})
			if err != nil {
				b.Error(err)
				return
			}
			var ttft time.Duration
			var itl []time.Duration
			last := t0
			n := 0
			for ev := range st.Events() {
				if ev.Done {
					break
				}
				now := time.Now()
				if n == 0 {
					ttft = now.Sub(t0)
				} else {
					itl = append(itl, now.Sub(last))
				}
				last = now
				n++
			}
			r := st.Wait()
			if r.Err != nil {
				b.Error(r.Err)
			}
			mu.Lock()
			res.tokens += n
			res.ttft = append(res.ttft, ttft)
			res.itl = append(res.itl, itl...)
			res.cachedToks += r.CachedTokens
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

func report(b *testing.B, r loadResult) {
	b.ReportMetric(float64(r.tokens)/r.wall.Seconds(), "tok/s")
	b.ReportMetric(float64(pct(r.ttft, 0.5).Microseconds())/1000, "ttft_p50_ms")
	b.ReportMetric(float64(pct(r.ttft, 0.99).Microseconds())/1000, "ttft_p99_ms")
	b.ReportMetric(float64(pct(r.itl, 0.5).Microseconds())/1000, "itl_p50_ms")
	b.ReportMetric(float64(pct(r.itl, 0.99).Microseconds())/1000, "itl_p99_ms")
}

// BenchmarkEngineConcurrency: generated tokens/s and TTFT / inter-token
// latency (p50, p99) for 1, 4, 16 and 64 concurrent requests (prompt 32,
// 32 new tokens each) on the 110M-shaped synthetic model.
func BenchmarkEngineConcurrency(b *testing.B) {
	w := weights110M(b)
	for _, conc := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			e := engineFor(b, w, func(c *engine.Config) { c.DisablePrefixCache = true })
			runLoad(b, e, 1, 8, 2, -1) // warm up scratch buffers
			var all loadResult
			b.ResetTimer()
			for i := range b.N {
				r := runLoad(b, e, conc, 32, 32, i)
				all.tokens += r.tokens
				all.wall += r.wall
				all.ttft = append(all.ttft, r.ttft...)
				all.itl = append(all.itl, r.itl...)
			}
			report(b, all)
		})
	}
}

// BenchmarkEnginePrefixCache: time to first token of a request whose 512
// first tokens were prefilled before by the same tenant: with the prefix
// cache off (cold: full prefill), on with the prefix still on the device
// (device hit), and on with the prefix evicted to the host tier in between
// (host hit: its pages restored, checksums verified, then shared), and the
// speedups against cold.
func BenchmarkEnginePrefixCache(b *testing.B) {
	w := weights110M(b)
	vocab := w.Config.Vocab
	shared := benchPrompt(4242, 512, vocab)
	req := func(i int) engine.Request {
		return engine.Request{Tokens: append(slices.Clone(shared), benchPrompt(i, 16, vocab)...), MaxTokens: 1, Tenant: "t"}
	}
	measure := func(e *engine.Engine, i int) (time.Duration, int) {
		t0 := time.Now()
		r, err := e.Generate(context.Background(), req(i))
		require.NoError(b, err)
		return time.Since(t0), r.CachedTokens
	}
	var cold, hit, host time.Duration
	var cached, hostCached, hostPages int
	for i := range b.N {
		eOff := engineFor(b, w, func(c *engine.Config) { c.DisablePrefixCache = true })
		_, _ = measure(eOff, -1)
		d, _ := measure(eOff, i)
		cold += d
		eOn := engineFor(b, w, nil)
		_, _ = measure(eOn, -1) // populates the cache
		d, c := measure(eOn, i)
		hit += d
		cached = c
		_ = eOff.Close()
		_ = eOn.Close()

		// Host tier: a 40-page pool (640 tokens) with a host tier. After
		// the prefix is cached, a 600-token request of another tenant
		// needs 38 pages, which evicts (spills) the prefix's pages.
		eHost := engineFor(b, w, func(c *engine.Config) {
			c.KVMemory, c.KVPages, c.MaxContext = 0, 40, 640
			c.HostTierBytes = 256 << 20
		})
		_, _ = measure(eHost, -1)
		_, err := eHost.Generate(context.Background(), engine.Request{Tokens: benchPrompt(777, 600, vocab), MaxTokens: 1, Tenant: "filler"})
		require.NoError(b, err)
		before := eHost.Stats()
		require.NotZero(b, before.PrefixHostEntries)
		d, c = measure(eHost, i)
		host += d
		hostCached = c
		hostPages = int(eHost.Stats().PrefixHostHits - before.PrefixHostHits)
		_ = eHost.Close()
	}
	b.ReportMetric(float64(cold.Microseconds())/1000/float64(b.N), "ttft_cold_ms")
	b.ReportMetric(float64(hit.Microseconds())/1000/float64(b.N), "ttft_hit_ms")
	b.ReportMetric(float64(host.Microseconds())/1000/float64(b.N), "ttft_host_hit_ms")
	b.ReportMetric(float64(cold)/float64(hit), "speedup")
	b.ReportMetric(float64(cold)/float64(host), "speedup_host")
	b.ReportMetric(float64(cached), "cached_tokens")
	b.ReportMetric(float64(hostCached), "host_cached_tokens")
	b.ReportMetric(float64(hostPages), "host_pages")
}

// BenchmarkEnginePreemption: what it costs to take a 256-token sequence
// off the pool and bring it back: swap (SwapOut + SwapIn through the host
// tier, checksums verified) versus recompute (prefill the 256 tokens
// again), on the 110M-shaped model's KV geometry.
func BenchmarkEnginePreemption(b *testing.B) {
	w := weights110M(b)
	c := w.Config
	const tokens = 256
	for _, comp := range []string{"none", "s2"} {
		pool, err := kvcache.New(cpu.New(), kvcache.Config{
			Geometry:      kvcache.Geometry{PageSize: 16, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim},
			Pages:         64,
			HostTierBytes: 1 << 30, Compression: comp,
		})
		require.NoError(b, err)
		run, err := model.NewRunner(w, pool)
		require.NoError(b, err)
		id := kvcache.RequestID(1)
		t := pool.NewTable(id, "t")
		require.NoError(b, t.Reserve(tokens))
		batch := &model.Batch{Seqs: []model.Seq{{Tokens: benchPrompt(1, tokens, c.Vocab), Table: t}}}
		t0 := time.Now()
		require.NoError(b, run.Forward(batch))
		prefill := time.Since(t0)
		var swap time.Duration
		for range b.N {
			t0 := time.Now()
			sw, err := pool.SwapOut(t)
			require.NoError(b, err)
			t = pool.NewTable(id, "t")
			require.NoError(b, pool.SwapIn(sw, t))
			require.NoError(b, t.Handoff(tokens))
			swap += time.Since(t0)
		}
		// Recompute: release and prefill again.
		var recompute time.Duration
		for range b.N {
			require.NoError(b, t.Release())
			t0 := time.Now()
			t = pool.NewTable(id, "t")
			require.NoError(b, t.Reserve(tokens))
			batch.Seqs[0].Table = t
			require.NoError(b, run.Forward(batch))
			recompute += time.Since(t0)
		}
		_ = prefill
		require.NoError(b, t.Release())
		require.NoError(b, pool.Close())
		b.ReportMetric(float64(swap.Microseconds())/1000/float64(b.N), "swap_"+comp+"_ms")
		if comp == "none" {
			b.ReportMetric(float64(recompute.Microseconds())/1000/float64(b.N), "recompute_ms")
		}
	}
}

// BenchmarkEngineSafety: throughput of the same workload (prompt 64, 32
// new tokens, 32 concurrent requests on the built-in model, 16 on the
// 110M-shaped one) with each safety feature against everything off:
// page-table validation, KVChecksum=handoff (the default), KVChecksum=step,
// ZeroOnRelease, and the default set (handoff + ZeroOnRelease + validation;
// target: at most 5% below off). The variants run interleaved, round by
// round, on engines that all exist at once, so machine drift hits them
// alike; each reports tok/s and its cost in percent against off.
func BenchmarkEngineSafety(b *testing.B) {
	type variant struct {
		name string
		mut  func(*engine.Config)
		skip bool // TestHooks.UnsafeSkipValidation
	}
	off := func(c *engine.Config) { c.KVChecksum = engine.ChecksumOff }
	variants := []variant{
		{"off", off, true},
		{"validation", off, false},
		{"handoff", func(c *engine.Config) { off(c); c.KVChecksum = engine.ChecksumHandoff }, true},
		{"step", func(c *engine.Config) { off(c); c.KVChecksum = engine.ChecksumStep }, true},
		{"zero", func(c *engine.Config) { off(c); c.ZeroOnRelease = true }, true},
		{"handoff+zero+validation", func(c *engine.Config) { c.ZeroOnRelease = true }, false},
	}
	small, err := model.Synthetic(model.DefaultConfig(), model.DefaultSeed, ml.F32)
	require.NoError(b, err)
	for _, m := range []struct {
		name string
		w    func() *model.Weights
		conc int
	}{{"builtin", func() *model.Weights { return small }, 32}, {"110M", func() *model.Weights { return weights110M(b) }, 16}} {
		b.Run(m.name, func(b *testing.B) {
			engines := make([]*engine.Engine, len(variants))
			for i, v := range variants {
				engines[i] = engineFor(b, m.w(), func(c *engine.Config) {
					c.DisablePrefixCache = true
					c.KVMemory = 256 << 20
					v.mut(c)
				}, engine.WithTestHooks(engine.TestHooks{UnsafeSkipValidation: v.skip}))
				runLoad(b, engines[i], m.conc, 64, 32, -1) // warm-up of the same shape
			}
			toks := make([]int, len(variants))
			wall := make([]time.Duration, len(variants))
			b.ResetTimer()
			for round := range b.N {
				for k := range variants {
					i := (k + round) % len(variants) // rotate the order too
					r := runLoad(b, engines[i], m.conc, 64, 32, round)
					toks[i] += r.tokens
					wall[i] += r.wall
				}
			}
			base := float64(toks[0]) / wall[0].Seconds()
			for i, v := range variants {
				tps := float64(toks[i]) / wall[i].Seconds()
				b.ReportMetric(tps, v.name+"_tok/s")
				if i > 0 {
					b.ReportMetric(100*(base-tps)/base, v.name+"_cost_%")
				}
			}
		})
	}
}
