package engine

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// copyGate holds every host-tier copy of the pool from the moment it is
// armed until it is opened, so a test decides when a swap-out completes.
// The scheduler must keep stepping meanwhile: it never waits on a copy.
type copyGate struct {
	armed  atomic.Bool
	open   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	held   []kvcache.PageRef // pages whose copy entered the gate
	onHold func(ref kvcache.PageRef)
}

func newCopyGate() *copyGate { return &copyGate{open: make(chan struct{})} }

func (g *copyGate) hold(ref kvcache.PageRef) {
	if !g.armed.Load() {
		return
	}
	g.mu.Lock()
	g.held = append(g.held, ref)
	first := len(g.held) == 1
	g.mu.Unlock()
	if first && g.onHold != nil {
		g.onHold(ref)
	}
	// The limit only matters when the scheduler is broken (it would never
	// step while the copy is held): the test then fails on its counts
	// instead of hanging.
	select {
	case <-g.open:
	case <-time.After(10 * time.Second):
	}
}

func (g *copyGate) release() { g.once.Do(func() { close(g.open) }) }

func (g *copyGate) heldRefs() []kvcache.PageRef {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]kvcache.PageRef(nil), g.held...)
}

// asyncTierConfig: 8 pages of 4 tokens and a host tier. Three requests
// grow past the pool, so the newest is swapped out while an older one,
// whose pages run out a step later (its prompt is one token longer), keeps
// decoding.
func asyncTierConfig(t *testing.T) Config {
	cfg := pressureConfig(t, true)
	cfg.DisablePrefixCache = true // only swap-out copies go through the gate
	return cfg
}

type trio struct {
	prompts [3][]int
	tenants [3]string
	max     [3]int
}

func newTrio() trio {
	return trio{
		prompts: [3][]int{tenantPrompt(1, 1, 6), tenantPrompt(3, 3, 5), tenantPrompt(2, 2, 6)},
		tenants: [3]string{"a", "c", "b"},
		max:     [3]int{100, 100, 100},
	}
}

// run submits the three requests so that they are placed together (IDs 1,
// 2, 3 in order) and waits for their results.
func (tr trio) run(t *testing.T, e *Engine) [3]Result {
	entered, release := holdNextStep(t, e)
	defer release()
	var st [3]*Stream
	var err error
	st[0], err = e.Submit(t.Context(), Request{Tokens: tr.prompts[0], MaxTokens: tr.max[0], Tenant: tr.tenants[0]})
	require.NoError(t, err)
	<-entered
	for i := 1; i < 3; i++ {
		st[i], err = e.Submit(t.Context(), Request{Tokens: tr.prompts[i], MaxTokens: tr.max[i], Tenant: tr.tenants[i]})
		require.NoError(t, err)
	}
	release()
	var out [3]Result
	for i := range st {
		out[i] = st[i].Wait()
	}
	return out
}

// Issue 13 item 5: while a swap-out's copies are in flight the scheduler
// keeps stepping the other requests, the swapped request's pages stay
// leased and are handed to nobody (invariant 5), and the results are token
// for token those of a run without preemption.
func TestSwapOutInFlightKeepsStepping(t *testing.T) {
	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) { testSwapOutInFlight(t, abort) })
	}
}

