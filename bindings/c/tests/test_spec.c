/* Speculative decoding through the C API (kvw_engine_params v6,
 * kvw_request_params v7, kvw_stats v3), on the built-in stories model:
 * greedy output is identical with and without n-gram speculation, set for
 * the engine or per request, and drafts were verified (kvw_stats); a
 * request's "none" turns the engine's off; bad values and a "draft" type
 * without a draft model are KVW_ERR_INVALID_ARGUMENT naming the field; a
 * draft model (the built-in model drafting for itself) gives the same
 * output; v6-sized request structs (without the fields) take the engine's
 * setting. */
#include <stdint.h>

#include "test_util.h"

#define MAXTOK 96

/* Prompts whose greedy continuations repeat the prompt or themselves
 * (drafts accepted), and one with little to look up. */
static const char* prompts[] = {
    "Lily and Tom went to the park. Lily and Tom went to the park. Lily and",
    "The cat sat on the mat. The dog sat on the log. The cat sat on",
    "Once upon a time",
    "zq xv kj pw",
};
#define NPROMPTS (sizeof prompts / sizeof prompts[0])

static kvw_engine* open_engine(const char* spec_type, int32_t draft_max) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    p.zero_on_release = 1;
    p.spec_type = spec_type;
    p.spec_draft_max = draft_max;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open("builtin:stories260K", &p, &eng));
    return eng;
}

/* Generates prompt with rp and copies its tokens; returns their count. */
static size_t run(kvw_engine* eng, const char* prompt, const kvw_request_params* rp, int32_t* toks) {
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, prompt, rp, &id));
    char buf[256];
    for (;;) {
        size_t len = 0;
        int32_t done = 0;
        REQUIRE_OK(kvw_next(eng, id, -1, buf, sizeof buf, &len, &done));
        if (done) break;
    }
    size_t n = 0;
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_GENERATED, toks, MAXTOK, &n));
    REQUIRE_OK(kvw_request_free(eng, id));
    return n;
}

static kvw_stats stats(kvw_engine* eng) {
    kvw_stats st;
    kvw_stats_init(&st);
    REQUIRE_OK(kvw_engine_stats(eng, &st));
    return st;
}

static void same_tokens(const char* what, size_t i, const int32_t* want, size_t nw, const int32_t* got, size_t ng) {
    if (nw != ng || memcmp(want, got, nw * sizeof want[0]) != 0) {
        fprintf(stderr, "%s: prompt %zu: %zu tokens differ from the %zu without speculation\n", what, i, ng, nw);
        g_failures++;
    }
}

static void test_greedy_identical(void) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = MAXTOK;
    int32_t want[NPROMPTS][MAXTOK], got[MAXTOK];
    size_t nwant[NPROMPTS];

    kvw_engine* plain = open_engine(NULL, 0);
    for (size_t i = 0; i < NPROMPTS; i++) nwant[i] = run(plain, prompts[i], &rp, want[i]);
    CHECK(stats(plain).spec_steps == 0); /* off by default */

    /* A request's own setting on an engine without one. */
    rp.spec_type = "ngram";
    rp.spec_draft_max = 4;
    rp.spec_ngram_min = 1;
    rp.spec_ngram_max = 3;
    for (size_t i = 0; i < NPROMPTS; i++) same_tokens("request ngram", i, want[i], nwant[i], got, run(plain, prompts[i], &rp, got));
    kvw_stats st = stats(plain);
    CHECK(st.spec_steps > 0 && st.spec_accepted > 0);
    CHECK(st.spec_drafted <= 4 * st.spec_steps); /* spec_draft_max per step */
    REQUIRE_OK(kvw_engine_close(plain));

    /* The engine's setting, taken by requests that leave spec_type NULL. */
    kvw_engine* spec = open_engine("ngram", 6);
    rp = kvw_request_default_params();
    rp.max_tokens = MAXTOK;
    for (size_t i = 0; i < NPROMPTS; i++) same_tokens("engine ngram", i, want[i], nwant[i], got, run(spec, prompts[i], &rp, got));
    st = stats(spec);
    CHECK(st.spec_accepted > 0 && st.spec_accepted < st.spec_drafted);

    /* "none" turns it off for one request. */
    rp.spec_type = "none";
    same_tokens("request none", 0, want[0], nwant[0], got, run(spec, prompts[0], &rp, got));
    CHECK(stats(spec).spec_steps == st.spec_steps);

    /* A draft model (the same model drafting for itself). */
    {
        kvw_engine_params p = kvw_engine_default_params();
        p.kv_memory_bytes = 8 << 20;
        p.zero_on_release = 1;
        p.spec_type = "draft";
        p.spec_draft_model = "builtin:stories260K";
        p.spec_draft_max = 4;
        kvw_engine* draft = NULL;
        REQUIRE_OK(kvw_engine_open("builtin:stories260K", &p, &draft));
        kvw_request_params dp = kvw_request_default_params();
        dp.max_tokens = MAXTOK;
        for (size_t i = 0; i < NPROMPTS; i++) same_tokens("draft model", i, want[i], nwant[i], got, run(draft, prompts[i], &dp, got));
        kvw_stats ds = stats(draft);
        CHECK(ds.spec_accepted > 0 && ds.spec_drafted <= 4 * ds.spec_steps);
        REQUIRE_OK(kvw_engine_close(draft));
    }

    /* A v6-sized struct (152 bytes) has no spec fields: whatever lies past
     * it is not read, and the engine's setting applies. */
    struct {
        kvw_request_params p;
        char junk[32];
    } v6;
    memset(&v6, 0xAB, sizeof v6);
    v6.p = kvw_request_default_params();
    v6.p.max_tokens = MAXTOK;
    memset((char*)&v6.p + 152, 0xAB, sizeof v6.p - 152);
    v6.p.struct_size = 152;
    same_tokens("v6 caller", 0, want[0], nwant[0], got, run(spec, prompts[0], &v6.p, got));
    CHECK(stats(spec).spec_steps > st.spec_steps);
    REQUIRE_OK(kvw_engine_close(spec));
}

