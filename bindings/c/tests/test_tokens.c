/* The token-level C API: token-array requests, log-probabilities and
 * logits, saved state, model metadata and shape, tokenize/detokenize with
 * flags, max_tokens semantics, kvw_pull's argument checks; and misuse of
 * each (NULL, bad sizes, stale handles and IDs). Runs on the built-in
 * models; the GGUF metadata part on stories260K.gguf when present. */
#include <math.h>
#include <stdint.h>

#include "test_util.h"

static kvw_engine* open_engine(const char* model) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    p.page_size = 4;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open(model, &p, &eng));
    return eng;
}

/* Runs a request to its end (draining its text). */
static int32_t run_to_end(kvw_engine* eng, uint64_t id) {
    char buf[256];
    size_t n = 0;
    int32_t done = 0, st = KVW_OK;
    while (!done) {
        st = kvw_next(eng, id, -1, buf, sizeof buf, &n, &done);
        if (st != KVW_OK && !done) return st;
    }
    return st;
}

static void test_token_requests(kvw_engine* eng) {
    int32_t prompt[64];
    size_t n = 0;
    REQUIRE_OK(kvw_tokenize(eng, "Once upon a time", 1, prompt, 64, &n));
    CHECK(n > 2);

    /* The same prompt as text and as tokens gives the same tokens out. */
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 8;
    uint64_t a = 0, b = 0;
    REQUIRE_OK(kvw_submit(eng, "Once upon a time", &rp, &a));
    REQUIRE_OK(kvw_submit_tokens(eng, prompt, n, &rp, &b));
    CHECK_ST(run_to_end(eng, a), KVW_OK);
    CHECK_ST(run_to_end(eng, b), KVW_OK);
    int32_t ta[64], tb[64];
    size_t na = 0, nb = 0;
    REQUIRE_OK(kvw_request_tokens(eng, a, KVW_TOKENS_GENERATED, ta, 64, &na));
    REQUIRE_OK(kvw_request_tokens(eng, b, KVW_TOKENS_GENERATED, tb, 64, &nb));
    CHECK(na == 8 && nb == 8 && memcmp(ta, tb, sizeof ta[0] * na) == 0);
    size_t np = 0;
    REQUIRE_OK(kvw_request_tokens(eng, b, KVW_TOKENS_PROMPT, tb, 64, &np));
    CHECK(np == n && memcmp(tb, prompt, sizeof prompt[0] * n) == 0);
    kvw_request_free(eng, a);
    kvw_request_free(eng, b);

    /* Misuse. */
    uint64_t id = 0;
    kvw_error_info info = {sizeof info, 0, 0, 0, 0, 0, 0};
    CHECK_ST(kvw_submit_tokens(eng, NULL, 3, NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_submit_tokens(eng, prompt, 0, NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    kvw_last_error_info(&info);
    CHECK(info.reason == KVW_REJECT_EMPTY_PROMPT);
    CHECK_ST(kvw_submit_tokens(eng, prompt, n, NULL, NULL), KVW_ERR_INVALID_ARGUMENT);
    int32_t bad[2] = {1, 1 << 30};
    CHECK_ST(kvw_submit_tokens(eng, bad, 2, NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "vocabulary") != NULL);
    bad[1] = -3;
    CHECK_ST(kvw_submit_tokens(eng, bad, 2, NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    rp.struct_size = 12;
    CHECK_ST(kvw_submit_tokens(eng, prompt, n, &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    /* Too long for max_context: rejected with the numbers, as text prompts are. */
    int32_t max_ctx = 0;
    REQUIRE_OK(kvw_engine_max_context(eng, &max_ctx));
    int32_t* longp = calloc((size_t)max_ctx, sizeof *longp);
    CHECK_ST(kvw_submit_tokens(eng, longp, (size_t)max_ctx, NULL, &id), KVW_ERR_REJECTED);
    kvw_last_error_info(&info);
    CHECK(info.reason == KVW_REJECT_TOO_LONG && info.limit == max_ctx && info.prompt_tokens == max_ctx);
    CHECK(info.requested == max_ctx + KVW_DEFAULT_MAX_TOKENS);
    CHECK_ST(kvw_submit_tokens(eng, longp, (size_t)max_ctx - 1, NULL, &id), KVW_OK);
    CHECK_ST(run_to_end(eng, id), KVW_OK);
    kvw_request_free(eng, id);
    free(longp);
    CHECK_ST(kvw_submit_tokens(NULL, prompt, n, NULL, &id), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_submit_tokens((kvw_engine*)(uintptr_t)0x1234, prompt, n, NULL, &id), KVW_ERR_NOT_FOUND);

    /* An older (v2, 72-byte) params struct still works: no logprobs. */
    rp = kvw_request_default_params();
    rp.struct_size = 72;
    rp.logprobs = 1; /* beyond v2: must not be read */
    rp.max_tokens = 2;
    REQUIRE_OK(kvw_submit_tokens(eng, prompt, n, &rp, &id));
    CHECK_ST(run_to_end(eng, id), KVW_OK);
    CHECK_ST(kvw_request_logprobs(eng, id, NULL, 0, &np), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "did not ask") != NULL);
    kvw_request_free(eng, id);
}

static void test_max_tokens(kvw_engine* eng) {
    int32_t max_ctx = 0;
    REQUIRE_OK(kvw_engine_max_context(eng, &max_ctx));
    kvw_request_params rp = kvw_request_default_params();
    kvw_result res;
    kvw_result_init(&res);
    /* 0: the documented default. */
    CHECK(rp.max_tokens == 0);
    CHECK_ST(kvw_generate(eng, "x", &rp, NULL, NULL, NULL, 0, NULL, &res), KVW_OK);
    CHECK(res.generated_tokens == KVW_DEFAULT_MAX_TOKENS || res.finish_reason == KVW_FINISH_STOP);
    /* -1: until end of generation or the context is full. The synthetic
     * model has no EOS, so it fills the context. */
    rp.max_tokens = KVW_MAX_TOKENS_UNLIMITED;
    CHECK_ST(kvw_generate(eng, "x", &rp, NULL, NULL, NULL, 0, NULL, &res), KVW_OK);
    CHECK(res.finish_reason == KVW_FINISH_LENGTH);
    CHECK(res.prompt_tokens + res.generated_tokens == max_ctx);
    rp.max_tokens = -2;
    CHECK_ST(kvw_generate(eng, "x", &rp, NULL, NULL, NULL, 0, NULL, &res), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "KVW_MAX_TOKENS_UNLIMITED") != NULL);
}

static void test_logprobs(kvw_engine* eng) {
    int32_t n_vocab = 0;
    REQUIRE_OK(kvw_vocab_info(eng, &n_vocab, NULL, NULL));
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 5;
    rp.logprobs = 1;
    rp.top_logprobs = 3;
    rp.keep_logits = 1;
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, "Hello", &rp, &id));

    /* Still running (or not yet read): refused, not partial. */
    size_t n = 0;
    kvw_result res;
    kvw_result_init(&res);
    REQUIRE_OK(kvw_request_result(eng, id, &res));
    if (!res.done) CHECK_ST(kvw_request_logprobs(eng, id, NULL, 0, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(run_to_end(eng, id), KVW_OK);

    int32_t toks[8];
    size_t nt = 0;
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_GENERATED, toks, 8, &nt));
    CHECK_ST(kvw_request_logprobs(eng, id, NULL, 0, &n), KVW_OK);
    CHECK(n == nt && n == 5);
    kvw_token_logprob lp[8], top[KVW_MAX_TOP_LOGPROBS];
    CHECK_ST(kvw_request_logprobs(eng, id, lp, 2, &n), KVW_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 5);
    REQUIRE_OK(kvw_request_logprobs(eng, id, lp, 8, &n));
    for (size_t i = 0; i < n; i++) {
        CHECK(lp[i].token == toks[i]);
        CHECK(lp[i].logprob <= 0.0f && isfinite(lp[i].logprob));
        size_t nk = 0;
        REQUIRE_OK(kvw_request_top_logprobs(eng, id, i, top, KVW_MAX_TOP_LOGPROBS, &nk));
        CHECK(nk == 3);
        /* greedy: the chosen token is the most likely one */
        CHECK(top[0].token == lp[i].token && top[0].logprob == lp[i].logprob);
        CHECK(top[0].logprob >= top[1].logprob && top[1].logprob >= top[2].logprob);
    }
    CHECK_ST(kvw_request_top_logprobs(eng, id, 5, top, 3, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_request_top_logprobs(eng, id, 0, NULL, 3, &n), KVW_ERR_INVALID_ARGUMENT);

    /* The last step's logits: the log-softmax at the last token is its logprob. */
    size_t nl = 0;
    CHECK_ST(kvw_request_logits(eng, id, NULL, 0, &nl), KVW_OK);
    CHECK(nl == (size_t)n_vocab);
    float* logits = malloc(sizeof(float) * nl);
    CHECK_ST(kvw_request_logits(eng, id, logits, nl - 1, &nl), KVW_ERR_BUFFER_TOO_SMALL);
    REQUIRE_OK(kvw_request_logits(eng, id, logits, nl, &nl));
    double m = -INFINITY, sum = 0;
    for (size_t i = 0; i < nl; i++) m = logits[i] > m ? logits[i] : m;
    for (size_t i = 0; i < nl; i++) sum += exp(logits[i] - m);
    double want = logits[lp[4].token] - m - log(sum);
    CHECK(fabs(want - lp[4].logprob) < 1e-3);
    free(logits);
    CHECK_ST(kvw_request_logits(eng, id, NULL, 0, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_request_logprobs(eng, id, NULL, 4, &n), KVW_ERR_INVALID_ARGUMENT);
    REQUIRE_OK(kvw_request_free(eng, id));
    /* stale ID */
    CHECK_ST(kvw_request_logprobs(eng, id, lp, 8, &n), KVW_ERR_NOT_FOUND);
    CHECK_ST(kvw_request_logits(eng, id, NULL, 0, &n), KVW_ERR_NOT_FOUND);

    rp.top_logprobs = KVW_MAX_TOP_LOGPROBS + 1;
    CHECK_ST(kvw_submit(eng, "Hello", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
    rp.top_logprobs = -1;
    CHECK_ST(kvw_submit(eng, "Hello", &rp, &id), KVW_ERR_INVALID_ARGUMENT);

    /* Without keep_logits: refused. */
    rp = kvw_request_default_params();
    rp.max_tokens = 1;
    REQUIRE_OK(kvw_submit(eng, "Hello", &rp, &id));
    CHECK_ST(run_to_end(eng, id), KVW_OK);
    CHECK_ST(kvw_request_logits(eng, id, NULL, 0, &n), KVW_ERR_INVALID_ARGUMENT);
    kvw_request_free(eng, id);
}

static void test_state(kvw_engine* eng, kvw_engine* other) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 6;
    rp.tenant = "t";
    uint64_t id = 0;
    REQUIRE_OK(kvw_submit(eng, "Once upon a time there was", &rp, &id));
    size_t size = 0;
    /* running: refused */
    kvw_result res;
    kvw_result_init(&res);
    REQUIRE_OK(kvw_request_result(eng, id, &res));
    if (!res.done) CHECK_ST(kvw_request_state_save(eng, id, NULL, 0, &size), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(run_to_end(eng, id), KVW_OK);
    REQUIRE_OK(kvw_request_result(eng, id, &res));

    CHECK_ST(kvw_request_state_save(eng, id, NULL, 0, &size), KVW_OK);
    CHECK(size > 0);
    uint8_t* st = malloc(size);
    size_t got = 0;
    CHECK_ST(kvw_request_state_save(eng, id, st, size - 1, &got), KVW_ERR_BUFFER_TOO_SMALL);
    CHECK(got == size);
    REQUIRE_OK(kvw_request_state_save(eng, id, st, size, &got));
    CHECK(got == size);

    int32_t ctx[64];
    size_t nctx = 0, ngen = 0;
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_PROMPT, ctx, 64, &nctx));
    REQUIRE_OK(kvw_request_tokens(eng, id, KVW_TOKENS_GENERATED, ctx + nctx, 64 - nctx, &ngen));
    kvw_request_free(eng, id);

    int32_t loaded[64];
    size_t nl = 0;
    CHECK_ST(kvw_state_load(eng, st, size, NULL, 0, &nl), KVW_OK);
    CHECK(nl == nctx + ngen);
    CHECK_ST(kvw_state_load(eng, st, size, loaded, 2, &nl), KVW_ERR_BUFFER_TOO_SMALL);
    REQUIRE_OK(kvw_state_load(eng, st, size, loaded, 64, &nl));
    CHECK(nl == nctx + ngen && memcmp(loaded, ctx, nl * sizeof ctx[0]) == 0);

    /* Continue from it: the saved part comes from the tenant's prefix cache. */
    loaded[nl] = loaded[nl - 1];
    REQUIRE_OK(kvw_submit_tokens(eng, loaded, nl + 1, &rp, &id));
    CHECK_ST(run_to_end(eng, id), KVW_OK);
    REQUIRE_OK(kvw_request_result(eng, id, &res));
    CHECK(res.cached_tokens > 0);
    kvw_request_free(eng, id);

    /* kvw_state_save of the same tokens gives the same bytes. */
    uint8_t* st2 = malloc(size);
    REQUIRE_OK(kvw_state_save(eng, ctx, nctx + ngen, st2, size, &got));
    CHECK(got == size && memcmp(st, st2, size) == 0);

    /* Another model: refused, and says so. */
    CHECK_ST(kvw_state_load(other, st, size, loaded, 64, &nl), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "another model") != NULL);
    /* Altered or cut short: refused. */
    st2[size - 40] ^= 1;
    CHECK_ST(kvw_state_load(eng, st2, size, loaded, 64, &nl), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "invalid saved state") != NULL);
    CHECK_ST(kvw_state_load(eng, st, size - 1, loaded, 64, &nl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_load(eng, st, 0, loaded, 64, &nl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_load(eng, NULL, size, loaded, 64, &nl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_load(eng, st, size, NULL, 64, &nl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_load(eng, st, size, loaded, 64, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_save(eng, ctx, 0, st2, size, &got), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_save(eng, NULL, 3, st2, size, &got), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_save(eng, ctx, 3, NULL, 5, &got), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_state_save(eng, ctx, 3, st2, size, NULL), KVW_ERR_INVALID_ARGUMENT);
    int32_t bad[1] = {-1};
    CHECK_ST(kvw_state_save(eng, bad, 1, st2, size, &got), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_request_state_save(eng, id, st2, size, &got), KVW_ERR_NOT_FOUND);
    free(st);
    free(st2);
}

static void test_tokenize_flags(kvw_engine* eng) {
    int32_t bos = -1;
    REQUIRE_OK(kvw_vocab_info(eng, NULL, &bos, NULL));
    int32_t t[16];
    size_t n = 0;
    REQUIRE_OK(kvw_tokenize_ex(eng, "hi", KVW_TOKENIZE_ADD_BOS, t, 16, &n));
    CHECK(n >= 2 && t[0] == bos);
    size_t n2 = 0;
    REQUIRE_OK(kvw_tokenize_ex(eng, "hi", 0, t, 16, &n2));
    CHECK(n2 == n - 1);
    CHECK_ST(kvw_tokenize_ex(eng, "hi", 8, t, 16, &n), KVW_ERR_INVALID_ARGUMENT);

    int32_t ids[3] = {bos, 0, 0};
    size_t k = 0;
    REQUIRE_OK(kvw_tokenize_ex(eng, "hi", 0, ids + 1, 2, &k));
    char plain[64], special[64];
    size_t lp = 0, ls = 0;
    REQUIRE_OK(kvw_detokenize_ex(eng, ids, 1 + k, 0, plain, sizeof plain, &lp));
    REQUIRE_OK(kvw_detokenize_ex(eng, ids, 1 + k, KVW_DETOKENIZE_SPECIAL, special, sizeof special, &ls));
    CHECK(ls > lp);                               /* BOS shows as its text */
    CHECK(strcmp(special + (ls - lp), plain) == 0); /* followed by the same text */
    CHECK_ST(kvw_detokenize_ex(eng, ids, 1 + k, 2, special, sizeof special, &ls), KVW_ERR_INVALID_ARGUMENT);
}

static void test_model_info(kvw_engine* eng) {
    kvw_model_info mi;
    kvw_model_info_init(&mi);
    REQUIRE_OK(kvw_model_info_get(eng, &mi));
    int32_t n_vocab = 0;
    REQUIRE_OK(kvw_vocab_info(eng, &n_vocab, NULL, NULL));
    CHECK(mi.struct_size == sizeof mi && mi.n_embd > 0 && mi.n_layer > 0 && mi.n_vocab == n_vocab);
    CHECK_ST(kvw_model_info_get(eng, NULL), KVW_ERR_INVALID_ARGUMENT);
    mi.struct_size = 3;
    CHECK_ST(kvw_model_info_get(eng, &mi), KVW_ERR_INVALID_ARGUMENT);
    /* an older, smaller output struct gets what fits */
    mi.struct_size = 16;
    mi.n_head_kv = -7;
    REQUIRE_OK(kvw_model_info_get(eng, &mi));
    CHECK(mi.struct_size == 16 && mi.n_head_kv == -7);

    int32_t count = 0;
    REQUIRE_OK(kvw_model_meta_count(eng, &count));
    CHECK(count > 0);
    char key[256], val[256];
    size_t kl = 0, vl = 0;
    int found = 0;
    for (int32_t i = 0; i < count; i++) {
        REQUIRE_OK(kvw_model_meta_key_by_index(eng, i, key, sizeof key, &kl));
        REQUIRE_OK(kvw_model_meta_val_by_index(eng, i, NULL, 0, &vl));
        if (vl >= sizeof val) continue;
        REQUIRE_OK(kvw_model_meta_val_by_index(eng, i, val, sizeof val, &vl));
        if (strcmp(key, "general.architecture") == 0) found = strcmp(val, "llama") == 0;
    }
    CHECK(found);
    REQUIRE_OK(kvw_model_meta_val_str(eng, "general.architecture", val, sizeof val, &vl));
    CHECK(strcmp(val, "llama") == 0 && vl == 5);
    CHECK_ST(kvw_model_meta_val_str(eng, "general.architecture", val, 5, &vl), KVW_ERR_BUFFER_TOO_SMALL);
    CHECK_ST(kvw_model_meta_val_str(eng, "no.such.key", val, sizeof val, &vl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_model_meta_val_str(eng, NULL, val, sizeof val, &vl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_model_meta_key_by_index(eng, count, key, sizeof key, &kl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_model_meta_key_by_index(eng, -1, key, sizeof key, &kl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_model_meta_key_by_index(eng, 0, NULL, 4, &kl), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_model_meta_count(eng, NULL), KVW_ERR_INVALID_ARGUMENT);
}

static void test_gguf_metadata(void) {
    char path[1024];
    if (test_model("stories260K.gguf", path, sizeof path) == NULL) {
        printf("test_tokens: stories260K.gguf not found, GGUF metadata part skipped\n");
        return;
    }
    kvw_engine* eng = open_engine(path);
    char val[64];
    size_t vl = 0;
    REQUIRE_OK(kvw_model_meta_val_str(eng, "llama.embedding_length", val, sizeof val, &vl));
    CHECK(strcmp(val, "64") == 0);
    /* arrays are left out, as llama.cpp leaves them out */
    CHECK_ST(kvw_model_meta_val_str(eng, "tokenizer.ggml.tokens", val, sizeof val, &vl), KVW_ERR_INVALID_ARGUMENT);
    REQUIRE_OK(kvw_engine_close(eng));
}

static void test_pull_arguments(void) {
    char path[256];
    size_t n = 0;
    CHECK_ST(kvw_pull(NULL, NULL, NULL, NULL, NULL, path, sizeof path, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_pull("not a ref", NULL, NULL, NULL, NULL, path, sizeof path, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "bad model reference") != NULL);
    CHECK_ST(kvw_pull("owner/repo:file.gguf", "x.gguf", NULL, NULL, NULL, path, sizeof path, &n),
             KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_pull("owner/repo", NULL, NULL, NULL, NULL, NULL, 5, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_pull("owner/repo", NULL, NULL, NULL, NULL, path, sizeof path, NULL), KVW_ERR_INVALID_ARGUMENT);
}

static void test_closed(kvw_engine* eng) {
    int32_t t[4] = {1, 2, 3, 4};
    size_t n = 0;
    uint64_t id = 0;
    int32_t count = 0;
    kvw_model_info mi;
    kvw_model_info_init(&mi);
    CHECK_ST(kvw_submit_tokens(eng, t, 4, NULL, &id), KVW_ERR_CLOSED);
    CHECK_ST(kvw_request_logprobs(eng, 1, NULL, 0, &n), KVW_ERR_CLOSED);
    CHECK_ST(kvw_state_save(eng, t, 4, NULL, 0, &n), KVW_ERR_CLOSED);
    CHECK_ST(kvw_state_load(eng, (const uint8_t*)"x", 1, NULL, 0, &n), KVW_ERR_CLOSED);
    CHECK_ST(kvw_model_meta_count(eng, &count), KVW_ERR_CLOSED);
    CHECK_ST(kvw_model_info_get(eng, &mi), KVW_ERR_CLOSED);
    CHECK_ST(kvw_detokenize_ex(eng, t, 4, 0, NULL, 0, &n), KVW_ERR_CLOSED);
}

int main(void) {
    kvw_engine* eng = open_engine(NULL);
    kvw_engine* stories = open_engine("builtin:stories260K");
    test_token_requests(eng);
    test_max_tokens(eng);
    test_logprobs(eng);
    test_state(eng, stories);
    test_tokenize_flags(stories);
    test_model_info(stories);
    test_gguf_metadata();
    test_pull_arguments();
    REQUIRE_OK(kvw_engine_close(stories));
    REQUIRE_OK(kvw_engine_close(eng));
    test_closed(eng);
    return finish("test_tokens");
}
