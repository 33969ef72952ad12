package kvcache

import "github.com/kvwarden/kvwarden/internal/device"

// Scrubbing in batches. A page released while scrubbing is on
// (ZeroOnRelease, Poison) is owned by nobody but is not free yet: it waits
// in PageScrubbing, first on p.dirty, then, once the batch it belongs to
// is issued, in p.inflight until the backend reports the batch done. Every
// page released in one critical section is scrubbed by one
// device.Arena.ScrubPages call when that section ends (unlock): one pass
// on the CPU, one asynchronous kernel on CUDA. Allocation takes pages from
// the free list only, so a page is never handed out before its scrub has
// completed; when the free list runs short, settleLocked completes the
// outstanding scrubs first.

// scrubBatch is one issued ScrubPages call whose fence has not been seen done.
type scrubBatch struct {
	pages []uint32
	fence device.Fence
}

// scrubOn reports whether released pages are scrubbed.
func (p *Pool) scrubOn() bool { return p.cfg.Poison || p.cfg.ZeroOnRelease }

// scrubWord is the 32-bit pattern a released page is filled with.
func (p *Pool) scrubWord() uint32 {
	if p.cfg.Poison {
		return poisonWordOf(p.geo.DType)
	}
	return 0
}

// unlock issues the scrub of the pages released under the lock, then
// releases it. Critical sections that release pages end with it; one that
// does not still leaves its pages to the next settleLocked.
func (p *Pool) unlock() {
	p.issueScrubLocked()
	p.mu.Unlock()
}

// issueScrubLocked starts the scrub of every dirty page with one call and
// reaps the batches already done.
func (p *Pool) issueScrubLocked() {
	p.reapScrubsLocked(false)
	if len(p.dirty) == 0 {
		return
	}
	pages := p.dirty
	p.dirty = nil
	fence, err := p.arena.ScrubPages(pages, p.pageBytes, p.scrubWord())
	if err != nil || fence == nil {
		p.finishScrubLocked(pages, err)
		return
	}
	p.inflight = append(p.inflight, scrubBatch{pages: pages, fence: fence})
}

// reapScrubsLocked frees the pages of the issued batches that are done;
// with wait, it waits for all of them.
func (p *Pool) reapScrubsLocked(wait bool) {
	keep := p.inflight[:0]
	for _, b := range p.inflight {
		if !wait && !b.fence.Done() {
			keep = append(keep, b)
			continue
		}
		p.finishScrubLocked(b.pages, b.fence.Wait())
	}
	clear(p.inflight[len(keep):])
	p.inflight = keep
}

// settleLocked completes every outstanding scrub, so that every released
// page is on the free list (or quarantined). The waits happen under the
// lock: it runs only when an allocation needs the pages, at Stats, and
// at Close.
func (p *Pool) settleLocked() {
	p.issueScrubLocked()
	p.reapScrubsLocked(true)
}

// finishScrubLocked moves a completed batch to the free list; a batch
// whose scrub failed is quarantined, since nobody can tell which of its
// pages still hold the previous owner's data. A page quarantined while
// its scrub was in flight stays quarantined.
func (p *Pool) finishScrubLocked(pages []uint32, err error) {
	for _, idx := range pages {
		m := &p.pages[idx]
		if m.state != PageScrubbing {
			continue
		}
		if err != nil {
			p.setStateLocked(m, PageQuarantined)
			p.st.scrubFailures++
			continue
		}
		p.st.scrubs++
		p.setStateLocked(m, PageFree)
		p.free = append(p.free, idx)
	}
	if err != nil {
		p.log.Error("kvcache: scrub of released pages failed; pages quarantined", "pages", len(pages), "err", err)
	}
}

// ensureFreeLocked reports whether n pages are on the free list,
// completing the outstanding scrubs first if there are too few.
func (p *Pool) ensureFreeLocked(n int) bool {
	if len(p.free) < n && p.counts[PageScrubbing] > 0 {
		p.settleLocked()
	}
	return len(p.free) >= n
}
