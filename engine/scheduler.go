package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// scheduler owns every piece of mutable scheduling state. Exactly one
// goroutine (loop) runs it; Submit, Abort and Close reach it only through
// the engine's inbox, abort list and wake channel.
//
// Policy:
//   - queue holds waiting and swapped sequences in ID order (IDs are
//     monotonic); running holds those with pages, in ID order. Which queued
//     sequence runs next is head: first the oldest preempted one (swapped,
//     or waiting to be recomputed), which had pages and goes back before
//     anything new; else a new request, fair across tenants: round-robin
//     over the tenants with new requests waiting, the one whose last new
//     request was placed longest ago first (one never placed before
//     first), its oldest request (FCFS within a tenant). So one tenant's
//     flood does not starve another: a tenant's request waits for at most
//     one placement per other waiting tenant, not for the whole flood.
//   - Admission from queue is head-of-line: nothing jumps the head while
//     it waits for pages, so a large request is not starved by smaller
//     ones either.
//   - Each step fills MaxBatchTokens: one decode token per decoding
//     sequence first, then prefill chunks of running prefills, then the
//     first chunk of queue heads (chunked prefill, colocated with decode).
//   - Pages: when a running sequence cannot reserve, the prefix cache gives
//     up LRU pages that nobody else holds (spilling them to the host tier
//     when there is one), then the newest running sequence
//     (newer than the one asking, and not already in this step) is
//     preempted: swapped to the host tier when there is one, else freed to
//     be recomputed later. The oldest running sequence can therefore always
//     grow, and since New checked that one MaxContext request fits the whole
//     pool, every admitted request can finish: no deadlock or livelock when
//     the queue needs more than the pool.
//   - Host-tier copies never block a step. A swap-out or spill starts its
//     copies and the pages come back when they complete (the copy leases
//     hold them until then, invariant 5); a swap-in's pages enter the table
//     once uploaded and verified. Meanwhile the sequence that needs the
//     pages waits (findRoom's roomPending: no further eviction or
//     preemption), the others keep stepping, and a completed copy wakes the
//     loop (Pool.OnCopyDone). After a step in which a running sequence
//     starved, no new swap-in starts, so freed pages go to it first.
//   - Checks: every table is validated before each step (ownership,
//     tenant, generation, written counts) and, with KVChecksum=step, its
//     sealed pages re-hashed; handoffs (prefill to decode, restore, prefix
//     hit) verify written == expected and the checksums. A failure touches
//     only the request that met it: corruption found before the request
//     read it (see recomputeOrFail) is dropped and recomputed, bounded;
//     anything else ends that request alone with ErrIsolation. The pool
//     quarantines a bad page.
//   - Finding room (reserve, evict, preempt, retry) is findRoom, and
//     nothing else frees pages for a sequence.
type scheduler struct {
	e      *Engine
	pool   *kvcache.Pool
	ps     int
	byID   map[uint64]*seq
	queue  []*seq
	run    []*seq
	prefix prefixStore // the tenant-scoped cache, or noPrefixCache when disabled
	batch  model.Batch
	inStep map[*seq]int // seq -> tokens this step
	order  []*seq

	stalled int // consecutive steps without progress while work is pending
	// starved is set when a running sequence could not grow for lack of
	// pages: the next step restores no swapped sequence, so the pages a
	// swap-out frees go to the sequence that preempted it rather than
	// straight back to the one swapped out (which would swap again).
	starved bool
	// served is, per tenant, the value of placements when its latest new
	// request was placed: the clock of head's round-robin. Tenants with
	// nothing queued are dropped now and then (pruneServed).
	served     map[string]uint64
	placements uint64

	// loops counts the loop's iterations, for tests (read from another
	// goroutine, hence atomic).
	loops atomic.Uint64
}

// idleWaitHook, when set (tests only, before New), runs on the scheduler
// goroutine each time work is pending but nothing could run, just before
// the loop blocks: poll is false when it waits for a completion's wake-up
// and true when it waits for the next tick.
var idleWaitHook func(poll bool)

func newScheduler(e *Engine) *scheduler {
	sc := &scheduler{
		e: e, pool: e.pool, ps: e.pool.Geometry().PageSize,
		byID: map[uint64]*seq{}, inStep: map[*seq]int{},
		prefix: noPrefixCache{}, served: map[string]uint64{},
	}
	if !e.cfg.DisablePrefixCache {
		sc.prefix = newPrefixCache(e.pool, e.met, e.log, e.cfg.HostTierBytes > 0)
	}
	return sc
}

// stallLimit is how many idle polls (1 ms apart) the scheduler waits for
// pages to come back before it declares the oldest request unservable.
// Pages only stay away that long when the pool lost capacity to quarantine
// or when allocation keeps failing. No poll runs while a host-tier copy or
// a disk read is in flight: its completion wakes the loop.
const stallLimit = 3000

