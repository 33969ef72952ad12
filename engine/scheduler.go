package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvwarden/kvwarden/engine/kvcache"
	"github.com/kvwarden/kvwarden/engine/model"
)

// scheduler owns every piece of mutable scheduling state. Exactly one
// goroutine (loop) runs it; Submit, Abort and Close reach it only through
// the engine's inbox, abort list and wake channel.
//
// Policy:
//   - FCFS by request ID (IDs are monotonic). queue holds waiting and
//     swapped sequences in ID order; running holds those with pages, in ID
//     order. Admission from queue is head-of-line: a newer request never
//     jumps an older one that is waiting for pages, so nobody starves.
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
//   - Checks: every table is validated before each step (ownership,
//     tenant, generation, written counts) and, with KVChecksum=step, its
//     sealed pages re-hashed; handoffs (prefill to decode, restore, prefix
//     hit) verify written == expected and the checksums. A failure ends
//     only that request, with ErrIsolation; the pool quarantines the page.
type scheduler struct {
	e      *Engine
	pool   *kvcache.Pool
	ps     int
	byID   map[uint64]*seq
	queue  []*seq
	run    []*seq
	prefix *prefixCache
	batch  model.Batch
	inStep map[*seq]int // seq -> tokens this step
	order  []*seq

	stalled int // consecutive steps without progress while work is pending
}

func newScheduler(e *Engine) *scheduler {
	sc := &scheduler{
		e: e, pool: e.pool, ps: e.pool.Geometry().PageSize,
		byID: map[uint64]*seq{}, inStep: map[*seq]int{},
	}
	if !e.cfg.DisablePrefixCache {
		sc.prefix = newPrefixCache(e.pool, e.met, e.log, e.cfg.HostTierBytes > 0)
	}
	return sc
}

// stallLimit is how many idle polls (1 ms apart) the scheduler waits for
// pages to come back before it declares the oldest request unservable.
// Pages only stay away that long when the pool lost capacity to quarantine
// or when allocation keeps failing.
const stallLimit = 3000

