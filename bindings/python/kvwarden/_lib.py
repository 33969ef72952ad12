"""ctypes declarations of libkvwarden (capi/include/kvwarden.h).

Every function's argtypes and restype are declared, with its C prototype in
a comment. The structs mirror the header field by field; tests check their
sizes against the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

# kvw_status
OK = 0
ERR_INVALID_ARGUMENT = -1
ERR_REJECTED = -2
ERR_ABORTED = -3
ERR_ISOLATION = -4
ERR_NOT_FOUND = -5
ERR_CLOSED = -6
ERR_INTERNAL = -7
ERR_TIMEOUT = -8
ERR_BUFFER_TOO_SMALL = -9
ERR_IO = -10
ERR_UNSUPPORTED = -11
ERR_FORKED = -12

# kvw_request_params.seed: no fixed seed (KVW_SEED_RANDOM)
SEED_RANDOM = (1 << 64) - 1

# kvw_finish_reason
FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "abort", 4: "error", 5: "rejected"}
# kvw_reject_reason
REJECT_REASONS = {0: None, 1: "empty_prompt", 2: "too_long", 3: "invalid_params", 4: "quota", 5: "overloaded"}
TOKENS_PROMPT = 0
TOKENS_GENERATED = 1
LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR = 0, 1, 2, 3
# kvw_request_params.max_tokens
DEFAULT_MAX_TOKENS = 128
MAX_TOKENS_UNLIMITED = -1
MAX_LOGIT_BIAS = 1024  # KVW_MAX_LOGIT_BIAS
MAX_TOP_LOGPROBS = 20
MAX_KEEP_TOKENS = 64  # KVW_MAX_KEEP_TOKENS
# kvw_tokenize_ex / kvw_detokenize_ex flags
TOKENIZE_ADD_BOS = 1
TOKENIZE_SPECIAL = 2
DETOKENIZE_SPECIAL = 1
# kvw_embed_params.pooling (GGUF pooling_type values; MODEL = the model's)
POOLING_MODEL, POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK = -1, 0, 1, 2, 3, 4


class kvw_error_info(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("status", c_int32),
        ("reason", c_int32),
        ("reserved0", c_int32),
        ("limit", c_int64),
        ("requested", c_int64),
        ("prompt_tokens", c_int64),
    ]


# typedef void (*kvw_log_callback)(int32_t level, const char* msg, void* user_data);
LOG_CALLBACK = CFUNCTYPE(None, c_int32, c_char_p, c_void_p)
# typedef int32_t (*kvw_piece_callback)(const char* piece, size_t len, void* user_data);
# (piece as void* so that ctypes does not stop at the NUL: use string_at(piece, len))
PIECE_CALLBACK = CFUNCTYPE(c_int32, c_void_p, c_size_t, c_void_p)
# typedef int32_t (*kvw_progress_callback)(int64_t done, int64_t total, void* user_data);
PROGRESS_CALLBACK = CFUNCTYPE(c_int32, c_int64, c_int64, c_void_p)


class kvw_engine_params(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("page_size", c_int32),
        ("tokenizer_path", c_char_p),
        ("device", c_char_p),
        ("kv_pages", c_int64),
        ("kv_memory_bytes", c_int64),
        ("max_context", c_int32),
        ("max_batch_tokens", c_int32),
        ("max_seqs", c_int32),
        ("max_queue", c_int32),
        ("tenant_quota", c_int32),
        ("kv_checksum", c_int32),
        ("host_tier_bytes", c_int64),
        ("compression", c_char_p),
        ("zero_on_release", c_int32),
        ("poison", c_int32),
        ("disable_prefix_cache", c_int32),
        ("log_level", c_int32),
        ("log_callback", LOG_CALLBACK),
        ("log_user_data", c_void_p),
        ("chat_template", c_char_p),  # v2
        ("n_threads", c_int32),  # v3
        ("reserved0", c_int32),
        ("kv_type", c_char_p),  # v4
        ("kv_key_file", c_char_p),  # v5
        ("kv_disk_dir", c_char_p),
        ("kv_disk_budget_bytes", c_int64),
        ("spec_type", c_char_p),  # v6
        ("spec_draft_model", c_char_p),
        ("spec_draft_max", c_int32),
        ("spec_ngram_min", c_int32),
        ("spec_ngram_max", c_int32),
        ("reserved1", c_int32),
    ]


class kvw_request_params(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_tokens", c_int32),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int32),
        ("seed", c_uint64),
        ("tenant", c_char_p),
        ("stop", POINTER(c_char_p)),
        ("n_stop", c_uint32),
        ("no_bos", c_int32),
        ("parse_special", c_int32),  # v2
        ("reserved1", c_int32),
        ("logprobs", c_int32),  # v3
        ("top_logprobs", c_int32),
        ("keep_logits", c_int32),
        ("reserved2", c_int32),
        ("grammar", c_char_p),  # v4
        ("json_schema", c_char_p),
        ("presence_penalty", c_float),  # v5
        ("frequency_penalty", c_float),
        ("logit_bias_tokens", POINTER(c_int32)),
        ("logit_bias", POINTER(c_float)),
        ("n_logit_bias", c_uint32),
        ("prompt_logprobs", c_int32),
        ("keep_tokens", POINTER(c_char_p)),  # v6
        ("n_keep_tokens", c_uint32),
        ("reserved3", c_int32),
        ("spec_type", c_char_p),  # v7
        ("spec_draft_max", c_int32),
        ("spec_ngram_min", c_int32),
        ("spec_ngram_max", c_int32),
        ("reserved4", c_int32),
    ]


class kvw_embed_params(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("pooling", c_int32),
        ("normalize", c_int32),
        ("dimensions", c_int32),
        ("truncate", c_int32),
        ("reserved", c_int32),
        ("tenant", c_char_p),
    ]


class kvw_token_logprob(Structure):
    """Fixed (no struct_size): {token, logprob}."""
    _fields_ = [
        ("token", c_int32),
        ("logprob", c_float),
    ]


class kvw_model_info(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_embd", c_int32),
        ("n_layer", c_int32),
        ("n_head", c_int32),
        ("n_head_kv", c_int32),
        ("n_ctx_train", c_int32),
        ("n_vocab", c_int32),
        ("n_ff", c_int32),
    ]


class kvw_chat_message(Structure):
    """Fixed (no struct_size): {role, content}."""
    _fields_ = [
        ("role", c_char_p),
        ("content", c_char_p),
    ]


class kvw_result(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("status", c_int32),
        ("finish_reason", c_int32),
        ("done", c_int32),
        ("engine_request_id", c_uint64),
        ("prompt_tokens", c_int32),
        ("generated_tokens", c_int32),
        ("cached_tokens", c_int32),
        ("reject_reason", c_int32),
        ("limit", c_int64),
        ("requested", c_int64),
        ("queued_ms", c_double),
        ("ttft_ms", c_double),
        ("prefill_ms", c_double),
        ("decode_ms", c_double),
        ("prefill_tps", c_double),
        ("decode_tps", c_double),
    ]


_STATS_FIELDS = (
    [("struct_size", c_uint32), ("reserved0", c_int32)]
    + [(n, c_int64) for n in (
        "pool_pages", "pool_free", "pool_owned", "pool_sealed", "pool_releasing",
        "pool_quarantined", "step_leases", "copy_leases", "prefix_leases")]
    + [(n, c_uint64) for n in (
        "page_allocs", "page_releases", "page_scrubs", "deferred_releases", "deferred_freed",
        "deferred_quarantined", "checksum_failures", "isolation_violations", "stale_completions")]
    + [(n, c_int64) for n in (
        "host_tier_used_bytes", "host_tier_capacity_bytes", "waiting", "running", "swapped")]
    + [(n, c_uint64) for n in (
        "submitted", "admitted", "rejected", "finished", "aborted", "isolation_failures",
        "prompt_tokens", "generated_tokens", "cached_tokens", "steps", "preemptions",
        "prefix_hits", "prefix_misses")]
    + [("ttft_mean_ms", c_double), ("step_mean_ms", c_double)]
    # v2: the sealed tiers below the pool (kvwarden.h).
    + [("host_seal_failures", c_uint64)]
    + [(n, c_int64) for n in ("disk_used_bytes", "disk_budget_bytes", "disk_files")]
    + [(n, c_uint64) for n in (
        "disk_writes", "disk_hits", "disk_seal_failures", "disk_evictions", "disk_erased",
        "disk_skipped", "disk_write_errors")]
    # v3: speculative decoding.
    + [(n, c_uint64) for n in ("spec_steps", "spec_drafted", "spec_accepted")]
)


class kvw_stats(Structure):
    _fields_ = _STATS_FIELDS


class kvw_erase_result(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_int32),
        ("key_epoch", c_uint64),
        ("prefix_device_pages", c_int64),
        ("prefix_host_pages", c_int64),
        ("host_pages", c_int64),
        ("host_bytes", c_int64),
        ("disk_files", c_int64),  # v2
        ("disk_bytes", c_int64),
    ]


def _candidates():
    env = os.environ.get("KVWARDEN_LIB")
    if env:
        yield env, "KVWARDEN_LIB"
        return
    here = os.path.dirname(os.path.abspath(__file__))
    name = "kvwarden.dll" if sys.platform == "win32" else (
        "libkvwarden.dylib" if sys.platform == "darwin" else "libkvwarden.so")
    yield os.path.join(here, name), "bundled copy"
    found = ctypes.util.find_library("kvwarden")
    if found:
        yield found, "system library path"


def _load():
    tried = []
    for path, how in _candidates():
        if how != "system library path" and not os.path.exists(path):
            tried.append(f"{path} ({how}: no such file)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({how}: {e})")
            if how == "KVWARDEN_LIB":
                break
    raise ImportError(
        "kvwarden: cannot load libkvwarden. Set KVWARDEN_LIB to the path of libkvwarden.so "
        "(build it with `go build -buildmode=c-shared -o libkvwarden.so ./capi` or "
        "`cmake -S . -B build && cmake --build build`), or install the package with the "
        "library bundled (copy it into the kvwarden/ package directory before `pip install`). "
        "Tried: " + ("; ".join(tried) or "nothing"))


lib, path = _load()

_u64p = POINTER(c_uint64)
_i32p = POINTER(c_int32)
_szp = POINTER(c_size_t)


def _decl(name, restype, argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


# const char* kvw_status_string(int32_t status);
_decl("kvw_status_string", c_char_p, [c_int32])
# const char* kvw_last_error(void);
_decl("kvw_last_error", c_char_p, [])
# int32_t kvw_last_error_info(kvw_error_info* out);
_decl("kvw_last_error_info", c_int32, [POINTER(kvw_error_info)])
# void kvw_clear_error(void);
_decl("kvw_clear_error", None, [])
# const char* kvw_version(void);
_decl("kvw_version", c_char_p, [])
# kvw_engine_params kvw_engine_default_params(void);
_decl("kvw_engine_default_params", kvw_engine_params, [])
# int32_t kvw_engine_open(const char* model_path, const kvw_engine_params* params, kvw_engine** out_engine);
_decl("kvw_engine_open", c_int32, [c_char_p, POINTER(kvw_engine_params), POINTER(c_void_p)])
# int32_t kvw_engine_close(kvw_engine* engine);
_decl("kvw_engine_close", c_int32, [c_void_p])
# int32_t kvw_engine_max_context(kvw_engine* engine, int32_t* out);
_decl("kvw_engine_max_context", c_int32, [c_void_p, _i32p])
# int32_t kvw_tokenize(kvw_engine* engine, const char* text, int32_t add_bos, int32_t* tokens, size_t capacity, size_t* out_n);
_decl("kvw_tokenize", c_int32, [c_void_p, c_char_p, c_int32, _i32p, c_size_t, _szp])
# int32_t kvw_detokenize(kvw_engine* engine, const int32_t* tokens, size_t n, char* buf, size_t buf_size, size_t* out_len);
_decl("kvw_detokenize", c_int32, [c_void_p, _i32p, c_size_t, POINTER(c_char), c_size_t, _szp])
# int32_t kvw_vocab_info(kvw_engine* engine, int32_t* n_vocab, int32_t* bos, int32_t* eos);
_decl("kvw_vocab_info", c_int32, [c_void_p, _i32p, _i32p, _i32p])
# int32_t kvw_chat_apply_template(kvw_engine* engine, const kvw_chat_message* messages, size_t n_messages,
#                                 int32_t add_generation_prompt, const char* template_name, char* buf,
#                                 size_t buf_size, size_t* out_len);
_decl("kvw_chat_apply_template", c_int32, [c_void_p, POINTER(kvw_chat_message), c_size_t, c_int32, c_char_p,
                                           POINTER(c_char), c_size_t, _szp])
# int32_t kvw_chat_prepare(kvw_engine* engine, const char* request_json, char* buf, size_t buf_size,
#                          size_t* out_len);
_decl("kvw_chat_prepare", c_int32, [c_void_p, c_char_p, POINTER(c_char), c_size_t, _szp])
# int32_t kvw_chat_parse(const char* parser_json, const char* text, char* buf, size_t buf_size,
#                        size_t* out_len);
_decl("kvw_chat_parse", c_int32, [c_char_p, c_char_p, POINTER(c_char), c_size_t, _szp])
# kvw_request_params kvw_request_default_params(void);
_decl("kvw_request_default_params", kvw_request_params, [])
# int32_t kvw_submit(kvw_engine* engine, const char* prompt, const kvw_request_params* params, uint64_t* out_id);
_decl("kvw_submit", c_int32, [c_void_p, c_char_p, POINTER(kvw_request_params), _u64p])
# int32_t kvw_next(kvw_engine* engine, uint64_t id, int32_t timeout_ms, char* buf, size_t buf_size, size_t* out_len, int32_t* out_done);
_decl("kvw_next", c_int32, [c_void_p, c_uint64, c_int32, POINTER(c_char), c_size_t, _szp, _i32p])
# int32_t kvw_abort(kvw_engine* engine, uint64_t id);
_decl("kvw_abort", c_int32, [c_void_p, c_uint64])
# int32_t kvw_request_free(kvw_engine* engine, uint64_t id);
_decl("kvw_request_free", c_int32, [c_void_p, c_uint64])
# void kvw_result_init(kvw_result* out);
_decl("kvw_result_init", None, [POINTER(kvw_result)])
# int32_t kvw_request_result(kvw_engine* engine, uint64_t id, kvw_result* out);
_decl("kvw_request_result", c_int32, [c_void_p, c_uint64, POINTER(kvw_result)])
# int32_t kvw_request_tokens(kvw_engine* engine, uint64_t id, int32_t which, int32_t* tokens, size_t capacity, size_t* out_n);
_decl("kvw_request_tokens", c_int32, [c_void_p, c_uint64, c_int32, _i32p, c_size_t, _szp])
# int32_t kvw_generate(kvw_engine* engine, const char* prompt, const kvw_request_params* params,
#                      kvw_piece_callback on_piece, void* user_data, char* buf, size_t buf_size,
#                      size_t* out_len, kvw_result* out_result);
_decl("kvw_generate", c_int32, [c_void_p, c_char_p, POINTER(kvw_request_params), PIECE_CALLBACK,
                                c_void_p, POINTER(c_char), c_size_t, _szp, POINTER(kvw_result)])
# void kvw_stats_init(kvw_stats* out);
_decl("kvw_stats_init", None, [POINTER(kvw_stats)])
# int32_t kvw_engine_stats(kvw_engine* engine, kvw_stats* out);
_decl("kvw_engine_stats", c_int32, [c_void_p, POINTER(kvw_stats)])
# void kvw_erase_result_init(kvw_erase_result* out);
_decl("kvw_erase_result_init", None, [POINTER(kvw_erase_result)])
# int32_t kvw_tenant_erase_kv(kvw_engine* engine, const char* tenant, kvw_erase_result* out);
_decl("kvw_tenant_erase_kv", c_int32, [c_void_p, c_char_p, POINTER(kvw_erase_result)])

_u8p = POINTER(ctypes.c_uint8)
# int32_t kvw_submit_tokens(kvw_engine* engine, const int32_t* tokens, size_t n_tokens,
#                           const kvw_request_params* params, uint64_t* out_id);
_decl("kvw_submit_tokens", c_int32, [c_void_p, _i32p, c_size_t, POINTER(kvw_request_params), _u64p])
# int32_t kvw_request_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out, size_t capacity, size_t* out_n);
_decl("kvw_request_logprobs", c_int32, [c_void_p, c_uint64, POINTER(kvw_token_logprob), c_size_t, _szp])
# int32_t kvw_request_top_logprobs(kvw_engine* engine, uint64_t id, size_t index, kvw_token_logprob* out,
#                                  size_t capacity, size_t* out_n);
_decl("kvw_request_top_logprobs", c_int32, [c_void_p, c_uint64, c_size_t, POINTER(kvw_token_logprob), c_size_t,
                                            _szp])
# int32_t kvw_next_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out, size_t capacity, size_t* out_n);
_decl("kvw_next_logprobs", c_int32, [c_void_p, c_uint64, POINTER(kvw_token_logprob), c_size_t, _szp])
# int32_t kvw_next_top_logprobs(kvw_engine* engine, uint64_t id, size_t index, kvw_token_logprob* out,
#                               size_t capacity, size_t* out_n);
_decl("kvw_next_top_logprobs", c_int32, [c_void_p, c_uint64, c_size_t, POINTER(kvw_token_logprob), c_size_t,
                                         _szp])
# int32_t kvw_request_prompt_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out, size_t capacity, size_t* out_n);
_decl("kvw_request_prompt_logprobs", c_int32, [c_void_p, c_uint64, POINTER(kvw_token_logprob), c_size_t, _szp])
# int32_t kvw_request_prompt_top_logprobs(kvw_engine* engine, uint64_t id, size_t index, kvw_token_logprob* out,
#                                         size_t capacity, size_t* out_n);
_decl("kvw_request_prompt_top_logprobs", c_int32, [c_void_p, c_uint64, c_size_t, POINTER(kvw_token_logprob),
                                                   c_size_t, _szp])
# int32_t kvw_request_logits(kvw_engine* engine, uint64_t id, float* out, size_t capacity, size_t* out_n);
_decl("kvw_request_logits", c_int32, [c_void_p, c_uint64, POINTER(c_float), c_size_t, _szp])
# int32_t kvw_state_save(kvw_engine* engine, const int32_t* tokens, size_t n, uint8_t* buf, size_t buf_size,
#                        size_t* out_size);
_decl("kvw_state_save", c_int32, [c_void_p, _i32p, c_size_t, _u8p, c_size_t, _szp])
# int32_t kvw_request_state_save(kvw_engine* engine, uint64_t id, uint8_t* buf, size_t buf_size, size_t* out_size);
_decl("kvw_request_state_save", c_int32, [c_void_p, c_uint64, _u8p, c_size_t, _szp])
# int32_t kvw_state_load(kvw_engine* engine, const uint8_t* state, size_t size, int32_t* tokens, size_t capacity,
#                        size_t* out_n);
_decl("kvw_state_load", c_int32, [c_void_p, _u8p, c_size_t, _i32p, c_size_t, _szp])
# int32_t kvw_tokenize_ex(kvw_engine* engine, const char* text, uint32_t flags, int32_t* tokens, size_t capacity,
#                         size_t* out_n);
_decl("kvw_tokenize_ex", c_int32, [c_void_p, c_char_p, c_uint32, _i32p, c_size_t, _szp])
# int32_t kvw_detokenize_ex(kvw_engine* engine, const int32_t* tokens, size_t n, uint32_t flags, char* buf,
#                           size_t buf_size, size_t* out_len);
_decl("kvw_detokenize_ex", c_int32, [c_void_p, _i32p, c_size_t, c_uint32, POINTER(c_char), c_size_t, _szp])
# void kvw_model_info_init(kvw_model_info* out);
_decl("kvw_model_info_init", None, [POINTER(kvw_model_info)])
# int32_t kvw_model_info_get(kvw_engine* engine, kvw_model_info* out);
_decl("kvw_model_info_get", c_int32, [c_void_p, POINTER(kvw_model_info)])
# int32_t kvw_model_meta_count(kvw_engine* engine, int32_t* out);
_decl("kvw_model_meta_count", c_int32, [c_void_p, _i32p])
# int32_t kvw_model_meta_key_by_index(kvw_engine* engine, int32_t i, char* buf, size_t buf_size, size_t* out_len);
_decl("kvw_model_meta_key_by_index", c_int32, [c_void_p, c_int32, POINTER(c_char), c_size_t, _szp])
# int32_t kvw_model_meta_val_by_index(kvw_engine* engine, int32_t i, char* buf, size_t buf_size, size_t* out_len);
_decl("kvw_model_meta_val_by_index", c_int32, [c_void_p, c_int32, POINTER(c_char), c_size_t, _szp])
# int32_t kvw_model_meta_val_str(kvw_engine* engine, const char* key, char* buf, size_t buf_size, size_t* out_len);
_decl("kvw_model_meta_val_str", c_int32, [c_void_p, c_char_p, POINTER(c_char), c_size_t, _szp])
# int32_t kvw_pull(const char* ref, const char* filename, const char* cache_dir, kvw_progress_callback progress,
#                  void* user_data, char* path_buf, size_t path_size, size_t* out_len);
_decl("kvw_pull", c_int32, [c_char_p, c_char_p, c_char_p, PROGRESS_CALLBACK, c_void_p, POINTER(c_char), c_size_t,
                            _szp])
# kvw_embed_params kvw_embed_default_params(void);
_decl("kvw_embed_default_params", kvw_embed_params, [])
# int32_t kvw_embed(kvw_engine* engine, const char* const* inputs, size_t n_inputs, const kvw_embed_params* params,
#                   float* out, size_t capacity, size_t* out_n, int32_t* out_dim);
_decl("kvw_embed", c_int32, [c_void_p, POINTER(c_char_p), c_size_t, POINTER(kvw_embed_params), POINTER(c_float),
                             c_size_t, _szp, _i32p])
# int32_t kvw_embed_tokens(kvw_engine* engine, const char* const* inputs, size_t n_inputs,
#                          const kvw_embed_params* params, float* out, size_t capacity, size_t* out_n,
#                          int32_t* out_dim, size_t* token_counts);
_decl("kvw_embed_tokens", c_int32, [c_void_p, POINTER(c_char_p), c_size_t, POINTER(kvw_embed_params),
                                    POINTER(c_float), c_size_t, _szp, _i32p, _szp])
# int32_t kvw_rerank(kvw_engine* engine, const char* query, const char* const* documents, size_t n_documents,
#                    const char* tenant, float* scores, size_t capacity, size_t* out_n);
_decl("kvw_rerank", c_int32, [c_void_p, c_char_p, POINTER(c_char_p), c_size_t, c_char_p, POINTER(c_float), c_size_t,
                              _szp])

# The sized fillers: int32_t T_init_sized(T* out, uint32_t size). The header's
# *_default_params / *_init are inline wrappers over these that pass the
# caller's sizeof; ctypes cannot use the header, so it calls these with
# ctypes.sizeof of its own structs (the legacy symbols fill the library's size,
# which would overrun these structs if the library is newer than this module).
SIZED_INIT = {}
for _cls in (kvw_engine_params, kvw_request_params, kvw_embed_params, kvw_result, kvw_model_info, kvw_stats,
             kvw_erase_result):
    SIZED_INIT[_cls] = _decl(_cls.__name__ + "_init_sized", c_int32, [POINTER(_cls), c_uint32])
