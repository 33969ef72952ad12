/* Tool calls through the C API (kvw_chat_prepare, kvw_chat_parse): a
 * named tool_choice on the built-in stories model gives a grammar that
 * forces a call; the sampled output parses into a tool call of that tool;
 * bad tools are KVW_ERR_INVALID_ARGUMENT naming the problem. */
#include <stdint.h>

#include "test_util.h"

static const char* REQUEST =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\":"
    " {\"type\": \"object\", \"properties\": {\"unit\": {\"enum\": [\"celsius\", \"fahrenheit\"]}},"
    " \"required\": [\"unit\"], \"additionalProperties\": false}}}],"
    " \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}}";

/* The JSON string value of key in json, unescaped (\n \t \" \\ \/ and
 * \u00XX; anything else fails), into a malloc'd string. */
static char* json_string(const char* json, const char* key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char* p = strstr(json, pat);
    if (!p) return NULL;
    p += strlen(pat);
    char* out = malloc(strlen(p) + 1);
    size_t n = 0;
    for (; *p && *p != '"'; p++) {
        if (*p != '\\') {
            out[n++] = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'n': out[n++] = '\n'; break;
        case 't': out[n++] = '\t'; break;
        case '"': case '\\': case '/': out[n++] = *p; break;
        case 'u': {
            unsigned v = 0;
            if (sscanf(p + 1, "%4x", &v) != 1 || v >= 0x80) {
                free(out);
                return NULL;
            }
            out[n++] = (char)v;
            p += 4;
            break;
        }
        default: free(out); return NULL;
        }
    }
    out[n] = 0;
    return out;
}

/* The JSON object value of key in json (braces matched outside strings),
 * into a malloc'd string. */
static char* json_object(const char* json, const char* key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":{", key);
    const char* p = strstr(json, pat);
    if (!p) return NULL;
    p += strlen(pat) - 1;
    int depth = 0, in_str = 0;
    const char* q = p;
    for (; *q; q++) {
        if (in_str) {
            if (*q == '\\') q++;
            else if (*q == '"') in_str = 0;
            continue;
        }
        if (*q == '"') in_str = 1;
        else if (*q == '{') depth++;
        else if (*q == '}' && --depth == 0) break;
    }
    size_t n = (size_t)(q - p) + 1;
    char* out = malloc(n + 1);
    memcpy(out, p, n);
    out[n] = 0;
    return out;
}

int main(void) {
    kvw_engine_params p = kvw_engine_default_params();
    p.kv_memory_bytes = 16 << 20;
    p.max_context = 1024;
    kvw_engine* eng = NULL;
    REQUIRE_OK(kvw_engine_open("builtin:stories260K", &p, &eng));

    size_t len = 0;
    REQUIRE_OK(kvw_chat_prepare(eng, REQUEST, NULL, 0, &len));
    char* prep = malloc(len + 1);
    CHECK_ST(kvw_chat_prepare(eng, REQUEST, prep, len, &len), KVW_ERR_BUFFER_TOO_SMALL);
    REQUIRE_OK(kvw_chat_prepare(eng, REQUEST, prep, len + 1, &len));
    CHECK(strstr(prep, "\"grammar\":null") == NULL);

    char* prompt = json_string(prep, "prompt");
    char* grammar = json_string(prep, "grammar");
    char* parser = json_object(prep, "parser");
    CHECK(prompt != NULL && grammar != NULL && parser != NULL);
    if (prompt && grammar && parser) {
        /* The tools are described in the prompt (ChatML prints none). */
        CHECK(strstr(prompt, "get_weather") != NULL);
        for (uint64_t seed = 1; seed <= 3; seed++) {
            kvw_request_params rp = kvw_request_default_params();
            rp.max_tokens = 300;
            rp.temperature = 0.8f;
            rp.seed = seed;
            rp.parse_special = 1;
            rp.grammar = grammar;
            char out[2048];
            kvw_result r;
            kvw_result_init(&r);
            REQUIRE_OK(kvw_generate(eng, prompt, &rp, NULL, NULL, out, sizeof out, NULL, &r));
            CHECK(r.finish_reason == KVW_FINISH_STOP);
            char msg[4096];
            REQUIRE_OK(kvw_chat_parse(parser, out, msg, sizeof msg, &len));
            char* name = json_string(msg, "name");
            char* id = json_string(msg, "id");
            char* args = json_string(msg, "arguments");
            CHECK(name && strcmp(name, "get_weather") == 0);
            CHECK(id && strncmp(id, "call_", 5) == 0);
            CHECK(strstr(msg, "\"content\":null") != NULL);
            /* The schema allows exactly these arguments, up to spacing. */
            CHECK(args && strstr(args, "\"unit\"") && (strstr(args, "\"celsius\"") || strstr(args, "\"fahrenheit\"")));
            if (!name || !args) fprintf(stderr, "output %s parsed as %s\n", out, msg);
            free(name);
            free(id);
            free(args);
        }
    }
    free(prompt);
    free(grammar);
    free(parser);

    /* Bad input names the problem. */
    CHECK_ST(kvw_chat_prepare(eng, "{\"messages\": [], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
                                   " {\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}",
                              NULL, 0, &len),
             KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "unique") != NULL);
    CHECK_ST(kvw_chat_prepare(eng, "{\"tools\": [], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}",
                              NULL, 0, &len),
             KVW_ERR_INVALID_ARGUMENT);
    CHECK(strstr(kvw_last_error(), "\"g\"") != NULL);
    CHECK_ST(kvw_chat_prepare(eng, "not json", NULL, 0, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_chat_parse("{}", NULL, NULL, 0, &len), KVW_ERR_INVALID_ARGUMENT);
    CHECK_ST(kvw_chat_parse("[1]", "x", NULL, 0, &len), KVW_ERR_INVALID_ARGUMENT);

    free(prep);
    kvw_engine_close(eng);
    return g_failures ? 1 : 0;
}
