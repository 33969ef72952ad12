package kvcache

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
)

func TestGeometry(t *testing.T) {
	for _, g := range []Geometry{
		smallGeo(),
		{PageSize: 16, Layers: 5, KVHeads: 4, HeadDim: 8, DType: device.F32},
		{PageSize: 1, Layers: 1, KVHeads: 1, HeadDim: 1, DType: device.F32},
		{PageSize: 16, Layers: 3, KVHeads: 2, HeadDim: 64, DType: device.F16},
		// K-only (latent attention): one plane per layer.
		{PageSize: 16, Layers: 5, KVHeads: 4, HeadDim: 8, DType: device.F32, KOnly: true},
		{PageSize: 1, Layers: 1, KVHeads: 1, HeadDim: 1, DType: device.F32, KOnly: true},
		{PageSize: 16, Layers: 3, KVHeads: 1, HeadDim: 576, DType: device.F16, KOnly: true},
	} {
		t.Run(fmt.Sprintf("%+v", g), func(t *testing.T) {
			planes := 2
			if g.KOnly {
				planes = 1
			}
			require.Equal(t, planes, g.Planes())
			require.Equal(t, g.Layers*planes, g.Runs())
			require.Equal(t, g.KVHeads*g.HeadDim, g.KVDim())
			require.Equal(t, int64(g.Layers*planes*g.KVDim()*g.DType.Size()), g.TokenBytes())
			require.Equal(t, int64(g.Layers*planes*g.PageSize*g.KVDim()*g.DType.Size()), g.PageBytes())
			require.Equal(t, g.TokenBytes()*int64(g.PageSize), g.PageBytes())
			// Every row of two pages is disjoint and together they tile both
			// pages: a K-only page holds its K rows and nothing else, and its
			// V offset is the K row itself, never another layer's or page's.
			seen := make([]bool, 2*g.PageElems())
			for page := uint32(0); page < 2; page++ {
				for l := range g.Layers {
					for s := range g.PageSize {
						if g.KOnly {
							require.Equal(t, g.KOffset(page, l, s), g.VOffset(page, l, s))
						}
						for _, off := range []int{g.KOffset(page, l, s), g.VOffset(page, l, s)}[:planes] {
							for j := range g.KVDim() {
								require.False(t, seen[off+j], "element %d covered twice", off+j)
								seen[off+j] = true
							}
						}
					}
				}
			}
			for i, s := range seen {
				require.True(t, s, "element %d not covered", i)
			}
		})
	}
	require.Equal(t, DefaultPageSize, Geometry{}.withDefaults().PageSize)
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{Geometry: smallGeo(), Pages: 4}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no pages", func(c *Config) { c.Pages = 0 }},
		{"negative pages", func(c *Config) { c.Pages = -1 }},
		{"no layers", func(c *Config) { c.Layers = 0 }},
		{"no heads", func(c *Config) { c.KVHeads = 0 }},
		{"no head dim", func(c *Config) { c.HeadDim = 0 }},
		{"negative page size", func(c *Config) { c.PageSize = -16 }},
		{"huge page size", func(c *Config) { c.PageSize = 1 << 20 }},
		{"bad dtype", func(c *Config) { c.DType = 99 }},
		{"bad compression", func(c *Config) { c.Compression = "lz4" }},
		{"negative host tier", func(c *Config) { c.HostTierBytes = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			_, err := New(cpu.New(), c)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
	_, err := New(nil, good)
	require.ErrorIs(t, err, ErrConfig)
	p, err := New(cpu.New(), good)
	require.NoError(t, err)
	require.Equal(t, 16, p.CapacityTokens())
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
}

// state builders: each returns a pool, the owner's table (maybe released),
// and the ref of page 0 of that table in the named state.
type built struct {
	p   *Pool
	own *PageTable
	ref PageRef
}

func build(t *testing.T, state PageState) built {
	p := newPool(t, 8, func(c *Config) { c.HostTierBytes = 1 << 20 })
	own := p.NewTable(1, "a")
	ps := p.geo.PageSize
	require.NoError(t, own.Reserve(ps))
	ref := own.Refs()[0]
	w := writer{1, 1, ref.Gen}
	switch state {
	case PageFree:
		writeTokens(t, own, w, ps)
		require.NoError(t, own.Release())
	case PageOwned:
		writeTokens(t, own, w, ps-1)
	case PageSealed:
		writeTokens(t, own, w, ps)
	case PageReleasing:
		writeTokens(t, own, w, ps)
		require.NoError(t, p.Retain(ref, "a"))
		require.NoError(t, own.Release())
	case PageQuarantined:
		writeTokens(t, own, w, ps)
		require.NoError(t, p.Retain(ref, "a")) // a lease that must still be droppable
		require.NoError(t, p.CorruptPage(ref.Index))
		require.ErrorIs(t, p.VerifyTable(own), ErrChecksum)
	}
	info := p.pages[ref.Index]
	require.Equal(t, state, info.state)
	return built{p, own, ref}
}

func TestStateTransitions(t *testing.T) {
	type op func(b built) error
	release := func(b built) error { return b.own.Release() }
	dropPrefix := func(b built) error { return b.p.Drop(b.ref, LeasePrefix) }
	retain := func(b built) error { return b.p.Retain(b.ref, "a") }
	write := func(b built) error {
		_, _, err := b.own.Location(b.own.Written())
		return err
	}
	advance := func(b built) error { return b.own.Advance(1) }
	offload := func(b built) error {
		h, err := b.p.Offload(b.ref, "a")
		if err == nil {
			err = h.Wait()
			h.Discard()
		}
		return err
	}
	share := func(b built) error {
		other := b.p.NewTable(2, "a")
		err := other.AppendShared(b.ref)
		if err == nil {
			err = other.Release()
		}
		return err
	}
	validate := func(b built) error { return b.p.ValidateTable(b.own) }
	leaseThenRelease := func(b built) error {
		done, err := b.p.LeaseStep(b.own)
		if err != nil {
			return err
		}
		if err := b.own.Release(); err != nil {
			return err
		}
		if s := b.p.pages[b.ref.Index].state; s != PageReleasing {
			return fmt.Errorf("state %s while leased", s)
		}
		done()
		done() // idempotent
		return nil
	}
	corruptVerify := func(b built) error {
		if err := b.p.CorruptPage(b.ref.Index); err != nil {
			return err
		}
		return b.p.VerifyTable(b.own)
	}

	for _, tc := range []struct {
		from PageState
		name string
		op   op
		err  error // nil: legal
		to   PageState
	}{
		{PageOwned, "write", write, nil, PageOwned},
		{PageOwned, "advance to full seals", advance, nil, PageSealed},
		{PageOwned, "validate", validate, nil, PageOwned},
		{PageOwned, "release frees", release, nil, PageFree},
		{PageOwned, "retain unsealed", retain, ErrNotSealed, PageOwned},
		{PageOwned, "share unsealed", share, ErrNotSealed, PageOwned},
		{PageOwned, "offload unsealed", offload, ErrNotSealed, PageOwned},
		{PageOwned, "drop lease not held", dropPrefix, ErrNoLease, PageOwned},
		{PageOwned, "release under step lease defers", leaseThenRelease, nil, PageFree},

		{PageSealed, "write sealed", write, ErrPageFull, PageSealed},
		{PageSealed, "advance sealed", advance, ErrOutOfRange, PageSealed},
		{PageSealed, "validate", validate, nil, PageSealed},
		{PageSealed, "retain", retain, nil, PageSealed},
		{PageSealed, "share", share, nil, PageSealed},
		{PageSealed, "offload", offload, nil, PageSealed},
		{PageSealed, "release frees", release, nil, PageFree},
		{PageSealed, "release under step lease defers", leaseThenRelease, nil, PageFree},
		{PageSealed, "corruption quarantines", corruptVerify, ErrChecksum, PageQuarantined},

		{PageReleasing, "last prefix lease frees", dropPrefix, nil, PageFree},
		{PageReleasing, "retain by cache holder", retain, nil, PageReleasing},
		{PageReleasing, "share from cache", share, nil, PageReleasing},
		{PageReleasing, "offload", offload, ErrReleasing, PageReleasing},
		{PageReleasing, "owner releases again", release, ErrDoubleRelease, PageReleasing},
		{PageReleasing, "write", write, ErrTableReleased, PageReleasing},

		{PageFree, "retain stale", retain, ErrStaleRef, PageFree},
		{PageFree, "drop stale", dropPrefix, ErrStaleRef, PageFree},
		{PageFree, "share stale", share, ErrStaleRef, PageFree},
		{PageFree, "offload stale", offload, ErrStaleRef, PageFree},
		{PageFree, "release twice", release, ErrDoubleRelease, PageFree},

		{PageQuarantined, "drop lease keeps quarantine", dropPrefix, nil, PageQuarantined},
		{PageQuarantined, "owner release keeps quarantine", release, nil, PageQuarantined},
		{PageQuarantined, "retain", retain, ErrQuarantined, PageQuarantined},
		{PageQuarantined, "share", share, ErrQuarantined, PageQuarantined},
		{PageQuarantined, "offload", offload, ErrQuarantined, PageQuarantined},
		{PageQuarantined, "validate", validate, ErrIsolation, PageQuarantined},
	} {
		t.Run(tc.from.String()+"/"+tc.name, func(t *testing.T) {
			b := build(t, tc.from)
			before := b.p.Stats()
			err := tc.op(b)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
			require.Equal(t, tc.to, b.p.pages[b.ref.Index].state)
			checkConsistent(t, b.p)
			if tc.err != nil && !errors.Is(err, ErrIsolation) {
				// A refused call changes nothing that is counted.
				after := b.p.Stats()
				require.Equal(t, before.IsolationViolations, after.IsolationViolations)
				require.Equal(t, before.Allocs, after.Allocs)
				require.Equal(t, before.Releases, after.Releases)
			}
		})
	}
}

func TestReserveAllOrNothing(t *testing.T) {
	p := newPool(t, 4, nil)
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(9)) // 3 pages of 4
	require.Equal(t, 12, a.Reserved())
	require.Equal(t, 3, a.Len())
	require.NoError(t, a.Reserve(5)) // already covered
	require.Equal(t, 3, a.Len())
	b := p.NewTable(2, "a")
	err := b.Reserve(8)
	require.ErrorIs(t, err, ErrNoPages)
	require.Contains(t, err.Error(), "needs 2 more pages")
	require.Equal(t, 0, b.Len())
	require.Equal(t, 1, p.FreePages())
	require.ErrorIs(t, a.Reserve(-1), ErrOutOfRange)
	checkConsistent(t, p)
}

func TestMisuse(t *testing.T) {
	ps := smallGeo().PageSize
	t.Run("double release", func(t *testing.T) {
		p := newPool(t, 4, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(2*ps))
		require.NoError(t, a.Release())
		st := p.Stats()
		require.ErrorIs(t, a.Release(), ErrDoubleRelease)
		require.Equal(t, st, p.Stats())
		require.Equal(t, 4, p.FreePages())
		checkConsistent(t, p)
	})
	t.Run("stale ref release", func(t *testing.T) {
		p := newPool(t, 1, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		writeTokens(t, a, writer{1, 1, 1}, ps)
		old := a.Refs()[0]
		require.NoError(t, p.Retain(old, "a"))
		require.NoError(t, a.Release())
		require.NoError(t, p.Drop(old, LeasePrefix))
		b := p.NewTable(2, "a")
		require.NoError(t, b.Reserve(ps)) // same page, next generation
		require.Equal(t, old.Index, b.Refs()[0].Index)
		require.ErrorIs(t, p.Drop(old, LeasePrefix), ErrStaleRef)
		_, err := p.Info(old)
		require.ErrorIs(t, err, ErrStaleRef)
		require.Equal(t, PageOwned, p.pages[old.Index].state)
		checkConsistent(t, p)
	})
	t.Run("stale ref read", func(t *testing.T) {
		p := newPool(t, 1, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		writeTokens(t, a, writer{1, 1, 1}, ps)
		// A table that kept its refs past release: forged, since the API
		// clears them.
		ghost := &PageTable{pool: p, req: 1, tid: a.tid, tenant: "a", refs: a.Refs(), shared: []bool{false}, written: ps}
		require.NoError(t, a.Release())
		b := p.NewTable(2, "b")
		require.NoError(t, b.Reserve(ps))
		writeTokens(t, b, writer{2, 2, 2}, ps)
		k, v := make([]float32, p.geo.KVDim()), make([]float32, p.geo.KVDim())
		err := ghost.ReadKV(0, 0, k, v)
		require.ErrorIs(t, err, ErrIsolation)
		require.ErrorIs(t, err, ErrStaleRef)
		require.Equal(t, make([]float32, len(k)), k, "no data returned")
		require.Equal(t, PageQuarantined, p.pages[0].state)
		require.Equal(t, uint64(1), p.Stats().IsolationViolations)
		checkConsistent(t, p)
	})
	t.Run("write to sealed", func(t *testing.T) {
		p := newPool(t, 2, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(2*ps))
		writeTokens(t, a, writer{1, 1, 1}, ps)
		k, v := rows(p.geo, writer{9, 9, 9}, 0, 0)
		require.ErrorIs(t, a.WriteKV(0, 0, k, v), ErrSealed)
		require.ErrorIs(t, a.WriteKV(ps-1, 1, k, v), ErrSealed)
		checkTokens(t, a, 0, ps, writer{1, 1, 1})
		checkConsistent(t, p)
	})
	t.Run("write to foreign page", func(t *testing.T) {
		p := newPool(t, 2, nil)
		a := p.NewTable(1, "a")
		b := p.NewTable(2, "a")
		require.NoError(t, a.Reserve(ps))
		require.NoError(t, b.Reserve(ps))
		forged := &PageTable{pool: p, req: 1, tid: a.tid, tenant: "a", refs: b.Refs(), shared: []bool{false}}
		_, _, err := forged.Location(0)
		require.ErrorIs(t, err, ErrIsolation)
		require.ErrorIs(t, err, ErrForeignPage)
		require.Contains(t, err.Error(), "expected owner 1")
		require.Contains(t, err.Error(), "found another request's page")
		require.NotContains(t, err.Error(), "owner 2", "the error never names another request (the log does)")
		require.Equal(t, PageQuarantined, p.pages[b.Refs()[0].Index].state)
		checkConsistent(t, p)
	})
	t.Run("write past end", func(t *testing.T) {
		p := newPool(t, 2, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		k, v := rows(p.geo, writer{1, 1, 1}, 0, 0)
		require.ErrorIs(t, a.WriteKV(ps, 0, k, v), ErrPageFull)
		require.ErrorIs(t, a.WriteKV(-1, 0, k, v), ErrOutOfRange)
		require.ErrorIs(t, a.WriteKV(0, 2, k, v), ErrOutOfRange)
		require.ErrorIs(t, a.WriteKV(0, 0, k[:1], v), ErrOutOfRange)
		require.ErrorIs(t, a.Advance(ps+1), ErrOutOfRange)
		require.ErrorIs(t, a.Advance(-1), ErrOutOfRange)
		require.Equal(t, 0, a.Written())
		require.ErrorIs(t, a.ReadKV(0, 0, k, v), ErrOutOfRange, "unwritten position")
		checkConsistent(t, p)
	})
	t.Run("offload of releasing page", func(t *testing.T) {
		b := build(t, PageReleasing)
		_, err := b.p.Offload(b.ref, "a")
		require.ErrorIs(t, err, ErrReleasing)
		require.Equal(t, int64(0), b.p.Stats().HostTierUsed)
		checkConsistent(t, b.p)
	})
	t.Run("restore into full pool", func(t *testing.T) {
		p := newPool(t, 2, func(c *Config) { c.HostTierBytes = 1 << 20 })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(2*ps))
		writeTokens(t, a, writer{1, 1, 1}, ps+1)
		h, err := p.Offload(a.Refs()[0], "a")
		require.NoError(t, err)
		require.NoError(t, h.Wait())
		sw, err := p.SwapOut(a)
		require.NoError(t, err)
		hog := p.NewTable(3, "b")
		require.NoError(t, hog.Reserve(2*ps))
		b := p.NewTable(1, "a")
		require.ErrorIs(t, p.SwapIn(sw, b), ErrNoPages)
		require.Equal(t, 0, b.Len())
		c := p.NewTable(4, "a")
		_, err = p.Restore(h, c)
		require.ErrorIs(t, err, ErrNoPages)
		require.Equal(t, 0, c.Len())
		checkConsistent(t, p)
		// Room again: the kept swap state restores.
		require.NoError(t, hog.Release())
		require.NoError(t, p.SwapIn(sw, b))
		checkTokens(t, b, 0, ps+1, writer{1, 1, 1})
		h.Discard()
		require.NoError(t, b.Release())
		require.Equal(t, int64(0), p.Stats().HostTierUsed)
		checkConsistent(t, p)
	})
	t.Run("request ID 0", func(t *testing.T) {
		p := newPool(t, 2, nil)
		z := p.NewTable(0, "a")
		require.ErrorIs(t, z.Reserve(1), ErrForeignPage)
		require.Equal(t, 2, p.FreePages())
	})
	t.Run("cross-tenant sharing", func(t *testing.T) {
		p := newPool(t, 2, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		writeTokens(t, a, writer{1, 1, 1}, ps)
		ref := a.Refs()[0]
		require.ErrorIs(t, p.Retain(ref, "b"), ErrIsolation)
		require.ErrorIs(t, p.Retain(ref, "never-seen"), ErrIsolation)
		b := p.NewTable(2, "b")
		err := b.AppendShared(ref)
		require.ErrorIs(t, err, ErrIsolation)
		require.Contains(t, err.Error(), `tenant "b" cannot share`)
		require.Equal(t, 0, b.Written())
		require.Equal(t, PageSealed, p.pages[ref.Index].state)
		require.Equal(t, int32(0), p.ext[ref.Index].leases[LeasePrefix])
		checkConsistent(t, p)
	})
	t.Run("closed pool", func(t *testing.T) {
		p := newPool(t, 2, nil)
		a := p.NewTable(1, "a")
		require.NoError(t, p.Close())
		require.ErrorIs(t, a.Reserve(1), ErrClosed)
		require.ErrorIs(t, p.ValidateTable(a), ErrClosed)
	})
}

// TestIncidentRegression replays the GLM-5.3 incident: 8 pages reserved, 1
// token written by a placeholder, then a handoff to decode.
func TestIncidentRegression(t *testing.T) {
	for _, expected := range []int{8 * 16, 1} {
		t.Run(fmt.Sprintf("receiver expects %d", expected), func(t *testing.T) {
			rb := &recBackend{}
			p, err := New(rb, Config{Geometry: Geometry{Layers: 2, KVHeads: 2, HeadDim: 4}, Pages: 16, Poison: true, Logger: quiet})
			require.NoError(t, err)
			defer p.Close()
			// Earlier users leave data behind in every page.
			for r := RequestID(100); r < 102; r++ {
				prev := p.NewTable(r, "other")
				require.NoError(t, prev.Reserve(8*16))
				writeTokens(t, prev, writer{r, 9, 1}, 8*16)
				require.NoError(t, prev.Release())
			}
			seq := p.NewTable(1, "victim")
			require.NoError(t, seq.Reserve(8*16))
			require.Equal(t, 8, seq.Len())
			writeTokens(t, seq, writer{1, 1, 1}, 1)
			rb.a.mu.Lock()
			rb.a.reads = nil
			rb.a.mu.Unlock()

			before := p.Stats().IsolationViolations
			err = seq.Handoff(expected)
			require.ErrorIs(t, err, ErrHandoff)
			require.ErrorIs(t, err, ErrIsolation)
			require.Contains(t, err.Error(), "8 pages reserved, 1 written")
			require.Equal(t, before+1, p.Stats().IsolationViolations)

			// Reads stay bounded by writes.
			k, v := make([]float32, 8), make([]float32, 8)
			require.ErrorIs(t, seq.ReadKV(1, 0, k, v), ErrOutOfRange)
			require.ErrorIs(t, seq.ReadKV(16, 0, k, v), ErrOutOfRange)

			pb := p.geo.PageBytes()
			rb.a.mu.Lock()
			for _, r := range rb.a.reads {
				for _, ref := range seq.Refs()[1:] {
					lo := int64(ref.Index) * pb
					require.False(t, r[0] < lo+pb && lo < r[0]+r[1], "read [%d,+%d) touches unwritten page %d", r[0], r[1], ref.Index)
				}
			}
			rb.a.mu.Unlock()

			// The fix the engine applies: hand off only what was written.
			if expected == 1 {
				require.NoError(t, seq.ReleaseUnwritten())
				require.Equal(t, 1, seq.Len())
				require.NoError(t, seq.Handoff(1))
				checkTokens(t, seq, 0, 1, writer{1, 1, 1})
			}
			require.NoError(t, seq.Release())
			checkConsistent(t, p)
		})
	}
}

func TestValidateTableReportsAndQuarantines(t *testing.T) {
	ps := smallGeo().PageSize
	for _, tc := range []struct {
		name  string
		forge func(p *Pool, a *PageTable)
		kind  error
		want  []string
	}{
		{"generation", func(p *Pool, a *PageTable) { a.refs[1].Gen++ }, ErrStaleRef, []string{"gen"}},
		{"owner", func(p *Pool, a *PageTable) { p.pages[a.refs[1].Index].owner = 7 }, ErrForeignPage, []string{"expected owner 1", "found another request's page"}},
		{"tenant", func(p *Pool, a *PageTable) { id, _ := p.holdTenantLocked("b"); p.pages[a.refs[1].Index].tenant = id }, ErrForeignPage, []string{"found another tenant's page"}},
		{"written count", func(p *Pool, a *PageTable) { p.pages[a.refs[1].Index].written = 3 }, ErrOutOfRange, []string{"with 3 written"}},
		{"reserved page claims writes", func(p *Pool, a *PageTable) { p.pages[a.refs[2].Index].written = 1 }, ErrOutOfRange, []string{"with 0 written"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, 4, nil)
			a := p.NewTable(1, "a")
			require.NoError(t, a.Reserve(3*ps))
			writeTokens(t, a, writer{1, 1, 1}, 2*ps)
			require.NoError(t, p.ValidateTable(a))
			tc.forge(p, a)
			err := p.ValidateTable(a)
			require.ErrorIs(t, err, ErrIsolation)
			require.ErrorIs(t, err, tc.kind)
			for _, s := range tc.want {
				require.Contains(t, err.Error(), s)
			}
			require.Contains(t, err.Error(), "page quarantined")
			require.Equal(t, 1, p.Stats().Quarantined)
			require.Equal(t, uint64(1), p.Stats().IsolationViolations)
			require.ErrorIs(t, p.ValidateTable(a), ErrIsolation, "stays failed")
			if err := a.Release(); tc.kind == ErrStaleRef {
				require.ErrorIs(t, err, ErrStaleRef, "a stale entry is not released through")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, 3, p.FreePages(), "quarantined page never returns")
		})
	}
}

func TestDeferredReleaseAndScrub(t *testing.T) {
	ps := smallGeo().PageSize
	for _, tc := range []struct {
		name   string
		mod    func(*Config)
		freed  func([]float32) bool
		intact bool
	}{
		{"zero", func(c *Config) { c.ZeroOnRelease = true }, allZero, false},
		{"poison", func(c *Config) { c.Poison = true }, allNaN, false},
		{"poison wins", func(c *Config) { c.Poison, c.ZeroOnRelease = true, true }, allNaN, false},
		{"no scrub", nil, func(f []float32) bool { return !allZero(f) && !allNaN(f) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, 2, tc.mod)
			a := p.NewTable(1, "a")
			require.NoError(t, a.Reserve(2*ps))
			writeTokens(t, a, writer{1, 1, 1}, 2*ps)
			done, err := p.LeaseStep(a)
			require.NoError(t, err)
			idx := a.Pages()
			require.NoError(t, a.Release())
			st := p.Stats()
			require.Equal(t, 2, st.Releasing)
			require.Equal(t, uint64(2), st.DeferredReleases)
			require.Equal(t, 0, p.FreePages())
			// The step still reads valid data: nothing scrubbed under a lease.
			for _, i := range idx {
				require.False(t, allZero(pageFloats(p, i)) || allNaN(pageFloats(p, i)))
			}
			done()
			st = p.Stats()
			require.Equal(t, 2, st.Free)
			require.Equal(t, uint64(2), st.DeferredFreed)
			require.Equal(t, uint64(2), st.DeferredDuration.Count)
			for _, i := range idx {
				require.True(t, tc.freed(pageFloats(p, i)))
			}
			checkConsistent(t, p)
		})
	}
	t.Run("quarantined while releasing", func(t *testing.T) {
		b := build(t, PageReleasing)
		b.p.mu.Lock()
		b.p.quarantineLocked(b.ref.Index)
		b.p.mu.Unlock()
		require.NoError(t, b.p.Drop(b.ref, LeasePrefix))
		st := b.p.Stats()
		require.Equal(t, uint64(1), st.DeferredQuarantined)
		require.Equal(t, 1, st.Quarantined)
		require.Equal(t, 0, st.PrefixLeases)
		checkConsistent(t, b.p)
	})
}

func TestHandoffSealsPartialPage(t *testing.T) {
	p := newPool(t, 4, nil)
	ps := p.geo.PageSize
	a := p.NewTable(1, "a")
	w := writer{1, 1, 1}
	require.NoError(t, a.Reserve(ps+2))
	writeTokens(t, a, w, ps+2)
	require.NoError(t, a.Handoff(ps+2))
	require.ErrorIs(t, a.Handoff(ps+1), ErrHandoff)
	// Decode continues in the partial page.
	require.NoError(t, a.Reserve(2*ps+1))
	writeTokens(t, a, w, 1)
	require.NoError(t, p.VerifyTable(a))
	// Tampering with a handoff-sealed slot is caught, by step verification
	// and when the page fills.
	last := a.Pages()[1]
	bumpElem(t, p, p.geo.VOffset(last, 1, 0))
	err := p.VerifyTable(a)
	require.ErrorIs(t, err, ErrChecksum)
	require.ErrorIs(t, err, ErrIsolation)
	require.Equal(t, PageQuarantined, p.pages[last].state)
	require.Equal(t, uint64(1), p.Stats().ChecksumFailures)
	require.NoError(t, a.Release())
	checkConsistent(t, p)
}

func TestSharingWithinTenant(t *testing.T) {
	p := newPool(t, 6, func(c *Config) { c.Poison = true })
	ps := p.geo.PageSize
	a := p.NewTable(1, "a")
	wa := writer{1, 1, 1}
	require.NoError(t, a.Reserve(2*ps+1))
	writeTokens(t, a, wa, 2*ps+1)
	prefix := a.Refs()[:2]
	for _, r := range prefix {
		require.NoError(t, p.Retain(r, "a")) // the prefix cache
	}
	require.ErrorIs(t, p.Retain(a.Refs()[2], "a"), ErrNotSealed)
	require.NoError(t, a.Release())
	require.Equal(t, 2, p.Stats().Releasing)

	b := p.NewTable(2, "a")
	for _, r := range prefix {
		require.NoError(t, b.AppendShared(r))
	}
	require.Equal(t, 2*ps, b.Written())
	require.True(t, b.Shared(0))
	require.NoError(t, p.ValidateTable(b))
	require.NoError(t, b.Handoff(2*ps))
	checkTokens(t, b, 0, 2*ps, wa)
	// B's own tokens follow the shared prefix.
	require.NoError(t, b.Reserve(2*ps+3))
	require.ErrorIs(t, b.AppendShared(prefix[0]), ErrOutOfRange, "not at a fully written boundary")
	wb := writer{2, 1, 2}
	writeTokens(t, b, wb, 3)
	checkTokens(t, b, 2*ps, 2*ps+3, wb)
	_, _, err := b.Location(0)
	require.ErrorIs(t, err, ErrSealed)

	// The cache evicts; B's prefix leases keep the pages alive.
	for _, r := range prefix {
		require.NoError(t, p.Drop(r, LeasePrefix))
	}
	require.Equal(t, 2, p.Stats().Releasing)
	checkTokens(t, b, 0, 2*ps, wa)
	require.NoError(t, b.Release())
	st := p.Stats()
	require.Equal(t, 6, st.Free)
	require.Equal(t, 0, st.PrefixLeases)
	for _, r := range prefix {
		require.True(t, allNaN(pageFloats(p, r.Index)))
	}
	checkConsistent(t, p)
}

func TestSwapRoundTrip(t *testing.T) {
	for _, comp := range []string{"none", "s2", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			p := newPool(t, 8, func(c *Config) { c.HostTierBytes = 1 << 20; c.Compression = comp; c.ZeroOnRelease = true })
			ps := p.geo.PageSize
			w := writer{5, 1, 1}
			a := p.NewTable(5, "a")
			require.NoError(t, a.Reserve(3*ps))
			writeTokens(t, a, w, 2*ps+3)
			sw, err := p.SwapOut(a)
			require.NoError(t, err)
			require.True(t, a.Released())
			require.Equal(t, 8, p.FreePages())
			require.Equal(t, 3, sw.Pages())
			st := p.Stats()
			require.Equal(t, 3, st.HostEntries)
			require.Positive(t, st.HostTierUsed)
			require.Equal(t, int64(2*p.geo.PageBytes()+p.geo.PageBytes()*3/4), st.BytesOffloaded)

			// Another request reuses the pages meanwhile.
			o := p.NewTable(6, "b")
			require.NoError(t, o.Reserve(3*ps))
			writeTokens(t, o, writer{6, 2, 1}, 3*ps)

			wrong := p.NewTable(7, "a")
			require.ErrorIs(t, p.SwapIn(sw, wrong), ErrIsolation)
			b := p.NewTable(5, "a")
			require.NoError(t, p.SwapIn(sw, b))
			require.Equal(t, 2*ps+3, b.Written())
			require.NoError(t, b.Handoff(2*ps+3))
			checkTokens(t, b, 0, 2*ps+3, w)
			writeTokens(t, b, w, 1)
			require.ErrorIs(t, p.SwapIn(sw, p.NewTable(5, "a")), ErrDoubleRelease)
			require.NoError(t, b.Release())
			require.NoError(t, o.Release())
			st = p.Stats()
			require.Equal(t, int64(0), st.HostTierUsed)
			require.Equal(t, 0, st.HostEntries)
			require.Equal(t, 8, st.Free)
			checkConsistent(t, p)
		})
	}
}

