package main

/*
#include "bridge.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine"
)

// Statuses, mirrored from kvw_status in include/kvwarden.h.
const (
	stOK          C.int32_t = C.KVW_OK
	stInvalid     C.int32_t = C.KVW_ERR_INVALID_ARGUMENT
	stRejected    C.int32_t = C.KVW_ERR_REJECTED
	stAborted     C.int32_t = C.KVW_ERR_ABORTED
	stIsolation   C.int32_t = C.KVW_ERR_ISOLATION
	stNotFound    C.int32_t = C.KVW_ERR_NOT_FOUND
	stClosed      C.int32_t = C.KVW_ERR_CLOSED
	stInternal    C.int32_t = C.KVW_ERR_INTERNAL
	stTimeout     C.int32_t = C.KVW_ERR_TIMEOUT
	stTooSmall    C.int32_t = C.KVW_ERR_BUFFER_TOO_SMALL
	stIO          C.int32_t = C.KVW_ERR_IO
	stUnsupported C.int32_t = C.KVW_ERR_UNSUPPORTED
	reasonNone    C.int32_t = C.KVW_REJECT_NONE
	reasonEmpty   C.int32_t = C.KVW_REJECT_EMPTY_PROMPT
	reasonTooLong C.int32_t = C.KVW_REJECT_TOO_LONG
	reasonParams  C.int32_t = C.KVW_REJECT_INVALID_PARAMS
	reasonQuota   C.int32_t = C.KVW_REJECT_QUOTA
	reasonOverld  C.int32_t = C.KVW_REJECT_OVERLOADED
)

// errInfo is what a failure tells C: status, message and rejection details.
type errInfo struct {
	status                   C.int32_t
	reason                   C.int32_t
	limit, requested, prompt int64
	msg                      string
}

// set records e as the calling thread's last error and returns its status.
// cgo runs an export on the C caller's thread, and the C call below runs
// on that same thread, so the C thread-local is the caller's.
func (e errInfo) set() C.int32_t {
	var p *C.char
	if len(e.msg) > 0 {
		p = (*C.char)(unsafe.Pointer(unsafe.StringData(e.msg)))
	}
	C.kvw_i_set_error(e.status, p, C.size_t(len(e.msg)), e.reason,
		C.int64_t(e.limit), C.int64_t(e.requested), C.int64_t(e.prompt))
	return e.status
}

// fail records a formatted message with status st.
func fail(st C.int32_t, format string, args ...any) C.int32_t {
	return errInfo{status: st, msg: fmt.Sprintf(format, args...)}.set()
}

// classify maps an engine error to a status and details. open is true for
// errors of engine.New, where anything not a parameter error is I/O.
func classify(err error, open bool) errInfo {
	e := errInfo{msg: err.Error()}
	var tooLong *engine.PromptTooLongError
	switch {
	case errors.Is(err, engine.ErrIsolation):
		e.status = stIsolation
	case errors.As(err, &tooLong):
		e.status, e.reason = stRejected, reasonTooLong
		e.limit, e.requested, e.prompt = int64(tooLong.Limit), int64(tooLong.Requested), int64(tooLong.Prompt)
	case errors.Is(err, engine.ErrPromptTooLong):
		e.status, e.reason = stRejected, reasonTooLong
	case errors.Is(err, engine.ErrQuotaExceeded):
		e.status, e.reason = stRejected, reasonQuota
	case errors.Is(err, engine.ErrOverloaded):
		e.status, e.reason = stRejected, reasonOverld
	case errors.Is(err, engine.ErrEmptyPrompt):
		e.status, e.reason = stInvalid, reasonEmpty
	case errors.Is(err, engine.ErrAborted):
		// before ErrClosed: a request aborted by Close wraps both
		e.status = stAborted
	case errors.Is(err, engine.ErrClosed):
		e.status = stClosed
	case errors.Is(err, engine.ErrNotFound):
		e.status = stNotFound
	case errors.Is(err, engine.ErrInvalidParams):
		e.status = stInvalid
		if !open {
			e.reason = reasonParams
		}
	case errors.Is(err, engine.ErrUnsupported):
		e.status = stUnsupported
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), open:
		e.status = stIO
	default:
		e.status = stInternal
	}
	return e
}

// guard turns a panic in an export into KVW_ERR_INTERNAL with a message,
// so that no Go panic ever unwinds into (and kills) the host process.
func guard(st *C.int32_t, fn string) {
	if r := recover(); r != nil {
		buf := make([]byte, 2048)
		buf = buf[:runtime.Stack(buf, false)]
		where := ""
		// the first frames after the panic machinery locate the bug
		if lines := strings.Split(string(buf), "\n"); len(lines) > 8 {
			where = strings.TrimSpace(lines[7]) + " " + strings.TrimSpace(lines[8])
		}
		*st = fail(stInternal, "%s: internal error (please report): %v [%s]", fn, r, where)
	}
}
