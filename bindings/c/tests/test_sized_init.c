/* The sized fillers (T_init_sized) write exactly the size the caller gives:
 * a caller built against an older, smaller header gets its version's prefix
 * of the defaults and not one byte past it. The header's inline
 * *_default_params / *_init wrappers pass the caller's sizeof, and the old
 * exported symbols stay for binaries built against earlier headers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <stdint.h>

#include "test_util.h"

#define CANARY 0xA5
#define OFF 64 /* the struct sits this far into the canary-filled arena */

typedef int32_t (*filler)(void* out, uint32_t size);

/* Wrappers with one signature, so the table below can hold every filler. */
#define WRAP(T)                                                                       \
    static int32_t fill_##T(void* out, uint32_t size) { return T##_init_sized((T*)out, size); }
WRAP(kvw_engine_params)
WRAP(kvw_request_params)
WRAP(kvw_embed_params)
WRAP(kvw_result)
WRAP(kvw_model_info)
WRAP(kvw_stats)
WRAP(kvw_erase_result)

typedef struct {
    const char* name;
    filler fill;
    uint32_t v1;   /* the struct's first published size */
    uint32_t full; /* this header's (and library's) size */
    int input;     /* a parameter struct: a bigger caller keeps its size */
} kind;

static const kind kinds[] = {
    {"kvw_engine_params", fill_kvw_engine_params, 112, sizeof(kvw_engine_params), 1},
    {"kvw_request_params", fill_kvw_request_params, 64, sizeof(kvw_request_params), 1},
    {"kvw_embed_params", fill_kvw_embed_params, 32, sizeof(kvw_embed_params), 1},
    {"kvw_result", fill_kvw_result, 104, sizeof(kvw_result), 0},
    {"kvw_model_info", fill_kvw_model_info, 32, sizeof(kvw_model_info), 0},
    {"kvw_stats", fill_kvw_stats, 312, sizeof(kvw_stats), 0},
    {"kvw_erase_result", fill_kvw_erase_result, 48, sizeof(kvw_erase_result), 0},
};

#define ARENA 1024
static union {
    uint64_t align;
    uint8_t b[ARENA];
} arena;

static void reset(void) { memset(arena.b, CANARY, sizeof arena.b); }

/* untouched reports whether arena bytes [from, to) still hold the canary. */
static int untouched(size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (arena.b[i] != CANARY) {
            fprintf(stderr, "byte %zu (struct offset %ld) changed to 0x%02x\n", i, (long)i - OFF,
                    arena.b[i]);
            return 0;
        }
    return 1;
}

static uint32_t size_field(void) {
    uint32_t s;
    memcpy(&s, arena.b + OFF, sizeof s);
    return s;
}

