/*
 * kvwarden.h: the C API of kvwarden, an embeddable LLM inference engine.
 *
 * Link with -lkvwarden (pkg-config kvwarden, or find_package(kvwarden) and
 * target kvwarden::kvwarden in CMake). This header is hand-written and
 * stable; it never exposes cgo-generated names.
 *
 * ---------------------------------------------------------------------------
 * Conventions (they hold for every function below unless it says otherwise)
 * ---------------------------------------------------------------------------
 *
 * Status.  Every function that can fail returns an int32_t kvw_status:
 *   KVW_OK (0) on success, a negative KVW_ERR_* code otherwise. On failure
 *   kvw_last_error() returns a message and kvw_last_error_info() the details
 *   (for rejections: the reason, the limit and the requested length) for the
 *   calling thread. Out-parameters are written only on success, except where
 *   a function documents otherwise (the size-query pattern writes the
 *   required size on KVW_ERR_BUFFER_TOO_SMALL).
 *
 * After an error, every handle and request ID that was valid before the
 *   call is still valid (only kvw_engine_close and kvw_request_free end
 *   them), and nothing the caller owns was freed or retained.
 *
 * Handles.  kvw_engine is opaque and is never dereferenced by the library:
 *   the pointer value is a token into an internal table. Handle values are
 *   never reused within a process, so a closed or stale handle reliably
 *   yields KVW_ERR_CLOSED (closed) or KVW_ERR_NOT_FOUND (never issued),
 *   never a crash. Request IDs are uint64_t values that are unique for the
 *   lifetime of the process and are never reused.
 *
 * Threads.  All functions are thread-safe: any number of threads may use one
 *   engine (submit, stream, abort, generate, tokenize, stats) at the same
 *   time, and kvw_engine_close may race with all of them (those calls then
 *   return KVW_ERR_CLOSED or, for running requests, KVW_ERR_ABORTED).
 *   Blocking calls (kvw_next with a timeout, kvw_generate) release nothing
 *   the other threads need.
 *
 * Memory.  The library never keeps a pointer that the caller passed in after
 *   the call returns (strings are copied), and never hands out memory the
 *   caller must free: outputs go to caller-owned buffers, sized with the
 *   size-query pattern (call with NULL/0 to learn the size, then again).
 *   Strings are NUL-terminated UTF-8.
 *
 * Versioned structs.  Every parameter and output struct starts with
 *   uint32_t struct_size; set it to sizeof(the struct) (the *_default_params
 *   and *_init functions do). Structs are laid out with explicit padding, so
 *   each version's size is a multiple of 8 and later versions only append
 *   fields. The library accepts older, smaller sizes (fields beyond them
 *   take their defaults) and rejects sizes it does not know (larger than its
 *   own, below 8, or not a multiple of 8) with KVW_ERR_INVALID_ARGUMENT
 *   instead of silently misreading them. For output structs a larger size is
 *   accepted: the library fills the fields it knows and sets struct_size to
 *   the number of bytes it wrote.
 *   Filling a struct follows the same rule: each versioned struct T has an
 *   exported T_init_sized(T* out, uint32_t size) that writes exactly the
 *   first size bytes (the library's defaults, or zeroes for output structs,
 *   cut to that prefix; bytes past the library's own version are zeroed).
 *   An output struct's struct_size becomes min(size, the library's sizeof);
 *   a parameter struct keeps the caller's size, so a program built against
 *   a newer header than the library is refused where it passes the struct
 *   (KVW_ERR_INVALID_ARGUMENT naming the size) instead of having its newer
 *   fields silently ignored. A NULL out or a
 *   size below 8 or not a multiple of 8 is KVW_ERR_INVALID_ARGUMENT. The
 *   *_default_params and *_init functions are static inline wrappers in
 *   this header that pass the caller's own sizeof, so a program built
 *   against an older header never has bytes written past its structs by a
 *   newer library. (Earlier headers declared them as library functions,
 *   which filled the library's sizeof; the library still exports those
 *   symbols so binaries built against those headers keep linking.) Bindings
 *   that do not compile this header (ctypes, FFI) call T_init_sized with the
 *   size of their own struct, never the *_default_params / *_init symbols.
 *
 * Errors never abort the process: every entry point recovers internal
 *   panics into KVW_ERR_INTERNAL with a message.
 *
 * fork().  The library runs a Go runtime with threads of its own, which do
 *   not survive fork(): a child process cannot use the library at all, not
 *   even the engines its parent opened. The library detects the child
 *   (pthread_atfork) and every function that needs the runtime returns
 *   KVW_ERR_FORKED there at once, instead of hanging. Open engines in each
 *   process after it starts: with Python's multiprocessing use the "spawn"
 *   or "forkserver" start method (not "fork"); with gunicorn do not use
 *   --preload; with Celery use a pool that does not fork after import, or
 *   open the engine in a worker_process_init handler. fork() followed by
 *   exec() is fine. The parent is unaffected. Functions that never need
 *   the runtime keep working in the child: kvw_status_string,
 *   kvw_last_error, kvw_last_error_info, kvw_clear_error, kvw_version and
 *   the *_default_params / *_init functions.
 *
 * Signals.  The Go runtime installs handlers for SIGSEGV, SIGBUS, SIGFPE
 *   (turning faults in its own code into errors, see above), SIGPIPE,
 *   SIGURG (goroutine preemption) and SIGPROF, on the alternate signal
 *   stack. Faults it does not own are passed on to the handler that was
 *   installed before the library was loaded. An application that installs
 *   its own SIGSEGV/SIGBUS (or SIGFPE) handler after loading the library
 *   must:
 *     - install it with sigaction() and SA_ONSTACK | SA_SIGINFO (without
 *       SA_ONSTACK the Go runtime aborts the process when the signal lands
 *       on one of its threads);
 *     - keep the previous struct sigaction (the third argument of
 *       sigaction) and, for every fault that is not its own (a si_addr
 *       outside the memory it manages), call the previous handler with the
 *       same three arguments, or, if the previous action is SIG_DFL,
 *       restore it and return so the fault recurs and ends the process;
 *     - not use signal(), SA_RESETHAND or SA_NODEFER for these signals,
 *       and not block them in threads that call the library.
 *   Installing handlers before the library is loaded needs nothing more.
 *   bindings/c/tests/test_signals.c shows the supported way.
 *
 * Requires a 64-bit platform.
 */
#ifndef KVWARDEN_H
#define KVWARDEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && !defined(__GNUC__)
#define KVW_API __declspec(dllimport)
#elif defined(__GNUC__)
#define KVW_API __attribute__((visibility("default")))
#else
#define KVW_API
#endif

/* Version of this header. kvw_version() reports the library's. */
#define KVW_VERSION_MAJOR 0
#define KVW_VERSION_MINOR 1
#define KVW_VERSION_PATCH 0
#define KVW_VERSION_STRING "0.1.0"

/* ---------------------------------------------------------------------- */
/* Status codes                                                            */
/* ---------------------------------------------------------------------- */

typedef enum kvw_status {
    KVW_OK = 0,
    /* An argument is NULL where it must not be, out of range, not valid
     * UTF-8, an unknown struct_size, or an unusable configuration. Bad
     * request input found at submission also sets kvw_error_info.reason:
     * KVW_REJECT_EMPTY_PROMPT (an empty prompt, or one that tokenizes to
     * nothing) or KVW_REJECT_INVALID_PARAMS (sampling values, stops). */
    KVW_ERR_INVALID_ARGUMENT = -1,
    /* Admission refused a valid request before any work: prompt too long
     * for max_context, tenant quota, or the queue is full. See
     * kvw_last_error_info() for the reason and the numbers. */
    KVW_ERR_REJECTED = -2,
    /* The request was aborted (kvw_abort, a callback asking to stop, or the
     * engine closing while it ran). */
    KVW_ERR_ABORTED = -3,
    /* A KV isolation check failed; the request was ended and no output of
     * other requests was delivered. Treat as an incident. */
    KVW_ERR_ISOLATION = -4,
    /* Unknown or stale handle or request ID (never issued, or freed). */
    KVW_ERR_NOT_FOUND = -5,
    /* The engine handle was closed. */
    KVW_ERR_CLOSED = -6,
    /* A bug or an unexpected failure inside kvwarden (message explains). */
    KVW_ERR_INTERNAL = -7,
    /* kvw_next: nothing arrived within the timeout. Not a failure of the
     * request; call again. */
    KVW_ERR_TIMEOUT = -8,
    /* The caller's buffer is too small; the required size was written to
     * the size out-parameter. Nothing was consumed. */
    KVW_ERR_BUFFER_TOO_SMALL = -9,
    /* Loading the model or tokenizer failed (missing, unreadable, corrupt). */
    KVW_ERR_IO = -10,
    /* The model file is readable but not supported: its architecture,
     * a tensor type, its RoPE scaling type, or a tensor that is missing
     * or unexpected for its architecture. The message names it (and lists
     * the supported architectures). */
    KVW_ERR_UNSUPPORTED = -11,
    /* Called in a child process after fork(): the library cannot work
     * there (see "fork()" above). Nothing was done. */
    KVW_ERR_FORKED = -12
} kvw_status;

