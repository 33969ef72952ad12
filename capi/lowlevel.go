package main

/*
#include "bridge.h"
*/
import "C"

import (
	"errors"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// maxTokensIn bounds token arrays from C before they are read.
const maxTokensIn = 1 << 28

// ---- tokens ------------------------------------------------------------

func tokenize(hv C.uintptr_t, text *C.char, flags C.uint32_t, tokens *C.int32_t, capacity C.size_t, outN *C.size_t, fn string) C.int32_t {
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
	if flags&^(C.KVW_TOKENIZE_ADD_BOS|C.KVW_TOKENIZE_SPECIAL) != 0 {
		return fail(stInvalid, "%s: unknown flags %#x", fn, uint32(flags))
	}
	s, st := goText(text, fn, "text")
	if st != stOK {
		return st
	}
	ids, err := h.tok.Encode(s, tokenizer.Options{BOS: flags&C.KVW_TOKENIZE_ADD_BOS != 0, Special: flags&C.KVW_TOKENIZE_SPECIAL != 0})
	if err != nil {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	return putTokens(fn, ids, tokens, capacity, outN)
}

//export kvwgo_tokenize_ex
func kvwgo_tokenize_ex(hv C.uintptr_t, text *C.char, flags C.uint32_t, tokens *C.int32_t, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_tokenize_ex"
	defer guard(&st, fn)
	return tokenize(hv, text, flags, tokens, capacity, outN, fn)
}

// cTokens views n token IDs from C (nil for n 0).
func cTokens(tokens *C.int32_t, n C.size_t, fn string) ([]int32, C.int32_t) {
	if tokens == nil && n != 0 {
		return nil, fail(stInvalid, "%s: tokens is NULL but n is %d", fn, uint64(n))
	}
	if uint64(n) > maxTokensIn {
		return nil, fail(stInvalid, "%s: n %d is implausibly large", fn, uint64(n))
	}
	if n == 0 {
		return nil, stOK
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(tokens)), int(n)), stOK
}

func detokenize(hv C.uintptr_t, tokens *C.int32_t, n C.size_t, flags C.uint32_t, buf *C.char, bufSize C.size_t, outLen *C.size_t, fn string) C.int32_t {
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outLen == nil {
		return fail(stInvalid, "%s: out_len is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	if flags&^C.KVW_DETOKENIZE_SPECIAL != 0 {
		return fail(stInvalid, "%s: unknown flags %#x", fn, uint32(flags))
	}
	ids, st := cTokens(tokens, n, fn)
	if st != stOK {
		return st
	}
	special := flags&C.KVW_DETOKENIZE_SPECIAL != 0
	vocab := h.tok.VocabSize()
	var text []byte
	prev := -1
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fail(stInvalid, "%s: token %d at index %d is outside the vocabulary of %d", fn, id, i, vocab)
		}
		b := h.tok.Decode(prev, int(id))
		if len(b) == 0 && special {
			// Control tokens decode to nothing; their text is the piece.
			b = []byte(h.tok.Piece(int(id)))
		}
		text = append(text, b...)
		prev = int(id)
	}
	if !utf8.Valid(text) {
		text = []byte(strings.ToValidUTF8(string(text), "\uFFFD"))
	}
	return putText(fn, text, buf, bufSize, outLen)
}

//export kvwgo_detokenize_ex
func kvwgo_detokenize_ex(hv C.uintptr_t, tokens *C.int32_t, n C.size_t, flags C.uint32_t, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_detokenize_ex"
	defer guard(&st, fn)
	return detokenize(hv, tokens, n, flags, buf, bufSize, outLen, fn)
}

// putText stores text NUL-terminated for the caller with the size-query
// pattern: *outLen always gets the length; buf NULL asks only for it; a
// buf_size below length + 1 fails with KVW_ERR_BUFFER_TOO_SMALL and
// writes nothing.
func putText(fn string, text []byte, buf *C.char, bufSize C.size_t, outLen *C.size_t) C.int32_t {
	*outLen = C.size_t(len(text))
	if buf == nil {
		return stOK
	}
	if uint64(bufSize) < uint64(len(text))+1 {
		return fail(stTooSmall, "%s: %d bytes plus NUL do not fit in buf_size %d", fn, len(text), uint64(bufSize))
	}
	writeStr(buf, text)
	return stOK
}

