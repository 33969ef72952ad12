package kvcache

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvseal"
)

func newKeyring(tb testing.TB, b byte) *kvseal.Keyring {
	tb.Helper()
	k, err := kvseal.New(bytes.Repeat([]byte{b}, kvseal.KeySize), func() []byte { return []byte("test model") })
	require.NoError(tb, err)
	tb.Cleanup(k.Close)
	return k
}

// plainPages is the packed bytes of t's pages as the device holds them.
func plainPages(tb testing.TB, p *Pool, t *PageTable) [][]byte {
	tb.Helper()
	var out [][]byte
	ps := p.geo.PageSize
	for i, r := range t.Refs() {
		slots := min(ps, t.Written()-i*ps)
		b := make([]byte, p.packedLen(slots))
		require.NoError(tb, p.downloadPacked(b, r.Index, slots))
		out = append(out, b)
	}
	return out
}

// TestSealedHostCopiesAreCiphertext: with a Sealer every host copy (swap
// and offload, each compression) holds no 16-byte run of its page's
// bytes, does not compress, and restores exactly.
func TestSealedHostCopiesAreCiphertext(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	require.NoError(t, err)
	defer enc.Close()
	for _, comp := range []string{"none", "s2", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			var d dropped
			p := newPool(t, 8, func(c *Config) {
				c.HostTierBytes, c.Compression, c.ZeroOnRelease = 1<<20, comp, true
				c.Sealer = newKeyring(t, 1)
				c.Faults = &Faults{DroppedHost: d.hook}
			})
			ps := p.geo.PageSize
			w := writer{req: 1, tenant: 7}
			a := p.NewTable(1, "a")
			require.NoError(t, a.Reserve(2*ps))
			writeTokens(t, a, w, 2*ps-1)
			plain := plainPages(t, p, a)
			sw, err := p.SwapOut(a)
			require.NoError(t, err)
			for i, e := range sw.entries {
				require.True(t, e.sealed)
				for j := 0; j+16 <= len(plain[i]); j += 4 {
					require.False(t, bytes.Contains(e.data, plain[i][j:j+16]), "page %d holds plaintext at %d", i, j)
				}
				require.GreaterOrEqual(t, len(enc.EncodeAll(e.data, nil)), len(e.data), "a compressor finds structure in copy %d", i)
			}
			b := p.NewTable(1, "a")
			require.NoError(t, p.SwapIn(sw, b))
			checkTokens(t, b, 0, 2*ps-1, w)
			require.NoError(t, b.Release())
			sealing, unsealing := 2, 2 // the raw page, sealed from a copy and opened into one
			if comp == "none" {
				// The full page is sealed straight out of the CPU arena and
				// opened straight into it; the partial one is sealed in
				// place in its staging copy and opened into a staging buffer.
				sealing, unsealing = 0, 1
			}
			require.Equal(t, sealing, d.kinds()["sealing staging"])
			require.Equal(t, unsealing, d.kinds()["unsealing staging"])
			d.mu.Lock()
			for _, x := range d.bufs {
				require.True(t, zeroBytes(x.b), "%s not scrubbed", x.what)
			}
			d.mu.Unlock()
			require.Zero(t, p.Stats().SealFailures)
			checkConsistent(t, p)
		})
	}
}

// TestSealedCopyAnyByteFlippedIsMiss: flipping any one byte of a sealed
// host copy makes its restore fail with ErrSealOpen (never ErrIsolation,
// never data), counts a seal failure, and frees the page it was meant for:
// compressed (opened into a staging buffer) and not (a full page opened
// straight into the CPU arena, which GCM leaves cleared).
func TestSealedCopyAnyByteFlippedIsMiss(t *testing.T) {
	for _, comp := range []string{"zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			var flip atomic.Int64
			flip.Store(-1)
			p := newPool(t, 4, func(c *Config) {
				c.HostTierBytes, c.Compression = 1<<20, comp
				c.Sealer = newKeyring(t, 1)
				c.Faults = &Faults{SealedCopy: func(_ PageRef, b []byte) {
					if i := flip.Load(); i >= 0 {
						b[i] ^= 0x80
					}
				}}
			})
			ps := p.geo.PageSize
			w := writer{req: 1, tenant: 1}
			size := p.packedLen(ps) + sealOverhead
			for i := range size {
				flip.Store(int64(i))
				a := p.NewTable(1, "a")
				require.NoError(t, a.Reserve(ps))
				writeTokens(t, a, w, ps)
				sw, err := p.SwapOut(a)
				require.NoError(t, err)
				require.LessOrEqual(t, len(sw.entries[0].data), size)
				if i >= len(sw.entries[0].data) {
					sw.Discard()
					continue // compressed below the flipped offset
				}
				b := p.NewTable(1, "a")
				err = p.SwapIn(sw, b)
				require.ErrorIs(t, err, ErrSealOpen, "byte %d", i)
				require.NotErrorIs(t, err, ErrIsolation)
				require.Zero(t, b.Reserved())
				sw.Discard()
				require.NoError(t, b.Release())
				st := p.Stats()
				require.Equal(t, uint64(i+1), st.SealFailures)
				require.Zero(t, st.IsolationViolations)
				require.Equal(t, 4, st.Free)
			}
			checkConsistent(t, p)
		})
	}
}

