package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// TestGPUPoolBatchedScrub: the page pool on device memory scrubs a released
// table's pages with one asynchronous ScrubPages; the pages are reused only
// after it completed, and every byte of them is zero when they are.
func TestGPUPoolBatchedScrub(t *testing.T) {
	d := gpuOrSkip(t)
	geo := kvcache.Geometry{PageSize: 16, Layers: 2, KVHeads: 2, HeadDim: 64, DType: device.F16}
	pb := geo.PageBytes()
	pool, err := kvcache.New(BackendFor(d), kvcache.Config{Geometry: geo, Pages: 4, ZeroOnRelease: true})
	require.NoError(t, err)
	defer pool.Close()

	data := make([]byte, pb)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	a := pool.NewTable(1, "tenant-a")
	require.NoError(t, a.Reserve(4*16))
	for _, idx := range a.Pages() {
		require.NoError(t, pool.Arena().Upload(int64(idx)*pb, data))
	}
	require.NoError(t, a.Release())
	require.Equal(t, 4, pool.FreePages(), "pages being scrubbed are available to the next allocation")

	b := pool.NewTable(2, "tenant-b")
	require.NoError(t, b.Reserve(4*16)) // waits for the scrub
	got := make([]byte, pb)
	for _, idx := range b.Pages() {
		require.NoError(t, pool.Arena().Download(got, int64(idx)*pb))
		require.Equal(t, make([]byte, pb), got, "page %d handed out before its scrub", idx)
	}
	st := pool.Stats()
	require.Equal(t, uint64(4), st.Scrubs)
	require.Zero(t, st.ScrubFailures)
	require.Zero(t, st.Scrubbing)
	require.NoError(t, b.Release())
}
