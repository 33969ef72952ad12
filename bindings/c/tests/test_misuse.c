#define _DEFAULT_SOURCE /* usleep */
/* Misuse test: every wrong call returns a specific status, never crashes,
 * and leaves valid handles valid. Uses the built-in model (no files). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "test_util.h"

static atomic_int log_calls;
static atomic_int log_after_close;
static atomic_int closed_flag;
static int log_token;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_log[256];
static int32_t first_log_level = -1;

static void on_log(int32_t level, const char* msg, void* ud) {
    if (ud != &log_token || msg == NULL) abort();
    pthread_mutex_lock(&log_mu);
    if (first_log_level < 0 && level == KVW_LOG_INFO) {
        first_log_level = level;
        snprintf(first_log, sizeof first_log, "%s", msg);
    }
    pthread_mutex_unlock(&log_mu);
    atomic_fetch_add(&log_calls, 1);
    if (atomic_load(&closed_flag)) atomic_fetch_add(&log_after_close, 1);
}

static int32_t stop_at_once(const char* piece, size_t len, void* ud) {
    (void)piece;
    (void)len;
    (*(int*)ud)++;
    return 1;
}

/* Stops at the first piece, but only after the request has finished on
 * its own (kvw_engine_stats counts it), the case that used to end KVW_OK
 * with finish reason length and text the callback never saw. */
struct late_stop {
    kvw_engine* eng;
    uint64_t finished_before;
    int calls;
    int saw_finish;
    char first[64];
};

static int32_t stop_after_finish(const char* piece, size_t len, void* ud) {
    struct late_stop* ls = ud;
    if (ls->calls++ == 0) snprintf(ls->first, sizeof ls->first, "%.*s", (int)len, piece);
    for (int i = 0; i < 20000 && !ls->saw_finish; i++) { /* at most ~20 s */
        kvw_stats s;
        kvw_stats_init(&s);
        if (kvw_engine_stats(ls->eng, &s) == KVW_OK && s.finished > ls->finished_before) ls->saw_finish = 1;
        else usleep(1000);
    }
    return 1;
}

static void* other_thread(void* arg) {
    /* The last error is per thread: this thread has had no failure. */
    int* ok = arg;
    *ok = strcmp(kvw_last_error(), "") == 0;
    kvw_error_info info = {sizeof info, 0, 0, 0, 0, 0, 0};
    kvw_last_error_info(&info);
    *ok = *ok && info.status == KVW_OK;
    /* and a failure here does not change the main thread's */
    kvw_engine_close(NULL);
    return NULL;
}

