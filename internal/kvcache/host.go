package kvcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// DefaultCompression is the host-tier compression when Config.Compression
// is empty: none. Measured on f32 KV stand-ins (normal random values, and
// smooth per-element sinusoids along the sequence), s2 and zstd at its
// fastest level never produced a page smaller than its input (ratio 1.000;
// a page that does not shrink is stored raw), zstd's better level reached
// only 1.08-1.10, and both compressors cost CPU on every offload and
// restore. Float mantissas look like noise to byte-oriented compressors.
// Splitting the floats into byte planes first would give zstd 1.18-1.30;
// that, or f16 KV (half the bytes for free), is the lever if the host tier
// becomes the bottleneck. Re-measure on real model KV before changing this.
// Figures: bench/RESULTS.md.
const DefaultCompression = "none"

func parseCompression(c string) (string, error) {
	switch c {
	case "":
		return DefaultCompression, nil
	case "none", "s2", "zstd":
		return c, nil
	}
	return "", fmt.Errorf("%w: compression %q (want none, s2 or zstd)", ErrConfig, c)
}

// hostTier holds page copies in host memory. Its byte accounting lives
// under the pool's mutex so a swap is charged or refused atomically with the
// leases it takes.
type hostTier struct {
	p        *Pool
	capacity int64
	used     int64 // under p.mu
	entries  int   // under p.mu
	comp     string
	serial   uint64                  // offloads started, under p.mu: each copy's identity
	byTenant map[uint32]*tenantUsage // under p.mu
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder

	// stages are page-sized buffers to open sealed copies into: a restore
	// of a page would otherwise allocate (and the GC collect) one per page.
	stages sync.Pool

	sendMu  sync.RWMutex
	stopped bool
	jobs    chan *copyJob
	wg      sync.WaitGroup

	// Benchmarks set these to measure what the direct path and parallel
	// restores gain: staged seals every copy through a staging buffer,
	// oneRestorer restores every run of pages on one goroutine.
	staged, oneRestorer bool
}

// stage is an empty buffer of at least n bytes' capacity, for unsealing.
func (h *hostTier) stage(n int) []byte {
	if b, ok := h.stages.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]byte, 0, n)
}

// unstage gives a buffer from stage back, once dropped (dropHost scrubs it
// under ZeroOnRelease).
func (h *hostTier) unstage(b []byte) {
	b = b[:0]
	h.stages.Put(&b)
}

// tenantUsage is what one tenant holds in the host tier.
type tenantUsage struct {
	entries int
	bytes   int64
}

// account moves the host tier's totals and tenant tid's by the same amounts.
func (h *hostTier) account(tid uint32, entries int, bytes int64) {
	h.used += bytes
	h.entries += entries
	u := h.byTenant[tid]
	if u == nil {
		u = &tenantUsage{}
		h.byTenant[tid] = u
	}
	u.entries += entries
	u.bytes += bytes
	if u.entries == 0 && u.bytes == 0 {
		delete(h.byTenant, tid)
	}
}

// HostUsage is what tenant holds in the host tier now: copies (complete or
// in flight) and the bytes charged for them.
func (p *Pool) HostUsage(tenant Tenant) (entries int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tid, ok := p.tenants[tenant]
	if !ok || p.host == nil {
		return 0, 0
	}
	if u := p.host.byTenant[tid]; u != nil {
		return u.entries, u.bytes
	}
	return 0, 0
}

// hostEntry is one page's copy. It records the tenant and request it came
// from; a restore into any other is refused.
type hostEntry struct {
	tid    uint32
	tenant Tenant // tid's name, for the sealing key
	req    RequestID
	serial uint64  // never reused: binds the sealed copy to this entry
	origin PageRef // the device page it was copied from
	sealed bool    // data is sealed (Config.Sealer)
	slots  int     // written slots captured
	rawLen int     // packed bytes before compression
	sum    uint64  // checksum of the packed bytes as read from the device
	// partN and partSum are the checksum a handoff took of the first partN
	// slots of a partial page. The copy is verified against it as it is
	// made, and a restore carries it back: it never comes from copied bytes.
	partN      int
	partSum    uint64
	data       []byte
	compressed bool
	charged    int64 // host bytes charged, under p.mu
	finished   bool  // under p.mu
	gone       bool  // discarded, under p.mu
	err        error
	done       chan struct{}
	swap       *PendingSwap // the swap-out this copy is part of, if any
	// readers counts restores copying data back (under p.mu, read by them
	// without it). A discard meanwhile leaves data alone and sets
	// dropLater: the last restore's completion scrubs and drops it.
	readers   int
	dropLater bool
}

// copyJob is one offload. ref carries the generation, so the completion
// can tell whether the page it copied is still the page it was asked for.
type copyJob struct {
	ref       PageRef
	sealed    bool
	sealedSum uint64
	e         *hostEntry
}

func newHostTier(p *Pool, capacity int64, comp string) (*hostTier, error) {
	h := &hostTier{p: p, capacity: capacity, comp: comp, jobs: make(chan *copyJob, 256), byTenant: map[uint32]*tenantUsage{}}
	if comp == "zstd" {
		var err error
		if h.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest)); err != nil {
			return nil, fmt.Errorf("kvcache: zstd encoder: %w", err)
		}
		if h.zdec, err = zstd.NewReader(nil); err != nil {
			return nil, fmt.Errorf("kvcache: zstd decoder: %w", err)
		}
	}
	workers := min(4, max(2, runtime.GOMAXPROCS(0)))
	h.wg.Add(workers)
	for range workers {
		go h.worker()
	}
	return h, nil
}

func (h *hostTier) close() {
	h.sendMu.Lock()
	h.stopped = true
	close(h.jobs)
	h.sendMu.Unlock()
	h.wg.Wait()
	if h.zenc != nil {
		_ = h.zenc.Close()
		h.zdec.Close()
	}
}

func (h *hostTier) submit(j *copyJob) {
	h.sendMu.RLock()
	if h.stopped {
		h.sendMu.RUnlock()
		h.p.complete(j, nil, fmt.Errorf("kvcache: offload of %v: %w", j.ref, ErrClosed))
		return
	}
	h.jobs <- j
	h.sendMu.RUnlock()
}

func (h *hostTier) worker() {
	defer h.wg.Done()
	for j := range h.jobs {
		data, err := h.p.copyOut(j)
		h.p.complete(j, data, err)
	}
}

