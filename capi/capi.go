// Command capi is libkvwarden, kvwarden's C ABI, built with
//
//	go build -buildmode=c-shared -o libkvwarden.so ./capi
//
// The public API is include/kvwarden.h. Its functions are defined in
// kvwarden.c (so the compiler checks them against the header) and forward
// to the kvwgo_* exports below, which are internal. Handles are integer
// tokens (handles.go); no Go pointer is ever given to C or kept by C.
// Every export recovers panics into KVW_ERR_INTERNAL (guard).
package main

/*
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
)

func main() {}

// ---- strings from C ----------------------------------------------------

// maxStopStrings bounds n_stop before anything is read through the pointer.
const maxStopStrings = engine.MaxStopStrings

// goText copies a NUL-terminated C string and checks that it is UTF-8.
func goText(p *C.char, fn, what string) (string, C.int32_t) {
	if p == nil {
		return "", fail(stInvalid, "%s: %s is NULL", fn, what)
	}
	s := C.GoString(p)
	if !utf8.ValidString(s) {
		off := 0
		for off < len(s) {
			r, n := utf8.DecodeRuneInString(s[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return "", fail(stInvalid, "%s: %s is not valid UTF-8 (invalid byte 0x%02x at offset %d)", fn, what, s[off], off)
	}
	return s, stOK
}

// optText is goText where NULL means "".
func optText(p *C.char, fn, what string) (string, C.int32_t) {
	if p == nil {
		return "", stOK
	}
	return goText(p, fn, what)
}

// ---- engine ------------------------------------------------------------

//export kvwgo_engine_open
func kvwgo_engine_open(modelPath *C.char, p *C.kvw_engine_params, logUD C.uintptr_t, out *C.uintptr_t) (st C.int32_t) {
	const fn = "kvw_engine_open"
	defer guard(&st, fn)
	var cfg engine.Config
	var s C.int32_t
	if cfg.ModelPath, s = optText(modelPath, fn, "model_path"); s != stOK {
		return s
	}
	if cfg.TokenizerPath, s = optText(p.tokenizer_path, fn, "params.tokenizer_path"); s != stOK {
		return s
	}
	if cfg.Device, s = optText(p.device, fn, "params.device"); s != stOK {
		return s
	}
	if cfg.Compression, s = optText(p.compression, fn, "params.compression"); s != stOK {
		return s
	}
	if cfg.KVType, s = optText(p.kv_type, fn, "params.kv_type"); s != stOK {
		return s
	}
	if cfg.KVKeyFile, s = optText(p.kv_key_file, fn, "params.kv_key_file"); s != stOK {
		return s
	}
	if cfg.KVDisk, s = optText(p.kv_disk_dir, fn, "params.kv_disk_dir"); s != stOK {
		return s
	}
	if cfg.WeightPages, s = weightPagesEnv(fn); s != stOK {
		return s
	}
	cfg.KVDiskBudget = int64(p.kv_disk_budget_bytes)
	if s = engineSpec(p, fn, &cfg); s != stOK {
		return s
	}
	if cfg.ChatTemplate, s = optText(p.chat_template, fn, "params.chat_template"); s != stOK {
		return s
	}
	cfg.PageSize = int(p.page_size)
	cfg.KVPages = int(p.kv_pages)
	cfg.KVMemory = int64(p.kv_memory_bytes)
	cfg.MaxContext = int(p.max_context)
	cfg.MaxBatchTokens = int(p.max_batch_tokens)
	cfg.MaxSeqs = int(p.max_seqs)
	cfg.MaxQueue = int(p.max_queue)
	cfg.TenantQuota = int(p.tenant_quota)
	cfg.Threads = int(p.n_threads)
	cfg.HostTierBytes = int64(p.host_tier_bytes)
	cfg.ZeroOnRelease = p.zero_on_release != 0
	cfg.Poison = p.poison != 0
	cfg.DisablePrefixCache = p.disable_prefix_cache != 0
	switch p.kv_checksum {
	case C.KVW_CHECKSUM_HANDOFF:
		cfg.KVChecksum = engine.ChecksumHandoff
	case C.KVW_CHECKSUM_STEP:
		cfg.KVChecksum = engine.ChecksumStep
	case C.KVW_CHECKSUM_OFF:
		cfg.KVChecksum = engine.ChecksumOff
	default:
		return fail(stInvalid, "%s: params.kv_checksum %d is not a kvw_kv_checksum", fn, int32(p.kv_checksum))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"page_size", int64(p.page_size)}, {"kv_pages", int64(p.kv_pages)}, {"kv_memory_bytes", int64(p.kv_memory_bytes)},
		{"max_context", int64(p.max_context)}, {"max_batch_tokens", int64(p.max_batch_tokens)}, {"max_seqs", int64(p.max_seqs)},
		{"max_queue", int64(p.max_queue)}, {"tenant_quota", int64(p.tenant_quota)}, {"host_tier_bytes", int64(p.host_tier_bytes)},
		{"n_threads", int64(p.n_threads)}, {"kv_disk_budget_bytes", int64(p.kv_disk_budget_bytes)},
	} {
		if f.v < 0 {
			return fail(stInvalid, "%s: params.%s is negative (%d)", fn, f.name, f.v)
		}
	}
	if p.log_level < C.KVW_LOG_DEBUG || p.log_level > C.KVW_LOG_ERROR {
		return fail(stInvalid, "%s: params.log_level %d is not a kvw_log_level", fn, int32(p.log_level))
	}
	log := newCLog(p.log_callback, logUD, p.log_level)
	cfg.Logger = log.logger()

	eng, err := engine.New(cfg)
	if err != nil {
		log.off()
		e := classify(err, true)
		e.msg = fn + ": " + e.msg
		return e.set()
	}
	hv, _ := newHandle(eng, log)
	*out = hv
	return stOK
}

//export kvwgo_engine_close
func kvwgo_engine_close(hv C.uintptr_t) (st C.int32_t) {
	const fn = "kvw_engine_close"
	defer guard(&st, fn)
	h, st := remove(hv, fn)
	if st != stOK {
		return st
	}
	h.freeAll()
	err := h.eng.Close()
	h.log.off()
	if err != nil {
		// The handle is gone either way; report what went wrong.
		e := classify(err, false)
		e.msg = fn + ": " + e.msg
		return e.set()
	}
	return stOK
}

//export kvwgo_engine_max_context
func kvwgo_engine_max_context(hv C.uintptr_t, out *C.int32_t) (st C.int32_t) {
	const fn = "kvw_engine_max_context"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if out == nil {
		return fail(stInvalid, "%s: out is NULL", fn)
	}
	*out = C.int32_t(h.eng.MaxContext())
	return stOK
}

// ---- tokens ------------------------------------------------------------

//export kvwgo_tokenize
func kvwgo_tokenize(hv C.uintptr_t, text *C.char, addBOS C.int32_t, tokens *C.int32_t, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_tokenize"
	defer guard(&st, fn)
	var flags C.uint32_t
	if addBOS != 0 {
		flags = C.KVW_TOKENIZE_ADD_BOS
	}
	return tokenize(hv, text, flags, tokens, capacity, outN, fn)
}

//export kvwgo_detokenize
func kvwgo_detokenize(hv C.uintptr_t, tokens *C.int32_t, n C.size_t, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_detokenize"
	defer guard(&st, fn)
	return detokenize(hv, tokens, n, 0, buf, bufSize, outLen, fn)
}

//export kvwgo_vocab_info
func kvwgo_vocab_info(hv C.uintptr_t, nVocab, bos, eos *C.int32_t) (st C.int32_t) {
	const fn = "kvw_vocab_info"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if nVocab != nil {
		*nVocab = C.int32_t(h.tok.VocabSize())
	}
	if bos != nil {
		*bos = C.int32_t(h.tok.BOS())
	}
	if eos != nil {
		*eos = C.int32_t(h.tok.EOS())
	}
	return stOK
}

// ---- requests ----------------------------------------------------------

// buildRequest turns a prompt and normalized params into an engine.Request.
func buildRequest(h *engineHandle, prompt *C.char, p *C.kvw_request_params, fn string) (engine.Request, C.int32_t) {
	var req engine.Request
	var st C.int32_t
	if req.Prompt, st = goText(prompt, fn, "prompt"); st != stOK {
		return req, st
	}
	st = buildParams(h, p, fn, &req)
	return req, st
}

// buildParams fills in what normalized params say about a request.
func buildParams(h *engineHandle, p *C.kvw_request_params, fn string, req *engine.Request) C.int32_t {
	var st C.int32_t
	if req.Tenant, st = optText(p.tenant, fn, "params.tenant"); st != stOK {
		return st
	}
	switch {
	case p.max_tokens == C.KVW_MAX_TOKENS_UNLIMITED:
		// Until end of generation or context: the engine's own meaning.
		req.MaxTokens = engine.MaxTokensUntilEnd
	case p.max_tokens < 0:
		return errInfo{status: stInvalid, reason: reasonParams, msg: fmt.Sprintf("%s: params.max_tokens %d is negative (-1, KVW_MAX_TOKENS_UNLIMITED, means until end of generation or context)", fn, int32(p.max_tokens))}.set()
	default:
		req.MaxTokens = int(p.max_tokens)
	}
	req.NoBOS = p.no_bos != 0
	req.ParseSpecial = p.parse_special != 0
	req.Logprobs = p.logprobs != 0
	req.TopLogprobs = int(p.top_logprobs)
	req.LastLogits = p.keep_logits != 0
	if p.n_stop > 0 {
		if p.stop == nil {
			return fail(stInvalid, "%s: params.stop is NULL but n_stop is %d", fn, uint32(p.n_stop))
		}
		if p.n_stop > maxStopStrings {
			return errInfo{status: stInvalid, reason: reasonParams, msg: fmt.Sprintf("%s: params.n_stop %d exceeds %d", fn, uint32(p.n_stop), maxStopStrings)}.set()
		}
		for i, s := range unsafe.Slice(p.stop, int(p.n_stop)) {
			t, st := goText(s, fn, fmt.Sprintf("params.stop[%d]", i))
			if st != stOK {
				return st
			}
			req.Stop = append(req.Stop, t)
		}
	}
	req.Sampling = sampling(p)
	if st := requestPenalties(p, fn, req); st != stOK {
		return st
	}
	if st := requestKeepTokens(p, fn, req); st != stOK {
		return st
	}
	if st := requestSpec(p, fn, req); st != stOK {
		return st
	}
	return requestGrammar(h, p, fn, req)
}

//export kvwgo_submit
func kvwgo_submit(hv C.uintptr_t, prompt *C.char, p *C.kvw_request_params, out *C.uint64_t) (st C.int32_t) {
	const fn = "kvw_submit"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if out == nil {
		return fail(stInvalid, "%s: out_id is NULL", fn)
	}
	req, st := buildRequest(h, prompt, p, fn)
	if st != stOK {
		return st
	}
	return submit(h, req, out, fn)
}

// submit submits req and registers it for kvw_next; *out gets its ID.
func submit(h *engineHandle, req engine.Request, out *C.uint64_t, fn string) C.int32_t {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := h.eng.Submit(ctx, req)
	if err != nil {
		cancel()
		e := classify(err, false)
		e.msg = fn + ": " + e.msg
		return e.set()
	}
	r := h.add(s, cancel, req)
	*out = C.uint64_t(r.id)
	return stOK
}

// finalStatus maps a finished request's result to a status and records its
// error as the caller's last error.
func finalStatus(res engine.Result, fn string) C.int32_t {
	if res.Err == nil {
		return stOK
	}
	e := classify(res.Err, false)
	if e.status == stClosed {
		e.status = stAborted
	}
	e.msg = fmt.Sprintf("%s: request ended (%s): %s", fn, res.FinishReason, e.msg)
	return e.set()
}

//export kvwgo_next
func kvwgo_next(hv C.uintptr_t, id C.uint64_t, timeoutMS C.int32_t, buf *C.char, bufSize C.size_t, outLen *C.size_t, outDone *C.int32_t) (st C.int32_t) {
	const fn = "kvw_next"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outLen == nil || outDone == nil {
		return fail(stInvalid, "%s: out_len and out_done must not be NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return st
	}
	*outLen, *outDone = 0, 0

	var timeout <-chan time.Time
	if timeoutMS > 0 {
		t := time.NewTimer(time.Duration(timeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	timedOut := func() C.int32_t {
		return fail(stTimeout, "%s: nothing arrived within %d ms", fn, int32(timeoutMS))
	}
	freed := func() C.int32_t {
		if r.closing.Load() {
			return fail(stClosed, "%s: the engine was closed while waiting for request %d", fn, uint64(id))
		}
		return fail(stNotFound, "%s: request %d was freed while waiting", fn, uint64(id))
	}

	// Become the request's reader.
	if timeoutMS == 0 {
		select {
		case r.sem <- struct{}{}:
		case <-r.freed:
			return freed()
		default:
			return timedOut()
		}
	} else {
		select {
		case r.sem <- struct{}{}:
		case <-r.freed:
			return freed()
		case <-timeout:
			return timedOut()
		}
	}
	defer func() { <-r.sem }()

	// Wait until there is text or the request ended (an event may carry no
	// text while a multi-byte character or a possible stop string is held).
	for len(r.pending) == 0 && !r.ended {
		var ev engine.Event
		var ok bool
		if r.look != nil {
			r.take(r.look.ev, r.look.ok)
			r.look = nil
			continue
		}
		if timeoutMS == 0 {
			select {
			case ev, ok = <-r.events:
			case <-r.freed:
				return freed()
			default:
				return timedOut()
			}
		} else {
			select {
			case ev, ok = <-r.events:
			case <-r.freed:
				return freed()
			case <-timeout:
				return timedOut()
			}
		}
		r.take(ev, ok)
	}
	// One token's text per call (one character's when a token ends inside
	// it), as llama-server and llama-cpp-python stream: only an end that
	// is already there joins it, so that the last text comes with done;
	// another token waits for the next call.
	if len(r.pending) > 0 && !r.ended && r.look == nil {
		select {
		case ev, ok := <-r.events:
			if !ok || (ev.Done && ev.Text == "") {
				r.take(ev, ok)
			} else {
				r.look = &lookahead{ev, ok}
			}
		default:
		}
	}

	if len(r.pending) > 0 {
		room := 0
		if bufSize > 0 {
			room = int(min(uint64(bufSize)-1, uint64(len(r.pending))))
		}
		n := utf8Fit(r.pending, room)
		if n == 0 {
			*outLen = C.size_t(len(r.pending))
			return fail(stTooSmall, "%s: buf_size %d cannot hold the next character (%d bytes pending)", fn, uint64(bufSize), len(r.pending))
		}
		writeStr(buf, r.pending[:n])
		r.pending = r.pending[:copy(r.pending, r.pending[n:])]
		*outLen = C.size_t(n)
		if len(r.pending) == 0 && r.ended && r.res.Err == nil {
			*outDone = 1
		}
		r.nextLP.handOut(n, *outDone == 1)
		return stOK
	}
	// ended and drained
	if buf != nil && bufSize > 0 {
		*buf = 0
	}
	*outDone = 1
	r.nextLP.handOut(0, true)
	return finalStatus(r.res, fn)
}

//export kvwgo_abort
func kvwgo_abort(hv C.uintptr_t, id C.uint64_t) (st C.int32_t) {
	const fn = "kvw_abort"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return st
	}
	if _, done := r.st.Result(); done {
		return stOK
	}
	// ErrNotFound here means it ended meanwhile: still a no-op success.
	_ = h.eng.Abort(r.st.ID())
	return stOK
}

//export kvwgo_request_free
func kvwgo_request_free(hv C.uintptr_t, id C.uint64_t) (st C.int32_t) {
	const fn = "kvw_request_free"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return st
	}
	h.free(r)
	return stOK
}

// fillResult writes res (final when done) into a full-size C struct.
func fillResult(out *C.kvw_result, res engine.Result, done bool, generated int, status C.int32_t) {
	out.struct_size = C.uint32_t(unsafe.Sizeof(*out))
	out.engine_request_id = C.uint64_t(res.ID)
	if !done {
		out.status = stOK
		out.finish_reason = C.KVW_FINISH_NONE
		out.generated_tokens = C.int32_t(generated)
		return
	}
	out.done = 1
	out.status = status
	switch res.FinishReason {
	case "stop":
		out.finish_reason = C.KVW_FINISH_STOP
	case "length":
		out.finish_reason = C.KVW_FINISH_LENGTH
	case "abort":
		out.finish_reason = C.KVW_FINISH_ABORT
	default:
		out.finish_reason = C.KVW_FINISH_ERROR
	}
	if status == stAborted {
		out.finish_reason = C.KVW_FINISH_ABORT
	}
	out.prompt_tokens = C.int32_t(len(res.PromptTokens))
	out.generated_tokens = C.int32_t(len(res.Tokens))
	out.cached_tokens = C.int32_t(res.CachedTokens)
	ms := func(d time.Duration) C.double { return C.double(float64(d) / float64(time.Millisecond)) }
	t := res.Timings
	out.queued_ms = ms(t.Queued)
	out.ttft_ms = ms(t.TimeToFirstTok)
	out.prefill_ms = ms(t.Prefill)
	out.decode_ms = ms(t.Decode)
	out.prefill_tps = C.double(t.PrefillTPS())
	out.decode_tps = C.double(t.DecodeTPS())
}

//export kvwgo_request_result
func kvwgo_request_result(hv C.uintptr_t, id C.uint64_t, out *C.kvw_result) (st C.int32_t) {
	const fn = "kvw_request_result"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return st
	}
	res, done := r.st.Result()
	status := stOK
	if done && res.Err != nil {
		status = classify(res.Err, false).status
		if status == stClosed {
			status = stAborted
		}
	}
	fillResult(out, res, done, int(r.generated.Load()), status)
	return stOK
}

//export kvwgo_request_tokens
func kvwgo_request_tokens(hv C.uintptr_t, id C.uint64_t, which C.int32_t, tokens *C.int32_t, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_tokens"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outN == nil {
		return fail(stInvalid, "%s: out_n is NULL", fn)
	}
	if tokens == nil && capacity != 0 {
		return fail(stInvalid, "%s: tokens is NULL but capacity is %d", fn, uint64(capacity))
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return st
	}
	res, done := r.st.Result()
	if !done {
		return fail(stInvalid, "%s: request %d is still running", fn, uint64(id))
	}
	var ids []int
	switch which {
	case C.KVW_TOKENS_PROMPT:
		ids = res.PromptTokens
	case C.KVW_TOKENS_GENERATED:
		ids = res.Tokens
	default:
		return fail(stInvalid, "%s: which %d is neither KVW_TOKENS_PROMPT nor KVW_TOKENS_GENERATED", fn, int32(which))
	}
	return putTokens(fn, ids, tokens, capacity, outN)
}

//export kvwgo_generate
func kvwgo_generate(hv C.uintptr_t, prompt *C.char, p *C.kvw_request_params, cb C.kvw_piece_callback, ud C.uintptr_t,
	buf *C.char, bufSize C.size_t, outLen *C.size_t, out *C.kvw_result) (st C.int32_t) {
	const fn = "kvw_generate"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	req, st := buildRequest(h, prompt, p, fn)
	if st != stOK {
		return st
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := h.eng.Submit(ctx, req)
	if err != nil {
		e := classify(err, false)
		if e.status == stRejected || e.reason != reasonNone {
			out.struct_size = C.uint32_t(unsafe.Sizeof(*out))
			out.done = 1
			out.status = e.status
			out.finish_reason = C.KVW_FINISH_REJECTED
			out.reject_reason = e.reason
			out.limit = C.int64_t(e.limit)
			out.requested = C.int64_t(e.requested)
			out.prompt_tokens = C.int32_t(e.prompt)
		}
		e.msg = fn + ": " + e.msg
		return e.set()
	}
	// text is exactly what was delivered: once the callback asks to stop,
	// later text (already generated or not) is dropped, and the call ends
	// KVW_ERR_ABORTED whether or not the request had finished meanwhile.
	var text strings.Builder
	stopped := false
	for ev := range s.Events() {
		if ev.Text == "" || stopped {
			continue
		}
		text.WriteString(ev.Text)
		if cb == nil {
			continue
		}
		cs := C.CString(ev.Text)
		stop := C.kvw_i_call_piece(cb, cs, C.size_t(len(ev.Text)), ud)
		C.free(unsafe.Pointer(cs))
		if stop != 0 {
			stopped = true
			_ = h.eng.Abort(s.ID()) // ErrNotFound: it had finished; still a stop
		}
	}
	res := s.Wait()
	var status C.int32_t
	if stopped {
		status = fail(stAborted, "%s: the piece callback asked to stop after %d bytes", fn, text.Len())
	} else {
		status = finalStatus(res, fn)
	}
	fillResult(out, res, true, len(res.Tokens), status)

	full := text.String()
	if outLen != nil {
		*outLen = C.size_t(len(full))
	}
	if buf != nil && bufSize > 0 {
		n := utf8Fit([]byte(full), int(min(uint64(bufSize)-1, uint64(len(full)))))
		writeStr(buf, []byte(full[:n]))
		if n < len(full) && status == stOK {
			return fail(stTooSmall, "%s: the %d-byte output was cut to fit buf_size %d", fn, len(full), uint64(bufSize))
		}
	}
	return status
}

// ---- stats -------------------------------------------------------------

//export kvwgo_engine_stats
func kvwgo_engine_stats(hv C.uintptr_t, out *C.kvw_stats) (st C.int32_t) {
	const fn = "kvw_engine_stats"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	s := h.eng.Stats()
	p := s.Pool
	out.pool_pages = C.int64_t(p.Pages)
	out.pool_free = C.int64_t(p.Free)
	out.pool_owned = C.int64_t(p.Owned)
	out.pool_sealed = C.int64_t(p.Sealed)
	out.pool_releasing = C.int64_t(p.Releasing)
	out.pool_quarantined = C.int64_t(p.Quarantined)
	out.step_leases = C.int64_t(p.StepLeases)
	out.copy_leases = C.int64_t(p.CopyLeases)
	out.prefix_leases = C.int64_t(p.PrefixLeases)
	out.page_allocs = C.uint64_t(p.Allocs)
	out.page_releases = C.uint64_t(p.Releases)
	out.page_scrubs = C.uint64_t(p.Scrubs)
	out.deferred_releases = C.uint64_t(p.DeferredReleases)
	out.deferred_freed = C.uint64_t(p.DeferredFreed)
	out.deferred_quarantined = C.uint64_t(p.DeferredQuarantined)
	out.checksum_failures = C.uint64_t(p.ChecksumFailures)
	out.isolation_violations = C.uint64_t(p.IsolationViolations)
	out.stale_completions = C.uint64_t(p.StaleCompletions)
	out.host_tier_used_bytes = C.int64_t(p.HostTierUsed)
	out.host_tier_capacity_bytes = C.int64_t(p.HostTierCapacity)
	out.waiting = C.int64_t(s.Waiting)
	out.running = C.int64_t(s.Running)
	out.swapped = C.int64_t(s.Swapped)
	out.submitted = C.uint64_t(s.Submitted)
	out.admitted = C.uint64_t(s.Admitted)
	var rej, fin uint64
	for _, v := range s.Rejected {
		rej += v
	}
	for _, v := range s.Finished {
		fin += v
	}
	out.rejected = C.uint64_t(rej)
	out.finished = C.uint64_t(fin)
	out.aborted = C.uint64_t(s.Finished["abort"])
	out.isolation_failures = C.uint64_t(s.IsolationFailures)
	out.prompt_tokens = C.uint64_t(s.PromptTokens)
	out.generated_tokens = C.uint64_t(s.GeneratedTokens)
	out.cached_tokens = C.uint64_t(s.CachedTokens)
	out.steps = C.uint64_t(s.Steps)
	out.preemptions = C.uint64_t(s.Preemptions)
	out.prefix_hits = C.uint64_t(s.PrefixHits)
	out.prefix_misses = C.uint64_t(s.PrefixMisses)
	out.ttft_mean_ms = C.double(float64(s.TTFT.Mean()) / float64(time.Millisecond))
	out.step_mean_ms = C.double(float64(s.StepTime.Mean()) / float64(time.Millisecond))
	out.host_seal_failures = C.uint64_t(p.SealFailures)
	d := s.Disk
	out.disk_used_bytes = C.int64_t(d.Used)
	out.disk_budget_bytes = C.int64_t(d.Budget)
	out.disk_files = C.int64_t(d.Files)
	out.disk_writes = C.uint64_t(d.Writes)
	out.disk_hits = C.uint64_t(d.Hits)
	out.disk_seal_failures = C.uint64_t(d.SealFailures)
	out.disk_evictions = C.uint64_t(d.Evictions)
	out.disk_erased = C.uint64_t(d.Erased)
	out.disk_skipped = C.uint64_t(d.Skipped + d.Dropped) // the C struct keeps one count of pages not written
	out.disk_write_errors = C.uint64_t(d.WriteErrors)
	out.spec_steps = C.uint64_t(s.Spec.Steps)
	out.spec_drafted = C.uint64_t(s.Spec.Drafted)
	out.spec_accepted = C.uint64_t(s.Spec.Accepted)
	return stOK
}

// putTokens stores ids for the caller with the size-query pattern: *outN
// always gets the count; tokens == NULL asks only for it; a capacity that
// is too small fails with KVW_ERR_BUFFER_TOO_SMALL and writes nothing.
func putTokens(fn string, ids []int, tokens *C.int32_t, capacity C.size_t, outN *C.size_t) C.int32_t {
	*outN = C.size_t(len(ids))
	if tokens == nil {
		return stOK
	}
	if uint64(capacity) < uint64(len(ids)) {
		return fail(stTooSmall, "%s: %d tokens do not fit in capacity %d", fn, len(ids), uint64(capacity))
	}
	dst := unsafe.Slice((*int32)(unsafe.Pointer(tokens)), len(ids))
	for i, id := range ids {
		dst[i] = int32(id)
	}
	return stOK
}
