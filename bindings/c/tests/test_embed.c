/* Embeddings and reranking through the C API: kvw_embed (size query,
 * BUFFER_TOO_SMALL, unit norm, the same vector alone and in a list, bad
 * input) on the built-in model with an explicit pooling, and kvw_rerank on
 * a random-weight BERT cross-encoder written by
 * `go run ./internal/embedtest/mkembed` ($KVWARDEN_TEST_EMBED_DIR). */
#include <math.h>
#include <stdint.h>

#include "test_util.h"

static kvw_engine* open_engine(const char* model) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_type = "f32";
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open(model, &p, &eng));
    return eng;
}

static void test_embed_builtin(void) {
    kvw_engine* e = open_engine(NULL);
    const char* one[] = {"hello world"};
    const char* two[] = {"first input", "hello world"};
    kvw_embed_params p = kvw_embed_default_params();
    size_t n = 0;
    int32_t dim = 0;

    /* The built-in model is generative: no pooling unless asked for. */
    CHECK_ST(kvw_embed(e, one, 1, &p, NULL, 0, &n, &dim), KVW_OK); /* size query computes nothing */
    float tiny[4];
    p.pooling = KVW_POOLING_MODEL;
    CHECK_ST(kvw_embed(e, one, 1, NULL, tiny, 4, &n, &dim), KVW_ERR_BUFFER_TOO_SMALL);
    float big[2 * 256];
    CHECK_ST(kvw_embed(e, one, 1, NULL, big, 2 * 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "pooling") != NULL);

    p.pooling = KVW_POOLING_LAST;
    REQUIRE_OK(kvw_embed(e, two, 2, &p, NULL, 0, &n, &dim));
    CHECK(dim == 256);
    CHECK(n == 2 * 256);
    REQUIRE_OK(kvw_embed(e, two, 2, &p, big, 2 * 256, &n, &dim));
    float alone[256];
    REQUIRE_OK(kvw_embed(e, one, 1, &p, alone, 256, &n, &dim));
    CHECK(memcmp(alone, big + 256, sizeof alone) == 0); /* bit-identical alone and in a list */
    double ss = 0;
    for (int i = 0; i < 256; i++) ss += (double)alone[i] * alone[i];
    CHECK(fabs(ss - 1) < 1e-5);

    /* Matryoshka dimensions, renormalized. */
    p.dimensions = 16;
    float small[16];
    REQUIRE_OK(kvw_embed(e, one, 1, &p, small, 16, &n, &dim));
    CHECK(dim == 16 && n == 16);
    ss = 0;
    for (int i = 0; i < 16; i++) ss += (double)small[i] * small[i];
    CHECK(fabs(ss - 1) < 1e-5);
    p.dimensions = 257;
    CHECK_ST(kvw_embed(e, one, 1, &p, big, 2 * 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "dimensions") != NULL);
    p.dimensions = 0;

    /* Bad input. */
    const char* empty[] = {"a", ""};
    CHECK_ST(kvw_embed(e, empty, 2, &p, big, 2 * 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "input[1]") != NULL);
    const char* null_in[] = {NULL};
    CHECK_ST(kvw_embed(e, null_in, 1, &p, big, 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_embed(e, one, 0, &p, big, 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_embed(e, NULL, 1, &p, big, 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_embed(e, one, 1, &p, big, 256, NULL, &dim), KVW_ERR_INVALID_ARGUMENT);
    p.pooling = KVW_POOLING_RANK;
    CHECK_ST(kvw_embed(e, one, 1, &p, big, 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    p.pooling = 99;
    CHECK_ST(kvw_embed(e, one, 1, &p, big, 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    p = kvw_embed_default_params();
    p.struct_size = 12;
    CHECK_ST(kvw_embed(e, one, 1, &p, big, 256, &n, &dim), KVW_ERR_INVALID_ARGUMENT);

    /* A generative model cannot rerank. */
    float scores[2];
    CHECK_ST(kvw_rerank(e, "q", two, 2, NULL, scores, 2, &n), KVW_ERR_INVALID_ARGUMENT);
    REQUIRE_OK(kvw_engine_close(e));
    CHECK_ST(kvw_embed(e, one, 1, NULL, big, 256, &n, &dim), KVW_ERR_CLOSED);
}

/* Per-token vectors (pooling none): the size query's counts, the layout
 * (input after input), each token's row as pooling last sees it. */
static void test_embed_tokens(void) {
    kvw_engine* e = open_engine(NULL);
    const char* two[] = {"first input", "hello world"};
    kvw_embed_params p = kvw_embed_default_params();
    size_t n = 0, counts[2] = {0, 0};
    int32_t dim = 0;
    REQUIRE_OK(kvw_embed_tokens(e, two, 2, &p, NULL, 0, &n, &dim, counts));
    CHECK(dim == 256);
    CHECK(counts[0] > 0 && counts[1] > 0);
    CHECK(n == (counts[0] + counts[1]) * 256);
    float* all = malloc(n * sizeof(float));
    CHECK_ST(kvw_embed_tokens(e, two, 2, &p, all, n - 1, &n, &dim, NULL), KVW_ERR_BUFFER_TOO_SMALL);
    REQUIRE_OK(kvw_embed_tokens(e, two, 2, &p, all, n, &n, &dim, NULL));
    /* The last token of input 1 is what pooling last returns for it. */
    float last[256];
    size_t m = 0;
    p.pooling = KVW_POOLING_LAST;
    REQUIRE_OK(kvw_embed(e, two + 1, 1, &p, last, 256, &m, &dim));
    CHECK(memcmp(last, all + (counts[0] + counts[1] - 1) * 256, sizeof last) == 0);
    /* Each token's vector is unit norm. */
    for (size_t t = 0; t < counts[0] + counts[1]; t++) {
        double ss = 0;
        for (int i = 0; i < 256; i++) ss += (double)all[t * 256 + i] * all[t * 256 + i];
        CHECK(fabs(ss - 1) < 1e-5);
    }
    /* Only pooling none (or the model's, meaning none here). */
    CHECK_ST(kvw_embed_tokens(e, two, 2, &p, all, n, &n, &dim, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "pooling") != NULL);
    p.pooling = KVW_POOLING_NONE;
    CHECK_ST(kvw_embed(e, two, 2, &p, all, n, &n, &dim), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "kvw_embed_tokens") != NULL);
    const char* empty[] = {"a", ""};
    CHECK_ST(kvw_embed_tokens(e, empty, 2, &p, NULL, 0, &n, &dim, counts), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "input[1]") != NULL);
    CHECK_ST(kvw_embed_tokens(e, two, 2, &p, NULL, 0, NULL, &dim, counts), KVW_ERR_INVALID_ARGUMENT);
    free(all);
    REQUIRE_OK(kvw_engine_close(e));
}

static int test_rerank_bert(void) {
    const char* dir = getenv("KVWARDEN_TEST_EMBED_DIR");
    char path[4096];
    if (dir == NULL || *dir == 0) return missing_model("KVWARDEN_TEST_EMBED_DIR");
    snprintf(path, sizeof path, "%s/bert-rank.gguf", dir);
    kvw_engine* e = open_engine(path);
    const char* docs[] = {"Paris is the capital of France.", "The quick brown fox.", "hello world"};
    size_t n = 0;
    REQUIRE_OK(kvw_rerank(e, "capital of france", docs, 3, "acme", NULL, 0, &n));
    CHECK(n == 3);
    float scores[3], again[3];
    CHECK_ST(kvw_rerank(e, "capital of france", docs, 3, NULL, scores, 2, &n), KVW_ERR_BUFFER_TOO_SMALL);
    REQUIRE_OK(kvw_rerank(e, "capital of france", docs, 3, NULL, scores, 3, &n));
    for (int i = 0; i < 3; i++) CHECK(isfinite(scores[i]));
    CHECK(scores[0] != scores[1]);
    /* Each document's score is its own: the same scored alone. */
    for (int i = 0; i < 3; i++) {
        REQUIRE_OK(kvw_rerank(e, "capital of france", docs + i, 1, NULL, again + i, 1, &n));
        CHECK(again[i] == scores[i]);
    }
    CHECK_ST(kvw_rerank(e, "", docs, 3, NULL, scores, 3, &n), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_rerank(e, NULL, docs, 3, NULL, scores, 3, &n), KVW_ERR_INVALID_ARGUMENT);
    const char* empty[] = {"a", ""};
    CHECK_ST(kvw_rerank(e, "q", empty, 2, NULL, scores, 3, &n), KVW_ERR_INVALID_ARGUMENT);
    /* An encoder cannot generate. */
    char buf[64];
    size_t len = 0;
    CHECK(kvw_generate(e, "hello", NULL, NULL, NULL, buf, sizeof buf, &len, NULL) != KVW_OK);
    REQUIRE_OK(kvw_engine_close(e));
    return 0;
}

int main(void) {
    test_embed_builtin();
    test_embed_tokens();
    int rc = test_rerank_bert();
    if (rc != 0 && g_failures == 0) return rc;
    return finish("test_embed");
}
