package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

func TestPrefixCacheHitWithinTenant(t *testing.T) {
	e := newEcho(t, noEOS(echoConfig(t, 64, 4)))
	shared := tenantPrompt(1, 1, 18)
	a := append(append([]int(nil), shared...), 50, 51)
	b := append(append([]int(nil), shared...), 60, 61, 62)

	ra, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Zero(t, ra.CachedTokens)
	rb, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, 16, rb.CachedTokens, "4 full pages of the shared 18 tokens")
	require.Equal(t, echoOracle(b, 10, e.MaxContext(), false), rb.Tokens)
	require.Equal(t, 21-16, rb.Timings.PrefillTokens)

	// The same prompt again: all but the last token can come from the cache
	// (its own earlier pages, including generated ones).
	rc, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, 20, rc.CachedTokens)
	require.Equal(t, rb.Tokens, rc.Tokens)
	s := e.Stats()
	require.Equal(t, uint64(36), s.CachedTokens)
	require.NotZero(t, s.PrefixEntries)
	waitPoolIdle(t, e)
}

// Invariant 9: a hit across tenants is impossible by construction. The
// same tokens under another tenant find nothing, and even a forced share of
// another tenant's page is refused by the pool.
func TestPrefixCacheNeverCrossesTenants(t *testing.T) {
	e := newEcho(t, noEOS(echoConfig(t, 64, 4)))
	p := tenantPrompt(1, 1, 25)
	r1, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	for _, tenant := range []string{"bob", "", "alice "} {
		r2, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5, Tenant: tenant})
		require.NoError(t, err)
		require.Zero(t, r2.CachedTokens, "tenant %q got a hit on alice's pages", tenant)
		require.Equal(t, r1.Tokens, r2.Tokens)
	}
	r3, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, 24, r3.CachedTokens)

	// By construction at the pool too: sharing alice's page into bob's
	// table fails with an isolation error.
	var aliceRef kvcache.PageRef
	waitPoolIdle(t, e) // the scheduler is idle: its cache can be read
	for _, el := range prefixCacheOf(t, e).entries {
		ent := el.Value.(*prefixEntry)
		require.Contains(t, []string{"alice", "bob", "", "alice "}, ent.key.tenant)
		if ent.key.tenant == "alice" {
			aliceRef = ent.ref
		}
	}
	tab := e.pool.NewTable(kvcache.RequestID(1<<50), "bob")
	err = tab.AppendShared(aliceRef)
	require.ErrorIs(t, err, kvcache.ErrIsolation)
	require.NoError(t, tab.Release())
}

// A cached page corrupted after it was sealed is caught at the prefix
// cache to new request handoff, before the new request reads it: the page
// is quarantined and the request recomputes it.
func TestPrefixCacheCorruptionDetected(t *testing.T) {
	e := newEcho(t, noEOS(echoConfig(t, 64, 4)))
	p := tenantPrompt(1, 1, 13)
	_, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 3, Tenant: "t"})
	require.NoError(t, err)
	waitPoolIdle(t, e)
	var first kvcache.PageRef
	for _, el := range prefixCacheOf(t, e).entries {
		ent := el.Value.(*prefixEntry)
		if ent.parent == nil {
			first = ent.ref
		}
	}
	require.NoError(t, e.pool.CorruptPage(first.Index))
	// Detect, then recover: the hit fails its checksum before the request
	// reads it; the page is quarantined and dropped from the cache, and the
	// request recomputes it and gets its exact output.
	r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 3, Tenant: "t"})
	require.NoError(t, err)
	require.Equal(t, echoOracle(p, 3, e.MaxContext(), false), r.Tokens)
	require.Zero(t, r.CachedTokens)
	s := e.Stats()
	require.Zero(t, s.IsolationFailures)
	require.Equal(t, uint64(1), s.Recoveries)
	require.Equal(t, 1, s.Pool.Quarantined)
	require.Equal(t, uint64(1), s.Pool.ChecksumFailures)
	// The engine keeps serving.
	r, err = e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 3, Tenant: "t"})
	require.NoError(t, err)
	require.Equal(t, echoOracle(p, 3, e.MaxContext(), false), r.Tokens)
}

// prefixCacheOf finds the engine's prefix cache for white-box checks.
// Tests call it only while the scheduler is idle (after waitPoolIdle).
func prefixCacheOf(t *testing.T, e *Engine) *prefixCache {
	t.Helper()
	require.NotNil(t, e.sched)
	c, ok := e.sched.prefix.(*prefixCache)
	require.True(t, ok, "the prefix cache is disabled")
	return c
}
