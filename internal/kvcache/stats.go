package kvcache

import (
	"slices"
	"sort"
	"time"
)

// ReleaseBuckets are the upper bounds of the deferred-release duration
// histogram; a final bucket counts everything slower.
var ReleaseBuckets = [...]time.Duration{
	time.Microsecond, 10 * time.Microsecond, 100 * time.Microsecond,
	time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second,
}

// Histogram is a fixed-bucket latency histogram, the one type for the
// pool's and the engine's latencies (the engine copies it into its own
// exported engine.Histogram for applications). Counts[i] counts samples in
// (Bounds[i-1], Bounds[i]]; the last entry counts samples above every
// bound. Counts are per bucket, not cumulative.
type Histogram struct {
	Bounds []time.Duration // upper bounds; Counts has one more entry (+Inf)
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// NewHistogram is an empty histogram over bounds (ascending).
func NewHistogram(bounds []time.Duration) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

// Observe adds one sample.
func (h *Histogram) Observe(d time.Duration) {
	i := sort.Search(len(h.Bounds), func(i int) bool { return d <= h.Bounds[i] })
	h.Counts[i]++
	h.Count++
	h.Sum += d
}

// Clone is a copy that shares no memory with h.
func (h Histogram) Clone() Histogram {
	h.Counts = slices.Clone(h.Counts)
	return h
}

// Mean is Sum/Count.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// Stats is a snapshot of the pool's metrics.
type Stats struct {
	Pages       int
	Tenants     int // entries in the tenant table: tenants something still holds
	Free        int
	Owned       int
	Sealed      int
	Releasing   int
	Quarantined int
	// Scrubbing pages were released and wait for their batch's scrub
	// (asynchronous on CUDA); they join Free when it completes.
	Scrubbing int

	// Outstanding leases by kind.
	StepLeases, CopyLeases, PrefixLeases int

	Allocs   uint64 // pages allocated
	Releases uint64 // pages released by their owner
	Scrubs   uint64 // pages zeroed or poisoned on the way to the free list

	// Deferred releases: owner released while leases were held.
	DeferredReleases    uint64
	DeferredFreed       uint64 // outcome: reached the free list
	DeferredQuarantined uint64 // outcome: quarantined before the last lease dropped
	DeferredDuration    Histogram

	ChecksumFailures    uint64
	IsolationViolations uint64
	StaleCompletions    uint64
	CopyFailures        uint64
	ScrubFailures       uint64
	// SealFailures counts host copies that failed their authentication
	// tag on restore (damaged, or their tenant's key erased): each was a
	// miss and recomputed, never read.
	SealFailures uint64

	HostTierUsed     int64
	HostTierCapacity int64
	HostEntries      int
	BytesOffloaded   int64 // raw page bytes copied to the host tier
	BytesRestored    int64 // raw page bytes copied back
	BytesStored      int64 // host bytes written after compression
}

type counters struct {
	allocs, releases, scrubs, scrubFailures          uint64
	deferred, deferredFreed, deferredQuarantined     uint64
	checksum, isolation, staleCompletions, copyFails uint64
	sealFailures                                     uint64
	release                                          Histogram // deferred-release durations
	offloaded, restored, stored                      int64
}

// Stats returns a snapshot of the pool's metrics.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.issueScrubLocked() // and collect the batches already done
	c := &p.st
	s := Stats{
		Pages: len(p.pages), Tenants: len(p.tenants), Free: p.counts[PageFree], Owned: p.counts[PageOwned],
		Sealed: p.counts[PageSealed], Releasing: p.counts[PageReleasing],
		Quarantined: p.counts[PageQuarantined], Scrubbing: p.counts[PageScrubbing],
		StepLeases: p.leases[LeaseStep], CopyLeases: p.leases[LeaseCopy], PrefixLeases: p.leases[LeasePrefix],
		Allocs: c.allocs, Releases: c.releases, Scrubs: c.scrubs,
		DeferredReleases: c.deferred, DeferredFreed: c.deferredFreed, DeferredQuarantined: c.deferredQuarantined,
		ChecksumFailures: c.checksum, IsolationViolations: c.isolation,
		StaleCompletions: c.staleCompletions, CopyFailures: c.copyFails, ScrubFailures: c.scrubFailures,
		SealFailures:   c.sealFailures,
		BytesOffloaded: c.offloaded, BytesRestored: c.restored, BytesStored: c.stored,
	}
	s.DeferredDuration = c.release.Clone()
	if p.host != nil {
		s.HostTierUsed, s.HostTierCapacity, s.HostEntries = p.host.used, p.host.capacity, p.host.entries
	}
	return s
}