func (sc *scheduler) loop() {
	defer close(sc.e.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
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
		// Work is pending but nothing could run: pages are on their way back
		// (deferred release) or allocation failed. Poll.
		sc.stalled++
		if sc.stalled > stallLimit {
			sc.unstick()
			sc.stalled = 0
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
	for _, s := range in {
		sc.byID[s.id] = s
		sc.enqueue(s)
		sc.setState(s, StateWaiting)
	}
	for _, a := range ab {
		if s := sc.byID[a.id]; s != nil && s.cancel == nil {
			s.cancel = a.err
		}
	}
	return closing
}

// setState moves s to st and lets the fault hook abort it there.
func (sc *scheduler) setState(s *seq, st State) {
	s.state = st
	if f := sc.e.hooks.Faults; f != nil && f.AbortAt != nil && s.cancel == nil && f.AbortAt(s.id, st) {
		s.cancel = fmt.Errorf("%w: injected at state %s", ErrAborted, st)
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
	if s.table != nil {
		if err := s.table.Release(); err != nil {
			e.log.Error("engine: releasing pages", "request", s.id, "err", err)
		}
		s.table = nil
	}
	if s.swapped != nil {
		s.swapped.Discard()
		s.swapped = nil
	}
	r := Result{ID: s.id, PromptTokens: s.prompt, Tokens: slices.Clone(s.generatedTokens()), CachedTokens: s.cached}
	var tail string
	switch {
	case s.err != nil:
		s.state = StateFailed
		r.FinishReason, r.Err = "error", s.err
	case s.cancel != nil:
		s.state = StateAborted
		r.FinishReason, r.Err = "abort", s.cancel
	default:
		s.state = StateFinished
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

	m := e.met
	m.mu.Lock()
	m.finished[r.FinishReason]++
	if errors.Is(r.Err, ErrIsolation) {
		m.isolation++
	}
	m.mu.Unlock()
	e.ended(s)
	s.stream.finish(r, tail)
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
	m := sc.e.met
	m.mu.Lock()
	m.waiting, m.swapped, m.running = w, sw, len(sc.run)
	if sc.prefix != nil {
		m.prefixEntries = sc.prefix.len()
		m.prefixHostEntries = sc.prefix.hostLen()
	}
	m.mu.Unlock()
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
	restored := sc.restore()

	// Decode first: one token per decoding sequence, oldest first.
	for i := 0; i < len(sc.run) && budget > 0; i++ {
		s := sc.run[i]
		if !s.runnable() || s.state != StateDecoding {
			continue
		}
		if sc.reserve(s, s.fed+1) {
			add(s, 1)
		}
	}
	// Then prefill chunks of running prefills.
	for i := 0; i < len(sc.run) && budget > 0; i++ {
		s := sc.run[i]
		if !s.runnable() || s.state != StatePrefilling {
			continue
		}
		n := min(len(s.ctx)-s.fed, budget)
		if sc.reserve(s, s.fed+n) {
			add(s, n)
		}
	}
	// Then admit queue heads, in order, while pages, budget and slots last.
	for budget > 0 && len(sc.run) < e.cfg.MaxSeqs && len(sc.queue) > 0 {
		s := sc.queue[0]
		if !s.runnable() {
			sc.end(s)
			continue
		}
		if s.state == StateSwapped {
			break // restore could not take it this step; FCFS: wait
		}
		n, ok := sc.admit(s, budget)
		if !ok {
			break
		}
		if n > 0 {
			add(s, n)
		}
	}
	if len(sc.order) == 0 {
		return restored
	}
	sc.forward()
	return true
}

// reserve grows s's table to tokens, making room by evicting prefix-cache
// pages and then preempting newer sequences. It reports whether s can run
// this step; on a hard error s fails.
func (sc *scheduler) reserve(s *seq, tokens int) bool {
	for {
		err := s.table.Reserve(tokens)
		if err == nil {
			return true
		}
		if !errors.Is(err, kvcache.ErrNoPages) {
			sc.fail(s, fmt.Errorf("engine: reserving KV pages: %w", err))
			return false
		}
		if sc.prefix != nil && sc.prefix.evict() {
			continue
		}
		v := sc.victim(s)
		if v == nil {
			sc.checkServable(s)
			return false
		}
		sc.preempt(v)
	}
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
// else released for recompute.
func (sc *scheduler) preempt(v *seq) {
	e := sc.e
	sc.run = remove(sc.run, v)
	e.met.mu.Lock()
	e.met.preempt++
	e.met.mu.Unlock()
	if e.cfg.HostTierBytes > 0 && v.fed > 0 && v.runnable() {
		sw, err := sc.pool.SwapOut(v.table)
		if errors.Is(err, kvcache.ErrHostTierFull) && sc.prefix != nil {
			// Preemption wins over prefix spill: spilled prefix pages give
			// their host room back, LRU, and the swap is tried again.
			pages := (v.table.Written() + sc.ps - 1) / sc.ps
			if sc.prefix.dropHostFor(int64(pages) * sc.pool.Geometry().PageBytes()) {
				sw, err = sc.pool.SwapOut(v.table)
			}
		}
		if err == nil {
			v.table, v.swapped = nil, sw
			e.met.mu.Lock()
			e.met.swapOut++
			e.met.mu.Unlock()
			sc.enqueue(v)
			sc.setState(v, StateSwapped)
			return
		}
		if errors.Is(err, kvcache.ErrIsolation) {
			sc.fail(v, fmt.Errorf("engine: swap out: %w", err))
			sc.enqueue(v) // reaped at the boundary
			return
		}
		e.met.mu.Lock()
		e.met.swapF++
		e.met.mu.Unlock()
		e.log.Warn("engine: swap out failed, falling back to recompute", "request", v.id, "err", err)
	}
	if err := v.table.Release(); err != nil {
		e.log.Error("engine: releasing preempted pages", "request", v.id, "err", err)
	}
	v.table = nil
	e.met.mu.Lock()
	e.met.recmp += uint64(v.fed)
	e.met.mu.Unlock()
	v.fed = 0
	v.offered = 0
	sc.enqueue(v)
	sc.setState(v, StateWaiting)
}

// restore brings swapped sequences at the head of the queue back, oldest
// first, while pages and running slots allow. It never preempts.
func (sc *scheduler) restore() bool {
	did := false
	for len(sc.queue) > 0 && len(sc.run) < sc.e.cfg.MaxSeqs {
		s := sc.queue[0]
		if !s.runnable() {
			sc.end(s)
			continue
		}
		if s.state != StateSwapped {
			return did
		}
		t := sc.pool.NewTable(kvcache.RequestID(s.id), kvcache.Tenant(s.tenant))
		var err error
		for {
			err = sc.pool.SwapIn(s.swapped, t)
			if errors.Is(err, kvcache.ErrNoPages) && sc.prefix != nil && sc.prefix.evict() {
				continue
			}
			break
		}
		switch {
		case err == nil:
		case errors.Is(err, kvcache.ErrNoPages):
			if sc.checkServable(s); !s.runnable() {
				sc.end(s)
				continue
			}
			return did
		case errors.Is(err, kvcache.ErrIsolation):
			sc.fail(s, fmt.Errorf("engine: restore from host tier: %w", err))
			sc.end(s)
			continue
		default:
			// The host copy is unusable (e.g. a failed copy); recompute.
			sc.e.log.Warn("engine: restore failed, recomputing", "request", s.id, "err", err)
			s.swapped.Discard()
			s.swapped = nil
			s.fed, s.offered = 0, 0
			sc.setState(s, StateWaiting)
			continue
		}
		s.swapped = nil
		s.table = t
		sc.queue = sc.queue[1:]
		sc.run = insertByID(sc.run, s)
		sc.e.met.mu.Lock()
		sc.e.met.swapIn++
		sc.e.met.mu.Unlock()
		did = true
		// Host tier to device is a handoff (invariant 6).
		if err := sc.handoff(s, s.table, s.fed); err != nil {
			sc.fail(s, fmt.Errorf("engine: restore handoff: %w", err))
			continue
		}
		if len(s.ctx)-s.fed > 1 {
			sc.setState(s, StatePrefilling)
		} else {
			sc.setState(s, StateDecoding)
		}
	}
	return did
}

// admit moves the queue head s (waiting: new or to be recomputed) into
// running with the first chunk of its prefill: prefix-cache pages first,
// then fresh pages for up to budget tokens. It never preempts: a newcomer
// waits for pages instead (FCFS), unless nothing is running at all.
func (sc *scheduler) admit(s *seq, budget int) (int, bool) {
	e := sc.e
	t := sc.pool.NewTable(kvcache.RequestID(s.id), kvcache.Tenant(s.tenant))
	cached := 0
	// Pages to leave free for the decode steps of running sequences: a
	// newcomer is not admitted only to be preempted at once, and a prefix
	// restore from the host tier does not take the last free pages either.
	head := 0
	if len(sc.run) > 0 {
		head = max(1, sc.pool.Pages()/100)
	}
	if sc.prefix != nil {
		n, err := sc.prefix.attach(s, t, head)
		if err != nil {
			_ = t.Release()
			sc.fail(s, fmt.Errorf("engine: prefix cache handoff: %w", err))
			sc.end(s)
			return 0, true
		}
		cached = n
		if n > 0 {
			if err := sc.handoff(s, t, t.Written()); err != nil {
				_ = t.Release()
				sc.fail(s, fmt.Errorf("engine: prefix cache handoff: %w", err))
				sc.end(s)
				return 0, true
			}
		}
	}
	start := t.Written()
	n := min(len(s.ctx)-start, budget)
	need := (start+n+sc.ps-1)/sc.ps - t.Len()
	if len(sc.run) > 0 && need > 0 {
		if sc.pool.FreePages() < need+head && !(sc.prefix != nil && sc.prefix.evict()) {
			_ = t.Release()
			return 0, false
		}
	}
	for {
		err := t.Reserve(start + n)
		if err == nil {
			break
		}
		if errors.Is(err, kvcache.ErrNoPages) && sc.prefix != nil && sc.prefix.evict() {
			continue
		}
		_ = t.Release()
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
	sc.queue = sc.queue[1:]
	sc.run = insertByID(sc.run, s)
	now := time.Now()
	if !s.everScheduled {
		s.everScheduled = true
		s.firstSched = now
		s.cached = cached
		e.mu.Lock()
		e.queued--
		e.mu.Unlock()
		e.met.mu.Lock()
		e.met.queue.observe(now.Sub(s.submitted))
		e.met.cachedToks += uint64(cached)
		e.met.mu.Unlock()
		s.sampler = samplerFor(s.params, s.id)
		prev := -1
		if len(s.prompt) > 0 {
			prev = s.prompt[len(s.prompt)-1]
		}
		s.text = newTextStream(e.tok.Decode, prev, s.stops)
	}
	sc.setState(s, StatePrefilling)
	if !s.runnable() {
		return 0, true
	}
	return n, true
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
				sc.fail(s, fmt.Errorf("engine: page table check before step: %w", err))
				continue
			}
		}
		drop, err := sc.pool.LeaseStep(s.table)
		if err != nil {
			sc.fail(s, fmt.Errorf("engine: step lease: %w", err))
			continue
		}
		drops = append(drops, drop)
		n := sc.inStep[s]
		b.Seqs = append(b.Seqs, model.Seq{
			Tokens: s.ctx[s.fed : s.fed+n],
			Table:  s.table,
			Logits: s.fed+n == len(s.ctx),
		})
		members = append(members, s)
	}
	if len(members) == 0 {
		return
	}
	err := e.runner.Forward(b)
	// The CPU forward pass is synchronous, so the step's work is complete.
	for _, d := range drops {
		d()
	}
	now := time.Now()
	e.met.mu.Lock()
	e.met.steps++
	e.met.step.observe(now.Sub(start))
	e.met.mu.Unlock()
	if err != nil {
		// A failed step may have written part of any member's slots; the
		// tables did not advance, but fail them all rather than guess.
		for _, s := range members {
			sc.fail(s, fmt.Errorf("engine: forward step: %w", err))
		}
		return
	}
	for i, s := range members {
		n := sc.inStep[s]
		before := s.fed
		s.fed += n
		if w := s.table.Written(); w != s.fed {
			sc.fail(s, fmt.Errorf("%w: request %d: table holds %d written tokens after the step, the scheduler fed %d",
				ErrIsolation, s.id, w, s.fed))
			continue
		}
		sc.injectCorruption(s, before)
		if sc.prefix != nil {
			sc.prefix.offer(s)
		}
		if s.fed < len(s.ctx) {
			continue // mid-prefill
		}
		if s.state == StatePrefilling {
			// Prefill to decode handoff (invariant 6).
			if err := sc.handoff(s, s.table, s.fed); err != nil {
				sc.fail(s, fmt.Errorf("engine: prefill to decode handoff: %w", err))
				continue
			}
			sc.setState(s, StateDecoding)
			if !s.runnable() {
				continue
			}
		}
		logits := b.Logits[i]
		if logits == nil {
			sc.fail(s, fmt.Errorf("engine: forward step returned no logits for request %d", s.id))
			continue
		}
		sc.emit(s, s.sampler.Sample(logits, s.ctx), now)
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
	m := sc.e.met
	m.mu.Lock()
	m.genToks++
	if s.firstTok.IsZero() {
		m.ttft.observe(now.Sub(s.submitted))
	} else {
		m.itl.observe(now.Sub(s.lastTok))
	}
	m.mu.Unlock()
	if s.firstTok.IsZero() {
		s.firstTok = now
	}
	s.lastTok = now
	if contains(sc.e.eos, tok) {
		s.reason = "stop"
		s.state = StateFinished
		return
	}
	s.ctx = append(s.ctx, tok)
	s.generated++
	text, stopped := s.text.push(tok)
	s.stream.push(Event{Token: tok, Text: text})
	switch {
	case stopped:
		s.reason = "stop"
		s.state = StateFinished
	case s.generated >= s.maxTokens:
		s.reason = "length"
		s.state = StateFinished
	}
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
	if len(sc.queue) > 0 && (s == nil || sc.queue[0].id < s.id) {
		s = sc.queue[0]
	}
	if s == nil {
		return
	}
	sc.fail(s, fmt.Errorf("%w: request %d cannot get KV pages: %d of %d pages free, %d quarantined, %d in the prefix cache",
		kvcache.ErrNoPages, s.id, st.Free, st.Pages, st.Quarantined, sc.prefixLen()))
}

func (sc *scheduler) prefixLen() int {
	if sc.prefix == nil {
		return 0
	}
	return sc.prefix.len()
}

// shutdown aborts everything and releases all pages (Close).
func (sc *scheduler) shutdown() {
	for _, s := range slices.Concat(sc.queue, sc.run) {
		if s.cancel == nil {
			s.cancel = fmt.Errorf("%w: %w", ErrAborted, ErrClosed)
		}
		sc.end(s)
	}
	if sc.prefix != nil {
		sc.prefix.clear()
	}
	sc.gauges()
}