func TestHostTierFaults(t *testing.T) {
	ps := smallGeo().PageSize
	t.Run("copy fails: table intact", func(t *testing.T) {
		p := newPool(t, 4, func(c *Config) {
			c.HostTierBytes = 1 << 20
			c.Faults = &Faults{FailCopy: func(PageRef) error { return errors.New("link down") }}
		})
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(2*ps))
		writeTokens(t, a, writer{1, 1, 1}, 2*ps)
		_, err := p.SwapOut(a)
		require.ErrorIs(t, err, ErrCopy)
		require.Contains(t, err.Error(), "link down")
		require.False(t, a.Released())
		require.NoError(t, p.ValidateTable(a))
		checkTokens(t, a, 0, 2*ps, writer{1, 1, 1})
		st := p.Stats()
		require.Equal(t, int64(0), st.HostTierUsed)
		require.Equal(t, 0, st.CopyLeases)
		require.Equal(t, uint64(2), st.CopyFailures)
		checkConsistent(t, p)
	})
	t.Run("corrupted copy caught at restore", func(t *testing.T) {
		p := newPool(t, 4, func(c *Config) {
			c.HostTierBytes = 1 << 20
			c.Faults = &Faults{CorruptCopy: func(r PageRef) bool { return true }}
		})
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		writeTokens(t, a, writer{1, 1, 1}, 3)
		sw, err := p.SwapOut(a)
		require.NoError(t, err)
		b := p.NewTable(1, "a")
		err = p.SwapIn(sw, b)
		require.ErrorIs(t, err, ErrChecksum)
		require.ErrorIs(t, err, ErrIsolation)
		require.Equal(t, 0, b.Len())
		sw.Discard()
		st := p.Stats()
		require.Zero(t, st.Quarantined, "the copy was bad, not the device page: it is freed")
		require.Equal(t, uint64(1), st.ChecksumFailures)
		require.Equal(t, int64(0), st.HostTierUsed)
		checkConsistent(t, p)
	})
	t.Run("corrupted device page caught at offload", func(t *testing.T) {
		p := newPool(t, 4, func(c *Config) { c.HostTierBytes = 1 << 20 })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		writeTokens(t, a, writer{1, 1, 1}, ps)
		require.NoError(t, p.CorruptPage(a.Pages()[0]))
		_, err := p.SwapOut(a)
		require.ErrorIs(t, err, ErrChecksum)
		require.False(t, a.Released())
		require.NoError(t, a.Release())
		require.Equal(t, 1, p.Stats().Quarantined)
		checkConsistent(t, p)
	})
	// Issue 16 item 1: the handoff checksum of a partial page is verified
	// as the page is copied out, so a swap cannot launder a corruption of
	// those slots; an intact page's handoff checksum comes back with it.
	t.Run("corrupted handoff slots caught at swap out", func(t *testing.T) {
		p := newPool(t, 4, func(c *Config) { c.HostTierBytes = 1 << 20 })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps+2))
		writeTokens(t, a, writer{1, 1, 1}, ps+2)
		require.NoError(t, a.Handoff(ps+2))
		require.NoError(t, p.CorruptPage(a.Pages()[1]))
		_, err := p.SwapOut(a)
		require.ErrorIs(t, err, ErrChecksum)
		require.ErrorIs(t, err, ErrIsolation)
		require.False(t, a.Released())
		require.NoError(t, a.Release())
		st := p.Stats()
		require.Equal(t, 1, st.Quarantined)
		require.Equal(t, uint64(1), st.ChecksumFailures)
		require.Zero(t, st.HostTierUsed)
		checkConsistent(t, p)
	})
	t.Run("handoff checksum carried through a swap", func(t *testing.T) {
		p := newPool(t, 4, func(c *Config) { c.HostTierBytes = 1 << 20 })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps+2))
		writeTokens(t, a, writer{1, 1, 1}, ps+2)
		require.NoError(t, a.Handoff(ps+2))
		sum := p.ext[a.Pages()[1]].partSum
		sw, err := p.SwapOut(a)
		require.NoError(t, err)
		b := p.NewTable(1, "a")
		require.NoError(t, p.SwapIn(sw, b))
		x := p.ext[b.Pages()[1]]
		require.Equal(t, uint16(2), x.partN)
		require.Equal(t, sum, x.partSum, "the checksum verified at copy-out, not one taken from copied bytes")
		require.NoError(t, p.CorruptPage(b.Pages()[1]))
		require.ErrorIs(t, b.Handoff(ps+2), ErrChecksum, "the carried checksum still guards the slots")
		require.NoError(t, b.Release())
		checkConsistent(t, p)
	})
	t.Run("host tier full", func(t *testing.T) {
		p := newPool(t, 4, func(c *Config) { c.HostTierBytes = smallGeo().PageBytes() })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(2*ps))
		writeTokens(t, a, writer{1, 1, 1}, 2*ps)
		_, err := p.SwapOut(a)
		require.ErrorIs(t, err, ErrHostTierFull)
		require.Equal(t, 0, p.Stats().CopyLeases)
		require.False(t, a.Released())
		h, err := p.Offload(a.Refs()[0], "a")
		require.NoError(t, err)
		_, err = p.Offload(a.Refs()[1], "a")
		require.ErrorIs(t, err, ErrHostTierFull)
		require.NoError(t, h.Wait())
		h.Discard()
		h.Discard()
		require.Equal(t, int64(0), p.Stats().HostTierUsed)
	})
	t.Run("no host tier", func(t *testing.T) {
		p := newPool(t, 2, nil)
		_, err := p.SwapOut(p.NewTable(1, "a"))
		require.ErrorIs(t, err, ErrNoHostTier)
	})
	t.Run("release during slow offload", func(t *testing.T) {
		gate := make(chan struct{})
		p := newPool(t, 2, func(c *Config) {
			c.HostTierBytes = 1 << 20
			c.ZeroOnRelease = true
			c.Faults = &Faults{CopyDelay: func(PageRef) time.Duration { <-gate; return 0 }}
		})
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		w := writer{1, 1, 1}
		writeTokens(t, a, w, ps)
		ref := a.Refs()[0]
		h, err := p.Offload(ref, "a")
		require.NoError(t, err)
		require.NoError(t, a.Release())
		require.Equal(t, PageReleasing, p.pages[ref.Index].state, "copy lease holds the page")
		close(gate)
		require.NoError(t, h.Wait())
		require.Equal(t, PageFree, p.pages[ref.Index].state)
		b := p.NewTable(2, "a")
		got, err := p.Restore(h, b)
		require.NoError(t, err)
		require.Equal(t, PageSealed, p.pages[got.Index].state)
		checkTokens(t, b, 0, ps, w)
		c := p.NewTable(3, "b")
		_, err = p.Restore(h, c)
		require.ErrorIs(t, err, ErrIsolation, "host entries keep their tenant")
		h.Discard()
		require.NoError(t, b.Release())
		checkConsistent(t, p)
	})
	t.Run("stale completion refused", func(t *testing.T) {
		p := newPool(t, 2, func(c *Config) { c.HostTierBytes = 1 << 20 })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(ps))
		ref := a.Refs()[0]
		e := &hostEntry{rawLen: 4, charged: 4, done: make(chan struct{})}
		p.host.used += 4
		p.host.entries++
		p.complete(&copyJob{ref: PageRef{ref.Index, ref.Gen - 1}, e: e}, []byte{1, 2, 3, 4}, nil)
		require.ErrorIs(t, e.err, ErrStaleRef)
		require.Nil(t, e.data)
		st := p.Stats()
		require.Equal(t, uint64(1), st.StaleCompletions)
		require.Equal(t, int64(0), st.HostTierUsed)
		require.Equal(t, PageOwned, p.pages[ref.Index].state)
	})
}

