/* Signal handlers in an embedding application: the supported way (see
 * "Signals" in kvwarden.h) works with the library loaded.
 *
 * The application installs its own SIGSEGV and SIGBUS handler after the
 * library (and its Go runtime) is loaded, with SA_SIGINFO | SA_ONSTACK,
 * and chains every fault that is not its own to the previous handler. Then:
 *   - its own faults (a guard page it manages) reach its handler;
 *   - a fault inside the library (a bad output pointer handed to
 *     kvw_tokenize) is still turned into KVW_ERR_INTERNAL by the Go runtime
 *     instead of killing the process;
 *   - the engine keeps working, from this thread and from others. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "test_util.h"

static struct sigaction prev_segv, prev_bus;
static char* guard;      /* one page the application manages */
static size_t page;
static atomic_int own_faults, chained;

static void chain(int sig, siginfo_t* info, void* ctx) {
    struct sigaction* prev = sig == SIGBUS ? &prev_bus : &prev_segv;
    atomic_fetch_add(&chained, 1);
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, info, ctx);
    } else if (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN) {
        /* Nobody else wants it: restore the default and let the fault
         * recur, which ends the process as it would have. */
        sigaction(sig, prev, NULL);
    } else {
        prev->sa_handler(sig);
    }
}

static void on_fault(int sig, siginfo_t* info, void* ctx) {
    char* a = info->si_addr;
    if (a >= guard && a < guard + page) { /* ours: unprotect and retry */
        atomic_fetch_add(&own_faults, 1);
        mprotect(guard, page, PROT_READ | PROT_WRITE);
        return;
    }
    chain(sig, info, ctx);
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &prev_segv) != 0 || sigaction(SIGBUS, &sa, &prev_bus) != 0) {
        perror("sigaction");
        exit(1);
    }
}

static kvw_engine* eng;

static void* generate_thread(void* arg) {
    char out[128];
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 8;
    *(int32_t*)arg = kvw_generate(eng, "from a thread", &rp, NULL, NULL, out, sizeof out, NULL, NULL);
    return NULL;
}

int main(void) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    REQUIRE_OK(kvw_engine_open(NULL, &p, &eng)); /* the runtime is up */

    page = (size_t)sysconf(_SC_PAGESIZE);
    guard = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    install();
    /* The runtime's handler was there before ours: it is what we chain to. */
    CHECK(prev_segv.sa_flags & SA_SIGINFO);
    CHECK(prev_segv.sa_flags & SA_ONSTACK);

    /* The application's own fault reaches its own handler. */
    ((volatile char*)guard)[10] = 42;
    CHECK(atomic_load(&own_faults) == 1 && guard[10] == 42);
    CHECK(atomic_load(&chained) == 0);

    /* A fault inside the library goes through our handler, is chained to
     * the runtime, and comes back as an error, not a crash. */
    size_t n = 0;
    CHECK_ST(kvw_tokenize(eng, "hello world", 1, (int32_t*)(uintptr_t)0x10, 100, &n), KVW_ERR_INTERNAL);
    CHECK(atomic_load(&chained) >= 1);
    CHECK(strstr(kvw_last_error(), "internal error") != NULL);

    /* The engine still works, here and on other threads. */
    char out[128];
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 8;
    CHECK_ST(kvw_generate(eng, "still here", &rp, NULL, NULL, out, sizeof out, NULL, NULL), KVW_OK);
    int32_t st[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, generate_thread, &st[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_ST(st[i], KVW_OK);
    }
    CHECK_ST(kvw_engine_close(eng), KVW_OK);
    return finish("test_signals");
}
