package main

/*
#include "bridge.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// Engine handles given to C are tokens, never Go pointers: the value
// id<<16 | handleTag, where id comes from a process-wide counter that is
// never reused. A value that does not carry the tag, or an id never issued,
// is "not found"; an id that was issued but is no longer in the table is
// "closed".
const handleTag = 0x4B57

var (
	enginesMu  sync.Mutex
	engines    = map[uint64]*engineHandle{}
	lastEngine atomic.Uint64
	lastReq    atomic.Uint64 // request IDs, process-wide, never reused
)

// engineHandle is one open engine and the requests submitted through the C API.
type engineHandle struct {
	id  uint64
	eng *engine.Engine
	tok tokenizer.Tokenizer

	mu   sync.Mutex
	reqs map[uint64]*request

	log *cLog
}

// request is a submitted request that C streams with kvw_next.
type request struct {
	id     uint64
	st     *engine.Stream
	cancel context.CancelFunc // ends the stream's delivery goroutine on free
	events <-chan engine.Event
	// What the request asked to record (kvw_request_logprobs, _logits).
	logprobs, keepLogits bool
	promptLogprobs       bool // kvw_request_prompt_logprobs (v5)

	// sem serializes readers (kvw_next); its holder owns the fields below.
	sem       chan struct{}
	pending   []byte
	look      *lookahead // an event read ahead, for the next kvw_next
	ended     bool
	res       engine.Result
	generated atomic.Int64
	nextLP    nextLogprobs // kvw_next_logprobs: per-call records

	freed    chan struct{}
	freeOnce sync.Once
	closing  atomic.Bool // freed by kvw_engine_close: waiting readers report CLOSED
}

func newHandle(eng *engine.Engine, log *cLog) (C.uintptr_t, *engineHandle) {
	id := lastEngine.Add(1)
	h := &engineHandle{id: id, eng: eng, tok: eng.Tokenizer(), reqs: map[uint64]*request{}, log: log}
	enginesMu.Lock()
	engines[id] = h
	enginesMu.Unlock()
	return C.uintptr_t(uintptr(id<<16 | handleTag)), h
}

// lookup resolves an engine handle or returns the status and message.
func lookup(hv C.uintptr_t, fn string) (*engineHandle, C.int32_t) {
	v := uint64(hv)
	if v == 0 {
		return nil, fail(stInvalid, "%s: engine is NULL", fn)
	}
	id := v >> 16
	if v&0xFFFF != handleTag || id == 0 || id > lastEngine.Load() {
		return nil, fail(stNotFound, "%s: %#x is not a kvwarden engine handle", fn, v)
	}
	enginesMu.Lock()
	h := engines[id]
	enginesMu.Unlock()
	if h == nil {
		return nil, fail(stClosed, "%s: engine handle %#x was closed", fn, v)
	}
	return h, stOK
}

// remove takes the handle out of the table; only one caller wins.
func remove(hv C.uintptr_t, fn string) (*engineHandle, C.int32_t) {
	h, st := lookup(hv, fn)
	if st != stOK {
		return nil, st
	}
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if engines[h.id] != h {
		return nil, fail(stClosed, "%s: engine handle %#x was closed", fn, uint64(hv))
	}
	delete(engines, h.id)
	return h, stOK
}

func (h *engineHandle) request(id C.uint64_t, fn string) (*request, C.int32_t) {
	h.mu.Lock()
	r := h.reqs[uint64(id)]
	h.mu.Unlock()
	if r == nil {
		return nil, fail(stNotFound, "%s: request %d not found on this engine (never submitted here, or freed)", fn, uint64(id))
	}
	return r, stOK
}

func (h *engineHandle) add(st *engine.Stream, cancel context.CancelFunc, req engine.Request) *request {
	r := &request{
		id: lastReq.Add(1), st: st, cancel: cancel, events: st.Events(),
		sem: make(chan struct{}, 1), freed: make(chan struct{}),
		logprobs: req.Logprobs || req.TopLogprobs > 0, keepLogits: req.LastLogits, promptLogprobs: req.PromptLogprobs,
	}
	h.mu.Lock()
	h.reqs[r.id] = r
	h.mu.Unlock()
	return r
}

// free drops r: aborts it if it runs, ends its delivery goroutine, wakes its readers.
func (h *engineHandle) free(r *request) {
	h.mu.Lock()
	delete(h.reqs, r.id)
	h.mu.Unlock()
	r.freeOnce.Do(func() {
		close(r.freed)
		r.cancel() // aborts a running request; lets the delivery goroutine exit
	})
}

// freeAll drops every request (engine close).
func (h *engineHandle) freeAll() {
	h.mu.Lock()
	rs := make([]*request, 0, len(h.reqs))
	for _, r := range h.reqs {
		rs = append(rs, r)
	}
	h.mu.Unlock()
	for _, r := range rs {
		r.closing.Store(true) // before free closes r.freed
		h.free(r)
	}
}

// take moves one event into the request's state. Holder of sem only.
func (r *request) take(ev engine.Event, ok bool) {
	if !ok { // delivery ended without a Done event: the result is final anyway
		r.ended = true
		r.res = r.st.Wait()
		return
	}
	if ev.Token >= 0 && !ev.Done {
		r.generated.Add(1)
		if r.logprobs {
			r.nextLP.queue(ev, len(ev.Text))
		}
	}
	r.nextLP.appended += len(ev.Text)
	r.pending = append(r.pending, ev.Text...)
	if ev.Done {
		r.ended = true
		if ev.Result != nil {
			r.res = *ev.Result
		} else {
			r.res = r.st.Wait()
		}
	}
}

// lookahead is an event kvw_next read but left for the next call.
type lookahead struct {
	ev engine.Event
	ok bool
}

// utf8Fit returns the longest prefix length of b, at most n, that does not
// end inside a UTF-8 sequence. Stream text is valid UTF-8, so cutting at a
// non-continuation byte is a character boundary.
func utf8Fit(b []byte, n int) int {
	if n >= len(b) {
		return len(b)
	}
	for n > 0 && b[n]&0xC0 == 0x80 {
		n--
	}
	return n
}

// writeStr copies s into a C buffer of size bufSize with a terminating NUL
// (caller checked len(s) < bufSize).
func writeStr(buf *C.char, s []byte) {
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(s)+1)
	copy(dst, s)
	dst[len(s)] = 0
}

func (h *engineHandle) String() string { return fmt.Sprintf("engine#%d", h.id) }