/* A static, human-readable name for a status ("KVW_ERR_REJECTED");
 * "KVW_ERR_UNKNOWN" for values not in the enum. Never NULL. */
KVW_API const char* kvw_status_string(int32_t status);

/* Why admission refused a request (kvw_error_info.reason). With
 * KVW_ERR_REJECTED: TOO_LONG, QUOTA, OVERLOADED. With
 * KVW_ERR_INVALID_ARGUMENT: EMPTY_PROMPT, INVALID_PARAMS. */
typedef enum kvw_reject_reason {
    KVW_REJECT_NONE = 0,
    KVW_REJECT_EMPTY_PROMPT = 1,
    /* The prompt alone fills max_context (no room for one new token).
     * limit = max_context, prompt_tokens = the prompt's tokens (BOS
     * included), requested = prompt_tokens + max_tokens (128 when 0,
     * 1 when KVW_MAX_TOKENS_UNLIMITED). A prompt is tokenized
     * only until it is known not to fit, so for a long one prompt_tokens
     * (and requested) is a lower bound, and the message says "at least". */
    KVW_REJECT_TOO_LONG = 2,
    KVW_REJECT_INVALID_PARAMS = 3,
    KVW_REJECT_QUOTA = 4,
    KVW_REJECT_OVERLOADED = 5
} kvw_reject_reason;

/* Details of the calling thread's last failure. */
typedef struct kvw_error_info {
    uint32_t struct_size;   /* in: sizeof(kvw_error_info) */
    int32_t status;         /* the kvw_status of the last failed call, KVW_OK if none */
    int32_t reason;         /* kvw_reject_reason: KVW_ERR_REJECTED, or INVALID_ARGUMENT at submission */
    int32_t reserved0;
    int64_t limit;          /* KVW_REJECT_TOO_LONG: the engine's max_context */
    int64_t requested;      /* KVW_REJECT_TOO_LONG: prompt_tokens + max_tokens */
    int64_t prompt_tokens;  /* KVW_REJECT_TOO_LONG: tokens of the prompt */
} kvw_error_info;

/* The message of the calling thread's last failed kvw_* call, or "" if
 * none. Thread-local: a failure on one thread never changes another
 * thread's message. Successful calls do not clear it. The pointer stays
 * valid until the next kvw_* call on the same thread; copy it to keep it.
 * Never NULL. Thread-safe. */
KVW_API const char* kvw_last_error(void);

/* Copies the calling thread's last failure details into *out (status
 * KVW_OK and zeros if there was none). Thread-local like kvw_last_error.
 * Returns KVW_ERR_INVALID_ARGUMENT for NULL or a bad struct_size (and then
 * does not touch the stored error). */
KVW_API int32_t kvw_last_error_info(kvw_error_info* out);

/* Resets the calling thread's last error to "" / KVW_OK. */
KVW_API void kvw_clear_error(void);

/* The library version ("0.1.0"); static storage, never NULL. Compare with
 * KVW_VERSION_STRING to detect a header/library mismatch. */
KVW_API const char* kvw_version(void);

/* ---------------------------------------------------------------------- */
/* Engine                                                                  */
/* ---------------------------------------------------------------------- */

typedef struct kvw_engine kvw_engine; /* opaque; never dereference */

typedef enum kvw_log_level {
    KVW_LOG_DEBUG = 0,
    KVW_LOG_INFO = 1,
    KVW_LOG_WARN = 2,
    KVW_LOG_ERROR = 3
} kvw_log_level;

/* Log callback of one engine. msg is NUL-terminated and valid only during
 * the call. It may be called from any thread (the engine's scheduler runs on
 * its own threads), concurrently, so it must be thread-safe. It must not
 * call kvw_engine_close on its own engine. It is never called after
 * kvw_engine_close has returned, nor for another engine. */
typedef void (*kvw_log_callback)(int32_t level, const char* msg, void* user_data);

typedef enum kvw_kv_checksum {
    KVW_CHECKSUM_HANDOFF = 0, /* verify sealed pages at every handoff (default) */
    KVW_CHECKSUM_STEP = 1,    /* verify every page every step reads */
    KVW_CHECKSUM_OFF = 2      /* benchmarks only */
} kvw_kv_checksum;

typedef struct kvw_engine_params {
    uint32_t struct_size;       /* sizeof(kvw_engine_params) */
    int32_t page_size;          /* tokens per KV page; 0 = 16 */
    const char* tokenizer_path; /* llama2.c checkpoints: tokenizer file; NULL = engine default */
    const char* device;         /* "auto" (NULL), "cpu" or "cuda" */
    int64_t kv_pages;           /* KV pool size in pages; 0 = from kv_memory_bytes */
    int64_t kv_memory_bytes;    /* KV pool size in bytes; 0 = room for max_seqs contexts,
                                   at most 256 MiB unless one context needs more */
    int32_t max_context;        /* tokens per request (prompt + generated); 0 = min(model, pool) */
    int32_t max_batch_tokens;   /* token budget of one step; 0 = 512 */
    int32_t max_seqs;           /* running sequences; 0 = 64 */
    int32_t max_queue;          /* waiting requests before KVW_REJECT_OVERLOADED; 0 = 1024 */
    int32_t tenant_quota;       /* concurrent requests per tenant; 0 = unlimited */
    int32_t kv_checksum;        /* kvw_kv_checksum */
    int64_t host_tier_bytes;    /* host-memory tier; 0 = none */
    const char* compression;    /* host tier: "none" (NULL), "s2" or "zstd" */
    int32_t zero_on_release;    /* bool: scrub freed pages, in every tier: device pages before
                                   reuse, and every host buffer that held KV bytes (host-tier
                                   copies, compressed or not, when dropped; compression and
                                   CUDA staging buffers after each copy) */
    int32_t poison;             /* bool: fill freed pages with NaN (debugging) */
    int32_t disable_prefix_cache; /* bool */
    int32_t log_level;          /* minimum kvw_log_level passed to log_callback; default WARN */
    kvw_log_callback log_callback; /* NULL = no logging */
    void* log_user_data;        /* passed to log_callback; not owned, must outlive the engine */
    /* v2 (struct_size 120): */
    const char* chat_template;  /* Jinja chat template replacing the model's
                                 * tokenizer.chat_template (text, not a path);
                                 * NULL = the model's own. Copied. One that does
                                 * not parse fails kvw_engine_open with
                                 * KVW_ERR_INVALID_ARGUMENT. */
    /* v3 (struct_size 128): */
    int32_t n_threads;          /* compute threads of the CPU forward pass, at most 1024;
                                 * 0 = the physical cores. The CPU worker pool is shared by
                                 * all engines of the process: the most recently opened
                                 * engine's value applies. */
    int32_t reserved0;
    /* v4 (struct_size 136): */
    const char* kv_type;        /* KV cache element type: "f16" (NULL, default), "f32"
                                   (twice the memory; exact against float32 references),
                                   "q8_0" or "q4_0" (ggml blocks of 32 along the head:
                                   0.53x and 0.28x of f16; head dim a multiple of 32;
                                   CPU only: device "cuda" fails, "auto" uses the CPU) */
    /* v5 (struct_size 160): sealed tiers (see kvw_tenant_erase_kv) */
    const char* kv_key_file;    /* master key file (32 bytes or 64 hex digits) every page
                                   outside the pool is sealed under, per tenant; NULL = a
                                   random key per process. Copied. */
    const char* kv_disk_dir;    /* disk tier directory: prefix pages below the host tier,
                                   kept across engines with the same key file; NULL = none */
    int64_t kv_disk_budget_bytes; /* the disk tier's hard limit; required with kv_disk_dir */
    /* v6 (struct_size 192): speculative decoding for every request that
     * does not set its own (kvw_request_params.spec_type). The output is
     * unchanged by it: greedy output is identical, sampled output follows
     * the same distribution; repetitive text decodes faster. */
    const char* spec_type;      /* "none" (NULL, default) or "ngram": drafts from the
                                   longest n-gram of the sequence's recent tokens that
                                   occurred earlier in its prompt or output (prompt
                                   lookup; no second model) or "draft": a second,
                                   small model with the same vocabulary proposes
                                   the drafts (spec_draft_model). */
    const char* spec_draft_model; /* "draft": the draft model (a GGUF file, or
                                   "builtin:stories260K"); NULL otherwise. Copied. */
    int32_t spec_draft_max;     /* most draft tokens verified per step; 0 = 8, at most 64 */
    int32_t spec_ngram_min;     /* shortest n-gram looked up; 0 = 2 (1 when spec_ngram_max is 1) */
    int32_t spec_ngram_max;     /* longest n-gram looked up; 0 = max(4, spec_ngram_min), at most 16 */
    int32_t reserved1;          /* 0 */
} kvw_engine_params;

