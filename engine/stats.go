package engine

import (
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/engine/kvcache"
)

// LatencyBuckets are the upper bounds of the engine's latency histograms
// (time to first token, inter-token time, step time). A last bucket counts
// everything slower. They follow Prometheus conventions so the server can
// export them directly.
var LatencyBuckets = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
}

// Histogram is a fixed-bucket latency histogram. Counts[i] counts samples
// in (Bounds[i-1], Bounds[i]]; the last entry counts samples above every
// bound. Counts are per bucket, not cumulative.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// Quantile estimates the q-quantile (0..1) by linear interpolation inside
// the bucket that holds it. It returns 0 for an empty histogram and the
// largest bound for samples in the overflow bucket.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 || len(h.Counts) == 0 {
		return 0
	}
	rank := q * float64(h.Count)
	var seen float64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			if i >= len(h.Bounds) {
				return h.Bounds[len(h.Bounds)-1]
			}
			lo := time.Duration(0)
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			frac := (rank - seen) / float64(c)
			return lo + time.Duration(frac*float64(h.Bounds[i]-lo))
		}
		seen += float64(c)
	}
	return h.Bounds[len(h.Bounds)-1]
}

// Mean is Sum/Count.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

type histogram struct {
	counts [len(LatencyBuckets) + 1]uint64
	count  uint64
	sum    time.Duration
}

func (h *histogram) observe(d time.Duration) {
	i := sort.Search(len(LatencyBuckets), func(i int) bool { return d <= LatencyBuckets[i] })
	h.counts[i]++
	h.count++
	h.sum += d
}

func (h *histogram) snapshot() Histogram {
	return Histogram{Bounds: LatencyBuckets[:], Counts: append([]uint64(nil), h.counts[:]...), Count: h.count, Sum: h.sum}
}

// Rejection reasons, the keys of Stats.Rejected.
const (
	RejectEmptyPrompt   = "empty_prompt"
	RejectPromptTooLong = "prompt_too_long"
	RejectInvalidParams = "invalid_params"
	RejectQuota         = "quota_exceeded"
	RejectOverloaded    = "overloaded"
	RejectClosed        = "closed"
)

// Stats is a snapshot of the engine's metrics.
type Stats struct {
	Pool kvcache.Stats

	// Now.
	Waiting int // admitted, not yet scheduled (including preempted-for-recompute)
	Running int // holding pages: prefilling or decoding
	Swapped int // preempted to the host tier

	// Requests since start. Rejected is by reason (the Reject* constants);
	// Finished is by finish reason ("stop", "length", "abort", "error").
	Submitted uint64
	Admitted  uint64
	Rejected  map[string]uint64
	Finished  map[string]uint64

	// IsolationFailures counts requests ended with ErrIsolation (a failed
	// page-table validation, handoff or checksum). Any non-zero value is an
	// incident (invariant 10).
	IsolationFailures uint64

	PromptTokens     uint64 // prompt tokens of admitted requests
	GeneratedTokens  uint64 // tokens sampled
	CachedTokens     uint64 // prompt tokens served from the prefix cache
	RecomputedTokens uint64 // tokens prefilled again after a preemption without host tier

	Steps       uint64
	Preemptions uint64 // sequences preempted (swap or recompute)
	SwapOuts    uint64
	SwapIns     uint64
	SwapFails   uint64 // swap-outs that failed and fell back to recompute

	PrefixEntries   int    // device-resident entries
	PrefixHits      uint64 // pages served from the prefix cache (either tier)
	PrefixMisses    uint64 // lookups that found no page
	PrefixEvictions uint64 // entries that left the device (spilled or dropped)

	// Host tier of the prefix cache (HostTierBytes > 0): evicted entries
	// are spilled there and restored, verified, on a hit.
	PrefixHostEntries   int    // host-resident entries
	PrefixSpills        uint64 // evicted device entries copied to the host tier
	PrefixHostHits      uint64 // pages restored from the host tier and served (also counted in PrefixHits)
	PrefixHostEvictions uint64 // host entries dropped: LRU, room for a swap-out, a failed restore, Close

	TTFT      Histogram // submit to first token
	InterTok  Histogram // between consecutive tokens of a request
	StepTime  Histogram // one scheduler step (forward included)
	QueueTime Histogram // submit to first scheduled
}

// metrics is the engine's counter block; the scheduler and Submit update it
// under mu, Stats copies it.
type metrics struct {
	mu sync.Mutex

	waiting, running, swapped int

	submitted, admitted, isolation         uint64
	rejected, finished                     map[string]uint64
	promptToks, genToks, cachedToks, recmp uint64
	steps, preempt, swapOut, swapIn, swapF uint64
	prefixEntries, prefixHostEntries       int
	prefixHits, prefixMiss, prefixEvict    uint64
	prefixSpill, prefixHostHits            uint64
	prefixHostEvict                        uint64

	ttft, itl, step, queue histogram
}

func newMetrics() *metrics {
	return &metrics{rejected: map[string]uint64{}, finished: map[string]uint64{}}
}

func (m *metrics) reject(reason string) {
	m.mu.Lock()
	m.rejected[reason]++
	m.mu.Unlock()
}

func (m *metrics) snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{
		Waiting: m.waiting, Running: m.running, Swapped: m.swapped,
		Submitted: m.submitted, Admitted: m.admitted,
		Rejected: maps.Clone(m.rejected), Finished: maps.Clone(m.finished),
		IsolationFailures: m.isolation,
		PromptTokens:      m.promptToks, GeneratedTokens: m.genToks, CachedTokens: m.cachedToks, RecomputedTokens: m.recmp,
		Steps: m.steps, Preemptions: m.preempt, SwapOuts: m.swapOut, SwapIns: m.swapIn, SwapFails: m.swapF,
		PrefixEntries: m.prefixEntries, PrefixHits: m.prefixHits, PrefixMisses: m.prefixMiss, PrefixEvictions: m.prefixEvict,
		PrefixHostEntries: m.prefixHostEntries, PrefixSpills: m.prefixSpill, PrefixHostHits: m.prefixHostHits, PrefixHostEvictions: m.prefixHostEvict,
		TTFT: m.ttft.snapshot(), InterTok: m.itl.snapshot(), StepTime: m.step.snapshot(), QueueTime: m.queue.snapshot(),
	}
}