static void test_errors(void) {
    struct {
        const char *type, *draft_model;
        int32_t draft_max, nmin, nmax;
        const char* want;
    } cases[] = {
        {"eagle", NULL, 0, 0, 0, "spec_type"},
        {"draft", NULL, 0, 0, 0, "draft model"},
        {"ngram", "draft.gguf", 0, 0, 0, "draft model"},
        {"ngram", NULL, 65, 0, 0, "draft max 65"},
        {"ngram", NULL, -1, 0, 0, "draft max -1"},
        {"ngram", NULL, 0, 3, 2, "n-gram sizes 3..2"},
        {"ngram", NULL, 0, 0, 17, "n-gram sizes"},
    };
    kvw_engine* eng = open_engine(NULL, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kvw_engine_params p = kvw_engine_default_params();
        p.kv_memory_bytes = 8 << 20;
        p.spec_type = cases[i].type;
        p.spec_draft_model = cases[i].draft_model;
        p.spec_draft_max = cases[i].draft_max;
        p.spec_ngram_min = cases[i].nmin;
        p.spec_ngram_max = cases[i].nmax;
        kvw_engine* bad = NULL;
        CHECK_ST(kvw_engine_open("builtin:stories260K", &p, &bad), KVW_ERR_INVALID_ARGUMENT);
        CHECK(bad == NULL);
        if (strstr(kvw_last_error(), cases[i].want) == NULL || strstr(kvw_last_error(), "params.spec_") == NULL) {
            fprintf(stderr, "engine case %zu: error %s does not name %s\n", i, kvw_last_error(), cases[i].want);
            g_failures++;
        }
        if (cases[i].draft_model != NULL) continue; /* not a request field */
        kvw_request_params rp = kvw_request_default_params();
        rp.spec_type = cases[i].type;
        rp.spec_draft_max = cases[i].draft_max;
        rp.spec_ngram_min = cases[i].nmin;
        rp.spec_ngram_max = cases[i].nmax;
        uint64_t id = 0;
        CHECK_ST(kvw_submit(eng, "Once upon a time", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
        kvw_error_info info;
        info.struct_size = sizeof info;
        REQUIRE_OK(kvw_last_error_info(&info));
        CHECK(info.reason == KVW_REJECT_INVALID_PARAMS);
        if (strstr(kvw_last_error(), cases[i].want) == NULL) {
            fprintf(stderr, "request case %zu: error %s does not name %s\n", i, kvw_last_error(), cases[i].want);
            g_failures++;
        }
    }
    REQUIRE_OK(kvw_engine_close(eng));
}

int main(void) {
    test_greedy_identical();
    test_errors();
    return finish("test_spec");
}
