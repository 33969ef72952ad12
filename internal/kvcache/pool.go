package kvcache

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/internal/device"
)

// RequestID identifies a request for the engine's whole lifetime. IDs come
// from the engine's monotonic 64-bit counter and are never reused, so a page
// or a completion that names an old request can never be mistaken for a new
// one. 0 is never valid.
type RequestID uint64

// Tenant scopes sharing: prefix pages and host-tier entries never cross it.
// It is bound by the embedding application or an authenticated key, never
// taken from a request body.
type Tenant string

// PageRef names one allocation of a page. Gen changes on every allocation,
// so a ref outliving its allocation is detectably stale.
type PageRef struct {
	Index uint32
	Gen   uint64
}

func (r PageRef) String() string { return fmt.Sprintf("page %d gen %d", r.Index, r.Gen) }

// PageState is where a page is in its life.
type PageState uint8

const (
	// PageFree pages are on the free list; their content is garbage (or
	// zeros/NaN after a scrub) and belongs to nobody.
	PageFree PageState = iota
	// PageOwned pages belong to one request, which may write unwritten slots.
	PageOwned
	// PageSealed pages are full (or were sealed at a handoff) and immutable;
	// they may be shared within their tenant.
	PageSealed
	// PageReleasing pages were released by their owner while leases were
	// outstanding; they free when the last lease drops.
	PageReleasing
	// PageQuarantined pages failed a check and never return to the free list.
	PageQuarantined
	// PageScrubbing pages were released (scrubbing on) and belong to
	// nobody; they join the free list once their batch's scrub is done
	// (scrub.go).
	PageScrubbing
	numStates
)

