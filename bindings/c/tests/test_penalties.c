/* OpenAI's penalties and logit bias and the prompt's log-probabilities
 * through the C API (kvw_request_params v5), on the built-in stories
 * model: a -100 bias bans the greedy token and +100 forces one, a
 * frequency penalty breaks a greedy repetition, prompt logprobs have one
 * entry per prompt token after the first, bad values are
 * KVW_ERR_INVALID_ARGUMENT (reason KVW_REJECT_INVALID_PARAMS) naming the
 * field, and a v4-sized struct (without the fields) still works. */
#include <math.h>
#include <stdint.h>

#include "test_util.h"

static kvw_engine* open_engine(void) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open("builtin:stories260K", &p, &eng));
    return eng;
}

/* Runs rp on prompt and copies its generated tokens (at most cap). */
static size_t run(kvw_engine* eng, const kvw_request_params* rp, int32_t* toks, size_t cap, uint64_t* out_id) {
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, "Once upon a time", rp, &id));
    char buf[256];
    for (;;) {
        size_t len = 0;
        int32_t done = 0;
        REQUIRE_OK(kvw_next(eng, id, -1, buf, sizeof buf, &len, &done));
        if (done) break;
    }
    size_t n = 0;
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_GENERATED, toks, cap, &n));
    if (out_id) {
        *out_id = id;
    } else {
        REQUIRE_OK(kvw_request_free(eng, id));
    }
    return n;
}

static void test_bias(kvw_engine* eng) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 1;
    int32_t greedy[4], other[4];
    CHECK(run(eng, &rp, greedy, 4, NULL) == 1);
    int32_t ban = greedy[0];
    float minus = -100.0f;
    rp.logit_bias_tokens = &ban;
    rp.logit_bias = &minus;
    rp.n_logit_bias = 1;
    CHECK(run(eng, &rp, other, 4, NULL) == 1);
    CHECK(other[0] != greedy[0]);

    /* +100 forces a token at a high temperature. */
    int32_t forced = 100;
    float plus = 100.0f;
    rp.max_tokens = 6;
    rp.temperature = 1.5f;
    rp.seed = 11;
    rp.logit_bias_tokens = &forced;
    rp.logit_bias = &plus;
    int32_t toks[8];
    size_t n = run(eng, &rp, toks, 8, NULL);
    CHECK(n == 6);
    for (size_t i = 0; i < n; i++) CHECK(toks[i] == forced);
}

static void test_frequency(kvw_engine* eng) {
    /* Greedy on the story model repeats tokens ("the", "a", ...); a strong
     * frequency penalty makes every token of the run a new one or changes
     * the run. */
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 40;
    int32_t plain[48], pen[48];
    size_t np = run(eng, &rp, plain, 48, NULL);
    rp.frequency_penalty = 2.0f;
    rp.presence_penalty = 2.0f;
    size_t n = run(eng, &rp, pen, 48, NULL);
    CHECK(np == n);
    CHECK(memcmp(plain, pen, n * sizeof pen[0]) != 0);
}

