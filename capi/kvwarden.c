// The C half of libkvwarden: the public entry points declared in
// include/kvwarden.h. Compiling this file against the header is what keeps
// the exported ABI equal to the header: every public function is defined
// here, with the header's exact prototype, and forwards to a Go export
// (kvwgo_*, see capi.go) after validating versioned structs. Thread-local
// error state lives here too, because a cgo call runs on the calling C
// thread, so a C thread-local is exactly "the caller's last error".

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The header's *_default_params / *_init are static inline wrappers over the
// sized fillers; the library defines the same names as the exported symbols
// binaries built against earlier headers link to, so it skips the wrappers.
#define KVW_BUILDING_LIBRARY
#include "include/kvwarden.h"
#include "bridge.h"
#include "_cgo_export.h"

_Static_assert(sizeof(void*) == 8, "kvwarden requires a 64-bit platform");
_Static_assert(sizeof(kvw_error_info) % 8 == 0, "explicit padding");
_Static_assert(sizeof(kvw_engine_params) % 8 == 0, "explicit padding");
_Static_assert(sizeof(kvw_request_params) % 8 == 0, "explicit padding");
_Static_assert(sizeof(kvw_result) % 8 == 0, "explicit padding");
_Static_assert(sizeof(kvw_stats) % 8 == 0, "explicit padding");
_Static_assert(sizeof(kvw_embed_params) == 32, "kvw_embed_params v1");
_Static_assert(offsetof(kvw_erase_result, host_bytes) + sizeof(int64_t) == 48, "kvw_erase_result v1 was 48 bytes");
_Static_assert(sizeof(kvw_erase_result) == 64, "kvw_erase_result v2 (v1: 48)");
_Static_assert(offsetof(kvw_stats, step_mean_ms) + sizeof(double) == 312, "kvw_stats v1 was 312 bytes");
_Static_assert(offsetof(kvw_stats, disk_write_errors) + sizeof(uint64_t) == 400, "kvw_stats v2 was 400 bytes");
_Static_assert(sizeof(kvw_stats) == 424, "kvw_stats v3 (v1: 312, v2: 400)");
// Version 1 sizes. A change here is an ABI change: append fields instead.
_Static_assert(sizeof(kvw_error_info) == 40, "kvw_error_info v1");
// Version 1 of kvw_engine_params ended after log_user_data (112 bytes);
// every field after it was appended later.
#define KVW_ENGINE_PARAMS_V1_SIZE 112
_Static_assert(offsetof(kvw_engine_params, log_user_data) + sizeof(void*) == KVW_ENGINE_PARAMS_V1_SIZE,
               "kvw_engine_params v1 was 112 bytes");
_Static_assert(offsetof(kvw_engine_params, spec_type) == 160, "kvw_engine_params v6 starts after v5");
_Static_assert(sizeof(kvw_engine_params) == 192, "kvw_engine_params v6 (v1: 112, v2: 120, v3: 128, v4: 136, v5: 160)");
_Static_assert(sizeof(kvw_request_params) == 176, "kvw_request_params v7 (v1: 64, v2: 72, v3: 88, v4: 104, v5: 136, v6: 152)");
_Static_assert(offsetof(kvw_request_params, spec_type) == 152, "kvw_request_params v7 starts after v6");
_Static_assert(offsetof(kvw_request_params, presence_penalty) == 104, "kvw_request_params v5 starts after v4");
_Static_assert(offsetof(kvw_request_params, keep_tokens) == 136, "kvw_request_params v6 starts after v5");
_Static_assert(KVW_MAX_KEEP_TOKENS == 64, "engine.MaxKeepTokens");
_Static_assert(sizeof(kvw_token_logprob) == 8, "kvw_token_logprob is fixed");
_Static_assert(sizeof(kvw_model_info) % 8 == 0, "explicit padding");
_Static_assert(sizeof(kvw_model_info) == 32, "kvw_model_info v1");
_Static_assert(sizeof(kvw_chat_message) == 16, "kvw_chat_message is fixed");
_Static_assert(sizeof(kvw_result) == 104, "kvw_result v1");

