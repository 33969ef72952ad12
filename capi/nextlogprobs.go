package main

/*
#include "bridge.h"
*/
import "C"

import (
	"sync"

	"github.com/kvwarden/kvwarden/engine"
)

// nextLogprobs attributes each generated token's log-probabilities to the
// kvw_next call that hands out the last byte of the token's text, so a
// streaming caller gets them with the text, as llama-cpp-python's chunks
// carry them. A token whose text is empty or never handed out (held for a
// character split across tokens, dropped as part of a stop string) goes
// with the next call that returns anything, the final one included, so
// every token is reported exactly once.
//
// queue and handOut run under the request's reader semaphore (kvw_next);
// last is also read by kvw_next_logprobs, which must not wait for a
// reader blocked in kvw_next, hence its own mutex.
type nextLogprobs struct {
	waiting  []pendingLP // queued tokens, in order
	appended int         // bytes of text taken into request.pending so far
	consumed int         // bytes of it handed out by kvw_next

	mu   sync.Mutex
	last []engine.TokenLogprobs // the tokens of the latest kvw_next
}

type pendingLP struct {
	end int // the token's text ends at this byte of the request's text
	lp  engine.TokenLogprobs
}

// queue records a token event whose text (n bytes) is about to be appended.
func (l *nextLogprobs) queue(ev engine.Event, n int) {
	l.waiting = append(l.waiting, pendingLP{end: l.appended + n,
		lp: engine.TokenLogprobs{Token: ev.Token, Logprob: ev.Logprob, Top: ev.TopLogprobs}})
}

// handOut notes that a kvw_next call returned n more bytes (all of the
// request's text when final) and makes its tokens the latest.
func (l *nextLogprobs) handOut(n int, final bool) {
	l.consumed += n
	k := 0
	for k < len(l.waiting) && (final || l.waiting[k].end <= l.consumed) {
		k++
	}
	got := make([]engine.TokenLogprobs, k)
	for i := range got {
		got[i] = l.waiting[i].lp
	}
	l.waiting = l.waiting[:copy(l.waiting, l.waiting[k:])]
	l.mu.Lock()
	l.last = got
	l.mu.Unlock()
}

func (l *nextLogprobs) latest() []engine.TokenLogprobs {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// nextLogprobsOf returns the records of the latest kvw_next on request id.
func nextLogprobsOf(hv C.uintptr_t, id C.uint64_t, outN *C.size_t, fn string) ([]engine.TokenLogprobs, C.int32_t) {
	h, st := lookup(hv, fn)
	if st != stOK {
		return nil, st
	}
	if outN == nil {
		return nil, fail(stInvalid, "%s: out_n is NULL", fn)
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return nil, st
	}
	if !r.logprobs {
		return nil, fail(stInvalid, "%s: request %d did not ask for logprobs (set kvw_request_params.logprobs or top_logprobs)", fn, uint64(id))
	}
	return r.nextLP.latest(), stOK
}

//export kvwgo_next_logprobs
func kvwgo_next_logprobs(hv C.uintptr_t, id C.uint64_t, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_next_logprobs"
	defer guard(&st, fn)
	recs, st := nextLogprobsOf(hv, id, outN, fn)
	if st != stOK {
		return st
	}
	return putChosen(fn, recs, out, capacity, outN)
}

//export kvwgo_next_top_logprobs
func kvwgo_next_top_logprobs(hv C.uintptr_t, id C.uint64_t, index C.size_t, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_next_top_logprobs"
	defer guard(&st, fn)
	recs, st := nextLogprobsOf(hv, id, outN, fn)
	if st != stOK {
		return st
	}
	return putTop(fn, recs, index, "tokens of the latest kvw_next", out, capacity, outN)
}