static void test_open(void) {
    kvw_engine* e = (kvw_engine*)0x1;
    CHECK_ST(kvw_engine_open(NULL, NULL, NULL), KVW_ERR_INVALID_ARGUMENT);

    kvw_engine_params p = kvw_engine_default_params();
    p.struct_size = 0;
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "struct_size") != NULL);
    p.struct_size = 12;
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);
    p.struct_size = sizeof p + 8; /* built against a newer header */
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "newer") != NULL);
    CHECK(e == (kvw_engine*)0x1); /* untouched on failure */

    p = kvw_engine_default_params();
    p.kv_checksum = 99;
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);
    p = kvw_engine_default_params();
    p.max_seqs = -1;
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);

    /* Startup check: max_context larger than the pool can hold. */
    p = kvw_engine_default_params();
    p.page_size = 16;
    p.kv_pages = 4;
    p.max_context = 1000;
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "1000") != NULL);

    CHECK_ST(kvw_engine_open("/nonexistent/model.gguf", NULL, &e), KVW_ERR_IO);
    CHECK(strstr(kvw_last_error(), "nonexistent") != NULL);
    CHECK_ST(kvw_engine_open("\xff\xfe", NULL, &e), KVW_ERR_INVALID_ARGUMENT);

    /* A readable GGUF of an architecture kvwarden does not run: GGUF v3,
     * no tensors, one key general.architecture = "mamba". */
    {
        static const unsigned char gguf[] = {
            'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
            20, 0, 0, 0, 0, 0, 0, 0, 'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'a', 'r', 'c', 'h',
            'i', 't', 'e', 'c', 't', 'u', 'r', 'e', 8, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,
            'm', 'a', 'm', 'b', 'a'};
        char path[] = "/tmp/kvw_unsupported_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        CHECK(write(fd, gguf, sizeof gguf) == (ssize_t)sizeof gguf);
        close(fd);
        CHECK_ST(kvw_engine_open(path, NULL, &e), KVW_ERR_UNSUPPORTED);
        CHECK(strstr(kvw_last_error(), "mamba") != NULL);
        CHECK(strcmp(kvw_status_string(KVW_ERR_UNSUPPORTED), "KVW_ERR_UNSUPPORTED") == 0);
        unlink(path);
    }

    /* An older, smaller params struct: fields beyond it take defaults,
     * whatever garbage follows in memory. */
    union {
        kvw_engine_params p;
        unsigned char bytes[sizeof(kvw_engine_params)];
    } old;
    memset(old.bytes, 0xAB, sizeof old.bytes);
    old.p.struct_size = 8; /* struct_size + page_size only */
    old.p.page_size = 16;
    e = NULL;
    CHECK_ST(kvw_engine_open(NULL, &old.p, &e), KVW_OK);
    if (e) CHECK_ST(kvw_engine_close(e), KVW_OK);
    /* Version 1 (112 bytes, up to log_user_data): the fields appended since
     * (n_threads among them) take their defaults whatever follows in
     * memory (0xABABABAB would be a negative n_threads). */
    const size_t v1 = offsetof(kvw_engine_params, log_user_data) + sizeof(void*);
    CHECK(v1 == 112);
    old.p = kvw_engine_default_params();
    memset(old.bytes + v1, 0xAB, sizeof old.bytes - v1);
    old.p.struct_size = (uint32_t)v1;
    e = NULL;
    CHECK_ST(kvw_engine_open(NULL, &old.p, &e), KVW_OK);
    if (e) CHECK_ST(kvw_engine_close(e), KVW_OK);

    /* A v3 struct (128 bytes, before kv_type): kv_type takes its default
     * whatever follows. */
    old.p = kvw_engine_default_params();
    memset(old.bytes + offsetof(kvw_engine_params, kv_type), 0xAB,
           sizeof old.bytes - offsetof(kvw_engine_params, kv_type));
    old.p.struct_size = offsetof(kvw_engine_params, kv_type);
    old.p.kv_memory_bytes = 4 << 20;
    e = NULL;
    CHECK_ST(kvw_engine_open(NULL, &old.p, &e), KVW_OK);
    if (e) CHECK_ST(kvw_engine_close(e), KVW_OK);

    /* kv_type: "f16" (default) or "f32"; anything else is refused. */
    kvw_engine_params kp = kvw_engine_default_params();
    kp.kv_memory_bytes = 4 << 20;
    kp.kv_type = "q8";
    CHECK_ST(kvw_engine_open(NULL, &kp, &e), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "KV type") != NULL);
    kp.kv_type = "f32";
    e = NULL;
    CHECK_ST(kvw_engine_open(NULL, &kp, &e), KVW_OK);
    if (e) CHECK_ST(kvw_engine_close(e), KVW_OK);
    /* The block-quantized types run on the CPU (the built-in model's head
     * dim is 32). */
    kp.kv_type = "q8_0";
    kp.device = "cpu";
    e = NULL;
    CHECK_ST(kvw_engine_open(NULL, &kp, &e), KVW_OK);
    if (e) CHECK_ST(kvw_engine_close(e), KVW_OK);
}

