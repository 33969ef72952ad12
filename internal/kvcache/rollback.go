package kvcache

import "fmt"

// Rollback undoes tentative writes: K/V that a forward step wrote past
// Written() without advancing over it (speculative decoding's draft tokens
// that were not accepted). Reads are bounded by the written count, so no
// reader could see those slots; Rollback also gives back what they used:
// reserved pages that hold no written token are released (deferred
// release, scrubbed as any released page), and when the pool scrubs
// (ZeroOnRelease, or Poison with NaN) the unwritten tail of the last
// written page is scrubbed now rather than when the page is freed, so the
// page never holds bytes its written count does not account for.
//
// The tail belongs to an unsealed page of this table's own (the written
// count ends inside it), which no other table can hold: shared prefix
// pages are always full.
func (t *PageTable) Rollback() error {
	if err := t.usable("rollback"); err != nil {
		return err
	}
	if err := t.ReleaseUnwritten(); err != nil {
		return err
	}
	p := t.pool
	ps := p.geo.PageSize
	rem := t.written % ps
	if rem == 0 || !(p.cfg.ZeroOnRelease || p.cfg.Poison) {
		return nil
	}
	i := t.written / ps
	ref := t.refs[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	m := &p.pages[ref.Index]
	if m.gen != ref.Gen || m.owner != t.req || m.state != PageOwned || t.shared[i] {
		return p.violationLocked(t, i, "rollback")
	}
	word := uint32(0)
	if p.cfg.Poison {
		word = poisonWordOf(p.geo.DType)
	}
	es := int64(p.geo.DType.Size())
	n := int64(ps-rem) * int64(p.geo.RowBytes())
	if n%4 != 0 {
		// Fill writes 32-bit words; an odd span of 16-bit elements cannot
		// be scrubbed exactly, so scrub nothing rather than a neighbour.
		return fmt.Errorf("kvcache: rollback of request %d: %d-byte slot span is not a multiple of 4", t.req, n)
	}
	for layer := range p.geo.Layers {
		for _, off := range [2]int{p.geo.KOffset(ref.Index, layer, rem), p.geo.VOffset(ref.Index, layer, rem)} {
			if err := p.arena.Fill(int64(off)*es, n, word); err != nil {
				return fmt.Errorf("kvcache: rollback scrub of %v: %w", ref, err)
			}
		}
	}
	return nil
}
