package engine

import (
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Issue 16 item 2: a seal that finds one sequence's own page corrupted ends
// only that sequence. Request a (tenant "alice") has the handoff-sealed
// slots of its partial page corrupted after its prefill to decode handoff;
// two decode steps later the page fills and its seal fails. Request b
// (tenant "bob") decodes in the same step and must finish with its exact
// output; a fails with ErrIsolation; the bad page counts once; and nothing
// a is told names b or bob.
func TestSealFailureEndsOnlyItsSequence(t *testing.T) {
	cfg := noEOS(echoConfig(t, 64, 4))
	var armed atomic.Bool
	armed.Store(true)
	cfg.th().Faults = &Faults{CorruptHandoff: func(id uint64, _ kvcache.PageRef) bool {
		return id == 1 && armed.CompareAndSwap(true, false)
	}}
	e := newEcho(t, cfg)
	pa, pb := tenantPrompt(1, 1, 6), tenantPrompt(2, 2, 6)
	entered, release := holdNextStep(t, e)
	defer release()
	sa, err := e.Submit(t.Context(), Request{Tokens: pa, MaxTokens: 10, Tenant: "alice"})
	require.NoError(t, err)
	<-entered // a's prefill step is running: b joins the steps after it
	sb, err := e.Submit(t.Context(), Request{Tokens: pb, MaxTokens: 10, Tenant: "bob"})
	require.NoError(t, err)
	release()
	ra, rb := sa.Wait(), sb.Wait()

	require.NoError(t, rb.Err, "a healthy request of another tenant in the same step")
	require.Equal(t, echoOracle(pb, 10, e.MaxContext(), false), rb.Tokens)
	require.ErrorIs(t, ra.Err, ErrIsolation)
	require.ErrorIs(t, ra.Err, kvcache.ErrChecksum)
	require.NotContains(t, ra.Err.Error(), "bob")
	require.NotContains(t, ra.Err.Error(), "request "+strconv.FormatUint(rb.ID, 10))
	s := e.Stats()
	require.Equal(t, uint64(1), s.IsolationFailures, "one bad page, one failure")
	require.Equal(t, uint64(1), s.Pool.ChecksumFailures)
	require.Equal(t, 1, s.Pool.Quarantined)
	waitPoolIdle(t, e)
}

// Issue 16 item 1: a swap round trip must not launder corruption of the
// handoff-sealed slots of a partial page. The reproduction of the audit: 6
// pages of 8 tokens, a host tier, three tenants with prompts of 7, 8 and 17
// tokens; one value in a handoff-checksummed slot of the 17-token request's
// partial page is flipped as it enters decoding, and the request is swapped
// out by the pool pressure that follows. The copy-out verifies the handoff
// checksum, so the flip is detected (counted, page quarantined). With
// KVChecksum=step every read was verified first, so the request recomputes
// and gets its exact output; with handoff it may already have read the bad
// slots and fails with ErrIsolation. It never succeeds with wrong tokens.
func TestSwapDoesNotLaunderPartialPageCorruption(t *testing.T) {
	for _, mode := range []Checksum{ChecksumHandoff, ChecksumStep} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := noEOS(echoConfig(t, 6, 8))
			cfg.HostTierBytes = 1 << 20
			cfg.KVChecksum = mode
			cfg.DisablePrefixCache = true
			var victim atomic.Uint64
			var hits atomic.Int32
			cfg.th().Faults = &Faults{CorruptHandoff: func(id uint64, _ kvcache.PageRef) bool {
				return id == victim.Load() && hits.Add(1) == 1
			}}
			e := newEcho(t, cfg)
			prompts := [][]int{tenantPrompt(1, 1, 7), tenantPrompt(2, 2, 8), tenantPrompt(3, 3, 17)}
			const maxTokens = 14
			entered, release := holdNextStep(t, e)
			defer release()
			var streams []*Stream
			for i, p := range prompts {
				st, err := e.Submit(t.Context(), Request{Tokens: p, MaxTokens: maxTokens, Tenant: "t" + strconv.Itoa(i)})
				require.NoError(t, err)
				streams = append(streams, st)
				if i == 0 {
					<-entered // the others queue behind the first step
				}
			}
			victim.Store(streams[2].ID())
			release()
			for i, st := range streams {
				r := st.Wait()
				want := echoOracle(prompts[i], maxTokens, e.MaxContext(), false)
				if r.Err == nil {
					require.Equal(t, want, r.Tokens, "request %d succeeded with tokens that are not its own", i)
					continue
				}
				require.Equal(t, 2, i, "only the corrupted request may fail: %v", r.Err)
				require.Equal(t, ChecksumHandoff, mode, "with step verification the request recomputes: %v", r.Err)
				require.ErrorIs(t, r.Err, ErrIsolation)
			}
			s := e.Stats()
			require.NotZero(t, hits.Load(), "the fault fired")
			require.NotZero(t, s.Preemptions, "the corrupted request must meet a swap")
			require.NotZero(t, s.Pool.ChecksumFailures, "the flip must be detected")
			require.Equal(t, 1, s.Pool.Quarantined)
			if mode == ChecksumStep {
				require.NotZero(t, s.Recoveries)
			}
			waitPoolIdle(t, e)
		})
	}
}

// Issue 16 item 4: a hit must compare tokens, not trust a 64-bit parent
// hash. With a weak page hash (the last token of the page, chained), two
// first pages that differ but end alike collide. Request w caches
// [T' Y]; its first page is then dropped from the cache, so request b's
// [T ...] caches its own first page under the colliding key while w's
// second page (computed over T') stays. Request c, [T Y ...], must not
// reuse that page: its parent hash matches, its parent does not.
func TestPrefixCollisionNeverReused(t *testing.T) {
	old := pageHash
	pageHash = func(parent uint64, page []int) uint64 { return parent*1_000_003 + uint64(page[len(page)-1]) }
	t.Cleanup(func() { pageHash = old })
	e := newEcho(t, noEOS(echoConfig(t, 64, 4)))
	bos := tenantPrompt(1, 1, 1)
	T := append(bos, 11, 12, 13)
	T2 := append(slices.Clone(bos), 21, 22, 13) // same last token as T
	Y := []int{31, 32, 33, 34}
	gen := func(p []int) Result {
		r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 4, Tenant: "t"})
		require.NoError(t, err)
		require.Equal(t, echoOracle(p, 4, e.MaxContext(), false), r.Tokens, "output is not the request's own")
		return r
	}
	gen(slices.Concat(T2, Y, []int{40}))
	waitPoolIdle(t, e)
	c := prefixCacheOf(t, e)
	for _, el := range c.entries {
		if ent := el.Value.(*prefixEntry); slices.Equal(ent.tokens, T2) {
			c.remove(el)
		}
	}
	gen(slices.Concat(T, []int{50}))
	r := gen(slices.Concat(T, Y, []int{60}))
	require.Equal(t, 4, r.CachedTokens, "only the first page, whose tokens match, is reused")
	waitPoolIdle(t, e)
}