// ---- token requests ----------------------------------------------------

//export kvwgo_submit_tokens
func kvwgo_submit_tokens(hv C.uintptr_t, tokens *C.int32_t, n C.size_t, p *C.kvw_request_params, out *C.uint64_t) (st C.int32_t) {
	const fn = "kvw_submit_tokens"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if out == nil {
		return fail(stInvalid, "%s: out_id is NULL", fn)
	}
	ids, st := cTokens(tokens, n, fn)
	if st != stOK {
		return st
	}
	if len(ids) == 0 {
		return errInfo{status: stInvalid, reason: reasonEmpty, msg: fn + ": n_tokens is 0 (a prompt needs at least one token)"}.set()
	}
	var req engine.Request
	if st := buildParams(h, p, fn, &req); st != stOK {
		return st
	}
	if limit := h.eng.MaxContext(); len(ids) >= limit {
		// What admission would say, without copying a huge array first.
		requested := len(ids) + 1 // MaxTokensUntilEnd: at least one token
		switch req.MaxTokens {
		case 0:
			requested = len(ids) + engine.DefaultMaxTokens
		case engine.MaxTokensUntilEnd:
		default:
			requested = len(ids) + req.MaxTokens
		}
		e := classify(&engine.PromptTooLongError{Requested: requested, Limit: limit, Prompt: len(ids)}, false)
		e.msg = fn + ": " + e.msg
		return e.set()
	}
	req.Tokens = make([]int, len(ids))
	for i, id := range ids {
		req.Tokens[i] = int(id) // the engine checks the vocabulary
	}
	return submit(h, req, out, fn)
}

// ended returns the final result of request id, or fails while it runs.
func (h *engineHandle) ended(id C.uint64_t, fn string) (engine.Result, C.int32_t) {
	r, st := h.request(id, fn)
	if st != stOK {
		return engine.Result{}, st
	}
	res, done := r.st.Result()
	if !done {
		return res, fail(stInvalid, "%s: request %d is still running", fn, uint64(id))
	}
	return res, stOK
}

// logprobsOf returns the recorded log-probabilities of an ended request.
func logprobsOf(hv C.uintptr_t, id C.uint64_t, outN *C.size_t, fn string) ([]engine.TokenLogprobs, C.int32_t) {
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
	res, st := h.ended(id, fn)
	if st != stOK {
		return nil, st
	}
	if !r.logprobs {
		return nil, fail(stInvalid, "%s: request %d did not ask for logprobs (set kvw_request_params.logprobs or top_logprobs)", fn, uint64(id))
	}
	return res.Logprobs, stOK
}

func putLogprobs(fn string, lps []engine.TokenLogprob, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) C.int32_t {
	*outN = C.size_t(len(lps))
	if out == nil {
		if capacity != 0 {
			return fail(stInvalid, "%s: out is NULL but capacity is %d", fn, uint64(capacity))
		}
		return stOK
	}
	if uint64(capacity) < uint64(len(lps)) {
		return fail(stTooSmall, "%s: %d entries do not fit in capacity %d", fn, len(lps), uint64(capacity))
	}
	dst := unsafe.Slice(out, len(lps))
	for i, lp := range lps {
		dst[i].token = C.int32_t(lp.Token)
		dst[i].logprob = C.float(lp.Logprob)
	}
	return stOK
}

// putChosen hands out the sampled token's record at each position.
func putChosen(fn string, recs []engine.TokenLogprobs, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) C.int32_t {
	chosen := make([]engine.TokenLogprob, len(recs))
	for i, lp := range recs {
		chosen[i] = engine.TokenLogprob{Token: lp.Token, Logprob: lp.Logprob}
	}
	return putLogprobs(fn, chosen, out, capacity, outN)
}

