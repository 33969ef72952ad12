package kvcache

import (
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testDType is the element type of the pools the tests build; TestF16Pool
// reruns the storage tests with f16.
var testDType = device.F32

// testKOnly makes the pools the tests build K-only (one plane per layer,
// as latent attention's); TestKOnlyPool reruns the storage tests with it.
var testKOnly bool

// smallGeo keeps pages tiny so tests can use many of them.
func smallGeo() Geometry {
	// A block-quantized row needs whole blocks of 32 along the head.
	return Geometry{PageSize: 4, Layers: 2, KVHeads: 2, HeadDim: 4 * max(1, testDType.BlockElems()/4), DType: testDType, KOnly: testKOnly}
}

func newPool(tb testing.TB, pages int, mod func(*Config)) *Pool {
	tb.Helper()
	cfg := Config{Geometry: smallGeo(), Pages: pages, Logger: quiet}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cpu.New(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// rowVal is the value written at element j of token pos's K (kv=0) or V
// (kv=1) row in layer: it encodes who wrote it, so a read can be checked
// exactly.
func rowVal(req RequestID, tenant uint32, pos, layer, kv, j int, gen uint64) float32 {
	x := uint64(req)*0x9e3779b97f4a7c15 ^ uint64(tenant)<<48 ^ uint64(pos)<<20 ^ uint64(layer)<<12 ^ uint64(kv)<<8 ^ uint64(j) ^ gen<<32
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	// Keep it a finite float so NaN poison can never equal it.
	return float32(int32(x&0xffffff)) + 0.5
}

type writer struct {
	req    RequestID
	tenant uint32
	gen    uint64
}

func rows(g Geometry, w writer, pos, layer int) (k, v []float32) {
	k, v = rowBufs(g)
	for j := range k {
		k[j] = exactAt(g.DType, j, rowVal(w.req, w.tenant, pos, layer, 0, j, w.gen))
	}
	for j := range v {
		v[j] = exactAt(g.DType, j, rowVal(w.req, w.tenant, pos, layer, 1, j, w.gen))
	}
	return k, v
}

// rowBufs is a K and a V row of g (no V row in a K-only geometry).
func rowBufs(g Geometry) (k, v []float32) {
	k = make([]float32, g.KVDim())
	if !g.KOnly {
		v = make([]float32, g.KVDim())
	}
	return k, v
}

// exactIn maps a rowVal value to one that dtype d holds exactly (f16:
// 11 significant bits), keeping it finite and distinct enough to tell
// writers apart.
//
// exactAt does the same for element j of a row: a block-quantized row
// holds integers exactly when each block's first value is the one of
// largest magnitude and makes the scale 1 (q8_0: 127, the others in
// -126..126; q4_0: -8, the others in -7..7).
func exactAt(d device.DType, j int, x float32) float32 {
	v := int(int32(x) & 0x7fffffff)
	switch d {
	case device.Q8_0:
		if j%32 == 0 {
			return 127
		}
		return float32(v%253 - 126)
	case device.Q4_0:
		if j%32 == 0 {
			return -8
		}
		return float32(v%15 - 7)
	}
	return exactIn(d, x)
}

func exactIn(d device.DType, x float32) float32 {
	if d == device.F32 {
		return x
	}
	return float32(int32(x)&0x3ff) + 0.5
}

// writeTokens writes and advances n tokens as writer w.
func writeTokens(tb testing.TB, t *PageTable, w writer, n int) {
	tb.Helper()
	g := t.pool.geo
	start := t.Written()
	for pos := start; pos < start+n; pos++ {
		for l := range g.Layers {
			k, v := rows(g, w, pos, l)
			require.NoError(tb, t.WriteKV(pos, l, k, v))
		}
	}
	require.NoError(tb, t.Advance(n))
}

func checkTokens(tb testing.TB, t *PageTable, from, to int, w writer) {
	tb.Helper()
	g := t.pool.geo
	k, v := rowBufs(g)
	for pos := from; pos < to; pos++ {
		for l := range g.Layers {
			require.NoError(tb, t.ReadKV(pos, l, k, v))
			wk, wv := rows(g, w, pos, l)
			require.Equal(tb, wk, k, "pos %d layer %d K", pos, l)
			require.Equal(tb, wv, v, "pos %d layer %d V", pos, l)
		}
	}
}

// checkConsistent recomputes the pool's bookkeeping from the page metadata.
func checkConsistent(tb testing.TB, p *Pool) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var counts [numStates]int
	var leases [numLeaseKinds]int
	for i := range p.pages {
		m, x := &p.pages[i], &p.ext[i]
		counts[m.state]++
		for k := range leases {
			require.GreaterOrEqual(tb, x.leases[k], int32(0), "page %d", i)
			leases[k] += int(x.leases[k])
		}
		if m.state == PageFree {
			require.False(tb, x.leased(), "free page %d has leases", i)
		}
		if m.state == PageReleasing {
			require.True(tb, x.leased(), "releasing page %d has no leases", i)
		}
	}
	require.Equal(tb, counts, p.counts)
	require.Equal(tb, leases, p.leases)
	seen := map[uint32]bool{}
	for _, idx := range p.free {
		require.False(tb, seen[idx], "page %d twice on the free list", idx)
		seen[idx] = true
		require.Equal(tb, PageFree, p.pages[idx].state, "page %d on the free list", idx)
	}
	require.Len(tb, p.free, counts[PageFree])
	// Pages waiting for a scrub are on exactly one of its lists.
	waiting := slices.Clone(p.dirty)
	for _, b := range p.inflight {
		for _, idx := range b.pages {
			if p.pages[idx].state == PageScrubbing {
				waiting = append(waiting, idx)
			}
		}
	}
	for _, idx := range waiting {
		require.False(tb, seen[idx], "page %d twice on the free and scrub lists", idx)
		seen[idx] = true
		require.Equal(tb, PageScrubbing, p.pages[idx].state, "page %d waiting for its scrub", idx)
	}
	require.Len(tb, waiting, counts[PageScrubbing])
	// The tenant table: every page that is not free names a held tenant,
	// and the two maps agree.
	for i := range p.pages {
		if m := &p.pages[i]; m.state != PageFree && m.state != PageScrubbing {
			require.Contains(tb, p.tids, m.tenant, "page %d names tenant ID %d, not in the table", i, m.tenant)
		}
	}
	require.Len(tb, p.tids, len(p.tenants))
	for name, id := range p.tenants {
		require.Equal(tb, name, p.tids[id].name)
	}
}

// pageFloats returns page idx's elements as float32s (a view for f32
// pools, a decoded copy otherwise).
func pageFloats(p *Pool, idx uint32) []float32 {
	n := p.geo.PageElems()
	if p.f32 != nil {
		return p.f32[int(idx)*n : int(idx+1)*n]
	}
	buf := make([]byte, p.pageBytes)
	if err := p.arena.Download(buf, p.pageOff(idx)); err != nil {
		panic(err)
	}
	out := make([]float32, n)
	if p.geo.DType.Quantized() { // a page is whole blocks: decode them as one row
		out = make([]float32, p.geo.Runs()*p.geo.PageSize*p.geo.KVDim())
	}
	decodeRow(out, buf, p.geo.DType)
	return out
}

// bumpElem adds 1 to element off of the arena, whatever the dtype, as a
// stray write would.
func bumpElem(tb testing.TB, p *Pool, off int) {
	tb.Helper()
	es := int64(p.elemSize)
	buf := make([]byte, es)
	require.NoError(tb, p.arena.Download(buf, int64(off)*es))
	if p.geo.DType.Quantized() {
		// off is a row's first byte, the low byte of a block's scale.
		buf[0] ^= 0x40
		require.NoError(tb, p.arena.Upload(int64(off)*es, buf))
		return
	}
	var x [1]float32
	decodeRow(x[:], buf, p.geo.DType)
	x[0]++
	encodeRow(buf, x[:], p.geo.DType)
	require.NoError(tb, p.arena.Upload(int64(off)*es, buf))
}

func allNaN(f []float32) bool {
	for _, x := range f {
		if !math.IsNaN(float64(x)) {
			return false
		}
	}
	return true
}

func allZero(f []float32) bool {
	for _, x := range f {
		if x != 0 {
			return false
		}
	}
	return true
}

// recArena records every host-visible read of the arena.
type recArena struct {
	device.Arena
	mu    sync.Mutex
	reads [][2]int64
}

func (r *recArena) note(off, n int64) {
	r.mu.Lock()
	r.reads = append(r.reads, [2]int64{off, n})
	r.mu.Unlock()
}

func (r *recArena) Checksum(off, n int64) (uint64, error) {
	r.note(off, n)
	return r.Arena.Checksum(off, n)
}

func (r *recArena) Download(dst []byte, off int64) error {
	r.note(off, int64(len(dst)))
	return r.Arena.Download(dst, off)
}

func (r *recArena) Copy(dst, src, n int64) error {
	r.note(src, n)
	return r.Arena.Copy(dst, src, n)
}

type recBackend struct{ a *recArena }

func (*recBackend) Name() string { return "recording-cpu" }

func (b *recBackend) NewArena(n int64) (device.Arena, error) {
	a, err := cpu.NewArena(n)
	if err != nil {
		return nil, err
	}
	b.a = &recArena{Arena: a}
	return b.a, nil
}

func newCPUBackend() device.Backend { return cpu.New() }
