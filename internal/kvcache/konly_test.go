package kvcache

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
)

// TestKOnlyPool reruns the storage and isolation tests on K-only pools
// (latent attention's layout, one plane per layer): writes and reads,
// scrub and poison, partial-page and sealed checksums, sharing, swap and
// export through the host tier, faults, rollback and the chaos soak, in
// f32 and f16.
func TestKOnlyPool(t *testing.T) {
	testKOnly = true
	defer func() { testKOnly, testDType = false, device.F32 }()
	for _, dt := range []device.DType{device.F32, device.F16} {
		testDType = dt
		for name, f := range map[string]func(*testing.T){
			"Geometry":            TestGeometry,
			"StateTransitions":    TestStateTransitions,
			"IncidentRegression":  TestIncidentRegression,
			"DeferredAndScrub":    TestDeferredReleaseAndScrub,
			"HandoffPartialPage":  TestHandoffSealsPartialPage,
			"SharingWithinTenant": TestSharingWithinTenant,
			"SwapRoundTrip":       TestSwapRoundTrip,
			"ExportImport":        TestExportImportRoundTrip,
			"HostTierFaults":      TestHostTierFaults,
			"ValidateQuarantines": TestValidateTableReportsAndQuarantines,
			"Rollback":            TestRollbackDropsTentativeWrites,
			"RollbackBoundary":    TestRollbackAtPageBoundaryAndMisuse,
			"Chaos":               TestChaos,
		} {
			t.Run(dt.String()+"/"+name, f)
		}
	}
}

// TestKOnlyRows: a K-only pool takes K rows alone; a V row is refused
// (in this layout it could only land on the K row), and rows of the wrong
// width still are.
func TestKOnlyRows(t *testing.T) {
	g := smallGeo()
	g.KOnly = true
	p := newPool(t, 2, func(c *Config) { c.Geometry = g })
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(1))
	k := make([]float32, g.KVDim())
	for i := range k {
		k[i] = float32(i) + 0.5
	}
	for _, tc := range []struct {
		name string
		k, v []float32
	}{
		{"a V row", k, make([]float32, g.KVDim())},
		{"a short V row", k, k[:1]},
		{"a short K row", k[:1], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, a.WriteKV(0, 0, tc.k, tc.v), ErrOutOfRange)
		})
	}
	require.NoError(t, a.WriteKV(0, 0, k, nil))
	require.NoError(t, a.Advance(1))
	got := make([]float32, g.KVDim())
	require.ErrorIs(t, a.ReadKV(0, 0, got, make([]float32, g.KVDim())), ErrOutOfRange)
	require.NoError(t, a.ReadKV(0, 0, got, nil))
	require.Equal(t, k, got)
	require.NoError(t, a.Release())
}

// TestKOnlyPoisonedPages: in a poisoned K-only pool, writing every slot
// of every layer of a page leaves no poison in it (the page is its K
// plane and nothing else) and none of the neighbouring pages' poison
// touched; every arena read of ReadKV, of a step verification and of an
// export stays inside the page read.
func TestKOnlyPoisonedPages(t *testing.T) {
	for _, dt := range []device.DType{device.F32, device.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			g := smallGeo()
			g.KOnly, g.DType = true, dt
			be := &recBackend{}
			p, err := New(be, Config{Geometry: g, Pages: 3, Poison: true, HostTierBytes: 1 << 20, Logger: quiet})
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			ps := g.PageSize
			// Page 0 first off the free list, then page 1: the middle one
			// has a poisoned neighbour on each side once page 0 is released.
			pad := p.NewTable(9, "a")
			require.NoError(t, pad.Reserve(ps))
			a := p.NewTable(1, "a")
			require.NoError(t, a.Reserve(ps))
			require.NoError(t, pad.Release())
			mid := a.Pages()[0]
			require.Equal(t, uint32(1), mid)
			w := writer{req: 1, tenant: 1}
			writeTokens(t, a, w, ps)
			require.False(t, anyNaN(pageFloats(p, mid)), "a fully written K-only page holds only K rows")
			require.True(t, allNaN(pageFloats(p, 0)))
			require.True(t, allNaN(pageFloats(p, 2)))

			be.a.mu.Lock()
			be.a.reads = nil
			be.a.mu.Unlock()
			checkTokens(t, a, 0, ps, w)
			require.NoError(t, p.VerifyTable(a))
			require.NoError(t, p.Retain(a.Refs()[0], "a"))
			raw, err := p.ExportPage(a.Refs()[0], "a")
			require.NoError(t, err)
			require.Len(t, raw, int(g.PageBytes()))
			p.DropRaw(raw)
			lo, hi := p.pageOff(mid), p.pageOff(mid)+p.pageBytes
			be.a.mu.Lock()
			reads := append([][2]int64(nil), be.a.reads...)
			be.a.mu.Unlock()
			require.NotEmpty(t, reads)
			for _, r := range reads {
				require.True(t, r[0] >= lo && r[0]+r[1] <= hi, "read of [%d, %d) outside page %d [%d, %d)", r[0], r[0]+r[1], mid, lo, hi)
			}
			require.NoError(t, p.Drop(a.Refs()[0], LeasePrefix))
			require.NoError(t, a.Release())
			checkConsistent(t, p)
		})
	}
}

// TestKOnlyPageRefusedByTwoPlanePool: the raw bytes of a K-only page are
// half a two-plane page of the same model: a two-plane pool refuses them
// (and the reverse), rather than reading K rows as another layer's K or
// as V. (The engine's disk tier also binds the layout into the KV
// fingerprint its pages are sealed under.)
func TestKOnlyPageRefusedByTwoPlanePool(t *testing.T) {
	two := smallGeo()
	one := two
	one.KOnly = true
	require.Equal(t, 2*one.PageBytes(), two.PageBytes())
	export := func(g Geometry) []byte {
		p := newPool(t, 2, func(c *Config) { c.Geometry = g })
		a := p.NewTable(1, "a")
		require.NoError(t, a.Reserve(g.PageSize))
		writeTokens(t, a, writer{req: 1, tenant: 1}, g.PageSize)
		ref := a.Refs()[0]
		require.NoError(t, p.Retain(ref, "a"))
		require.NoError(t, a.Release())
		raw, err := p.ExportPage(ref, "a")
		require.NoError(t, err)
		return raw
	}
	for _, tc := range []struct {
		name     string
		from, to Geometry
	}{
		{"K-only page into a two-plane pool", one, two},
		{"two-plane page into a K-only pool", two, one},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := export(tc.from)
			p := newPool(t, 2, func(c *Config) { c.Geometry = tc.to })
			b := p.NewTable(2, "a")
			_, err := p.ImportPage(b, raw)
			require.ErrorIs(t, err, ErrOutOfRange)
			require.Equal(t, 2, p.FreePages())
			require.NoError(t, b.Release())
		})
	}
}

func anyNaN(f []float32) bool {
	for _, x := range f {
		if x != x {
			return true
		}
	}
	return false
}