// ---- thread-local last error ----------------------------------------------

#define KVW_ERRMSG_MAX 1024

static __thread char tl_msg[KVW_ERRMSG_MAX];
static __thread kvw_error_info tl_info;

void kvw_i_set_error(int32_t status, const char* msg, size_t len, int32_t reason,
                     int64_t limit, int64_t requested, int64_t prompt_tokens) {
    if (len >= KVW_ERRMSG_MAX) {
        len = KVW_ERRMSG_MAX - 1;
        // do not cut a UTF-8 sequence in half
        while (len > 0 && ((unsigned char)msg[len] & 0xC0) == 0x80) len--;
    }
    if (msg != NULL && len > 0) memcpy(tl_msg, msg, len);
    tl_msg[len] = 0;
    memset(&tl_info, 0, sizeof tl_info);
    tl_info.struct_size = sizeof tl_info;
    tl_info.status = status;
    tl_info.reason = reason;
    tl_info.limit = limit;
    tl_info.requested = requested;
    tl_info.prompt_tokens = prompt_tokens;
}

static int32_t fail(int32_t status, const char* msg) {
    kvw_i_set_error(status, msg, strlen(msg), KVW_REJECT_NONE, 0, 0, 0);
    return status;
}

const char* kvw_last_error(void) { return tl_msg; }

// ---- fork detection --------------------------------------------------------
//
// The Go runtime's threads do not exist in a child of fork(), so any call
// into Go there blocks forever. A pthread_atfork child handler, registered
// when the library is loaded, marks the child; every entry point that needs
// Go checks the mark first and fails at once (pure C, no Go).

static volatile sig_atomic_t forked; // set only in a child, by on_fork_child

static void on_fork_child(void) { forked = 1; }

__attribute__((constructor)) static void kvw_i_register_atfork(void) {
    pthread_atfork(NULL, NULL, on_fork_child);
}

#define FORKED_MSG                                                                          \
    ": called in a child process after fork(); libkvwarden's runtime does not survive "   \
    "fork, so nothing works here, not even the parent's engines. Open engines after the "   \
    "process starts: use the 'spawn' (or 'forkserver') start method with Python "           \
    "multiprocessing, no --preload with gunicorn, or fork+exec"

// NOT_IN_CHILD returns KVW_ERR_FORKED from the enclosing function in a child.
#define NOT_IN_CHILD(fn)                                                                    \
    do {                                                                                    \
        if (forked) return fail(KVW_ERR_FORKED, fn FORKED_MSG);                             \
    } while (0)

void kvw_clear_error(void) {
    tl_msg[0] = 0;
    memset(&tl_info, 0, sizeof tl_info);
}

// check_size validates a caller's struct_size: a non-zero multiple of 8
// (every version of every struct is explicitly padded to one), and for input
// structs not larger than this library's version.
static int32_t check_size(const char* what, uint32_t size, size_t ours, int input) {
    char msg[256];
    if (size < 8 || size % 8 != 0) {
        snprintf(msg, sizeof msg,
                 "%s.struct_size is %u: not a valid size (set it to sizeof(%s); "
                 "use the matching *_default_params or *_init function)",
                 what, size, what);
        return fail(KVW_ERR_INVALID_ARGUMENT, msg);
    }
    if (input && size > ours) {
        snprintf(msg, sizeof msg,
                 "%s.struct_size is %u, larger than this library's %zu: the caller was built "
                 "against a newer kvwarden.h than libkvwarden %s; upgrade the library",
                 what, size, ours, KVW_VERSION_STRING);
        return fail(KVW_ERR_INVALID_ARGUMENT, msg);
    }
    return KVW_OK;
}

