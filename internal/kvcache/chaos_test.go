package kvcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tok is what the oracle expects at one position: the writer and the
// position it wrote at (a shared prefix page carries another request's
// tokens of the same tenant).
type tok struct {
	w   writer
	pos int
}

type cached struct {
	ref     PageRef
	content []tok
}

type tenantCache struct {
	mu      sync.Mutex
	entries []cached
}

type chaos struct {
	t       *testing.T
	p       *Pool
	tenants []Tenant
	caches  []*tenantCache
	nextReq atomic.Uint64
	leaseWG sync.WaitGroup

	copyCorrupted sync.Map // PageRef -> struct{}: CorruptCopy fired

	// budget caps injected corruptions: each quarantines a page for good,
	// and a soak must not quarantine the whole pool.
	budget          atomic.Int64
	pageCorruptions atomic.Int64 // CorruptPage injections
	detections      atomic.Int64 // checksum errors observed, one quarantine each
	copyCorruptions atomic.Int64 // corrupted copies that reached a SwapIn
	copyDetected    atomic.Int64
	reads           atomic.Int64
	swaps           atomic.Int64
	shares          atomic.Int64
	aborts          atomic.Int64
}

// TestChaos runs thousands of requests concurrently against one pool, with
// injected faults, and checks every read against an exact oracle.
// KVWARDEN_SOAK=1 runs it much longer.
func TestChaos(t *testing.T) {
	requests, workers := 8000, 32
	if os.Getenv("KVWARDEN_SOAK") != "" {
		requests = 200000
	}
	if testing.Short() {
		requests = 500
	}
	c := &chaos{t: t, tenants: []Tenant{"t0", "t1", "t2", "t3"}}
	c.budget.Store(120)
	faults := &Faults{
		FailCopy: func(PageRef) error {
			if rand.IntN(100) < 3 {
				return errors.New("injected copy failure")
			}
			return nil
		},
		CopyDelay: func(PageRef) time.Duration {
			if rand.IntN(100) < 5 {
				return time.Duration(rand.IntN(200)) * time.Microsecond
			}
			return 0
		},
		CorruptCopy: func(r PageRef) bool {
			// Only pages with a single possible copier, so the test knows
			// whose swap carries the corruption: a page with prefix leases
			// may be swapped by several sharers at once. Hooks run without
			// the pool lock, so Info is safe here.
			info, err := c.p.Info(r)
			if err != nil || info.Leases[LeasePrefix] > 0 {
				return false
			}
			if rand.IntN(100) < 3 && c.budget.Add(-1) >= 0 {
				c.copyCorrupted.Store(r, struct{}{})
				return true
			}
			return false
		},
		FailAlloc: func() bool { return rand.IntN(100) < 2 },
	}
	p, err := New(newCPUBackend(), Config{
		Geometry:      smallGeo(),
		Pages:         384,
		Poison:        true,
		HostTierBytes: 96 * smallGeo().PageBytes(),
		Compression:   []string{"none", "s2", "zstd"}[rand.IntN(3)],
		Faults:        faults,
		Logger:        quiet,
	})
	require.NoError(t, err)
	defer p.Close()
	c.p = p
	for range c.tenants {
		c.caches = append(c.caches, &tenantCache{})
	}

	start := time.Now()
	var wg sync.WaitGroup
	var left atomic.Int64
	left.Store(int64(requests))
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := c.request(); err != nil {
					errc <- err
					left.Store(0)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	c.leaseWG.Wait()
	for _, tc := range c.caches {
		for _, e := range tc.entries {
			require.NoError(t, p.Drop(e.ref, LeasePrefix))
		}
	}

	st := p.Stats()
	t.Logf("%d requests in %v (%s): %d reads checked, %d swaps, %d shares, %d aborts; %d page + %d copy corruptions injected; stats %+v",
		requests, time.Since(start).Round(time.Millisecond), p.cfg.Compression, c.reads.Load(), c.swaps.Load(), c.shares.Load(),
		c.aborts.Load(), c.pageCorruptions.Load(), c.copyCorruptions.Load(), st)
	require.Equal(t, st.Pages, st.Free+st.Quarantined, "every page is free or quarantined")
	require.Zero(t, st.Owned+st.Sealed+st.Releasing)
	require.Zero(t, st.StepLeases+st.CopyLeases+st.PrefixLeases, "no leases outstanding")
	require.Zero(t, st.HostTierUsed)
	require.Zero(t, st.HostEntries)
	require.Equal(t, c.pageCorruptions.Load(), c.detections.Load()-c.copyDetected.Load(), "every device corruption detected")
	require.Equal(t, c.copyCorruptions.Load(), c.copyDetected.Load(), "every corrupted copy detected")
	require.Equal(t, uint64(c.detections.Load()), st.ChecksumFailures)
	require.Equal(t, uint64(c.detections.Load()), st.IsolationViolations, "no isolation event beyond the injected ones")
	// A corrupted host copy is the copy's fault: the device page it was
	// meant for goes back to the free list. Only corrupted device pages
	// are quarantined.
	require.Equal(t, int(c.detections.Load()-c.copyDetected.Load()), st.Quarantined)
	require.Zero(t, st.StaleCompletions)
	require.Positive(t, st.DeferredFreed)
	checkConsistent(t, p)
	p.mu.Lock()
	for _, idx := range p.free {
		require.True(t, allNaN(pageFloats(p, idx)), "free page %d not poisoned", idx)
	}
	p.mu.Unlock()
}

// seq is one simulated request.
type seq struct {
	c         *chaos
	req       RequestID
	tenant    int
	tb        *PageTable
	oracle    []tok
	published map[PageRef]bool
	target    int
}

func (c *chaos) request() error {
	s := &seq{c: c, req: RequestID(c.nextReq.Add(1)), tenant: rand.IntN(len(c.tenants)), published: map[PageRef]bool{}}
	s.tb = c.p.NewTable(s.req, c.tenants[s.tenant])
	s.target = 1 + rand.IntN(40)
	err := s.run()
	if err != nil {
		return fmt.Errorf("request %d (tenant %d): %w", s.req, s.tenant, err)
	}
	return nil
}

func (s *seq) run() error {
	p := s.c.p
	if rand.IntN(2) == 0 {
		if err := s.share(); err != nil {
			return err
		}
	}
	for ops := 0; ops < 200 && s.tb.Written() < s.target; ops++ {
		var err error
		done := false
		switch r := rand.IntN(100); {
		case r < 60:
			done, err = s.step()
		case r < 68:
			err = s.publish()
		case r < 74:
			if err = s.tb.ReleaseUnwritten(); err == nil {
				err = s.tb.Handoff(s.tb.Written())
			}
		case r < 78:
			err = p.VerifyTable(s.tb)
		case r < 88:
			done, err = s.swap()
		case r < 90:
			done, err = s.corrupt()
		case r < 93:
			done, err = s.offloadAndAbort()
		case r < 95:
			s.c.aborts.Add(1)
			done = true
		default:
			err = s.readAll(true)
		}
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	if !s.tb.Released() {
		if err := s.tb.Release(); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	if err := s.tb.Release(); !errors.Is(err, ErrDoubleRelease) {
		return fmt.Errorf("second release returned %v", err)
	}
	return nil
}

func (s *seq) writer(pos int) writer {
	ref := s.tb.refs[pos/s.c.p.geo.PageSize]
	return writer{s.req, uint32(s.tenant), ref.Gen}
}

// step is one forward step: validate, lease, read everything written, write
// a chunk, advance, and drop the lease (sometimes later, like a GPU).
func (s *seq) step() (bool, error) {
	p, tb := s.c.p, s.tb
	chunk := min(1+rand.IntN(6), s.target-tb.Written())
	if err := tb.Reserve(tb.Written() + chunk); err != nil {
		if errors.Is(err, ErrNoPages) {
			if rand.IntN(3) == 0 {
				s.c.aborts.Add(1)
				return true, nil
			}
			time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
			return false, nil
		}
		return false, fmt.Errorf("reserve: %w", err)
	}
	if err := p.ValidateTable(tb); err != nil {
		return false, fmt.Errorf("validate: %w", err)
	}
	done, err := p.LeaseStep(tb)
	if err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	if err := s.readAll(rand.IntN(8) == 0); err != nil {
		return false, err
	}
	g := p.geo
	for pos := tb.Written(); pos < tb.Written()+chunk; pos++ {
		w := s.writer(pos)
		for l := range g.Layers {
			k, v := rows(g, w, pos, l)
			if err := tb.WriteKV(pos, l, k, v); err != nil {
				return false, fmt.Errorf("write %d: %w", pos, err)
			}
		}
		s.oracle = append(s.oracle, tok{w, pos})
	}
	if err := tb.Advance(chunk); err != nil {
		return false, fmt.Errorf("advance: %w", err)
	}
	if rand.IntN(4) == 0 {
		s.c.leaseWG.Go(func() {
			time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
			done()
		})
		if rand.IntN(4) == 0 { // abort while the "GPU" still runs
			s.c.aborts.Add(1)
			return true, nil
		}
	} else {
		done()
	}
	return false, nil
}

// readAll reads every written token, the way attention does (straight from
// the arena after validation) or through ReadKV, and compares exactly.
func (s *seq) readAll(viaReadKV bool) error {
	p, tb := s.c.p, s.tb
	g := p.geo
	if tb.Written() != len(s.oracle) {
		return fmt.Errorf("table has %d written, oracle %d", tb.Written(), len(s.oracle))
	}
	k, v := rowBufs(g)
	pages := tb.Pages()
	for pos, want := range s.oracle {
		for l := range g.Layers {
			if viaReadKV {
				if err := tb.ReadKV(pos, l, k, v); err != nil {
					return fmt.Errorf("read %d: %w", pos, err)
				}
			} else {
				page, slot := pages[pos/g.PageSize], pos%g.PageSize
				if err := p.rowIO(page, l, slot, k, v, false); err != nil {
					return fmt.Errorf("raw read %d: %w", pos, err)
				}
			}
			wk, wv := rows(g, want.w, want.pos, l)
			for j := range k {
				if k[j] != wk[j] || v != nil && v[j] != wv[j] {
					return fmt.Errorf("ISOLATION: request %d position %d layer %d elem %d: read K %v V %v, want K %v V %v (writer %+v)",
						s.req, pos, l, j, k, v, wk, wv, want.w)
				}
			}
		}
	}
	s.c.reads.Add(int64(len(s.oracle)))
	return nil
}

// share appends prefix pages of the tenant's cache to an empty table.
func (s *seq) share() error {
	tc := s.c.caches[s.tenant]
	tc.mu.Lock()
	var pick []cached
	if n := len(tc.entries); n > 0 {
		for range 1 + rand.IntN(2) {
			pick = append(pick, tc.entries[rand.IntN(n)])
		}
	}
	tc.mu.Unlock()
	for _, e := range pick {
		err := s.tb.AppendShared(e.ref)
		switch {
		case err == nil:
			s.oracle = append(s.oracle, e.content...)
			s.c.shares.Add(1)
		case errors.Is(err, ErrStaleRef), errors.Is(err, ErrReleasing):
			// Evicted between the lookup and the append.
		default:
			return fmt.Errorf("append shared %v: %w", e.ref, err)
		}
	}
	s.target = max(s.target, s.tb.Written()+1)
	return nil
}

// publish offers this table's full own pages to the tenant's prefix cache.
func (s *seq) publish() error {
	p, tb := s.c.p, s.tb
	ps := p.geo.PageSize
	tc := s.c.caches[s.tenant]
	for i := range tb.Written() / ps {
		ref := tb.refs[i]
		if tb.shared[i] || s.published[ref] {
			continue
		}
		if err := p.Retain(ref, s.c.tenants[s.tenant]); err != nil {
			return fmt.Errorf("retain %v: %w", ref, err)
		}
		s.published[ref] = true
		tc.mu.Lock()
		tc.entries = append(tc.entries, cached{ref, append([]tok(nil), s.oracle[i*ps:(i+1)*ps]...)})
		var evict []PageRef
		for len(tc.entries) > 12 {
			evict = append(evict, tc.entries[0].ref)
			tc.entries = tc.entries[1:]
		}
		tc.mu.Unlock()
		for _, r := range evict {
			if err := p.Drop(r, LeasePrefix); err != nil {
				return fmt.Errorf("evict %v: %w", r, err)
			}
		}
	}
	return nil
}

// swap preempts the sequence to the host tier and brings it back.
func (s *seq) swap() (bool, error) {
	p := s.c.p
	refs := s.tb.Refs()
	sw, err := p.SwapOut(s.tb)
	corrupted := false
	for _, r := range refs {
		if _, ok := s.c.copyCorrupted.LoadAndDelete(r); ok {
			corrupted = true
		}
	}
	switch {
	case errors.Is(err, ErrCopy), errors.Is(err, ErrHostTierFull):
		if s.tb.Released() {
			return false, fmt.Errorf("failed swap out released the table: %w", err)
		}
		return false, s.readAll(false)
	case err != nil:
		return false, fmt.Errorf("swap out: %w", err)
	}
	s.c.swaps.Add(1)
	if corrupted {
		s.c.copyCorruptions.Add(1)
	}
	if rand.IntN(10) == 0 && !corrupted {
		sw.Discard() // dropped while preempted
		s.c.aborts.Add(1)
		return true, nil
	}
	time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
	deadline := time.Now().Add(20 * time.Second)
	for {
		tb := p.NewTable(s.req, s.c.tenants[s.tenant])
		err := p.SwapIn(sw, tb)
		switch {
		case err == nil && corrupted:
			return false, errors.New("corrupted host copy was restored without error")
		case err == nil:
			s.tb, s.published = tb, map[PageRef]bool{}
			return false, s.readAll(rand.IntN(2) == 0)
		case errors.Is(err, ErrChecksum):
			if !corrupted {
				return false, fmt.Errorf("swap in failed a checksum nobody corrupted: %w", err)
			}
			s.c.copyDetected.Add(1)
			s.c.detections.Add(1)
			sw.Discard()
			s.tb = tb
			return true, nil
		case errors.Is(err, ErrNoPages):
			if !corrupted && rand.IntN(4) == 0 {
				sw.Discard()
				s.tb = tb
				s.c.aborts.Add(1)
				return true, nil
			}
			if time.Now().After(deadline) {
				return false, fmt.Errorf("swap in starved: %w", err)
			}
			time.Sleep(50 * time.Microsecond)
		default:
			return false, fmt.Errorf("swap in: %w", err)
		}
	}
}

// corrupt flips a byte of an unshared sealed page and requires the next
// check, by one of three paths, to catch it.
func (s *seq) corrupt() (bool, error) {
	p, tb := s.c.p, s.tb
	ps := p.geo.PageSize
	var cand []int
	for i := range tb.Written() / ps {
		if !tb.shared[i] && !s.published[tb.refs[i]] {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 || s.c.budget.Add(-1) < 0 {
		return false, nil
	}
	ref := tb.refs[cand[rand.IntN(len(cand))]]
	if err := p.CorruptPage(ref.Index); err != nil {
		return false, fmt.Errorf("corrupt: %w", err)
	}
	s.c.pageCorruptions.Add(1)
	var err error
	switch rand.IntN(3) {
	case 0:
		err = p.VerifyTable(tb)
	case 1:
		if err = tb.ReleaseUnwritten(); err == nil {
			err = tb.Handoff(tb.Written())
		}
	case 2:
		_, err = p.SwapOut(tb)
		for _, r := range tb.refs {
			s.c.copyCorrupted.Delete(r)
		}
		if (errors.Is(err, ErrCopy) || errors.Is(err, ErrHostTierFull)) && !errors.Is(err, ErrChecksum) {
			// A copy failure or a full host tier came first; the page is still there.
			err = p.VerifyTable(tb)
		}
	}
	if !errors.Is(err, ErrChecksum) || !errors.Is(err, ErrIsolation) {
		return false, fmt.Errorf("corruption of %v not detected: %v", ref, err)
	}
	s.c.detections.Add(1)
	s.c.aborts.Add(1)
	return true, nil
}

// offloadAndAbort starts a slow page offload and aborts the request while
// the copy may still be running: the copy lease must hold the page.
func (s *seq) offloadAndAbort() (bool, error) {
	p, tb := s.c.p, s.tb
	ps := p.geo.PageSize
	if tb.Written() < ps || tb.shared[0] {
		return false, nil
	}
	ref := tb.refs[0]
	content := append([]tok(nil), s.oracle[:ps]...)
	h, err := p.Offload(ref, s.c.tenants[s.tenant])
	if errors.Is(err, ErrHostTierFull) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("offload: %w", err)
	}
	if err := tb.Release(); err != nil {
		return false, err
	}
	s.c.aborts.Add(1)
	defer h.Discard()
	err = h.Wait()
	_, corrupted := s.c.copyCorrupted.LoadAndDelete(ref)
	if errors.Is(err, ErrCopy) {
		return true, nil
	}
	if err != nil {
		return true, fmt.Errorf("offload wait: %w", err)
	}
	if corrupted {
		s.c.copyCorruptions.Add(1)
	}
	// Restore it into a fresh table of the same tenant and read it back.
	for range 50 {
		nt := p.NewTable(RequestID(s.c.nextReq.Add(1)), s.c.tenants[s.tenant])
		_, err = p.Restore(h, nt)
		switch {
		case err == nil && corrupted:
			return true, errors.New("corrupted page copy restored without error")
		case err == nil:
			s.tb, s.oracle = nt, content
			return true, s.readAll(true)
		case errors.Is(err, ErrChecksum) && corrupted:
			s.c.copyDetected.Add(1)
			s.c.detections.Add(1)
			s.tb = nt
			return true, nil
		case errors.Is(err, ErrNoPages):
			time.Sleep(50 * time.Microsecond)
		default:
			return true, fmt.Errorf("restore: %w", err)
		}
	}
	if corrupted {
		return true, errors.New("could not restore a corrupted copy to detect it")
	}
	return true, nil
}
