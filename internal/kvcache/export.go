package kvcache

import (
	"errors"
	"fmt"
)

// Pages in and out of the pool as raw bytes, for a tier below the host
// tier (the engine's disk tier). The bytes are a full page packed as the
// host tier packs it (PageBytes long); every way out is verified against
// the page's sealed checksum, and every way in is verified on the device
// before anything can read it, as a restore from the host tier is.

// ExportPage copies the sealed, retained page ref of tenant out of the
// pool, verified against its sealed checksum. The caller's prefix lease
// keeps the page alive; a copy lease keeps it out of circulation while
// the copy runs.
func (p *Pool) ExportPage(ref PageRef, tenant Tenant) ([]byte, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if err := p.checkRefLocked(ref); err != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("kvcache: export: %w", err)
	}
	m, x := &p.pages[ref.Index], &p.ext[ref.Index]
	if tid, ok := p.tenants[tenant]; !ok || tid != m.tenant {
		p.isolationLocked("cross-tenant export", 0, ref.Index, ref.Gen)
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %w: export of %v for tenant %q", ErrIsolation, ErrForeignPage, ref, tenant)
	}
	if err := shareable(m, x); err != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("kvcache: export of %v: %w", ref, err)
	}
	sum := x.sum
	p.takeLeaseLocked(ref.Index, LeaseCopy)
	p.mu.Unlock()

	buf := make([]byte, p.packedLen(p.geo.PageSize))
	err := p.downloadPacked(buf, ref.Index, p.geo.PageSize)
	if err == nil {
		if got := p.hostChecksum(buf, p.geo.PageSize); got != sum {
			err = fmt.Errorf("%w: %w: export of %v: sealed as %016x, device holds %016x", ErrIsolation, ErrChecksum, ref, sum, got)
		}
	}
	p.mu.Lock()
	defer p.unlock()
	if err != nil {
		p.DropRaw(buf)
		if errors.Is(err, ErrChecksum) {
			p.st.checksum++
			p.isolationLocked("export checksum", m.owner, ref.Index, ref.Gen)
			p.quarantineLocked(ref.Index)
		}
		p.dropLeaseLocked(ref.Index, LeaseCopy)
		return nil, err
	}
	p.dropLeaseLocked(ref.Index, LeaseCopy)
	return buf, nil
}

// ExportHost decodes the completed host copy h (opened and decompressed)
// into a full page's raw bytes, verified against its checksum. A copy that
// fails its tag is ErrSealOpen (counted, as on restore).
func (p *Pool) ExportHost(h *HostPage) ([]byte, error) {
	if err := h.Err(); err != nil {
		return nil, err
	}
	e := h.e
	p.mu.Lock()
	if e.gone || e.data == nil || e.slots != p.geo.PageSize {
		p.mu.Unlock()
		return nil, fmt.Errorf("kvcache: export of a host copy: discarded or not a full page")
	}
	e.readers++
	p.mu.Unlock()
	raw, staging, err := p.decodeEntry(e, "export of a host copy")
	if err == nil && staging == "" {
		raw = append([]byte(nil), raw...) // the caller's own
	}
	p.mu.Lock()
	if e.readers--; e.readers == 0 && e.dropLater {
		p.dropHost("host copy", e.data)
		e.data, e.dropLater = nil, false
	}
	if errors.Is(err, ErrSealOpen) {
		p.st.sealFailures++
	}
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// ImportPage uploads raw, a full page's bytes, into a fresh page appended
// to t (a fully written table at a page boundary), verifies it on the
// device and seals it. With no free page it returns ErrNoPages.
func (p *Pool) ImportPage(t *PageTable, raw []byte) (PageRef, error) {
	ps := p.geo.PageSize
	if len(raw) != p.packedLen(ps) {
		return PageRef{}, fmt.Errorf("%w: import of %d bytes, a page is %d", ErrOutOfRange, len(raw), p.packedLen(ps))
	}
	if err := t.usable("import"); err != nil {
		return PageRef{}, err
	}
	if t.written != t.Reserved() || t.written%ps != 0 {
		return PageRef{}, fmt.Errorf("%w: import into request %d needs a fully written table at a page boundary (%d written, %d reserved)",
			ErrOutOfRange, t.req, t.written, t.Reserved())
	}
	done := make(chan struct{})
	close(done)
	e := &hostEntry{tid: t.tid, tenant: t.tenant, req: t.req, slots: ps, rawLen: len(raw),
		sum: p.hostChecksum(raw, ps), data: raw, finished: true, done: done}
	refs, err := p.restoreInto(t, []*hostEntry{e}, ps)
	if err != nil {
		return PageRef{}, err
	}
	t.refs = append(t.refs, refs[0])
	t.shared = append(t.shared, false)
	t.written += ps
	return refs[0], nil
}

// DropRaw lets go of a buffer of page bytes the pool handed out
// (ExportPage, ExportHost) or was handed (ImportPage), scrubbing it when
// the pool scrubs host buffers.
func (p *Pool) DropRaw(b []byte) { p.dropHost("export staging", b) }
