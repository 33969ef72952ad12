package kvcache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRestoreWorkers: a run of pages is restored by one goroutine per
// minRestoreRun pages, at most 4 and at most GOMAXPROCS.
func TestRestoreWorkers(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, c := range []struct{ pages, want int }{
		{0, 1}, {1, 1}, {minRestoreRun, 1}, {2*minRestoreRun - 1, 1},
		{2 * minRestoreRun, min(2, procs)}, {64, min(4, procs)},
	} {
		require.Equal(t, c.want, restoreWorkers(c.pages), "%d pages", c.pages)
	}
}

// sealedSwapPool is a pool of 16 pages with a sealed host tier, and its
// GOMAXPROCS raised to 4 for the test (restoreWorkers).
func sealedSwapPool(t *testing.T, faults *Faults) *Pool {
	old := runtime.GOMAXPROCS(4)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	return newPool(t, 16, func(c *Config) {
		c.HostTierBytes, c.ZeroOnRelease = 1<<20, true
		c.Sealer = newKeyring(t, 3)
		c.Faults = faults
	})
}

// TestSwapInRestoresRunsInParallel: a swap-in of 16 pages is restored by
// 4 runs at once. Each run's first copy waits in HoldCopy until all 4 have
// arrived, which only concurrent runs can do; then every token reads back
// exactly, sealed copies opened straight into the pool.
func TestSwapInRestoresRunsInParallel(t *testing.T) {
	var armed atomic.Bool
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	p := sealedSwapPool(t, &Faults{HoldCopy: func(PageRef) {
		if !armed.Load() {
			return
		}
		mu.Lock()
		if arrived++; arrived == 4 {
			close(all)
		}
		first := arrived <= 4
		mu.Unlock()
		if first {
			select {
			case <-all:
			case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
				t.Error("the restore runs did not run concurrently")
			}
		}
	}})
	ps := p.geo.PageSize
	w := writer{req: 1, tenant: 1}
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(16*ps))
	writeTokens(t, a, w, 16*ps)
	sw, err := p.SwapOut(a)
	require.NoError(t, err)
	armed.Store(true)
	b := p.NewTable(1, "a")
	require.NoError(t, p.SwapIn(sw, b))
	require.Equal(t, 16, arrived, "every page went through HoldCopy once")
	checkTokens(t, b, 0, 16*ps, w)
	require.NoError(t, b.Release())
	checkConsistent(t, p)
}

// TestSwapInParallelFailure: a sealed copy in the last run fails its tag.
// The swap-in fails with ErrSealOpen, counts one seal failure, and every
// page it allocated goes back to the free list (none quarantined).
func TestSwapInParallelFailure(t *testing.T) {
	var bad atomic.Int64
	bad.Store(-1)
	p := sealedSwapPool(t, &Faults{SealedCopy: func(ref PageRef, b []byte) {
		if int64(ref.Index) == bad.Load() {
			b[len(b)/2] ^= 1
		}
	}})
	ps := p.geo.PageSize
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(16*ps))
	writeTokens(t, a, writer{req: 1, tenant: 1}, 16*ps)
	bad.Store(int64(a.Refs()[15].Index))
	sw, err := p.SwapOut(a)
	require.NoError(t, err)
	b := p.NewTable(1, "a")
	err = p.SwapIn(sw, b)
	require.ErrorIs(t, err, ErrSealOpen)
	require.NotErrorIs(t, err, ErrIsolation)
	require.Zero(t, b.Reserved())
	sw.Discard()
	require.NoError(t, b.Release())
	st := p.Stats()
	require.Equal(t, uint64(1), st.SealFailures)
	require.Zero(t, st.Quarantined)
	require.Equal(t, 16, st.Free)
	checkConsistent(t, p)
}
