package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// idleWaits records the scheduler's idle waits (idleWaitHook) from the
// moment it is installed until the test's cleanup. Install it before the
// engine is made, so its cleanup runs after the engine's Close.
type idleWaits struct {
	polls, wakes atomic.Int64
	first        chan struct{} // closed at the first idle wait
	once         sync.Once
	also         func(poll bool) // runs on the scheduler goroutine after counting
}

func watchIdleWaits(t *testing.T) *idleWaits {
	w := &idleWaits{first: make(chan struct{})}
	old := idleWaitHook
	idleWaitHook = func(poll bool) {
		if poll {
			w.polls.Add(1)
		} else {
			w.wakes.Add(1)
		}
		w.once.Do(func() { close(w.first) })
		if w.also != nil {
			w.also(poll)
		}
	}
	t.Cleanup(func() { idleWaitHook = old })
	return w
}

// Issue 27: while alice's prefix read from the disk tier is held in the
// file system and nothing else can run, the scheduler sleeps until the
// reader's completion wakes it. It does not poll: its idle wait is a wait
// for the wake-up, and its loop does not turn while the read is held (a
// 1 ms poll would turn it once a millisecond for as long as the test
// holds the read). Once released, alice gets her prefix from disk with
// the exact output.
func TestDiskReadWaitWakesNotPolls(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 27)
	r1 := seedDisk(t, dir, key)
	gate := newGateFS(t, true, false)
	w := watchIdleWaits(t)
	e := newEcho(t, diskConfig(t, dir, key))
	t.Cleanup(gate.open) // before the engine closes, should the test fail

	alice, err := e.Submit(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	within(t, gate.entered, "alice's disk read")
	within(t, w.first, "the scheduler's idle wait for the read")
	before := e.sched.loops.Load()
	// A round trip through the scheduler while the read is held: the
	// erasure wakes the loop once, and the loop goes back to waiting for
	// the read's wake-up, not to a poll.
	_, err = e.EraseTenantKV(t.Context(), "carol")
	require.NoError(t, err)
	held := e.sched.loops.Load() - before
	polls := w.polls.Load()
	gate.open()

	ra := alice.Wait()
	require.NoError(t, ra.Err)
	require.Equal(t, r1.Tokens, ra.Tokens)
	require.Equal(t, 24, ra.CachedTokens, "alice's prefix from disk")
	require.Zero(t, polls, "the scheduler polled while the read was held")
	require.Positive(t, w.wakes.Load())
	require.Less(t, held, uint64(10), "scheduler loop iterations while the read was held")
	s := e.Stats()
	require.Positive(t, s.Disk.Hits)
	require.Zero(t, s.BookkeepingErrors)
}

// The same for a swap-in: request 3's restore copy is held; once nothing
// else can run, the scheduler waits for the copy's wake-up (no poll). The
// copy is released once both happened, in either order: the scheduler
// waits while the copy is held, with nothing but the copy to wake it.
// Every result is exact.
func TestSwapInWaitWakesNotPolls(t *testing.T) {
	gate := newCopyGate()
	var e *Engine
	cfg := asyncTierConfig(t)
	cfg.th().Faults = &Faults{Pool: &kvcache.Faults{HoldCopy: func(ref kvcache.PageRef) {
		// A restore copy goes into a fresh page with nothing written yet.
		if info, err := e.pool.Info(ref); err == nil && info.Owner == 3 && info.Written == 0 {
			gate.hold(ref)
		}
	}}}
	var mu sync.Mutex
	var waited, held bool
	both := func(set *bool) {
		mu.Lock()
		*set = true
		if waited && held {
			gate.release()
		}
		mu.Unlock()
	}
	gate.onHold = func(kvcache.PageRef) { both(&held) }
	w := watchIdleWaits(t)
	var heldWaits []bool // the poll flag of each idle wait while the restore was in flight and held
	w.also = func(poll bool) {
		select {
		case <-gate.open:
			return
		default:
		}
		// On the scheduler goroutine: its state is ours to read here.
		if s3 := e.sched.byID[3]; s3 != nil && s3.restoring != nil {
			heldWaits = append(heldWaits, poll)
			both(&waited)
		}
	}
	e = newEcho(t, cfg)
	t.Cleanup(gate.release)
	gate.armed.Store(true)

	tr := newTrio()
	res := tr.run(t, e)
	gate.release()
	for i, rs := range res {
		require.NoError(t, rs.Err, "request %d", i)
		require.Equal(t, echoOracle(tr.prompts[i], tr.max[i], 32, false), rs.Tokens, "request %d", i)
	}
	require.NotEmpty(t, gate.heldRefs(), "a restore copy went through the gate")
	// heldWaits was written on the scheduler goroutine before the results
	// were delivered.
	require.NotEmpty(t, heldWaits, "the scheduler waited while the restore was held")
	require.NotContains(t, heldWaits, true, "the scheduler polled while the restore was held")
	require.Less(t, len(heldWaits), 10)
	s := e.Stats()
	require.Equal(t, s.SwapOuts, s.SwapIns)
	require.Zero(t, s.BookkeepingErrors)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// logRecords is a slog.Handler that keeps the level and message of every
// record, at every level.
type logRecords struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, logRecord{r.Level, r.Message})
	return nil
}

// count is the number of records at level whose message contains sub.
func (h *logRecords) count(level slog.Level, sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.level == level && strings.Contains(r.msg, sub) {
			n++
		}
	}
	return n
}

// Issue 27: a preemption that finds the host tier full recomputes, which
// is expected under load: counted in SwapFails and logged at Debug. A
// swap-out that really failed (its copies failed) still warns.
func TestSwapFailLogLevels(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hostBytes   int64
		failCopy    bool
		debug, warn bool
	}{
		// Smaller than one page's copy: every swap-out finds it full.
		{name: "host tier full", hostBytes: 1, debug: true},
		{name: "copy fails", hostBytes: 1 << 20, failCopy: true, warn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logRecords{}
			cfg := asyncTierConfig(t)
			cfg.HostTierBytes = tc.hostBytes
			cfg.Logger = slog.New(logs)
			if tc.failCopy {
				cfg.th().Faults = &Faults{Pool: &kvcache.Faults{FailCopy: func(kvcache.PageRef) error {
					return errors.New("injected copy failure")
				}}}
			}
			e := newEcho(t, cfg)
			tr := newTrio()
			res := tr.run(t, e)
			for i, rs := range res {
				require.NoError(t, rs.Err, "request %d", i)
				require.Equal(t, echoOracle(tr.prompts[i], tr.max[i], 32, false), rs.Tokens, "request %d", i)
			}
			s := e.Stats()
			require.Positive(t, s.SwapFails, "%+v", s)
			require.Zero(t, s.SwapIns)
			debug := logs.count(slog.LevelDebug, "host tier full")
			warn := logs.count(slog.LevelWarn, "swap out failed")
			if tc.debug {
				require.EqualValues(t, s.SwapFails, debug, "one debug record per swap-out that found the host tier full")
			} else {
				require.Zero(t, debug)
			}
			if tc.warn {
				require.EqualValues(t, s.SwapFails, warn, "one warning per failed swap-out")
			} else {
				require.Zero(t, warn, "no warning for a full host tier")
			}
		})
	}
}