func (s PageState) String() string {
	switch s {
	case PageFree:
		return "free"
	case PageOwned:
		return "owned"
	case PageSealed:
		return "sealed"
	case PageReleasing:
		return "releasing"
	case PageQuarantined:
		return "quarantined"
	case PageScrubbing:
		return "scrubbing"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// LeaseKind is why something holds a page.
type LeaseKind uint8

const (
	// LeaseStep is held by a running forward step (on a GPU, until its
	// stream event completes).
	LeaseStep LeaseKind = iota
	// LeaseCopy is held by an offload or restore copy.
	LeaseCopy
	// LeasePrefix is held by a prefix-cache entry or by a table sharing the page.
	LeasePrefix
	numLeaseKinds
)

func (k LeaseKind) String() string {
	switch k {
	case LeaseStep:
		return "step"
	case LeaseCopy:
		return "copy"
	case LeasePrefix:
		return "prefix"
	}
	return fmt.Sprintf("lease(%d)", uint8(k))
}

// Config configures a Pool.
type Config struct {
	Geometry
	// Pages is the number of pages in the arena.
	Pages int
	// ZeroOnRelease scrubs a page with zeros before it returns to the free
	// list, and zeroes every host buffer that held page bytes before it is
	// let go: host-tier copies (swap and prefix spill, compressed or not)
	// when they are discarded, the staging buffers of compression and
	// decompression, and the backend's bounce buffers (CUDA) after each
	// copy. Poison does the same to host buffers (with zeros).
	ZeroOnRelease bool
	// Poison fills free pages (initially and on release) with NaN, so a read
	// of an unwritten slot shows up. It takes precedence over ZeroOnRelease.
	Poison bool
	// HostTierBytes sizes the host tier; 0 disables it.
	HostTierBytes int64
	// Compression of host-tier pages: "none", "s2" or "zstd"; "" means
	// DefaultCompression.
	Compression string
	// Sealer, when set, encrypts and authenticates every host-tier copy
	// (after compression) under its tenant's key, bound to the page's
	// identity and generation (sealedAD); nil leaves copies in the clear
	// (benchmarks, pool tests). The engine always sets one.
	Sealer Sealer
	// Faults injects failures for tests; nil in production.
	Faults *Faults
	// Logger receives one record per isolation event; nil means slog.Default().
	Logger *slog.Logger
}

// Faults are test hooks. Each may be nil. They are called from several
// goroutines at once (copy workers, request goroutines) and must be safe
// for concurrent use.
type Faults struct {
	// FailCopy makes an offload copy of ref fail with the returned error.
	FailCopy func(ref PageRef) error
	// CopyDelay stalls an offload copy of ref, widening race windows.
	CopyDelay func(ref PageRef) time.Duration
	// CorruptCopy flips a byte of the host copy of ref after its checksum
	// was taken, as a bad transfer would.
	CorruptCopy func(ref PageRef) bool
	// FailAlloc makes the next allocation fail as if the pool were empty.
	FailAlloc func() bool
	// HoldCopy runs on the copy worker before an offload copy of ref, and
	// before a restore copy into ref; a test blocks in it to keep the copy
	// in flight for as long as it needs, deterministically.
	HoldCopy func(ref PageRef)
	// DroppedHost runs with each host buffer that held page bytes as the
	// pool lets go of it (after scrubbing it, when scrubbing is on): what
	// names it ("host copy", "offload staging", "compression staging",
	// "compression output", "decompression staging"). It may run under the
	// pool's lock and must not call into the pool.
	DroppedHost func(what string, b []byte)
	// SealedCopy runs with each host copy of ref once it is sealed (and
	// compressed), before it is stored; a test reads it (it must be
	// ciphertext) or flips a byte of it (it must then fail its tag).
	SealedCopy func(ref PageRef, sealed []byte)
}

// Sealer encrypts and authenticates host-tier copies (kvseal.Keyring).
// Open of anything Seal did not produce for the same tenant and ad fails.
type Sealer interface {
	Seal(dst []byte, tenant string, ad, plain []byte) ([]byte, error)
	Open(dst []byte, tenant string, ad, sealed []byte) ([]byte, error)
}

// poisonWord is a quiet f32 NaN; poisonWordOf gives the 32-bit pattern
// that fills an arena of dtype d with quiet NaNs of its own width.
const poisonWord = 0x7fc00000

func poisonWordOf(d device.DType) uint32 {
	switch d {
	case device.F16, device.Q8_0, device.Q4_0:
		// For the block types every block starts at an even byte, so its
		// f16 scale reads as the NaN 0x7e00 and so do all its values.
		return 0x7e007e00
	case device.BF16:
		return 0x7fc07fc0
	}
	return poisonWord
}

// pageMeta is what ValidateTable reads for every page of every sequence
// before each step; it is kept to 24 bytes so 16k pages fit in L2. The rest
// of a page's record is in pageExt.
type pageMeta struct {
	gen     uint64
	owner   RequestID
	tenant  uint32
	written uint16
	state   PageState
	sealed  bool
}

type pageExt struct {
	leases   [numLeaseKinds]int32
	partN    uint16 // slots covered by partSum
	sum      uint64 // checksum of the whole page, valid when sealed
	partSum  uint64 // checksum of the first partN slots, taken at a handoff
	relStart int64  // ns since pool epoch when it entered releasing
}

func (x *pageExt) leased() bool {
	return x.leases[0]|x.leases[1]|x.leases[2] != 0
}

// Pool is the KV page pool. It is safe for concurrent use.
type Pool struct {
	geo       Geometry
	cfg       Config
	arena     device.Arena
	f32       []float32 // the arena as float32s when it is host memory
	pageBytes int64
	elemSize  int64
	log       *slog.Logger
	epoch     time.Time

	mu     sync.Mutex
	onCopy func() // OnCopyDone's callback, under mu
	pages  []pageMeta
	ext    []pageExt
	free   []uint32
	closed bool
	// Released pages waiting for their scrub (scrub.go): not issued yet,
	// and issued batches not seen done.
	dirty    []uint32
	inflight []scrubBatch
	// The tenant table: every tenant that something still holds (a live
	// table, a page, a host copy) has an ID; the last holder letting go
	// deletes it, so the table is bounded by what is held, not by how many
	// tenants ever came. IDs are never reused: a stale ID cannot alias
	// another tenant.
	tenants map[Tenant]uint32
	tids    map[uint32]*tenantRec
	nextTID uint32
	counts  [numStates]int
	leases  [numLeaseKinds]int
	st      counters

	host *hostTier
}

// New allocates an arena of cfg.Pages pages on b and returns a pool over it.
func New(b device.Backend, cfg Config) (*Pool, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrConfig)
	}
	cfg.Geometry = cfg.Geometry.withDefaults()
	if err := cfg.Geometry.validate(); err != nil {
		return nil, err
	}
	if cfg.Pages <= 0 || int64(cfg.Pages) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d pages", ErrConfig, cfg.Pages)
	}
	if cfg.HostTierBytes < 0 {
		return nil, fmt.Errorf("%w: host tier of %d bytes", ErrConfig, cfg.HostTierBytes)
	}
	comp, err := parseCompression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	cfg.Compression = comp
	pb := cfg.PageBytes()
	arena, err := b.NewArena(pb * int64(cfg.Pages))
	if err != nil {
		return nil, fmt.Errorf("kvcache: arena of %d pages x %d bytes on %s: %w", cfg.Pages, pb, b.Name(), err)
	}
	if s, ok := arena.(device.StagingScrubber); ok && (cfg.ZeroOnRelease || cfg.Poison) {
		s.SetScrubStaging(true) // host tier copies go through its staging buffers
	}
	p := &Pool{
		geo:       cfg.Geometry,
		cfg:       cfg,
		arena:     arena,
		pageBytes: pb,
		elemSize:  int64(cfg.DType.Size()),
		log:       cfg.Logger,
		epoch:     time.Now(),
		pages:     make([]pageMeta, cfg.Pages),
		ext:       make([]pageExt, cfg.Pages),
		free:      make([]uint32, cfg.Pages),
		tenants:   map[Tenant]uint32{"": 0},
		tids:      map[uint32]*tenantRec{0: {name: ""}},
		nextTID:   1,
		st:        counters{release: NewHistogram(ReleaseBuckets[:])},
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if fa, ok := arena.(interface{ Float32s() []float32 }); ok && cfg.DType == device.F32 {
		p.f32 = fa.Float32s()
	}
	// Pop order low-to-high keeps early allocations compact; it does not matter
	// for correctness.
	for i := range p.free {
		p.free[i] = uint32(cfg.Pages - 1 - i)
	}
	p.counts[PageFree] = cfg.Pages
	if cfg.Poison {
		if err := arena.Fill(0, arena.Len(), poisonWordOf(cfg.DType)); err != nil {
			_ = arena.Free()
			return nil, fmt.Errorf("kvcache: poisoning arena: %w", err)
		}
	}
	if cfg.HostTierBytes > 0 {
		h, err := newHostTier(p, cfg.HostTierBytes, comp)
		if err != nil {
			_ = arena.Free()
			return nil, err
		}
		p.host = h
	}
	return p, nil
}

