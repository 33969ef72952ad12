package main

/*
#include "bridge.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"

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
	c, err := hub.New(cacheDir)
	if err != nil {
		return fail(stIO, "%s: %v", fn, err)
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