// copy_out writes the first min(size, ours) bytes of a full local result
// into the caller's struct and records how much was written.
static void copy_out(void* dst, const void* src, size_t ours) {
    uint32_t size = *(const uint32_t*)dst;
    size_t n = size < ours ? size : ours;
    memcpy(dst, src, n);
    *(uint32_t*)dst = (uint32_t)n;
}

int32_t kvw_last_error_info(kvw_error_info* out) {
    if (out == NULL) return KVW_ERR_INVALID_ARGUMENT; // keep the stored error
    uint32_t size = out->struct_size;
    if (size < 8 || size % 8 != 0) return KVW_ERR_INVALID_ARGUMENT;
    kvw_error_info tmp = tl_info;
    tmp.struct_size = sizeof tmp;
    copy_out(out, &tmp, sizeof tmp);
    return KVW_OK;
}

const char* kvw_status_string(int32_t status) {
    switch (status) {
    case KVW_OK: return "KVW_OK";
    case KVW_ERR_INVALID_ARGUMENT: return "KVW_ERR_INVALID_ARGUMENT";
    case KVW_ERR_REJECTED: return "KVW_ERR_REJECTED";
    case KVW_ERR_ABORTED: return "KVW_ERR_ABORTED";
    case KVW_ERR_ISOLATION: return "KVW_ERR_ISOLATION";
    case KVW_ERR_NOT_FOUND: return "KVW_ERR_NOT_FOUND";
    case KVW_ERR_CLOSED: return "KVW_ERR_CLOSED";
    case KVW_ERR_INTERNAL: return "KVW_ERR_INTERNAL";
    case KVW_ERR_TIMEOUT: return "KVW_ERR_TIMEOUT";
    case KVW_ERR_BUFFER_TOO_SMALL: return "KVW_ERR_BUFFER_TOO_SMALL";
    case KVW_ERR_IO: return "KVW_ERR_IO";
    case KVW_ERR_UNSUPPORTED: return "KVW_ERR_UNSUPPORTED";
    case KVW_ERR_FORKED: return "KVW_ERR_FORKED";
    }
    return "KVW_ERR_UNKNOWN";
}

const char* kvw_version(void) { return KVW_VERSION_STRING; }

// ---- trampolines Go uses to call C function pointers ---------------------

void kvw_i_call_log(kvw_log_callback cb, int32_t level, const char* msg, uintptr_t user_data) {
    cb(level, msg, (void*)user_data);
}

int32_t kvw_i_call_piece(kvw_piece_callback cb, const char* piece, size_t len, uintptr_t user_data) {
    return cb(piece, len, (void*)user_data);
}

int32_t kvw_i_call_progress(kvw_progress_callback cb, int64_t done, int64_t total, uintptr_t user_data) {
    return cb(done, total, (void*)user_data);
}

// ---- defaults and versioned input structs ---------------------------------

// Exported for binaries built against headers that declared these as library
// functions (current headers inline them over the *_init_sized fillers). They
// fill this library's sizeof, so they are only safe for callers whose struct
// is that size; the library uses them internally for its own full structs.
KVW_API kvw_engine_params kvw_engine_default_params(void);
KVW_API kvw_request_params kvw_request_default_params(void);
KVW_API kvw_embed_params kvw_embed_default_params(void);
KVW_API void kvw_result_init(kvw_result* out);
KVW_API void kvw_model_info_init(kvw_model_info* out);
KVW_API void kvw_stats_init(kvw_stats* out);
KVW_API void kvw_erase_result_init(kvw_erase_result* out);

