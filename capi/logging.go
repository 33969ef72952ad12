package main

/*
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"unsafe"
)

// cLog delivers one engine's log records to its C callback. It is
// per-engine (never process-global), and after off() returns the callback
// is never called again: every call holds mu for reading, off takes it for
// writing.
type cLog struct {
	mu       sync.RWMutex
	disabled bool
	cb       C.kvw_log_callback
	ud       C.uintptr_t // the caller's user_data, opaque (never a Go pointer variable)
	min      slog.Level
}

func newCLog(cb C.kvw_log_callback, ud C.uintptr_t, level C.int32_t) *cLog {
	if cb == nil {
		return nil
	}
	return &cLog{cb: cb, ud: ud, min: slogLevel(level)}
}

func slogLevel(l C.int32_t) slog.Level {
	switch {
	case l <= C.KVW_LOG_DEBUG:
		return slog.LevelDebug
	case l == C.KVW_LOG_INFO:
		return slog.LevelInfo
	case l == C.KVW_LOG_WARN:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func kvwLevel(l slog.Level) C.int32_t {
	switch {
	case l < slog.LevelInfo:
		return C.KVW_LOG_DEBUG
	case l < slog.LevelWarn:
		return C.KVW_LOG_INFO
	case l < slog.LevelError:
		return C.KVW_LOG_WARN
	}
	return C.KVW_LOG_ERROR
}

func (l *cLog) off() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.disabled = true
	l.mu.Unlock()
}

func (l *cLog) emit(level slog.Level, msg string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.disabled {
		return
	}
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.kvw_i_call_log(l.cb, kvwLevel(level), cs, l.ud)
}

// logger returns a slog.Logger for the engine, or nil when no callback is set.
func (l *cLog) logger() *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(&cHandler{log: l})
}

// cHandler formats records as logfmt text ("msg key=value ...") with
// slog's TextHandler, replaying WithAttrs/WithGroup, and hands each record
// to the C callback with its level.
type cHandler struct {
	log *cLog
	ops []func(slog.Handler) slog.Handler
}

func (h *cHandler) Enabled(_ context.Context, level slog.Level) bool { return level >= h.log.min }

func (h *cHandler) Handle(ctx context.Context, r slog.Record) error {
	var buf bytes.Buffer
	var th slog.Handler = slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		},
	})
	for _, op := range h.ops {
		th = op(th)
	}
	if err := th.Handle(ctx, r); err != nil {
		return err
	}
	h.log.emit(r.Level, strings.TrimSuffix(buf.String(), "\n"))
	return nil
}

func (h *cHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &cHandler{log: h.log, ops: append(h.ops[:len(h.ops):len(h.ops)], func(x slog.Handler) slog.Handler { return x.WithAttrs(attrs) })}
}

func (h *cHandler) WithGroup(name string) slog.Handler {
	return &cHandler{log: h.log, ops: append(h.ops[:len(h.ops):len(h.ops)], func(x slog.Handler) slog.Handler { return x.WithGroup(name) })}
}
