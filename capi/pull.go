package main

/*
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/kvwarden/kvwarden/internal/hub"
)

//export kvwgo_pull
func kvwgo_pull(refC, fileC, cacheC *C.char, cb C.kvw_progress_callback, ud C.uintptr_t, buf *C.char, bufSize C.size_t, outLen *C.size_t) (st C.int32_t) {
	const fn = "kvw_pull"
	defer guard(&st, fn)
	if outLen == nil {
		return fail(stInvalid, "%s: out_len is NULL", fn)
	}
	if buf == nil && bufSize != 0 {
		return fail(stInvalid, "%s: path_buf is NULL but path_size is %d", fn, uint64(bufSize))
	}
	refS, st := goText(refC, fn, "ref")
	if st != stOK {
		return st
	}
	file, st := optText(fileC, fn, "filename")
	if st != stOK {
		return st
	}
	cacheDir, st := optText(cacheC, fn, "cache_dir")
	if st != stOK {
		return st
	}
	ref, err := hub.ParseRef(refS)
	if err != nil {
		return fail(stInvalid, "%s: %v", fn, err)
	}
	if file != "" {
		if ref.File != "" || ref.Tag != "" {
			return fail(stInvalid, "%s: ref %q names a file or tag already; with filename give just the repository", fn, refS)
		}
		ref.File = file
	}
	// The environment as the process has it now: Go's os.Getenv sees only
	// the copy taken when the library was loaded, not a later setenv (or
	// Python's os.environ) of the host.
	if cacheDir == "" {
		cacheDir = cEnv("KVWARDEN_CACHE_DIR")
	}
	c, err := hub.New(cacheDir)
	if err != nil {
		return fail(stIO, "%s: %v", fn, err)
	}
	if ep := strings.TrimRight(cEnv("HF_ENDPOINT"), "/"); ep != "" {
		c.Endpoint = ep
	}
	if tok := cEnv("HF_TOKEN"); tok != "" {
		c.Token = tok
	} else if tok := cEnv("HUGGING_FACE_HUB_TOKEN"); tok != "" {
		c.Token = tok
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := false
	if cb != nil {
		// Progress runs on this goroutine (inside Pull), on the caller's thread.
		c.Progress = func(p hub.Progress) {
			if !stopped && C.kvw_i_call_progress(cb, C.int64_t(p.Done), C.int64_t(p.Total), ud) != 0 {
				stopped = true
				cancel()
			}
		}
	}
	if ref, err = c.ResolvePattern(ctx, ref); err == nil {
		var m hub.Model
		if m, err = c.Pull(ctx, ref); err == nil {
			return putText(fn, []byte(m.Path), buf, bufSize, outLen)
		}
	}
	switch {
	case stopped:
		return fail(stAborted, "%s: the progress callback asked to stop (the download is kept for resuming)", fn)
	case errors.Is(err, hub.ErrBadRef), errors.Is(err, hub.ErrNoMatch):
		return fail(stInvalid, "%s: %v", fn, err)
	}
	return fail(stIO, "%s: %v", fn, fmt.Errorf("pulling %s: %w", ref, err))
}

// cEnv reads the process environment through libc.
func cEnv(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	if v := C.getenv(cs); v != nil {
		return C.GoString(v)
	}
	return ""
}
