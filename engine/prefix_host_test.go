package engine

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Prefix cache host tier: evicted entries spill to the host tier and come
// back, verified, on a hit.

// hostSpillConfig: 16 pages of 4 tokens (64 tokens) and a host tier, so a
// 60-token request of another tenant pushes a cached prefix off the device.
func hostSpillConfig(t *testing.T) Config {
	cfg := noEOS(echoConfig(t, 16, 4))
	cfg.Poison = true
	cfg.HostTierBytes = 1 << 20
	return cfg
}

// sharedPair returns two prompts of tenant 1 sharing their first 18 tokens
// (4 full pages).
func sharedPair() (a, b []int) {
	shared := tenantPrompt(1, 1, 18)
	a = append(append([]int(nil), shared...), 50, 51)
	b = append(append([]int(nil), shared...), 60, 61, 62)
	return a, b
}

// spillAll runs a 60-token request of another tenant: it needs 15 of the
// 16 pages, so every device entry it cannot share is evicted, to the host
// tier.
func spillAll(t *testing.T, e *Engine, tenant string, req int) {
	t.Helper()
	p := tenantPrompt(9, req, 40)
	r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 20, Tenant: tenant})
	require.NoError(t, err)
	require.Equal(t, echoOracle(p, 20, e.MaxContext(), false), r.Tokens)
}

// hostEntries lists the cache's host-resident entries (engine idle).
func hostEntries(t *testing.T, e *Engine) []*prefixEntry {
	waitPoolIdle(t, e)
	var out []*prefixEntry
	for el := prefixCacheOf(t, e).hostLRU.Front(); el != nil; el = el.Next() {
		out = append(out, el.Value.(*prefixEntry))
	}
	return out
}

// requireNoLeaks closes e and checks that every page is back on the free
// list (or quarantined), with no lease and no host byte left.
func requireNoLeaks(t *testing.T, e *Engine) {
	t.Helper()
	require.NoError(t, e.Close())
	p := e.pool.Stats()
	require.Equal(t, p.Pages, p.Free+p.Quarantined, "leaked pages: %+v", p)
	require.Zero(t, p.StepLeases+p.CopyLeases+p.PrefixLeases, "leaked leases: %+v", p)
	require.Zero(t, p.HostTierUsed, "leaked host bytes: %+v", p)
	require.Zero(t, p.HostEntries)
}

func TestPrefixHostTierHitMatchesCold(t *testing.T) {
	a, b := sharedPair()
	cold := newEcho(t, func() Config { c := hostSpillConfig(t); c.DisablePrefixCache = true; return c }())
	rCold, err := cold.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, echoOracle(b, 10, cold.MaxContext(), false), rCold.Tokens)

	e := newEcho(t, hostSpillConfig(t))
	_, err = e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	spillAll(t, e, "other", 2)
	s := e.Stats()
	require.NotZero(t, s.PrefixSpills, "%+v", s)
	// The shared prefix is on the host tier now, and each host copy
	// records its tenant.
	var acme int
	for _, ent := range hostEntries(t, e) {
		require.NotNil(t, ent.host)
		if ent.key.tenant == "acme" {
			acme++
		}
	}
	require.GreaterOrEqual(t, acme, 4)

	rb, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, 16, rb.CachedTokens, "4 full pages of the shared 18 tokens, from the host tier")
	require.Equal(t, rCold.Tokens, rb.Tokens, "a host-tier hit gives exactly the cold output")
	s2 := e.Stats()
	require.Equal(t, s.PrefixHostHits+4, s2.PrefixHostHits)
	require.Zero(t, s2.IsolationFailures)
	require.Zero(t, s2.Pool.ChecksumFailures)
	require.Zero(t, s2.Pool.IsolationViolations)
	require.Positive(t, s2.Pool.BytesRestored)

	// The restored pages are device entries again: the next hit is a
	// device hit.
	rc, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, rCold.Tokens, rc.Tokens)
	require.Equal(t, 20, rc.CachedTokens)
	require.Equal(t, s2.PrefixHostHits, e.Stats().PrefixHostHits)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// Invariant 9 in the host tier: the same tokens under another tenant never
// reach a spilled entry, and the pool refuses to restore a host copy into
// another tenant's table.
func TestPrefixHostTierNeverCrossesTenants(t *testing.T) {
	e := newEcho(t, hostSpillConfig(t))
	p := tenantPrompt(1, 1, 25)
	r1, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	spillAll(t, e, "carol", 2)
	var alice *prefixEntry
	for _, ent := range hostEntries(t, e) {
		if ent.key.tenant == "alice" && ent.parent == nil {
			alice = ent
		}
	}
	require.NotNil(t, alice, "alice's first page is on the host tier")

	before := e.Stats()
	for _, tenant := range []string{"bob", "", "alice "} {
		r2, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5, Tenant: tenant})
		require.NoError(t, err)
		require.Zero(t, r2.CachedTokens, "tenant %q got a hit on alice's pages", tenant)
		require.Equal(t, r1.Tokens, r2.Tokens)
	}
	require.Equal(t, before.PrefixHostHits, e.Stats().PrefixHostHits)

	// By construction at the pool too: alice's host copy cannot be
	// restored into bob's table.
	waitPoolIdle(t, e)
	require.NotNil(t, alice.host, "still on the host tier")
	tab := e.pool.NewTable(kvcache.RequestID(1<<50), "bob")
	_, err = e.pool.Restore(alice.host, tab)
	require.ErrorIs(t, err, kvcache.ErrIsolation)
	require.ErrorIs(t, err, kvcache.ErrForeignPage)
	require.Zero(t, tab.Len())
	require.NoError(t, tab.Release())

	// Alice herself still hits it (from the host tier or, if bob's runs
	// pushed it around, wherever it is now).
	r3, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, 24, r3.CachedTokens)
	require.Equal(t, r1.Tokens, r3.Tokens)
	require.Zero(t, e.Stats().IsolationFailures)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// A host copy corrupted in transit (Faults.CorruptCopy flips a byte after