// fill_prefix writes exactly size bytes of the caller's struct: the first
// min(size, ours) bytes of a full local struct and zeroes past that. A
// caller built against an older header passes its own smaller sizeof, so
// nothing past its struct is touched. struct_size is min(size, ours) for
// output structs (the library fills what it knows), but the caller's size
// for input structs: a newer caller's fields this library does not know
// (a grammar, say) must be refused where the struct is used, loudly, not
// dropped here.
static int32_t fill_prefix(const char* fn, void* out, uint32_t size, const void* full, size_t ours, int input) {
    char msg[256];
    if (out == NULL) {
        snprintf(msg, sizeof msg, "%s: out is NULL", fn);
        return fail(KVW_ERR_INVALID_ARGUMENT, msg);
    }
    if (size < 8 || size % 8 != 0) {
        snprintf(msg, sizeof msg,
                 "%s: size %u is not a valid struct size (pass sizeof *out: a multiple of 8, "
                 "at least 8)",
                 fn, size);
        return fail(KVW_ERR_INVALID_ARGUMENT, msg);
    }
    size_t n = size < ours ? size : ours;
    memset(out, 0, size);
    memcpy(out, full, n);
    *(uint32_t*)out = input ? size : (uint32_t)n;
    return KVW_OK;
}

#define SIZED_DEFAULTS(type, legacy)                                               \
    int32_t type##_init_sized(type* out, uint32_t size) {                          \
        type full = legacy();                                                      \
        return fill_prefix(#type "_init_sized", out, size, &full, sizeof full, 1); \
    }

#define SIZED_ZERO(type)                                                           \
    int32_t type##_init_sized(type* out, uint32_t size) {                          \
        type full;                                                                 \
        memset(&full, 0, sizeof full);                                             \
        full.struct_size = sizeof full;                                            \
        return fill_prefix(#type "_init_sized", out, size, &full, sizeof full, 0); \
    }

SIZED_DEFAULTS(kvw_engine_params, kvw_engine_default_params)
SIZED_DEFAULTS(kvw_request_params, kvw_request_default_params)
SIZED_DEFAULTS(kvw_embed_params, kvw_embed_default_params)
SIZED_ZERO(kvw_result)
SIZED_ZERO(kvw_model_info)
SIZED_ZERO(kvw_stats)
SIZED_ZERO(kvw_erase_result)

kvw_engine_params kvw_engine_default_params(void) {
    kvw_engine_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.kv_checksum = KVW_CHECKSUM_HANDOFF;
    p.log_level = KVW_LOG_WARN;
    return p;
}

kvw_request_params kvw_request_default_params(void) {
    kvw_request_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.max_tokens = 0;    // engine default (128)
    p.temperature = 0.0f; // greedy
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 0;
    p.seed = KVW_SEED_RANDOM;
    return p;
}

void kvw_result_init(kvw_result* out) {
    if (out == NULL) return;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
}

void kvw_model_info_init(kvw_model_info* out) {
    if (out == NULL) return;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
}

void kvw_stats_init(kvw_stats* out) {
    if (out == NULL) return;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
}

// Versioned input: defaults, overlaid with the caller's prefix. Every
// version's size ends on a field boundary, so the prefix holds whole fields.
#define LOAD_PARAMS(type, name, in, out)                                     \
    do {                                                                     \
        out = type##_defaults();                                             \
        if ((in) != NULL) {                                                  \
            int32_t st_ = check_size(name, (in)->struct_size, sizeof out, 1); \
            if (st_ != KVW_OK) return st_;                                   \
            memcpy(&out, (in), (in)->struct_size);                           \
            out.struct_size = sizeof out;                                    \
        }                                                                    \
    } while (0)

static kvw_engine_params kvw_engine_params_defaults(void) { return kvw_engine_default_params(); }
static kvw_request_params kvw_request_params_defaults(void) { return kvw_request_default_params(); }

#define OUT_STRUCT(name, ptr)                                                        \
    do {                                                                             \
        if ((ptr) != NULL) {                                                         \
            int32_t st_ = check_size(name, (ptr)->struct_size, sizeof *(ptr), 0);    \
            if (st_ != KVW_OK) return st_;                                           \
        }                                                                            \
    } while (0)

// ---- public entry points --------------------------------------------------