func (sc *scheduler) loop() {
	defer close(sc.e.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		sc.loops.Add(1)
		closing := sc.intake()
		if closing {
			sc.shutdown()
			return
		}
		sc.reap()
		progressed := sc.step()
		sc.reap()
		sc.gauges()
		if progressed {
			sc.stalled = 0
			continue
		}
		if len(sc.queue) == 0 && len(sc.run) == 0 {
			<-sc.e.wake
			continue
		}
		// Work is pending but nothing could run. A host-tier copy or a disk
		// read still running signals wake once its result is visible, so
		// the loop sleeps until then rather than polling: a signal sent
		// since the step waits in wake's buffer, and none is lost.
		if sc.awaitsCompletion() {
			if idleWaitHook != nil {
				idleWaitHook(false)
			}
			<-sc.e.wake
			continue
		}
		// Otherwise pages are on their way back (deferred release) or
		// allocation failed: poll, and give up on the oldest request past
		// stallLimit.
		if !sc.copiesInFlight() && !sc.restoresInFlight() {
			sc.stalled++
		}
		if sc.stalled > stallLimit {
			sc.unstick()
			sc.stalled = 0
		}
		if idleWaitHook != nil {
			idleWaitHook(true)
		}
		timer.Reset(time.Millisecond)
		select {
		case <-sc.e.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// intake moves new requests and abort messages into scheduler state.
func (sc *scheduler) intake() (closing bool) {
	e := sc.e
	e.mu.Lock()
	in, ab := e.inbox, e.aborts
	e.inbox, e.aborts = nil, nil
	closing = e.closed
	e.mu.Unlock()
	sc.erasures() // tiers.go
	for _, s := range in {
		sc.byID[s.id] = s
		sc.enqueue(s)
		sc.setState(s, StateWaiting)
	}
	for _, a := range ab {
		if s := sc.byID[a.id]; s != nil && s.abortErr == nil {
			s.abortErr = a.err
		}
	}
	return closing
}

// setState is the one door for state changes: every transition of a
// sequence goes through it, so the AbortAt fault hook sees each one. At a
// terminal state (finished, aborted, failed) there is nothing left to
// abort, and the hook's answer is ignored.
func (sc *scheduler) setState(s *seq, st State) {
	s.state = st
	f := sc.e.hooks.Faults
	if f == nil || f.AbortAt == nil || !f.AbortAt(s.id, st) {
		return
	}
	if s.runnable() {
		s.abortErr = fmt.Errorf("%w: injected at state %s", ErrAborted, st)
	}
}

func insertByID(list []*seq, s *seq) []*seq {
	i, _ := slices.BinarySearchFunc(list, s.id, func(x *seq, id uint64) int {
		switch {
		case x.id < id:
			return -1
		case x.id > id:
			return 1
		}
		return 0
	})
	return slices.Insert(list, i, s)
}

func (sc *scheduler) enqueue(s *seq) { sc.queue = insertByID(sc.queue, s) }

// head is the queued sequence to run next (see the policy), or nil. It
// may be one that is no longer runnable, for the caller to end.
func (sc *scheduler) head() *seq {
	var next *seq
	var stamp uint64
	prev := ""
	for i, s := range sc.queue {
		if s.everScheduled {
			return s // the oldest preempted sequence
		}
		if i > 0 && s.tenant == prev {
			continue // a flood of one tenant: only its oldest counts
		}
		prev = s.tenant
		if st := sc.served[s.tenant]; next == nil || st < stamp {
			next, stamp = s, st
		}
	}
	return next
}

// placed records that tenant's new request was placed, for head's
// round-robin.
func (sc *scheduler) placed(tenant string) {
	sc.placements++
	sc.served[tenant] = sc.placements
	if len(sc.served) > 64+2*len(sc.queue) {
		sc.pruneServed()
	}
}

// pruneServed forgets the tenants with nothing queued: one that comes
// back is served as one never seen, which is its turn anyway.
func (sc *scheduler) pruneServed() {
	keep := make(map[string]uint64, len(sc.queue))
	for _, s := range sc.queue {
		if st, ok := sc.served[s.tenant]; ok {
			keep[s.tenant] = st
		}
	}
	sc.served = keep
}

func remove(list []*seq, s *seq) []*seq {
	if i := slices.Index(list, s); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// reap ends every sequence that is no longer runnable: aborted, failed or
// finished. This is the step boundary at which aborts take effect.
func (sc *scheduler) reap() {
	var dead []*seq
	for _, s := range sc.queue {
		if !s.runnable() {
			dead = append(dead, s)
		}
	}
	for _, s := range sc.run {
		if !s.runnable() {
			dead = append(dead, s)
		}
	}
	for _, s := range dead {
		sc.end(s)
	}
}

// end releases everything s holds and delivers its result.
func (sc *scheduler) end(s *seq) {
	e := sc.e
	sc.queue = remove(sc.queue, s)
	sc.run = remove(sc.run, s)
	delete(sc.byID, s.id)
	sc.dropPages(s)
	r := Result{ID: s.id, PromptTokens: s.prompt, Tokens: slices.Clone(s.generatedTokens()), CachedTokens: s.cached,
		Logprobs: s.logprobs, Logits: s.lastLogits, PromptLogprobs: s.promptLogprobs()}
	var tail string
	switch {
	case s.err != nil:
		sc.setState(s, StateFailed)
		r.FinishReason, r.Err = "error", s.err
	case s.abortErr != nil:
		sc.setState(s, StateAborted)
		r.FinishReason, r.Err = "abort", s.abortErr
	default:
		sc.setState(s, StateFinished)
		r.FinishReason = s.reason
	}
	if s.text != nil {
		if r.Err == nil {
			tail = s.text.flush()
		}
		r.Text = s.text.text()
	}
	now := time.Now()
	t := &r.Timings
	if !s.firstSched.IsZero() {
		t.Queued = s.firstSched.Sub(s.submitted)
	} else {
		t.Queued = now.Sub(s.submitted)
	}
	if !s.firstTok.IsZero() {
		t.TimeToFirstTok = s.firstTok.Sub(s.submitted)
		t.Prefill = s.firstTok.Sub(s.firstSched)
		t.Decode = s.lastTok.Sub(s.firstTok)
	}
	t.PrefillTokens = len(s.prompt) - s.cached
	t.DecodeTokens = max(0, s.generated-1)

	e.met.end(r.FinishReason, errors.Is(r.Err, ErrIsolation))
	e.ended(s)
	s.stream.finish(r, tail)
}

// dropPages gives back whatever K/V s holds: its page table (deferred
// release) and its host-tier copy.
func (sc *scheduler) dropPages(s *seq) {
	s.dropDiskRead()
	sc.dropDraft(s) // the draft model's KV (specdraft.go)
	if s.table != nil {
		sc.release(s.id, s.table)
		s.table = nil
	}
	if s.swapped != nil {
		s.swapped.Discard()
		s.swapped = nil
	}
	if s.restoring != nil {
		// The pages are in no table yet; they are released when their
		// copies complete (at once if they have). Cancel never waits.
		s.restoring.Cancel()
		sc.release(s.id, s.restoreTable)
		s.restoring, s.restoreTable = nil, nil
	}
	if s.swapping != nil {
		// In flight or not: the copies' pages stay leased, and out of
		// circulation, until each copy completes; Cancel never waits.
		if err := s.swapping.Cancel(); err != nil {
			sc.e.met.bookkeepingError()
			sc.e.log.Error("engine: cancelling a swap-out", "request", s.id, "err", err)
		}
		s.swapping = nil
	}
}

// release gives t's pages back. An error is a bookkeeping violation (the
// engine's accounting disagrees with the pool's): counted and logged,
// and tests fail on any.
func (sc *scheduler) release(id uint64, t *kvcache.PageTable) {
	if err := t.Release(); err != nil {
		sc.e.met.bookkeepingError()
		sc.e.log.Error("engine: releasing pages", "request", id, "err", err)
	}
}

// fail ends s with err at the next boundary; isolation errors are loud.
func (sc *scheduler) fail(s *seq, err error) {
	if s.err != nil {
		return
	}
	if errors.Is(err, kvcache.ErrIsolation) {
		sc.e.log.Error("engine: request failed an isolation check", "request", s.id, "tenant", s.tenant, "err", err)
	}
	s.err = err
}

func (sc *scheduler) gauges() {
	w, sw := 0, 0
	for _, s := range sc.queue {
		if s.state == StateSwapped {
			sw++
		} else {
			w++
		}
	}
	sc.e.met.gauges(w, sw, len(sc.run), sc.prefix.len(), sc.prefix.hostLen())
}

// step runs one scheduler step and says whether anything was computed or
// restored.
func (sc *scheduler) step() bool {
	e := sc.e
	budget := e.cfg.MaxBatchTokens
	clear(sc.inStep)
	sc.order = sc.order[:0]
	add := func(s *seq, n int) {
		sc.inStep[s] = n
		sc.order = append(sc.order, s)
		budget -= n
	}
	// Completed host-tier copies first: spills whose copy failed leave the
	// cache, finished swap-outs give their pages back.
	sc.prefix.spilling()
	restored := sc.pollSwaps()
	restored = sc.restore(!sc.starved) || restored
	sc.starved = false

	// Decode first: one token per decoding sequence, oldest first.
	for i := 0; i < len(sc.run) && budget > 0; i++ {
		s := sc.run[i]
		if !s.runnable() || s.state != StateDecoding {
			continue
		}
		if sc.grow(s, s.fed+1) {
			add(s, 1)
		}
	}
	// Then prefill chunks of running prefills.
	for i := 0; i < len(sc.run) && budget > 0; i++ {
		s := sc.run[i]
		if !s.runnable() || s.state != StatePrefilling {
			continue
		}
		n := s.promptChunk(s.fed, min(len(s.tokens)-s.fed, budget))
		if sc.grow(s, s.fed+n) {
			add(s, n)
		}
	}
	// Then place queue heads, in order, while pages, budget and slots last.
	for budget > 0 && len(sc.run) < e.cfg.MaxSeqs && len(sc.queue) > 0 {
		s := sc.head()
		if !s.runnable() {
			sc.end(s)
			continue
		}
		if s.state == StateSwapped {
			break // restore could not take it this step; FCFS: wait
		}
		n, ok := sc.place(s, budget)
		if !ok {
			break
		}
		if n > 0 {
			add(s, n)
		}
	}
	budget -= sc.addDrafts(budget) // speculative decoding: what the step leaves (spec.go)
	if len(sc.order) == 0 {
		return restored
	}
	sc.forward()
	return true
}

// room is what one way of freeing pages achieved.
type room uint8

const (
	roomNone    room = iota // nothing to free
	roomFreed               // pages are free now: try again
	roomPending             // pages are on their way back (a host-tier copy in flight)
)

// errPagesPending marks findRoom's ErrNoPages when pages are on their way
// back from host-tier copies.
var errPagesPending = errors.New("pages are on their way back from host-tier copies")

// findRoom is the one way pages are found for a sequence: it runs grab
// until grab stops failing for lack of pages, and between tries frees
// pages in one order:
//  1. the prefix cache gives up its least recently used page that nobody
//     else holds (spilled to the host tier when there is one);
//  2. then, only when preempt is given, the newest running sequence newer
//     than the one asking, and not in the step being built, is preempted
//     (preempt reports whether it found one).
//
// A spill or swap-out frees its pages only when its copy completes, which
// the scheduler never waits for: when pages are on their way (roomPending)
// findRoom stops, and the sequence asking waits for a later step instead of
// evicting or preempting more than it needs.
//
// It returns grab's last error: nil, an error wrapping ErrNoPages when
// nothing more can be freed now, or a hard error at once.
func findRoom(grab func() error, evict func() room, preempt func() room) error {
	for {
		err := grab()
		if !errors.Is(err, kvcache.ErrNoPages) {
			return err
		}
		r := evict()
		if r == roomNone && preempt != nil {
			r = preempt()
		}
		switch r {
		case roomFreed:
			continue
		case roomPending:
			return fmt.Errorf("%w (%w)", err, errPagesPending)
		}
		return err
	}
}

// grow extends the running sequence s's table to tokens, evicting and
// preempting as findRoom does. It reports whether s can run this step;
// on a hard error s fails.
func (sc *scheduler) grow(s *seq, tokens int) bool {
	err := findRoom(func() error { return s.table.Reserve(tokens) }, sc.prefix.evict, func() room {
		if sc.copiesInFlight() {
			return roomPending // a swap-out's pages are coming: preempt no more
		}
		v := sc.victim(s)
		if v == nil {
			return roomNone
		}
		return sc.preempt(v)
	})
	switch {
	case err == nil:
		return true
	case errors.Is(err, kvcache.ErrNoPages):
		sc.starved = true
		sc.checkServable(s)
	default:
		sc.fail(s, fmt.Errorf("engine: reserving KV pages: %w", err))
	}
	return false
}

// checkServable fails s if the pool can no longer hold it at its full
// length: New checked MaxContext against the pool (invariant 1), but pages
// quarantined since then shrink what is usable. Without this the oldest
// sequence would preempt the others forever without ever fitting.
func (sc *scheduler) checkServable(s *seq) {
	total := min(len(s.prompt)+s.maxTokens, sc.e.cfg.MaxContext)
	need := (total + sc.ps - 1) / sc.ps
	st := sc.pool.Stats()
	if usable := st.Pages - st.Quarantined; need > usable {
		sc.fail(s, fmt.Errorf("%w: request %d needs up to %d pages (%d tokens), but only %d of the pool's %d pages are usable (%d quarantined after isolation failures)",
			kvcache.ErrNoPages, s.id, need, total, usable, st.Pages, st.Quarantined))
	}
}

// victim is the newest running sequence that is newer than s and not part
// of the step being built, or nil.
func (sc *scheduler) victim(s *seq) *seq {
	for i := len(sc.run) - 1; i >= 0; i-- {
		v := sc.run[i]
		if v.id <= s.id {
			return nil
		}
		if _, busy := sc.inStep[v]; !busy {
			return v
		}
	}
	return nil
}

// preempt takes v's pages away: to the host tier when configured (swap),
// else released for recompute. A swap-out only starts the copies
// (roomPending): v waits in the queue as swapped, its pages held by the
// swap until pollSwaps finds every copy complete and verified.
func (sc *scheduler) preempt(v *seq) room {
	e := sc.e
	sc.run = remove(sc.run, v)
	e.met.preempt()
	if e.cfg.HostTierBytes > 0 && v.fed > 0 && v.runnable() {
		ps, err := sc.pool.SwapOutAsync(v.table)
		if errors.Is(err, kvcache.ErrHostTierFull) {
			// Preemption wins over prefix spill: spilled prefix pages give
			// their host room back, LRU, and the swap is tried again.
			pages := (v.table.Written() + sc.ps - 1) / sc.ps
			if sc.prefix.dropHostFor(int64(pages) * sc.pool.Geometry().PageBytes()) {
				ps, err = sc.pool.SwapOutAsync(v.table)
			}
		}
		if err == nil {
			sc.dropDraft(v) // recomputed when v drafts again (specdraft.go)
			v.table, v.swapping = nil, ps
			e.met.swapOut()
			sc.enqueue(v)
			sc.setState(v, StateSwapped)
			return roomPending
		}
		if sc.swapFailed(v, err) {
			return roomFreed
		}
	}
	sc.forget(v)
	sc.enqueue(v)
	sc.setState(v, StateWaiting)
	return roomFreed
}

// swapFailed handles a swap-out of v that failed. It reports whether it
// dealt with v (an isolation failure); else v is to be recomputed.
func (sc *scheduler) swapFailed(v *seq, err error) bool {
	e := sc.e
	if errors.Is(err, kvcache.ErrIsolation) {
		// A page of v failed its checksum as it was copied out; the pool
		// quarantined it. With KVChecksum=step every read of v was
		// verified first, so v has not read the bad slots: recompute.
		// Otherwise its tokens may already reflect them: fail.
		if sc.recomputeOrFail(v, fmt.Errorf("engine: swap out: %w", err), e.cfg.KVChecksum == ChecksumStep); !v.runnable() {
			sc.queue = remove(sc.queue, v)
			sc.enqueue(v) // reaped at the boundary
		}
		return true
	}
	e.met.swapFail()
	if errors.Is(err, kvcache.ErrHostTierFull) {
		// Expected under load (the host tier is sized by HostTierBytes):
		// counted in SwapFails, and no cause for alarm.
		e.log.Debug("engine: host tier full, preempted request recomputes", "request", v.id, "err", err)
		return false
	}
	e.log.Warn("engine: swap out failed, falling back to recompute", "request", v.id, "err", err)
	return false
}

// copiesInFlight reports whether a swap-out or a prefix spill is still
// copying: pages are on their way back to the free list.
func (sc *scheduler) copiesInFlight() bool {
	if sc.prefix.spilling() {
		return true
	}
	for _, s := range sc.queue {
		if s.swapping != nil {
			return true
		}
	}
	return false
}

// restoresInFlight reports whether a swap-in is still copying, or a disk
// tier read is still reading a waiting sequence's prefix.
func (sc *scheduler) restoresInFlight() bool {
	for _, s := range sc.queue {
		if s.restoring != nil || s.diskReading() {
			return true
		}
	}
	return false
}

// awaitsCompletion reports whether a host-tier copy (prefix spill,
// swap-out, swap-in) or a disk tier read is still running. Each one, when
// it completes, makes its result visible first and then signals the wake
// channel (Pool.OnCopyDone, diskTier.notify).
func (sc *scheduler) awaitsCompletion() bool {
	if sc.prefix.spilling() {
		return true
	}
	for _, s := range sc.queue {
		if (s.swapping != nil && !s.swapping.Ready()) || (s.restoring != nil && !s.restoring.Ready()) || s.diskReading() {
			return true
		}
	}
	return false
}

// pollSwaps finishes every swap-out whose copies have all completed,
// without waiting for any: the swapped sequence now holds its host copies
// and its device pages free; a failed swap-out recomputes (or fails) the
// sequence. It reports whether pages came back.
func (sc *scheduler) pollSwaps() bool {
	did := false
	for _, s := range slices.Clone(sc.queue) {
		ps := s.swapping
		if ps == nil || !ps.Ready() {
			continue
		}
		did = true
		t := ps.Table()
		sw, err := ps.Finish()
		s.swapping = nil
		if err == nil {
			s.swapped = sw
			continue
		}
		if !errors.Is(err, kvcache.ErrDoubleRelease) {
			// The copies failed and the table came back: s holds it again
			// until it is recomputed or fails.
			s.table = t
		}
		if !sc.swapFailed(s, err) {
			sc.forget(s)
			sc.setState(s, StateWaiting)
		}
	}
	return did
}

// forget drops every K/V s holds, on the device or the host tier, so that
// it is computed again from its tokens when s is next placed.
func (sc *scheduler) forget(s *seq) {
	sc.dropPages(s)
	s.redo = max(s.redo, s.fed)
	s.fed, s.offered, s.prefixTail = 0, 0, nil
}

// restore brings swapped sequences at the head of the queue back, oldest
// first, while pages and running slots allow. It never preempts, and never
// waits on a copy: a swap-in allocates its pages and hands the upload and
// its verification to a copy worker (SwapInAsync); a later step, once the
// copies completed, puts the pages into the sequence's table (Finish).
// Until then the sequence stays at the head of the queue (FCFS). With
// start false it only finishes swap-ins already in flight (see starved).
func (sc *scheduler) restore(start bool) bool {
	did := false
	for len(sc.queue) > 0 && len(sc.run) < sc.e.cfg.MaxSeqs {
		s := sc.head()
		if !s.runnable() {
			sc.end(s)
			continue
		}
		if s.state != StateSwapped || s.swapping != nil {
			return did // waiting, or its swap-out is still copying: FCFS, wait
		}
		if s.restoring == nil && !start {
			return did
		}
		if s.restoring == nil {
			t := sc.pool.NewTable(kvcache.RequestID(s.id), kvcache.Tenant(s.tenant))
			var pr *kvcache.PendingRestore
			err := findRoom(func() error {
				var err error
				pr, err = sc.pool.SwapInAsync(s.swapped, t)
				return err
			}, sc.prefix.evict, nil)
			if err != nil {
				sc.release(s.id, t) // empty: lets go of its tenant
				if sc.restoreFailed(s, err) {
					continue
				}
				return did
			}
			s.restoring, s.restoreTable = pr, t
			did = true
		}
		if !s.restoring.Ready() {
			return did // a completed copy wakes the loop
		}
		t := s.restoreTable
		err := s.restoring.Finish()
		s.restoring, s.restoreTable = nil, nil
		if err != nil {
			sc.release(s.id, t)
			if sc.restoreFailed(s, err) {
				continue
			}
			return did
		}
		s.swapped = nil
		s.table = t
		sc.queue = remove(sc.queue, s)
		sc.run = insertByID(sc.run, s)
		sc.e.met.swapIn()
		did = true
		// Host tier to device is a handoff (invariant 6).
		if err := sc.handoff(s, s.table, s.fed); err != nil {
			sc.recomputeOrFail(s, fmt.Errorf("engine: restore handoff: %w", err), true)
			continue
		}
		if len(s.tokens)-s.fed > 1 {
			sc.setState(s, StatePrefilling)
		} else {
			sc.setState(s, StateDecoding)
		}
	}
	return did
}

// restoreFailed handles a swap-in of the queue head s that failed, and
// reports whether restore may go on to the next queue head (false: s waits
// for pages).
func (sc *scheduler) restoreFailed(s *seq, err error) bool {
	switch {
	case errors.Is(err, kvcache.ErrNoPages):
		if sc.checkServable(s); !s.runnable() {
			sc.end(s)
			return true
		}
		return false
	case errors.Is(err, kvcache.ErrIsolation):
		// The host copy failed its checksum on the device, before s
		// read it: the page is quarantined, the copy dropped, and s
		// recomputes (or fails past maxRecomputes).
		if sc.recomputeOrFail(s, fmt.Errorf("engine: restore from host tier: %w", err), true); !s.runnable() {
			sc.end(s)
		}
		return true
	default:
		// The host copy is unusable (e.g. a failed copy); recompute.
		sc.e.log.Warn("engine: restore failed, recomputing", "request", s.id, "err", err)
		sc.forget(s)
		sc.setState(s, StateWaiting)
		return true
	}
}

// place moves the queue head s (waiting: new or to be recomputed) into
// running with the first chunk of its prefill: prefix-cache pages first,
// then fresh pages for up to budget tokens. It never preempts: a newcomer
// waits for pages instead (FCFS). It returns the tokens s feeds this step
// and false when s must wait.
func (sc *scheduler) place(s *seq, budget int) (int, bool) {
	t := sc.pool.NewTable(kvcache.RequestID(s.id), kvcache.Tenant(s.tenant))
	// Pages to leave free for the decode steps of running sequences: a
	// newcomer is not placed only to be preempted at once, and a prefix
	// restore from the host tier does not take the last free pages either.
	head := 0
	if len(sc.run) > 0 {
		head = max(1, sc.pool.Pages()/100)
	}
	cached, err := sc.prefix.attach(s, t, head)
	if errors.Is(err, errSpillInFlight) {
		// Its prefix, or the page to restore it into, is on its way back
		// from a host-tier copy: FCFS, s waits a step (bounded, see
		// maxPrefixWaits) rather than the scheduler waiting on the copy.
		// A disk read is not bounded so: it always completes.
		if !errors.Is(err, errDiskReadInFlight) {
			s.prefixWaits++
		}
		sc.release(s.id, t)
		return 0, false
	}
	s.prefixWaits = 0
	if err == nil && cached > 0 {
		err = sc.handoff(s, t, t.Written())
	}
	if err != nil {
		// A cached page failed its checksum before s read it: the cache has
		// dropped it (and the pool quarantined it), so s recomputes that
		// part (placed again at once), or fails past maxRecomputes.
		sc.release(s.id, t)
		if sc.recomputeOrFail(s, fmt.Errorf("engine: prefix cache handoff: %w", err), true); !s.runnable() {
			sc.end(s)
		}
		return 0, true
	}
	start := t.Written()
	n := s.promptChunk(start, min(len(s.tokens)-start, budget))
	if s.emb != nil && s.emb.whole && start+n < len(s.tokens) {
		// Non-causal: the whole input in one step, or wait for a step
		// with the budget for it.
		sc.release(s.id, t)
		return 0, false
	}
	need := (start+n+sc.ps-1)/sc.ps - t.Len()
	err = findRoom(func() error {
		if free := sc.pool.FreePages(); need > 0 && free < need+head {
			return fmt.Errorf("%w: %d pages needed, %d free, %d kept for running sequences", kvcache.ErrNoPages, need, free, head)
		}
		return t.Reserve(start + n)
	}, sc.prefix.evict, nil)
	if err != nil {
		sc.release(s.id, t)
		if !errors.Is(err, kvcache.ErrNoPages) {
			sc.fail(s, fmt.Errorf("engine: reserving KV pages: %w", err))
			sc.end(s)
			return 0, true
		}
		if sc.checkServable(s); !s.runnable() {
			sc.end(s)
			return 0, true
		}
		return 0, false
	}
	s.table, s.fed = t, start
	sc.queue = remove(sc.queue, s)
	sc.run = insertByID(sc.run, s)
	if !s.everScheduled {
		sc.placed(s.tenant)
		sc.firstScheduled(s, cached)
	}
	sc.setState(s, StatePrefilling)
	if !s.runnable() {
		return 0, true
	}
	return n, true
}

// firstScheduled sets up what s needs from its first placement on: its
// sampler and text stream, and its queue-time metrics.
func (sc *scheduler) firstScheduled(s *seq, cached int) {
	e := sc.e
	now := time.Now()
	s.everScheduled = true
	s.firstSched = now
	s.cached = cached
	e.mu.Lock()
	e.queued--
	e.mu.Unlock()
	e.met.firstScheduled(now.Sub(s.submitted), cached)
	s.sampler = samplerFor(s.params, s.id)
	s.sampler.SetPromptLen(len(s.prompt))
	prev := -1
	if len(s.prompt) > 0 {
		prev = s.prompt[len(s.prompt)-1]
	}
	s.text = newTextStream(keepDecode(e.tok.Decode, s.keep), prev, s.stops)
}

// handoff is the check at a phase boundary (invariant 6): written ==
// expected, every page owned (or a same-tenant shared prefix) at its
// generation, sealed checksums intact. With KVChecksum=off only the counts
// are compared.
func (sc *scheduler) handoff(s *seq, t *kvcache.PageTable, expected int) error {
	if sc.e.cfg.KVChecksum == ChecksumOff {
		if w, pages := t.Written(), (t.Written()+sc.ps-1)/sc.ps; w != expected || t.Len() != pages {
			return fmt.Errorf("%w: %w: request %d: %d pages reserved, %d written (%d tokens written, %d expected)",
				ErrIsolation, kvcache.ErrHandoff, s.id, t.Len(), pages, w, expected)
		}
		return nil
	}
	return t.Handoff(expected)
}

// forward validates, runs the model over the step's batch, and consumes
// the logits.
func (sc *scheduler) forward() {
	e := sc.e
	start := time.Now()
	b := &sc.batch
	b.Seqs = b.Seqs[:0]
	var members []*seq
	var drops []func()
	for _, s := range sc.order {
		if !s.runnable() {
			continue
		}
		if !e.hooks.UnsafeSkipValidation {
			var err error
			if e.cfg.KVChecksum == ChecksumStep {
				err = sc.pool.VerifyTable(s.table)
			} else {
				err = sc.pool.ValidateTable(s.table)
			}
			if err != nil {
				// With KVChecksum=step every earlier read of s was verified
				// too, so corruption found now was never read: recompute.
				sc.recomputeOrFail(s, fmt.Errorf("engine: page table check before step: %w", err), e.cfg.KVChecksum == ChecksumStep)
				continue
			}
		}
		drop, err := sc.pool.LeaseStep(s.table)
		if err != nil {
			sc.fail(s, fmt.Errorf("engine: step lease: %w", err))
			continue
		}
		drops = append(drops, drop)
		st := s.stepSeq(sc.inStep[s])
		if s.emb != nil {
			// An embedding input wants every row's hidden state, never logits.
			st.Logits, st.Hidden = false, true
		}
		b.Seqs = append(b.Seqs, st)
		members = append(members, s)
	}
	if len(members) == 0 {
		return
	}
	b.Failed = b.Failed[:0]
	waitMasks := startMasks(members, b.Seqs)
	err := e.runner.Forward(b)
	waitMasks()
	// Forward returns when the device is done with the step's pages.
	for _, d := range drops {
		d()
	}
	now := time.Now()
	e.met.step(now.Sub(start))
	if err != nil {
		// A failed step may have written part of any member's slots; the
		// tables did not advance, but fail them all rather than guess. The
		// step's error may name any member, so it goes to the log only:
		// no request is told about another.
		ids := make([]uint64, len(members))
		for i, s := range members {
			ids[i] = s.id
		}
		e.log.Error("engine: forward step failed", "requests", ids, "err", err)
		kind := ErrStepFailed
		if errors.Is(err, ErrIsolation) {
			kind = ErrIsolation
		}
		for _, s := range members {
			sc.fail(s, fmt.Errorf("engine: request %d: %w (the forward step of its batch failed; details in the engine log)", s.id, kind))
		}
		return
	}
	for i, s := range members {
		n := sc.inStep[s] - len(s.draft) // drafts are not written yet (spec.go)
		before := s.fed
		s.fed += n
		if before < s.redo {
			// Tokens whose K/V forget dropped, computed again. Those the
			// prefix cache gave back at placement never reach a step, so
			// they are not counted.
			sc.e.met.recompute(min(s.fed, s.redo) - before)
			if s.fed >= s.redo {
				s.redo = 0
			}
		}
		if i < len(b.Failed) && b.Failed[i] != nil {
			// Its own page failed as it sealed (per-sequence outcome): only
			// s ends. Its logits may have read the bad slots, so it cannot
			// be recomputed transparently.
			sc.fail(s, fmt.Errorf("engine: %w", b.Failed[i]))
			continue
		}
		if w := s.table.Written(); w != s.fed {
			sc.fail(s, fmt.Errorf("%w: request %d: table holds %d written tokens after the step, the scheduler fed %d",
				ErrIsolation, s.id, w, s.fed))
			continue
		}
		sc.injectCorruption(s, before)
		if s.emb != nil {
			if err := sc.takeHidden(s, b, i, before); err != nil {
				sc.fail(s, err)
				continue
			}
		} else {
			sc.prefix.offer(s)
		}
		if s.fed < len(s.tokens) {
			sc.recordPrompt(s, b.Logits[i])
			continue // mid-prefill
		}
		if s.state == StatePrefilling {
			// Prefill to decode handoff (invariant 6). No token has been
			// sampled from this prefill yet, so corruption found here is
			// undone by computing the prefill again.
			if err := sc.handoff(s, s.table, s.fed); err != nil {
				sc.recomputeOrFail(s, fmt.Errorf("engine: prefill to decode handoff: %w", err), true)
				continue
			}
			sc.setState(s, StateDecoding)
			if !s.runnable() {
				continue
			}
			sc.injectHandoffCorruption(s)
		}
		if s.emb != nil {
			sc.finishEmbed(s, now)
			continue
		}
		logits := b.Logits[i]
		if logits == nil {
			sc.fail(s, fmt.Errorf("engine: forward step returned no logits for request %d", s.id))
			continue
		}
		sc.consume(s, logits, now)
	}
}

// maxRecomputes bounds how often one request is recomputed after meeting
// corrupted K/V; past it the request fails with ErrIsolation.
const maxRecomputes = 3

// recomputeOrFail handles corruption met by s. When the bad data was found
// before s read it (unread is true) and it is corruption (a checksum
// mismatch, or a page quarantined for one), the bad copy is already
// quarantined or dropped by whoever found it, and s is computed again from
// its tokens, transparently: its pages are released, and it waits to be
// placed again (at most maxRecomputes times). Otherwise s fails.
func (sc *scheduler) recomputeOrFail(s *seq, err error, unread bool) {
	corrupt := errors.Is(err, kvcache.ErrChecksum) || errors.Is(err, kvcache.ErrQuarantined)
	if !unread || !corrupt || !s.runnable() {
		sc.fail(s, err)
		return
	}
	if s.recomputes >= maxRecomputes {
		sc.fail(s, fmt.Errorf("%w (request %d met corrupted K/V %d times)", err, s.id, s.recomputes+1))
		return
	}
	s.recomputes++
	sc.e.met.recovery()
	sc.e.log.Warn("engine: corrupted K/V found before use; recomputing the request",
		"request", s.id, "tenant", s.tenant, "attempt", s.recomputes, "err", err)
	sc.run = remove(sc.run, s)
	sc.queue = remove(sc.queue, s)
	sc.forget(s)
	sc.enqueue(s)
	sc.setState(s, StateWaiting)
}

// injectHandoffCorruption runs the CorruptHandoff fault hook on the partial
// last page s sealed at its prefill to decode handoff.
func (sc *scheduler) injectHandoffCorruption(s *seq) {
	f := sc.e.hooks.Faults
	if f == nil || f.CorruptHandoff == nil || s.fed%sc.ps == 0 {
		return
	}
	refs := s.table.Refs()
	if ref := refs[len(refs)-1]; f.CorruptHandoff(s.id, ref) {
		// An error means there are no checksummed slots to corrupt
		// (KVChecksum=off): the hook has nothing to do.
		_ = sc.pool.CorruptPage(ref.Index)
	}
}

// injectCorruption runs the CorruptSealed fault hook on the pages this
// step sealed.
func (sc *scheduler) injectCorruption(s *seq, before int) {
	f := sc.e.hooks.Faults
	if f == nil || f.CorruptSealed == nil {
		return
	}
	refs := s.table.Refs()
	for i := before / sc.ps; i < s.fed/sc.ps && i < len(refs); i++ {
		if !s.table.Shared(i) && f.CorruptSealed(s.id, refs[i]) {
			_ = sc.pool.CorruptPage(refs[i].Index)
		}
	}
}

// emit handles one sampled token: EOS, text with stop strings, MaxTokens
// (which admission clamped to the context left, so "length" also means
// MaxContext reached).
func (sc *scheduler) emit(s *seq, tok int, now time.Time) {
	if s.firstTok.IsZero() {
		sc.e.met.token(now.Sub(s.submitted), true)
		s.firstTok = now
	} else {
		sc.e.met.token(now.Sub(s.lastTok), false)
	}
	s.lastTok = now
	if contains(sc.e.eos, tok) {
		sc.finish(s, "stop")
		return
	}
	s.tokens = append(s.tokens, tok)
	s.generated++
	text, stopped := s.text.push(tok)
	s.stream.push(s.event(tok, text))
	complete, gerr := sc.grammarAccept(s, tok)
	switch {
	case gerr != nil:
		sc.fail(s, gerr)
	case stopped, complete:
		sc.finish(s, "stop")
	case s.generated >= s.maxTokens:
		sc.finish(s, "length")
	}
}

// finish marks s finished for reason; it ends at the next boundary.
func (sc *scheduler) finish(s *seq, reason string) {
	s.reason = reason
	sc.setState(s, StateFinished)
}

// unstick runs when nothing could be scheduled for stallLimit polls. If
// pages are still coming back it keeps waiting; otherwise the oldest
// request cannot be served by what is left of the pool (quarantine or
// failing allocation) and is failed loudly instead of waiting forever.
func (sc *scheduler) unstick() {
	st := sc.pool.Stats()
	if st.Releasing > 0 || st.CopyLeases > 0 {
		return
	}
	var s *seq
	if len(sc.run) > 0 {
		s = sc.run[0]
	}
	if h := sc.head(); h != nil && (s == nil || h.id < s.id) {
		s = h
	}
	if s == nil {
		return
	}
	sc.fail(s, fmt.Errorf("%w: request %d cannot get KV pages: %d of %d pages free, %d quarantined, %d in the prefix cache",
		kvcache.ErrNoPages, s.id, st.Free, st.Pages, st.Quarantined, sc.prefix.len()))
}

// shutdown aborts everything and releases all pages (Close).
func (sc *scheduler) shutdown() {
	for _, s := range slices.Concat(sc.queue, sc.run) {
		if s.abortErr == nil {
			s.abortErr = fmt.Errorf("%w: %w", ErrAborted, ErrClosed)
		}
		sc.end(s)
	}
	sc.prefix.persist() // to the disk tier, if any
	sc.prefix.clear()
	sc.gauges()
}