static void test_handles(kvw_engine* eng) {
    int32_t n = 0;
    CHECK_ST(kvw_engine_close(NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_engine_max_context((kvw_engine*)(uintptr_t)0x1234, &n), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_engine_max_context((kvw_engine*)&n, &n), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_engine_max_context(eng, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_engine_max_context(eng, &n), KVW_OK);
    CHECK(n > 0);
    CHECK_ST(kvw_vocab_info(eng, NULL, NULL, NULL), KVW_OK);

    kvw_stats s;
    CHECK_ST(kvw_engine_stats(eng, NULL), KVW_ERR_INVALID_ARGUMENT);
    s.struct_size = 3;
    CHECK_ST(kvw_engine_stats(eng, &s), KVW_ERR_INVALID_ARGUMENT);
    kvw_stats_init(&s);
    CHECK_ST(kvw_engine_stats(eng, &s), KVW_OK);
    CHECK(s.pool_pages > 0 && s.struct_size == sizeof s);
    /* A smaller (older) output struct gets only its prefix written. */
    struct {
        kvw_stats s;
        uint64_t canary;
    } small;
    memset(&small, 0x5A, sizeof small);
    small.s.struct_size = 16;
    CHECK_ST(kvw_engine_stats(eng, &small.s), KVW_OK);
    CHECK(small.s.struct_size == 16 && small.s.pool_pages > 0);
    CHECK(small.s.pool_free == (int64_t)0x5A5A5A5A5A5A5A5ALL && small.canary == 0x5A5A5A5A5A5A5A5AULL);

    CHECK_ST(kvw_last_error_info(NULL), KVW_ERR_INVALID_ARGUMENT);
}

static void test_tokens(kvw_engine* eng) {
    size_t n = 0;
    int32_t toks[4] = {-7, -7, -7, -7};
    CHECK_ST(kvw_tokenize(eng, NULL, 1, NULL, 0, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_tokenize(eng, "hi", 1, NULL, 0, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_tokenize(eng, "hi", 1, NULL, 5, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_tokenize(eng, "bad \xc3\x28 utf8", 1, NULL, 0, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "UTF-8") != NULL && strstr(kvw_last_error(), "offset 4") != NULL);
    CHECK_ST(kvw_tokenize(eng, "hello world", 1, NULL, 0, &n), KVW_OK);
    CHECK(n > 4);
    size_t need = n;
    CHECK_ST(kvw_tokenize(eng, "hello world", 1, toks, 4, &n), KVW_ERR_BUFFER_TOO_SMALL);
    CHECK(n == need && toks[0] == -7);
    int32_t* all = calloc(need, sizeof *all);
    CHECK_ST(kvw_tokenize(eng, "hello world", 1, all, need, &n), KVW_OK);

    char buf[64];
    size_t len = 0;
    CHECK_ST(kvw_detokenize(eng, all, need, NULL, 0, &len), KVW_OK);
    CHECK(len == strlen("hello world"));
    CHECK_ST(kvw_detokenize(eng, all, need, buf, len, &len), KVW_ERR_BUFFER_TOO_SMALL); /* no room for NUL */
    CHECK_ST(kvw_detokenize(eng, all, need, buf, sizeof buf, &len), KVW_OK);
    CHECK(strcmp(buf, "hello world") == 0);
    int32_t bad[2] = {all[1], 1 << 30};
    CHECK_ST(kvw_detokenize(eng, bad, 2, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
    bad[1] = -1;
    CHECK_ST(kvw_detokenize(eng, bad, 2, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_detokenize(eng, NULL, 3, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_detokenize(eng, NULL, 0, buf, sizeof buf, &len), KVW_OK);
    CHECK(len == 0 && buf[0] == 0);
    free(all);
}

static void test_submit(kvw_engine* eng) {
    uint64_t id = 0;
    kvw_request_params rp = kvw_request_default_params();
    kvw_error_info info = {sizeof info, 0, 0, 0, 0, 0, 0};

    CHECK_ST(kvw_submit(eng, NULL, NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_submit(eng, "hi", NULL, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_submit(eng, "\x80", NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_submit(eng, "", NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    kvw_last_error_info(&info);
    CHECK(info.status == KVW_ERR_INVALID_ARGUMENT && info.reason == KVW_REJECT_EMPTY_PROMPT);

    rp.temperature = -1.0f;
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    kvw_last_error_info(&info);
    CHECK(info.reason == KVW_REJECT_INVALID_PARAMS);
    rp = kvw_request_default_params();
    rp.temperature = 0.8f;
    rp.top_p = 1.5f;
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    rp = kvw_request_default_params();
    rp.max_tokens = -5;
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    rp = kvw_request_default_params();
    rp.n_stop = 2; /* stop NULL */
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    const char* stops[2] = {"ok", NULL};
    rp.stop = stops;
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    stops[1] = "\xff";
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    rp.n_stop = 1000;
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    rp = kvw_request_default_params();
    rp.tenant = "\xfe";
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    rp = kvw_request_default_params();
    rp.struct_size = 4;
    CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);

    /* Too long for max_context: rejected with both numbers. */
    int32_t max_ctx = 0;
    REQUIRE_OK(kvw_engine_max_context(eng, &max_ctx));
    size_t L = (size_t)max_ctx + 10;
    char* lp = malloc(L + 1);
    memset(lp, 'x', L);
    lp[L] = 0;
    CHECK_ST(kvw_submit(eng, lp, NULL, &id), KVW_ERR_REJECTED);
    kvw_last_error_info(&info);
    CHECK(info.status == KVW_ERR_REJECTED && info.reason == KVW_REJECT_TOO_LONG);
    CHECK(info.limit == max_ctx && info.requested > info.limit && info.prompt_tokens > max_ctx);
    /* requested = prompt + max_tokens (the default 128 here), as documented */
    CHECK(info.requested == info.prompt_tokens + 128);
    kvw_result res;
    kvw_result_init(&res);
    rp = kvw_request_default_params();
    rp.max_tokens = 7;
    CHECK_ST(kvw_generate(eng, lp, &rp, NULL, NULL, NULL, 0, NULL, &res), KVW_ERR_REJECTED);
    CHECK(res.finish_reason == KVW_FINISH_REJECTED && res.limit == max_ctx && res.requested > max_ctx);
    CHECK(res.reject_reason == KVW_REJECT_TOO_LONG && res.requested == res.prompt_tokens + 7);
    free(lp);

    /* Thread-local last error. */
    int other_ok = 0;
    pthread_t t;
    pthread_create(&t, NULL, other_thread, &other_ok);
    pthread_join(t, NULL);
    CHECK(other_ok);
    kvw_last_error_info(&info);
    CHECK(info.status == KVW_ERR_REJECTED); /* unchanged by the other thread */
    kvw_clear_error();
    CHECK(strcmp(kvw_last_error(), "") == 0);

    /* An older, smaller request params struct (up to repeat_last_n). */
    union {
        kvw_request_params p;
        unsigned char bytes[sizeof(kvw_request_params)];
    } old;
    memset(old.bytes, 0xEE, sizeof old.bytes);
    old.p = kvw_request_default_params();
    memset(&old.p.seed, 0xEE, sizeof old.p - offsetof(kvw_request_params, seed));
    old.p.struct_size = offsetof(kvw_request_params, seed);
    old.p.max_tokens = 3;
    CHECK_ST(kvw_submit(eng, "hi", &old.p, &id), KVW_OK);

    /* Stream request misuse. */
    char buf[64];
    size_t len = 99;
    int32_t done = 7;
    CHECK_ST(kvw_next(eng, id + 1000000, 0, buf, sizeof buf, &len, &done), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_next(eng, id, 0, buf, sizeof buf, NULL, &done), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_next(eng, id, 0, NULL, 10, &len, &done), KVW_ERR_INVALID_ARGUMENT);
    /* Drain with a 1-byte buffer: nothing fits, size reported, nothing lost. */
    int32_t st;
    size_t total = 0;
    for (int i = 0; i < 10000; i++) {
        st = kvw_next(eng, id, 1000, buf, 1, &len, &done);
        if (st == KVW_ERR_BUFFER_TOO_SMALL) {
            CHECK(len > 0);
            st = kvw_next(eng, id, 1000, buf, sizeof buf, &len, &done);
            total += len;
        }
        if (st != KVW_OK && st != KVW_ERR_TIMEOUT) break;
        if (done) break;
    }
    CHECK(done == 1);
    kvw_result_init(&res);
    CHECK_ST(kvw_request_result(eng, id, &res), KVW_OK);
    CHECK(res.done && res.generated_tokens <= 3 && res.generated_tokens >= 1);
    CHECK(res.finish_reason == KVW_FINISH_LENGTH || res.finish_reason == KVW_FINISH_STOP);
    res.struct_size = 5;
    CHECK_ST(kvw_request_result(eng, id, &res), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_request_result(eng, id, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_request_tokens(eng, id, KVW_TOKENS_GENERATED, NULL, 0, &len), KVW_OK);
    CHECK(len == (size_t)res.generated_tokens);
    CHECK_ST(kvw_request_tokens(eng, id, 9, NULL, 0, &len), KVW_ERR_INVALID_ARGUMENT);
    /* after done, kvw_next keeps answering done */
    CHECK_ST(kvw_next(eng, id, 0, buf, sizeof buf, &len, &done), KVW_OK);
    CHECK(done == 1 && len == 0);
    CHECK_ST(kvw_abort(eng, id), KVW_OK); /* ended: no-op */
    CHECK_ST(kvw_request_free(eng, id), KVW_OK);
    CHECK_ST(kvw_request_free(eng, id), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_next(eng, id, 0, buf, sizeof buf, &len, &done), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_abort(eng, id), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_abort(eng, 0), KVW_ERR_NOT_FOUND);

    /* Abort, then the stream ends with KVW_ERR_ABORTED, repeatedly. */
    rp = kvw_request_default_params();
    rp.max_tokens = 500;
    REQUIRE_OK(kvw_submit(eng, "abort me", &rp, &id));
    CHECK_ST(kvw_abort(eng, id), KVW_OK);
    CHECK_ST(kvw_abort(eng, id), KVW_OK);
    for (;;) {
        st = kvw_next(eng, id, 5000, buf, sizeof buf, &len, &done);
        if (st != KVW_OK || done) break;
    }
    CHECK(st == KVW_ERR_ABORTED && done == 1);
    CHECK_ST(kvw_next(eng, id, 0, buf, sizeof buf, &len, &done), KVW_ERR_ABORTED);
    kvw_result_init(&res);
    CHECK_ST(kvw_request_result(eng, id, &res), KVW_OK);
    CHECK(res.done && res.status == KVW_ERR_ABORTED && res.finish_reason == KVW_FINISH_ABORT);
    CHECK_ST(kvw_request_free(eng, id), KVW_OK);

    /* Free while running. */
    REQUIRE_OK(kvw_submit(eng, "free me", &rp, &id));
    CHECK_ST(kvw_request_free(eng, id), KVW_OK);

    /* kvw_generate: truncation into a small buffer, callback abort. */
    char small[8];
    memset(small, 'Z', sizeof small);
    size_t full = 0;
    rp.max_tokens = 40;
    st = kvw_generate(eng, "truncate", &rp, NULL, NULL, small, sizeof small, &full, NULL);
    CHECK(st == KVW_ERR_BUFFER_TOO_SMALL || (st == KVW_OK && full < sizeof small));
    CHECK(strlen(small) < sizeof small && strlen(small) <= full);
    int calls = 0;
    kvw_result_init(&res);
    st = kvw_generate(eng, "stop early", &rp, stop_at_once, &calls, NULL, 0, NULL, &res);
    CHECK(st == KVW_ERR_ABORTED && calls == 1);
    CHECK(res.finish_reason == KVW_FINISH_ABORT && res.status == KVW_ERR_ABORTED);
    CHECK_ST(kvw_generate(eng, "x", NULL, NULL, NULL, NULL, 3, NULL, NULL), KVW_ERR_INVALID_ARGUMENT);

    /* A stop asked after the request already finished is still a stop: the
     * status is KVW_ERR_ABORTED and buf holds exactly what was delivered. */
    struct late_stop ls = {.eng = eng};
    kvw_stats before;
    kvw_stats_init(&before);
    REQUIRE_OK(kvw_engine_stats(eng, &before));
    ls.finished_before = before.finished;
    rp = kvw_request_default_params();
    rp.max_tokens = 6;
    char whole[256];
    memset(whole, 'Z', sizeof whole);
    size_t whole_len = 999;
    kvw_result_init(&res);
    st = kvw_generate(eng, "late stop", &rp, stop_after_finish, &ls, whole, sizeof whole, &whole_len, &res);
    CHECK(ls.saw_finish && ls.calls == 1);
    CHECK_ST(st, KVW_ERR_ABORTED);
    CHECK(res.done && res.status == KVW_ERR_ABORTED && res.finish_reason == KVW_FINISH_ABORT);
    CHECK(strcmp(whole, ls.first) == 0 && whole_len == strlen(ls.first));
    CHECK(strstr(kvw_last_error(), "callback") != NULL);

    /* seed 0 is a fixed seed; KVW_SEED_RANDOM (the default) is not */
    CHECK(kvw_request_default_params().seed == KVW_SEED_RANDOM);
    char s0[2][256];
    for (int i = 0; i < 2; i++) {
        rp = kvw_request_default_params();
        rp.max_tokens = 16;
        rp.temperature = 1.5f;
        rp.seed = 0;
        REQUIRE_OK(kvw_generate(eng, "seeded", &rp, NULL, NULL, s0[i], sizeof s0[i], NULL, NULL));
    }
    CHECK(strcmp(s0[0], s0[1]) == 0);
}

/* fork(): every call in the child fails at once with KVW_ERR_FORKED (it
 * used to hang forever); the parent's engine keeps working. */
static void test_fork(kvw_engine* eng) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        g_failures++;
        return;
    }
    if (pid == 0) {
        alarm(20); /* a hang (the old behaviour) kills the child: a failure */
        int32_t mc = 0;
        size_t n = 0;
        char buf[16];
        int32_t done = 0;
        kvw_stats s;
        kvw_stats_init(&s);
        kvw_result r;
        kvw_result_init(&r);
        uint64_t id = 0;
        kvw_engine* other = NULL;
        CHECK_ST(kvw_engine_max_context(eng, &mc), KVW_ERR_FORKED);
        CHECK(strstr(kvw_last_error(), "fork") != NULL && strstr(kvw_last_error(), "spawn") != NULL);
        CHECK_ST(kvw_engine_open(NULL, NULL, &other), KVW_ERR_FORKED);
        CHECK(other == NULL);
        CHECK_ST(kvw_tokenize(eng, "hi", 1, NULL, 0, &n), KVW_ERR_FORKED);
        CHECK_ST(kvw_detokenize(eng, NULL, 0, NULL, 0, &n), KVW_ERR_FORKED);
        CHECK_ST(kvw_vocab_info(eng, NULL, NULL, NULL), KVW_ERR_FORKED);
        CHECK_ST(kvw_submit(eng, "hi", NULL, &id), KVW_ERR_FORKED);
        CHECK_ST(kvw_next(eng, 1, -1, buf, sizeof buf, &n, &done), KVW_ERR_FORKED);
        CHECK_ST(kvw_abort(eng, 1), KVW_ERR_FORKED);
        CHECK_ST(kvw_request_free(eng, 1), KVW_ERR_FORKED);
        CHECK_ST(kvw_request_result(eng, 1, &r), KVW_ERR_FORKED);
        CHECK_ST(kvw_request_tokens(eng, 1, KVW_TOKENS_PROMPT, NULL, 0, &n), KVW_ERR_FORKED);
        CHECK_ST(kvw_generate(eng, "hi", NULL, NULL, NULL, NULL, 0, NULL, NULL), KVW_ERR_FORKED);
        CHECK_ST(kvw_engine_stats(eng, &s), KVW_ERR_FORKED);
        CHECK_ST(kvw_engine_close(eng), KVW_ERR_FORKED);
        CHECK(strcmp(kvw_status_string(KVW_ERR_FORKED), "KVW_ERR_FORKED") == 0);
        kvw_error_info info = {sizeof info, 0, 0, 0, 0, 0, 0};
        CHECK_ST(kvw_last_error_info(&info), KVW_OK);
        CHECK(info.status == KVW_ERR_FORKED);
        fflush(NULL);
        _exit(g_failures ? 1 : 0);
    }
    int wst = 0;
    CHECK(waitpid(pid, &wst, 0) == pid);
    if (!(WIFEXITED(wst) && WEXITSTATUS(wst) == 0)) {
        fprintf(stderr, "fork child: %s %d\n", WIFSIGNALED(wst) ? "killed by signal" : "exit status",
                WIFSIGNALED(wst) ? WTERMSIG(wst) : WEXITSTATUS(wst));
        g_failures++;
    }
    char out[64];
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 3;
    CHECK_ST(kvw_generate(eng, "parent", &rp, NULL, NULL, out, sizeof out, NULL, NULL), KVW_OK);
}

/* kvw_next blocked while the engine is closed returns KVW_ERR_CLOSED (the
 * header's promise), never KVW_ERR_NOT_FOUND. max_seqs 1 keeps the read
 * request queued behind a long one, so the reader is waiting when close
 * comes. */
struct reader {
    kvw_engine* eng;
    uint64_t id;
    atomic_int started;
    int32_t final;
    int32_t done;
};

static void* read_to_end(void* arg) {
    struct reader* r = arg;
    char buf[64];
    size_t len = 0;
    atomic_store(&r->started, 1);
    for (;;) {
        r->final = kvw_next(r->eng, r->id, -1, buf, sizeof buf, &len, &r->done);
        if (r->final != KVW_OK || r->done) return NULL;
    }
}

static void test_close_under_read(void) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 16 << 20;
    p.max_seqs = 1;
    kvw_engine* e = NULL;
    REQUIRE_OK(kvw_engine_open(NULL, &p, &e));
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 2000;
    uint64_t first = 0;
    struct reader r = {.eng = e};
    REQUIRE_OK(kvw_submit(e, "long", &rp, &first));
    REQUIRE_OK(kvw_submit(e, "queued", &rp, &r.id));
    pthread_t t;
    pthread_create(&t, NULL, read_to_end, &r);
    while (!atomic_load(&r.started)) usleep(1000);
    usleep(20 * 1000); /* let it block in kvw_next (the outcome is checked either way) */
    CHECK_ST(kvw_engine_close(e), KVW_OK);
    pthread_join(t, NULL);
    if (r.final == KVW_OK && r.done) {
        printf("close under read: the request finished before close (nothing to check)\n");
    } else {
        CHECK(r.final == KVW_ERR_CLOSED || r.final == KVW_ERR_ABORTED);
        if (r.final != KVW_ERR_CLOSED && r.final != KVW_ERR_ABORTED)
            fprintf(stderr, "close under read ended with %s\n", kvw_status_string(r.final));
    }
}

/* Templates whose single expressions ask for gigabytes (issue 25): 34
 * nested tojson, and an 8 MiB string concatenated 400 times. They used to
 * abort the host process with a Go "fatal error: out of memory"; now the
 * render fails with an error status naming the budget, and the engine
 * renders the next conversation. */
static void test_chat_hostile(kvw_engine_params* p) {
    static char tmpl[16384];
    size_t n = 0;
    n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, "{%% set s = 'ab' %%}");
    for (int i = 0; i < 22; i++) n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, "{%% set s = s ~ s %%}");
    n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, "{%% if messages[0].content == 'json' %%}{{ messages");
    for (int i = 0; i < 34; i++) n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, "|tojson");
    n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, " }}{%% elif messages[0].content == 'concat' %%}{{ s");
    for (int i = 0; i < 400; i++) n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, " ~ s");
    n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, " }}{%% else %%}ok{%% endif %%}");
    CHECK(n < sizeof tmpl - 1);
    p->chat_template = tmpl;
    kvw_engine* e = NULL;
    REQUIRE_OK(kvw_engine_open(NULL, p, &e));
    const char* attacks[] = {"json", "concat"};
    char buf[64];
    size_t len = 0;
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++) {
        const kvw_chat_message m[] = {{"user", attacks[i]}};
        CHECK_ST(kvw_chat_apply_template(e, m, 1, 1, NULL, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
        CHECK(strstr(kvw_last_error(), "memory budget") != NULL);
        const kvw_chat_message fine[] = {{"user", "hello"}};
        CHECK_ST(kvw_chat_apply_template(e, fine, 1, 1, NULL, buf, sizeof buf, &len), KVW_OK);
        CHECK(strcmp(buf, "ok") == 0);
    }
    CHECK_ST(kvw_engine_close(e), KVW_OK);
}

static void test_chat(kvw_engine* eng) {
    const kvw_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
    const char* want = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\n";
    size_t len = 0;
    char buf[256];
    /* The built-in model has no template: ChatML. Size query, then render. */
    CHECK_ST(kvw_chat_apply_template(eng, msgs, 2, 1, NULL, NULL, 0, &len), KVW_OK);
    CHECK(len == strlen(want));
    CHECK_ST(kvw_chat_apply_template(eng, msgs, 2, 1, NULL, buf, len, &len), KVW_ERR_BUFFER_TOO_SMALL);
    CHECK_ST(kvw_chat_apply_template(eng, msgs, 2, 1, NULL, buf, sizeof buf, &len), KVW_OK);
    CHECK(strcmp(buf, want) == 0);
    CHECK_ST(kvw_chat_apply_template(eng, msgs, 2, 0, "", buf, sizeof buf, &len), KVW_OK);
    CHECK(strstr(buf, "assistant") == NULL);

    CHECK_ST(kvw_chat_apply_template(eng, NULL, 2, 1, NULL, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_chat_apply_template(eng, msgs, 2, 1, NULL, buf, sizeof buf, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_chat_apply_template(eng, msgs, 2, 1, "tool_use", buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "tool_use") != NULL);
    const kvw_chat_message bad[] = {{NULL, "x"}};
    CHECK_ST(kvw_chat_apply_template(eng, bad, 1, 1, NULL, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);

    /* A template of the caller's that raises: the template's own message. */
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 4 << 20;
    p.chat_template = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
                      "{% endif %}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
    kvw_engine* e = NULL;
    REQUIRE_OK(kvw_engine_open(NULL, &p, &e));
    CHECK_ST(kvw_chat_apply_template(e, msgs, 2, 1, NULL, buf, sizeof buf, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "System role not supported") != NULL);
    CHECK_ST(kvw_chat_apply_template(e, msgs + 1, 1, 1, NULL, buf, sizeof buf, &len), KVW_OK);
    CHECK(strcmp(buf, "[user]Hi") == 0);
    /* parse_special on a prompt: accepted (this vocabulary has no special text). */
    kvw_request_params rp = kvw_request_default_params();
    rp.parse_special = 1;
    rp.max_tokens = 2;
    kvw_result res;
    kvw_result_init(&res);
    CHECK_ST(kvw_generate(e, buf, &rp, NULL, NULL, NULL, 0, NULL, &res), KVW_OK);
    CHECK_ST(kvw_engine_close(e), KVW_OK);

    p.chat_template = "{% for %}";
    e = NULL;
    CHECK_ST(kvw_engine_open(NULL, &p, &e), KVW_ERR_INVALID_ARGUMENT);
    CHECK(e == NULL && strstr(kvw_last_error(), "chat template") != NULL);

    test_chat_hostile(&p);
}

static void test_after_close(kvw_engine* eng) {
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, "left running", NULL, &id));
    atomic_store(&closed_flag, 0);
    CHECK_ST(kvw_engine_close(eng), KVW_OK);
    atomic_store(&closed_flag, 1);
    usleep(50 * 1000);
    CHECK(atomic_load(&log_after_close) == 0);

    char buf[16];
    size_t n = 0;
    int32_t done = 0, mc = 0;
    kvw_stats s;
    kvw_stats_init(&s);
    CHECK_ST(kvw_engine_close(eng), KVW_ERR_CLOSED);
    CHECK_ST(kvw_engine_max_context(eng, &mc), KVW_ERR_CLOSED);
    CHECK_ST(kvw_tokenize(eng, "hi", 1, NULL, 0, &n), KVW_ERR_CLOSED);
    CHECK_ST(kvw_detokenize(eng, NULL, 0, NULL, 0, &n), KVW_ERR_CLOSED);
    CHECK_ST(kvw_submit(eng, "hi", NULL, &id), KVW_ERR_CLOSED);
    CHECK_ST(kvw_next(eng, id, 0, buf, sizeof buf, &n, &done), KVW_ERR_CLOSED);
    CHECK_ST(kvw_abort(eng, id), KVW_ERR_CLOSED);
    CHECK_ST(kvw_request_free(eng, id), KVW_ERR_CLOSED);
    CHECK_ST(kvw_engine_stats(eng, &s), KVW_ERR_CLOSED);
    CHECK_ST(kvw_generate(eng, "hi", NULL, NULL, NULL, NULL, 0, NULL, NULL), KVW_ERR_CLOSED);
    CHECK(strstr(kvw_last_error(), "closed") != NULL);
}

int main(void) {
    test_open();

    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 16 << 20;
    p.log_callback = on_log;
    p.log_user_data = &log_token;
    p.log_level = KVW_LOG_DEBUG;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open(NULL, &p, &eng));
    /* The log callback is delivered: opening on device auto logs the
     * backend it picked, at INFO, with this engine's user_data. */
    CHECK(atomic_load(&log_calls) >= 1);
    pthread_mutex_lock(&log_mu);
    CHECK(first_log_level == KVW_LOG_INFO && strstr(first_log, "device auto") != NULL);
    pthread_mutex_unlock(&log_mu);

    /* n_threads: negative is refused; a value works */
    kvw_engine_params tp = kvw_engine_default_params();
    kvw_engine* te = NULL;
    tp.kv_memory_bytes = 4 << 20;
    tp.n_threads = -1;
    CHECK_ST(kvw_engine_open(NULL, &tp, &te), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "n_threads") != NULL);
    tp.n_threads = 1;
    CHECK_ST(kvw_engine_open(NULL, &tp, &te), KVW_OK);
    if (te) CHECK_ST(kvw_engine_close(te), KVW_OK);

    test_handles(eng);
    test_tokens(eng);
    test_submit(eng);
    test_fork(eng);
    test_close_under_read();
    test_chat(eng);
    test_after_close(eng);
    printf("log callback calls: %d\n", atomic_load(&log_calls));
    return finish("test_misuse");
}
