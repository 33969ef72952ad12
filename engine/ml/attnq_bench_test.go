package ml

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAttnKVQuant measures the attention (scores, then the value
// sum) of the 4 query heads that share one KV head (Llama-3.2-1B's GQA
// group) over n cached positions with f16, q8_0 and q4_0 K/V (the
// quantized types through the grouped kernels), head dim 64, rows a
// Llama-3.2-1B layer apart (8 KV heads x 64, K|V of a
// 16-slot page), so long spans stream from memory as decode does. The
// three types take turns within each iteration, so their ratios hold on a
// loaded machine; reports positions (times heads) per second per type,
// the ratios of the totals and the medians of the per-iteration ratios.
//
//	go test ./engine/ml/ -run '^$' -bench AttnKVQuant -benchtime 20x
func BenchmarkAttnKVQuant(b *testing.B) {
	const d, kvDim, g = 64, 8 * 64, 4
	for _, n := range []int{512, 4096, 16384} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		rows := randF32(r, n*kvDim)
		kv16 := make([]uint16, len(rows))
		F32sToF16s(kv16, rows)
		q8 := make([]byte, n*kvDim/32*34)
		QuantizeRowQ8_0(q8, rows)
		q4 := make([]byte, n*kvDim/32*18)
		QuantizeRowQ4_0(q4, rows)
		offs16, offs8, offs4 := make([]int, n), make([]int, n), make([]int, n)
		for t := range n {
			offs16[t], offs8[t], offs4[t] = t*kvDim, t*kvDim/32*34, t*kvDim/32*18
		}
		q := randF32(r, g*d)
		s := make([]float32, g*n)
		out := make([]float32, g*d)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var busy [3]time.Duration
			r8, r4 := make([]float64, 0, b.N), make([]float64, 0, b.N)
			for range b.N {
				t0 := time.Now()
				for h := range g {
					AttnScoresF16(s[h*n:(h+1)*n], q[h*d:(h+1)*d], kv16, offs16, 0.125)
					AttnAccumF16(out[h*d:(h+1)*d], s[h*n:(h+1)*n], kv16, offs16)
				}
				t1 := time.Now()
				AttnScoresQ8_0Group(s, q, g, q8, offs8, 0.125)
				AttnAccumQ8_0Group(out, s, g, q8, offs8)
				t2 := time.Now()
				AttnScoresQ4_0Group(s, q, g, q4, offs4, 0.125)
				AttnAccumQ4_0Group(out, s, g, q4, offs4)
				t3 := time.Now()
				busy[0] += t1.Sub(t0)
				busy[1] += t2.Sub(t1)
				busy[2] += t3.Sub(t2)
				r8 = append(r8, float64(t1.Sub(t0))/float64(t2.Sub(t1)))
				r4 = append(r4, float64(t1.Sub(t0))/float64(t3.Sub(t2)))
			}
			var rate [3]float64
			for i, name := range []string{"f16", "q8_0", "q4_0"} {
				rate[i] = float64(b.N) * float64(g*n) / busy[i].Seconds() / 1e6
				b.ReportMetric(rate[i], name+"_Mpos/s")
			}
			b.ReportMetric(rate[1]/rate[0], "q8_0/f16")
			b.ReportMetric(rate[2]/rate[0], "q4_0/f16")
			// The median of the per-iteration ratios: a time slice lost to
			// another process skews one iteration, not the figure.
			b.ReportMetric(median(r8), "q8_0/f16_median")
			b.ReportMetric(median(r4), "q4_0/f16_median")
		})
	}
}
