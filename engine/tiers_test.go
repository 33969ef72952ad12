package engine

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// sealCapture records, through the pool's fault hooks, plaintext pages
// (the staging buffers of sealing, when the copy is compressed, and of
// unsealing on restore, seen as they are dropped with scrubbing off) and
// every sealed copy.
type sealCapture struct {
	mu     sync.Mutex
	plain  [][]byte
	sealed [][]byte
	flip   atomic.Int64 // offset to flip in each sealed copy; -1 none
}

func newSealCapture() *sealCapture {
	c := &sealCapture{}
	c.flip.Store(-1)
	return c
}

func (c *sealCapture) faults() *Faults {
	return &Faults{Pool: &kvcache.Faults{
		DroppedHost: func(what string, b []byte) {
			if what != "sealing staging" && what != "unsealing staging" {
				return
			}
			c.mu.Lock()
			c.plain = append(c.plain, bytes.Clone(b))
			c.mu.Unlock()
		},
		SealedCopy: func(_ kvcache.PageRef, b []byte) {
			c.mu.Lock()
			c.sealed = append(c.sealed, bytes.Clone(b))
			c.mu.Unlock()
			if i := c.flip.Load(); i >= 0 {
				b[int(i)%len(b)] ^= 0x20
			}
		},
	}}
}

// TestHostTierCopiesSealed: every page the engine sends to the host tier
// (a prefix spill, a swap-out) is ciphertext: no 16-byte run of any
// sealed plaintext appears in any copy; and a spilled prefix still
// restores to exactly the cold output.
func TestHostTierCopiesSealed(t *testing.T) {
	for _, comp := range []string{"none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			capt := newSealCapture()
			cfg := hostSpillConfig(t)
			cfg.Poison, cfg.Compression = false, comp
			cfg.th().Faults = capt.faults()
			e := newEcho(t, cfg)
			a, b := sharedPair()
			_, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
			require.NoError(t, err)
			spillAll(t, e, "other", 2)
			rb, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
			require.NoError(t, err)
			require.Equal(t, 16, rb.CachedTokens, "restored from the sealed host copies")
			require.Equal(t, echoOracle(b, 10, e.MaxContext(), false), rb.Tokens)

			cfg = pressureConfig(t, true)
			cfg.Poison, cfg.Compression = false, comp
			cfg.th().Faults = capt.faults()
			e2 := newEcho(t, cfg)
			ra, rb2 := runPair(t, e2)
			require.NoError(t, ra.Err)
			require.NoError(t, rb2.Err)
			require.NotZero(t, e2.Stats().SwapOuts)

			capt.mu.Lock()
			defer capt.mu.Unlock()
			require.NotEmpty(t, capt.sealed)
			require.NotEmpty(t, capt.plain)
			for _, p := range capt.plain {
				for j := 0; j+16 <= len(p); j += 8 {
					for _, s := range capt.sealed {
						require.False(t, bytes.Contains(s, p[j:j+16]), "a host copy holds plaintext")
					}
				}
			}
		})
	}
}

// TestHostTierTamperedCopyIsMiss: a host copy with any byte flipped (in
// its header, nonce, body or tag) fails its tag on restore: a miss,
// counted in SealFailures, recomputed to the exact output; never an error
// and never an isolation incident.
func TestHostTierTamperedCopyIsMiss(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64
	}{{"version", 0}, {"epoch", 3}, {"nonce", 12}, {"body", 100}, {"tag", 1 << 40}} {
		t.Run(tc.name, func(t *testing.T) {
			capt := newSealCapture()
			cfg := hostSpillConfig(t)
			cfg.th().Faults = capt.faults()
			e := newEcho(t, cfg)
			a, b := sharedPair()
			_, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
			require.NoError(t, err)
			off := tc.off
			if off == 1<<40 {
				off = -1 // set below: the last byte of each copy
			}
			capt.flip.Store(off)
			if off < 0 {
				capt.flip.Store(int64(e0PageBytes(t, cfg)) + 37 - 1) // uncompressed: header + page + tag
			}
			spillAll(t, e, "other", 2)
			// Spill copies finish after the request that caused them: wait
			// for every one, so none is sealed after the flip is turned off
			// (an intact copy would be a legitimate host hit).
			waitPoolIdle(t, e)
			capt.flip.Store(-1)

			r, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
			require.NoError(t, err)
			require.Equal(t, echoOracle(b, 10, e.MaxContext(), false), r.Tokens)
			s := e.Stats()
			require.Positive(t, s.Pool.SealFailures)
			require.Zero(t, s.PrefixHostHits)
			require.Zero(t, s.IsolationFailures)
			require.Zero(t, s.Pool.IsolationViolations)
			require.Zero(t, s.Pool.Quarantined)
			waitPoolIdle(t, e)
			requireNoLeaks(t, e)
		})
	}
}

