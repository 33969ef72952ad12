package kvcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvwarden/kvwarden/internal/blockq"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/half"
)

// PageTable is one sequence's list of pages, in token order. Tokens
// [0, Written()) have been written; [Written(), Reserved()) are reserved
// but unwritten and are never read. A table is used by one goroutine at a
// time; the pool it belongs to is shared.
type PageTable struct {
	pool     *Pool
	req      RequestID
	tenant   Tenant
	tid      uint32
	refs     []PageRef
	shared   []bool // entry i is a prefix page of the same tenant, held by a prefix lease
	written  int
	released bool
	swapping bool  // a PendingSwap holds it until Finish or Cancel
	bad      error // the table could not be made (every call fails with it)
}

// Request is the owner of the table's own pages.
func (t *PageTable) Request() RequestID { return t.req }

// Tenant is the table's tenant.
func (t *PageTable) Tenant() Tenant { return t.tenant }

// Written is the number of tokens written; it bounds every read.
func (t *PageTable) Written() int { return t.written }

// Reserved is the number of token slots the table's pages provide.
func (t *PageTable) Reserved() int { return len(t.refs) * t.pool.geo.PageSize }

// Len is the number of pages in the table.
func (t *PageTable) Len() int { return len(t.refs) }

// Released says whether Release (or SwapOut) has ended the table.
func (t *PageTable) Released() bool { return t.released }

// Refs returns a copy of the table's page references.
func (t *PageTable) Refs() []PageRef { return append([]PageRef(nil), t.refs...) }

// Pages returns the page indices in token order, for the attention kernel.
// Only the first ceil(Written()/PageSize) of them hold tokens.
func (t *PageTable) Pages() []uint32 {
	out := make([]uint32, len(t.refs))
	for i, r := range t.refs {
		out[i] = r.Index
	}
	return out
}

// Shared says whether entry i is a shared prefix page.
func (t *PageTable) Shared(i int) bool { return i >= 0 && i < len(t.shared) && t.shared[i] }

func (t *PageTable) usable(op string) error {
	if t.bad != nil {
		return fmt.Errorf("kvcache: %s: %w", op, t.bad)
	}
	if t.req == 0 {
		return fmt.Errorf("kvcache: %s: %w: request ID 0 is never valid", op, ErrForeignPage)
	}
	if t.released {
		return fmt.Errorf("kvcache: %s for request %d: %w", op, t.req, ErrTableReleased)
	}
	if t.swapping {
		return fmt.Errorf("kvcache: %s for request %d: %w", op, t.req, ErrSwapping)
	}
	return nil
}

// wantWritten is how many slots entry i must hold when t has written tokens.
func (t *PageTable) wantWritten(i int) int {
	ps := t.pool.geo.PageSize
	switch full := t.written / ps; {
	case i < full:
		return ps
	case i == full:
		return t.written % ps
	}
	return 0
}