int32_t kvw_engine_open(const char* model_path, const kvw_engine_params* params,
                        kvw_engine** out_engine) {
    NOT_IN_CHILD("kvw_engine_open");
    kvw_engine_params p;
    LOAD_PARAMS(kvw_engine_params, "kvw_engine_params", params, p);
    uintptr_t h = 0;
    if (out_engine == NULL) return fail(KVW_ERR_INVALID_ARGUMENT, "kvw_engine_open: out_engine is NULL");
    uintptr_t ud = (uintptr_t)p.log_user_data;
    p.log_user_data = NULL; // travels as an integer (see bridge.h)
    int32_t st = kvwgo_engine_open((char*)model_path, &p, ud, &h);
    if (st == KVW_OK) *out_engine = (kvw_engine*)h;
    return st;
}

int32_t kvw_engine_close(kvw_engine* engine) {
    NOT_IN_CHILD("kvw_engine_close");
    return kvwgo_engine_close((uintptr_t)engine);
}

int32_t kvw_engine_max_context(kvw_engine* engine, int32_t* out) {
    NOT_IN_CHILD("kvw_engine_max_context");
    return kvwgo_engine_max_context((uintptr_t)engine, out);
}

int32_t kvw_tokenize(kvw_engine* engine, const char* text, int32_t add_bos, int32_t* tokens,
                     size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_tokenize");
    return kvwgo_tokenize((uintptr_t)engine, (char*)text, add_bos, tokens, capacity, out_n);
}

int32_t kvw_detokenize(kvw_engine* engine, const int32_t* tokens, size_t n, char* buf,
                       size_t buf_size, size_t* out_len) {
    NOT_IN_CHILD("kvw_detokenize");
    return kvwgo_detokenize((uintptr_t)engine, (int32_t*)tokens, n, buf, buf_size, out_len);
}

int32_t kvw_vocab_info(kvw_engine* engine, int32_t* n_vocab, int32_t* bos, int32_t* eos) {
    NOT_IN_CHILD("kvw_vocab_info");
    return kvwgo_vocab_info((uintptr_t)engine, n_vocab, bos, eos);
}

int32_t kvw_chat_apply_template(kvw_engine* engine, const kvw_chat_message* messages,
                                size_t n_messages, int32_t add_generation_prompt,
                                const char* template_name, char* buf, size_t buf_size,
                                size_t* out_len) {
    NOT_IN_CHILD("kvw_chat_apply_template");
    return kvwgo_chat_apply_template((uintptr_t)engine, (kvw_chat_message*)messages, n_messages,
                                     add_generation_prompt, (char*)template_name, buf, buf_size,
                                     out_len);
}

int32_t kvw_chat_prepare(kvw_engine* engine, const char* request_json, char* buf, size_t buf_size,
                         size_t* out_len) {
    NOT_IN_CHILD("kvw_chat_prepare");
    return kvwgo_chat_prepare((uintptr_t)engine, (char*)request_json, buf, buf_size, out_len);
}

int32_t kvw_chat_parse(const char* parser_json, const char* text, char* buf, size_t buf_size,
                       size_t* out_len) {
    NOT_IN_CHILD("kvw_chat_parse");
    return kvwgo_chat_parse((char*)parser_json, (char*)text, buf, buf_size, out_len);
}

int32_t kvw_submit(kvw_engine* engine, const char* prompt, const kvw_request_params* params,
                   uint64_t* out_id) {
    NOT_IN_CHILD("kvw_submit");
    kvw_request_params p;
    LOAD_PARAMS(kvw_request_params, "kvw_request_params", params, p);
    return kvwgo_submit((uintptr_t)engine, (char*)prompt, &p, out_id);
}

int32_t kvw_next(kvw_engine* engine, uint64_t id, int32_t timeout_ms, char* buf, size_t buf_size,
                 size_t* out_len, int32_t* out_done) {
    NOT_IN_CHILD("kvw_next");
    return kvwgo_next((uintptr_t)engine, id, timeout_ms, buf, buf_size, out_len, out_done);
}