// TestSwappedTamperedCopyRecomputes: a swap-out whose host copies fail
// their tag comes back by recompute, with the exact output.
func TestSwappedTamperedCopyRecomputes(t *testing.T) {
	capt := newSealCapture()
	capt.flip.Store(50)
	cfg := pressureConfig(t, true)
	cfg.th().Faults = capt.faults()
	e := newEcho(t, cfg)
	ra, rb := runPair(t, e)
	require.NoError(t, ra.Err)
	require.NoError(t, rb.Err)
	require.Equal(t, echoOracle(tenantPrompt(1, 1, 6), 100, e.MaxContext(), false), ra.Tokens)
	require.Equal(t, echoOracle(tenantPrompt(2, 2, 6), 100, e.MaxContext(), false), rb.Tokens)
	s := e.Stats()
	require.NotZero(t, s.SwapOuts)
	require.Positive(t, s.Pool.SealFailures)
	require.Zero(t, s.IsolationFailures)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// TestEraseTenantKV: after the erasure, the tenant's prompts are misses on
// the device and in the host tier (exact outputs, recomputed), its host
// copies fail their tag, and another tenant keeps its hits.
func TestEraseTenantKV(t *testing.T) {
	e := newEcho(t, hostSpillConfig(t))
	a, _ := sharedPair()
	ra, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 4, Tenant: "alice"})
	require.NoError(t, err)
	spillAll(t, e, "other", 2) // alice's prefix goes to the host tier
	waitPoolIdle(t, e)
	c := tenantPrompt(1, 3, 9)
	rc, err := e.Generate(t.Context(), Request{Tokens: c, MaxTokens: 2, Tenant: "alice"})
	require.NoError(t, err)
	d := tenantPrompt(2, 4, 9)
	rd, err := e.Generate(t.Context(), Request{Tokens: d, MaxTokens: 2, Tenant: "bob"})
	require.NoError(t, err)
	waitPoolIdle(t, e)
	var aliceHost int
	for _, ent := range hostEntries(t, e) {
		if ent.key.tenant == "alice" {
			aliceHost++
		}
	}
	require.Positive(t, aliceHost)

	res, err := e.EraseTenantKV(t.Context(), "alice")
	require.NoError(t, err)
	require.Equal(t, "alice", res.Tenant)
	require.Equal(t, uint64(2), res.Epoch)
	require.Equal(t, aliceHost, res.PrefixHostPages)
	require.Equal(t, 2, res.PrefixDevicePages, "c's two full pages")
	require.Equal(t, aliceHost, res.HostPages)
	require.Positive(t, res.HostBytes)
	require.Equal(t, uint64(1), e.Stats().TenantErasures)
	for _, ent := range hostEntries(t, e) {
		require.NotEqual(t, "alice", ent.key.tenant)
	}

	for _, tc := range []struct {
		tokens []int
		want   []int
		n      int
		tenant string
		cached int
	}{
		{a, ra.Tokens, 4, "alice", 0},
		{c, rc.Tokens, 2, "alice", 0},
		{d, rd.Tokens, 2, "bob", 8},
	} {
		r, err := e.Generate(t.Context(), Request{Tokens: tc.tokens, MaxTokens: tc.n, Tenant: tc.tenant})
		require.NoError(t, err)
		require.Equal(t, tc.want, r.Tokens)
		require.Equal(t, tc.cached, r.CachedTokens, "tenant %s", tc.tenant)
	}
	require.Zero(t, e.Stats().IsolationFailures)

	// Erasing a tenant with nothing cached is not an error.
	res, err = e.EraseTenantKV(t.Context(), "nobody")
	require.NoError(t, err)
	require.Zero(t, res.PrefixDevicePages+res.PrefixHostPages+res.HostPages)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
	_, err = e.EraseTenantKV(t.Context(), "alice")
	require.ErrorIs(t, err, ErrClosed)
}