// putTop hands out the alternatives at position index of recs; what names
// the positions in the error.
func putTop(fn string, recs []engine.TokenLogprobs, index C.size_t, what string, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) C.int32_t {
	if uint64(index) >= uint64(len(recs)) {
		return fail(stInvalid, "%s: index %d is past the %d %s", fn, uint64(index), len(recs), what)
	}
	return putLogprobs(fn, recs[index].Top, out, capacity, outN)
}

//export kvwgo_request_logprobs
func kvwgo_request_logprobs(hv C.uintptr_t, id C.uint64_t, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_logprobs"
	defer guard(&st, fn)
	all, st := logprobsOf(hv, id, outN, fn)
	if st != stOK {
		return st
	}
	return putChosen(fn, all, out, capacity, outN)
}

//export kvwgo_request_top_logprobs
func kvwgo_request_top_logprobs(hv C.uintptr_t, id C.uint64_t, index C.size_t, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_top_logprobs"
	defer guard(&st, fn)
	all, st := logprobsOf(hv, id, outN, fn)
	if st != stOK {
		return st
	}
	return putTop(fn, all, index, "generated tokens", out, capacity, outN)
}

//export kvwgo_request_logits
func kvwgo_request_logits(hv C.uintptr_t, id C.uint64_t, out *C.float, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_logits"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outN == nil {
		return fail(stInvalid, "%s: out_n is NULL", fn)
	}
	if out == nil && capacity != 0 {
		return fail(stInvalid, "%s: out is NULL but capacity is %d", fn, uint64(capacity))
	}
	r, st := h.request(id, fn)
	if st != stOK {
		return st
	}
	res, st := h.ended(id, fn)
	if st != stOK {
		return st
	}
	if !r.keepLogits {
		return fail(stInvalid, "%s: request %d did not ask for logits (set kvw_request_params.keep_logits)", fn, uint64(id))
	}
	*outN = C.size_t(len(res.Logits))
	if out == nil {
		return stOK
	}
	if uint64(capacity) < uint64(len(res.Logits)) {
		return fail(stTooSmall, "%s: %d logits do not fit in capacity %d", fn, len(res.Logits), uint64(capacity))
	}
	copy(unsafe.Slice((*float32)(unsafe.Pointer(out)), len(res.Logits)), res.Logits)
	return stOK
}

// ---- saved state -------------------------------------------------------

// stateError maps the engine's state errors (all bad input) to a status.
func stateError(err error, fn string) C.int32_t {
	if errors.Is(err, engine.ErrStateInvalid) || errors.Is(err, engine.ErrStateModel) || errors.Is(err, engine.ErrInvalidParams) {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	e := classify(err, false)
	e.msg = fn + ": " + e.msg
	return e.set()
}

func putBytes(fn string, b []byte, buf *C.uint8_t, bufSize C.size_t, outSize *C.size_t) C.int32_t {
	*outSize = C.size_t(len(b))
	if buf == nil {
		return stOK
	}
	if uint64(bufSize) < uint64(len(b)) {
		return fail(stTooSmall, "%s: %d bytes do not fit in buf_size %d", fn, len(b), uint64(bufSize))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(b)), b)
	return stOK
}