int32_t kvw_abort(kvw_engine* engine, uint64_t id) {
    NOT_IN_CHILD("kvw_abort");
    return kvwgo_abort((uintptr_t)engine, id);
}

int32_t kvw_request_free(kvw_engine* engine, uint64_t id) {
    NOT_IN_CHILD("kvw_request_free");
    return kvwgo_request_free((uintptr_t)engine, id);
}

int32_t kvw_request_result(kvw_engine* engine, uint64_t id, kvw_result* out) {
    NOT_IN_CHILD("kvw_request_result");
    if (out == NULL) return fail(KVW_ERR_INVALID_ARGUMENT, "kvw_request_result: out is NULL");
    OUT_STRUCT("kvw_result", out);
    kvw_result r;
    kvw_result_init(&r);
    int32_t st = kvwgo_request_result((uintptr_t)engine, id, &r);
    if (st == KVW_OK) copy_out(out, &r, sizeof r);
    return st;
}

int32_t kvw_request_tokens(kvw_engine* engine, uint64_t id, int32_t which, int32_t* tokens,
                           size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_request_tokens");
    return kvwgo_request_tokens((uintptr_t)engine, id, which, tokens, capacity, out_n);
}

int32_t kvw_generate(kvw_engine* engine, const char* prompt, const kvw_request_params* params,
                     kvw_piece_callback on_piece, void* user_data, char* buf, size_t buf_size,
                     size_t* out_len, kvw_result* out_result) {
    NOT_IN_CHILD("kvw_generate");
    kvw_request_params p;
    LOAD_PARAMS(kvw_request_params, "kvw_request_params", params, p);
    OUT_STRUCT("kvw_result", out_result);
    kvw_result r;
    memset(&r, 0, sizeof r); // struct_size stays 0 unless Go fills it
    int32_t st = kvwgo_generate((uintptr_t)engine, (char*)prompt, &p, on_piece, (uintptr_t)user_data, buf,
                                buf_size, out_len, &r);
    // The result is meaningful for finished, aborted and rejected requests;
    // r.struct_size is 0 when the call failed before a request existed.
    if (out_result != NULL && r.struct_size != 0) copy_out(out_result, &r, sizeof r);
    return st;
}

int32_t kvw_engine_stats(kvw_engine* engine, kvw_stats* out) {
    NOT_IN_CHILD("kvw_engine_stats");
    if (out == NULL) return fail(KVW_ERR_INVALID_ARGUMENT, "kvw_engine_stats: out is NULL");
    OUT_STRUCT("kvw_stats", out);
    kvw_stats s;
    kvw_stats_init(&s);
    int32_t st = kvwgo_engine_stats((uintptr_t)engine, &s);
    if (st == KVW_OK) copy_out(out, &s, sizeof s);
    return st;
}

void kvw_erase_result_init(kvw_erase_result* out) {
    if (out == NULL) return;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
}

int32_t kvw_tenant_erase_kv(kvw_engine* engine, const char* tenant, kvw_erase_result* out) {
    NOT_IN_CHILD("kvw_tenant_erase_kv");
    OUT_STRUCT("kvw_erase_result", out);
    kvw_erase_result r;
    kvw_erase_result_init(&r);
    int32_t st = kvwgo_tenant_erase_kv((uintptr_t)engine, (char*)tenant, &r);
    if (st == KVW_OK && out != NULL) copy_out(out, &r, sizeof r);
    return st;
}

int32_t kvw_submit_tokens(kvw_engine* engine, const int32_t* tokens, size_t n_tokens,
                          const kvw_request_params* params, uint64_t* out_id) {
    NOT_IN_CHILD("kvw_submit_tokens");
    kvw_request_params p;
    LOAD_PARAMS(kvw_request_params, "kvw_request_params", params, p);
    return kvwgo_submit_tokens((uintptr_t)engine, (int32_t*)tokens, n_tokens, &p, out_id);
}

