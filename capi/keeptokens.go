package main

/*
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
)

// maxKeepTokenBytes bounds each kvw_request_params.keep_tokens text: a
// vocabulary entry, never long; a longer one is a caller's mistake.
const maxKeepTokenBytes = 256

// requestKeepTokens reads kvw_request_params v6: the control tokens a
// tool-call parser needs to see (engine.Request.KeepTokens). The engine
// ignores texts beyond its bound, so the bound is checked here, where the
// caller learns of it, rather than dropping markup silently.
func requestKeepTokens(p *C.kvw_request_params, fn string, req *engine.Request) C.int32_t {
	n := uint32(p.n_keep_tokens)
	if n == 0 {
		return stOK
	}
	if n > engine.MaxKeepTokens {
		return errInfo{status: stInvalid, reason: reasonParams,
			msg: fmt.Sprintf("%s: params.n_keep_tokens %d exceeds %d (KVW_MAX_KEEP_TOKENS)", fn, n, engine.MaxKeepTokens)}.set()
	}
	if p.keep_tokens == nil {
		return fail(stInvalid, "%s: params.keep_tokens is NULL but n_keep_tokens is %d", fn, n)
	}
	for i, s := range unsafe.Slice(p.keep_tokens, int(n)) {
		what := fmt.Sprintf("params.keep_tokens[%d]", i)
		t, st := goText(s, fn, what)
		if st != stOK {
			return st
		}
		if t == "" || len(t) > maxKeepTokenBytes {
			return errInfo{status: stInvalid, reason: reasonParams,
				msg: fmt.Sprintf("%s: %s is %d bytes; a token text is 1 to %d bytes", fn, what, len(t), maxKeepTokenBytes)}.set()
		}
		req.KeepTokens = append(req.KeepTokens, t)
	}
	return stOK
}
