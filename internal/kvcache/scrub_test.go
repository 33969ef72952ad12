package kvcache

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
)

// dropped records every host buffer the pool lets go of (Faults.DroppedHost).
type dropped struct {
	mu   sync.Mutex
	bufs []droppedBuf
}

type droppedBuf struct {
	what string
	b    []byte
}

func (d *dropped) hook(what string, b []byte) {
	d.mu.Lock()
	d.bufs = append(d.bufs, droppedBuf{what, b})
	d.mu.Unlock()
}

func (d *dropped) kinds() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := map[string]int{}
	for _, x := range d.bufs {
		k[x.what]++
	}
	return k
}

func zeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// writeConst writes n tokens whose K and V rows are all x: page bytes that
// compress, so that s2 and zstd really store compressed copies.
func writeConst(tb testing.TB, t *PageTable, n int, x float32) {
	tb.Helper()
	g := t.pool.geo
	row := make([]float32, g.KVDim())
	for i := range row {
		row[i] = x
	}
	start := t.Written()
	for pos := start; pos < start+n; pos++ {
		for l := range g.Layers {
			require.NoError(tb, t.WriteKV(pos, l, row, row))
		}
	}
	require.NoError(tb, t.Advance(n))
}

// TestHostCopiesScrubbed (issue 25 item 7): with ZeroOnRelease, every host
// buffer that held a tenant's KV bytes is zero once the pool lets go of
// it: swap copies after swap-in or discard, prefix-spill copies after
// restore and discard, compressed or not, and the staging buffers of
// compression and decompression. Before, device pages were zeroed but
// these were dropped with the bytes in them. Without the flag the same
// buffers are left as they were (the control: the hook sees real data).
func TestHostCopiesScrubbed(t *testing.T) {
	for _, comp := range []string{"none", "s2", "zstd"} {
		for _, zero := range []bool{true, false} {
			name := comp + "/zero_on_release"
			if !zero {
				name = comp + "/off"
			}
			t.Run(name, func(t *testing.T) {
				var d dropped
				p := newPool(t, 8, func(c *Config) {
					c.HostTierBytes, c.Compression, c.ZeroOnRelease = 1<<20, comp, zero
					c.Faults = &Faults{DroppedHost: d.hook}
				})
				ps := p.geo.PageSize
				var copies [][]byte // host copies, captured while alive

				// Swap out, then discard.
				a := p.NewTable(1, "a")
				require.NoError(t, a.Reserve(2*ps))
				writeConst(t, a, 2*ps, 1.5)
				sw, err := p.SwapOut(a)
				require.NoError(t, err)
				for _, e := range sw.entries {
					require.Equal(t, comp != "none", e.compressed)
					copies = append(copies, e.data)
				}
				sw.Discard()

				// Swap out, then swap in (which discards the copies).
				b := p.NewTable(2, "a")
				require.NoError(t, b.Reserve(2*ps))
				writeConst(t, b, 2*ps-1, 2.5)
				sw, err = p.SwapOut(b)
				require.NoError(t, err)
				for _, e := range sw.entries {
					copies = append(copies, e.data)
				}
				b2 := p.NewTable(2, "a")
				require.NoError(t, p.SwapIn(sw, b2))
				require.NoError(t, b2.Release())

				// Prefix spill: offload a sealed page, restore it, discard it.
				c := p.NewTable(3, "a")
				require.NoError(t, c.Reserve(ps))
				writeConst(t, c, ps, 3.5)
				h, err := p.Offload(c.Refs()[0], "a")
				require.NoError(t, err)
				require.NoError(t, h.Wait())
				copies = append(copies, h.e.data)
				require.NoError(t, c.Release())
				r := p.NewTable(3, "a")
				_, err = p.Restore(h, r)
				require.NoError(t, err)
				h.Discard()
				require.NoError(t, r.Release())

				require.Len(t, copies, 5)
				for i, b := range copies {
					require.NotEmpty(t, b)
					require.Equal(t, zero, zeroBytes(b[:cap(b)]), "host copy %d", i)
				}
				kinds := d.kinds()
				require.Equal(t, 5, kinds["host copy"], "%v", kinds)
				if comp != "none" {
					require.Equal(t, 5, kinds["compression staging"], "%v", kinds)
					require.Equal(t, 3, kinds["decompression staging"], "%v", kinds)
				}
				d.mu.Lock()
				for _, x := range d.bufs {
					require.Equal(t, zero, zeroBytes(x.b), "%s of %d bytes", x.what, len(x.b))
				}
				d.mu.Unlock()
				st := p.Stats()
				require.Equal(t, int64(0), st.HostTierUsed)
				require.Equal(t, 0, st.HostEntries)
				checkConsistent(t, p)
			})
		}
	}
}

