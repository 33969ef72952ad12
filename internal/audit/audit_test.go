package audit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

func TestEchoRule(t *testing.T) {
	const sep = 99
	// BOS 1, prompt 5 6 7, sep: the output cycles 5 6 7.
	require.Equal(t, []int{5, 6, 7, 5, 6, 7, 5}, EchoOutput([]int{1, 5, 6, 7, sep}, sep, 7))
	// No separator: the last token repeats.
	require.Equal(t, []int{7, 7, 7}, EchoOutput([]int{1, 5, 6, 7}, sep, 3))
	// EOS stops it.
	require.Equal(t, []int{5}, EchoOutput([]int{1, 5, 2, sep}, sep, 5, 2))
	// The rule only depends on the context: continuing from any point of
	// the output gives the rest of it.
	p := []int{1, 4, 8, 15, 16, 23, 42, sep}
	out := EchoOutput(p, sep, 20)
	for k := range out {
		ctx := append(append([]int(nil), p...), out[:k]...)
		require.Equal(t, out[k], EchoNext(ctx, sep))
	}
}

func TestAuditClean(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Echo: true, Tenants: 6, PerTenant: 5, Rounds: 2})
	require.NoError(t, err)
	for _, c := range rep.Checks {
		t.Logf("%-4s %s: %s", c.Status, c.Name, c.Detail)
	}
	require.True(t, rep.Clean, "examples: %v", rep.Examples)
	require.Equal(t, 60, rep.Tried.Requests)
	require.Equal(t, rep.Tried.OverLength, rep.Tried.OverLengthRejected)
	require.Equal(t, rep.Tried.OtherRejections, rep.Tried.OtherRejected)
	require.Zero(t, rep.Tried.CrossTenant)
	require.Zero(t, rep.Tried.Mismatched)
	require.Positive(t, rep.Tried.Aborted, "aborts mid-stream")
	require.Positive(t, rep.Engine.Preemptions, "the audit's pool must force preemption")
	require.Positive(t, rep.Engine.SwapOuts, "and host offload")
	require.Zero(t, rep.Engine.IsolationFailures+rep.Engine.IsolationViolations+rep.Engine.ChecksumFailures)
	require.Zero(t, rep.Engine.LeakedPages)
	require.True(t, rep.Config.PoolChosen)
}

// TestAuditCatchesForeignRead injects a fault that makes one request read
// a page another tenant wrote (around its page table, as a page-table bug
// would): the audit must not be clean.
func TestAuditCatchesForeignRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Echo: true, Fault: FaultForeignRead, Tenants: 6, PerTenant: 5, Rounds: 1})
	require.NoError(t, err)
	require.False(t, rep.Clean)
	require.NotZero(t, rep.Victim, "the fault must have fired")
	require.Positive(t, rep.Tried.CrossTenant, "the foreign read must show as cross-tenant content")
	require.NotEmpty(t, rep.Examples)
	failed := map[string]bool{}
	for _, c := range rep.Checks {
		if c.Status == Fail {
			failed[c.Name] = true
		}
	}
	require.True(t, failed["isolation: cross-tenant content"], "%v", rep.Checks)
	require.True(t, failed["isolation: exact echo oracle"], "%v", rep.Checks)
}

func TestAuditReportsRefusedConfig(t *testing.T) {
	rep, err := Run(context.Background(), Options{Echo: true, Config: engine.Config{KVPages: 4, PageSize: 16, MaxContext: 1024}})
	require.NoError(t, err)
	require.False(t, rep.Clean)
	require.Contains(t, rep.Config.StartupError, "1024")
}
