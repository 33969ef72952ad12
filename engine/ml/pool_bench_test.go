package ml

import (
	"sort"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPoolHandoff measures the worker pool's wake-up latency: the
// time from a parallel call until a worker runs its second chunk: "hot"
// back to back (the workers still spinning from the previous job, as
// between the products of a decode step), "cold" after a pause longer
// than the spin (the workers parked: a wake-up through the scheduler, as
// for the first product of a step after the engine was idle). Median and
// 90th percentile of the calls, in microseconds.
//
//	go test -run '^$' -bench PoolHandoff -benchtime 2000x ./engine/ml/
func BenchmarkPoolHandoff(b *testing.B) {
	SetThreads(2)
	defer SetThreads(0)
	// Each of the two chunks waits (up to 10 ms) for the other to start,
	// so the caller cannot run both alone: the time until the second
	// starts is the latency until a worker joined.
	var started atomic.Int32
	var t0 time.Time
	var join time.Duration
	job := func(lo, hi int) {
		if started.Add(1) == 2 {
			join = time.Since(t0)
			return
		}
		for end := time.Now().Add(10 * time.Millisecond); started.Load() < 2 && time.Now().Before(end); {
		}
	}
	for _, c := range []struct {
		name  string
		pause time.Duration
	}{{"hot", 0}, {"cold", 4 * spinFor}} {
		b.Run(c.name, func(b *testing.B) {
			ts := make([]time.Duration, 0, b.N)
			for i := range b.N + 1 {
				if c.pause > 0 {
					time.Sleep(c.pause)
				}
				started.Store(0)
				t0 = time.Now()
				parallelFor(2, 1, 2, job)
				if i > 0 { // the first call starts the workers
					ts = append(ts, join)
				}
			}
			sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
			b.ReportMetric(float64(ts[len(ts)/2].Nanoseconds())/1e3, "us-median")
			b.ReportMetric(float64(ts[len(ts)*9/10].Nanoseconds())/1e3, "us-p90")
		})
	}
}
