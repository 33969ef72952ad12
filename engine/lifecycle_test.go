package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// pressureConfig: 8 pages of 4 tokens (32 tokens), MaxContext 32: two
// requests that each grow to 32 tokens cannot both hold their pages, so the
// newer one is preempted.
func pressureConfig(t *testing.T, hostTier bool) Config {
	cfg := noEOS(echoConfig(t, 8, 4))
	cfg.Poison = true
	if hostTier {
		cfg.HostTierBytes = 1 << 20
	}
	return cfg
}

func runPair(t *testing.T, e *Engine) (Result, Result) {
	pa, pb := tenantPrompt(1, 1, 6), tenantPrompt(2, 2, 6)
	// b is submitted while a's first step is still running, so a cannot
	// finish alone on a fast machine and the pair always contends.
	entered, release := holdNextStep(t, e)
	defer release()
	sa, err := e.Submit(t.Context(), Request{Tokens: pa, MaxTokens: 100, Tenant: "a"})
	require.NoError(t, err)
	<-entered
	sb, err := e.Submit(t.Context(), Request{Tokens: pb, MaxTokens: 100, Tenant: "b"})
	require.NoError(t, err)
	release()
	ra, rb := sa.Wait(), sb.Wait()
	return ra, rb
}

func TestPreemptionSwapRestoresExactly(t *testing.T) {
	e := newEcho(t, pressureConfig(t, true))
	ra, rb := runPair(t, e)
	require.NoError(t, ra.Err)
	require.NoError(t, rb.Err)
	require.Equal(t, echoOracle(tenantPrompt(1, 1, 6), 100, 32, false), ra.Tokens)
	require.Equal(t, echoOracle(tenantPrompt(2, 2, 6), 100, 32, false), rb.Tokens)
	require.Equal(t, "length", ra.FinishReason)
	require.Len(t, ra.Tokens, 26, "finishes at MaxContext")
	s := e.Stats()
	require.NotZero(t, s.SwapOuts, "%+v", s)
	require.Equal(t, s.SwapOuts, s.SwapIns)
	require.Zero(t, s.IsolationFailures)
	waitPoolIdle(t, e)
}

func TestPreemptionRecomputeExactly(t *testing.T) {
	e := newEcho(t, pressureConfig(t, false))
	ra, rb := runPair(t, e)
	require.NoError(t, ra.Err)
	require.NoError(t, rb.Err)
	require.Equal(t, echoOracle(tenantPrompt(1, 1, 6), 100, 32, false), ra.Tokens)
	require.Equal(t, echoOracle(tenantPrompt(2, 2, 6), 100, 32, false), rb.Tokens)
	s := e.Stats()
	require.NotZero(t, s.Preemptions)
	require.Zero(t, s.SwapOuts)
	require.NotZero(t, s.RecomputedTokens)
	waitPoolIdle(t, e)
}

// No deadlock when the queue needs far more than the pool: only each
// single request must fit.
func TestQueueLargerThanPool(t *testing.T) {
	for _, host := range []bool{false, true} {
		e := newEcho(t, pressureConfig(t, host))
		parallel(t, 24, func(i int) error {
			p := tenantPrompt(i%3, i, 3+i%7)
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 1000, Tenant: string(rune('a' + i%3))})
			if err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
			return sameTokens(fmt.Sprintf("request %d", i), echoOracle(p, 1000, 32, false), r.Tokens)
		})
		waitPoolIdle(t, e)
	}
}

// Abort in every lifecycle state: the request ends with ErrAborted, never
// produces tokens after the abort, and every page and host copy comes back.
func TestAbortInEveryState(t *testing.T) {
	for _, state := range []State{StateWaiting, StatePrefilling, StateDecoding, StateSwapped} {
		t.Run(state.String(), func(t *testing.T) {
			cfg := pressureConfig(t, true)
			var victim atomic.Uint64
			cfg.th().Faults = &Faults{AbortAt: func(id uint64, st State) bool {
				return id == victim.Load() && st == state
			}}
			e := newEcho(t, cfg)
			// The victim is the newer request of a pair, so it is the one
			// preempted (swapped) when the pool runs out.
			victim.Store(2)
			before := e.pool.Stats().Allocs
			ra, rb := runPair(t, e)
			require.NoError(t, ra.Err)
			require.Equal(t, echoOracle(tenantPrompt(1, 1, 6), 100, 32, false), ra.Tokens)
			require.Equal(t, uint64(2), rb.ID)
			require.ErrorIs(t, rb.Err, ErrAborted)
			require.Equal(t, "abort", rb.FinishReason)
			// Whatever it produced before the abort is a prefix of its oracle.
			want := echoOracle(tenantPrompt(2, 2, 6), 100, 32, false)
			require.Equal(t, want[:len(rb.Tokens)], rb.Tokens)
			switch state {
			case StateWaiting:
				require.Empty(t, rb.Tokens)
			case StatePrefilling:
				require.Empty(t, rb.Tokens)
			case StateSwapped:
				require.NotZero(t, e.Stats().SwapOuts)
			}
			waitPoolIdle(t, e)
			if state == StateWaiting {
				// Only A allocated.
				require.LessOrEqual(t, e.pool.Stats().Allocs-before, uint64(8))
			}
		})
	}
}

