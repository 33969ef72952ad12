package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

func newTypedPool(t testing.TB, c Config, pages int, dt device.DType) *kvcache.Pool {
	t.Helper()
	p, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: c.KVGeometry(16, dt),
		Pages:    pages,
		Poison:   true, // any read of an unwritten slot turns into NaN logits
	})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// forcedDists prefills prompt whole, then feeds gen one token at a time
// (the decode path) and returns the logits after the prompt and after each
// fed token but the last: len(gen) next-token distributions.
func forcedDists(t testing.TB, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, prompt, gen []int) [][]float32 {
	tab := pool.NewTable(id, "kl")
	defer func() { require.NoError(t, tab.Release()) }()
	require.NoError(t, tab.Reserve(len(prompt)+len(gen)))
	b := &Batch{Seqs: []Seq{{Tokens: prompt, Table: tab, Logits: true}}}
	require.NoError(t, r.Forward(b))
	out := [][]float32{append([]float32(nil), b.Logits[0]...)}
	for _, tok := range gen[:len(gen)-1] {
		b := &Batch{Seqs: []Seq{{Tokens: []int{tok}, Table: tab, Logits: true}}}
		require.NoError(t, r.Forward(b))
		out = append(out, append([]float32(nil), b.Logits[0]...))
	}
	return out
}

// klDiv is KL(softmax(p) || softmax(q)) in nats, in float64.
func klDiv(p, q []float32) float64 {
	lse := func(x []float32) float64 {
		m := math.Inf(-1)
		for _, v := range x {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range x {
			s += math.Exp(float64(v) - m)
		}
		return m + math.Log(s)
	}
	lp, lq := lse(p), lse(q)
	kl := 0.0
	for i := range p {
		a := float64(p[i]) - lp
		kl += math.Exp(a) * (a - (float64(q[i]) - lq))
	}
	return max(kl, 0)
}

func argmax32(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestKVQuantFidelity measures what a quantized KV cache costs: on every
// F32 golden model (../shared/golden/arch), each case's prompt and its 32
// llama.cpp continuation tokens are teacher-forced with an f16 KV cache and
// with q8_0 and q4_0 ones, and the mean KL divergence of the next-token
// distribution against f16 KV is bounded (bench/RESULTS.md has the
// numbers; rerun with -v to print them). The bounds hold a margin of about
// 3x over the measured means (1.5e-3 and 0.15 nats: these random-weight
// models are more sensitive than trained ones, and the q4_0/q8_0 ratio is
// the (127/8)^2 of pure rounding noise); a kernel that read the wrong block
// or head lands far above them.
func TestKVQuantFidelity(t *testing.T) {
	bounds := map[device.DType]float64{device.Q8_0: 5e-3, device.Q4_0: 0.5}
	total := map[device.DType]float64{}
	agree := map[device.DType]int{}
	n := 0
	for _, m := range testmodels.ArchF32 {
		g := testmodels.LoadArchGolden(t, m.Name)
		w, f, err := LoadGGUF(g.Model)
		require.NoError(t, err)
		c := w.Config
		runners := map[device.DType]*Runner{}
		pools := map[device.DType]*kvcache.Pool{}
		for _, dt := range []device.DType{device.F16, device.Q8_0, device.Q4_0, device.F32} {
			pools[dt] = newTypedPool(t, c, 32, dt)
			runners[dt], err = NewRunner(w, pools[dt])
			require.NoError(t, err)
		}
		sums := map[device.DType]float64{}
		cnt := 0
		for ci, cs := range g.Cases {
			id := kvcache.RequestID(ci + 1)
			ref := forcedDists(t, runners[device.F16], pools[device.F16], id, cs.Prompt, cs.Generated)
			for _, dt := range []device.DType{device.Q8_0, device.Q4_0, device.F32} {
				got := forcedDists(t, runners[dt], pools[dt], id, cs.Prompt, cs.Generated)
				for i := range ref {
					kl := klDiv(ref[i], got[i])
					require.False(t, math.IsNaN(kl), "%s %s case %d pos %d", m.Name, dt, ci, i)
					sums[dt] += kl
					if argmax32(ref[i]) == argmax32(got[i]) {
						agree[dt]++
					}
				}
			}
			cnt += len(ref)
		}
		require.NoError(t, f.Close())
		for _, dt := range []device.DType{device.Q8_0, device.Q4_0, device.F32} {
			t.Logf("%-14s %s: mean KL %.3g nats over %d positions", m.Name, dt, sums[dt]/float64(cnt), cnt)
			total[dt] += sums[dt]
		}
		n += cnt
	}
	for _, dt := range []device.DType{device.Q8_0, device.Q4_0, device.F32} {
		mean := total[dt] / float64(n)
		t.Logf("all models     %s: mean KL %.3g nats, top-1 agreement %.2f%% over %d positions", dt, mean, 100*float64(agree[dt])/float64(n), n)
		if dt == device.F32 {
			continue // f32 is the scale of f16's own rounding, not bounded
		}
		require.Less(t, mean, bounds[dt], fmt.Sprintf("%s mean KL", dt))
	}
	require.Less(t, total[device.Q8_0], total[device.Q4_0], "q8_0 must be closer to f16 than q4_0")
}
