package kvcache

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// gatedPool is a pool with a host tier whose offload copies wait, on the
// copy worker, until the test opens the gate: a copy in flight for exactly
// as long as the test needs, with no timing involved.
func gatedPool(t *testing.T, pages int) (*Pool, func()) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	p := newPool(t, pages, func(c *Config) {
		c.HostTierBytes = 1 << 20
		c.Faults = &Faults{HoldCopy: func(PageRef) { <-gate }}
	})
	t.Cleanup(open) // before the pool's Close (cleanups run last first)
	return p, open
}

// idleAfter checks that every page, lease and host byte came back.
func idleAfter(t *testing.T, p *Pool) {
	t.Helper()
	st := p.Stats()
	require.Zero(t, st.CopyLeases, "%+v", st)
	require.Equal(t, st.Pages, st.Free+st.Quarantined, "%+v", st)
	require.Zero(t, st.HostTierUsed, "%+v", st)
	require.Zero(t, st.HostEntries, "%+v", st)
	checkConsistent(t, p)
}

func TestSwapOutAsyncHoldsPagesUntilCopied(t *testing.T) {
	ps := smallGeo().PageSize
	p, open := gatedPool(t, 4)
	done := make(chan struct{}, 16)
	p.OnCopyDone(func() { done <- struct{}{} })
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(2*ps))
	writeTokens(t, a, writer{1, 1, 1}, ps+2)
	refs := a.Refs()

	pend, err := p.SwapOutAsync(a)
	require.NoError(t, err) // returned with both copies held in flight
	require.False(t, pend.Ready())
	_, err = pend.Finish()
	require.ErrorIs(t, err, ErrInFlight)

	// The table refuses every use while its pages are being copied.
	require.ErrorIs(t, a.Reserve(3*ps), ErrSwapping)
	require.ErrorIs(t, a.Advance(1), ErrSwapping)
	// Its pages are leased and nobody else can get them (invariant 5):
	// the other two pages are all another request can take.
	for _, r := range refs {
		info, err := p.Info(r)
		require.NoError(t, err)
		require.Equal(t, 1, info.Leases[LeaseCopy])
		require.Equal(t, RequestID(1), info.Owner)
	}
	b := p.NewTable(2, "b")
	require.NoError(t, b.Reserve(2*ps))
	require.ErrorIs(t, b.Reserve(3*ps), ErrNoPages)
	for _, r := range b.Refs() {
		require.NotContains(t, []uint32{refs[0].Index, refs[1].Index}, r.Index)
	}
	require.NoError(t, b.Release())

	open()
	<-pend.Done()
	<-done
	<-done // both copies reported
	sw, err := pend.Finish()
	require.NoError(t, err)
	require.True(t, a.Released())
	_, err = pend.Finish()
	require.ErrorIs(t, err, ErrDoubleRelease)
	require.NoError(t, pend.Cancel(), "a no-op after Finish")
	st := p.Stats()
	require.Equal(t, 4, st.Free)
	require.Zero(t, st.CopyLeases)

	c := p.NewTable(1, "a")
	require.NoError(t, p.SwapIn(sw, c))
	checkTokens(t, c, 0, ps+2, writer{1, 1, 1})
	require.NoError(t, c.Release())
	idleAfter(t, p)
}

func TestSwapOutAsyncCancelInFlight(t *testing.T) {
	ps := smallGeo().PageSize
	p, open := gatedPool(t, 4)
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(2*ps))
	writeTokens(t, a, writer{1, 1, 1}, 2*ps)
	refs := a.Refs()
	pend, err := p.SwapOutAsync(a)
	require.NoError(t, err)

	require.NoError(t, pend.Cancel())
	require.NoError(t, pend.Cancel(), "idempotent")
	require.True(t, a.Released())
	_, err = pend.Finish()
	require.Error(t, err)
	// Released, but the copies still read the pages: they stay out of
	// circulation until the copies complete.
	st := p.Stats()
	require.Equal(t, 2, st.Free)
	require.Equal(t, 2, st.Releasing)
	for _, r := range refs {
		info, err := p.Info(r)
		require.NoError(t, err)
		require.Equal(t, PageReleasing, info.State)
		require.Equal(t, 1, info.Leases[LeaseCopy])
	}
	open()
	<-pend.Done()
	idleAfter(t, p) // completions ran before Done closed: all back, once
}

func TestSwapOutAsyncFailedCopyKeepsTable(t *testing.T) {
	ps := smallGeo().PageSize
	p, open := gatedPool(t, 4)
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(ps))
	writeTokens(t, a, writer{1, 1, 1}, ps)
	// Corrupt the sealed page under the copy: the copy verifies the sealed
	// checksum and the pool quarantines the page.
	pend, err := p.SwapOutAsync(a)
	require.NoError(t, err)
	bumpElem(t, p, int(p.pageOff(a.Refs()[0].Index)/p.elemSize))
	open()
	<-pend.Done()
	_, err = pend.Finish()
	require.ErrorIs(t, err, ErrChecksum)
	require.ErrorIs(t, err, ErrIsolation)
	require.False(t, a.Released(), "the table comes back to its owner")
	require.NoError(t, a.Release())
	st := p.Stats()
	require.Equal(t, 1, st.Quarantined)
	require.Zero(t, st.HostTierUsed)
	checkConsistent(t, p)
}

