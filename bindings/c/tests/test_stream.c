/* Streaming extras of the C API on the built-in models:
 *  - kvw_next_logprobs / kvw_next_top_logprobs: each kvw_next's tokens get
 *    their log-probabilities at once, and over the stream they are exactly
 *    kvw_request_logprobs / kvw_request_top_logprobs; misuse (NULL, stale
 *    and freed IDs, closed engines, no logprobs asked) is an error, never a
 *    crash;
 *  - kvw_request_params v6 keep_tokens: a control token that decodes to
 *    nothing (the synthetic model's <s>, forced with a +100 logit bias) comes
 *    out as its text when kept; bad lists are KVW_ERR_INVALID_ARGUMENT
 *    naming the field; a v5-sized struct (136 bytes) keeps working. */
#include <stdint.h>

#include "test_util.h"

static kvw_engine* open_engine(const char* model) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open(model, &p, &eng));
    return eng;
}

#define MAX_TOKS 64

static void test_next_logprobs(kvw_engine* eng) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 24;
    rp.temperature = 0.8f;
    rp.seed = 5;
    rp.top_logprobs = 3;
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, "Once upon a time", &rp, &id));

    kvw_token_logprob streamed[MAX_TOKS];
    kvw_token_logprob streamed_top[MAX_TOKS][3];
    size_t n_top[MAX_TOKS];
    size_t n = 0, calls_with_text = 0, calls_with_records = 0;
    char buf[256];
    for (;;) {
        size_t len = 0, k = 0;
        int32_t done = 0;
        int32_t st = kvw_next(eng, id, -1, buf, sizeof buf, &len, &done);
        CHECK(st == KVW_OK);
        /* size query, then the records */
        REQUIRE_OK(kvw_next_logprobs(eng, id, NULL, 0, &k));
        CHECK(n + k <= MAX_TOKS);
        if (k > 0) {
            size_t got = 0;
            kvw_token_logprob tiny[1];
            if (k > 1) CHECK_ST(kvw_next_logprobs(eng, id, tiny, 1, &got), KVW_ERR_BUFFER_TOO_SMALL);
            REQUIRE_OK(kvw_next_logprobs(eng, id, streamed + n, MAX_TOKS - n, &got));
            CHECK(got == k);
            for (size_t i = 0; i < k; i++) {
                REQUIRE_OK(kvw_next_top_logprobs(eng, id, i, streamed_top[n + i], 3, &n_top[n + i]));
                CHECK(n_top[n + i] == 3);
                CHECK(streamed_top[n + i][0].logprob >= streamed_top[n + i][1].logprob);
            }
            size_t dummy = 0;
            CHECK_ST(kvw_next_top_logprobs(eng, id, k, streamed_top[0], 3, &dummy), KVW_ERR_INVALID_ARGUMENT);
            n += k;
            calls_with_records++;
        }
        if (len > 0) calls_with_text++;
        if (done) break;
    }
    /* Tokens came with the text, not all at the end. */
    CHECK(calls_with_text >= 2);
    CHECK(calls_with_records + 1 >= calls_with_text);

    /* A call after done leaves no records. */
    size_t len = 0, k = 99;
    int32_t done = 0;
    REQUIRE_OK(kvw_next(eng, id, 0, buf, sizeof buf, &len, &done));
    CHECK(done == 1 && len == 0);
    REQUIRE_OK(kvw_next_logprobs(eng, id, NULL, 0, &k));
    CHECK(k == 0);

    /* The whole stream's records are the request's. */
    kvw_token_logprob all[MAX_TOKS];
    size_t total = 0;
    REQUIRE_OK(kvw_request_logprobs(eng, id, all, MAX_TOKS, &total));
    CHECK(total == n);
    CHECK(total == 24);
    for (size_t i = 0; i < total && i < n; i++) {
        CHECK(all[i].token == streamed[i].token);
        CHECK(all[i].logprob == streamed[i].logprob);
        kvw_token_logprob top[3];
        size_t nt = 0;
        REQUIRE_OK(kvw_request_top_logprobs(eng, id, i, top, 3, &nt));
        CHECK(nt == n_top[i]);
        for (size_t j = 0; j < nt; j++) {
            CHECK(top[j].token == streamed_top[i][j].token && top[j].logprob == streamed_top[i][j].logprob);
        }
    }
    REQUIRE_OK(kvw_request_free(eng, id));
    /* Freed: not found, never a crash. */
    CHECK_ST(kvw_next_logprobs(eng, id, NULL, 0, &k), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_next_top_logprobs(eng, id, 0, NULL, 0, &k), KVW_ERR_NOT_FOUND);
}

