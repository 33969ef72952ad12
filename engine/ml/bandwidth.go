package ml

import (
	"sort"
	"sync"
	"time"
)

// ReadBandwidth streams buf (a buffer much larger than the last-level
// cache) passes times on threads threads, split as the matrix products
// split their rows (the same worker pool and SIMD loads), and returns the
// best and the median pass in bytes/s. It is the bound that one-sequence
// decode is measured against: a decode step reads every weight once, so
// its rate can be at most this rate over the bytes of the weights.
func ReadBandwidth(buf []float32, threads, passes int) (best, median float64) {
	if len(buf) == 0 || passes < 1 {
		return 0, 0
	}
	threads = max(threads, 1)
	// Chunks of 1 MiB: small enough that a descheduled thread's share is
	// picked up by the others, large enough that the hand-off is noise.
	const chunk = 1 << 18
	var (
		mu   sync.Mutex
		sink float32
		res  []float64
	)
	for range passes {
		t0 := time.Now()
		parallelFor(len(buf), chunk, threads, func(lo, hi int) {
			s := sumF32(buf[lo:hi])
			mu.Lock()
			sink += s
			mu.Unlock()
		})
		res = append(res, float64(len(buf)*4)/time.Since(t0).Seconds())
	}
	_ = sink
	sort.Float64s(res)
	return res[len(res)-1], res[len(res)/2]
}

// sumF32 sums p with the widest loads available (the SIMD sum where there
// is one; four independent accumulators otherwise, so the loop is bound by
// loads rather than by the latency of one add chain).
func sumF32(p []float32) float32 {
	if useSIMD() && len(p) > 0 {
		return sumSIMD(p)
	}
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(p); i += 4 {
		s0 += p[i]
		s1 += p[i+1]
		s2 += p[i+2]
		s3 += p[i+3]
	}
	for ; i < len(p); i++ {
		s0 += p[i]
	}
	return s0 + s1 + s2 + s3
}