// the checksum was taken) is caught by the restore's device checksum before
// anything reads it (in host memory, so the device page it was meant for
// is not blamed and goes back to the free list), the copy is dropped, and the request that hit it recomputes the prefix and gets
// its exact output (detect, then recover); so does the next request.
func TestPrefixHostTierCorruptCopyDetected(t *testing.T) {
	var corrupt atomic.Bool
	cfg := hostSpillConfig(t)
	cfg.th().Faults = &Faults{Pool: &kvcache.Faults{
		CorruptCopy: func(kvcache.PageRef) bool { return corrupt.Load() },
	}}
	e := newEcho(t, cfg)
	a, b := sharedPair()
	_, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	corrupt.Store(true)
	spillAll(t, e, "other", 2)
	corrupt.Store(false)
	require.NotZero(t, e.Stats().PrefixSpills)

	want := echoOracle(b, 10, e.MaxContext(), false)
	r, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, want, r.Tokens, "recomputed, not read from the corrupted copy")
	s := e.Stats()
	require.Zero(t, s.IsolationFailures)
	require.Equal(t, uint64(1), s.Recoveries)
	require.Equal(t, uint64(1), s.Pool.ChecksumFailures)
	require.Zero(t, s.Pool.Quarantined, "the copy was bad, not the device page it was restored into")
	require.Zero(t, s.PrefixHostHits)
	require.NotZero(t, s.PrefixHostEvictions, "the corrupted copy is dropped")

	// The engine keeps serving: the next request recomputes (and its fresh
	// device pages replace the remaining host copies of that prefix), and
	// the one after hits the device.
	for range 2 {
		r, err = e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
		require.NoError(t, err)
		require.Equal(t, want, r.Tokens)
	}
	require.Equal(t, 20, r.CachedTokens)
	require.Zero(t, e.Stats().IsolationFailures)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// Abort during a prefix restore from the host tier: it takes effect at the
// next step boundary; the request ends with ErrAborted and no token, its
// table's leases are dropped, and the restored pages (verified, held by the
// cache) serve the next request. Nothing leaks.
func TestPrefixHostTierAbortDuringRestore(t *testing.T) {
	for _, how := range []string{"abort call", "abort at prefilling"} {
		t.Run(how, func(t *testing.T) {
			var (
				armed   atomic.Bool
				e       *Engine
				victim  atomic.Uint64
				aborted atomic.Bool
			)
			cfg := hostSpillConfig(t)
			cfg.th().Faults = &Faults{
				Pool: &kvcache.Faults{FailAlloc: func() bool {
					// The first allocation after arming is the victim's
					// restore (nothing else runs): abort it right there.
					if how == "abort call" && armed.CompareAndSwap(true, false) {
						if e.Abort(victim.Load()) == nil {
							aborted.Store(true)
						}
					}
					return false
				}},
				AbortAt: func(id uint64, st State) bool {
					return how == "abort at prefilling" && id == victim.Load() && st == StatePrefilling
				},
			}
			e = newEcho(t, cfg)
			a, b := sharedPair()
			_, err := e.Generate(t.Context(), Request{Tokens: a, MaxTokens: 10, Tenant: "acme"})
			require.NoError(t, err)
			spillAll(t, e, "other", 2)
			waitPoolIdle(t, e)
			before := e.Stats()

			victim.Store(3) // IDs are monotonic: a is 1, the filler 2
			armed.Store(true)
			r, err := e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
			require.Equal(t, uint64(3), r.ID)
			require.ErrorIs(t, err, ErrAborted)
			require.Equal(t, "abort", r.FinishReason)
			want := echoOracle(b, 10, e.MaxContext(), false)
			if how == "abort call" {
				require.True(t, aborted.Load(), "the abort arrived during the restore")
				// The step admitted with the restore may still run; the abort
				// ends the request at the boundary after it.
				require.LessOrEqual(t, len(r.Tokens), 1)
				require.Equal(t, want[:len(r.Tokens)], r.Tokens)
			} else {
				require.Empty(t, r.Tokens)
			}
			s := e.Stats()
			if how == "abort call" {
				// Restoring spills other entries, whose copies the scheduler
				// does not wait for: the request waits a step for them, and
				// the abort takes effect at that boundary, between restores.
				require.LessOrEqual(t, s.PrefixHostHits, before.PrefixHostHits+4)
			} else {
				require.Equal(t, before.PrefixHostHits+4, s.PrefixHostHits, "the restore ran")
			}
			require.Zero(t, s.IsolationFailures)
			waitPoolIdle(t, e)

			// The restored pages are good device entries now.
			r, err = e.Generate(t.Context(), Request{Tokens: b, MaxTokens: 10, Tenant: "acme"})
			require.NoError(t, err)
			require.Equal(t, want, r.Tokens)
			require.GreaterOrEqual(t, r.CachedTokens, 16)
			if how == "abort call" {
				// What the aborted request restored is a device hit now.
				require.LessOrEqual(t, e.Stats().PrefixHostHits, before.PrefixHostHits+4)
			} else {
				require.Equal(t, s.PrefixHostHits, e.Stats().PrefixHostHits, "device hits this time")
			}
			waitPoolIdle(t, e)
			requireNoLeaks(t, e)
		})
	}
}

