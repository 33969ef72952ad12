package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// archEngine opens a golden/arch model on the CPU.
func archEngine(t *testing.T, path string, mut func(*Config), opts ...Option) *Engine {
	t.Helper()
	cfg := Config{ModelPath: path, Device: "cpu", KVPages: 64, MaxContext: 128, Poison: true}
	if mut != nil {
		mut(&cfg)
	}
	e, err := New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// TestGoldenArchThroughEngine runs every file of ../shared/golden/arch
// through the engine: each prompt alone (F32 files: llama.cpp's 32 tokens),
// then all prompts twice at once in a pool too small for them, so that the
// scheduler preempts and swaps sequences to the host tier and back, with
// a step budget that splits prefills into chunks (8 and 24 tokens; 8 only
// for the quantized files): every request must produce the tokens it
// produced alone. Under the race detector the quantized files other than
// Q8_0 are skipped (plain-Go K-quant products are ten times slower there);
// scripts/test.sh runs them without it.
func TestGoldenArchThroughEngine(t *testing.T) {
	names := make([]string, 0, len(testmodels.ArchF32)+len(testmodels.ArchQuantTypes))
	for _, m := range testmodels.ArchF32 {
		names = append(names, m.Name)
	}
	for _, q := range testmodels.ArchQuantFiles() {
		names = append(names, q.Name)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			g := testmodels.LoadArchGolden(t, name)
			if testmodels.Race && g.QuantType != "" && g.QuantType != "Q8_0" {
				t.Skip("numerics only; run without -race (scripts/test.sh does)")
			}
			alone := archEngine(t, g.Model, nil)
			want := make([][]int, len(g.Cases))
			for i, c := range g.Cases {
				r, err := alone.Generate(t.Context(), Request{Tokens: c.Prompt, MaxTokens: len(c.Generated)})
				require.NoError(t, err)
				want[i] = r.Tokens
				if g.QuantType == "" {
					require.Equal(t, c.Generated, r.Tokens, "case %d alone", i)
				}
			}
			// The long-context files' prompts run to 70 tokens, past their
			// original context of 64 (102 tokens with the continuation).
			maxCtx := 96
			for _, c := range g.Cases {
				maxCtx = max(maxCtx, len(c.Prompt)+len(c.Generated))
			}
			budgets := []int{8, 24}
			if g.QuantType != "" {
				budgets = budgets[:1]
			}
			for _, budget := range budgets {
				// 8 pages of 16 tokens: the 72-token requests need 5 each.
				// The scheduler is held at its first state change until
				// every request is queued: requests that trickle in while
				// the others finish (each takes a few milliseconds) would
				// never contend for pages, and the swaps below would
				// depend on timing.
				gate := make(chan struct{})
				hold := WithTestHooks(TestHooks{Faults: &Faults{AbortAt: func(uint64, State) bool {
					<-gate
					return false
				}}})
				// The long-context files have 102-token requests (7 pages).
				maxCtx := 96
				for _, c := range g.Cases {
					maxCtx = max(maxCtx, len(c.Prompt)+len(c.Generated))
				}
				e := archEngine(t, g.Model, func(c *Config) {
					c.KVPages, c.HostTierBytes, c.MaxBatchTokens, c.MaxContext = 8, 16<<20, budget, maxCtx
				}, hold)
				var streams []*Stream
				var idx []int
				for k := range 2 {
					for i, c := range g.Cases {
						st, err := e.Submit(t.Context(), Request{Tokens: c.Prompt, MaxTokens: len(c.Generated), Tenant: string(rune('a' + k))})
						require.NoError(t, err)
						streams, idx = append(streams, st), append(idx, i)
					}
				}
				close(gate)
				for j, st := range streams {
					r := st.Wait()
					require.NoError(t, r.Err)
					require.Equal(t, want[idx[j]], r.Tokens, "request %d (case %d) budget %d finish %s", j, idx[j], budget, r.FinishReason)
				}
				s := e.Stats()
				require.NotZero(t, s.SwapIns, "budget %d: %+v", budget, s)
				require.Zero(t, s.IsolationFailures)
			}
		})
	}
}