int32_t kvw_request_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out,
                             size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_request_logprobs");
    return kvwgo_request_logprobs((uintptr_t)engine, id, out, capacity, out_n);
}

int32_t kvw_request_top_logprobs(kvw_engine* engine, uint64_t id, size_t index,
                                 kvw_token_logprob* out, size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_request_top_logprobs");
    return kvwgo_request_top_logprobs((uintptr_t)engine, id, index, out, capacity, out_n);
}

int32_t kvw_next_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out, size_t capacity,
                          size_t* out_n) {
    NOT_IN_CHILD("kvw_next_logprobs");
    return kvwgo_next_logprobs((uintptr_t)engine, id, out, capacity, out_n);
}

int32_t kvw_next_top_logprobs(kvw_engine* engine, uint64_t id, size_t index, kvw_token_logprob* out,
                              size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_next_top_logprobs");
    return kvwgo_next_top_logprobs((uintptr_t)engine, id, index, out, capacity, out_n);
}

int32_t kvw_request_prompt_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out,
                                    size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_request_prompt_logprobs");
    return kvwgo_request_prompt_logprobs((uintptr_t)engine, id, out, capacity, out_n);
}

int32_t kvw_request_prompt_top_logprobs(kvw_engine* engine, uint64_t id, size_t index,
                                        kvw_token_logprob* out, size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_request_prompt_top_logprobs");
    return kvwgo_request_prompt_top_logprobs((uintptr_t)engine, id, index, out, capacity, out_n);
}

int32_t kvw_request_logits(kvw_engine* engine, uint64_t id, float* out, size_t capacity,
                           size_t* out_n) {
    NOT_IN_CHILD("kvw_request_logits");
    return kvwgo_request_logits((uintptr_t)engine, id, out, capacity, out_n);
}

int32_t kvw_state_save(kvw_engine* engine, const int32_t* tokens, size_t n, uint8_t* buf,
                       size_t buf_size, size_t* out_size) {
    NOT_IN_CHILD("kvw_state_save");
    return kvwgo_state_save((uintptr_t)engine, (int32_t*)tokens, n, buf, buf_size, out_size);
}

int32_t kvw_request_state_save(kvw_engine* engine, uint64_t id, uint8_t* buf, size_t buf_size,
                               size_t* out_size) {
    NOT_IN_CHILD("kvw_request_state_save");
    return kvwgo_request_state_save((uintptr_t)engine, id, buf, buf_size, out_size);
}

int32_t kvw_state_load(kvw_engine* engine, const uint8_t* state, size_t size, int32_t* tokens,
                       size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_state_load");
    return kvwgo_state_load((uintptr_t)engine, (uint8_t*)state, size, tokens, capacity, out_n);
}

int32_t kvw_tokenize_ex(kvw_engine* engine, const char* text, uint32_t flags, int32_t* tokens,
                        size_t capacity, size_t* out_n) {
    NOT_IN_CHILD("kvw_tokenize_ex");
    return kvwgo_tokenize_ex((uintptr_t)engine, (char*)text, flags, tokens, capacity, out_n);
}

int32_t kvw_detokenize_ex(kvw_engine* engine, const int32_t* tokens, size_t n, uint32_t flags,
                          char* buf, size_t buf_size, size_t* out_len) {
    NOT_IN_CHILD("kvw_detokenize_ex");
    return kvwgo_detokenize_ex((uintptr_t)engine, (int32_t*)tokens, n, flags, buf, buf_size, out_len);
}