// copyOut reads the page's written slots into host memory. It runs without
// the pool lock; the copy lease keeps the page from being freed, and the
// slots it reads are written and therefore immutable.
func (p *Pool) copyOut(j *copyJob) ([]byte, error) {
	if f := p.cfg.Faults; f != nil {
		if f.HoldCopy != nil {
			f.HoldCopy(j.ref)
		}
		if f.CopyDelay != nil {
			if d := f.CopyDelay(j.ref); d > 0 {
				time.Sleep(d)
			}
		}
		if f.FailCopy != nil {
			if err := f.FailCopy(j.ref); err != nil {
				return nil, fmt.Errorf("%w: offload of %v: %w", ErrCopy, j.ref, err)
			}
		}
	}
	e := j.e
	if a, ok := p.arena.(hostAccess); ok && p.sealsDirect(e) && (p.cfg.Faults == nil || p.cfg.Faults.CorruptCopy == nil) {
		// CorruptCopy flips a byte of a staging copy: this path has none.
		return p.sealOut(j, a)
	}
	var store []byte // room to seal in place (uncompressed copies)
	buf := make([]byte, e.rawLen)
	if _, ok := p.cfg.Sealer.(inPlaceSealer); ok && p.host.comp == "none" {
		store = make([]byte, sealHeader+e.rawLen, sealHeader+e.rawLen+sealTag)
		buf = store[sealHeader:]
	}
	if err := p.downloadPacked(buf, j.ref.Index, e.slots); err != nil {
		p.dropHost("offload staging", buf)
		return nil, fmt.Errorf("%w: offload of %v: %w", ErrCopy, j.ref, err)
	}
	// Every checksum the page carries is verified on the bytes copied,
	// before the copy is trusted: the sealed one, or the one a handoff took
	// of a partial page's first slots. Otherwise a corruption between the
	// handoff and the copy would be laundered into a "verified" copy.
	e.sum = p.hostChecksum(buf, e.slots)
	if j.sealed && e.sum != j.sealedSum {
		p.dropHost("offload staging", buf)
		return nil, fmt.Errorf("%w: %w: offload of %v: sealed as %016x, device holds %016x; page quarantined",
			ErrIsolation, ErrChecksum, j.ref, j.sealedSum, e.sum)
	}
	if e.partN > 0 {
		if got := p.hostPrefixChecksum(buf, e.slots, e.partN); got != e.partSum {
			p.dropHost("offload staging", buf)
			return nil, fmt.Errorf("%w: %w: offload of %v: %d slots sealed at a handoff as %016x, device holds %016x; page quarantined",
				ErrIsolation, ErrChecksum, j.ref, e.partN, e.partSum, got)
		}
	}
	if f := p.cfg.Faults; f != nil && f.CorruptCopy != nil && f.CorruptCopy(j.ref) {
		buf[len(buf)/2] ^= 0x5a
	}
	var c []byte
	switch p.host.comp {
	case "s2":
		c = s2.Encode(nil, buf)
	case "zstd":
		c = p.host.zenc.EncodeAll(buf, nil)
	}
	switch {
	case c == nil:
	case len(c) < len(buf):
		// The raw page was the compressor's staging buffer.
		p.dropHost("compression staging", buf)
		buf, e.compressed = c, true
	default:
		p.dropHost("compression output", c) // no smaller: stored raw
	}
	if s, ok := p.cfg.Sealer.(inPlaceSealer); ok && store != nil {
		// Encrypted where it was downloaded: no second page-sized buffer.
		sealed, err := s.SealInPlace(store, string(e.tenant), p.sealedAD(e))
		if err != nil {
			p.dropHost("offload staging", store)
			return nil, fmt.Errorf("%w: offload of %v: sealing: %w", ErrCopy, j.ref, err)
		}
		buf, e.sealed = sealed, true
		if f := p.cfg.Faults; f != nil && f.SealedCopy != nil {
			f.SealedCopy(j.ref, buf)
		}
	} else if s := p.cfg.Sealer; s != nil {
		// Compressed first: ciphertext does not compress.
		sealed, err := s.Seal(make([]byte, 0, len(buf)+sealOverhead), string(e.tenant), p.sealedAD(e), buf)
		p.dropHost("sealing staging", buf)
		if err != nil {
			return nil, fmt.Errorf("%w: offload of %v: sealing: %w", ErrCopy, j.ref, err)
		}
		buf, e.sealed = sealed, true
		if f := p.cfg.Faults; f != nil && f.SealedCopy != nil {
			f.SealedCopy(j.ref, buf)
		}
	}
	return buf, nil
}

// hostAccess is an arena the host addresses directly (the CPU backend's
// Access). Sealed copies of full pages are encrypted straight out of it
// and opened straight into it: no plaintext staging copy of the page is
// made, so sealing costs AES-GCM in place of the memcpy a plain copy does,
// instead of on top of it.
type hostAccess interface {
	Access(off, n int64, f func([]byte) error) error
}

// sealsDirect reports whether e's copy is sealed straight from (and
// opened straight into) host-addressable arena memory: an uncompressed,
// sealed copy of a full page, one contiguous run in the arena.
func (p *Pool) sealsDirect(e *hostEntry) bool {
	return p.cfg.Sealer != nil && p.host.comp == "none" && e.slots == p.geo.PageSize && !p.host.staged
}

