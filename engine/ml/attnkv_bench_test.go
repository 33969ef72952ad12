package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAttnKV measures one head's attention (scores, then the value
// sum) over n cached positions with f32 and f16 K/V. Rows sit a
// stories110M layer apart (12 heads x 64 x K|V), so long spans stream from
// memory as decode does. Reports positions per second.
func BenchmarkAttnKV(b *testing.B) {
	const d, stride = 64, 12 * 64 * 2
	for _, n := range []int{512, 4096} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		kv32 := randF32(r, n*stride+d)
		kv16 := make([]uint16, len(kv32))
		F32sToF16s(kv16, kv32)
		offs := make([]int, n)
		for t := range offs {
			offs[t] = t * stride
		}
		q := randF32(r, d)
		s := make([]float32, n)
		out := make([]float32, d)
		for _, kv := range []string{"f32", "f16"} {
			b.Run(fmt.Sprintf("n=%d/kv=%s", n, kv), func(b *testing.B) {
				for range b.N {
					if kv == "f32" {
						AttnScores(s, q, kv32, offs, 0.125)
						AttnAccum(out, s, kv32, offs)
					} else {
						AttnScoresF16(s, q, kv16, offs, 0.125)
						AttnAccumF16(out, s, kv16, offs)
					}
				}
				b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds()/1e6, "Mpos/s")
			})
		}
	}
}
