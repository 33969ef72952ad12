/* Consumer of an installed kvwarden: generates with the built-in model. */
#include <stdio.h>
#include <string.h>

#include <kvwarden.h>

int main(void) {
    if (strcmp(kvw_version(), KVW_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", KVW_VERSION_STRING, kvw_version());
        return 1;
    }
    kvw_engine* eng = NULL;
    kvw_engine_params ep = kvw_engine_default_params();
    ep.kv_memory_bytes = 4 << 20;
    if (kvw_engine_open(NULL, &ep, &eng) != KVW_OK) {
        fprintf(stderr, "open: %s\n", kvw_last_error());
        return 1;
    }
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 8;
    char out[256];
    size_t len = 0;
    int32_t st = kvw_generate(eng, "hi", &rp, NULL, NULL, out, sizeof out, &len, NULL);
    kvw_engine_close(eng);
    if (st != KVW_OK) {
        fprintf(stderr, "generate: %s\n", kvw_last_error());
        return 1;
    }
    printf("consumer generated %zu bytes with kvwarden %s\n", len, kvw_version());
    return 0;
}