func saveState(h *engineHandle, ids []int, buf *C.uint8_t, bufSize C.size_t, outSize *C.size_t, fn string) C.int32_t {
	if outSize == nil {
		return fail(stInvalid, "%s: out_size is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	if len(ids) > 0 && len(ids) <= engine.MaxStateTokens {
		if need := engine.StateSize(len(ids)); buf == nil || uint64(bufSize) < uint64(need) {
			// Size query, or too small: say the size without sealing.
			*outSize = C.size_t(need)
			if buf == nil {
				return stOK
			}
			return fail(stTooSmall, "%s: %d bytes do not fit in buf_size %d", fn, need, uint64(bufSize))
		}
	}
	b, err := h.eng.SaveState(ids)
	if err != nil {
		return stateError(err, fn)
	}
	return putBytes(fn, b, buf, bufSize, outSize)
}

//export kvwgo_state_save
func kvwgo_state_save(hv C.uintptr_t, tokens *C.int32_t, n C.size_t, buf *C.uint8_t, bufSize C.size_t, outSize *C.size_t) (st C.int32_t) {
	const fn = "kvw_state_save"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	ids32, st := cTokens(tokens, n, fn)
	if st != stOK {
		return st
	}
	ids := make([]int, len(ids32))
	for i, id := range ids32 {
		ids[i] = int(id)
	}
	return saveState(h, ids, buf, bufSize, outSize, fn)
}

//export kvwgo_request_state_save
func kvwgo_request_state_save(hv C.uintptr_t, id C.uint64_t, buf *C.uint8_t, bufSize C.size_t, outSize *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_state_save"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	res, st := h.ended(id, fn)
	if st != stOK {
		return st
	}
	ids := append(append([]int(nil), res.PromptTokens...), res.Tokens...)
	return saveState(h, ids, buf, bufSize, outSize, fn)
}

//export kvwgo_state_load
func kvwgo_state_load(hv C.uintptr_t, state *C.uint8_t, size C.size_t, tokens *C.int32_t, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_state_load"
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
	if state == nil {
		return fail(stInvalid, "%s: state is NULL", fn)
	}
	if uint64(size) > uint64(engine.StateSize(engine.MaxStateTokens)) {
		return fail(stInvalid, "%s: size %d is larger than any saved state", fn, uint64(size))
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(state)), int(size))
	ids, err := h.eng.LoadState(b)
	if err != nil {
		return stateError(err, fn)
	}
	return putTokens(fn, ids, tokens, capacity, outN)
}

// ---- model -------------------------------------------------------------

//export kvwgo_model_info
func kvwgo_model_info(hv C.uintptr_t, out *C.kvw_model_info) (st C.int32_t) {
	const fn = "kvw_model_info_get"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	c := h.eng.ModelConfig()
	out.n_embd = C.int32_t(c.Dim)
	out.n_layer = C.int32_t(c.Layers)
	out.n_head = C.int32_t(c.Heads)
	out.n_head_kv = C.int32_t(c.KVHeads)
	out.n_ctx_train = C.int32_t(c.MaxContext)
	out.n_vocab = C.int32_t(c.Vocab)
	out.n_ff = C.int32_t(c.Hidden)
	return stOK
}

//export kvwgo_model_meta_count
func kvwgo_model_meta_count(hv C.uintptr_t, out *C.int32_t) (st C.int32_t) {
	const fn = "kvw_model_meta_count"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if out == nil {
		return fail(stInvalid, "%s: out is NULL", fn)
	}
	*out = C.int32_t(len(h.eng.Metadata()))
	return stOK
}

//export kvwgo_model_meta_by_index
func kvwgo_model_meta_by_index(hv C.uintptr_t, i C.int32_t, val C.int32_t, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	fn := "kvw_model_meta_key_by_index"
	if val != 0 {
		fn = "kvw_model_meta_val_by_index"
	}
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outLen == nil {
		return fail(stInvalid, "%s: out_len is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	meta := h.eng.Metadata()
	if i < 0 || int(i) >= len(meta) {
		return fail(stInvalid, "%s: index %d is outside [0, %d)", fn, int32(i), len(meta))
	}
	s := meta[i].Key
	if val != 0 {
		s = meta[i].Value
	}
	return putText(fn, []byte(s), buf, bufSize, outLen)
}

//export kvwgo_model_meta_val_str
func kvwgo_model_meta_val_str(hv C.uintptr_t, key *C.char, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_model_meta_val_str"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outLen == nil {
		return fail(stInvalid, "%s: out_len is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: buf is NULL but buf_size is %d", fn, uint64(bufSize))
	}
	k, st := goText(key, fn, "key")
	if st != stOK {
		return st
	}
	v, ok := h.eng.MetadataValue(k)
	if !ok {
		return fail(stInvalid, "%s: the model has no metadata key %q", fn, k)
	}
	return putText(fn, []byte(v), buf, bufSize, outLen)
}
