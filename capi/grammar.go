package main

/*
#include "bridge.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/grammar"
)

// requestGrammar compiles kvw_request_params.grammar or json_schema (v4)
// into req.Grammar. A compile error is a rejection for invalid params
// whose message names the place (line and column, or schema path and
// keyword).
func requestGrammar(h *engineHandle, p *C.kvw_request_params, fn string, req *engine.Request) C.int32_t {
	if p.grammar == nil && p.json_schema == nil {
		return stOK
	}
	if p.grammar != nil && p.json_schema != nil {
		return errInfo{status: stInvalid, reason: reasonParams, msg: fn + ": params.grammar and params.json_schema are both set: give one"}.set()
	}
	var (
		g    *engine.Grammar
		err  error
		what string
	)
	if p.grammar != nil {
		what = "params.grammar"
		text, st := goText(p.grammar, fn, what)
		if st != stOK {
			return st
		}
		g, err = h.eng.CompileGrammar(text)
	} else {
		what = "params.json_schema"
		text, st := goText(p.json_schema, fn, what)
		if st != stOK {
			return st
		}
		g, err = h.eng.CompileJSONSchema([]byte(text))
	}
	if err != nil {
		return errInfo{status: stInvalid, reason: reasonParams, msg: fmt.Sprintf("%s: %s: %s", fn, what, grammarMessage(err))}.set()
	}
	req.Grammar = g
	return stOK
}

// grammarMessage is the grammar package's own error (place, keyword),
// without the wrapping.
func grammarMessage(err error) string {
	var se *grammar.SyntaxError
	var sce *grammar.SchemaError
	switch {
	case errors.As(err, &se):
		err = se
	case errors.As(err, &sce):
		err = sce
	}
	return strings.TrimPrefix(err.Error(), "grammar: ")
}
