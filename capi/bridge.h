// Internal declarations shared by capi.go (cgo preamble) and kvwarden.c.
// Not installed; not part of the public ABI.
#ifndef KVWARDEN_BRIDGE_H
#define KVWARDEN_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "include/kvwarden.h"

// Records the calling thread's last error (kvw_last_error/_info).
void kvw_i_set_error(int32_t status, const char* msg, size_t len, int32_t reason,
                     int64_t limit, int64_t requested, int64_t prompt_tokens);

// Go cannot call C function pointers; these do.
// user_data travels through Go as uintptr_t: an arbitrary void* value must
// never sit in a Go pointer variable (the runtime checks those).
void kvw_i_call_log(kvw_log_callback cb, int32_t level, const char* msg, uintptr_t user_data);
int32_t kvw_i_call_piece(kvw_piece_callback cb, const char* piece, size_t len, uintptr_t user_data);
int32_t kvw_i_call_progress(kvw_progress_callback cb, int64_t done, int64_t total, uintptr_t user_data);

#endif