/* Defaults for kvw_engine_params (struct_size set). Thread-safe.
 * kvw_engine_default_params is inline: it passes this header's sizeof to
 * kvw_engine_params_init_sized (see "Versioned structs"). */
KVW_API int32_t kvw_engine_params_init_sized(kvw_engine_params* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline kvw_engine_params kvw_engine_default_params(void) {
    kvw_engine_params p;
    kvw_engine_params_init_sized(&p, (uint32_t)sizeof p);
    return p;
}
#endif

/* Opens an engine.
 *   model_path: a GGUF file or llama2.c checkpoint, or NULL for the small
 *     built-in synthetic model (tests, smoke checks). Copied.
 *   params: NULL for defaults. Read during the call only (strings copied);
 *     log_user_data is kept and handed back to log_callback.
 *   out_engine: receives the handle on success; untouched on failure.
 * Errors: KVW_ERR_INVALID_ARGUMENT (params, e.g. max_context larger than the
 * KV pool can hold; the message names both numbers), KVW_ERR_UNSUPPORTED
 * (a model the engine cannot run), KVW_ERR_IO (model or
 * tokenizer unreadable). Thread-safe; engines are independent.
 * Weight pages: the environment variable KVWARDEN_WEIGHTS chooses how the
 * model file is placed in memory: auto (the default: on Linux, 2 MiB pages
 * where cheap and safe; one-sequence decode is 1.2-1.4x slower per
 * CPU-second on 4 KiB pages), map (the file mapped as its page cache is),
 * recache (the file's page cache re-read in 2 MiB folios first) or copy
 * (anonymous 2 MiB pages, the file's page cache dropped). It is read at
 * each open, so setenv() after loading the library takes effect. The
 * choice and its reason are logged at KVW_LOG_INFO ("engine: weights on
 * ... pages"). A bad value fails the open with KVW_ERR_INVALID_ARGUMENT
 * naming the variable. */
KVW_API int32_t kvw_engine_open(const char* model_path, const kvw_engine_params* params,
                                kvw_engine** out_engine);

/* Closes an engine: stops admitting, aborts running requests (a kvw_generate
 * running then returns KVW_ERR_ABORTED; a kvw_next blocked on one of the
 * engine's requests returns KVW_ERR_CLOSED, as does every later call with
 * the handle), waits for the
 * scheduler to stop and frees the model and pool. After it returns the log
 * callback is never called again. The handle is dead afterwards: any later
 * use, including a second close, returns KVW_ERR_CLOSED. Request IDs of the
 * engine die with it. NULL returns KVW_ERR_INVALID_ARGUMENT. */
KVW_API int32_t kvw_engine_close(kvw_engine* engine);

/* Context length of the engine (resolved max_context), written to *out. */
KVW_API int32_t kvw_engine_max_context(kvw_engine* engine, int32_t* out);

/* ---------------------------------------------------------------------- */
/* Tokens                                                                  */
/* ---------------------------------------------------------------------- */

/* Tokenizes NUL-terminated UTF-8 text with the model's tokenizer.
 *   add_bos: non-zero prepends BOS (as kvw_submit does by default).
 *   tokens/capacity: caller-owned output array. Size query: tokens NULL and
 *     capacity 0 returns KVW_OK with the count in *out_n. If capacity is too
 *     small, returns KVW_ERR_BUFFER_TOO_SMALL with the count in *out_n and
 *     leaves tokens untouched.
 *   out_n: required.
 * Errors: KVW_ERR_INVALID_ARGUMENT for NULL text/out_n or invalid UTF-8. */
KVW_API int32_t kvw_tokenize(kvw_engine* engine, const char* text, int32_t add_bos,
                             int32_t* tokens, size_t capacity, size_t* out_n);

/* Detokenizes n token IDs into buf as NUL-terminated text (control tokens
 * such as BOS produce nothing; bytes of an unfinished multi-byte character
 * at the end come out as U+FFFD). *out_len receives the text length without
 * the NUL. Size query: buf NULL and buf_size 0 returns KVW_OK with the
 * length in *out_len. buf_size must be at least *out_len + 1, else
 * KVW_ERR_BUFFER_TOO_SMALL (buf untouched). tokens may be NULL when n == 0.
 * Errors: KVW_ERR_INVALID_ARGUMENT for an ID outside the vocabulary. */
KVW_API int32_t kvw_detokenize(kvw_engine* engine, const int32_t* tokens, size_t n,
                               char* buf, size_t buf_size, size_t* out_len);

/* kvw_tokenize with flags: KVW_TOKENIZE_ADD_BOS prepends BOS;
 * KVW_TOKENIZE_SPECIAL turns special-token text ("<|im_start|>") into the
 * special token (as kvw_request_params.parse_special; leave it off for
 * untrusted text). Unknown flag bits are KVW_ERR_INVALID_ARGUMENT. */
#define KVW_TOKENIZE_ADD_BOS 1
#define KVW_TOKENIZE_SPECIAL 2
KVW_API int32_t kvw_tokenize_ex(kvw_engine* engine, const char* text, uint32_t flags,
                                int32_t* tokens, size_t capacity, size_t* out_n);

/* kvw_detokenize with flags: KVW_DETOKENIZE_SPECIAL renders control tokens
 * (BOS, EOS, "<|im_start|>", ...) as their text instead of nothing, as
 * llama_detokenize does with unparse_special. Unknown flag bits are
 * KVW_ERR_INVALID_ARGUMENT. */
#define KVW_DETOKENIZE_SPECIAL 1
KVW_API int32_t kvw_detokenize_ex(kvw_engine* engine, const int32_t* tokens, size_t n,
                                  uint32_t flags, char* buf, size_t buf_size, size_t* out_len);

/* Vocabulary size, BOS and EOS IDs (-1 when absent). Any out may be NULL. */
KVW_API int32_t kvw_vocab_info(kvw_engine* engine, int32_t* n_vocab, int32_t* bos, int32_t* eos);

/* ---------------------------------------------------------------------- */
/* Model                                                                   */
/* ---------------------------------------------------------------------- */

/* Shape of the model (output struct: set struct_size, e.g. with
 * kvw_model_info_init). */
typedef struct kvw_model_info {
    uint32_t struct_size; /* in: sizeof(kvw_model_info); out: bytes written */
    int32_t n_embd;       /* model width */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ctx_train;  /* context length the model was trained for */
    int32_t n_vocab;
    int32_t n_ff;         /* feed-forward width */
} kvw_model_info;

/* Zeroes the first size bytes of *out (caller-owned) and sets its struct_size;
 * kvw_model_info_init is inline and passes this header's sizeof (see "Versioned
 * structs"). Thread-safe. */
KVW_API int32_t kvw_model_info_init_sized(kvw_model_info* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline void kvw_model_info_init(kvw_model_info* out) {
    kvw_model_info_init_sized(out, (uint32_t)sizeof *out);
}
#endif

/* Writes the model's shape into *out. */
KVW_API int32_t kvw_model_info_get(kvw_engine* engine, kvw_model_info* out);

/* The model's metadata, as llama.h's llama_model_meta_* functions give it:
 * every GGUF key whose value is not an array, its value as text (integers
 * in decimal, floats with six decimals, booleans true/false), ordered by
 * key. A model that is not a GGUF file (llama2.c checkpoint, built-in) has
 * the general.* and <arch>.* keys of its configuration. Read on first use
 * (the file is read again). */

/* The number of metadata entries, written to *out. */
KVW_API int32_t kvw_model_meta_count(kvw_engine* engine, int32_t* out);

/* Copies the key (or value) of entry i (0 <= i < count) into buf,
 * NUL-terminated, with the size-query pattern of kvw_detokenize. Errors:
 * KVW_ERR_INVALID_ARGUMENT for an index out of range. */
KVW_API int32_t kvw_model_meta_key_by_index(kvw_engine* engine, int32_t i, char* buf,
                                            size_t buf_size, size_t* out_len);
KVW_API int32_t kvw_model_meta_val_by_index(kvw_engine* engine, int32_t i, char* buf,
                                            size_t buf_size, size_t* out_len);

/* Copies the value of key into buf (size-query pattern as above).
 * KVW_ERR_INVALID_ARGUMENT when the model has no such key (the message
 * says so). */
KVW_API int32_t kvw_model_meta_val_str(kvw_engine* engine, const char* key, char* buf,
                                       size_t buf_size, size_t* out_len);

/* ---------------------------------------------------------------------- */
/* Model downloads                                                         */
/* ---------------------------------------------------------------------- */

/* Progress of kvw_pull: bytes on disk (resumed ones included) and the
 * expected total (0 when unknown). Called on the calling thread. Return 0
 * to continue, non-zero to stop the download (kept for resuming). */
typedef int32_t (*kvw_progress_callback)(int64_t done, int64_t total, void* user_data);

/* Downloads a GGUF file from a Hugging Face hub into the cache, as
 * `kvwarden pull` does (the same cache, resume of an interrupted download,
 * size and SHA-256 verification; HF_ENDPOINT and HF_TOKEN from the
 * environment), and writes the cached file's path into path_buf.
 *   ref: a reference as `kvwarden pull` reads it ("owner/repo",
 *     "owner/repo:Q4_K_M", "owner/repo:file.gguf@rev", "hf://...") when
 *     filename is NULL; with filename, just the repository ("owner/repo").
 *   filename: NULL, a file name in the repository, or a glob pattern
 *     ("*Q4_K_M.gguf") that must match exactly one file (as
 *     llama-cpp-python's Llama.from_pretrained takes it).
 *   cache_dir: NULL for the default ($KVWARDEN_CACHE_DIR, else
 *     ~/.cache/kvwarden); else the cache's root.
 *   progress/user_data: optional; see kvw_progress_callback.
 *   path_buf/path_size/out_len: the path, NUL-terminated; *out_len gets its
 *     length. If it does not fit, KVW_ERR_BUFFER_TOO_SMALL with *out_len
 *     set: the file is in the cache by then, so calling again with a larger
 *     buffer does not download it again.
 * Errors: KVW_ERR_INVALID_ARGUMENT for a bad reference or a filename that
 * matches no file, or several; KVW_ERR_IO for network, HTTP (401, 403,
 * 404, ...) and verification failures (the message says which);
 * KVW_ERR_ABORTED when progress asked to stop. Blocks for the download;
 * thread-safe; needs no engine. */
KVW_API int32_t kvw_pull(const char* ref, const char* filename, const char* cache_dir,
                         kvw_progress_callback progress, void* user_data, char* path_buf,
                         size_t path_size, size_t* out_len);

/* ---------------------------------------------------------------------- */
/* Chat templates                                                          */
/* ---------------------------------------------------------------------- */

/* One turn of a conversation. Unlike the other structs this one is fixed
 * (no struct_size): it will never grow, so arrays of it stay compatible. */
typedef struct kvw_chat_message {
    const char* role;    /* "system", "user", "assistant", "tool", ...; NUL-terminated UTF-8 */
    const char* content; /* NUL-terminated UTF-8; NULL = "" */
} kvw_chat_message;

/* Renders a conversation into prompt text with the model's chat template
 * (GGUF tokenizer.chat_template, or kvw_engine_params.chat_template), as
 * Hugging Face's apply_chat_template does. A model file without a template
 * gets ChatML (the engine logs it at open).
 *   messages/n_messages: the conversation, read during the call only
 *     (messages may be NULL when n_messages is 0).
 *   add_generation_prompt: non-zero ends the text with the assistant's turn
 *     header, so the model answers.
 *   template_name: NULL or "" for the default template, or the <name> of a
 *     tokenizer.chat_template.<name> in the file (e.g. "tool_use").
 *   buf/buf_size/out_len: as kvw_detokenize: the text is written
 *     NUL-terminated, *out_len gets its length without the NUL; buf NULL
 *     and buf_size 0 is a size query; a buf_size below *out_len + 1 returns
 *     KVW_ERR_BUFFER_TOO_SMALL with *out_len set and buf untouched.
 *     (Templates that print the date render it anew on each call.)
 * The text holds the template's special tokens as text: submit it with
 * kvw_request_params.parse_special = 1, which also keeps BOS single when the
 * text starts with it.
 * Errors: KVW_ERR_INVALID_ARGUMENT for NULL or invalid UTF-8 arguments, an
 * unknown template_name, or a template that fails: one that raised (the
 * message is "chat template raised: " and the template's own text, e.g.
 * "System role not supported"), that exceeded the render limits (steps,
 * time, memory, recursion), or that does not parse.
 * Thread-safe; templates are rendered concurrently without locks. */
KVW_API int32_t kvw_chat_apply_template(kvw_engine* engine, const kvw_chat_message* messages,
                                        size_t n_messages, int32_t add_generation_prompt,
                                        const char* template_name, char* buf, size_t buf_size,
                                        size_t* out_len);

/* Tool calls and reasoning content, JSON in and out (docs/TOOLS.md), with
 * the server's logic: the tools rendered into the model's own template,
 * the tool-call format detected from it, the output parsed.
 * kvw_chat_prepare: request_json is the chat part of an OpenAI request
 *   body: {"messages", "tools", "tool_choice", "parallel_tool_calls",
 *   "reasoning_format" ("deepseek" or "none"), "chat_template_kwargs",
 *   "add_generation_prompt"}. It writes {"prompt": text to submit with
 *   parse_special = 1, "grammar": GBNF for kvw_request_params.grammar (a
 *   string when tool_choice is "required" or names a function, else null),
 *   "keep_tokens": [...], "parser": {...}}.
 * kvw_chat_parse: parser_json is the "parser" object (as JSON text) and
 *   text the generated output; it writes the assistant message {"role",
 *   "content" (null with tool calls and no text), "reasoning_content",
 *   "tool_calls": [{"id", "type": "function", "function": {"name",
 *   "arguments"}}]}. A reply with tool_calls finishes as "tool_calls".
 *   With "partial": true added to the parser object, text is read as the
 *   prefix of an output being streamed: markup that may still complete is
 *   held back, each result extends the previous one, and calls get no
 *   generated id (the caller assigns one when a call first appears).
 * buf/buf_size/out_len: as kvw_chat_apply_template (size query with NULL).
 * Errors: KVW_ERR_INVALID_ARGUMENT naming the problem (malformed tools,
 * clashing names, a tool_choice naming a missing tool, a schema keyword
 * the grammar cannot enforce, a template that raises).
 * Thread-safe. */
KVW_API int32_t kvw_chat_prepare(kvw_engine* engine, const char* request_json, char* buf,
                                 size_t buf_size, size_t* out_len);
KVW_API int32_t kvw_chat_parse(const char* parser_json, const char* text, char* buf,
                               size_t buf_size, size_t* out_len);

/* ---------------------------------------------------------------------- */
/* Requests                                                                */
/* ---------------------------------------------------------------------- */

typedef struct kvw_request_params {
    uint32_t struct_size;     /* sizeof(kvw_request_params) */
    int32_t max_tokens;       /* new tokens to generate:
                               *   > 0: at most that many;
                               *   0 (the default): KVW_DEFAULT_MAX_TOKENS (128);
                               *   KVW_MAX_TOKENS_UNLIMITED (-1): until the model
                               *     ends its generation (EOS/EOT) or the context
                               *     (max_context) is full;
                               *   any other negative value: KVW_ERR_INVALID_ARGUMENT.
                               * A request whose prompt leaves less room ends
                               * with KVW_FINISH_LENGTH at max_context. For a
                               * rejection as too long, kvw_error_info.requested
                               * counts max_tokens as given (max_context for -1). */
    float temperature;        /* 0 = greedy (default); finite, >= 0 */
    int32_t top_k;            /* 0 = off (default) */
    float top_p;              /* [0, 1]; 0 or 1 = off (default 1) */
    float min_p;              /* [0, 1]; 0 = off (default) */
    float repeat_penalty;     /* >= 0; 0 or 1 = off (default 1) */
    int32_t repeat_last_n;    /* penalty window; 0 = off (default), -1 = all */
    uint64_t seed;            /* sampling seed: the same seed (0 included)
                               * gives the same output. KVW_SEED_RANDOM
                               * (the default) draws a seed per request. */
    const char* tenant;       /* NULL = "" (default tenant). Scopes the prefix
                               * cache and quotas; set it from the embedding
                               * application's own notion of a user, never
                               * from untrusted request content. Copied. */
    const char* const* stop;  /* n_stop NUL-terminated stop strings; copied.
                               * The output ends before the first match. */
    uint32_t n_stop;          /* at most 16, each at most 256 bytes */
    int32_t no_bos;           /* bool: do not prepend BOS to the prompt */
    /* v2 (struct_size 72): */
    int32_t parse_special;    /* bool: special-token text in the prompt
                               * ("<|im_start|>", "<|eot_id|>") becomes the
                               * special token. Default 0: prompt text is
                               * untrusted and stays text. Set it for text
                               * from kvw_chat_apply_template. BOS is added
                               * only when the vocabulary asks for it
                               * (tokenizer.ggml.add_bos_token) and the
                               * prompt does not already start with it. */
    int32_t reserved1;        /* 0 */
    /* v3 (struct_size 88): */
    int32_t logprobs;         /* bool: record the log-probability of each generated
                               * token (kvw_request_logprobs). They are the model's:
                               * the log-softmax of the raw logits of each step,
                               * before the repetition penalty, temperature and
                               * the top-k/top-p/min-p filters (as OpenAI and
                               * llama-cpp-python report them). */
    int32_t top_logprobs;     /* 0 to KVW_MAX_TOP_LOGPROBS: also record that many
                               * most likely tokens of each step
                               * (kvw_request_top_logprobs); implies logprobs. */
    int32_t keep_logits;      /* bool: keep the raw logits (n_vocab floats) of the
                               * last step (kvw_request_logits). With max_tokens 1
                               * these are the logits after the prompt, as
                               * llama_get_logits gives them after a decode. */
    int32_t reserved2;        /* 0 */
    /* v4 (struct_size 104): constrained output. At most one of the two;
     * both NULL (the default) for free text. Copied. An invalid grammar
     * or schema is KVW_ERR_INVALID_ARGUMENT with reason
     * KVW_REJECT_INVALID_PARAMS and a message naming the line and column,
     * or the schema path and keyword (a keyword outside docs/GRAMMAR.md's
     * subset is named, never ignored). The request ends with
     * KVW_FINISH_STOP once the grammar is complete; when no token can
     * continue it, it fails with a message saying so. */
    const char* grammar;      /* GBNF (llama.cpp's format), NUL-terminated UTF-8 */
    const char* json_schema;  /* a JSON Schema (text): the output is JSON valid
                               * under it; {"type":"object"} for any object */
    /* v5 (struct_size 136): OpenAI's penalties and logit bias, and the
     * prompt's log-probabilities. Zero (the default) leaves each off. */
    float presence_penalty;   /* [-2, 2]: the logit of each token generated so
                               * far (not the prompt's) is lowered by this, once */
    float frequency_penalty;  /* [-2, 2]: ... and by this times its count */
    const int32_t* logit_bias_tokens; /* n_logit_bias token IDs in [0, n_vocab); copied */
    const float* logit_bias;  /* their biases, each in [-100, 100], added to the
                               * token's logit; -100 bans the token */
    uint32_t n_logit_bias;    /* at most KVW_MAX_LOGIT_BIAS */
    int32_t prompt_logprobs;  /* bool: also record the log-probability of each
                               * prompt token after the first
                               * (kvw_request_prompt_logprobs; with top_logprobs,
                               * kvw_request_prompt_top_logprobs). Costs a
                               * forward step per prompt token; such a prompt
                               * is computed, never taken from the prefix cache. */
    /* v6 (struct_size 152): control tokens to spell out. */
    const char* const* keep_tokens; /* n_keep_tokens NUL-terminated texts of
                               * vocabulary entries ("<|python_tag|>",
                               * "[TOOL_CALLS]") that would decode to nothing
                               * (control tokens): in this request's output they
                               * decode to their text, as llama.cpp's preserved
                               * tokens, so that a tool-call parser sees the
                               * markup. Pass kvw_chat_prepare's "keep_tokens".
                               * Texts that are not such an entry of this
                               * vocabulary change nothing. Copied. */
    uint32_t n_keep_tokens;   /* at most KVW_MAX_KEEP_TOKENS, each at most 256 bytes */
    int32_t reserved3;        /* 0 */
    /* v7 (struct_size 176): speculative decoding for this request,
     * replacing the engine's (kvw_engine_params v6; the fields mean the
     * same). NULL spec_type (the default) takes the engine's setting and
     * ignores the three numbers; "none" turns it off; "draft" needs the
     * engine's draft model. */
    const char* spec_type;
    int32_t spec_draft_max;
    int32_t spec_ngram_min;
    int32_t spec_ngram_max;
    int32_t reserved4;        /* 0 */
} kvw_request_params;

/* kvw_request_params.seed: no fixed seed. */
#define KVW_SEED_RANDOM UINT64_MAX
/* kvw_request_params.max_tokens: the default (0) and "until end of
 * generation or context" (-1). */
#define KVW_DEFAULT_MAX_TOKENS 128
#define KVW_MAX_TOKENS_UNLIMITED (-1)
/* The most alternatives kvw_request_params.top_logprobs may ask for. */
#define KVW_MAX_TOP_LOGPROBS 20
/* The most entries kvw_request_params.logit_bias may hold. */
#define KVW_MAX_LOGIT_BIAS 1024
/* The most texts kvw_request_params.keep_tokens may hold. */
#define KVW_MAX_KEEP_TOKENS 64

/* Defaults for kvw_request_params (struct_size set): greedy, max_tokens 0
 * (KVW_DEFAULT_MAX_TOKENS), seed KVW_SEED_RANDOM, no logprobs. Thread-safe.
 * kvw_request_default_params is inline: it passes this header's sizeof to
 * kvw_request_params_init_sized (see "Versioned structs"). */
KVW_API int32_t kvw_request_params_init_sized(kvw_request_params* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline kvw_request_params kvw_request_default_params(void) {
    kvw_request_params p;
    kvw_request_params_init_sized(&p, (uint32_t)sizeof p);
    return p;
}
#endif

/* Submits a request; generation starts in the background.
 *   prompt: NUL-terminated UTF-8, copied. Invalid UTF-8, an empty prompt
 *     (reason KVW_REJECT_EMPTY_PROMPT) and bad params (reason
 *     KVW_REJECT_INVALID_PARAMS) are KVW_ERR_INVALID_ARGUMENT.
 *   params: NULL for defaults; read during the call only.
 *   out_id: receives the request ID on success.
 * Admission failures return KVW_ERR_REJECTED (see kvw_last_error_info) and
 * create no request. A submitted request keeps its buffered output and
 * result until kvw_request_free (or engine close): pair every successful
 * kvw_submit with kvw_request_free. */
KVW_API int32_t kvw_submit(kvw_engine* engine, const char* prompt,
                           const kvw_request_params* params, uint64_t* out_id);

/* Submits a request whose prompt is token IDs, as llama_decode takes them:
 * used exactly as given (no BOS is added; params.no_bos and
 * params.parse_special do not apply). Otherwise as kvw_submit.
 *   tokens/n_tokens: at least one ID, each in [0, n_vocab); read during the
 *     call only. An ID outside the vocabulary is KVW_ERR_INVALID_ARGUMENT
 *     (reason KVW_REJECT_INVALID_PARAMS); n_tokens 0 is
 *     KVW_ERR_INVALID_ARGUMENT (reason KVW_REJECT_EMPTY_PROMPT).
 * Pair every successful call with kvw_request_free. Thread-safe. */
KVW_API int32_t kvw_submit_tokens(kvw_engine* engine, const int32_t* tokens, size_t n_tokens,
                                  const kvw_request_params* params, uint64_t* out_id);

/* Streams the next text of request id into buf (caller-owned).
 *   timeout_ms: < 0 waits without limit, 0 polls.
 *   Writes the text of the next generated token (of the tokens that
 *     complete one character when a token ends inside a UTF-8 character;
 *     text an earlier, too short buf could not take comes first): one
 *     token per call, as llama-server streams. As much of it as fits in
 *     buf_size - 1 bytes, cut at a UTF-8 character boundary, plus a
 *     NUL; *out_len gets the byte count without the NUL. Any buf_size >= 5
 *     always makes progress. If not even one character fits, returns
 *     KVW_ERR_BUFFER_TOO_SMALL with the pending byte count in *out_len and
 *     consumes nothing.
 *   *out_done is set to 1 when the request has ended and everything has
 *     been returned; the return value is then the request's final status:
 *     KVW_OK (finished: stop string, EOS or length), KVW_ERR_ABORTED,
 *     KVW_ERR_ISOLATION or KVW_ERR_INTERNAL. Calling again after done
 *     returns the same status with *out_len 0.
 *   Returns KVW_ERR_TIMEOUT (out_len 0, out_done 0) when nothing arrived in
 *     time, KVW_ERR_CLOSED when the engine is closed (also while the call
 *     waits), KVW_ERR_NOT_FOUND when the request is freed while it waits.
 * Several threads may call kvw_next on the same request; each piece of text
 * goes to exactly one of them. out_len and out_done are required; buf may be
 * NULL only with buf_size 0. With logprobs, kvw_next_logprobs gives the
 * log-probabilities of the tokens each call returned (see below). */
KVW_API int32_t kvw_next(kvw_engine* engine, uint64_t id, int32_t timeout_ms,
                         char* buf, size_t buf_size, size_t* out_len, int32_t* out_done);

/* Aborts request id at the next step boundary. Idempotent: aborting an
 * ended request returns KVW_OK and changes nothing. KVW_ERR_NOT_FOUND for
 * IDs this engine never issued or already freed. Does not free the request
 * (kvw_next then reports KVW_ERR_ABORTED). */
KVW_API int32_t kvw_abort(kvw_engine* engine, uint64_t id);

/* Frees request id: aborts it if it still runs and drops its buffered text
 * and result. Afterwards the ID returns KVW_ERR_NOT_FOUND everywhere.
 * Threads blocked in kvw_next on it return KVW_ERR_NOT_FOUND. (When
 * kvw_engine_close frees the requests, blocked kvw_next calls return
 * KVW_ERR_CLOSED instead.) */
KVW_API int32_t kvw_request_free(kvw_engine* engine, uint64_t id);

typedef enum kvw_finish_reason {
    KVW_FINISH_NONE = 0,     /* still running */
    KVW_FINISH_STOP = 1,     /* EOS or a stop string */
    KVW_FINISH_LENGTH = 2,   /* max_tokens or max_context reached */
    KVW_FINISH_ABORT = 3,
    KVW_FINISH_ERROR = 4,    /* status says which (isolation, internal) */
    KVW_FINISH_REJECTED = 5  /* kvw_generate only: admission refused it */
} kvw_finish_reason;

typedef struct kvw_result {
    uint32_t struct_size;       /* in: sizeof(kvw_result); out: bytes written */
    int32_t status;             /* final kvw_status; KVW_OK while running */
    int32_t finish_reason;      /* kvw_finish_reason */
    int32_t done;               /* bool */
    uint64_t engine_request_id; /* the engine's own ID (logs) */
    int32_t prompt_tokens;
    int32_t generated_tokens;
    int32_t cached_tokens;      /* prompt tokens served from the prefix cache */
    int32_t reject_reason;      /* kvw_reject_reason (KVW_FINISH_REJECTED) */
    int64_t limit;              /* KVW_REJECT_TOO_LONG: max_context */
    int64_t requested;          /* KVW_REJECT_TOO_LONG: tokens needed */
    double queued_ms;
    double ttft_ms;             /* submit to first token */
    double prefill_ms;
    double decode_ms;
    double prefill_tps;
    double decode_tps;
} kvw_result;

/* Zeroes the first size bytes of *out (caller-owned) and sets its struct_size;
 * kvw_result_init is inline and passes this header's sizeof (see "Versioned
 * structs"). Thread-safe. */
KVW_API int32_t kvw_result_init_sized(kvw_result* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline void kvw_result_init(kvw_result* out) {
    kvw_result_init_sized(out, (uint32_t)sizeof *out);
}
#endif

/* Writes the state of request id into *out (caller-owned; set struct_size).
 * Valid while the request runs (done 0) and after it ended. */
KVW_API int32_t kvw_request_result(kvw_engine* engine, uint64_t id, kvw_result* out);

/* Copies the token IDs of an ended request (done; see kvw_request_result)
 * into tokens: its prompt (which == KVW_TOKENS_PROMPT, BOS included) or its
 * generated tokens (KVW_TOKENS_GENERATED). Size-query pattern as in
 * kvw_tokenize. KVW_ERR_INVALID_ARGUMENT while the request still runs. */
#define KVW_TOKENS_PROMPT 0
#define KVW_TOKENS_GENERATED 1
KVW_API int32_t kvw_request_tokens(kvw_engine* engine, uint64_t id, int32_t which,
                                   int32_t* tokens, size_t capacity, size_t* out_n);

/* A token and its log-probability (natural log). Fixed layout (no
 * struct_size): it will never grow, so arrays of it stay compatible. */
typedef struct kvw_token_logprob {
    int32_t token;
    float logprob; /* -INFINITY for a token the model gives no probability */
} kvw_token_logprob;

/* Copies the log-probability of each generated token of an ended request
 * (one entry per token of KVW_TOKENS_GENERATED, in order) into out. Needs
 * kvw_request_params.logprobs or top_logprobs at submission; read them
 * before kvw_request_free (kvw_generate frees its request: submit with
 * kvw_submit or kvw_submit_tokens to read these). Size-query
 * pattern as in kvw_tokenize (out NULL and capacity 0 asks for the count).
 * Errors: KVW_ERR_INVALID_ARGUMENT while the request still runs, or when it
 * did not ask for logprobs; KVW_ERR_NOT_FOUND for an unknown or freed ID. */
KVW_API int32_t kvw_request_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out,
                                     size_t capacity, size_t* out_n);

/* Copies the most likely tokens of the step that generated token `index`
 * (0-based, as in kvw_request_logprobs) of an ended request into out, best
 * first (ties: lower ID first); at most top_logprobs of them. Size-query
 * pattern as above. Errors as kvw_request_logprobs, and
 * KVW_ERR_INVALID_ARGUMENT for an index past the generated tokens. */
KVW_API int32_t kvw_request_top_logprobs(kvw_engine* engine, uint64_t id, size_t index,
                                         kvw_token_logprob* out, size_t capacity, size_t* out_n);

/* Streaming logprobs: the log-probabilities of the tokens whose text the
 * latest kvw_next on request id returned, so that each piece of a stream
 * can carry its own (as llama-cpp-python's chunks do), without waiting for
 * the end. Needs kvw_request_params.logprobs or top_logprobs.
 *   Which tokens: each generated token belongs to exactly one kvw_next
 *     call, the one that returns the last byte of its text. A token whose
 *     text is empty or never returned (a character split across tokens
 *     waits for the token that completes it; text dropped by a stop
 *     string) belongs to the next call that returns text or done, the
 *     final call included. Usually one token per call; several when a
 *     call returns the text of several (a held stop-string prefix that
 *     turned out not to match), none when buf was too small for the
 *     token's whole text (it comes with the call that returns its end).
 *     Over a whole stream the records are those of kvw_request_logprobs,
 *     in order.
 *   Lifetime: every kvw_next on the request that returns text or done
 *     replaces the records (one returning KVW_ERR_TIMEOUT,
 *     KVW_ERR_BUFFER_TOO_SMALL or another error leaves them); a kvw_next
 *     after done leaves none. They are copied into out (caller-owned);
 *     nothing stays shared with the library.
 *   Threads: safe to call from any thread, also while another thread
 *     waits in kvw_next on the request (it does not wait for it). With
 *     several threads reading one request, "latest" is whichever kvw_next
 *     finished last: read them on the thread that called kvw_next, before
 *     its next kvw_next.
 * kvw_next_logprobs copies one entry per token (token, its logprob);
 * kvw_next_top_logprobs the most likely tokens of the step of the index-th
 * of them (best first, at most top_logprobs). Size-query pattern as in
 * kvw_tokenize (out NULL and capacity 0 asks for the count).
 * Errors: KVW_ERR_INVALID_ARGUMENT for a NULL out_n, out NULL with a
 * non-zero capacity, a request that did not ask for logprobs, or an index
 * past the records; KVW_ERR_NOT_FOUND for an unknown or freed request ID;
 * KVW_ERR_CLOSED for a closed engine. */
KVW_API int32_t kvw_next_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out,
                                  size_t capacity, size_t* out_n);
KVW_API int32_t kvw_next_top_logprobs(kvw_engine* engine, uint64_t id, size_t index,
                                      kvw_token_logprob* out, size_t capacity, size_t* out_n);

/* The prompt's log-probabilities (kvw_request_params.prompt_logprobs, v5):
 * one entry per prompt token after the first (the first has nothing before
 * it to be predicted from), in order: entry i is prompt token i+1, as
 * kvw_request_tokens(KVW_TOKENS_PROMPT) lists them. Size-query pattern as
 * kvw_request_logprobs. Errors as kvw_request_logprobs, KVW_ERR_INVALID_ARGUMENT
 * when the request did not set prompt_logprobs. */
KVW_API int32_t kvw_request_prompt_logprobs(kvw_engine* engine, uint64_t id, kvw_token_logprob* out,
                                            size_t capacity, size_t* out_n);

/* The most likely tokens at prompt position index + 1 (index as in
 * kvw_request_prompt_logprobs), best first, at most top_logprobs of them.
 * Errors as kvw_request_prompt_logprobs, and KVW_ERR_INVALID_ARGUMENT for an
 * index past them. */
KVW_API int32_t kvw_request_prompt_top_logprobs(kvw_engine* engine, uint64_t id, size_t index,
                                                kvw_token_logprob* out, size_t capacity, size_t* out_n);

/* Copies the raw logits (n_vocab floats) of the last step of an ended
 * request into out: the step that produced its last token, or the
 * end-of-generation token that stopped it. Needs
 * kvw_request_params.keep_logits. Size-query pattern as above; *out_n is
 * 0 when the request ended before any step (e.g. aborted while waiting).
 * Errors as kvw_request_logprobs. */
KVW_API int32_t kvw_request_logits(kvw_engine* engine, uint64_t id, float* out, size_t capacity,
                                   size_t* out_n);

/* ---------------------------------------------------------------------- */
/* Saved state                                                             */
/* ---------------------------------------------------------------------- */

/* A saved state is a sequence's tokens (its prompt and generated tokens)
 * sealed to the engine's model: the bytes carry a fingerprint of the model
 * (its configuration, metadata, vocabulary and samples of its weights) and
 * a MAC over everything, so a state is only ever loaded by an engine that
 * runs the same model, and a damaged or altered one is refused. The bytes
 * are opaque, portable between processes and machines, and safe to store.
 * A state holds no KV: continue a sequence by submitting the loaded tokens
 * (kvw_submit_tokens) followed by the new ones; the KV of the loaded part
 * comes from the tenant's prefix cache when its pages are still cached
 * (same engine and tenant), and is computed again otherwise. The output is
 * the same either way. */

/* Seals n tokens (each in [0, n_vocab), n >= 1) into buf. Size-query
 * pattern: buf NULL and buf_size 0 writes the size to *out_size and returns
 * KVW_OK; a smaller buf_size returns KVW_ERR_BUFFER_TOO_SMALL with the size
 * in *out_size and buf untouched. Thread-safe. */
KVW_API int32_t kvw_state_save(kvw_engine* engine, const int32_t* tokens, size_t n,
                               uint8_t* buf, size_t buf_size, size_t* out_size);

/* kvw_state_save of an ended request's sequence: its prompt tokens (BOS
 * included) followed by its generated tokens. KVW_ERR_INVALID_ARGUMENT
 * while it still runs. */
KVW_API int32_t kvw_request_state_save(kvw_engine* engine, uint64_t id, uint8_t* buf,
                                       size_t buf_size, size_t* out_size);

/* Checks a saved state and copies its tokens into tokens. Size-query
 * pattern as in kvw_tokenize (the state is checked by every call).
 * Errors: KVW_ERR_INVALID_ARGUMENT, with the message saying which, for a
 * state saved with another model ("saved state is from another model"),
 * and for bytes that are not a state, are cut short, or were altered
 * ("invalid saved state"). Thread-safe. */
KVW_API int32_t kvw_state_load(kvw_engine* engine, const uint8_t* state, size_t size,
                               int32_t* tokens, size_t capacity, size_t* out_n);

/* Called by kvw_generate on the calling thread for each piece of text as it
 * is generated. piece is NUL-terminated (len bytes) and valid only during
 * the call. Return 0 to continue, non-zero to stop: the request is aborted,
 * the callback is not called again, and kvw_generate returns
 * KVW_ERR_ABORTED (finish reason KVW_FINISH_ABORT) even if the request had
 * already finished meanwhile; buf then holds exactly the pieces delivered,
 * the one that asked to stop included. */
typedef int32_t (*kvw_piece_callback)(const char* piece, size_t len, void* user_data);

/* Blocking generation: submits, waits for the end, and frees the request.
 *   on_piece/user_data: optional streaming callback (see above).
 *   buf/buf_size: optional (NULL/0) caller-owned buffer for the whole text,
 *     NUL-terminated. *out_len (optional) receives the full length. If the
 *     text does not fit, buf holds as much as fits (cut at a character
 *     boundary) and the call returns KVW_ERR_BUFFER_TOO_SMALL after the
 *     generation finished; use the callback to collect long outputs.
 *   out_result: optional; filled also for rejections (finish_reason
 *     KVW_FINISH_REJECTED with limit/requested) and aborts.
 * Returns the request's final status like kvw_next, KVW_ERR_ABORTED when
 * the callback asked to stop. */
KVW_API int32_t kvw_generate(kvw_engine* engine, const char* prompt,
                             const kvw_request_params* params,
                             kvw_piece_callback on_piece, void* user_data,
                             char* buf, size_t buf_size, size_t* out_len,
                             kvw_result* out_result);

/* ---------------------------------------------------------------------- */
/* Stats                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct kvw_stats {
    uint32_t struct_size;       /* in: sizeof(kvw_stats); out: bytes written */
    int32_t reserved0;
    /* KV page pool, now */
    int64_t pool_pages;
    int64_t pool_free;
    int64_t pool_owned;
    int64_t pool_sealed;
    int64_t pool_releasing;
    int64_t pool_quarantined;
    int64_t step_leases;
    int64_t copy_leases;
    int64_t prefix_leases;
    /* KV page pool, since start */
    uint64_t page_allocs;
    uint64_t page_releases;
    uint64_t page_scrubs;
    uint64_t deferred_releases;
    uint64_t deferred_freed;
    uint64_t deferred_quarantined;
    uint64_t checksum_failures;
    uint64_t isolation_violations;
    uint64_t stale_completions;
    int64_t host_tier_used_bytes;
    int64_t host_tier_capacity_bytes;
    /* Engine, now */
    int64_t waiting;
    int64_t running;
    int64_t swapped;
    /* Engine, since start */
    uint64_t submitted;
    uint64_t admitted;
    uint64_t rejected;          /* all reasons */
    uint64_t finished;          /* all finish reasons, aborts included */
    uint64_t aborted;
    uint64_t isolation_failures; /* any non-zero value is an incident */
    uint64_t prompt_tokens;
    uint64_t generated_tokens;
    uint64_t cached_tokens;
    uint64_t steps;
    uint64_t preemptions;
    uint64_t prefix_hits;
    uint64_t prefix_misses;
    double ttft_mean_ms;
    double step_mean_ms;
    /* v2 (struct_size 400; v1 was 312): the sealed tiers below the pool.
     * A seal failure is a copy that failed its authentication tag (torn,
     * corrupted, another key, an erased tenant): a miss, never data. */
    uint64_t host_seal_failures;  /* host-tier copies */
    int64_t disk_used_bytes;      /* disk tier (kv_disk_dir); all zero without one */
    int64_t disk_budget_bytes;
    int64_t disk_files;
    uint64_t disk_writes;         /* pages written */
    uint64_t disk_hits;           /* pages read back and served */
    uint64_t disk_seal_failures;  /* files that failed their tag or could not be read: deleted, misses */
    uint64_t disk_evictions;      /* files deleted to stay under the budget */
    uint64_t disk_erased;         /* files deleted by kvw_tenant_erase_kv */
    uint64_t disk_skipped;        /* pages not written: the writer was busy, or no room */
    uint64_t disk_write_errors;   /* writes that failed (full disk, I/O errors): misses later */
    /* v3 (struct_size 424; v2 was 400): speculative decoding. */
    uint64_t spec_steps;          /* sequence steps that verified a draft */
    uint64_t spec_drafted;        /* draft tokens verified */
    uint64_t spec_accepted;       /* draft tokens accepted (the rest cost compute only) */
} kvw_stats;

/* Zeroes the first size bytes of *out (caller-owned) and sets its struct_size;
 * kvw_stats_init is inline and passes this header's sizeof (see "Versioned
 * structs"). Thread-safe. */
KVW_API int32_t kvw_stats_init_sized(kvw_stats* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline void kvw_stats_init(kvw_stats* out) {
    kvw_stats_init_sized(out, (uint32_t)sizeof *out);
}
#endif

/* Snapshot of the engine's and its KV pool's metrics into *out. */
KVW_API int32_t kvw_engine_stats(kvw_engine* engine, kvw_stats* out);

/* ---------------------------------------------------------------------- */
/* KV erasure                                                              */
/* ---------------------------------------------------------------------- */

/* What kvw_tenant_erase_kv erased. Versioned output struct. */
typedef struct kvw_erase_result {
    uint32_t struct_size;         /* sizeof(kvw_erase_result) */
    int32_t reserved0;
    uint64_t key_epoch;           /* the tenant's key epoch from now on */
    int64_t prefix_device_pages;  /* prefix-cache pages dropped from the device pool */
    int64_t prefix_host_pages;    /* prefix-cache entries dropped from the host tier */
    int64_t host_pages;           /* host-tier copies of the tenant's (prefix spills and
                                     swapped requests), all unreadable from now on */
    int64_t host_bytes;
    /* v2 (struct_size 64; v1 was 48): */
    int64_t disk_files;           /* the tenant's disk tier files deleted (kv_disk_dir) */
    int64_t disk_bytes;
} kvw_erase_result;

/* Zeroes the first size bytes of *out (caller-owned) and sets its struct_size;
 * kvw_erase_result_init is inline and passes this header's sizeof (see "Versioned
 * structs"). Thread-safe. */
KVW_API int32_t kvw_erase_result_init_sized(kvw_erase_result* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline void kvw_erase_result_init(kvw_erase_result* out) {
    kvw_erase_result_init_sized(out, (uint32_t)sizeof *out);
}
#endif

/* Crypto-erases tenant's cached KV: rotates the tenant's key epoch, so every
 * page of the tenant's outside the device pool (host and disk tiers) is
 * unreadable at once (a restore of one is a miss, computed again), and drops
 * the tenant's prefix-cache pages on the device, in the host tier and on
 * disk (the files are deleted in the background). A running request
 * of the tenant keeps its own pages until it ends. tenant: NUL-terminated
 * UTF-8 ("" is the default tenant of kvw_request_params.tenant NULL). out
 * may be NULL. Waits for the scheduler's next step boundary. Errors:
 * KVW_ERR_INVALID_ARGUMENT (NULL tenant, not UTF-8, over 1024 bytes),
 * KVW_ERR_CLOSED. Thread-safe. */
KVW_API int32_t kvw_tenant_erase_kv(kvw_engine* engine, const char* tenant, kvw_erase_result* out);

/* ---------------------------------------------------------------------- */
/* Embeddings and reranking                                                */
/* ---------------------------------------------------------------------- */

/* Pooling (the values of GGUF's <arch>.pooling_type). KVW_POOLING_MODEL
 * takes the model's; a model without one (a generative model) is refused
 * with KVW_ERR_INVALID_ARGUMENT unless a pooling is named. kvw_embed does
 * not take KVW_POOLING_NONE (per-token vectors: kvw_embed_tokens) or
 * KVW_POOLING_RANK (use kvw_rerank). */
#define KVW_POOLING_MODEL (-1)
#define KVW_POOLING_NONE 0
#define KVW_POOLING_MEAN 1
#define KVW_POOLING_CLS 2
#define KVW_POOLING_LAST 3
#define KVW_POOLING_RANK 4

typedef struct kvw_embed_params {
    uint32_t struct_size; /* sizeof(kvw_embed_params) */
    int32_t pooling;      /* KVW_POOLING_* (default KVW_POOLING_MODEL) */
    int32_t normalize;    /* non-zero (default): unit L2 norm; 0: as pooled */
    int32_t dimensions;   /* 0 (default): the model's width; else the first
                           * dimensions values (Matryoshka), renormalized */
    int32_t truncate;     /* non-zero: cut an input longer than the engine
                           * takes instead of refusing it (KVW_ERR_REJECTED) */
    int32_t reserved;     /* 0 */
    const char* tenant;   /* quota scope; NULL = "" */
} kvw_embed_params;

/* Defaults for kvw_embed_params (struct_size set). Thread-safe.
 * kvw_embed_default_params is inline: it passes this header's sizeof to
 * kvw_embed_params_init_sized (see "Versioned structs"). */
KVW_API int32_t kvw_embed_params_init_sized(kvw_embed_params* out, uint32_t size);
#ifndef KVW_BUILDING_LIBRARY
static inline kvw_embed_params kvw_embed_default_params(void) {
    kvw_embed_params p;
    kvw_embed_params_init_sized(&p, (uint32_t)sizeof p);
    return p;
}
#endif

/* Embeds n_inputs NUL-terminated UTF-8 texts, each one request of the
 * engine (admission, tenant quota, batching and page isolation as for
 * generation; an input's vector does not depend on what else runs).
 *   out/capacity: caller-owned floats, written row-major: input i at
 *     out[i * *out_dim]. Size query: out NULL and capacity 0 returns KVW_OK
 *     with *out_n = n_inputs * dim and *out_dim = dim, computing nothing.
 *     A capacity below that is KVW_ERR_BUFFER_TOO_SMALL (nothing computed).
 *   out_n (required), out_dim (may be NULL).
 *   params may be NULL (defaults).
 * Errors: KVW_ERR_INVALID_ARGUMENT (NULL or empty input, a model without
 * pooling, dimensions larger than the model's; the message names the input
 * index), KVW_ERR_REJECTED (too long, quota, overloaded). */
KVW_API int32_t kvw_embed(kvw_engine* engine, const char* const* inputs, size_t n_inputs,
                          const kvw_embed_params* params, float* out, size_t capacity,
                          size_t* out_n, int32_t* out_dim);

/* Per-token embeddings (pooling none, as llama.cpp's
 * LLAMA_POOLING_TYPE_NONE): every token's final hidden state for each of
 * n_inputs texts, each vector normalized unless params->normalize is 0
 * (params->dimensions applies per vector). params->pooling must be
 * KVW_POOLING_MODEL or KVW_POOLING_NONE (both mean none here); a
 * generative model is accepted.
 *   out/capacity: caller-owned floats: input after input, token after
 *     token, *out_dim values each (*out_n in all).
 *   token_counts: n_inputs entries (may be NULL): input i's tokens (after
 *     BOS/EOS and truncation), so input i starts at out[dim * (sum of the
 *     counts before i)].
 *   Size query: out NULL and capacity 0 tokenizes the inputs (computing
 *     nothing) and sets *out_n, *out_dim and token_counts. A capacity
 *     below *out_n is KVW_ERR_BUFFER_TOO_SMALL (nothing computed).
 * Errors as kvw_embed's. */
KVW_API int32_t kvw_embed_tokens(kvw_engine* engine, const char* const* inputs, size_t n_inputs,
                                 const kvw_embed_params* params, float* out, size_t capacity,
                                 size_t* out_n, int32_t* out_dim, size_t* token_counts);

/* Scores n_documents documents against query with a cross-encoder (a model
 * with pooling rank and a classification head): scores[i] is document i's
 * relevance (a logit, as llama-server reports it), in input order. Size
 * query: scores NULL and capacity 0 returns KVW_OK with *out_n =
 * n_documents. tenant may be NULL.
 * Errors: KVW_ERR_INVALID_ARGUMENT (empty query or document, a model that
 * cannot rerank), KVW_ERR_REJECTED (too long, quota). */
KVW_API int32_t kvw_rerank(kvw_engine* engine, const char* query, const char* const* documents,
                           size_t n_documents, const char* tenant, float* scores, size_t capacity,
                           size_t* out_n);

/* PTX/CUDA: device selection is kvw_engine_params.device; nothing CUDA
 * specific is exposed in this header. */

#ifdef __cplusplus
}
#endif

#endif /* KVWARDEN_H */
