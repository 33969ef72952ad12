package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// BenchmarkEngineKVType measures decode throughput with the f16 KV cache
// (the default) against f32, on the stories110M-shaped model at a
// realistic context: a 384-token prompt, then 64 greedy tokens, for 1 and
// 8 concurrent sequences. The two types alternate within one run. Decode
// tok/s counts tokens after each sequence's first, over the time from the
// last first token to the last token (prefill excluded).
//
//	go test ./bench/ -run '^$' -bench EngineKVType -benchtime 1x
func BenchmarkEngineKVType(b *testing.B) {
	w := weights110M(b)
	const prompt, gen = 384, 64
	for _, conc := range []int{1, 8} {
		for _, kv := range []string{"f16", "f32"} {
			b.Run(fmt.Sprintf("conc=%d/kv=%s", conc, kv), func(b *testing.B) {
				e := engineFor(b, w, func(c *engine.Config) { c.KVType = kv; c.DisablePrefixCache = true })
				var rate float64
				for i := range b.N {
					rate += decodeRate(b, e, conc, prompt, gen, i)
				}
				b.ReportMetric(rate/float64(b.N), "decode_tok/s")
			})
		}
	}
}

// decodeRate runs conc requests at once and returns their summed decode
// tokens per second.
func decodeRate(b *testing.B, e *engine.Engine, conc, prompt, gen, seed int) float64 {
	vocab := e.ModelConfig().Vocab
	var mu sync.Mutex
	var firstMax, lastMax time.Time
	tokens := 0
	var wg sync.WaitGroup
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.Submit(context.Background(), engine.Request{
				Tokens: benchPrompt(seed*1000+i, prompt, vocab), MaxTokens: gen, Tenant: "bench",
			})
			if err != nil {
				b.Error(err)
				return
			}
			var first, last time.Time
			n := 0
			for ev := range st.Events() {
				if ev.Done {
					break
				}
				if n == 0 {
					first = time.Now()
				}
				last = time.Now()
				n++
			}
			if r := st.Wait(); r.Err != nil {
				b.Error(r.Err)
			}
			mu.Lock()
			tokens += n - 1
			if first.After(firstMax) {
				firstMax = first
			}
			if last.After(lastMax) {
				lastMax = last
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.True(b, lastMax.After(firstMax))
	return float64(tokens) / lastMax.Sub(firstMax).Seconds()
}
