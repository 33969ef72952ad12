package kvcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
)

// lazyArena is a host arena whose ScrubPages behaves like an asynchronous
// device: it records the batch and returns a fence, and the pages are
// filled only when the fence is waited on (or, with onGoroutine, by a
// goroutine of their own). A pool that handed a page out before waiting
// would hand out the previous owner's bytes, which the tests check for.
type lazyArena struct {
	*cpu.Arena
	mu          sync.Mutex
	batches     [][]uint32
	fail        error // the next fence's result
	onGoroutine bool
}

type lazyFence struct {
	once sync.Once
	run  func() error
	done chan struct{}
	err  error
}

func (f *lazyFence) Done() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

func (f *lazyFence) Wait() error {
	f.once.Do(func() { f.err = f.run(); close(f.done) })
	<-f.done
	return f.err
}

func (a *lazyArena) ScrubPages(pages []uint32, pageBytes int64, word uint32) (device.Fence, error) {
	a.mu.Lock()
	a.batches = append(a.batches, slices.Clone(pages))
	fail := a.fail
	a.fail = nil
	a.mu.Unlock()
	pages = slices.Clone(pages)
	f := &lazyFence{done: make(chan struct{}), run: func() error {
		if fail != nil {
			return fail
		}
		_, err := a.Arena.ScrubPages(pages, pageBytes, word)
		return err
	}}
	if a.onGoroutine {
		go func() { _ = f.Wait() }()
	}
	return f, nil
}

func (a *lazyArena) takeBatches() [][]uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.batches
	a.batches = nil
	return b
}

type lazyBackend struct {
	a           *lazyArena
	onGoroutine bool
}

func (*lazyBackend) Name() string { return "lazy-cpu" }

func (b *lazyBackend) NewArena(n int64) (device.Arena, error) {
	a, err := cpu.NewArena(n)
	if err != nil {
		return nil, err
	}
	b.a = &lazyArena{Arena: a, onGoroutine: b.onGoroutine}
	return b.a, nil
}

// pageBytesOf is page idx's raw bytes in the arena.
func pageBytesOf(p *Pool, a *lazyArena, idx uint32) []byte {
	return a.Bytes()[p.pageOff(idx) : p.pageOff(idx)+p.pageBytes]
}

// scrubbed is what a whole page holds after a scrub with word.
func scrubbed(n int64, word uint32) []byte {
	b := make([]byte, n)
	for i := int64(0); i < n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], word)
	}
	return b
}

// TestBatchedScrub: the pages released together are scrubbed by one
// ScrubPages call; while it is in flight they are neither free nor handed
// out (the pool allocates around them), and once the pool needs them it
// waits, so every byte of a reused page is the scrub pattern, exactly.
func TestBatchedScrub(t *testing.T) {
	ps := smallGeo().PageSize
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		word uint32
	}{
		{"zero", func(c *Config) { c.ZeroOnRelease = true }, 0},
		{"poison", func(c *Config) { c.Poison = true }, poisonWordOf(testDType)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &lazyBackend{}
			cfg := Config{Geometry: smallGeo(), Pages: 4, Logger: quiet}
			tc.mod(&cfg)
			p, err := New(b, cfg)
			require.NoError(t, err)
			defer p.Close()

			a := p.NewTable(1, "a")
			require.NoError(t, a.Reserve(3*ps))
			writeTokens(t, a, writer{1, 1, 1}, 3*ps)
			released := a.Pages()
			old := map[uint32][]byte{}
			for _, idx := range released {
				old[idx] = slices.Clone(pageBytesOf(p, b.a, idx))
				require.NotEqual(t, scrubbed(p.pageBytes, tc.word), old[idx])
			}
			require.NoError(t, a.Release())
			batches := b.a.takeBatches()
			require.Len(t, batches, 1, "one call for the pages released together")
			require.ElementsMatch(t, released, batches[0])

			// In flight: not free, not handed out, still counted as
			// available.
			st := p.Stats()
			require.Equal(t, 3, st.Scrubbing)
			require.Equal(t, 1, st.Free)
			require.Equal(t, 4, p.FreePages())
			checkConsistent(t, p)
			first := p.NewTable(2, "b")
			require.NoError(t, first.Reserve(ps), "the one free page needs no wait")
			require.NotContains(t, released, first.Pages()[0])
			for _, idx := range released {
				require.Equal(t, old[idx], pageBytesOf(p, b.a, idx), "page %d: the fence has not run", idx)
			}

			// The next allocation needs them: it waits for the scrub.
			second := p.NewTable(3, "b")
			require.NoError(t, second.Reserve(3*ps))
			require.ElementsMatch(t, released, second.Pages())
			for _, idx := range second.Pages() {
				require.Equal(t, scrubbed(p.pageBytes, tc.word), pageBytesOf(p, b.a, idx), "page %d reused before its scrub completed", idx)
			}
			st = p.Stats()
			require.Zero(t, st.Scrubbing)
			require.Equal(t, uint64(3), st.Scrubs)
			require.Zero(t, st.ScrubFailures)
			checkConsistent(t, p)
		})
	}
}

