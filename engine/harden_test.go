package engine

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/kvcache"
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
	cfg.Faults = &Faults{CorruptHandoff: func(id uint64, _ kvcache.PageRef) bool {
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