// TestDiscardDuringRestoreScrubsAfter: a host copy discarded while a
// restore is copying from it is neither scrubbed nor dropped under the
// restore (which would then upload zeros and fail its checksum); the
// restore succeeds, and the copy is zeroed when it ends.
func TestDiscardDuringRestoreScrubsAfter(t *testing.T) {
	var d dropped
	hold, held := make(chan struct{}), make(chan struct{})
	var restoring bool
	var mu sync.Mutex
	p := newPool(t, 4, func(c *Config) {
		c.HostTierBytes, c.ZeroOnRelease = 1<<20, true
		c.Faults = &Faults{DroppedHost: d.hook, HoldCopy: func(PageRef) {
			mu.Lock()
			r := restoring
			mu.Unlock()
			if r {
				close(held)
				<-hold
			}
		}}
	})
	ps := p.geo.PageSize
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(ps))
	w := writer{1, 1, 1}
	writeTokens(t, a, w, ps)
	h, err := p.Offload(a.Refs()[0], "a")
	require.NoError(t, err)
	require.NoError(t, h.Wait())
	copyBytes := h.e.data
	require.False(t, zeroBytes(copyBytes))
	require.NoError(t, a.Release())

	mu.Lock()
	restoring = true
	mu.Unlock()
	r := p.NewTable(1, "a")
	done := make(chan error, 1)
	go func() {
		_, err := p.Restore(h, r)
		done <- err
	}()
	<-held
	h.Discard() // while the restore is copying from the host copy
	require.False(t, zeroBytes(copyBytes), "scrubbed under a running restore")
	close(hold)
	require.NoError(t, <-done)
	checkTokens(t, r, 0, ps, w)
	require.True(t, zeroBytes(copyBytes), "not scrubbed when the restore ended")
	require.Equal(t, 1, d.kinds()["host copy"])
	require.NoError(t, r.Release())
	require.Equal(t, int64(0), p.Stats().HostTierUsed)
	checkConsistent(t, p)
}

// stagingArena is a CPU arena that reports what the pool asked of its
// staging buffers (device.StagingScrubber, which CUDA's arena implements).
type stagingArena struct {
	device.Arena
	scrub, set bool
}

func (s *stagingArena) SetScrubStaging(on bool) { s.scrub, s.set = on, true }

type stagingBackend struct{ a *stagingArena }

func (*stagingBackend) Name() string { return "staging-cpu" }

func (b *stagingBackend) NewArena(n int64) (device.Arena, error) {
	a, err := cpu.NewArena(n)
	if err != nil {
		return nil, err
	}
	b.a = &stagingArena{Arena: a}
	return b.a, nil
}

// TestPoolScrubsBackendStaging: ZeroOnRelease (and Poison) turn on the
// backend's scrubbing of its own staging buffers (CUDA's pinned bounce
// buffers, which host-tier copies go through); without them it stays off.
func TestPoolScrubsBackendStaging(t *testing.T) {
	for _, c := range []struct {
		zero, poison, want bool
	}{{false, false, false}, {true, false, true}, {false, true, true}} {
		b := &stagingBackend{}
		p, err := New(b, Config{Geometry: smallGeo(), Pages: 2, ZeroOnRelease: c.zero, Poison: c.poison, Logger: quiet})
		require.NoError(t, err)
		require.Equal(t, c.want, b.a.scrub && b.a.set, "zero %v poison %v", c.zero, c.poison)
		require.NoError(t, p.Close())
	}
}
