package cuda

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestGPUOffloadAbortInFlight runs the page pool on a device arena: a page
// is offloaded to the host tier and its request is aborted (table
// released) while the copy is in flight. The page must sit in releasing,
// not on the free list, until the copy has completed; then it is scrubbed
// and freed, and the host copy holds the original data.
func TestGPUOffloadAbortInFlight(t *testing.T) {
	d := gpuOrSkip(t)
	geo := kvcache.Geometry{PageSize: 16, Layers: 2, KVHeads: 2, HeadDim: 64, DType: device.F16}
	pool, err := kvcache.New(BackendFor(d), kvcache.Config{
		Geometry: geo, Pages: 8, Poison: true, HostTierBytes: 1 << 20,
		Faults: &kvcache.Faults{CopyDelay: func(kvcache.PageRef) time.Duration { return 200 * time.Millisecond }},
	})
	require.NoError(t, err)
	defer pool.Close()
	tab := pool.NewTable(1, "tenant-a")
	require.NoError(t, tab.Reserve(16))
	pg, slot, err := tab.Location(0)
	require.NoError(t, err)
	require.Equal(t, 0, slot)
	data := make([]byte, geo.PageBytes())
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	require.NoError(t, pool.Arena().Upload(int64(pg)*geo.PageBytes(), data))
	require.NoError(t, tab.Advance(16)) // seals the page: GPU checksum
	ref := tab.Refs()[0]
	free0 := pool.FreePages()

	h, err := pool.Offload(ref, "tenant-a")
	require.NoError(t, err)
	require.NoError(t, tab.Release()) // abort while the copy is in flight
	info, err := pool.Info(ref)
	require.NoError(t, err)
	require.Equal(t, kvcache.PageReleasing, info.State)
	require.Equal(t, free0, pool.FreePages(), "a page with a copy in flight reached the free list")

	require.NoError(t, h.Wait())
	require.Eventually(t, func() bool { return pool.FreePages() == free0+1 }, 5*time.Second, time.Millisecond)
	// Scrubbed (poisoned with the f16 quiet NaN 0x7e00, the page's
	// element type) before reuse.
	got := make([]byte, geo.PageBytes())
	require.NoError(t, pool.Arena().Download(got, int64(pg)*geo.PageBytes()))
	for i := 0; i < len(got); i += 2 {
		require.Equal(t, []byte{0x00, 0x7e}, got[i:i+2], "page not scrubbed at byte %d", i)
	}
	// The host copy restores the original bytes into a new table.
	t2 := pool.NewTable(2, "tenant-a")
	r2, err := pool.Restore(h, t2)
	require.NoError(t, err)
	require.NoError(t, pool.Arena().Download(got, int64(r2.Index)*geo.PageBytes()))
	require.Equal(t, data, got)
	require.NoError(t, t2.Release())
}