int32_t kvw_model_info_get(kvw_engine* engine, kvw_model_info* out) {
    NOT_IN_CHILD("kvw_model_info_get");
    if (out == NULL) return fail(KVW_ERR_INVALID_ARGUMENT, "kvw_model_info_get: out is NULL");
    OUT_STRUCT("kvw_model_info", out);
    kvw_model_info m;
    kvw_model_info_init(&m);
    int32_t st = kvwgo_model_info((uintptr_t)engine, &m);
    if (st == KVW_OK) copy_out(out, &m, sizeof m);
    return st;
}

int32_t kvw_model_meta_count(kvw_engine* engine, int32_t* out) {
    NOT_IN_CHILD("kvw_model_meta_count");
    return kvwgo_model_meta_count((uintptr_t)engine, out);
}

int32_t kvw_model_meta_key_by_index(kvw_engine* engine, int32_t i, char* buf, size_t buf_size,
                                    size_t* out_len) {
    NOT_IN_CHILD("kvw_model_meta_key_by_index");
    return kvwgo_model_meta_by_index((uintptr_t)engine, i, 0, buf, buf_size, out_len);
}

int32_t kvw_model_meta_val_by_index(kvw_engine* engine, int32_t i, char* buf, size_t buf_size,
                                    size_t* out_len) {
    NOT_IN_CHILD("kvw_model_meta_val_by_index");
    return kvwgo_model_meta_by_index((uintptr_t)engine, i, 1, buf, buf_size, out_len);
}

int32_t kvw_model_meta_val_str(kvw_engine* engine, const char* key, char* buf, size_t buf_size,
                               size_t* out_len) {
    NOT_IN_CHILD("kvw_model_meta_val_str");
    return kvwgo_model_meta_val_str((uintptr_t)engine, (char*)key, buf, buf_size, out_len);
}

int32_t kvw_pull(const char* ref, const char* filename, const char* cache_dir,
                 kvw_progress_callback progress, void* user_data, char* path_buf, size_t path_size,
                 size_t* out_len) {
    NOT_IN_CHILD("kvw_pull");
    return kvwgo_pull((char*)ref, (char*)filename, (char*)cache_dir, progress, (uintptr_t)user_data,
                      path_buf, path_size, out_len);
}

kvw_embed_params kvw_embed_default_params(void) {
    kvw_embed_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.pooling = KVW_POOLING_MODEL;
    p.normalize = 1;
    return p;
}

static kvw_embed_params kvw_embed_params_defaults(void) { return kvw_embed_default_params(); }

int32_t kvw_embed(kvw_engine* engine, const char* const* inputs, size_t n_inputs,
                  const kvw_embed_params* params, float* out, size_t capacity, size_t* out_n,
                  int32_t* out_dim) {
    NOT_IN_CHILD("kvw_embed");
    kvw_embed_params p;
    LOAD_PARAMS(kvw_embed_params, "kvw_embed_params", params, p);
    return kvwgo_embed((uintptr_t)engine, (char**)inputs, n_inputs, &p, out, capacity, out_n, out_dim);
}

int32_t kvw_embed_tokens(kvw_engine* engine, const char* const* inputs, size_t n_inputs,
                         const kvw_embed_params* params, float* out, size_t capacity, size_t* out_n,
                         int32_t* out_dim, size_t* token_counts) {
    NOT_IN_CHILD("kvw_embed_tokens");
    kvw_embed_params p;
    LOAD_PARAMS(kvw_embed_params, "kvw_embed_params", params, p);
    return kvwgo_embed_tokens((uintptr_t)engine, (char**)inputs, n_inputs, &p, out, capacity, out_n, out_dim,
                              token_counts);
}

int32_t kvw_rerank(kvw_engine* engine, const char* query, const char* const* documents,
                   size_t n_documents, const char* tenant, float* scores, size_t capacity,
                   size_t* out_n) {
    NOT_IN_CHILD("kvw_rerank");
    return kvwgo_rerank((uintptr_t)engine, (char*)query, (char**)documents, n_documents, (char*)tenant,
                        scores, capacity, out_n);
}