// Arena is the device memory holding the pages.
func (p *Pool) Arena() device.Arena { return p.arena }

// Geometry is the page shape (with defaults applied).
func (p *Pool) Geometry() Geometry { return p.geo }

// Pages is the number of pages in the pool.
func (p *Pool) Pages() int { return len(p.pages) }

// CapacityTokens is what the whole pool can hold; the engine checks
// MaxContext against it at startup (invariant 1).
func (p *Pool) CapacityTokens() int { return len(p.pages) * p.geo.PageSize }

// FreePages is the number of pages an allocation can have now: those on
// the free list and those whose scrub is under way (an allocation waits
// for it).
func (p *Pool) FreePages() int {
	p.mu.Lock()
	defer p.unlock()
	return len(p.free) + p.counts[PageScrubbing]
}

// Closed reports whether Close has been called. The CPU forward pass checks
// it before touching the arena it reads directly.
func (p *Pool) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops the host-tier workers and frees the arena. Later calls return
// ErrClosed. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	// The arena is freed below: no scrub may still be writing it.
	p.settleLocked()
	p.mu.Unlock()
	if p.host != nil {
		p.host.close()
	}
	return p.arena.Free()
}

// NewTable starts an empty page table for req. A zero RequestID yields a
// table whose every call fails, rather than a table that could alias pages
// of an uninitialised owner.
func (p *Pool) NewTable(req RequestID, tenant Tenant) *PageTable {
	p.mu.Lock()
	defer p.mu.Unlock()
	tid, ok := p.holdTenantLocked(tenant)
	if !ok {
		return &PageTable{pool: p, req: req, tenant: tenant, released: true,
			bad: fmt.Errorf("%w: %d tenant IDs used up", ErrConfig, uint64(math.MaxUint32))}
	}
	return &PageTable{pool: p, req: req, tenant: tenant, tid: tid}
}

