package main

/*
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
)

// maxEmbedInputs bounds n_inputs / n_documents before the arrays are read
// (the server's MaxEmbeddingInputs, OpenAI's limit).
const maxEmbedInputs = 2048

// cStrings reads n NUL-terminated UTF-8 strings from C.
func cStrings(arr **C.char, n C.size_t, fn, what string) ([]string, C.int32_t) {
	if n == 0 {
		return nil, fail(stInvalid, "%s: no %s (n is 0)", fn, what)
	}
	if arr == nil {
		return nil, fail(stInvalid, "%s: %s is NULL", fn, what)
	}
	if uint64(n) > maxEmbedInputs {
		return nil, fail(stInvalid, "%s: %d %s, at most %d", fn, uint64(n), what, maxEmbedInputs)
	}
	ptrs := unsafe.Slice(arr, int(n))
	out := make([]string, len(ptrs))
	for i, p := range ptrs {
		s, st := goText(p, fn, fmt.Sprintf("%s[%d]", what, i))
		if st != stOK {
			return nil, st
		}
		out[i] = s
	}
	return out, stOK
}

// embedStatus reports an Embed/Rerank error as the C status.
func embedStatus(err error, fn string) C.int32_t {
	e := classify(err, false)
	e.msg = fn + ": " + e.msg
	return e.set()
}

// embedArgs checks what kvw_embed and kvw_embed_tokens share: the
// engine handle, the size-query buffer pair and the input strings.
func embedArgs(hv C.uintptr_t, inputs **C.char, n C.size_t, out *C.float, capacity C.size_t, outN *C.size_t, fn string) (*engineHandle, []string, C.int32_t) {
	h, st := lookup(hv, fn)
	if st != stOK {
		return nil, nil, st
	}
	if outN == nil {
		return nil, nil, fail(stInvalid, "%s: out_n is NULL", fn)
	}
	if out == nil && capacity != 0 {
		return nil, nil, fail(stInvalid, "%s: out is NULL but capacity is %d", fn, uint64(capacity))
	}
	texts, st := cStrings(inputs, n, fn, "inputs")
	if st != stOK {
		return nil, nil, st
	}
	return h, texts, stOK
}

//export kvwgo_embed
func kvwgo_embed(hv C.uintptr_t, inputs **C.char, n C.size_t, p *C.kvw_embed_params, out *C.float, capacity C.size_t,
	outN *C.size_t, outDim *C.int32_t) (st C.int32_t) {
	const fn = "kvw_embed"
	defer guard(&st, fn)
	h, texts, st := embedArgs(hv, inputs, n, out, capacity, outN, fn)
	if st != stOK {
		return st
	}
	req := engine.EmbedRequest{Inputs: texts, NoNormalize: p.normalize == 0, Dimensions: int(p.dimensions), Truncate: p.truncate != 0}
	switch pool := int(p.pooling); pool {
	case C.KVW_POOLING_MODEL:
	case C.KVW_POOLING_MEAN, C.KVW_POOLING_CLS, C.KVW_POOLING_LAST:
		req.Pooling = model.PoolingNone + model.Pooling(pool)
	case C.KVW_POOLING_NONE, C.KVW_POOLING_RANK:
		return fail(stInvalid, "%s: pooling %d is not for kvw_embed (per-token vectors are kvw_embed_tokens; rank is kvw_rerank)", fn, pool)
	default:
		return fail(stInvalid, "%s: unknown pooling %d", fn, pool)
	}
	if req.Tenant, st = optText(p.tenant, fn, "tenant"); st != stOK {
		return st
	}
	dim := h.eng.ModelConfig().Dim
	if req.Dimensions > 0 && req.Dimensions <= dim {
		dim = req.Dimensions
	}
	need := uint64(len(texts)) * uint64(dim)
	*outN = C.size_t(need)
	if outDim != nil {
		*outDim = C.int32_t(dim)
	}
	if out == nil {
		return stOK
	}
	if uint64(capacity) < need {
		return fail(stTooSmall, "%s: %d floats do not fit in capacity %d", fn, need, uint64(capacity))
	}
	res, err := h.eng.Embed(context.Background(), req)
	if err != nil {
		return embedStatus(err, fn)
	}
	dst := unsafe.Slice((*float32)(unsafe.Pointer(out)), int(need))
	for i, d := range res.Data {
		copy(dst[i*dim:(i+1)*dim], d.Vector)
	}
	return stOK
}

//export kvwgo_embed_tokens
func kvwgo_embed_tokens(hv C.uintptr_t, inputs **C.char, n C.size_t, p *C.kvw_embed_params, out *C.float, capacity C.size_t,
	outN *C.size_t, outDim *C.int32_t, counts *C.size_t) (st C.int32_t) {
	const fn = "kvw_embed_tokens"
	defer guard(&st, fn)
	h, texts, st := embedArgs(hv, inputs, n, out, capacity, outN, fn)
	if st != stOK {
		return st
	}
	if pool := int(p.pooling); pool != C.KVW_POOLING_MODEL && pool != C.KVW_POOLING_NONE {
		return fail(stInvalid, "%s: pooling %d: per-token vectors are pooling none (KVW_POOLING_NONE or KVW_POOLING_MODEL)", fn, pool)
	}
	req := engine.EmbedRequest{Inputs: texts, Pooling: model.PoolingNone, NoNormalize: p.normalize == 0,
		Dimensions: int(p.dimensions), Truncate: p.truncate != 0}
	if req.Tenant, st = optText(p.tenant, fn, "tenant"); st != stOK {
		return st
	}
	dim := h.eng.ModelConfig().Dim
	if req.Dimensions > 0 && req.Dimensions <= dim {
		dim = req.Dimensions
	}
	ctx := context.Background()
	toks, err := h.eng.EmbedTokenCounts(ctx, req)
	if err != nil {
		return embedStatus(err, fn)
	}
	total := 0
	for _, t := range toks {
		total += t
	}
	need := uint64(total) * uint64(dim)
	*outN = C.size_t(need)
	if outDim != nil {
		*outDim = C.int32_t(dim)
	}
	if counts != nil {
		cs := unsafe.Slice(counts, len(toks))
		for i, t := range toks {
			cs[i] = C.size_t(t)
		}
	}
	if out == nil {
		return stOK
	}
	if uint64(capacity) < need {
		return fail(stTooSmall, "%s: %d floats do not fit in capacity %d", fn, need, uint64(capacity))
	}
	res, err := h.eng.Embed(ctx, req)
	if err != nil {
		return embedStatus(err, fn)
	}
	dst := unsafe.Slice((*float32)(unsafe.Pointer(out)), int(need))
	at := 0
	for i, d := range res.Data {
		if len(d.PerToken) != toks[i] {
			// The counts were the engine's own tokenization; a mismatch is a bug.
			return fail(stInternal, "%s: input %d ran as %d tokens, the size query said %d", fn, i, len(d.PerToken), toks[i])
		}
		for _, v := range d.PerToken {
			at += copy(dst[at:at+dim], v)
		}
	}
	return stOK
}

//export kvwgo_rerank
func kvwgo_rerank(hv C.uintptr_t, query *C.char, docs **C.char, n C.size_t, tenant *C.char, scores *C.float, capacity C.size_t,
	outN *C.size_t) (st C.int32_t) {
	const fn = "kvw_rerank"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	if outN == nil {
		return fail(stInvalid, "%s: out_n is NULL", fn)
	}
	if scores == nil && capacity != 0 {
		return fail(stInvalid, "%s: scores is NULL but capacity is %d", fn, uint64(capacity))
	}
	q, st := goText(query, fn, "query")
	if st != stOK {
		return st
	}
	documents, st := cStrings(docs, n, fn, "documents")
	if st != stOK {
		return st
	}
	t, st := optText(tenant, fn, "tenant")
	if st != stOK {
		return st
	}
	*outN = C.size_t(len(documents))
	if scores == nil {
		return stOK
	}
	if uint64(capacity) < uint64(len(documents)) {
		return fail(stTooSmall, "%s: %d scores do not fit in capacity %d", fn, len(documents), uint64(capacity))
	}
	res, err := h.eng.Rerank(context.Background(), engine.RerankRequest{Query: q, Documents: documents, Tenant: t})
	if err != nil {
		return embedStatus(err, fn)
	}
	dst := unsafe.Slice((*float32)(unsafe.Pointer(scores)), len(documents))
	for _, r := range res.Results {
		dst[r.Index] = r.Score
	}
	return stOK
}