// TestBatchedScrubFailure: a batch whose scrub fails is quarantined as a
// whole (nobody can tell which pages still hold old data); the allocation
// that waited for it finds no pages.
func TestBatchedScrubFailure(t *testing.T) {
	ps := smallGeo().PageSize
	b := &lazyBackend{}
	p, err := New(b, Config{Geometry: smallGeo(), Pages: 3, ZeroOnRelease: true, Logger: quiet})
	require.NoError(t, err)
	defer p.Close()
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(2*ps))
	writeTokens(t, a, writer{1, 1, 1}, 2*ps)
	b.a.fail = errors.New("injected scrub failure")
	require.NoError(t, a.Release())

	c := p.NewTable(2, "c")
	err = c.Reserve(2 * ps)
	require.ErrorIs(t, err, ErrNoPages)
	st := p.Stats()
	require.Equal(t, 2, st.Quarantined)
	require.Equal(t, uint64(2), st.ScrubFailures)
	require.Zero(t, st.Scrubs)
	require.Equal(t, 1, p.FreePages())
	checkConsistent(t, p)
}

// TestSyncScrubOnePass: on the CPU the batch is scrubbed in one call by the
// time Release returns: no page waits, every released page is zero.
func TestSyncScrubOnePass(t *testing.T) {
	ps := smallGeo().PageSize
	rb := &recBackend{}
	p, err := New(rb, Config{Geometry: smallGeo(), Pages: 4, ZeroOnRelease: true, Logger: quiet})
	require.NoError(t, err)
	defer p.Close()
	a := p.NewTable(1, "a")
	require.NoError(t, a.Reserve(4*ps))
	writeTokens(t, a, writer{1, 1, 1}, 4*ps)
	idx := a.Pages()
	require.NoError(t, a.Release())
	st := p.Stats()
	require.Zero(t, st.Scrubbing)
	require.Equal(t, 4, st.Free)
	require.Equal(t, uint64(4), st.Scrubs)
	for _, i := range idx {
		require.True(t, allZero(pageFloats(p, i)), "page %d", i)
	}
	checkConsistent(t, p)
}

// TestBatchedScrubConcurrent: requests reserve, write and release at once
// while scrubs complete on goroutines of their own; every page a request
// is given is exactly zero, whoever held it before. Run under -race.
func TestBatchedScrubConcurrent(t *testing.T) {
	ps := smallGeo().PageSize
	b := &lazyBackend{onGoroutine: true}
	p, err := New(b, Config{Geometry: smallGeo(), Pages: 16, ZeroOnRelease: true, Logger: quiet})
	require.NoError(t, err)
	defer p.Close()
	zero := make([]byte, p.pageBytes)
	const workers, rounds = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				req := RequestID(1 + w*rounds + r)
				tb := p.NewTable(req, "t")
				if err := tb.Reserve(4 * ps); err != nil {
					errs <- err
					return
				}
				for _, idx := range tb.Pages() {
					if !bytes.Equal(zero, pageBytesOf(p, b.a, idx)) {
						errs <- errors.New("a reserved page holds a previous owner's bytes")
						return
					}
				}
				if err := fillTokens(tb, writer{req, 1, 1}, 4*ps); err != nil {
					errs <- err
					return
				}
				if err := tb.Release(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
	st := p.Stats()
	require.Equal(t, uint64(workers*rounds*4), st.Scrubs)
	require.Zero(t, st.Scrubbing)
}

// fillTokens is writeTokens for goroutines other than the test's.
func fillTokens(t *PageTable, w writer, n int) error {
	g := t.pool.geo
	start := t.Written()
	for pos := start; pos < start+n; pos++ {
		for l := range g.Layers {
			k, v := rows(g, w, pos, l)
			if err := t.WriteKV(pos, l, k, v); err != nil {
				return err
			}
		}
	}
	return t.Advance(n)
}