// Abort while the swap-out copy is in flight: the pages hold a copy lease
// and do not come back before the copy completes.
func TestAbortDuringSwapOut(t *testing.T) {
	cfg := pressureConfig(t, true)
	var e *Engine
	var checked atomic.Int32
	var mu sync.Mutex
	var bad []string
	cfg.th().Faults = &Faults{Pool: &kvcache.Faults{
		CopyDelay: func(ref kvcache.PageRef) time.Duration {
			info, err := e.pool.Info(ref)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || info.State == kvcache.PageFree || info.Leases[kvcache.LeaseCopy] == 0 {
				bad = append(bad, ref.String())
			}
			if checked.Add(1) == 1 {
				_ = e.Abort(uint64(info.Owner))
			}
			return 2 * time.Millisecond
		},
	}}
	e = newEcho(t, cfg)
	ra, rb := runPair(t, e)
	require.NoError(t, ra.Err)
	require.NotZero(t, checked.Load(), "a swap happened")
	require.Empty(t, bad, "a page under copy was free or unleased")
	require.ErrorIs(t, rb.Err, ErrAborted)
	waitPoolIdle(t, e)
}

// Abort around a restore: requested while the restore is starting (from
// inside the pool's allocation hook) and right after it (at the state the
// restore enters). The restore copy completes and is verified; then the
// pages go back through release.
func TestAbortDuringRestore(t *testing.T) {
	for _, mode := range []string{"inside", "after"} {
		t.Run(mode, func(t *testing.T) {
			cfg := pressureConfig(t, true)
			var e *Engine
			var swapped, fired atomic.Bool
			cfg.th().Faults = &Faults{
				AbortAt: func(id uint64, st State) bool {
					if id != 2 {
						return false
					}
					if st == StateSwapped {
						swapped.Store(true)
						return false
					}
					return mode == "after" && swapped.Load() && (st == StateDecoding || st == StatePrefilling)
				},
				Pool: &kvcache.Faults{FailAlloc: func() bool {
					if mode == "inside" && swapped.Load() && !fired.Load() {
						fired.Store(true)
						_ = e.Abort(2)
					}
					return false
				}},
			}
			e = newEcho(t, cfg)
			ra, rb := runPair(t, e)
			require.NoError(t, ra.Err)
			require.True(t, swapped.Load())
			require.ErrorIs(t, rb.Err, ErrAborted)
			want := echoOracle(tenantPrompt(2, 2, 6), 100, 32, false)
			require.Equal(t, want[:len(rb.Tokens)], rb.Tokens)
			waitPoolIdle(t, e)
		})
	}
}

// Cancelling the context of a decoding request aborts it at the next step.
func TestContextCancelWhileDecoding(t *testing.T) {
	cfg := noEOS(echoConfig(t, 64, 4))
	gate := make(chan struct{})
	var once sync.Once
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, false)
		r.afterStep = func(*model.Batch) {
			if r.steps == 3 {
				once.Do(func() { <-gate })
			}
		}
		return r, err
	}
	e := newEcho(t, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	st, err := e.Submit(ctx, Request{Tokens: tenantPrompt(1, 1, 5), MaxTokens: 200})
	require.NoError(t, err)
	ev := <-st.Events()
	require.False(t, ev.Done)
	cancel()
	// The abort is either still queued for the scheduler (held at step 3)
	// or the scheduler already took it at an earlier step boundary and
	// ended the request: either way it has reached the engine. Polling the
	// queue alone raced with a scheduler that drained it first.
	require.Eventually(t, func() bool {
		select {
		case <-st.Done():
			return true
		default:
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.aborts) > 0
	}, 30*time.Second, time.Millisecond)
	close(gate)
	r := st.Wait()
	require.ErrorIs(t, r.Err, ErrAborted)
	require.Less(t, len(r.Tokens), 10)
	waitPoolIdle(t, e)
}

