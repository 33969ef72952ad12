package kvcache

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
)

// TestF16Pool reruns the storage tests on an f16 pool (the CPU default):
// writes and reads, scrub and NaN poison, partial-page and sealed
// checksums, sharing, swap through every host-tier compression, host-tier
// faults and the chaos soak all work on 2-byte elements.
func TestF16Pool(t *testing.T) {
	testDType = device.F16
	defer func() { testDType = device.F32 }()
	for name, f := range map[string]func(*testing.T){
		"StateTransitions":    TestStateTransitions,
		"IncidentRegression":  TestIncidentRegression,
		"DeferredAndScrub":    TestDeferredReleaseAndScrub,
		"HandoffPartialPage":  TestHandoffSealsPartialPage,
		"SharingWithinTenant": TestSharingWithinTenant,
		"SwapRoundTrip":       TestSwapRoundTrip,
		"HostTierFaults":      TestHostTierFaults,
		"ValidateQuarantines": TestValidateTableReportsAndQuarantines,
		"Chaos":               TestChaos,
	} {
		t.Run(name, f)
	}
}

// TestQuantPool reruns them on q8_0 and q4_0 pools: rows of whole blocks,
// page bytes from the type, checksums and host-tier copies over the
// quantized bytes.
func TestQuantPool(t *testing.T) {
	defer func() { testDType = device.F32 }()
	for _, dt := range []device.DType{device.Q8_0, device.Q4_0} {
		testDType = dt
		for name, f := range map[string]func(*testing.T){
			"StateTransitions":    TestStateTransitions,
			"IncidentRegression":  TestIncidentRegression,
			"DeferredAndScrub":    TestDeferredReleaseAndScrub,
			"HandoffPartialPage":  TestHandoffSealsPartialPage,
			"SharingWithinTenant": TestSharingWithinTenant,
			"SwapRoundTrip":       TestSwapRoundTrip,
			"HostTierFaults":      TestHostTierFaults,
			"ValidateQuarantines": TestValidateTableReportsAndQuarantines,
			"Chaos":               TestChaos,
			"Rollback":            TestRollbackDropsTentativeWrites,
			"RollbackBoundary":    TestRollbackAtPageBoundaryAndMisuse,
		} {
			t.Run(dt.String()+"/"+name, f)
		}
	}
}

// A page's bytes follow from the type: per token and layer, K and V rows
// of KVHeads*HeadDim/32 blocks of 34 (q8_0) or 18 (q4_0) bytes; a head
// dim that is not whole blocks is refused; poison reads as NaN.
func TestQuantGeometry(t *testing.T) {
	g := Geometry{PageSize: 16, Layers: 16, KVHeads: 8, HeadDim: 64} // Llama-3.2-1B
	for _, tc := range []struct {
		dt    device.DType
		bytes int64
	}{
		{device.F32, 16 * 2 * 16 * 512 * 4},
		{device.F16, 16 * 2 * 16 * 512 * 2},
		{device.Q8_0, 16 * 2 * 16 * 16 * 34},
		{device.Q4_0, 16 * 2 * 16 * 16 * 18},
	} {
		g.DType = tc.dt
		require.Equal(t, tc.bytes, g.PageBytes(), "%s", tc.dt)
		require.Equal(t, int(tc.bytes)/tc.dt.Size(), g.PageElems(), "%s", tc.dt)
		require.Equal(t, g.RowUnits()*16*2*16, g.PageElems())
		require.Equal(t, 8*g.HeadUnits(), g.RowUnits())
		require.Equal(t, g.KOffset(1, 0, 0)+16*g.RowUnits(), g.VOffset(1, 0, 0))
	}
	g.DType, g.HeadDim = device.Q8_0, 48
	require.ErrorIs(t, g.validate(), ErrConfig)
	require.ErrorContains(t, g.validate(), "multiple of 32")

	testDType = device.Q4_0
	defer func() { testDType = device.F32 }()
	p := newPool(t, 2, func(c *Config) { c.Poison = true })
	require.True(t, allNaN(pageFloats(p, 0)))
}

func TestF16Poison(t *testing.T) {
	require.Equal(t, uint32(0x7e007e00), poisonWordOf(device.F16))
	testDType = device.F16
	defer func() { testDType = device.F32 }()
	p := newPool(t, 2, func(c *Config) { c.Poison = true })
	require.Equal(t, int64(p.geo.PageElems()*2), p.pageBytes)
	for i := range 2 {
		f := pageFloats(p, uint32(i))
		require.True(t, allNaN(f))
	}
	// Rows round-trip through f16 with rounding to nearest even.
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(1))
	k := make([]float32, p.geo.KVDim())
	v := make([]float32, p.geo.KVDim())
	for j := range k {
		k[j] = 1 + float32(j)/4096 // below f16 resolution beyond j=1
		v[j] = float32(math.Inf(1))
	}
	require.NoError(t, a.WriteKV(0, 0, k, v))
	require.NoError(t, a.Advance(1))
	gk, gv := make([]float32, len(k)), make([]float32, len(v))
	require.NoError(t, a.ReadKV(0, 0, gk, gv))
	for j := range k {
		require.Equal(t, roundF16(k[j]), gk[j], "elem %d", j)
		require.True(t, math.IsInf(float64(gv[j]), 1))
	}
	// Unwritten layer 1 of the page is still poison.
	require.NoError(t, a.ReadKV(0, 1, gk, gv))
	require.True(t, allNaN(gk))
}

// roundF16 is x rounded to the nearest f16 (ties to even), computed in
// float64 for values in [1, 2): steps of 2^-10.
func roundF16(x float32) float32 {
	return float32(math.RoundToEven(float64(x)*1024) / 1024)
}
