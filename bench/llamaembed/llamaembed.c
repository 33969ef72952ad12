/* llamaembed: llama.cpp's pooled embeddings of token inputs, for the
 * side-by-side check of kvwarden's (engine TestEmbedAgainstLlamaCpp).
 *
 *   llamaembed MODEL.gguf POOLING < inputs
 *
 * POOLING is llama.cpp's pooling type (-1: the model's). Each stdin line is
 * one input, its token IDs separated by spaces; each input is computed
 * alone (its own batch, the memory cleared between inputs) and printed as
 * one line: the pooled embedding (not normalized; with rank pooling the
 * classification scores) as %.9g values. KV_F32=1 in the environment
 * makes the KV cache f32 (no flash attention). BATCH=1 computes all inputs
 * in one batch (one sequence each, as a server batches them) and prints the
 * seconds the computation took (model loading excluded) on stderr as
 * "compute_seconds S"; THREADS=n sets the thread count (default 1). With
 * TOKENIZE=1 in the
 * environment each stdin line is text instead, and the line printed is
 * its tokens (llama_tokenize with add_special, parse_special off).
 *
 * Build against an existing llama.cpp build (see docs/EMBEDDINGS.md):
 *   cc -O2 -I$LLAMA/include -I$LLAMA/ggml/include llamaembed.c \
 *      -L$LLAMA/build/bin -lllama -Wl,-rpath,$LLAMA/build/bin -o llamaembed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char* text, void* ud) {
    (void)level, (void)text, (void)ud;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: llamaembed MODEL.gguf POOLING < inputs\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (model == NULL) {
        fprintf(stderr, "llamaembed: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab* vocab = llama_model_get_vocab(model);
    static char line[1 << 20];
    if (getenv("TOKENIZE") != NULL) {
        static llama_token toks[1 << 16];
        while (fgets(line, sizeof line, stdin) != NULL) {
            size_t len = strcspn(line, "\n");
            int n = llama_tokenize(vocab, line, (int32_t)len, toks, 1 << 16, true, false);
            for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", toks[i]);
            printf("\n");
        }
        return 0;
    }
    /* Read every input first: BATCH sizes the context by them. */
    static int toks[1 << 16];
    int starts[1025], n_in = 0, n_tok = 0;
    while (n_in < 1024 && fgets(line, sizeof line, stdin) != NULL) {
        starts[n_in++] = n_tok;
        for (char* p = strtok(line, " \n"); p != NULL && n_tok < (1 << 16); p = strtok(NULL, " \n")) toks[n_tok++] = atoi(p);
    }
    starts[n_in] = n_tok;
    const int batched = getenv("BATCH") != NULL;
    struct llama_context_params cp = llama_context_default_params();
    cp.embeddings = true;
    cp.n_ctx = batched ? (uint32_t)(n_tok + 512) : 512;
    cp.n_batch = cp.n_ubatch = batched ? (uint32_t)n_tok : 512;
    cp.n_seq_max = batched ? (uint32_t)n_in : 1;
    cp.n_threads = cp.n_threads_batch = getenv("THREADS") ? atoi(getenv("THREADS")) : 1;
    cp.pooling_type = (enum llama_pooling_type)atoi(argv[2]);
    if (getenv("KV_F32") != NULL) { /* an f32 KV cache, no flash attention: exact K/V */
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    struct llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        fprintf(stderr, "llamaembed: cannot make a context\n");
        return 1;
    }
    const int n_embd = llama_model_n_embd(model);
    const int n_out = llama_pooling_type(ctx) == LLAMA_POOLING_TYPE_RANK ? llama_model_n_cls_out(model) : n_embd;
    const int cap = batched ? n_tok : 512;
    struct llama_batch batch = llama_batch_init(cap, 0, 1);
    const int encoder = llama_model_has_encoder(model) && !llama_model_has_decoder(model);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int in = 0; in < n_in; in++) {
        if (!batched || in == 0) {
            batch.n_tokens = 0;
            llama_memory_clear(llama_get_memory(ctx), true);
        }
        for (int j = starts[in]; j < starts[in + 1] && batch.n_tokens < cap; j++) {
            int i = batch.n_tokens++;
            batch.token[i] = toks[j];
            batch.pos[i] = j - starts[in];
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = batched ? in : 0;
            batch.logits[i] = 1;
        }
        if (batched && in < n_in - 1) continue;
        int rc = encoder ? llama_encode(ctx, batch) : llama_decode(ctx, batch);
        if (rc != 0) {
            fprintf(stderr, "llamaembed: decode failed: %d\n", rc);
            return 1;
        }
        for (int s = batched ? 0 : in; s <= in; s++) {
            const float* e = llama_get_embeddings_seq(ctx, batched ? s : 0);
            if (e == NULL) {
                fprintf(stderr, "llamaembed: no pooled embedding (pooling none?)\n");
                return 1;
            }
            for (int i = 0; i < n_out; i++) printf(i ? " %.9g" : "%.9g", e[i]);
            printf("\n");
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "compute_seconds %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
