/* Constrained output through the C API (kvw_request_params v4): a GBNF
 * grammar and a JSON Schema shape the text of a sampled run on the
 * built-in stories model and end it with KVW_FINISH_STOP; invalid ones are
 * KVW_ERR_INVALID_ARGUMENT naming the place; a v3-sized struct (without
 * the fields) still works. */
#include <stdint.h>

#include "test_util.h"

static kvw_engine* open_engine(void) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 8 << 20;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open("builtin:stories260K", &p, &eng));
    return eng;
}

static kvw_request_params sampled(uint64_t seed) {
    kvw_request_params rp = kvw_request_default_params();
    rp.max_tokens = 120;
    rp.temperature = 0.8f;
    rp.seed = seed;
    return rp;
}

/* Whether s is "yes, " or "no, " followed by 2 to 5 lowercase letters. */
static int matches_grammar(const char* s) {
    if (strncmp(s, "yes, ", 5) == 0) {
        s += 5;
    } else if (strncmp(s, "no, ", 4) == 0) {
        s += 4;
    } else {
        return 0;
    }
    size_t n = 0;
    while (s[n] >= 'a' && s[n] <= 'z') n++;
    return s[n] == 0 && n >= 2 && n <= 5;
}

static void test_grammar(kvw_engine* eng) {
    for (uint64_t seed = 1; seed <= 3; seed++) {
        kvw_request_params rp = sampled(seed);
        rp.grammar = "root ::= (\"yes\" | \"no\") \", \" [a-z]{2,5}";
        char buf[256];
        kvw_result r;
        kvw_result_init(&r);
        REQUIRE_OK(kvw_generate(eng, "Once upon a time", &rp, NULL, NULL, buf, sizeof buf, NULL, &r));
        CHECK(r.finish_reason == KVW_FINISH_STOP);
        if (!matches_grammar(buf)) {
            fprintf(stderr, "output %s does not match the grammar\n", buf);
            g_failures++;
        }
    }
}

static void test_json_schema(kvw_engine* eng) {
    /* Only these exact shapes are possible: check the generated text
     * character by character against the schema's structure. */
    kvw_request_params rp = sampled(7);
    rp.json_schema =
        "{\"type\":\"object\",\"properties\":{\"mood\":{\"enum\":[\"happy\",\"sad\"]},"
        "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9}},"
        "\"required\":[\"mood\",\"n\"],\"additionalProperties\":false}";
    char buf[512];
    kvw_result r;
    kvw_result_init(&r);
    REQUIRE_OK(kvw_generate(eng, "Once upon a time", &rp, NULL, NULL, buf, sizeof buf, NULL, &r));
    CHECK(r.finish_reason == KVW_FINISH_STOP);
    /* Remove JSON whitespace, then compare with the two possible texts. */
    char squeezed[512];
    size_t k = 0;
    for (const char* p = buf; *p; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\t') squeezed[k++] = *p;
    }
    squeezed[k] = 0;
    int ok = 0;
    for (char d = '1'; d <= '9'; d++) {
        char want[64];
        snprintf(want, sizeof want, "{\"mood\":\"happy\",\"n\":%c}", d);
        ok |= strcmp(squeezed, want) == 0;
        snprintf(want, sizeof want, "{\"mood\":\"sad\",\"n\":%c}", d);
        ok |= strcmp(squeezed, want) == 0;
    }
    if (!ok) {
        fprintf(stderr, "output %s does not match the schema\n", buf);
        g_failures++;
    }
}

static void test_errors(kvw_engine* eng) {
    struct {
        const char* grammar;
        const char* schema;
        const char* want;
    } cases[] = {
        {"root ::= \"a\" missing", NULL, "line 1, column 14"},
        {"root ::= [a-", NULL, "params.grammar"},
        {NULL, "{\"type\":\"number\",\"multipleOf\":2}", "multipleOf"},
        {NULL, "{\"type\":", "not JSON"},
        {"root ::= \"a\"", "{}", "give one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kvw_request_params rp = kvw_request_default_params();
        rp.grammar = cases[i].grammar;
        rp.json_schema = cases[i].schema;
        uint64_t id = 0;
        CHECK_ST(kvw_submit(eng, "hi", &rp, &id), KVW_ERR_INVALID_ARGUMENT);
        if (strstr(kvw_last_error(), cases[i].want) == NULL) {
            fprintf(stderr, "case %zu: error %s does not name %s\n", i, kvw_last_error(), cases[i].want);
            g_failures++;
        }
        kvw_error_info info = {sizeof info, 0, 0, 0, 0, 0, 0};
        REQUIRE_OK(kvw_last_error_info(&info));
        CHECK(info.reason == KVW_REJECT_INVALID_PARAMS);
    }
}

/* A caller built against v3 of the struct (88 bytes) never sets the
 * grammar fields: they are NULL, and whatever lies past its struct is not
 * read. */
static void test_v3_caller(kvw_engine* eng) {
    struct {
        kvw_request_params p;
        char junk[16];
    } v3;
    memset(&v3, 0xAB, sizeof v3);
    v3.p = kvw_request_default_params();
    v3.p.max_tokens = 4;
    memset((char*)&v3.p + 88, 0xAB, sizeof v3.p - 88);
    v3.p.struct_size = 88;
    char buf[128];
    kvw_result r;
    kvw_result_init(&r);
    REQUIRE_OK(kvw_generate(eng, "Once upon a time", &v3.p, NULL, NULL, buf, sizeof buf, NULL, &r));
    CHECK(r.generated_tokens == 4);
}

int main(void) {
    kvw_engine* eng = open_engine();
    test_grammar(eng);
    test_json_schema(eng);
    test_errors(eng);
    test_v3_caller(eng);
    REQUIRE_OK(kvw_engine_close(eng));
    return finish("test_grammar");
}