func TestRestoreNeverWaitsForTheCopy(t *testing.T) {
	ps := smallGeo().PageSize
	p, open := gatedPool(t, 4)
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(ps))
	writeTokens(t, a, writer{1, 1, 1}, ps)
	h, err := p.Offload(a.Refs()[0], "a")
	require.NoError(t, err)
	require.NoError(t, a.Release())
	require.False(t, h.Ready())
	require.ErrorIs(t, h.Err(), ErrInFlight)

	b := p.NewTable(2, "a")
	_, err = p.Restore(h, b)
	require.ErrorIs(t, err, ErrInFlight)
	require.Zero(t, b.Len(), "nothing allocated")
	require.Equal(t, 3, p.Stats().Free, "the copied page is still leased")

	open()
	require.NoError(t, h.Wait())
	_, err = p.Restore(h, b)
	require.NoError(t, err)
	require.Equal(t, ps, b.Written())
	checkTokens(t, b, 0, ps, writer{1, 1, 1})
	require.NoError(t, b.Release())
	h.Discard()
	idleAfter(t, p)
}

// armedGate holds copies only while armed.
type armedGate struct {
	armed atomic.Bool
	open  chan struct{}
	once  sync.Once
}

func (g *armedGate) release() { g.once.Do(func() { close(g.open) }) }

func armedPool(t *testing.T, pages int, mod func(*Config)) (*Pool, *armedGate) {
	g := &armedGate{open: make(chan struct{})}
	p := newPool(t, pages, func(c *Config) {
		c.HostTierBytes = 1 << 20
		c.Faults = &Faults{HoldCopy: func(PageRef) {
			if g.armed.Load() {
				<-g.open
			}
		}}
		if mod != nil {
			mod(c)
		}
	})
	t.Cleanup(g.release)
	return p, g
}

func swappedOut(t *testing.T, p *Pool, n int) *Swapped {
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(n))
	writeTokens(t, a, writer{1, 1, 1}, n)
	sw, err := p.SwapOut(a)
	require.NoError(t, err)
	return sw
}

func TestSwapInAsyncHoldsPagesOutOfTheTable(t *testing.T) {
	ps := smallGeo().PageSize
	p, g := armedPool(t, 4, nil)
	sw := swappedOut(t, p, ps+3)
	g.armed.Store(true)
	c := p.NewTable(1, "a")
	pr, err := p.SwapInAsync(sw, c)
	require.NoError(t, err)
	require.False(t, pr.Ready())
	require.Zero(t, c.Len(), "no page in the table before it is verified")
	require.ErrorIs(t, c.Reserve(1), ErrSwapping)
	require.ErrorIs(t, pr.Finish(), ErrInFlight)
	require.Equal(t, 2, p.Stats().Free, "allocated all at once")
	require.Equal(t, 2, p.Stats().CopyLeases)
	_, err = p.SwapInAsync(sw, p.NewTable(1, "a"))
	require.ErrorIs(t, err, ErrInFlight, "one restore at a time")

	g.release()
	<-pr.Done()
	require.NoError(t, pr.Finish())
	require.ErrorIs(t, pr.Finish(), ErrDoubleRelease)
	pr.Cancel() // no-op after Finish
	require.Equal(t, ps+3, c.Written())
	checkTokens(t, c, 0, ps+3, writer{1, 1, 1})
	require.NoError(t, c.Release())
	idleAfter(t, p)
}

func TestSwapInAsyncCancelInFlight(t *testing.T) {
	ps := smallGeo().PageSize
	p, g := armedPool(t, 4, nil)
	sw := swappedOut(t, p, 2*ps)
	g.armed.Store(true)
	c := p.NewTable(1, "a")
	pr, err := p.SwapInAsync(sw, c)
	require.NoError(t, err)
	pr.Cancel()
	pr.Cancel() // idempotent
	sw.Discard()
	require.NoError(t, c.Release())
	require.Equal(t, 2, p.Stats().Free, "the pages wait for their copies")
	g.release()
	<-pr.Done()
	idleAfter(t, p) // pages released, host copies discarded, once
}

func TestSwapInAsyncBadCopy(t *testing.T) {
	ps := smallGeo().PageSize
	p, _ := armedPool(t, 4, func(c *Config) {
		c.Faults.CorruptCopy = func(PageRef) bool { return true }
	})
	sw := swappedOut(t, p, ps)
	c := p.NewTable(1, "a")
	pr, err := p.SwapInAsync(sw, c)
	require.NoError(t, err)
	<-pr.Done()
	err = pr.Finish()
	require.ErrorIs(t, err, ErrChecksum)
	require.ErrorIs(t, err, ErrIsolation)
	require.Zero(t, c.Len())
	sw.Discard()
	require.NoError(t, c.Release())
	st := p.Stats()
	require.Zero(t, st.Quarantined, "the copy was bad, not the device page")
	idleAfter(t, p)
}