static void test_prompt_logprobs(kvw_engine* eng) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 2;
    rp.prompt_logprobs = 1;
    rp.top_logprobs = 3;
    int32_t toks[4];
    uint64_t id = 0;
    run(eng, &rp, toks, 4, &id);
    size_t np = 0, n = 0;
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_PROMPT, NULL, 0, &np));
    CHECK(np > 2);
    REQUIRE_OK(kvw_request_prompt_logprobs(eng, id, NULL, 0, &n));
    CHECK(n == np - 1);
    int32_t prompt[64];
    kvw_token_logprob lp[64], top[KVW_MAX_TOP_LOGPROBS];
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_PROMPT, prompt, 64, &np));
    REQUIRE_OK(kvw_request_prompt_logprobs(eng, id, lp, 64, &n));
    for (size_t i = 0; i < n; i++) {
        CHECK(lp[i].token == prompt[i + 1]);
        CHECK(lp[i].logprob <= 0.0f);
        size_t nt = 0;
        REQUIRE_OK(kvw_request_prompt_top_logprobs(eng, id, i, top, KVW_MAX_TOP_LOGPROBS, &nt));
        CHECK(nt == 3);
        CHECK(top[0].logprob >= lp[i].logprob);
        CHECK(top[0].logprob >= top[1].logprob && top[1].logprob >= top[2].logprob);
    }
    CHECK_ST(kvw_request_prompt_top_logprobs(eng, id, n, top, 3, &n), KVW_ERR_INVALID_ARGUMENT);
    REQUIRE_OK(kvw_request_free(eng, id));

    /* Not asked for: an error naming the field. */
    rp.prompt_logprobs = 0;
    run(eng, &rp, toks, 4, &id);
    CHECK_ST(kvw_request_prompt_logprobs(eng, id, NULL, 0, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "prompt_logprobs") != NULL);
    REQUIRE_OK(kvw_request_free(eng, id));
}

static void test_errors(kvw_engine* eng) {
    int32_t tok = 5, big = 1 << 20, twice[2] = {5, 5};
    float ok = 1.0f, bad = 150.0f, two[2] = {1.0f, 2.0f};
    struct {
        const char* name;
        float presence, frequency;
        const int32_t* toks;
        const float* bias;
        uint32_t n;
        const char* want;
    } cases[] = {
        {"presence", 2.5f, 0, NULL, NULL, 0, "presence_penalty"},
        {"frequency", 0, -3.0f, NULL, NULL, 0, "frequency_penalty"},
        {"nan", NAN, 0, NULL, NULL, 0, "presence_penalty"},
        {"bias value", 0, 0, &tok, &bad, 1, "logit_bias"},
        {"bias token", 0, 0, &big, &ok, 1, "logit_bias"},
        {"bias twice", 0, 0, twice, two, 2, "logit_bias_tokens"},
        {"bias null", 0, 0, NULL, &ok, 1, "logit_bias"},
        {"bias count", 0, 0, &tok, &ok, KVW_MAX_LOGIT_BIAS + 1, "n_logit_bias"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kvw_request_params rp = kvw_request_default_params();
        rp.presence_penalty = cases[i].presence;
        rp.frequency_penalty = cases[i].frequency;
        rp.logit_bias_tokens = cases[i].toks;
        rp.logit_bias = cases[i].bias;
        rp.n_logit_bias = cases[i].n;
        uint64_t id = 0;
        CHECK_ST(kvw_submit(eng, "Once upon a time", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
        if (strstr(kvw_last_error(), cases[i].want) == NULL) {
            fprintf(stderr, "%s: error %s does not name %s\n", cases[i].name, kvw_last_error(), cases[i].want);
            g_failures++;
        }
    }
}

/* A caller built against v4 (104 bytes) never sets the v5 fields: whatever
 * lies past its struct is not read. */
static void test_v4_caller(kvw_engine* eng) {
    struct {
        kvw_request_params p;
        char junk[16];
    } v4;
    memset(&v4, 0xAB, sizeof v4);
    v4.p = kvw_request_default_params();
    v4.p.max_tokens = 4;
    memset((char*)&v4.p + 104, 0xAB, sizeof v4.p - 104);
    v4.p.struct_size = 104;
    char buf[128];
    kvw_result r;
    kvw_result_init(&r);
    REQUIRE_OK(kvw_generate(eng, "Once upon a time", &v4.p, NULL, NULL, buf, sizeof buf, NULL, &r));
    CHECK(r.generated_tokens == 4);
}

int main(void) {
    kvw_engine* eng = open_engine();
    test_bias(eng);
    test_frequency(eng);
    test_prompt_logprobs(eng);
    test_errors(eng);
    test_v4_caller(eng);
    REQUIRE_OK(kvw_engine_close(eng));
    return finish("test_penalties");
}
