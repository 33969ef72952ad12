package main

/*
#include "bridge.h"
*/
import "C"

import (
	"context"
	"errors"

	"github.com/kvwarden/kvwarden/engine"
)

// ---- KV erasure --------------------------------------------------------

//export kvwgo_tenant_erase_kv
func kvwgo_tenant_erase_kv(hv C.uintptr_t, tenant *C.char, out *C.kvw_erase_result) (st C.int32_t) {
	const fn = "kvw_tenant_erase_kv"
	defer guard(&st, fn)
	h, st := lookup(hv, fn)
	if st != stOK {
		return st
	}
	t, st := goText(tenant, fn, "tenant")
	if st != stOK {
		return st
	}
	res, err := h.eng.EraseTenantKV(context.Background(), t)
	if errors.Is(err, engine.ErrBadTenant) {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	if err != nil {
		e := classify(err, false)
		e.msg = fn + ": " + e.msg
		return e.set()
	}
	if out != nil {
		out.key_epoch = C.uint64_t(res.Epoch)
		out.prefix_device_pages = C.int64_t(res.PrefixDevicePages)
		out.prefix_host_pages = C.int64_t(res.PrefixHostPages)
		out.host_pages = C.int64_t(res.HostPages)
		out.host_bytes = C.int64_t(res.HostBytes)
	}
	return stOK
}
