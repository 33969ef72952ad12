package engine

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
)

// stepPositions watches every step of the echo runner and counts, per
// request, the positions computed again (below the highest one computed
// before) and the positions a restart skipped because the prefix cache
// gave them back. It runs on the scheduler goroutine; read it once the
// requests ended.
type stepPositions struct {
	hi, next   map[uint64]int // per request: end of the highest position computed, of its last step
	recomputed int
	reattached int
}

func watchPositions(e *Engine) *stepPositions {
	w := &stepPositions{hi: map[uint64]int{}, next: map[uint64]int{}}
	e.runner.(*echoRunner).afterStep = func(b *model.Batch) {
		for _, s := range b.Seqs {
			req := uint64(s.Table.Request())
			end := s.Table.Written() // advanced over the step's tokens
			start := end - (len(s.Tokens) - s.Draft)
			if start != w.next[req] {
				w.reattached += start // a restart: [0, start) came from the prefix cache
			}
			w.recomputed += max(0, min(end, w.hi[req])-start)
			w.hi[req], w.next[req] = max(w.hi[req], end), end
		}
	}
	return w
}

// Issue 27: RecomputedTokens counts the tokens a preempted request (no
// host tier) actually computes again, not those its re-placement got back
// from the prefix cache. The oracle is the runner's own view of the
// positions each step computes. Three requests outgrow the pool; the two
// of tenant b share their first two pages, so when the newest is
// preempted its prefix stays cached (the other one holds it) and comes
// back on its re-placement.
func TestRecomputedTokensExcludePrefixHits(t *testing.T) {
	shared := tenantPrompt(2, 2, 8)
	prompts := [][]int{
		tenantPrompt(1, 1, 6),
		append(slices.Clone(shared), 40, 41),
		append(slices.Clone(shared), 50, 51),
	}
	tenants := []string{"a", "b", "b"}
	for _, prefix := range []bool{true, false} {
		t.Run(map[bool]string{true: "prefix cache", false: "no prefix cache"}[prefix], func(t *testing.T) {
			cfg := noEOS(echoConfig(t, 12, 4))
			cfg.DisablePrefixCache = !prefix
			e := newEcho(t, cfg)
			w := watchPositions(e)
			// All three are queued before the second step, so they contend.
			entered, release := holdNextStep(t, e)
			defer release()
			st := make([]*Stream, len(prompts))
			for i, p := range prompts {
				var err error
				st[i], err = e.Submit(t.Context(), Request{Tokens: p, MaxTokens: 100, Tenant: tenants[i]})
				require.NoError(t, err)
				if i == 0 {
					<-entered
				}
			}
			release()
			for i, s := range st {
				r := s.Wait()
				require.NoError(t, r.Err, "request %d", i)
				require.Equal(t, echoOracle(prompts[i], 100, e.MaxContext(), false), r.Tokens, "request %d", i)
			}
			s := e.Stats()
			require.NotZero(t, s.Preemptions)
			require.Zero(t, s.SwapOuts)
			require.Positive(t, w.recomputed)
			require.EqualValues(t, w.recomputed, s.RecomputedTokens, "%+v", s)
			if prefix {
				require.Positive(t, w.reattached, "the prefix cache gave a preempted request pages back")
			} else {
				require.Zero(t, w.reattached)
			}
			t.Logf("recomputed %d, re-attached from the prefix cache %d", w.recomputed, w.reattached)
		})
	}
}
