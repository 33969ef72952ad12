package kvcache

import (
	"fmt"

	"github.com/kvwarden/kvwarden/internal/device"
)

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
	run := p.geo.PageSize * p.geo.RowUnits()
	for layer := range p.geo.Layers {
		// Each plane of the layer (K, then V unless K-only): the same slots.
		for plane := range p.geo.Planes() {
			off := p.geo.KOffset(ref.Index, layer, rem) + plane*run
			if err := fillSpan(p.arena, int64(off)*es, n, word); err != nil {
				return fmt.Errorf("kvcache: rollback scrub of %v: %w", ref, err)
			}
		}
	}
	return nil
}

// fillSpan writes the 32-bit word's pattern over n bytes at off, as if the
// whole arena were filled with it: byte i of the arena gets byte i%4 of the
// word. Arena.Fill takes only whole aligned words, but a slot span need not
// be one: rows of 18-byte q4_0 or 34-byte q8_0 blocks, or of an odd number
// of 16-bit elements, start and end on any even byte. The ragged ends go
// through Upload, so exactly the span is scrubbed, never a neighbour.
func fillSpan(a device.Arena, off, n int64, word uint32) error {
	lo := min((off+3)&^3, off+n)
	hi := max((off+n)&^3, lo)
	if hi > lo {
		if err := a.Fill(lo, hi-lo, word); err != nil {
			return err
		}
	}
	for _, r := range [2][2]int64{{off, lo}, {hi, off + n}} {
		if r[1] <= r[0] {
			continue
		}
		b := make([]byte, r[1]-r[0])
		for i := range b {
			b[i] = byte(word >> (8 * ((r[0] + int64(i)) % 4)))
		}
		if err := a.Upload(r[0], b); err != nil {
			return err
		}
	}
	return nil
}