// TestSealedCopyBinding: a sealed copy moved into another entry (another
// tenant's, another page of the same sequence) or restored after its
// tenant's key was erased fails its tag; the other tenant is unaffected.
func TestSealedCopyBinding(t *testing.T) {
	ring := newKeyring(t, 1)
	p := newPool(t, 16, func(c *Config) {
		c.HostTierBytes, c.Sealer = 1<<20, ring
	})
	ps := p.geo.PageSize
	swapOut := func(req RequestID, tenant Tenant) *Swapped {
		a := p.NewTable(req, tenant)
		require.NoError(t, a.Reserve(2*ps))
		writeTokens(t, a, writer{req: req, tenant: uint32(req)}, 2*ps)
		sw, err := p.SwapOut(a)
		require.NoError(t, err)
		return sw
	}
	swapIn := func(sw *Swapped) error {
		b := p.NewTable(sw.req, sw.tenant)
		defer func() { require.NoError(t, b.Release()) }()
		err := p.SwapIn(sw, b)
		if err == nil {
			checkTokens(t, b, 0, sw.written, writer{req: sw.req, tenant: uint32(sw.req)})
		}
		return err
	}
	for _, tc := range []struct {
		name   string
		tamper func(a, b *Swapped)
	}{
		{"another tenant's copy", func(a, b *Swapped) { b.entries[0].data = bytes.Clone(a.entries[0].data) }},
		{"another page of the sequence", func(a, _ *Swapped) { a.entries[1].data = bytes.Clone(a.entries[0].data) }},
		{"tenant erased", func(*Swapped, *Swapped) {
			_, err := ring.Erase("a")
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := swapOut(1, "a"), swapOut(2, "b")
			before := p.Stats().SealFailures
			tc.tamper(a, b)
			errA, errB := swapIn(a), swapIn(b)
			a.Discard()
			b.Discard()
			failed := 0
			for _, err := range []error{errA, errB} {
				if err != nil {
					require.ErrorIs(t, err, ErrSealOpen)
					failed++
				}
			}
			require.Equal(t, 1, failed, "a: %v, b: %v", errA, errB)
			require.Equal(t, before+1, p.Stats().SealFailures)
			checkConsistent(t, p)
		})
	}
}

// TestHostUsagePerTenant: the host tier's usage is accounted per tenant.
func TestHostUsagePerTenant(t *testing.T) {
	p := newPool(t, 16, func(c *Config) { c.HostTierBytes, c.Sealer = 1<<20, newKeyring(t, 2) })
	ps := p.geo.PageSize
	var sws []*Swapped
	for i, tenant := range []Tenant{"a", "a", "b"} {
		tb := p.NewTable(RequestID(i+1), tenant)
		require.NoError(t, tb.Reserve(ps))
		writeTokens(t, tb, writer{req: RequestID(i + 1)}, ps)
		sw, err := p.SwapOut(tb)
		require.NoError(t, err)
		sws = append(sws, sw)
	}
	one := int64(p.packedLen(ps) + sealOverhead)
	for _, tc := range []struct {
		tenant  Tenant
		entries int
	}{{"a", 2}, {"b", 1}, {"c", 0}} {
		t.Run(fmt.Sprint(tc.tenant), func(t *testing.T) {
			n, bytes := p.HostUsage(tc.tenant)
			require.Equal(t, tc.entries, n)
			require.Equal(t, int64(tc.entries)*one, bytes)
		})
	}
	for _, sw := range sws {
		sw.Discard()
	}
	n, b := p.HostUsage("a")
	require.Zero(t, n)
	require.Zero(t, b)
}