// tenantRec is one entry of the tenant table: the name and how many things
// hold its ID (live tables, non-free pages, host copies).
type tenantRec struct {
	name Tenant
	refs int
}

// holdTenantLocked returns t's ID, registering t if nothing holds it, and
// counts one more holder. It fails only when 2^32 IDs have been used.
func (p *Pool) holdTenantLocked(t Tenant) (uint32, bool) {
	if id, ok := p.tenants[t]; ok {
		p.tids[id].refs++
		return id, true
	}
	if p.nextTID == math.MaxUint32 {
		return 0, false
	}
	id := p.nextTID
	p.nextTID++
	p.tenants[t] = id
	p.tids[id] = &tenantRec{name: t, refs: 1}
	return id, true
}

// refTenantLocked counts one more holder of an ID something already holds.
func (p *Pool) refTenantLocked(id uint32) { p.tids[id].refs++ }

// unrefTenantLocked drops a holder; the last one deletes the tenant (the
// empty tenant, ID 0, stays).
func (p *Pool) unrefTenantLocked(id uint32) {
	rec := p.tids[id]
	if rec.refs--; rec.refs <= 0 && id != 0 {
		delete(p.tenants, rec.name)
		delete(p.tids, id)
	}
}

// tenantName is the name of a held tenant ID, for messages.
func (p *Pool) tenantName(id uint32) Tenant {
	if rec, ok := p.tids[id]; ok {
		return rec.name
	}
	return "?"
}

func (p *Pool) setStateLocked(m *pageMeta, s PageState) {
	p.counts[m.state]--
	p.counts[s]++
	m.state = s
}

func (p *Pool) pageOff(idx uint32) int64 { return int64(idx) * p.pageBytes }

// allocLocked pops a free page and gives it to req. The caller has checked
// that the free list is long enough.
func (p *Pool) allocLocked(req RequestID, tid uint32) PageRef {
	idx := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	m := &p.pages[idx]
	m.gen++
	m.owner, m.tenant = req, tid
	p.refTenantLocked(tid)
	m.written, m.sealed = 0, false
	x := &p.ext[idx]
	x.partN, x.partSum, x.sum = 0, 0, 0
	p.setStateLocked(m, PageOwned)
	p.st.allocs++
	return PageRef{Index: idx, Gen: m.gen}
}

// releaseLocked is the owner giving a page up: free now, or park it in
// releasing until its leases drop.
func (p *Pool) releaseLocked(idx uint32) {
	m, x := &p.pages[idx], &p.ext[idx]
	p.st.releases++
	if x.leased() {
		x.relStart = int64(time.Since(p.epoch))
		p.setStateLocked(m, PageReleasing)
		p.st.deferred++
		return
	}
	p.freeLocked(idx)
}

// freeLocked frees a page: onto the free list, or, when scrubbing is on,
// into PageScrubbing until its batch is scrubbed (scrub.go), so a page is
// never on the free list with the previous owner's data.
func (p *Pool) freeLocked(idx uint32) {
	m := &p.pages[idx]
	p.unrefTenantLocked(m.tenant)
	m.owner, m.tenant, m.written, m.sealed = 0, 0, 0, false
	p.ext[idx].partN = 0
	if p.scrubOn() {
		p.setStateLocked(m, PageScrubbing)
		p.dirty = append(p.dirty, idx)
		return
	}
	p.setStateLocked(m, PageFree)
	p.free = append(p.free, idx)
}

func (p *Pool) takeLeaseLocked(idx uint32, k LeaseKind) {
	p.ext[idx].leases[k]++
	p.leases[k]++
}

