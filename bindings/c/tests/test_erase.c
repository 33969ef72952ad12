/* kvw_tenant_erase_kv: after the erasure, the tenant's prompt is a prefix
 * miss with the same output; another tenant keeps its hits; misuse is
 * refused. The disk tier (kvw_engine_params v5): a prefix written by one
 * engine is a hit in the next one with the same key file, erased by
 * kvw_tenant_erase_kv. Runs on the built-in model. */
#include <dirent.h>
#include <stdint.h>

#include "test_util.h"

static const char* prompt =
    "Once upon a time there was a little girl who lived in a village near the forest, "
    "and every day she walked to the river to watch the fish swim by.";

static kvw_result run(kvw_engine* eng, const char* tenant, char* out, size_t size) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 4;
    rp.seed = 7;
    rp.tenant = tenant;
    kvw_result r;
    kvw_result_init(&r);
    REQUIRE_OK(kvw_generate(eng, prompt, &rp, NULL, NULL, out, size, NULL, &r));
    return r;
}

static kvw_engine* open_disk(const char* dir, const char* key) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    p.page_size = 4;
    p.host_tier_bytes = 1 << 20;
    p.kv_key_file = key;
    p.kv_disk_dir = dir;
    p.kv_disk_budget_bytes = 16 << 20;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open(NULL, &p, &eng));
    return eng;
}

/* Removes dir's files and dir (one level: the disk tier has no subdirectories). */
static void remove_dir(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) return;
    struct dirent* e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void test_disk_tier(void) {
    char dir[] = "/tmp/kvw_test_erase_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        CHECK(0);
        return;
    }
    char key[256], disk[256];
    snprintf(key, sizeof key, "%s/kv.key", dir);
    snprintf(disk, sizeof disk, "%s/kv", dir);
    FILE* f = fopen(key, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    for (int i = 0; i < 32; i++) fputc(i * 7 + 1, f);
    fclose(f);

    char first[512], again[512];
    kvw_engine* eng = open_disk(disk, key);
    run(eng, "alice", first, sizeof first);
    REQUIRE_OK(kvw_engine_close(eng)); /* writes the prefix cache to disk */

    eng = open_disk(disk, key);
    kvw_result r = run(eng, "bob", again, sizeof again);
    CHECK(r.cached_tokens == 0);
    r = run(eng, "alice", again, sizeof again);
    CHECK(r.cached_tokens > 0);
    CHECK(strcmp(first, again) == 0);
    kvw_erase_result er;
    kvw_erase_result_init(&er);
    REQUIRE_OK(kvw_tenant_erase_kv(eng, "alice", &er));
    CHECK(er.prefix_device_pages > 0);
    r = run(eng, "alice", again, sizeof again);
    CHECK(r.cached_tokens == 0);
    REQUIRE_OK(kvw_engine_close(eng));

    /* A budget without a directory is refused. */
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_disk_budget_bytes = 1 << 20;
    eng = NULL;
    CHECK_ST(kvw_engine_open(NULL, &p, &eng), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "disk") != NULL);
    remove_dir(disk);
    remove_dir(dir);
}

int main(void) {
    test_disk_tier();
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    p.page_size = 4;
    p.host_tier_bytes = 1 << 20;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open(NULL, &p, &eng));

    char first[512], again[512];
    run(eng, "alice", first, sizeof first);
    kvw_result r = run(eng, "alice", again, sizeof again);
    CHECK(r.cached_tokens > 0);
    CHECK(strcmp(first, again) == 0);
    run(eng, "bob", again, sizeof again);
    kvw_result bob = run(eng, "bob", again, sizeof again);
    CHECK(bob.cached_tokens > 0);

    kvw_erase_result er;
    kvw_erase_result_init(&er);
    REQUIRE_OK(kvw_tenant_erase_kv(eng, "alice", &er));
    CHECK(er.struct_size == sizeof er);
    CHECK(er.key_epoch == 2);
    CHECK(er.prefix_device_pages + er.prefix_host_pages >= r.cached_tokens / 4);

    r = run(eng, "alice", again, sizeof again);
    CHECK(r.cached_tokens == 0);
    CHECK(strcmp(first, again) == 0);
    kvw_result bob2 = run(eng, "bob", again, sizeof again);
    CHECK(bob2.cached_tokens == bob.cached_tokens);

    /* out is optional; misuse is refused with a message. */
    REQUIRE_OK(kvw_tenant_erase_kv(eng, "alice", NULL));
    CHECK_ST(kvw_tenant_erase_kv(eng, NULL, NULL), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_tenant_erase_kv(NULL, "alice", NULL), KVW_ERR_INVALID_ARGUMENT);
    kvw_erase_result small = {4, 0, 0, 0, 0, 0, 0};
    CHECK_ST(kvw_tenant_erase_kv(eng, "alice", &small), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_tenant_erase_kv(eng, "\xff", NULL), KVW_ERR_INVALID_ARGUMENT);

    kvw_stats st;
    kvw_stats_init(&st);
    REQUIRE_OK(kvw_engine_stats(eng, &st));
    CHECK(st.isolation_failures == 0);
    REQUIRE_OK(kvw_engine_close(eng));
    CHECK_ST(kvw_tenant_erase_kv(eng, "alice", NULL), KVW_ERR_CLOSED);
    if (g_failures) {
        fprintf(stderr, "%d failures\n", g_failures);
        return 1;
    }
    puts("test_erase: ok");
    return 0;
}
