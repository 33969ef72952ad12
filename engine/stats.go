package engine

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/internal/kvcache"
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

// Histogram is a snapshot of a fixed-bucket latency histogram. Counts[i]
// counts samples in (Bounds[i-1], Bounds[i]]; the last entry counts
// samples above every bound. Counts are per bucket, not cumulative.
type Histogram struct {
	Bounds []time.Duration // upper bounds, ascending; Counts has one more entry (+Inf)
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// Mean is Sum/Count, or 0 when there are no samples.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// histogramOf copies the pool's histogram; the copy shares no memory
// with it.
func histogramOf(h kvcache.Histogram) Histogram {
	return Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts), Count: h.Count, Sum: h.Sum}
}

// PoolStats is a snapshot of the KV page pool's metrics.
type PoolStats struct {
	// Pages by state now; Pages is the total.
	Pages       int
	Free        int
	Owned       int
	Sealed      int
	Releasing   int // released by its owner, waiting for leases to drop
	Quarantined int // withdrawn after a failed check; never reused
	Scrubbing   int // released, waiting for their batch's scrub (ZeroOnRelease, Poison)
	Tenants     int // tenants that still hold something in the pool

	// Outstanding leases by kind.
	StepLeases, CopyLeases, PrefixLeases int

	Allocs   uint64 // pages allocated
	Releases uint64 // pages released by their owner
	Scrubs   uint64 // pages zeroed or poisoned on the way to the free list

	// Deferred releases: the owner released while leases were held.
	DeferredReleases    uint64
	DeferredFreed       uint64    // outcome: reached the free list
	DeferredQuarantined uint64    // outcome: quarantined before the last lease dropped
	DeferredDuration    Histogram // release to free list

	// Failed checks. ChecksumFailures and IsolationViolations are
	// incidents (docs/ISOLATION.md).
	ChecksumFailures    uint64
	IsolationViolations uint64
	StaleCompletions    uint64 // completions for a page that had moved on
	CopyFailures        uint64
	ScrubFailures       uint64
	// SealFailures are host copies that failed their authentication tag
	// (damaged, or their tenant erased): each a miss, recomputed.
	SealFailures uint64

	// Host tier (Config.HostTierBytes > 0).
	HostTierUsed     int64
	HostTierCapacity int64
	HostEntries      int
	BytesOffloaded   int64 // raw page bytes copied to the host tier
	BytesRestored    int64 // raw page bytes copied back
	BytesStored      int64 // host bytes written after compression
}

// poolStatsOf copies the pool's snapshot into the engine's own type, so
// that applications never name the internal one.
func poolStatsOf(s kvcache.Stats) PoolStats {
	return PoolStats{
		Pages: s.Pages, Free: s.Free, Owned: s.Owned, Sealed: s.Sealed,
		Releasing: s.Releasing, Quarantined: s.Quarantined, Scrubbing: s.Scrubbing, Tenants: s.Tenants,
		StepLeases: s.StepLeases, CopyLeases: s.CopyLeases, PrefixLeases: s.PrefixLeases,
		Allocs: s.Allocs, Releases: s.Releases, Scrubs: s.Scrubs,
		DeferredReleases: s.DeferredReleases, DeferredFreed: s.DeferredFreed,
		DeferredQuarantined: s.DeferredQuarantined, DeferredDuration: histogramOf(s.DeferredDuration),
		ChecksumFailures: s.ChecksumFailures, IsolationViolations: s.IsolationViolations,
		StaleCompletions: s.StaleCompletions, CopyFailures: s.CopyFailures, ScrubFailures: s.ScrubFailures,
		SealFailures: s.SealFailures,
		HostTierUsed: s.HostTierUsed, HostTierCapacity: s.HostTierCapacity, HostEntries: s.HostEntries,
		BytesOffloaded: s.BytesOffloaded, BytesRestored: s.BytesRestored, BytesStored: s.BytesStored,
	}
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
	Pool PoolStats

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

	// BookkeepingErrors counts page-table releases and lease drops that
	// failed: the engine's own page accounting disagreeing with the pool.
	// Each is logged; any non-zero value is a bug.
	BookkeepingErrors uint64

	// Recoveries counts requests that met a corrupted page or host copy
	// they could recompute (a prefix-cache hit, a swapped-out or spilled
	// copy): the bad copy was quarantined and dropped, and the request
	// recomputed it instead of failing. Detection is still counted by the
	// pool (Pool.ChecksumFailures).
	Recoveries uint64
	// TenantErasures counts EraseTenantKV calls served.
	TenantErasures uint64
	// Disk is the disk tier (Config.KVDisk); zero without one.
	Disk DiskStats

	PromptTokens     uint64 // prompt tokens of admitted requests
	GeneratedTokens  uint64 // tokens sampled
	CachedTokens     uint64 // prompt tokens served from the prefix cache
	RecomputedTokens uint64 // tokens computed again after their K/V was dropped (preemption without room in a host tier, corruption); not those the prefix cache gave back

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

	Spec SpecStats // speculative decoding
}

// metrics is the engine's counter block. Every update goes through one of
// its methods, under mu; Stats copies it. Each gauge has one writer: the
// scheduler (gauges), which alone knows what is waiting, swapped and
// running.
type metrics struct {
	mu sync.Mutex

	waiting, running, swapped        int
	prefixEntries, prefixHostEntries int

	submitted, admitted, isolation    uint64
	bookkeeping                       uint64
	rejected, finished                map[string]uint64
	promptTokens, generatedTokens     uint64
	cachedTokens, recomputedTokens    uint64
	steps, preemptions                uint64
	swapOuts, swapIns, swapFails      uint64
	recoveries                        uint64
	erasures                          uint64
	prefixHits, prefixMisses          uint64
	prefixEvictions, prefixSpills     uint64
	prefixHostHits, prefixHostEvicted uint64

	ttft, interTok, stepTime, queueTime kvcache.Histogram

	spec SpecStats
}