// dropLeaseLocked drops one lease and finishes a deferred release if it was
// the last one.
func (p *Pool) dropLeaseLocked(idx uint32, k LeaseKind) {
	m, x := &p.pages[idx], &p.ext[idx]
	x.leases[k]--
	p.leases[k]--
	if m.state == PageReleasing && !x.leased() {
		p.st.deferredFreed++
		p.st.release.Observe(time.Duration(int64(time.Since(p.epoch)) - x.relStart))
		p.freeLocked(idx)
	}
}

// quarantineLocked takes a page out of circulation for good. Leases on it
// can still be dropped; it simply never frees.
func (p *Pool) quarantineLocked(idx uint32) {
	m := &p.pages[idx]
	switch m.state {
	case PageQuarantined:
		return
	case PageReleasing:
		p.st.deferredQuarantined++
		p.st.release.Observe(time.Duration(int64(time.Since(p.epoch)) - p.ext[idx].relStart))
	case PageFree:
		p.free = slices.DeleteFunc(p.free, func(f uint32) bool { return f == idx })
	case PageScrubbing:
		// Off the dirty list; an issued batch skips it (finishScrubLocked).
		p.dirty = slices.DeleteFunc(p.dirty, func(f uint32) bool { return f == idx })
	}
	p.setStateLocked(m, PageQuarantined)
}

// isolationLocked counts and logs one isolation event (invariant 10).
func (p *Pool) isolationLocked(msg string, req RequestID, idx uint32, gen uint64) {
	p.st.isolation++
	m := &p.pages[idx]
	p.log.Error("kvcache isolation violation", "reason", msg, "request", uint64(req),
		"page", idx, "ref_gen", gen, "page_gen", m.gen, "page_owner", uint64(m.owner),
		"page_tenant", string(p.tenantName(m.tenant)), "state", m.state.String())
}

func (p *Pool) checkRefLocked(ref PageRef) error {
	if int(ref.Index) >= len(p.pages) {
		return fmt.Errorf("%w: page %d of a %d-page pool", ErrOutOfRange, ref.Index, len(p.pages))
	}
	if m := &p.pages[ref.Index]; m.gen != ref.Gen || m.state == PageFree || m.state == PageScrubbing {
		// A free page's allocation is over even before the next one bumps
		// the generation.
		return fmt.Errorf("%w: %v, page is at gen %d (%s)", ErrStaleRef, ref, m.gen, m.state)
	}
	return nil
}

// shareableLocked says whether a sealed page can gain a new prefix holder:
// sealed and alive, or released by its owner but kept alive by a prefix
// lease (the prefix cache outliving the request that wrote the page).
func shareable(m *pageMeta, x *pageExt) error {
	switch {
	case m.state == PageQuarantined:
		return ErrQuarantined
	case !m.sealed:
		return ErrNotSealed
	case m.state == PageSealed:
		return nil
	case m.state == PageReleasing && x.leases[LeasePrefix] > 0:
		return nil
	case m.state == PageReleasing:
		return ErrReleasing
	}
	return ErrNotSealed
}

// Retain takes a prefix lease on a sealed page of tenant for the prefix
// cache. The page stays readable by sharers after its owner releases it and
// frees when the last prefix lease is dropped with Drop.
func (p *Pool) Retain(ref PageRef, tenant Tenant) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.checkRefLocked(ref); err != nil {
		return fmt.Errorf("kvcache: retain: %w", err)
	}
	m := &p.pages[ref.Index]
	if tid, ok := p.tenants[tenant]; !ok || tid != m.tenant {
		p.isolationLocked("cross-tenant retain", 0, ref.Index, ref.Gen)
		return fmt.Errorf("%w: %w: retain of %v for tenant %q: page belongs to tenant %q",
			ErrIsolation, ErrForeignPage, ref, tenant, p.tenantName(m.tenant))
	}
	if err := shareable(m, &p.ext[ref.Index]); err != nil {
		return fmt.Errorf("kvcache: retain of %v (%s): %w", ref, m.state, err)
	}
	p.takeLeaseLocked(ref.Index, LeasePrefix)
	return nil
}

