package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// gateFS is osFS whose page file reads (read) or creations (create) stop
// at a gate: the first one to arrive closes entered, and every one waits
// until the test closes release. The test holds a disk operation in
// flight for as long as it needs, without timing.
type gateFS struct {
	osFS
	read, create bool
	entered      chan struct{}
	release      chan struct{}
	once         sync.Once
}

func newGateFS(t *testing.T, read, create bool) *gateFS {
	g := &gateFS{read: read, create: create, entered: make(chan struct{}), release: make(chan struct{})}
	old := newDiskFS
	newDiskFS = func() diskFS { return g }
	t.Cleanup(func() {
		newDiskFS = old
		g.open()
	})
	return g
}

func (g *gateFS) wait() {
	g.once.Do(func() { close(g.entered) })
	<-g.release
}

// open lets every held operation go on. Idempotent.
func (g *gateFS) open() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

func (g *gateFS) ReadFile(path string) ([]byte, error) {
	if g.read {
		g.wait()
	}
	return g.osFS.ReadFile(path)
}

func (g *gateFS) Create(path string) (diskWriter, error) {
	if g.create {
		g.wait()
	}
	return g.osFS.Create(path)
}

// stepGate is the echo runner whose at-th forward pass waits for wait.
type stepGate struct {
	*echoRunner
	n, at int
	wait  <-chan struct{}
}

func (g *stepGate) Forward(b *model.Batch) error {
	if g.n++; g.n == g.at {
		<-g.wait
	}
	return g.echoRunner.Forward(b)
}

// within fails t unless ch closes first: a guard against a hang, never a
// synchronisation (every wait here is on an event the test caused).
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestDiskTierSlowReadDoesNotStallDecode: a prefix read from the disk
// tier runs on the tier's reader, not on the scheduler. While alice's
// read is held inside the file system, bob's running request decodes to
// its end; alice waits at the head of the queue without failing, and once
// the read goes on she gets her whole prefix from disk with the exact
// output.
func TestDiskTierSlowReadDoesNotStallDecode(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 21)
	r1 := seedDisk(t, dir, key)
	gate := newGateFS(t, true, false)
	cfg := diskConfig(t, dir, key)
	// bob's second forward pass waits until alice is submitted: every
	// later one runs while alice's read can be held.
	aliceIn := make(chan struct{})
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		return &stepGate{echoRunner: r, at: 2, wait: aliceIn}, err
	}
	e := newEcho(t, cfg)
	t.Cleanup(gate.open) // before the engine closes, should the test fail

	bobPrompt := tenantPrompt(2, 1, 5)
	bob, err := e.Submit(t.Context(), Request{Tokens: bobPrompt, MaxTokens: 30, Tenant: "bob"})
	require.NoError(t, err)
	alice, err := e.Submit(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	close(aliceIn)
	within(t, gate.entered, "alice's disk read")
	// The read is held; bob decodes to the end meanwhile.
	within(t, bob.Done(), "bob's decode while alice's read is held")
	rb := bob.Wait()
	require.NoError(t, rb.Err)
	require.Equal(t, echoOracle(bobPrompt, 30, e.MaxContext(), false), rb.Tokens)
	select {
	case <-alice.Done():
		t.Fatal("alice finished while her disk read was held")
	default:
	}
	require.Zero(t, e.Stats().Disk.Hits)

	gate.open()
	ra := alice.Wait()
	require.NoError(t, ra.Err)
	require.Equal(t, 24, ra.CachedTokens, "alice's prefix from disk")
	require.Equal(t, r1.Tokens, ra.Tokens)
	s := e.Stats()
	require.Equal(t, uint64(6), s.Disk.Hits)
	require.Zero(t, s.Disk.SealFailures)
	require.Zero(t, s.IsolationFailures)
}