func TestFailAlloc(t *testing.T) {
	fail := true
	p := newPool(t, 2, func(c *Config) { c.Faults = &Faults{FailAlloc: func() bool { return fail }} })
	a := p.NewTable(1, "a")
	err := a.Reserve(1)
	require.ErrorIs(t, err, ErrNoPages)
	require.True(t, strings.Contains(err.Error(), "injected"))
	require.Equal(t, 2, p.FreePages())
	fail = false
	require.NoError(t, a.Reserve(1))
}

// Issue 16 item 6: the tenant table holds only tenants that something
// still holds (a live table, a page, a host copy); it does not grow with
// every distinct tenant name ever seen.
func TestTenantTableBounded(t *testing.T) {
	ps := smallGeo().PageSize
	p := newPool(t, 8, func(c *Config) { c.HostTierBytes = 1 << 20 })
	tenants := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.tenants)
	}
	for i := range 2000 {
		tab := p.NewTable(RequestID(i+1), Tenant(fmt.Sprintf("tenant-%d", i)))
		require.NoError(t, tab.Reserve(ps+1))
		writeTokens(t, tab, writer{RequestID(i + 1), 1, 1}, ps+1)
		if i%3 == 0 {
			// A host copy holds its tenant until it is discarded.
			sw, err := p.SwapOut(tab)
			require.NoError(t, err)
			require.LessOrEqual(t, tenants(), 2)
			sw.Discard()
		} else {
			require.NoError(t, tab.Release())
		}
		require.LessOrEqual(t, tenants(), 1, "only the empty tenant is left")
	}
	// A tenant that something holds keeps its ID: a page retained by the
	// (prefix) holder stays shareable to a new table of the same tenant.
	a := p.NewTable(9001, "kept")
	require.NoError(t, a.Reserve(ps))
	writeTokens(t, a, writer{9001, 1, 1}, ps)
	ref := a.Refs()[0]
	require.NoError(t, p.Retain(ref, "kept"))
	require.NoError(t, a.Release())
	require.Equal(t, 2, tenants())
	b := p.NewTable(9002, "kept")
	require.NoError(t, b.AppendShared(ref))
	require.NoError(t, b.Release())
	require.NoError(t, p.Drop(ref, LeasePrefix))
	require.Equal(t, 1, tenants())
	require.Equal(t, 1, p.Stats().Tenants)
	checkConsistent(t, p)
}