// With abort, request 3 is aborted while its copies are held: the abort
// cancels the swap-out at the next step boundary, and its pages still
// stay out of circulation until the copies complete; then everything
// comes back exactly once.
func testSwapOutInFlight(t *testing.T, abort bool) {
	gate := newCopyGate()
	cfg := asyncTierConfig(t)
	cfg.th().Faults = &Faults{Pool: &kvcache.Faults{HoldCopy: gate.hold}}
	e := newEcho(t, cfg)
	gate.armed.Store(true)

	var stepsHeld int
	var violations []string
	var bRefs []kvcache.PageRef // request 3's pages as of its last step
	r := e.runner.(*echoRunner)
	r.afterStep = func(b *model.Batch) {
		select {
		case <-gate.open:
			return
		default:
		}
		// SwapOuts counts on the scheduler goroutine when a swap-out
		// starts; the copies cannot complete before the gate opens.
		if e.Stats().SwapOuts == 0 {
			for _, s := range b.Seqs {
				if s.Table.Request() == 3 {
					bRefs = s.Table.Refs()
				}
			}
			return
		}
		stepsHeld++
		if abort && stepsHeld == 1 {
			if err := e.Abort(3); err != nil {
				violations = append(violations, "abort: "+err.Error())
			}
		}
		for _, s := range b.Seqs {
			if s.Table.Request() == 3 {
				violations = append(violations, "the swapping request stepped")
			}
		}
		for _, ref := range bRefs {
			info, err := e.pool.Info(ref)
			if err != nil || info.State == kvcache.PageFree || info.Leases[kvcache.LeaseCopy] == 0 || info.Owner != 3 {
				violations = append(violations, fmt.Sprintf("%v: %v %+v", ref, err, info))
			}
			for _, s := range b.Seqs {
				if slices.Contains(s.Table.Pages(), ref.Index) {
					violations = append(violations, fmt.Sprintf("%v in the table of request %d", ref, s.Table.Request()))
				}
			}
		}
		if stepsHeld == 2 {
			gate.release()
		}
	}
	tr := newTrio()
	res := tr.run(t, e)
	gate.release()
	for i, rs := range res {
		want := echoOracle(tr.prompts[i], tr.max[i], 32, false)
		if abort && i == 2 {
			require.ErrorIs(t, rs.Err, ErrAborted)
			require.Equal(t, want[:len(rs.Tokens)], rs.Tokens)
			continue
		}
		require.NoError(t, rs.Err, "request %d", i)
		require.Equal(t, want, rs.Tokens, "request %d", i)
	}
	require.NotEmpty(t, gate.heldRefs(), "a swap-out copy went through the gate")
	require.NotEmpty(t, bRefs)
	require.Equal(t, 2, stepsHeld, "the scheduler stepped other requests while the copy was held")
	require.Empty(t, violations)
	s := e.Stats()
	require.NotZero(t, s.SwapOuts)
	if !abort {
		require.Equal(t, s.SwapOuts, s.SwapIns)
	}
	require.Zero(t, s.BookkeepingErrors)
	require.Zero(t, s.IsolationFailures)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}

// The swap-in side: the restore copy of request 3 is held in flight. The
// scheduler keeps stepping the others, and the restored pages are in no
// table (request 3 does not step) until the copy completed and verified.
func TestSwapInInFlightKeepsStepping(t *testing.T) {
	gate := newCopyGate()
	var e *Engine
	cfg := asyncTierConfig(t)
	cfg.th().Faults = &Faults{Pool: &kvcache.Faults{HoldCopy: func(ref kvcache.PageRef) {
		// A restore copy goes into a fresh page with nothing written yet.
		if info, err := e.pool.Info(ref); err == nil && info.Owner == 3 && info.Written == 0 {
			gate.hold(ref)
		}
	}}}
	e = newEcho(t, cfg)
	gate.armed.Store(true)

	var stepsHeld int
	var violations []string
	r := e.runner.(*echoRunner)
	r.afterStep = func(b *model.Batch) {
		select {
		case <-gate.open:
			return
		default:
		}
		// afterStep runs on the scheduler goroutine: its state is ours to
		// read here. The gate keeps the restore from completing.
		s3 := e.sched.byID[3]
		if s3 == nil || s3.restoring == nil {
			return
		}
		stepsHeld++
		if s3.restoreTable.Len() != 0 || s3.table != nil {
			violations = append(violations, "restored pages in the table before the copy completed")
		}
		for _, s := range b.Seqs {
			if s.Table.Request() == 3 {
				violations = append(violations, "the restoring request stepped")
			}
		}
		// Request 2 decodes one more token in the page it has; then it
		// needs a page, which the restore has taken.
		gate.release()
	}
	tr := newTrio()
	res := tr.run(t, e)
	gate.release()
	for i, rs := range res {
		require.NoError(t, rs.Err, "request %d", i)
		require.Equal(t, echoOracle(tr.prompts[i], tr.max[i], 32, false), rs.Tokens, "request %d", i)
	}
	require.NotEmpty(t, gate.heldRefs(), "a restore copy went through the gate")
	require.Equal(t, 1, stepsHeld, "the scheduler stepped another request while the restore was held")
	require.Empty(t, violations)
	s := e.Stats()
	require.Equal(t, s.SwapOuts, s.SwapIns)
	require.Zero(t, s.BookkeepingErrors)
	waitPoolIdle(t, e)
	requireNoLeaks(t, e)
}