// TestDiskTierReadAbandoned: a request aborted while its disk read is in
// flight ends at once; the pages the read then returns are dropped, and
// the engine closes clean (no page or copy left behind, newEcho's check).
func TestDiskTierReadAbandoned(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 22)
	r1 := seedDisk(t, dir, key)
	gate := newGateFS(t, true, false)
	e := newEcho(t, diskConfig(t, dir, key))
	t.Cleanup(gate.open)

	ctx, cancel := context.WithCancel(t.Context())
	alice, err := e.Submit(ctx, Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	within(t, gate.entered, "alice's disk read")
	cancel()
	within(t, alice.Done(), "the aborted request to end while its read is held")
	require.Error(t, alice.Wait().Err)
	gate.open()

	// The files are still there: the next request reads them.
	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Equal(t, 24, r.CachedTokens)
}

// TestDiskTierWriterQueueFull: while the writer is held inside a write,
// spilled pages queue up to the bound (diskQueuePages) and the ones past
// it are dropped and counted (Dropped), never waited for; once the writer
// goes on, every queued page is written.
func TestDiskTierWriterQueueFull(t *testing.T) {
	gate := newGateFS(t, false, true)
	keys, err := kvseal.New(bytes.Repeat([]byte{7}, 32), nil)
	require.NoError(t, err)
	defer keys.Close()
	const ps, rawLen, extra = 4, 512, 3
	d, err := openDiskTier(t.TempDir(), 1<<30, keys, []byte("model"), ps, rawLen, false, true, quietLog())
	require.NoError(t, err)
	defer d.close()
	queue := diskQueuePages(rawLen)
	require.Equal(t, 64, queue)

	var mu sync.Mutex
	dropped := 0
	drop := func([]byte) {
		mu.Lock()
		dropped++
		mu.Unlock()
	}
	put := func(i int) {
		tokens := []int{i, i + 1, i + 2, i + 3}
		d.put("a", strongHash([32]byte{}, tokens), 0, tokens, bytes.Repeat([]byte{byte(i)}, rawLen), false, drop)
	}
	put(0)
	within(t, gate.entered, "the writer to take the first page")
	for i := 1; i <= queue+extra; i++ {
		put(i)
	}
	s := d.stats()
	require.Equal(t, uint64(extra), s.Dropped, "pages past the queue's bound are dropped")
	require.Zero(t, s.Writes, "the writer is held")
	mu.Lock()
	require.Equal(t, extra, dropped, "each dropped page was handed back")
	mu.Unlock()

	gate.open()
	d.flush()
	s = d.stats()
	require.Equal(t, uint64(queue+1), s.Writes, "the page in the writer and every queued one")
	require.Equal(t, queue+1, s.Files)
	require.Equal(t, uint64(extra), s.Dropped)
	require.Zero(t, s.Skipped)
}

// TestDiskQueuePages: the writer's queue holds diskQueueBytes of pages, at
// least 2 and at most 64.
func TestDiskQueuePages(t *testing.T) {
	for _, c := range []struct{ rawLen, want int }{
		{512, 64}, {diskQueueBytes / 10, 10}, {diskQueueBytes, 2}, {4 * diskQueueBytes, 2}, {0, 64},
	} {
		require.Equal(t, c.want, diskQueuePages(c.rawLen), "rawLen %d", c.rawLen)
	}
}

// TestDiskTierTakesPagesTheFullHostTierCannot: when the host tier cannot
// take a spilled prefix page (here it is too small for any copy, as when
// swapped sequences fill it), the page goes on to the disk tier instead of
// being lost, and the next request with that prefix hits it there.
func TestDiskTierTakesPagesTheFullHostTierCannot(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 23)
	cfg := diskConfig(t, dir, key)
	cfg.HostTierBytes = 1 // no copy fits
	e := newEcho(t, cfg)
	r1, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	spillAll(t, e, "bob", 1) // evicts alice's pages from the device
	e.tiers.disk.flush()
	s := e.Stats()
	require.GreaterOrEqual(t, s.Disk.Writes, uint64(6), "alice's evicted pages were written to disk: %+v", s.Disk)
	require.Zero(t, s.Pool.HostEntries)

	r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Equal(t, 24, r.CachedTokens, "alice's prefix from disk")
	require.Equal(t, uint64(6), e.Stats().Disk.Hits)
}

