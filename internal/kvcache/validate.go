package kvcache

import (
	"errors"
	"fmt"

	"github.com/kvwarden/kvwarden/internal/device"
)

// entryOKLocked is the per-page check of invariant 4: an own page must be
// owned by t's request and tenant at the ref's generation with exactly the
// written slots t's count implies; a shared page must be a sealed, full page
// of t's tenant at the ref's generation, alive through a prefix lease.
func (p *Pool) entryOKLocked(t *PageTable, i, want int) bool {
	ref := t.refs[i]
	if int(ref.Index) >= len(p.pages) {
		return false
	}
	m := &p.pages[ref.Index]
	if m.gen != ref.Gen || m.tenant != t.tid {
		return false
	}
	if t.shared[i] {
		return m.sealed && int(m.written) == p.geo.PageSize && p.ext[ref.Index].leases[LeasePrefix] > 0 &&
			(m.state == PageSealed || m.state == PageReleasing)
	}
	return m.owner == t.req && (m.state == PageOwned || m.state == PageSealed) && int(m.written) == want
}

// ValidateTable runs before every step. It checks every page of t against
// the pool's metadata; on a mismatch it quarantines the offending pages,
// counts and logs an isolation violation, and returns an error wrapping
// ErrIsolation that names page, expected and actual owner and generation.
func (p *Pool) ValidateTable(t *PageTable) error {
	if err := t.usable("validate"); err != nil {
		return fmt.Errorf("%w: %w", ErrIsolation, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	ps := p.geo.PageSize
	full, rem := t.written/ps, t.written%ps
	pages := p.pages
	var first error
	for i, ref := range t.refs {
		want := 0
		if i < full {
			want = ps
		} else if i == full {
			want = rem
		}
		// The common case inline: an own page in good standing.
		if int(ref.Index) < len(pages) && !t.shared[i] {
			m := &pages[ref.Index]
			if m.gen == ref.Gen && m.owner == t.req && m.tenant == t.tid &&
				(m.state == PageOwned || m.state == PageSealed) && int(m.written) == want {
				continue
			}
		} else if p.entryOKLocked(t, i, want) {
			continue
		}
		err := p.violationLocked(t, i, "validate")
		if first == nil {
			first = err
		}
	}
	return first
}

// violationLocked explains why entry i of t failed, quarantines the page
// and counts the event.
func (p *Pool) violationLocked(t *PageTable, i int, op string) error {
	ref := t.refs[i]
	if int(ref.Index) >= len(p.pages) {
		p.st.isolation++
		return fmt.Errorf("%w: %w: %s by request %d: entry %d names page %d of a %d-page pool",
			ErrIsolation, ErrOutOfRange, op, t.req, i, ref.Index, len(p.pages))
	}
	m := &p.pages[ref.Index]
	kind := ErrForeignPage
	switch {
	case m.gen != ref.Gen || m.state == PageFree || m.state == PageScrubbing:
		kind = ErrStaleRef
	case m.state == PageQuarantined:
		kind = ErrQuarantined
	case m.owner == t.req && m.tenant == t.tid && !t.shared[i]:
		kind = ErrOutOfRange // written count or state disagrees
	}
	what := "own page"
	if t.shared[i] {
		what = "shared prefix page"
	}
	// Whose page it is instead goes to the log (isolationLocked), never
	// into the error: a request is not told about another request or tenant.
	whose := "this request's"
	switch {
	case m.tenant != t.tid:
		whose = "another tenant's"
	case m.owner != t.req && !t.shared[i]:
		whose = "another request's"
	}
	err := fmt.Errorf("%w: %w: %s by request %d (tenant %q), entry %d (%s): page %d: expected owner %d gen %d with %d written, found %s page at gen %d, state %s with %d written, %d prefix leases; page quarantined",
		ErrIsolation, kind, op, t.req, t.tenant, i, what, ref.Index, t.req, ref.Gen, t.wantWritten(i),
		whose, m.gen, m.state, m.written, p.ext[ref.Index].leases[LeasePrefix])
	if m.state == PageQuarantined {
		// Counted and logged when it was quarantined: one bad page is one
		// isolation event, however many readers it turns away.
		p.log.Warn("kvcache: read of a quarantined page refused", "request", uint64(t.req), "page", ref.Index, "op", op)
		return err
	}
	p.isolationLocked(op+": "+kind.Error(), t.req, ref.Index, ref.Gen)
	p.quarantineLocked(ref.Index)
	return err
}

// VerifyTable re-checksums every sealed page of t (and the handoff-sealed
// slots of its last page): KVChecksum=step mode. A mismatch quarantines the
// page and returns ErrChecksum, which is also an isolation error.
func (p *Pool) VerifyTable(t *PageTable) error {
	if err := p.ValidateTable(t); err != nil {
		return err
	}
	return p.verifySealed(t)
}

func (p *Pool) verifySealed(t *PageTable) error {
	type check struct {
		i, slots int
		sum      uint64
	}
	var buf [16]check
	checks := buf[:0]
	p.mu.Lock()
	for i, ref := range t.refs {
		m, x := &p.pages[ref.Index], &p.ext[ref.Index]
		switch {
		case m.sealed:
			checks = append(checks, check{i, p.geo.PageSize, x.sum})
		case x.partN > 0:
			checks = append(checks, check{i, int(x.partN), x.partSum})
		}
	}
	p.mu.Unlock()
	// The pages cannot change or be freed meanwhile: sealed slots are
	// immutable and t holds each page (as owner or through a prefix lease).
	var errs []error
	for _, c := range checks {
		if err := p.verifyEntry(t, c.i, c.slots, c.sum); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// verifyEntry compares the device checksum of the first slots of entry i
// with want, quarantining the page on a mismatch.
func (p *Pool) verifyEntry(t *PageTable, i, slots int, want uint64) error {
	ref := t.refs[i]
	got, err := p.deviceChecksum(ref.Index, slots)
	if err != nil {
		return fmt.Errorf("kvcache: checksum of %v: %w", ref, err)
	}
	if got == want {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.checksum++
	p.isolationLocked("checksum mismatch", t.req, ref.Index, ref.Gen)
	p.quarantineLocked(ref.Index)
	return fmt.Errorf("%w: %w: request %d (tenant %q), %v: %d slots sealed as %016x, now %016x; page quarantined",
		ErrIsolation, ErrChecksum, t.req, t.tenant, ref, slots, want, got)
}

// deviceChecksum hashes the first slots token slots of a page on the
// device. A full page is one range; a partial one is Runs runs (K and V,
// or K alone, of each layer), whose checksums are combined.
func (p *Pool) deviceChecksum(idx uint32, slots int) (uint64, error) {
	off := p.pageOff(idx)
	if slots == p.geo.PageSize {
		return p.arena.Checksum(off, p.pageBytes)
	}
	runBytes := int64(p.geo.PageSize * p.geo.RowBytes())
	n := int64(slots * p.geo.RowBytes())
	var stack [64]uint64
	sums := stack[:0]
	for r := range int64(p.geo.Runs()) {
		s, err := p.arena.Checksum(off+r*runBytes, n)
		if err != nil {
			return 0, err
		}
		sums = append(sums, s)
	}
	return device.CombineChecksums(sums), nil
}

// hostChecksum is deviceChecksum over a packed host copy: the Runs runs
// of slots tokens each, back to back (for a full page, the page itself).
func (p *Pool) hostChecksum(b []byte, slots int) uint64 {
	if slots == p.geo.PageSize {
		return device.Checksum(b)
	}
	n := len(b) / p.geo.Runs()
	var stack [64]uint64
	sums := stack[:0]
	for off := 0; off+n <= len(b) && n > 0; off += n {
		sums = append(sums, device.Checksum(b[off:off+n]))
	}
	return device.CombineChecksums(sums)
}

// hostPrefixChecksum is deviceChecksum(idx, k) computed over a packed host
// copy of slots slots (k <= slots): the checksum of its first k slots.
func (p *Pool) hostPrefixChecksum(b []byte, slots, k int) uint64 {
	if k == slots {
		return p.hostChecksum(b, slots)
	}
	run := slots * p.geo.RowBytes()
	n := k * p.geo.RowBytes()
	var stack [64]uint64
	sums := stack[:0]
	for off := 0; off+run <= len(b); off += run {
		sums = append(sums, device.Checksum(b[off:off+n]))
	}
	return device.CombineChecksums(sums)
}