// Reserve makes room for tokens tokens in total. It allocates all the
// missing pages or none of them.
func (t *PageTable) Reserve(tokens int) error {
	if err := t.usable("reserve"); err != nil {
		return err
	}
	p := t.pool
	if tokens < 0 {
		return fmt.Errorf("%w: reserve of %d tokens", ErrOutOfRange, tokens)
	}
	need := (tokens+p.geo.PageSize-1)/p.geo.PageSize - len(t.refs)
	if need <= 0 {
		return nil
	}
	if f := p.cfg.Faults; f != nil && f.FailAlloc != nil && f.FailAlloc() {
		return fmt.Errorf("%w: request %d needs %d pages: injected allocation failure", ErrNoPages, t.req, need)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.ensureFreeLocked(need) {
		return fmt.Errorf("%w: request %d needs %d more pages for %d tokens, %d of %d free",
			ErrNoPages, t.req, need, tokens, len(p.free), len(p.pages))
	}
	for range need {
		t.refs = append(t.refs, p.allocLocked(t.req, t.tid))
		t.shared = append(t.shared, false)
	}
	return nil
}

// Location is where token pos is to be written: the page index and slot.
// Only unwritten, reserved positions have a location; written slots are
// immutable and positions past the reservation do not exist.
func (t *PageTable) Location(pos int) (uint32, int, error) {
	if err := t.usable("location"); err != nil {
		return 0, 0, err
	}
	p := t.pool
	ps := p.geo.PageSize
	if pos < 0 || pos >= t.Reserved() {
		return 0, 0, fmt.Errorf("%w: request %d: write at position %d past its reservation of %d tokens",
			ErrPageFull, t.req, pos, t.Reserved())
	}
	i := pos / ps
	if pos < t.written {
		if t.shared[i] {
			return 0, 0, fmt.Errorf("%w: request %d: position %d is in shared prefix %v", ErrSealed, t.req, pos, t.refs[i])
		}
		return 0, 0, fmt.Errorf("%w: request %d: position %d already written (%d written); written slots are immutable",
			ErrSealed, t.req, pos, t.written)
	}
	ref := t.refs[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, 0, ErrClosed
	}
	m := &p.pages[ref.Index]
	if m.gen != ref.Gen || m.owner != t.req || m.tenant != t.tid || m.state != PageOwned {
		if m.gen == ref.Gen && m.owner == t.req && m.state == PageSealed {
			return 0, 0, fmt.Errorf("%w: request %d: write to position %d of sealed %v", ErrSealed, t.req, pos, ref)
		}
		return 0, 0, p.violationLocked(t, i, "write")
	}
	return ref.Index, pos % ps, nil
}

// Advance marks n more tokens written and seals the pages that became full:
// their checksum is taken and they become immutable.
func (t *PageTable) Advance(n int) error {
	if err := t.usable("advance"); err != nil {
		return err
	}
	p := t.pool
	ps := p.geo.PageSize
	if n < 0 || t.written+n > t.Reserved() {
		return fmt.Errorf("%w: request %d: advance by %d with %d written of %d reserved",
			ErrOutOfRange, t.req, n, t.written, t.Reserved())
	}
	if n == 0 {
		return nil
	}
	end := t.written + n
	var full [8]int
	toSeal := full[:0]
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	for i := t.written / ps; i <= (end-1)/ps; i++ {
		m := &p.pages[t.refs[i].Index]
		if m.gen != t.refs[i].Gen || m.owner != t.req || m.state != PageOwned || t.shared[i] {
			err := p.violationLocked(t, i, "advance")
			p.mu.Unlock()
			return err
		}
	}
	for i := t.written / ps; i <= (end-1)/ps; i++ {
		m := &p.pages[t.refs[i].Index]
		m.written = uint16(min(ps, end-i*ps))
		if int(m.written) == ps {
			toSeal = append(toSeal, i)
		}
	}
	p.mu.Unlock()
	t.written = end
	// Hashing happens outside the lock: the pages are this table's, unsealed,
	// so nothing else may touch them, and other requests keep running.
	var errs []error
	for _, i := range toSeal {
		if err := t.seal(i); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// seal takes the full-page checksum of entry i after checking the slots
// that were sealed at an earlier handoff still match.
func (t *PageTable) seal(i int) error {
	p := t.pool
	ref := t.refs[i]
	p.mu.Lock()
	partN, partSum := p.ext[ref.Index].partN, p.ext[ref.Index].partSum
	p.mu.Unlock()
	if partN > 0 {
		if err := p.verifyEntry(t, i, int(partN), partSum); err != nil {
			return err
		}
	}
	sum, err := p.deviceChecksum(ref.Index, p.geo.PageSize)
	if err != nil {
		return fmt.Errorf("kvcache: sealing %v: %w", ref, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := &p.pages[ref.Index]
	if m.gen == ref.Gen && m.state == PageOwned {
		m.sealed = true
		p.ext[ref.Index].sum, p.ext[ref.Index].partN = sum, 0
		p.setStateLocked(m, PageSealed)
	}
	return nil
}

// Handoff checks the table at a phase boundary (invariant 6): exactly
// expected tokens are written, every reserved page holds written tokens of
// this request, and sealed pages still match their checksums. It then seals
// the written slots of a partial last page with a checksum of their own; the
// rest of that page stays writable for decode. Counts are compared before
// any page is read, so a table like the incident's (8 pages reserved, 1
// written) fails without touching the 7 unwritten pages.
func (t *PageTable) Handoff(expected int) error {
	if err := t.usable("handoff"); err != nil {
		return err
	}
	p := t.pool
	ps := p.geo.PageSize
	writtenPages := (t.written + ps - 1) / ps
	if t.written != expected || len(t.refs) != writtenPages {
		p.mu.Lock()
		p.st.isolation++
		p.mu.Unlock()
		err := fmt.Errorf("%w: %w: request %d: %d pages reserved, %d written (%d tokens written, %d expected by the receiver; %d reserved pages hold no token of this request)",
			ErrIsolation, ErrHandoff, t.req, len(t.refs), writtenPages, t.written, expected, len(t.refs)-writtenPages)
		p.log.Error("kvcache handoff refused", "request", uint64(t.req), "tenant", string(t.tenant),
			"pages_reserved", len(t.refs), "pages_written", writtenPages, "tokens_written", t.written, "tokens_expected", expected)
		return err
	}
	if err := p.ValidateTable(t); err != nil {
		return fmt.Errorf("%w: %w", ErrHandoff, err)
	}
	if err := p.verifySealed(t); err != nil {
		return fmt.Errorf("%w: %w", ErrHandoff, err)
	}
	if rem := t.written % ps; rem != 0 {
		i := len(t.refs) - 1
		ref := t.refs[i]
		sum, err := p.deviceChecksum(ref.Index, rem)
		if err != nil {
			return fmt.Errorf("kvcache: handoff seal of %v: %w", ref, err)
		}
		p.mu.Lock()
		m := &p.pages[ref.Index]
		if m.gen == ref.Gen && m.state == PageOwned {
			p.ext[ref.Index].partN, p.ext[ref.Index].partSum = uint16(rem), sum
		}
		p.mu.Unlock()
	}
	return nil
}

// Release gives every page back: own pages go through deferred release,
// shared pages lose this table's prefix lease. A second Release returns
// ErrDoubleRelease and changes nothing. Quarantined pages stay quarantined.
func (t *PageTable) Release() error {
	p := t.pool
	p.mu.Lock()
	defer p.unlock()
	if t.bad != nil {
		return nil // it never held anything
	}
	if t.released {
		return fmt.Errorf("%w: request %d: page table released twice", ErrDoubleRelease, t.req)
	}
	t.released = true
	p.unrefTenantLocked(t.tid)
	err := p.releaseEntriesLocked(t, 0)
	t.refs, t.shared, t.written = nil, nil, 0
	return err
}

// ReleaseUnwritten gives back reserved pages that hold no written token,
// e.g. before a handoff that must not see reservations ahead of the writes.
func (t *PageTable) ReleaseUnwritten() error {
	if err := t.usable("release unwritten"); err != nil {
		return err
	}
	p := t.pool
	ps := p.geo.PageSize
	keep := (t.written + ps - 1) / ps
	p.mu.Lock()
	defer p.unlock()
	err := p.releaseEntriesLocked(t, keep)
	t.refs, t.shared = t.refs[:keep], t.shared[:keep]
	return err
}

func (p *Pool) releaseEntriesLocked(t *PageTable, from int) error {
	var errs []error
	for i := from; i < len(t.refs); i++ {
		ref := t.refs[i]
		if err := p.checkRefLocked(ref); err != nil {
			errs = append(errs, fmt.Errorf("kvcache: release by request %d: %w", t.req, err))
			continue
		}
		m := &p.pages[ref.Index]
		if t.shared[i] {
			if p.ext[ref.Index].leases[LeasePrefix] <= 0 {
				errs = append(errs, fmt.Errorf("%w: request %d: no prefix lease on shared %v", ErrNoLease, t.req, ref))
				continue
			}
			p.dropLeaseLocked(ref.Index, LeasePrefix)
			continue
		}
		switch {
		case m.state == PageQuarantined:
		case m.owner != t.req:
			errs = append(errs, fmt.Errorf("%w: request %d releasing %v owned by request %d", ErrForeignPage, t.req, ref, m.owner))
		case m.state == PageOwned || m.state == PageSealed:
			p.releaseLocked(ref.Index)
		default:
			errs = append(errs, fmt.Errorf("%w: request %d releasing %v in state %s", ErrDoubleRelease, t.req, ref, m.state))
		}
	}
	return errors.Join(errs...)
}

// AppendShared appends a sealed, full page of the same tenant (a prefix-cache
// hit) at a page boundary of a fully written table, taking a prefix lease
// that Release drops. Its checksum is verified first: this is the prefix
// cache to new request handoff.
func (t *PageTable) AppendShared(ref PageRef) error {
	if err := t.usable("append shared"); err != nil {
		return err
	}
	p := t.pool
	ps := p.geo.PageSize
	if t.written != t.Reserved() || t.written%ps != 0 {
		return fmt.Errorf("%w: request %d: shared pages go at a page boundary of a fully written table (%d written, %d reserved)",
			ErrOutOfRange, t.req, t.written, t.Reserved())
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if err := p.checkRefLocked(ref); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("kvcache: append shared to request %d: %w", t.req, err)
	}
	m := &p.pages[ref.Index]
	if m.tenant != t.tid {
		p.isolationLocked("cross-tenant share", t.req, ref.Index, ref.Gen)
		err := fmt.Errorf("%w: %w: request %d of tenant %q cannot share %v: it belongs to another tenant",
			ErrIsolation, ErrForeignPage, t.req, t.tenant, ref)
		p.mu.Unlock()
		return err
	}
	if err := shareable(m, &p.ext[ref.Index]); err != nil {
		err = fmt.Errorf("kvcache: append shared %v (%s) to request %d: %w", ref, m.state, t.req, err)
		p.mu.Unlock()
		return err
	}
	if int(m.written) != ps {
		err := fmt.Errorf("%w: shared %v holds %d of %d slots", ErrNotSealed, ref, m.written, ps)
		p.mu.Unlock()
		return err
	}
	sum := p.ext[ref.Index].sum
	p.takeLeaseLocked(ref.Index, LeasePrefix)
	p.mu.Unlock()

	got, err := p.deviceChecksum(ref.Index, ps)
	if err == nil && got != sum {
		err = fmt.Errorf("%w: %w: shared %v for request %d: sealed %016x, now %016x; page quarantined",
			ErrIsolation, ErrChecksum, ref, t.req, sum, got)
	}
	if err != nil {
		p.mu.Lock()
		if errors.Is(err, ErrChecksum) {
			p.st.checksum++
			p.isolationLocked("prefix page checksum", t.req, ref.Index, ref.Gen)
			p.quarantineLocked(ref.Index)
		}
		p.dropLeaseLocked(ref.Index, LeasePrefix)
		p.mu.Unlock()
		return err
	}
	t.refs = append(t.refs, ref)
	t.shared = append(t.shared, true)
	t.written += ps
	return nil
}

// WriteKV writes token pos's K and V rows for layer (KVDim values each; v
// is nil for a K-only pool, which has no V row). It is Location plus the
// copy, for callers that do not write the arena themselves. Rows are
// converted to the pool's element type (f16 and bf16 round to nearest
// even).
func (t *PageTable) WriteKV(pos, layer int, k, v []float32) error {
	p := t.pool
	if err := p.checkRow(layer, k, v); err != nil {
		return err
	}
	page, slot, err := t.Location(pos)
	if err != nil {
		return err
	}
	return p.rowIO(page, layer, slot, k, v, true)
}

// ReadKV reads token pos's K and V rows for layer (v nil for a K-only
// pool). Only written positions can be read, and the page is validated
// first (owner or shared prefix, tenant, generation).
func (t *PageTable) ReadKV(pos, layer int, k, v []float32) error {
	if err := t.usable("read"); err != nil {
		return err
	}
	p := t.pool
	if err := p.checkRow(layer, k, v); err != nil {
		return err
	}
	if pos < 0 || pos >= t.written {
		return fmt.Errorf("%w: request %d: read of position %d with %d written", ErrOutOfRange, t.req, pos, t.written)
	}
	i := pos / p.geo.PageSize
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if !p.entryOKLocked(t, i, t.wantWritten(i)) {
		err := p.violationLocked(t, i, "read")
		p.mu.Unlock()
		return err
	}
	p.mu.Unlock()
	return p.rowIO(t.refs[i].Index, layer, pos%p.geo.PageSize, k, v, false)
}

func (p *Pool) checkRow(layer int, k, v []float32) error {
	wantV := p.geo.KVDim()
	if p.geo.KOnly {
		// A V row given to a K-only pool would land on the K row (VOffset
		// is KOffset): refused rather than silently overwriting the keys.
		wantV = 0
	}
	if layer < 0 || layer >= p.geo.Layers || len(k) != p.geo.KVDim() || len(v) != wantV {
		return fmt.Errorf("%w: layer %d of %d, rows of %d and %d values (want %d and %d)",
			ErrOutOfRange, layer, p.geo.Layers, len(k), len(v), p.geo.KVDim(), wantV)
	}
	return nil
}

func (p *Pool) rowIO(page uint32, layer, slot int, k, v []float32, write bool) error {
	type rowAt struct {
		off int
		row []float32
	}
	rows := [2]rowAt{{p.geo.KOffset(page, layer, slot), k}, {p.geo.VOffset(page, layer, slot), v}}
	io := rows[:p.geo.Planes()] // K alone in a K-only pool
	if p.f32 != nil {
		d := p.geo.KVDim()
		for _, r := range io {
			if write {
				copy(p.f32[r.off:r.off+d], r.row)
			} else {
				copy(r.row, p.f32[r.off:r.off+d])
			}
		}
		return nil
	}
	es := int(p.elemSize)
	buf := make([]byte, p.geo.RowBytes())
	for _, r := range io {
		if write {
			encodeRow(buf, r.row, p.geo.DType)
			if err := p.arena.Upload(int64(r.off)*int64(es), buf); err != nil {
				return err
			}
			continue
		}
		if err := p.arena.Download(buf, int64(r.off)*int64(es)); err != nil {
			return err
		}
		decodeRow(r.row, buf, p.geo.DType)
	}
	return nil
}

// encodeRow stores row as little-endian elements of type d in buf (for a
// block-quantized type: its blocks, rounded as ggml's reference does).
func encodeRow(buf []byte, row []float32, d device.DType) {
	switch d {
	case device.Q8_0:
		blockq.QuantizeRowQ8_0(buf, row)
		return
	case device.Q4_0:
		blockq.QuantizeRowQ4_0(buf, row)
		return
	}
	for i, x := range row {
		switch d {
		case device.F16:
			binary.LittleEndian.PutUint16(buf[2*i:], half.F32ToF16(x))
		case device.BF16:
			binary.LittleEndian.PutUint16(buf[2*i:], half.F32ToBF16(x))
		default:
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
	}
}

// decodeRow is the inverse of encodeRow (exact for the float types).
func decodeRow(row []float32, buf []byte, d device.DType) {
	switch d {
	case device.Q8_0:
		blockq.DequantizeRowQ8_0(row, buf)
		return
	case device.Q4_0:
		blockq.DequantizeRowQ4_0(row, buf)
		return
	}
	for i := range row {
		switch d {
		case device.F16:
			row[i] = half.F16ToF32(binary.LittleEndian.Uint16(buf[2*i:]))
		case device.BF16:
			row[i] = half.BF16ToF32(binary.LittleEndian.Uint16(buf[2*i:]))
		default:
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	}
}