static void check_kind(const kind* k) {
    fprintf(stderr, "%s (v1 %u, now %u)\n", k->name, k->v1, k->full);
    CHECK(k->full + 64 + OFF <= ARENA);

    /* The full defaults, to compare prefixes against. */
    uint8_t full[ARENA];
    memset(full, CANARY, sizeof full);
    CHECK_ST(k->fill(full, k->full), KVW_OK);
    uint32_t full_size;
    memcpy(&full_size, full, sizeof full_size);
    CHECK(full_size == k->full);

    /* Older callers: v1, the smallest size, and every size in between. */
    const uint32_t sizes[] = {k->v1, 8, k->v1 > 16 ? k->v1 - 8 : 8};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t size = sizes[i];
        reset();
        CHECK_ST(k->fill(arena.b + OFF, size), KVW_OK);
        CHECK(untouched(0, OFF));
        CHECK(untouched(OFF + size, ARENA));
        CHECK(size_field() == size);
        CHECK(memcmp(arena.b + OFF + 4, full + 4, size - 4) == 0);
    }

    /* A newer caller's bigger struct: the library's fields, zeroes after
     * them up to the given size. An output struct's struct_size is what the
     * library knows; a parameter struct keeps the caller's size, so fields
     * this library does not know are refused where it is used, not lost. */
    uint32_t bigger = k->full + 64;
    reset();
    CHECK_ST(k->fill(arena.b + OFF, bigger), KVW_OK);
    CHECK(size_field() == (k->input ? bigger : k->full));
    CHECK(memcmp(arena.b + OFF + 4, full + 4, k->full - 4) == 0);
    for (uint32_t i = k->full; i < bigger; i++) CHECK(arena.b[OFF + i] == 0);
    CHECK(untouched(0, OFF));
    CHECK(untouched(OFF + bigger, ARENA));

    /* Bad sizes and NULL: KVW_ERR_INVALID_ARGUMENT, nothing written, the
     * message names the function. */
    const uint32_t bad[] = {0, 4, 7, 12, k->v1 + 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        reset();
        kvw_clear_error();
        CHECK_ST(k->fill(arena.b + OFF, bad[i]), KVW_ERR_INVALID_ARGUMENT);
        CHECK(untouched(0, ARENA));
        CHECK(strstr(kvw_last_error(), k->name) != NULL);
        CHECK(strstr(kvw_last_error(), "not a valid struct size") != NULL);
    }
    kvw_clear_error();
    CHECK_ST(k->fill(NULL, k->full), KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "out is NULL") != NULL);
}

int main(void) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) check_kind(&kinds[i]);

    /* The defaults themselves, through the filler cut to v1: the fields a
     * v1 caller has keep their meaning. */
    kvw_request_params rp;
    memset(&rp, 0xFF, sizeof rp);
    CHECK_ST(kvw_request_params_init_sized(&rp, 64), KVW_OK);
    CHECK(rp.struct_size == 64);
    CHECK(rp.top_p == 1.0f && rp.repeat_penalty == 1.0f && rp.seed == KVW_SEED_RANDOM);

    /* The inline wrappers pass this header's sizeof. */
    kvw_request_params dp = kvw_request_default_params();
    CHECK(dp.struct_size == sizeof dp && dp.top_p == 1.0f && dp.seed == KVW_SEED_RANDOM);
    kvw_engine_params ep = kvw_engine_default_params();
    CHECK(ep.struct_size == sizeof ep && ep.log_level == KVW_LOG_WARN);
    kvw_embed_params mp = kvw_embed_default_params();
    CHECK(mp.struct_size == sizeof mp && mp.normalize == 1);
    kvw_stats st;
    memset(&st, 0xFF, sizeof st);
    kvw_stats_init(&st);
    CHECK(st.struct_size == sizeof st && st.disk_write_errors == 0);
    kvw_erase_result er;
    kvw_erase_result_init(&er);
    CHECK(er.struct_size == sizeof er);
    kvw_result r;
    kvw_result_init(&r);
    CHECK(r.struct_size == sizeof r);
    kvw_model_info mi;
    kvw_model_info_init(&mi);
    CHECK(mi.struct_size == sizeof mi);

    /* The old exported symbols still resolve, for binaries built against
     * earlier headers (this header inlines those names, so ask the loader). */
    const char* legacy[] = {"kvw_engine_default_params", "kvw_request_default_params",
                            "kvw_embed_default_params",  "kvw_result_init",
                            "kvw_model_info_init",       "kvw_stats_init",
                            "kvw_erase_result_init"};
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
        void* sym = dlsym(RTLD_DEFAULT, legacy[i]);
        if (sym == NULL) fprintf(stderr, "%s is not exported\n", legacy[i]);
        CHECK(sym != NULL);
    }
    void (*old_stats_init)(kvw_stats*);
    *(void**)&old_stats_init = dlsym(RTLD_DEFAULT, "kvw_stats_init");
    if (old_stats_init != NULL) {
        memset(&st, 0xFF, sizeof st);
        old_stats_init(&st);
        CHECK(st.struct_size == sizeof st && st.disk_write_errors == 0);
    }

    if (g_failures) {
        fprintf(stderr, "%d failures\n", g_failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