static void test_next_logprobs_misuse(kvw_engine* eng) {
    size_t k = 0;
    kvw_token_logprob out[4];
    CHECK_ST(kvw_next_logprobs(NULL, 1, NULL, 0, &k), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_next_logprobs((kvw_engine*)(uintptr_t)0x1234, 1, NULL, 0, &k), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_next_logprobs(eng, 987654321, NULL, 0, &k), KVW_ERR_NOT_FOUND);

    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 2;
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, "Once upon a time", &rp, &id));
    CHECK_ST(kvw_next_logprobs(eng, id, NULL, 0, &k), KVW_ERR_INVALID_ARGUMENT); /* no logprobs asked */
    CHECK(strstr(kvw_last_error(), "logprobs") != NULL);
    REQUIRE_OK(kvw_request_free(eng, id));

    rp.logprobs = 1;
    REQUIRE_OK(kvw_submit(eng, "Once upon a time", &rp, &id));
    CHECK_ST(kvw_next_logprobs(eng, id, out, 4, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_next_logprobs(eng, id, NULL, 4, &k), KVW_ERR_INVALID_ARGUMENT);
    /* Before any kvw_next: no records. */
    REQUIRE_OK(kvw_next_logprobs(eng, id, NULL, 0, &k));
    CHECK(k == 0);
    CHECK_ST(kvw_next_top_logprobs(eng, id, 0, out, 4, &k), KVW_ERR_INVALID_ARGUMENT);
    /* logprobs without top_logprobs: every record has no alternatives. */
    char buf[64];
    size_t len = 0;
    int32_t done = 0;
    REQUIRE_OK(kvw_next(eng, id, -1, buf, sizeof buf, &len, &done));
    REQUIRE_OK(kvw_next_logprobs(eng, id, out, 4, &k));
    CHECK(k == 1);
    size_t nt = 99;
    REQUIRE_OK(kvw_next_top_logprobs(eng, id, 0, out, 4, &nt));
    CHECK(nt == 0);
    /* Left unfreed: the engine's close frees it; afterwards the handle is closed. */
}

/* Runs rp and writes its text into buf. */
static int32_t run_text(kvw_engine* eng, const kvw_request_params* rp, char* buf, size_t size) {
    kvw_result r;
    kvw_result_init(&r);
    return kvw_generate(eng, "Once upon a time", rp, NULL, NULL, buf, size, NULL, &r);
}

/* On the synthetic built-in model (NULL path), whose vocabulary spells BOS
 * "<s>" (llama2.c's tokenizer files spell it "\n<s>\n"). */
static void test_keep_tokens(void) {
    kvw_engine* eng = open_engine(NULL);
    int32_t bos = -1;
    REQUIRE_OK(kvw_vocab_info(eng, NULL, &bos, NULL));
    CHECK(bos >= 0);
    float plus = 100.0f;
    kvw_request_params rp = kvw_request_default_params();
    CHECK(rp.keep_tokens == NULL && rp.n_keep_tokens == 0);
    rp.max_tokens = 3;
    rp.logit_bias_tokens = &bos;
    rp.logit_bias = &plus;
    rp.n_logit_bias = 1;
    char buf[64];
    REQUIRE_OK(run_text(eng, &rp, buf, sizeof buf));
    CHECK(strcmp(buf, "") == 0); /* a control token decodes to nothing */

    const char* keep[] = {"[TOOL_CALLS]", "<s>", "plain"};
    rp.keep_tokens = keep;
    rp.n_keep_tokens = 3;
    REQUIRE_OK(run_text(eng, &rp, buf, sizeof buf));
    CHECK(strcmp(buf, "<s><s><s>") == 0);

    /* A v5 caller (136 bytes) never sets keep_tokens: what lies past its
     * struct is not read. */
    struct {
        kvw_request_params p;
        char junk[16];
    } v5;
    memset(&v5, 0xAB, sizeof v5);
    v5.p = rp;
    memset((char*)&v5.p + 136, 0xAB, sizeof v5.p - 136);
    v5.p.struct_size = 136;
    REQUIRE_OK(run_text(eng, &v5.p, buf, sizeof buf));
    CHECK(strcmp(buf, "") == 0);

    /* Bad lists. */
    const char* many[65];
    for (int i = 0; i < 65; i++) many[i] = "<s>";
    const char* with_null[] = {"<s>", NULL};
    const char* empty[] = {""};
    const char* bad_utf8[] = {"\xff"};
    struct {
        const char* const* list;
        uint32_t n;
        const char* want;
    } cases[] = {
        {many, 65, "n_keep_tokens 65 exceeds 64"},
        {NULL, 1, "keep_tokens is NULL"},
        {with_null, 2, "keep_tokens[1] is NULL"},
        {empty, 1, "keep_tokens[0] is 0 bytes"},
        {bad_utf8, 1, "keep_tokens[0] is not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rp.keep_tokens = cases[i].list;
        rp.n_keep_tokens = cases[i].n;
        uint64_t id = 0;
        CHECK_ST(kvw_submit(eng, "Once upon a time", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
        if (strstr(kvw_last_error(), cases[i].want) == NULL) {
            fprintf(stderr, "case %zu: error %s does not name %s\n", i, kvw_last_error(), cases[i].want);
            g_failures++;
        }
    }
    REQUIRE_OK(kvw_engine_close(eng));
}

int main(void) {
    kvw_engine* eng = open_engine("builtin:stories260K");
    test_next_logprobs(eng);
    test_keep_tokens();
    test_next_logprobs_misuse(eng);
    REQUIRE_OK(kvw_engine_close(eng));
    size_t k = 0;
    CHECK_ST(kvw_next_logprobs(eng, 1, NULL, 0, &k), KVW_ERR_CLOSED);
    return finish("test_stream");
}
