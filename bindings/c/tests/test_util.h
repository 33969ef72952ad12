/* Small helpers shared by the kvwarden C tests. */
#ifndef KVW_TEST_UTIL_H
#define KVW_TEST_UTIL_H

#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* usleep */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvwarden.h>

#define SKIP_CODE 77

static int g_failures = 0;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, kvw_last_error());                                             \
            g_failures++;                                                                 \
        }                                                                                 \
    } while (0)

#define CHECK_ST(call, want)                                                              \
    do {                                                                                  \
        int32_t st_ = (call);                                                             \
        if (st_ != (want)) {                                                              \
            fprintf(stderr, "%s:%d: %s returned %s, want %s (last error: %s)\n", __FILE__,  \
                    __LINE__, #call, kvw_status_string(st_), kvw_status_string(want),     \
                    kvw_last_error());                                                    \
            g_failures++;                                                                 \
        }                                                                                 \
    } while (0)

#define REQUIRE_OK(call)                                                                  \
    do {                                                                                  \
        int32_t st_ = (call);                                                             \
        if (st_ != KVW_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,       \
                    kvw_status_string(st_), kvw_last_error());                            \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Path of a test model file in $KVWARDEN_TEST_MODELS, or NULL when absent
 * (the caller then skips, or fails when $CI is set). */
static inline const char* test_model(const char* name, char* buf, size_t size) {
    const char* dir = getenv("KVWARDEN_TEST_MODELS");
    if (dir == NULL || *dir == 0) return NULL;
    snprintf(buf, size, "%s/%s", dir, name);
    if (access(buf, R_OK) != 0) return NULL;
    return buf;
}

static inline int missing_model(const char* what) {
    const char* ci = getenv("CI");
    if (ci != NULL && *ci != 0) {
        fprintf(stderr, "FAIL: %s not found in $KVWARDEN_TEST_MODELS and CI is set\n", what);
        return 1;
    }
    fprintf(stderr, "SKIP: %s not found; set KVWARDEN_TEST_MODELS to run this test\n", what);
    return SKIP_CODE;
}

static inline int finish(const char* name) {
    if (g_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