// TestPreemptedWithFullHostTierReattaches: a sequence preempted when the
// host tier cannot take its copy (here too small for any) is recomputed
// (SwapFails), but its full pages stay prefix-cache entries, on the device
// or, evicted, on the disk tier: placed again, it re-attaches them
// (PrefixHits, although no two prompts share a page) and every output is
// exact.
func TestPreemptedWithFullHostTierReattaches(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 24)
	cfg := diskConfig(t, dir, key)
	cfg.HostTierBytes = 1 // no copy fits
	// The first forward pass waits until all three are submitted, so the
	// three run together and outgrow the pool.
	all := make(chan struct{})
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		return &stepGate{echoRunner: r, at: 1, wait: all}, err
	}
	e := newEcho(t, cfg)
	var streams []*Stream
	var prompts [][]int
	for i := range 3 {
		p := tenantPrompt(3+i, i, 6)
		st, err := e.Submit(t.Context(), Request{Tokens: p, MaxTokens: 100, Tenant: fmt.Sprint("t", i)})
		require.NoError(t, err)
		streams, prompts = append(streams, st), append(prompts, p)
	}
	close(all)
	for i, st := range streams {
		r := st.Wait()
		require.NoError(t, r.Err)
		require.Equal(t, echoOracle(prompts[i], 100, e.MaxContext(), false), r.Tokens, "request %d", i)
	}
	e.tiers.disk.flush()
	s := e.Stats()
	require.Positive(t, s.Preemptions)
	require.Positive(t, s.SwapFails, "the host tier took no swap-out")
	require.Zero(t, s.SwapOuts)
	require.Positive(t, s.PrefixHits, "the preempted sequence re-attached its own pages")
	require.Zero(t, s.IsolationFailures)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// TestDiskTierReadsPendingPages: a page queued for the writer (here held
// inside its write) is found by a lookup from memory, with its exact
// bytes, and is not another tenant's, position's or tokens'; an erasure
// of its tenant makes it a miss at once, and the write is dropped.
func TestDiskTierReadsPendingPages(t *testing.T) {
	gate := newGateFS(t, false, true)
	keys, err := kvseal.New(bytes.Repeat([]byte{8}, 32), nil)
	require.NoError(t, err)
	defer keys.Close()
	const ps, rawLen = 4, 512
	d, err := openDiskTier(t.TempDir(), 1<<30, keys, []byte("model"), ps, rawLen, false, true, quietLog())
	require.NoError(t, err)
	defer d.close()
	page := func(i int) ([32]byte, []int, []byte) {
		tokens := []int{i, i + 1, i + 2, i + 3}
		return strongHash([32]byte{}, tokens), tokens, bytes.Repeat([]byte{byte(i + 1)}, rawLen)
	}
	noDrop := func([]byte) {}
	s0, tok0, raw0 := page(0)
	d.put("a", s0, 0, tok0, slices.Clone(raw0), false, noDrop)
	within(t, gate.entered, "the writer to take the first page")
	s1, tok1, raw1 := page(1)
	d.put("a", s1, 0, tok1, slices.Clone(raw1), false, noDrop)

	for i, c := range []struct {
		strong [32]byte
		tokens []int
		raw    []byte
	}{{s0, tok0, raw0}, {s1, tok1, raw1}} {
		require.True(t, d.has("a", c.strong), "page %d", i)
		got, ok := d.load("a", c.strong, 0, c.tokens)
		require.True(t, ok, "page %d from memory", i)
		require.Equal(t, c.raw, got)
		require.False(t, d.has("b", c.strong), "another tenant")
		_, ok = d.load("b", c.strong, 0, c.tokens)
		require.False(t, ok)
		_, ok = d.load("a", c.strong, 1, c.tokens)
		require.False(t, ok, "another position")
	}
	require.Zero(t, d.stats().Writes)

	d.erase("a")
	require.False(t, d.has("a", s1), "erased while queued")
	_, ok := d.load("a", s1, 0, tok1)
	require.False(t, ok)
	gate.open()
	d.flush()
	require.Zero(t, d.stats().Writes, "an erased tenant's queued pages are never written")
	require.Zero(t, d.stats().Files)
}
