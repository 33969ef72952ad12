package main

/*
#include "bridge.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"github.com/kvwarden/kvwarden/engine"
)

// specOf converts the speculative decoding fields of kvw_engine_params v6
// or kvw_request_params v7 (prefix "params.spec_") to an engine setting,
// checked by the engine's own rules so that a bad value is reported here
// against its C field rather than later against a Go one.
func specOf(typ, draftModel *C.char, draftMax, ngramMin, ngramMax C.int32_t, fn string) (engine.Speculative, C.int32_t) {
	var sp engine.Speculative
	var st C.int32_t
	if sp.Type, st = optText(typ, fn, "params.spec_type"); st != stOK {
		return sp, st
	}
	if sp.DraftModel, st = optText(draftModel, fn, "params.spec_draft_model"); st != stOK {
		return sp, st
	}
	sp.DraftMax, sp.NgramMin, sp.NgramMax = int(draftMax), int(ngramMin), int(ngramMax)
	if err := (engine.Config{Speculative: sp}).Validate(); err != nil {
		msg := err.Error()
		var ce *engine.ConfigError
		if errors.As(err, &ce) {
			msg = ce.Msg
		}
		return sp, errInfo{status: stInvalid, reason: reasonParams,
			msg: fmt.Sprintf("%s: params.spec_type/spec_draft_max/spec_ngram_min/spec_ngram_max: %s", fn, msg)}.set()
	}
	return sp, stOK
}

// engineSpec reads kvw_engine_params v6.
func engineSpec(p *C.kvw_engine_params, fn string, cfg *engine.Config) C.int32_t {
	sp, st := specOf(p.spec_type, p.spec_draft_model, p.spec_draft_max, p.spec_ngram_min, p.spec_ngram_max, fn)
	cfg.Speculative = sp
	return st
}

// requestSpec reads kvw_request_params v7: a NULL spec_type leaves the
// engine's setting.
func requestSpec(p *C.kvw_request_params, fn string, req *engine.Request) C.int32_t {
	if p.spec_type == nil {
		return stOK
	}
	sp, st := specOf(p.spec_type, nil, p.spec_draft_max, p.spec_ngram_min, p.spec_ngram_max, fn)
	if st == stOK {
		req.Speculative = &sp
	}
	return st
}