// A page corrupted after it was sealed during prefill is caught before the
// request can produce a token: at the prefill to decode handoff (default),
// or at the very next step (KVChecksum=step). The page is quarantined and
// counted, and the request, which never read it, is recomputed from its
// tokens and gets its exact output (detect, then recover). A request that
// keeps meeting corruption fails with ErrIsolation and no token after
// maxRecomputes.
func TestCorruptSealedPageDetected(t *testing.T) {
	for _, mode := range []Checksum{ChecksumHandoff, ChecksumStep} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := noEOS(echoConfig(t, 64, 4))
			cfg.MaxBatchTokens = 8
			cfg.KVChecksum = mode
			var victim atomic.Uint64
			victim.Store(1)
			cfg.th().Faults = &Faults{CorruptSealed: func(id uint64, ref kvcache.PageRef) bool {
				return id == victim.Load() && victim.CompareAndSwap(id, 0)
			}}
			e := newEcho(t, cfg)
			p := tenantPrompt(1, 1, 20)
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5})
			require.NoError(t, err)
			require.Equal(t, echoOracle(p, 5, e.MaxContext(), false), r.Tokens)
			s := e.Stats()
			require.Zero(t, s.IsolationFailures)
			require.Equal(t, uint64(1), s.Recoveries)
			require.Equal(t, uint64(1), s.Pool.ChecksumFailures)
			require.Equal(t, 1, s.Pool.Quarantined)
			waitPoolIdle(t, e)
		})
		t.Run(mode.String()+"/always", func(t *testing.T) {
			cfg := noEOS(echoConfig(t, 64, 4))
			cfg.MaxBatchTokens = 8
			cfg.KVChecksum = mode
			cfg.DisablePrefixCache = true
			cfg.th().Faults = &Faults{CorruptSealed: func(id uint64, ref kvcache.PageRef) bool { return id == 1 }}
			e := newEcho(t, cfg)
			p := tenantPrompt(1, 1, 20)
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5})
			require.ErrorIs(t, err, ErrIsolation)
			require.Empty(t, r.Tokens, "no token from corrupted KV")
			s := e.Stats()
			require.Equal(t, uint64(1), s.IsolationFailures)
			require.Equal(t, uint64(maxRecomputes), s.Recoveries)
			r, err = e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 5})
			require.NoError(t, err)
			require.Equal(t, echoOracle(p, 5, e.MaxContext(), false), r.Tokens)
			waitPoolIdle(t, e)
		})
	}
}

// When quarantine shrinks the pool below what a request needs, the request
// fails loudly with ErrNoPages instead of the scheduler thrashing forever.
func TestQuarantineShrinksPoolFailsLoudly(t *testing.T) {
	cfg := pressureConfig(t, false)
	var mu sync.Mutex
	hit := map[uint64]bool{}
	cfg.th().Faults = &Faults{CorruptSealed: func(id uint64, ref kvcache.PageRef) bool {
		mu.Lock()
		defer mu.Unlock()
		if id > 3 || hit[id] {
			return false
		}
		hit[id] = true // one page of each of the first three requests
		return true
	}}
	e := newEcho(t, cfg)
	for i := range 3 {
		// Each corrupted page is caught before use; the request recomputes.
		p := tenantPrompt(1, i, 9)
		r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 2})
		require.NoError(t, err)
		require.Equal(t, echoOracle(p, 2, e.MaxContext(), true), r.Tokens)
	}
	require.Equal(t, 3, e.Stats().Pool.Quarantined)
	require.Equal(t, uint64(3), e.Stats().Recoveries)
	// 5 usable pages (20 tokens): a request that may grow to 32 tokens fails,
	// a small one still runs.
	_, err := e.Generate(t.Context(), Request{Tokens: tenantPrompt(1, 9, 6), MaxTokens: 100})
	require.ErrorIs(t, err, kvcache.ErrNoPages)
	require.Contains(t, err.Error(), "quarantined")
	p := tenantPrompt(1, 10, 6)
	r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 10})
	require.NoError(t, err)
	require.Equal(t, echoOracle(p, 10, 32, false), r.Tokens)
}
