/* Multi-threaded test: many threads submit, stream, abort, generate,
 * tokenize and read stats on one engine at once; then the engine is closed
 * while threads are still using it.
 *
 * With stories260K (KVWARDEN_TEST_MODELS) every greedy request must produce
 * exactly the text a lone request produces: any cross-request KV leak would
 * change it. Without the model it uses the built-in model (same check, its
 * output is deterministic too). */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "test_util.h"

#define N_THREADS 8
#define ITERS 6

static kvw_engine* eng;
static char reference[4096];
static const char* PROMPT = "Once upon a time";
static atomic_int mismatches;
static atomic_int aborted_ok;
static atomic_int completed;

/* Streams request id to the end into out (may be NULL); returns the final
 * status. abort_after > 0 aborts after that many pieces. */
static int32_t stream_all(uint64_t id, char* out, size_t out_size, int abort_after) {
    char buf[37]; /* odd size: exercises UTF-8 cutting */
    size_t used = 0;
    int pieces = 0;
    for (;;) {
        size_t len = 0;
        int32_t done = 0;
        int32_t st = kvw_next(eng, id, 2000, buf, sizeof buf, &len, &done);
        if (st == KVW_ERR_TIMEOUT) continue;
        if (st == KVW_OK && out && used + len < out_size) {
            memcpy(out + used, buf, len);
            used += len;
            out[used] = 0;
        }
        if (st != KVW_OK || done) return st;
        if (abort_after > 0 && ++pieces == abort_after) CHECK_ST(kvw_abort(eng, id), KVW_OK);
    }
}

static void* worker(void* arg) {
    int t = (int)(intptr_t)arg;
    char tenant[32];
    snprintf(tenant, sizeof tenant, "tenant-%d", t % 3);
    for (int i = 0; i < ITERS; i++) {
        kvw_request_params rp = kvw_request_default_params();
        rp.max_tokens = 48;
        rp.tenant = tenant;
        char text[4096] = {0};
        int kind = (t + i) % 4;
        if (kind == 0 || kind == 1) { /* greedy stream: must equal the reference */
            uint64_t id = 0;
            REQUIRE_OK(kvw_submit(eng, PROMPT, &rp, &id));
            int32_t st = stream_all(id, text, sizeof text, 0);
            CHECK_ST(st, KVW_OK);
            if (strcmp(text, reference) != 0) {
                atomic_fetch_add(&mismatches, 1);
                fprintf(stderr, "thread %d: output differs:\n  got  %s\n  want %s\n", t, text, reference);
            }
            CHECK_ST(kvw_request_free(eng, id), KVW_OK);
        } else if (kind == 2) { /* sampled stream, aborted early */
            uint64_t id = 0;
            rp.temperature = 0.9f;
            rp.top_p = 0.9f;
            rp.seed = (uint64_t)(t * 100 + i);
            rp.max_tokens = 200;
            REQUIRE_OK(kvw_submit(eng, "The cat", &rp, &id));
            int32_t st = stream_all(id, NULL, 0, 2);
            CHECK(st == KVW_ERR_ABORTED || st == KVW_OK); /* OK if it ended first */
            if (st == KVW_ERR_ABORTED) atomic_fetch_add(&aborted_ok, 1);
            kvw_result res;
            kvw_result_init(&res);
            CHECK_ST(kvw_request_result(eng, id, &res), KVW_OK);
            CHECK(res.done);
            CHECK_ST(kvw_request_free(eng, id), KVW_OK);
        } else { /* blocking generate, plus tokenize/stats in between */
            size_t len = 0;
            CHECK_ST(kvw_generate(eng, PROMPT, &rp, NULL, NULL, text, sizeof text, &len, NULL), KVW_OK);
            if (strcmp(text, reference) != 0) atomic_fetch_add(&mismatches, 1);
            size_t n = 0;
            CHECK_ST(kvw_tokenize(eng, PROMPT, 1, NULL, 0, &n), KVW_OK);
            kvw_stats s;
            kvw_stats_init(&s);
            CHECK_ST(kvw_engine_stats(eng, &s), KVW_OK);
        }
        atomic_fetch_add(&completed, 1);
    }
    return NULL;
}

/* Two readers on one request: every piece goes to exactly one of them. */
struct shared_req {
    uint64_t id;
    atomic_size_t bytes;
};

static void* co_reader(void* arg) {
    struct shared_req* r = arg;
    char buf[16];
    for (;;) {
        size_t len = 0;
        int32_t done = 0;
        int32_t st = kvw_next(eng, r->id, 50, buf, sizeof buf, &len, &done);
        if (st == KVW_ERR_TIMEOUT) continue;
        if (st == KVW_OK) atomic_fetch_add(&r->bytes, len);
        if (st != KVW_OK || done) return NULL;
    }
}

/* Reads the shared request's streaming logprobs while the two readers
 * stream it: never blocks on them, never fails, never more than a call's
 * worth of records (one token per kvw_next here). */
static atomic_int lp_stop, lp_bad;