// sealOut is copyOut for a direct copy (sealsDirect): the page's checksums
// are verified on the page where it lies, and AES-GCM reads it there and
// writes the only copy made, the ciphertext. The copy lease keeps the page
// (written, so immutable) from changing under it; a stray write between
// the checksum and the seal is caught on restore, where the opened bytes
// are checked against the checksum again.
func (p *Pool) sealOut(j *copyJob, a hostAccess) ([]byte, error) {
	e := j.e
	out := make([]byte, 0, sealOverhead+e.rawLen)
	var ferr error
	err := a.Access(p.pageOff(j.ref.Index), int64(e.rawLen), func(page []byte) error {
		e.sum = p.hostChecksum(page, e.slots)
		if j.sealed && e.sum != j.sealedSum {
			ferr = fmt.Errorf("%w: %w: offload of %v: sealed as %016x, device holds %016x; page quarantined",
				ErrIsolation, ErrChecksum, j.ref, j.sealedSum, e.sum)
			return nil
		}
		if e.partN > 0 {
			if got := p.hostPrefixChecksum(page, e.slots, e.partN); got != e.partSum {
				ferr = fmt.Errorf("%w: %w: offload of %v: %d slots sealed at a handoff as %016x, device holds %016x; page quarantined",
					ErrIsolation, ErrChecksum, j.ref, e.partN, e.partSum, got)
				return nil
			}
		}
		var err error
		if out, err = p.cfg.Sealer.Seal(out, string(e.tenant), p.sealedAD(e), page); err != nil {
			ferr = fmt.Errorf("%w: offload of %v: sealing: %w", ErrCopy, j.ref, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: offload of %v: %w", ErrCopy, j.ref, err)
	}
	if ferr != nil {
		return nil, ferr
	}
	e.sealed = true
	if f := p.cfg.Faults; f != nil && f.SealedCopy != nil {
		f.SealedCopy(j.ref, out)
	}
	return out, nil
}

// openIn is restoreEntry for a direct copy (sealsDirect): AES-GCM opens
// the copy straight into page idx, and one checksum over the page stands
// for both the host-side and the device-side check (they are the same
// bytes). A copy that fails its tag leaves the page cleared (GCM zeroes
// what it wrote) and unread; the restore then releases it.
func (p *Pool) openIn(e *hostEntry, idx uint32, a hostAccess) error {
	var ferr error
	err := a.Access(p.pageOff(idx), int64(e.rawLen), func(page []byte) error {
		plain, err := p.cfg.Sealer.Open(page[:0], string(e.tenant), p.sealedAD(e), e.data)
		switch {
		case err != nil:
			// Damaged at rest, or its tenant erased: a miss.
			ferr = fmt.Errorf("%w: restore of request %d into page %d: %w", ErrSealOpen, e.req, idx, err)
		case len(plain) != e.rawLen || &plain[0] != &page[0]:
			// Not a page's worth: opened into a buffer of its own, if any.
			if len(plain) > 0 && &plain[0] != &page[0] {
				p.dropHost("unsealing staging", plain)
			}
			ferr = fmt.Errorf("%w: %w: %w: restore of request %d into page %d: host copy opens to %d bytes, not %d",
				ErrIsolation, ErrChecksum, errBadCopy, e.req, idx, len(plain), e.rawLen)
		default:
			if got := p.hostChecksum(page, e.slots); got != e.sum {
				// The bytes GCM authenticated were bad when sealed: the
				// copy's fault, and the page goes back to the free list.
				ferr = fmt.Errorf("%w: %w: %w: restore of request %d into page %d: host copy taken as %016x, now %016x",
					ErrIsolation, ErrChecksum, errBadCopy, e.req, idx, e.sum, got)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: restore into page %d: %w", ErrCopy, idx, err)
	}
	return ferr
}

// sealOverhead is kvseal's (header and tag), to size the sealed buffer.
const (
	sealHeader   = 1 + 8 + 12
	sealTag      = 16
	sealOverhead = sealHeader + sealTag
)

// inPlaceSealer seals a buffer where it is (kvseal.Keyring.SealInPlace).
type inPlaceSealer interface {
	SealInPlace(buf []byte, tenant string, ad []byte) ([]byte, error)
}

// sealedAD is the identity a host copy is sealed to, besides its tenant
// and the model (which the Sealer binds): the entry's serial (never
// reused, so a copy cannot be replayed into another entry), the request,
// the device page and generation it was copied from, and its shape and
// checksums. Every field is set before the copy starts and never changes.
func (p *Pool) sealedAD(e *hostEntry) []byte {
	b := make([]byte, 0, 96)
	b = append(b, "kvcache host copy v1"...)
	for _, v := range []uint64{e.serial, uint64(e.req), uint64(e.origin.Index), e.origin.Gen,
		uint64(e.slots), uint64(e.rawLen), uint64(e.partN), e.partSum} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	if e.compressed {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return b
}

// scrubHost reports whether host buffers that held page bytes are zeroed
// before they are let go: ZeroOnRelease (or Poison) covers every tier, not
// only device pages.
func (p *Pool) scrubHost() bool { return p.cfg.ZeroOnRelease || p.cfg.Poison }

// dropHost lets go of b, a host buffer that held page bytes, zeroing all
// of its capacity first when scrubbing is on (a compressor's output may
// hold bytes past its length).
func (p *Pool) dropHost(what string, b []byte) {
	if cap(b) == 0 {
		return
	}
	if p.scrubHost() {
		clear(b[:cap(b)])
	}
	if f := p.cfg.Faults; f != nil && f.DroppedHost != nil {
		f.DroppedHost(what, b[:cap(b)])
	}
}

// complete consumes a copy's result. It is the only place an offload
// becomes visible, and it refuses a completion whose (page, generation) no
// longer matches: such a result belongs to an allocation that is over.
func (p *Pool) complete(j *copyJob, data []byte, err error) {
	p.mu.Lock()
	notify := p.onCopy
	defer func() {
		p.mu.Unlock()
		if notify != nil {
			notify()
		}
	}()
	h, e := p.host, j.e
	m := &p.pages[j.ref.Index]
	if m.gen != j.ref.Gen {
		p.st.staleCompletions++
		if err == nil {
			err = fmt.Errorf("%w: completion of offload of %v arrived for gen %d", ErrStaleRef, j.ref, m.gen)
		}
	} else {
		if errors.Is(err, ErrChecksum) {
			p.st.checksum++
			p.isolationLocked("offload source checksum", m.owner, j.ref.Index, j.ref.Gen)
			p.quarantineLocked(j.ref.Index)
		}
		p.dropLeaseLocked(j.ref.Index, LeaseCopy)
	}
	e.finished = true
	if err != nil {
		if errors.Is(err, ErrCopy) {
			p.st.copyFails++
		}
		e.err = err
		p.dropHost("host copy", data)
		h.uncharge(e)
	} else if e.gone {
		p.dropHost("host copy", data)
		h.uncharge(e)
	} else {
		e.data = data
		h.account(e.tid, 0, int64(len(data))-e.charged)
		e.charged = int64(len(data))
		p.st.offloaded += int64(e.rawLen)
		p.st.stored += int64(len(data))
	}
	// A page freed by the lease drop is scrubbed before a waiter wakes.
	p.issueScrubLocked()
	close(e.done)
	if ps := e.swap; ps != nil {
		if ps.left--; ps.left == 0 {
			close(ps.done)
		}
	}
}

// OnCopyDone registers f, called on a copy worker after each host-tier
// copy completes (an offload, a swap-out page). It must not block: the
// engine uses it to wake its scheduler, which then polls PendingSwap.Ready
// and HostPage.Ready instead of waiting on a copy.
func (p *Pool) OnCopyDone(f func()) {
	p.mu.Lock()
	p.onCopy = f
	p.mu.Unlock()
}

func (h *hostTier) uncharge(e *hostEntry) {
	if e.charged != 0 {
		h.account(e.tid, -1, -e.charged)
		e.charged = 0
		h.p.unrefTenantLocked(e.tid)
	}
	if e.readers > 0 {
		// A restore is still copying from it: scrubbing (or dropping) it
		// now would hand the restore zeros. The last one's completion
		// does it (completeRestoreLocked).
		e.dropLater = true
		return
	}
	h.p.dropHost("host copy", e.data)
	e.data = nil
}

// hostCharge is what a copy of slots slots is charged before it is made:
// the most it can take (compression never stores more than the raw page;
// sealing adds its header and tag), so the tier never goes over capacity.
func (p *Pool) hostCharge(slots int) int64 {
	n := int64(p.packedLen(slots))
	if p.cfg.Sealer != nil {
		n += sealOverhead
	}
	return n
}

// HostCopyBytes is what a host copy of one full page takes at most.
func (p *Pool) HostCopyBytes() int64 { return p.hostCharge(p.geo.PageSize) }

func (p *Pool) packedLen(slots int) int {
	return p.geo.Runs() * slots * p.geo.RowBytes()
}

func (p *Pool) downloadPacked(buf []byte, idx uint32, slots int) error {
	off := p.pageOff(idx)
	if slots == p.geo.PageSize {
		return p.arena.Download(buf, off)
	}
	run := int64(p.geo.PageSize * p.geo.RowBytes())
	n := slots * p.geo.RowBytes()
	for r := range p.geo.Runs() {
		if err := p.arena.Download(buf[r*n:(r+1)*n], off+int64(r)*run); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pool) uploadPacked(idx uint32, slots int, buf []byte) error {
	off := p.pageOff(idx)
	if slots == p.geo.PageSize {
		return p.arena.Upload(off, buf)
	}
	run := int64(p.geo.PageSize * p.geo.RowBytes())
	n := slots * p.geo.RowBytes()
	for r := range p.geo.Runs() {
		if err := p.arena.Upload(off+int64(r)*run, buf[r*n:(r+1)*n]); err != nil {
			return err
		}
	}
	return nil
}

// startOffloadLocked charges the host tier and takes a copy lease for entry
// i of a page with slots written slots.
func (p *Pool) startOffloadLocked(ref PageRef, slots int, req RequestID) (*copyJob, error) {
	h := p.host
	m := &p.pages[ref.Index]
	raw := p.packedLen(slots)
	if h.used+p.hostCharge(slots) > h.capacity {
		return nil, fmt.Errorf("%w: %d bytes needed, %d of %d used", ErrHostTierFull, p.hostCharge(slots), h.used, h.capacity)
	}
	h.serial++
	e := &hostEntry{tid: m.tenant, tenant: p.tenantName(m.tenant), req: req, serial: h.serial, origin: ref,
		slots: slots, rawLen: raw, charged: int64(raw), done: make(chan struct{})}
	p.refTenantLocked(m.tenant) // dropped when the copy is uncharged
	if x := &p.ext[ref.Index]; !m.sealed && x.partN > 0 {
		e.partN, e.partSum = int(x.partN), x.partSum
	}
	e.charged = p.hostCharge(slots)
	h.account(m.tenant, 1, e.charged)
	p.takeLeaseLocked(ref.Index, LeaseCopy)
	return &copyJob{ref: ref, sealed: m.sealed, sealedSum: p.ext[ref.Index].sum, e: e}, nil
}

// restoreEntry copies e back into page idx and verifies the checksum on the
// device before anyone can read the page.
func (p *Pool) restoreEntry(e *hostEntry, idx uint32) error {
	if a, ok := p.arena.(hostAccess); ok && e.sealed && !e.compressed && p.sealsDirect(e) {
		return p.openIn(e, idx, a)
	}
	raw, staging, err := p.decodeEntry(e, fmt.Sprintf("restore of request %d into page %d", e.req, idx))
	if err != nil {
		return err
	}
	if staging != "" {
		// The decoded page is staging: it goes once uploaded.
		defer func() {
			p.dropHost(staging, raw)
			if staging == "unsealing staging" {
				p.host.unstage(raw)
			}
		}()
	}
	if err := p.uploadPacked(idx, e.slots, raw); err != nil {
		return fmt.Errorf("%w: restore into page %d: %w", ErrCopy, idx, err)
	}
	got, err := p.deviceChecksum(idx, e.slots)
	if err != nil {
		return fmt.Errorf("%w: restore into page %d: %w", ErrCopy, idx, err)
	}
	if got != e.sum {
		return fmt.Errorf("%w: %w: restore of request %d into page %d: offloaded as %016x, restored %016x",
			ErrIsolation, ErrChecksum, e.req, idx, e.sum, got)
	}
	return nil
}

// decodeEntry opens and decompresses e's copy into the page's packed
// bytes and checks them against the checksum the copy was taken with.
// staging names the buffer raw is, for dropHost; "" when raw is e.data.
func (p *Pool) decodeEntry(e *hostEntry, what string) (raw []byte, staging string, err error) {
	data := e.data
	if e.sealed {
		plain, err := p.cfg.Sealer.Open(p.host.stage(len(data)), string(e.tenant), p.sealedAD(e), data)
		if err != nil {
			// Damaged at rest, or its tenant erased: a miss. Nothing was
			// uploaded, so the page it was meant for is clean.
			return nil, "", fmt.Errorf("%w: %s: %w", ErrSealOpen, what, err)
		}
		data, staging = plain, "unsealing staging"
	}
	raw = data
	if e.compressed {
		switch p.host.comp {
		case "s2":
			raw, err = s2.Decode(nil, data)
		case "zstd":
			raw, err = p.host.zdec.DecodeAll(data, make([]byte, 0, e.rawLen))
		}
		if staging != "" {
			p.dropHost(staging, data)
			p.host.unstage(data)
		}
		staging = "decompression staging"
	}
	fail := func(err error) ([]byte, string, error) {
		if staging != "" {
			p.dropHost(staging, raw)
		}
		return nil, "", err
	}
	if err != nil || len(raw) != e.rawLen {
		return fail(fmt.Errorf("%w: %w: %w: %s: host copy does not decompress to %d bytes (%v)",
			ErrIsolation, ErrChecksum, errBadCopy, what, e.rawLen, err))
	}
	// The copy is checked in host memory first: a copy that went bad in
	// transit or at rest is the copy's fault, not the device page's, which
	// then goes back to the free list instead of quarantine.
	if got := p.hostChecksum(raw, e.slots); got != e.sum {
		return fail(fmt.Errorf("%w: %w: %w: %s: host copy taken as %016x, now %016x",
			ErrIsolation, ErrChecksum, errBadCopy, what, e.sum, got))
	}
	return raw, staging, nil
}

// HostPage is an asynchronous offload of one sealed page.
type HostPage struct {
	p *Pool
	e *hostEntry
}

// Offload copies a sealed page to the host tier on a worker goroutine. The
// page holds a copy lease until the copy completes, so its owner may release
// it meanwhile without the page being reused under the copy. Wait for the
// result before Restore.
func (p *Pool) Offload(ref PageRef, tenant Tenant) (*HostPage, error) {
	return p.offload(ref, tenant, false)
}

// OffloadRetained is Offload for a page that the caller keeps alive with a
// prefix lease of its own (Retain): the prefix cache spilling an entry to
// the host tier. Unlike Offload it also accepts a page whose writer has
// released it (releasing, alive only through prefix leases); the page must
// still be sealed, and its data is verified against the sealed checksum as
// it is copied. The caller may drop its prefix lease once Wait returns (or
// at once: the copy lease keeps the page until the copy completes).
func (p *Pool) OffloadRetained(ref PageRef, tenant Tenant) (*HostPage, error) {
	return p.offload(ref, tenant, true)
}

func (p *Pool) offload(ref PageRef, tenant Tenant, retained bool) (*HostPage, error) {
	if p.host == nil {
		return nil, ErrNoHostTier
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if err := p.checkRefLocked(ref); err != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("kvcache: offload: %w", err)
	}
	m := &p.pages[ref.Index]
	if tid, ok := p.tenants[tenant]; !ok || tid != m.tenant {
		p.isolationLocked("cross-tenant offload", 0, ref.Index, ref.Gen)
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %w: offload of %v for tenant %q", ErrIsolation, ErrForeignPage, ref, tenant)
	}
	switch m.state {
	case PageSealed:
	case PageReleasing:
		if retained && m.sealed && p.ext[ref.Index].leases[LeasePrefix] > 0 {
			break
		}
		p.mu.Unlock()
		return nil, fmt.Errorf("kvcache: offload of %v: %w", ref, ErrReleasing)
	case PageQuarantined:
		p.mu.Unlock()
		return nil, fmt.Errorf("kvcache: offload of %v: %w", ref, ErrQuarantined)
	default:
		err := fmt.Errorf("kvcache: offload of %v (%s): %w", ref, m.state, ErrNotSealed)
		p.mu.Unlock()
		return nil, err
	}
	j, err := p.startOffloadLocked(ref, p.geo.PageSize, m.owner)
	p.mu.Unlock() // err was formatted under the lock
	if err != nil {
		return nil, fmt.Errorf("kvcache: offload of %v: %w", ref, err)
	}
	p.host.submit(j)
	return &HostPage{p: p, e: j.e}, nil
}

// Wait blocks until the copy is done and returns its error.
func (h *HostPage) Wait() error {
	<-h.e.done
	return h.e.err
}

// Ready reports, without blocking, whether the copy has completed (Err
// then says how).
func (h *HostPage) Ready() bool {
	select {
	case <-h.e.done:
		return true
	default:
		return false
	}
}

// Err is the copy's error once Ready; ErrInFlight before.
func (h *HostPage) Err() error {
	if !h.Ready() {
		return ErrInFlight
	}
	return h.e.err
}

// Discard frees the host copy (after the copy completes, if it is in flight).
func (h *HostPage) Discard() { h.p.discard(h.e) }

func (p *Pool) discard(e *hostEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.gone {
		return
	}
	e.gone = true
	if e.finished {
		p.host.uncharge(e)
	}
}

// Restore copies an offloaded page back into a fresh page appended to t
// (at a page boundary of a fully written table of the same tenant),
// verifying its checksum on the device before t can read it. With no free
// page it returns ErrNoPages and allocates nothing. It never waits for the
// offload: while the copy is in flight it returns ErrInFlight, allocating
// nothing, and the caller tries again later (HostPage.Ready).
func (p *Pool) Restore(h *HostPage, t *PageTable) (PageRef, error) {
	if err := h.Err(); err != nil {
		return PageRef{}, err
	}
	if err := t.usable("restore"); err != nil {
		return PageRef{}, err
	}
	ps := p.geo.PageSize
	if t.written != t.Reserved() || t.written%ps != 0 {
		return PageRef{}, fmt.Errorf("%w: restore into request %d needs a fully written table at a page boundary (%d written, %d reserved)",
			ErrOutOfRange, t.req, t.written, t.Reserved())
	}
	refs, err := p.restoreInto(t, []*hostEntry{h.e}, ps)
	if err != nil {
		return PageRef{}, err
	}
	t.refs = append(t.refs, refs[0])
	t.shared = append(t.shared, false)
	t.written += ps
	return refs[0], nil
}

// restoreInto allocates len(es) pages for t, all or none, restores the
// entries into them and verifies them. On failure every page is released,
// or quarantined if its content failed the checksum.
func (p *Pool) restoreInto(t *PageTable, es []*hostEntry, written int) ([]PageRef, error) {
	refs, err := p.startRestore(t, es, nil)
	if err != nil {
		return nil, err
	}
	errs, err := p.copyIn(es, refs)
	p.mu.Lock()
	defer p.unlock()
	p.completeRestoreLocked(t.req, es, refs, written, errs, err, false)
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// startRestore checks the entries and allocates their pages for t, all or
// none, each under a copy lease; nobody can read them (they are in no
// table) until completeRestoreLocked. started, if set, runs under the same
// lock once the pages are allocated.
func (p *Pool) startRestore(t *PageTable, es []*hostEntry, started func()) ([]PageRef, error) {
	if f := p.cfg.Faults; f != nil && f.FailAlloc != nil && f.FailAlloc() {
		return nil, fmt.Errorf("%w: restore for request %d: injected allocation failure", ErrNoPages, t.req)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	for _, e := range es {
		switch {
		case e.gone || !e.finished || e.err != nil:
			return nil, fmt.Errorf("kvcache: restore for request %d: host copy discarded or not complete", t.req)
		case e.tid != t.tid:
			p.isolationLocked("cross-tenant restore", t.req, 0, 0)
			// The other tenant goes to the log (isolationLocked), never
			// into an error a request is given.
			return nil, fmt.Errorf("%w: %w: restore into request %d of tenant %q: the host page belongs to another tenant",
				ErrIsolation, ErrForeignPage, t.req, t.tenant)
		}
	}
	if !p.ensureFreeLocked(len(es)) {
		return nil, fmt.Errorf("%w: restore for request %d needs %d pages, %d of %d free",
			ErrNoPages, t.req, len(es), len(p.free), len(p.pages))
	}
	refs := make([]PageRef, len(es))
	for i, e := range es {
		refs[i] = p.allocLocked(t.req, t.tid)
		p.takeLeaseLocked(refs[i].Index, LeaseCopy)
		e.readers++ // until completeRestoreLocked
	}
	if started != nil {
		started()
	}
	return refs, nil
}

// copyIn uploads and verifies each entry into its page, without the pool
// lock: the pages are leased and in no table. A restore of many pages (a
// swap-in) is split into contiguous runs over restoreWorkers goroutines,
// the caller's one of them: opening a sealed copy is AES-GCM, a few GB/s
// a core, which one goroutine would make the bound of every swap-in. Once
// an entry fails, no run starts another. It returns each entry's error
// (nil: restored, or not tried) and the first of them.
func (p *Pool) copyIn(es []*hostEntry, refs []PageRef) ([]error, error) {
	errs := make([]error, len(es))
	var failed atomic.Bool
	run := func(lo, hi int) {
		for i := lo; i < hi && !failed.Load(); i++ {
			if f := p.cfg.Faults; f != nil && f.HoldCopy != nil {
				f.HoldCopy(refs[i])
			}
			if err := p.restoreEntry(es[i], refs[i].Index); err != nil {
				errs[i] = err
				failed.Store(true)
			}
		}
	}
	if n := restoreWorkers(len(es)); n > 1 && !p.host.oneRestorer {
		chunk := (len(es) + n - 1) / n
		var wg sync.WaitGroup
		for lo := chunk; lo < len(es); lo += chunk {
			wg.Go(func() { run(lo, min(len(es), lo+chunk)) })
		}
		run(0, chunk)
		wg.Wait()
	} else {
		run(0, len(es))
	}
	for _, err := range errs {
		if err != nil {
			return errs, err
		}
	}
	return errs, nil
}

// restoreWorkers is how many goroutines restore a run of pages: one per
// minRestoreRun pages, at most the host tier's worker count (up to 4, the
// cores Go may use).
func restoreWorkers(pages int) int {
	return max(1, min(4, runtime.GOMAXPROCS(0), pages/minRestoreRun))
}

// minRestoreRun is the fewest pages worth a goroutine of their own.
const minRestoreRun = 4

// completeRestoreLocked drops the restore's copy leases. On failure (err,
// the first of errs, by entry; or when the restore was cancelled) every
// page is released, one that failed its checksum quarantined unless the
// host copy was the bad one; otherwise the pages take the written counts
// and checksums of their copies.
func (p *Pool) completeRestoreLocked(req RequestID, es []*hostEntry, refs []PageRef, written int, errs []error, err error, cancelled bool) {
	ps := p.geo.PageSize
	for _, e := range es {
		if e.readers--; e.readers == 0 && e.dropLater {
			p.dropHost("host copy", e.data) // discarded while it was read
			e.data, e.dropLater = nil, false
		}
	}
	for i, r := range refs {
		p.dropLeaseLocked(r.Index, LeaseCopy)
		if err != nil {
			var bad error // this page's own failure, if any
			if i < len(errs) {
				bad = errs[i]
			}
			if errors.Is(bad, ErrSealOpen) {
				p.st.sealFailures++
			}
			if errors.Is(bad, ErrChecksum) {
				p.st.checksum++
				p.isolationLocked("restore checksum", req, r.Index, r.Gen)
				if errors.Is(bad, errBadCopy) {
					p.releaseLocked(r.Index) // never written: the copy was bad
				} else {
					p.quarantineLocked(r.Index)
				}
			} else {
				p.releaseLocked(r.Index)
			}
			continue
		}
		m, x := &p.pages[r.Index], &p.ext[r.Index]
		m.written = uint16(min(ps, written-i*ps))
		if int(m.written) == ps {
			x.sum, m.sealed = es[i].sum, true
			p.setStateLocked(m, PageSealed)
		} else if es[i].partN > 0 {
			// The handoff checksum verified at copy-out comes back with the
			// page; the next handoff verifies it and extends it.
			x.partN, x.partSum = uint16(es[i].partN), es[i].partSum
		}
		p.st.restored += int64(es[i].rawLen)
		if cancelled {
			p.releaseLocked(r.Index)
		}
	}
}

// PendingRestore is a swap-in in flight (SwapInAsync): the pages are
// allocated and leased, the copies run on a worker, and the table gets the
// pages only in Finish, after every page was uploaded and verified on the
// device.
type PendingRestore struct {
	p       *Pool
	s       *Swapped
	t       *PageTable
	refs    []PageRef
	err     error // the copy's, set before done closes
	done    chan struct{}
	settled bool // completion ran, under p.mu
	ended   bool // Finish or Cancel ran, under p.mu
}

// Ready reports, without blocking, whether the restore copies completed.
func (pr *PendingRestore) Ready() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// Done is closed when the restore copies have completed.
func (pr *PendingRestore) Done() <-chan struct{} { return pr.done }

// SwapInAsync is SwapIn without waiting for the copies: it checks as SwapIn
// does, allocates every page or none (ErrNoPages, nothing started, s kept),
// and uploads and verifies them on a worker. t is held (ErrSwapping on any
// use) until Finish, once Ready, puts the pages into it, or Cancel.
func (p *Pool) SwapInAsync(s *Swapped, t *PageTable) (*PendingRestore, error) {
	if err := p.checkSwapIn(s, t); err != nil {
		return nil, err
	}
	refs, err := p.startRestore(t, s.entries, func() {
		// The table and the host copies are held from the allocation on.
		t.swapping, s.restoring = true, true
	})
	if err != nil {
		return nil, fmt.Errorf("kvcache: swap in of request %d: %w", t.req, err)
	}
	pr := &PendingRestore{p: p, s: s, t: t, refs: refs, done: make(chan struct{})}
	h := p.host
	h.sendMu.RLock()
	if h.stopped {
		h.sendMu.RUnlock()
		pr.complete(nil, fmt.Errorf("kvcache: swap in of request %d: %w", t.req, ErrClosed))
		return pr, nil
	}
	h.wg.Add(1)
	h.sendMu.RUnlock()
	go func() {
		defer h.wg.Done()
		pr.complete(p.copyIn(s.entries, refs))
	}()
	return pr, nil
}

func (pr *PendingRestore) complete(errs []error, err error) {
	p := pr.p
	p.mu.Lock()
	pr.err = err
	pr.settled = true
	p.completeRestoreLocked(pr.t.req, pr.s.entries, pr.refs, pr.s.written, errs, err, pr.ended)
	pr.s.restoring = false
	if pr.ended || pr.s.consumed {
		pr.s.discardLocked() // cancelled or discarded meanwhile
	}
	notify := p.onCopy
	p.issueScrubLocked() // before a waiter wakes
	close(pr.done)
	p.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// Finish puts the restored pages into the table (Ready must be true, else
// ErrInFlight) and consumes the swapped state. A copy that failed its
// checksum on the device returns ErrChecksum (its page quarantined, the
// others released, and the swapped state should be discarded); the table is
// usable again, and empty.
func (pr *PendingRestore) Finish() error {
	t := pr.t
	if !pr.Ready() {
		return fmt.Errorf("kvcache: swap in of request %d: %w", t.req, ErrInFlight)
	}
	p := pr.p
	p.mu.Lock()
	defer p.unlock()
	if pr.ended {
		return fmt.Errorf("%w: swap in of request %d already finished or cancelled", ErrDoubleRelease, t.req)
	}
	pr.ended = true
	t.swapping = false
	if pr.err != nil {
		return fmt.Errorf("kvcache: swap in of request %d: %w", t.req, pr.err)
	}
	if t.released {
		for _, r := range pr.refs {
			p.releaseLocked(r.Index)
		}
		pr.s.discardLocked()
		return fmt.Errorf("%w: swap in of request %d: table released while restoring", ErrDoubleRelease, t.req)
	}
	t.refs = pr.refs
	t.shared = make([]bool, len(pr.refs))
	t.written = pr.s.written
	pr.s.discardLocked()
	return nil
}

// Cancel abandons the restore, in flight or not; it never waits. The
// pages are released when their copies complete (at once if they have),
// and the swapped state is discarded. Idempotent; a no-op after Finish.
func (pr *PendingRestore) Cancel() {
	p := pr.p
	p.mu.Lock()
	defer p.unlock()
	if pr.ended {
		return
	}
	pr.ended = true
	pr.t.swapping = false
	if !pr.settled {
		return // complete releases the pages and discards s
	}
	if pr.err == nil {
		for _, r := range pr.refs {
			p.releaseLocked(r.Index)
		}
	}
	pr.s.discardLocked()
}

// Swapped is a sequence preempted to the host tier by SwapOut.
type Swapped struct {
	p        *Pool
	req      RequestID
	tenant   Tenant
	written  int
	entries  []*hostEntry
	consumed bool
	// restoring: a SwapInAsync is reading the entries (under p.mu). A
	// discard meanwhile is left to its completion.
	restoring bool
}

// Request is the request the swapped pages belong to.
func (s *Swapped) Request() RequestID { return s.req }

// Tenant is the swapped sequence's tenant.
func (s *Swapped) Tenant() Tenant { return s.tenant }

// Written is the number of tokens swapped out.
func (s *Swapped) Written() int { return s.written }

// Pages is the number of device pages SwapIn will need.
func (s *Swapped) Pages() int { return len(s.entries) }

// Discard frees the host copies. It is idempotent, and SwapIn calls it on
// success.
func (s *Swapped) Discard() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.discardLocked()
}

func (s *Swapped) discardLocked() {
	s.consumed = true
	if s.restoring {
		return // the restore's completion discards (PendingRestore.complete)
	}
	for _, e := range s.entries {
		if !e.gone {
			e.gone = true
			if e.finished {
				s.p.host.uncharge(e)
			}
		}
	}
}

// PendingSwap is a swap-out in flight (SwapOutAsync). Until Finish or
// Cancel it holds the table: every page keeps the copy lease its copy took,
// and the table refuses every read, write and reservation (ErrSwapping), so
// no page of it is read, written, released or reused before its copy has
// completed and been verified (invariant 5).
type PendingSwap struct {
	p     *Pool
	t     *PageTable
	s     *Swapped
	left  int           // copies not yet complete, under p.mu
	done  chan struct{} // closed when every copy has completed
	ended bool          // Finish or Cancel ran, under p.mu
}

// Request is the request being swapped out.
func (ps *PendingSwap) Request() RequestID { return ps.s.req }

// Table is the table being swapped out; Finish gives it back usable when a
// copy failed.
func (ps *PendingSwap) Table() *PageTable { return ps.t }

// Done is closed when every copy has completed (successfully or not).
func (ps *PendingSwap) Done() <-chan struct{} { return ps.done }

// Ready reports, without blocking, whether every copy has completed.
func (ps *PendingSwap) Ready() bool {
	select {
	case <-ps.done:
		return true
	default:
		return false
	}
}

// SwapOutAsync starts copying every written page of t to the host tier and
// returns at once: nothing waits for a copy. The host tier is charged for
// all pages or none (ErrHostTierFull, nothing started). The returned
// PendingSwap holds t until Finish (once Ready) or Cancel.
func (p *Pool) SwapOutAsync(t *PageTable) (*PendingSwap, error) {
	if p.host == nil {
		return nil, ErrNoHostTier
	}
	if err := p.ValidateTable(t); err != nil {
		return nil, err
	}
	if t.swapping {
		return nil, fmt.Errorf("kvcache: swap out of request %d: %w", t.req, ErrSwapping)
	}
	ps := p.geo.PageSize
	n := (t.written + ps - 1) / ps
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	need := int64(0)
	for i := range n {
		need += p.hostCharge(min(ps, t.written-i*ps))
	}
	if h := p.host; h.used+need > h.capacity {
		err := fmt.Errorf("kvcache: swap out of request %d: %w: %d bytes needed, %d of %d used",
			t.req, ErrHostTierFull, need, h.used, h.capacity)
		p.mu.Unlock()
		return nil, err
	}
	pend := &PendingSwap{p: p, t: t, left: n, done: make(chan struct{}),
		s: &Swapped{p: p, req: t.req, tenant: t.tenant, written: t.written, entries: make([]*hostEntry, n)}}
	jobs := make([]*copyJob, n)
	for i := range n {
		jobs[i], _ = p.startOffloadLocked(t.refs[i], min(ps, t.written-i*ps), t.req)
		jobs[i].e.swap = pend
		pend.s.entries[i] = jobs[i].e
	}
	t.swapping = true
	if n == 0 {
		close(pend.done)
	}
	p.mu.Unlock()

	for _, j := range jobs {
		p.host.submit(j)
	}
	return pend, nil
}

// Finish ends a completed swap-out (Ready must be true, else ErrInFlight).
// When every copy succeeded it releases the table (its pages free, their
// copy leases already dropped) and returns the host copies. Otherwise it
// discards the copies and gives the table back to the caller usable, with
// nothing released; a page whose sealed checksum no longer matched was
// quarantined as it was copied.
func (ps *PendingSwap) Finish() (*Swapped, error) {
	if !ps.Ready() {
		return nil, fmt.Errorf("kvcache: swap out of request %d: %w", ps.s.req, ErrInFlight)
	}
	p, t := ps.p, ps.t
	p.mu.Lock()
	if ps.ended {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: swap out of request %d already finished or cancelled", ErrDoubleRelease, ps.s.req)
	}
	ps.ended = true
	t.swapping = false
	var errs []error
	for _, e := range ps.s.entries {
		if e.err != nil {
			errs = append(errs, e.err)
		}
	}
	p.mu.Unlock()
	if len(errs) > 0 {
		ps.s.Discard()
		return nil, fmt.Errorf("kvcache: swap out of request %d: %w", t.req, errors.Join(errs...))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.released {
		// Someone released the table under the swap: nothing to hand back.
		ps.s.discardLocked()
		return nil, fmt.Errorf("%w: swap out of request %d: table released while swapping", ErrDoubleRelease, t.req)
	}
	t.released = true
	p.unrefTenantLocked(t.tid)
	err := p.releaseEntriesLocked(t, 0)
	t.refs, t.shared, t.written = nil, nil, 0
	if err != nil {
		return ps.s, fmt.Errorf("kvcache: swap out of request %d: releasing device pages: %w", t.req, err)
	}
	return ps.s, nil
}

// Cancel abandons the swap-out, in flight or not: the host copies are
// discarded (when their copies complete, if in flight) and the table is
// released. Pages under a copy stay leased, and so out of circulation,
// until their copy completes. Cancel is idempotent and a no-op after
// Finish; it never waits.
func (ps *PendingSwap) Cancel() error {
	p, t := ps.p, ps.t
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps.ended {
		return nil
	}
	ps.ended = true
	t.swapping = false
	ps.s.discardLocked()
	if t.released {
		return nil
	}
	t.released = true
	p.unrefTenantLocked(t.tid)
	err := p.releaseEntriesLocked(t, 0)
	t.refs, t.shared, t.written = nil, nil, 0
	if err != nil {
		return fmt.Errorf("kvcache: cancelling swap out of request %d: %w", t.req, err)
	}
	return nil
}

// SwapOut is SwapOutAsync waited for: it copies every written page of t to
// the host tier, waits for the copies, and then releases t (its device
// pages go through deferred release). On any failure nothing is released
// and t stays usable; a page whose sealed checksum no longer matches is
// quarantined. The engine's scheduler uses SwapOutAsync instead.
func (p *Pool) SwapOut(t *PageTable) (*Swapped, error) {
	ps, err := p.SwapOutAsync(t)
	if err != nil {
		return nil, err
	}
	<-ps.Done()
	return ps.Finish()
}

// SwapIn restores s into t, a fresh empty table of the same request and
// tenant. All pages are allocated or none (ErrNoPages, s kept for a retry);
// each is verified on the device (ErrChecksum; the page is quarantined and
// s should be discarded). On success s is consumed. The engine's scheduler
// uses SwapInAsync instead, which does the copies on a worker.
func (p *Pool) SwapIn(s *Swapped, t *PageTable) error {
	if err := p.checkSwapIn(s, t); err != nil {
		return err
	}
	refs, err := p.restoreInto(t, s.entries, s.written)
	if err != nil {
		return fmt.Errorf("kvcache: swap in of request %d: %w", t.req, err)
	}
	t.refs = refs
	t.shared = make([]bool, len(refs))
	t.written = s.written
	s.Discard()
	return nil
}

func (p *Pool) checkSwapIn(s *Swapped, t *PageTable) error {
	if err := t.usable("swap in"); err != nil {
		return err
	}
	if s == nil || s.p != p {
		return fmt.Errorf("%w: swap in for request %d: swapped state of another pool", ErrConfig, t.req)
	}
	p.mu.Lock()
	consumed, restoring := s.consumed, s.restoring
	p.mu.Unlock()
	if consumed {
		return fmt.Errorf("%w: swap in for request %d: swapped state already restored or discarded", ErrDoubleRelease, t.req)
	}
	if restoring {
		return fmt.Errorf("kvcache: swap in for request %d: %w", t.req, ErrInFlight)
	}
	if t.Reserved() != 0 {
		return fmt.Errorf("%w: swap in for request %d needs an empty table, it has %d pages", ErrOutOfRange, t.req, len(t.refs))
	}
	if s.req != t.req || s.tenant != t.tenant {
		p.mu.Lock()
		p.st.isolation++
		p.mu.Unlock()
		p.log.Error("kvcache isolation violation", "reason", "swap in of another request's pages",
			"request", uint64(t.req), "tenant", string(t.tenant), "swapped_request", uint64(s.req), "swapped_tenant", string(s.tenant))
		return fmt.Errorf("%w: %w: swap in for request %d (tenant %q): the swapped pages belong to another request",
			ErrIsolation, ErrForeignPage, t.req, t.tenant)
	}
	return nil
}
