package main

/*
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// requestPenalties reads kvw_request_params v5: presence and frequency
// penalties, logit bias and prompt_logprobs. Ranges are checked by the
// engine at admission (a rejection naming the parameter); the arrays are
// checked here, where a bad pointer would otherwise be read.
func requestPenalties(p *C.kvw_request_params, fn string, req *engine.Request) C.int32_t {
	req.Sampling.PresencePenalty = float32(p.presence_penalty)
	req.Sampling.FrequencyPenalty = float32(p.frequency_penalty)
	req.PromptLogprobs = p.prompt_logprobs != 0
	n := uint32(p.n_logit_bias)
	if n == 0 {
		return stOK
	}
	if n > sample.MaxLogitBiasEntries {
		return errInfo{status: stInvalid, reason: reasonParams,
			msg: fmt.Sprintf("%s: params.n_logit_bias %d exceeds %d (KVW_MAX_LOGIT_BIAS)", fn, n, sample.MaxLogitBiasEntries)}.set()
	}
	if p.logit_bias_tokens == nil || p.logit_bias == nil {
		return fail(stInvalid, "%s: params.n_logit_bias is %d but logit_bias_tokens or logit_bias is NULL", fn, n)
	}
	toks := unsafe.Slice(p.logit_bias_tokens, int(n))
	biases := unsafe.Slice(p.logit_bias, int(n))
	req.Sampling.LogitBias = make(map[int]float32, n)
	for i := range toks {
		id := int(toks[i])
		if _, dup := req.Sampling.LogitBias[id]; dup {
			return errInfo{status: stInvalid, reason: reasonParams,
				msg: fmt.Sprintf("%s: params.logit_bias_tokens[%d]: token %d appears twice", fn, i, id)}.set()
		}
		req.Sampling.LogitBias[id] = float32(biases[i])
	}
	return stOK
}

// promptLogprobsOf returns the prompt log-probabilities of an ended request.
func promptLogprobsOf(hv C.uintptr_t, id C.uint64_t, outN *C.size_t, fn string) ([]engine.TokenLogprobs, C.int32_t) {
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
	if !r.promptLogprobs {
		return nil, fail(stInvalid, "%s: request %d did not ask for prompt logprobs (set kvw_request_params.prompt_logprobs)", fn, uint64(id))
	}
	return res.PromptLogprobs, stOK
}

//export kvwgo_request_prompt_logprobs
func kvwgo_request_prompt_logprobs(hv C.uintptr_t, id C.uint64_t, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_prompt_logprobs"
	defer guard(&st, fn)
	all, st := promptLogprobsOf(hv, id, outN, fn)
	if st != stOK {
		return st
	}
	return putChosen(fn, all, out, capacity, outN)
}

//export kvwgo_request_prompt_top_logprobs
func kvwgo_request_prompt_top_logprobs(hv C.uintptr_t, id C.uint64_t, index C.size_t, out *C.kvw_token_logprob, capacity C.size_t, outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_request_prompt_top_logprobs"
	defer guard(&st, fn)
	all, st := promptLogprobsOf(hv, id, outN, fn)
	if st != stOK {
		return st
	}
	return putTop(fn, all, index, "prompt positions with log-probabilities", out, capacity, outN)
}
