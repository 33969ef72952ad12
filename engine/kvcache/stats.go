package kvcache

import "time"

// ReleaseBuckets are the upper bounds of the deferred-release duration
// histogram; a final bucket counts everything slower.
var ReleaseBuckets = [...]time.Duration{
	time.Microsecond, 10 * time.Microsecond, 100 * time.Microsecond,
	time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second,
}

// Histogram is a fixed-bucket latency histogram.
type Histogram struct {
	Bounds []time.Duration // upper bounds; Counts has one more entry (+Inf)
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// Stats is a snapshot of the pool's metrics.
type Stats struct {
	Pages       int
	Free        int
	Owned       int
	Sealed      int
	Releasing   int
	Quarantined int

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
	hist                                             [len(ReleaseBuckets) + 1]uint64
	histSum                                          time.Duration
	offloaded, restored, stored                      int64
}

func (c *counters) observe(d time.Duration) {
	i := 0
	for i < len(ReleaseBuckets) && d > ReleaseBuckets[i] {
		i++
	}
	c.hist[i]++
	c.histSum += d
}

// Stats returns a snapshot of the pool's metrics.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.st
	s := Stats{
		Pages: len(p.pages), Free: p.counts[PageFree], Owned: p.counts[PageOwned],
		Sealed: p.counts[PageSealed], Releasing: p.counts[PageReleasing],
		Quarantined: p.counts[PageQuarantined],
		StepLeases:  p.leases[LeaseStep], CopyLeases: p.leases[LeaseCopy], PrefixLeases: p.leases[LeasePrefix],
		Allocs: c.allocs, Releases: c.releases, Scrubs: c.scrubs,
		DeferredReleases: c.deferred, DeferredFreed: c.deferredFreed, DeferredQuarantined: c.deferredQuarantined,
		ChecksumFailures: c.checksum, IsolationViolations: c.isolation,
		StaleCompletions: c.staleCompletions, CopyFailures: c.copyFails, ScrubFailures: c.scrubFailures,
		BytesOffloaded: c.offloaded, BytesRestored: c.restored, BytesStored: c.stored,
	}
	s.DeferredDuration = Histogram{Bounds: ReleaseBuckets[:], Counts: append([]uint64(nil), c.hist[:]...), Sum: c.histSum}
	for _, n := range c.hist {
		s.DeferredDuration.Count += n
	}
	if p.host != nil {
		s.HostTierUsed, s.HostTierCapacity, s.HostEntries = p.host.used, p.host.capacity, p.host.entries
	}
	return s
}