// Drop drops one lease of kind on ref (a prefix-cache eviction, or a lease
// taken by the engine). Dropping a lease that is not held is an error and
// changes nothing.
func (p *Pool) Drop(ref PageRef, kind LeaseKind) error {
	if kind >= numLeaseKinds {
		return fmt.Errorf("%w: lease kind %d", ErrOutOfRange, kind)
	}
	p.mu.Lock()
	defer p.unlock()
	if err := p.checkRefLocked(ref); err != nil {
		return fmt.Errorf("kvcache: drop %s lease: %w", kind, err)
	}
	if p.ext[ref.Index].leases[kind] <= 0 {
		return fmt.Errorf("%w: %w: no %s lease on %v", ErrDoubleRelease, ErrNoLease, kind, ref)
	}
	p.dropLeaseLocked(ref.Index, kind)
	return nil
}

// LeaseStep takes a step lease on every page of t for the duration of a
// forward step and returns the function that drops them. The function is
// idempotent; call it when the step's work is complete on the device (on a
// GPU: after its stream event), not when it was merely launched.
func (p *Pool) LeaseStep(t *PageTable) (func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if t.released {
		return nil, fmt.Errorf("kvcache: step lease for request %d: %w", t.req, ErrTableReleased)
	}
	for i, ref := range t.refs {
		if err := p.checkRefLocked(ref); err != nil {
			for _, r := range t.refs[:i] {
				p.dropLeaseLocked(r.Index, LeaseStep)
			}
			return nil, fmt.Errorf("%w: step lease for request %d: %w", ErrIsolation, t.req, err)
		}
		p.takeLeaseLocked(ref.Index, LeaseStep)
	}
	idx := make([]uint32, len(t.refs))
	for i, r := range t.refs {
		idx[i] = r.Index
	}
	done := false
	return func() {
		p.mu.Lock()
		defer p.unlock()
		if done {
			return
		}
		done = true
		// A leased page cannot be reallocated, so the indices still name
		// the generations the lease was taken on.
		for _, i := range idx {
			p.dropLeaseLocked(i, LeaseStep)
		}
	}, nil
}

// CorruptPage flips a byte of a checksummed slot of a page without
// updating its checksum: a sealed page, or the slots of a partial page that
// a handoff sealed. It is a test helper: handoff, step verification, seal
// and every copy out of the pool must catch it.
func (p *Pool) CorruptPage(index uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if int(index) >= len(p.pages) {
		return fmt.Errorf("%w: page %d of a %d-page pool", ErrOutOfRange, index, len(p.pages))
	}
	if !p.pages[index].sealed && p.ext[index].partN == 0 {
		return fmt.Errorf("kvcache: corrupt page %d: %w", index, ErrNotSealed)
	}
	// Slot 0 of the first V run (layer 0), or of the first K run of a
	// K-only page: written and checksummed in either case. The element's
	// top byte holds its sign and exponent, so the value read changes
	// visibly, not only its checksum.
	off := p.pageOff(index) + int64(p.geo.Planes()-1)*int64(p.geo.PageSize*p.geo.RowBytes()) + p.elemSize - 1
	var b [1]byte
	if err := p.arena.Download(b[:], off); err != nil {
		return err
	}
	b[0] ^= 0x5a
	return p.arena.Upload(off, b[:])
}

// PageInfo is a snapshot of one page's metadata.
type PageInfo struct {
	Ref     PageRef
	State   PageState
	Owner   RequestID
	Tenant  Tenant
	Written int
	Sealed  bool
	Leases  [3]int // indexed by LeaseKind
}

// Info returns the metadata of ref's page, or ErrStaleRef if ref's
// generation is over.
func (p *Pool) Info(ref PageRef) (PageInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkRefLocked(ref); err != nil {
		return PageInfo{}, err
	}
	m, x := &p.pages[ref.Index], &p.ext[ref.Index]
	return PageInfo{Ref: ref, State: m.state, Owner: m.owner, Tenant: p.tenantName(m.tenant),
		Written: int(m.written), Sealed: m.sealed,
		Leases: [3]int{int(x.leases[0]), int(x.leases[1]), int(x.leases[2])}}, nil
}
