/* kvwarden C example: open an engine, generate with a streaming callback,
 * stream a second request with kvw_submit/kvw_next, tokenize, and print the
 * engine's stats.
 *
 *   example [model.bin tokenizer.bin] [prompt]
 *
 * Without a model it uses the built-in synthetic model (random weights, so
 * the text is gibberish). With shared/models/stories260K.bin + tok512.bin it
 * prints a short story. Build: cc example.c $(pkg-config --cflags --libs kvwarden)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvwarden.h>

static int32_t print_piece(const char* piece, size_t len, void* user_data) {
    (void)user_data;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0; /* non-zero would abort the request */
}

static int die(const char* what, int32_t st) {
    fprintf(stderr, "%s failed: %s: %s\n", what, kvw_status_string(st), kvw_last_error());
    return 1;
}

int main(int argc, char** argv) {
    const char* model = argc > 2 ? argv[1] : NULL;
    const char* prompt = argc > 3 ? argv[3] : (argc == 2 ? argv[1] : "Once upon a time");

    kvw_engine_params ep = kvw_engine_default_params();
    ep.tokenizer_path = argc > 2 ? argv[2] : NULL;
    ep.kv_memory_bytes = 8 << 20;

    printf("kvwarden %s\n", kvw_version());
    kvw_engine* eng = NULL;
    int32_t st = kvw_engine_open(model, &ep, &eng);
    if (st != KVW_OK) return die("kvw_engine_open", st);

    /* Tokenize with the size-query pattern. */
    size_t n = 0;
    st = kvw_tokenize(eng, prompt, 1, NULL, 0, &n);
    if (st != KVW_OK) return die("kvw_tokenize", st);
    int32_t* ids = malloc(n * sizeof *ids);
    st = kvw_tokenize(eng, prompt, 1, ids, n, &n);
    if (st != KVW_OK) return die("kvw_tokenize", st);
    printf("prompt tokens:");
    for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
    free(ids);

    /* 1. Blocking generation, streamed through a callback. */
    kvw_request_params rp = kvw_request_default_params(); /* greedy */
    rp.max_tokens = 64;
    kvw_result res;
    kvw_result_init(&res);
    printf("generate: %s", prompt);
    st = kvw_generate(eng, prompt, &rp, print_piece, NULL, NULL, 0, NULL, &res);
    printf("\n");
    if (st != KVW_OK) return die("kvw_generate", st);
    printf("finish_reason=%d prompt_tokens=%d generated_tokens=%d decode_tps=%.0f\n",
           res.finish_reason, res.prompt_tokens, res.generated_tokens, res.decode_tps);

    /* 2. Submit and pull the text piece by piece, with a stop string. */
    const char* stops[] = {"."};
    rp.stop = stops;
    rp.n_stop = 1;
    rp.tenant = "example-user";
    uint64_t id = 0;
    st = kvw_submit(eng, prompt, &rp, &id);
    if (st != KVW_OK) return die("kvw_submit", st);
    printf("stream: %s", prompt);
    char buf[256];
    for (;;) {
        size_t len = 0;
        int32_t done = 0;
        st = kvw_next(eng, id, 1000, buf, sizeof buf, &len, &done);
        if (st == KVW_ERR_TIMEOUT) continue;
        if (st != KVW_OK) return die("kvw_next", st);
        fwrite(buf, 1, len, stdout);
        if (done) break;
    }
    printf("\n");
    kvw_result_init(&res);
    kvw_request_result(eng, id, &res);
    printf("stream finish_reason=%d (1 = stop string or EOS)\n", res.finish_reason);
    kvw_request_free(eng, id);

    /* 3. A rejection: a prompt longer than max_context. */
    int32_t max_ctx = 0;
    kvw_engine_max_context(eng, &max_ctx);
    size_t long_len = (size_t)max_ctx * 2 + 16;
    char* long_prompt = malloc(long_len + 1);
    for (size_t i = 0; i < long_len; i++) long_prompt[i] = i % 2 ? ' ' : 'a';
    long_prompt[long_len] = 0;
    st = kvw_submit(eng, long_prompt, NULL, &id);
    free(long_prompt);
    kvw_error_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    kvw_last_error_info(&info);
    printf("long prompt: %s (reason %d, requested %lld, limit %lld): %s\n", kvw_status_string(st),
           info.reason, (long long)info.requested, (long long)info.limit, kvw_last_error());

    kvw_stats stats;
    kvw_stats_init(&stats);
    kvw_engine_stats(eng, &stats);
    printf("stats: submitted=%llu finished=%llu rejected=%llu generated_tokens=%llu pool_pages=%lld "
           "isolation_failures=%llu\n",
           (unsigned long long)stats.submitted, (unsigned long long)stats.finished,
           (unsigned long long)stats.rejected, (unsigned long long)stats.generated_tokens,
           (long long)stats.pool_pages, (unsigned long long)stats.isolation_failures);

    st = kvw_engine_close(eng);
    if (st != KVW_OK) return die("kvw_engine_close", st);
    printf("ok\n");
    return 0;
}