// Preemption swap wins over prefix spill: with the host tier full of
// spilled prefix pages, a swap-out drops them (LRU) instead of failing.
func TestPrefixHostTierYieldsToSwap(t *testing.T) {
	cfg := pressureConfig(t, true) // 8 pages of 4 tokens, MaxContext 32
	pb := e0HostCopyBytes(t, cfg)  // a sealed page
	cfg.HostTierBytes = 8 * pb     // as much as the whole pool
	// The pair contends for the pool only if b is placed while a is still
	// small: together they need 16 pages of 8. Two things make sure of it,
	// however slow or busy the machine:
	//   - the pair's first step waits until both are submitted (gate);
	//   - until b runs, each step waits for the spill copies in flight.
	//     b's placement evicts tenant x's cached pages to the host tier,
	//     and their pages free only when the copies complete. The
	//     scheduler rightly never waits for them, so when the copy
	//     workers lag (a loaded machine) a took every page that came back
	//     for its own decode steps, b was placed only after a finished,
	//     and nothing was ever preempted (about 1 run in 15 failed).
	var gated atomic.Bool
	gate := make(chan struct{})
	var e *Engine
	var pc *prefixCache
	var bID atomic.Uint64
	bPlaced := false // scheduler goroutine only
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		if err == nil {
			r.afterStep = func(*model.Batch) {
				if gated.CompareAndSwap(true, false) {
					<-gate
				}
				// On the scheduler goroutine: its state is ours to read.
				id := bID.Load()
				if id == 0 || bPlaced {
					return
				}
				if b := e.sched.byID[id]; b == nil || b.table != nil {
					bPlaced = true
					return
				}
				for _, sp := range pc.inflight {
					_ = sp.hp.Wait() // the next step sees the freed pages
				}
			}
		}
		return r, err
	}
	e = newEcho(t, cfg)
	pc = prefixCacheOf(t, e)
	// Fill the host tier with spilled prefix pages of tenant x.
	for i := range 4 {
		p := tenantPrompt(7, 100+i, 20)
		r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 10, Tenant: "x"})
		require.NoError(t, err)
		require.Equal(t, echoOracle(p, 10, 32, false), r.Tokens)
	}
	waitPoolIdle(t, e)
	s := e.Stats()
	require.NotZero(t, s.PrefixSpills)
	require.Equal(t, int64(s.PrefixHostEntries)*pb, s.Pool.HostTierUsed)
	require.LessOrEqual(t, s.Pool.HostTierUsed, cfg.HostTierBytes)

	gated.Store(true)
	pa, pb2 := tenantPrompt(1, 1, 6), tenantPrompt(2, 2, 6)
	sa, err := e.Submit(t.Context(), Request{Tokens: pa, MaxTokens: 100, Tenant: "a"})
	require.NoError(t, err)
	sb, err := e.Submit(t.Context(), Request{Tokens: pb2, MaxTokens: 100, Tenant: "b"})
	require.NoError(t, err)
	bID.Store(sb.ID())
	close(gate)
	ra, rb := sa.Wait(), sb.Wait()
	require.NoError(t, ra.Err)
	require.NoError(t, rb.Err)
	require.Equal(t, echoOracle(pa, 100, 32, false), ra.Tokens)
	require.Equal(t, echoOracle(pb2, 100, 32, false), rb.Tokens)
	s = e.Stats()
	require.NotZero(t, s.SwapOuts, "%+v", s)
	require.Zero(t, s.SwapFails, "a swap-out never loses to spilled prefix pages")
	require.NotZero(t, s.PrefixHostEvictions)
	require.Zero(t, s.IsolationFailures)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

func e0HostCopyBytes(t *testing.T, cfg Config) int64 {
	e := newEcho(t, cfg)
	defer e.Close()
	return e.pool.HostCopyBytes()
}

func e0PageBytes(t *testing.T, cfg Config) int64 {
	e := newEcho(t, cfg)
	defer e.Close()
	return e.pool.Geometry().PageBytes()
}
