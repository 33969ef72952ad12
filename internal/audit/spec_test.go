package audit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// TestAuditCleanWithSpeculation runs the canary workload (many tenants,
// aborts, over-length requests, preemption with swap and recompute,
// prefix sharing; a small pool with a host tier for pressure; preemption
// with drafts in flight is covered deterministically by the engine's
// TestSpecUnderPreemption) with n-gram speculation: the echo model's output cycles
// through its prompt, so most drafts are accepted, and every output is
// still exactly the echo oracle's with no page leaked.
func TestAuditCleanWithSpeculation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sp := engine.Speculative{Type: engine.SpecNgram, DraftMax: 6}
	rep, err := Run(ctx, Options{Echo: true, Tenants: 6, PerTenant: 5, Rounds: 2, MaxTokens: 40, Config: engine.Config{Speculative: sp, ZeroOnRelease: true, KVPages: 12, MaxContext: 128, HostTierBytes: 16 << 20}})
	require.NoError(t, err)
	for _, c := range rep.Checks {
		t.Logf("%-4s %s: %s", c.Status, c.Name, c.Detail)
	}
	require.True(t, rep.Clean, "examples: %v", rep.Examples)
	require.Zero(t, rep.Tried.Mismatched)
	require.Zero(t, rep.Engine.LeakedPages)
	require.Positive(t, rep.Engine.AcceptedTokens, "drafts accepted")
	require.Less(t, rep.Engine.AcceptedTokens, rep.Engine.DraftTokens, "and some rejected")
	t.Logf("drafted %d, accepted %d", rep.Engine.DraftTokens, rep.Engine.AcceptedTokens)

	// The injected foreign read is still caught.
	rep, err = Run(ctx, Options{Echo: true, Fault: FaultForeignRead, Tenants: 6, PerTenant: 5, Rounds: 1, Config: engine.Config{Speculative: sp}})
	require.NoError(t, err)
	require.False(t, rep.Clean)
	require.Positive(t, rep.Tried.CrossTenant)
}