static void* lp_poller(void* arg) {
    struct shared_req* r = arg;
    kvw_token_logprob recs[8];
    while (!atomic_load(&lp_stop)) {
        size_t n = 0;
        int32_t st = kvw_next_logprobs(eng, r->id, recs, 8, &n);
        if (st != KVW_OK || n > 8) {
            fprintf(stderr, "kvw_next_logprobs while streaming: %s: %s\n", kvw_status_string(st), kvw_last_error());
            atomic_fetch_add(&lp_bad, 1);
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            if (!(recs[i].logprob <= 0.0f)) atomic_fetch_add(&lp_bad, 1);
        }
        usleep(100);
    }
    return NULL;
}

/* Used while the engine closes under it. */
static atomic_int close_bad;

static void* closer_victim(void* arg) {
    (void)arg;
    for (;;) {
        uint64_t id = 0;
        kvw_request_params rp = kvw_request_default_params();
        rp.max_tokens = 100;
        int32_t st = kvw_submit(eng, PROMPT, &rp, &id);
        if (st == KVW_ERR_CLOSED) return NULL;
        if (st != KVW_OK) {
            fprintf(stderr, "submit during close: %s: %s\n", kvw_status_string(st), kvw_last_error());
            atomic_fetch_add(&close_bad, 1);
            return NULL;
        }
        st = stream_all(id, NULL, 0, 0);
        /* finished, aborted by close, freed by close, or handle closed */
        if (st != KVW_OK && st != KVW_ERR_ABORTED && st != KVW_ERR_NOT_FOUND && st != KVW_ERR_CLOSED) {
            fprintf(stderr, "stream during close: %s: %s\n", kvw_status_string(st), kvw_last_error());
            atomic_fetch_add(&close_bad, 1);
        }
        st = kvw_request_free(eng, id);
        if (st != KVW_OK && st != KVW_ERR_NOT_FOUND && st != KVW_ERR_CLOSED) atomic_fetch_add(&close_bad, 1);
    }
}

int main(void) {
    char mp[1024], tp[1024];
    const char* model = test_model("stories260K.bin", mp, sizeof mp);
    const char* tok = test_model("tok512.bin", tp, sizeof tp);
    if (!model || !tok) {
        const char* ci = getenv("CI");
        if (ci && *ci) return missing_model("stories260K.bin/tok512.bin");
        fprintf(stderr, "note: stories260K not found; using the built-in model\n");
        model = tok = NULL;
    }
    kvw_engine_params p = kvw_engine_default_params();
    p.tokenizer_path = tok;
    p.kv_memory_bytes = 32 << 20;
    p.device = "cpu";  /* the reference text is run.c's, on the CPU */
    p.kv_type = "f32"; /* ... with float32 KV */
    REQUIRE_OK(kvw_engine_open(model, &p, &eng));

    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 48;
    size_t len = 0;
    REQUIRE_OK(kvw_generate(eng, PROMPT, &rp, NULL, NULL, reference, sizeof reference, &len, NULL));
    printf("reference: %s\n", reference);
    if (model) CHECK(strncmp(reference, ", there was a little girl named Lily", 36) == 0);

    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) pthread_create(&th[t], NULL, worker, (void*)(intptr_t)t);

    struct shared_req sr = {0};
    atomic_init(&sr.bytes, 0);
    kvw_request_params lrp = rp;
    lrp.logprobs = 1;
    REQUIRE_OK(kvw_submit(eng, PROMPT, &lrp, &sr.id));
    pthread_t co[2], poller;
    pthread_create(&poller, NULL, lp_poller, &sr);
    for (int i = 0; i < 2; i++) pthread_create(&co[i], NULL, co_reader, &sr);
    for (int i = 0; i < 2; i++) pthread_join(co[i], NULL);
    atomic_store(&lp_stop, 1);
    pthread_join(poller, NULL);
    CHECK(atomic_load(&lp_bad) == 0);
    CHECK(atomic_load(&sr.bytes) == strlen(reference));
    CHECK_ST(kvw_request_free(eng, sr.id), KVW_OK);

    for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
    CHECK(atomic_load(&mismatches) == 0);
    CHECK(atomic_load(&completed) == N_THREADS * ITERS);

    kvw_stats s;
    kvw_stats_init(&s);
    REQUIRE_OK(kvw_engine_stats(eng, &s));
    printf("stats: finished=%llu aborted=%llu generated=%llu isolation_failures=%llu (aborted by test: %d)\n",
           (unsigned long long)s.finished, (unsigned long long)s.aborted,
           (unsigned long long)s.generated_tokens, (unsigned long long)s.isolation_failures,
           atomic_load(&aborted_ok));
    CHECK(s.isolation_failures == 0 && s.isolation_violations == 0);
    CHECK(s.running == 0);

    /* Close while threads submit and stream. */
    pthread_t v[4];
    for (int i = 0; i < 4; i++) pthread_create(&v[i], NULL, closer_victim, NULL);
    usleep(100 * 1000);
    CHECK_ST(kvw_engine_close(eng), KVW_OK);
    for (int i = 0; i < 4; i++) pthread_join(v[i], NULL);
    CHECK(atomic_load(&close_bad) == 0);
    CHECK_ST(kvw_engine_close(eng), KVW_ERR_CLOSED);
    return finish("test_threads");
}