func newMetrics() *metrics {
	h := func() kvcache.Histogram { return kvcache.NewHistogram(LatencyBuckets[:]) }
	return &metrics{rejected: map[string]uint64{}, finished: map[string]uint64{},
		ttft: h(), interTok: h(), stepTime: h(), queueTime: h()}
}

// update runs f under the lock: the one way a counter changes.
func (m *metrics) update(f func(m *metrics)) {
	m.mu.Lock()
	f(m)
	m.mu.Unlock()
}

func (m *metrics) erasure() { m.update(func(m *metrics) { m.erasures++ }) }

func (m *metrics) submit() { m.update(func(m *metrics) { m.submitted++ }) }

func (m *metrics) reject(reason string) { m.update(func(m *metrics) { m.rejected[reason]++ }) }

func (m *metrics) admit(promptTokens int) {
	m.update(func(m *metrics) { m.admitted++; m.promptTokens += uint64(promptTokens) })
}

// end counts a request that left: by finish reason, and as an isolation
// failure when its error is one.
func (m *metrics) end(reason string, isolation bool) {
	m.update(func(m *metrics) {
		m.finished[reason]++
		if isolation {
			m.isolation++
		}
	})
}

// firstScheduled records a request's queue time and its prefix-cache hit.
func (m *metrics) firstScheduled(queued time.Duration, cached int) {
	m.update(func(m *metrics) { m.queueTime.Observe(queued); m.cachedTokens += uint64(cached) })
}

func (m *metrics) step(d time.Duration) {
	m.update(func(m *metrics) { m.steps++; m.stepTime.Observe(d) })
}

// token counts one sampled token; first says whether d is the time to the
// first token rather than the time since the previous one.
func (m *metrics) token(d time.Duration, first bool) {
	m.update(func(m *metrics) {
		m.generatedTokens++
		if first {
			m.ttft.Observe(d)
		} else {
			m.interTok.Observe(d)
		}
	})
}

func (m *metrics) preempt()  { m.update(func(m *metrics) { m.preemptions++ }) }
func (m *metrics) swapOut()  { m.update(func(m *metrics) { m.swapOuts++ }) }
func (m *metrics) swapIn()   { m.update(func(m *metrics) { m.swapIns++ }) }
func (m *metrics) swapFail() { m.update(func(m *metrics) { m.swapFails++ }) }
func (m *metrics) recompute(tokens int) {
	m.update(func(m *metrics) { m.recomputedTokens += uint64(tokens) })
}

// recovery counts a request that met a corrupted page or host copy and was
// recomputed instead of failed.
func (m *metrics) recovery() { m.update(func(m *metrics) { m.recoveries++ }) }

// bookkeepingError counts a page-table release or lease drop that failed:
// a bug in the engine's accounting, never expected.
func (m *metrics) bookkeepingError() { m.update(func(m *metrics) { m.bookkeeping++ }) }

func (m *metrics) prefixLookup(hits, hostHits int, missed bool) {
	m.update(func(m *metrics) {
		m.prefixHits += uint64(hits)
		m.prefixHostHits += uint64(hostHits)
		if missed {
			m.prefixMisses++
		}
	})
}

// prefixEvict counts a device entry leaving the device, spilled to the
// host tier or dropped.
func (m *metrics) prefixEvict(spilled bool) {
	m.update(func(m *metrics) {
		m.prefixEvictions++
		if spilled {
			m.prefixSpills++
		}
	})
}

func (m *metrics) prefixHostEvict() { m.update(func(m *metrics) { m.prefixHostEvicted++ }) }

// gauges sets the gauges; the scheduler is their one writer.
func (m *metrics) gauges(waiting, swapped, running, prefixEntries, prefixHostEntries int) {
	m.update(func(m *metrics) {
		m.waiting, m.swapped, m.running = waiting, swapped, running
		m.prefixEntries, m.prefixHostEntries = prefixEntries, prefixHostEntries
	})
}

func (m *metrics) snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{
		Waiting: m.waiting, Running: m.running, Swapped: m.swapped,
		Submitted: m.submitted, Admitted: m.admitted,
		Rejected: maps.Clone(m.rejected), Finished: maps.Clone(m.finished),
		IsolationFailures: m.isolation, BookkeepingErrors: m.bookkeeping, Recoveries: m.recoveries,
		TenantErasures: m.erasures, PromptTokens: m.promptTokens, GeneratedTokens: m.generatedTokens, CachedTokens: m.cachedTokens, RecomputedTokens: m.recomputedTokens,
		Steps: m.steps, Preemptions: m.preemptions, SwapOuts: m.swapOuts, SwapIns: m.swapIns, SwapFails: m.swapFails,
		PrefixEntries: m.prefixEntries, PrefixHits: m.prefixHits, PrefixMisses: m.prefixMisses, PrefixEvictions: m.prefixEvictions,
		PrefixHostEntries: m.prefixHostEntries, PrefixSpills: m.prefixSpills, PrefixHostHits: m.prefixHostHits, PrefixHostEvictions: m.prefixHostEvicted,
		TTFT: histogramOf(m.ttft), InterTok: histogramOf(m.interTok), StepTime: histogramOf(m.stepTime), QueueTime: histogramOf(m.queueTime),
		Spec: m.spec,
	}
}
