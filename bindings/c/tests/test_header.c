/* Header/link test: compiled with -std=c99 -pedantic -Wall -Wextra -Werror
 * against kvwarden.h and linked against libkvwarden. Every public function
 * is referenced, so a missing or misnamed export fails the link. */
#include <stddef.h>
#include <stdint.h>

#include "test_util.h"

typedef struct {
    const char* name;
    void (*fn)(void);
} sym;

#define SYM(f) {#f, (void (*)(void))(f)}

int main(void) {
    const sym syms[] = {
        SYM(kvw_status_string), SYM(kvw_last_error),     SYM(kvw_last_error_info),
        SYM(kvw_clear_error),   SYM(kvw_version),        SYM(kvw_engine_default_params),
        SYM(kvw_engine_open),   SYM(kvw_engine_close),   SYM(kvw_engine_max_context),
        SYM(kvw_tokenize),      SYM(kvw_detokenize),     SYM(kvw_vocab_info),
        SYM(kvw_request_default_params), SYM(kvw_submit), SYM(kvw_next),
        SYM(kvw_abort),         SYM(kvw_request_free),   SYM(kvw_result_init),
        SYM(kvw_request_result), SYM(kvw_request_tokens), SYM(kvw_generate),
        SYM(kvw_stats_init),    SYM(kvw_engine_stats),   SYM(kvw_chat_apply_template),
        SYM(kvw_submit_tokens), SYM(kvw_request_logprobs), SYM(kvw_request_top_logprobs),
        SYM(kvw_request_logits), SYM(kvw_state_save),    SYM(kvw_request_state_save),
        SYM(kvw_state_load),    SYM(kvw_tokenize_ex),    SYM(kvw_detokenize_ex),
        SYM(kvw_model_info_init), SYM(kvw_model_info_get), SYM(kvw_model_meta_count),
        SYM(kvw_model_meta_key_by_index), SYM(kvw_model_meta_val_by_index),
        SYM(kvw_model_meta_val_str), SYM(kvw_pull),
        SYM(kvw_request_prompt_logprobs), SYM(kvw_request_prompt_top_logprobs),
        SYM(kvw_chat_prepare), SYM(kvw_chat_parse),
        SYM(kvw_erase_result_init), SYM(kvw_tenant_erase_kv),
        SYM(kvw_next_logprobs), SYM(kvw_next_top_logprobs),
        SYM(kvw_embed_default_params), SYM(kvw_embed), SYM(kvw_embed_tokens), SYM(kvw_rerank),
        SYM(kvw_engine_params_init_sized), SYM(kvw_request_params_init_sized),
        SYM(kvw_embed_params_init_sized), SYM(kvw_result_init_sized),
        SYM(kvw_model_info_init_sized), SYM(kvw_stats_init_sized),
        SYM(kvw_erase_result_init_sized),
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) CHECK(syms[i].fn != NULL);

    CHECK(strcmp(kvw_version(), KVW_VERSION_STRING) == 0);
    CHECK(strcmp(kvw_status_string(KVW_ERR_REJECTED), "KVW_ERR_REJECTED") == 0);
    CHECK(strcmp(kvw_status_string(12345), "KVW_ERR_UNKNOWN") == 0);
    CHECK(strcmp(kvw_last_error(), "") == 0);

    kvw_engine_params ep = kvw_engine_default_params();
    CHECK(ep.struct_size == sizeof ep);
    CHECK(ep.log_callback == NULL && ep.kv_checksum == KVW_CHECKSUM_HANDOFF);
    kvw_request_params rp = kvw_request_default_params();
    CHECK(rp.struct_size == sizeof rp);
    CHECK(rp.temperature == 0.0f && rp.top_p == 1.0f && rp.repeat_penalty == 1.0f);
    CHECK(rp.parse_special == 0 && ep.chat_template == NULL);
    CHECK(rp.max_tokens == 0 && rp.logprobs == 0 && rp.top_logprobs == 0 && rp.keep_logits == 0);
    CHECK(rp.presence_penalty == 0.0f && rp.frequency_penalty == 0.0f && rp.n_logit_bias == 0 &&
          rp.logit_bias == NULL && rp.logit_bias_tokens == NULL && rp.prompt_logprobs == 0);
    CHECK(rp.keep_tokens == NULL && rp.n_keep_tokens == 0);
    CHECK(offsetof(kvw_request_params, keep_tokens) == 136); /* v6 appended after v5 */
    CHECK(rp.spec_type == NULL && rp.spec_draft_max == 0 && sizeof rp == 176);
    CHECK(offsetof(kvw_request_params, spec_type) == 152); /* v7 appended after v6 */
    CHECK(ep.spec_type == NULL && ep.spec_draft_model == NULL && ep.spec_draft_max == 0);
    CHECK(offsetof(kvw_engine_params, spec_type) == 160 && sizeof ep == 192); /* v6 after v5 */
    CHECK(offsetof(kvw_stats, spec_steps) == 400 && sizeof(kvw_stats) == 424); /* v3 after v2 */
    CHECK(sizeof(kvw_token_logprob) == 8);
    kvw_model_info mi;
    kvw_model_info_init(&mi);
    CHECK(mi.struct_size == sizeof mi && mi.n_embd == 0);
    CHECK(sizeof(kvw_chat_message) == 2 * sizeof(const char*));

    /* Every versioned struct is explicitly padded to a multiple of 8. */
    CHECK(sizeof(kvw_engine_params) % 8 == 0);
    CHECK(sizeof(kvw_request_params) % 8 == 0);
    CHECK(sizeof(kvw_result) % 8 == 0);
    CHECK(sizeof(kvw_stats) % 8 == 0);
    CHECK(sizeof(kvw_error_info) % 8 == 0);
    CHECK(sizeof(kvw_model_info) % 8 == 0);
    CHECK(offsetof(kvw_engine_params, struct_size) == 0);
    CHECK(offsetof(kvw_request_params, struct_size) == 0);

    kvw_error_info info = {sizeof info, 1, 1, 1, 1, 1, 1};
    CHECK_ST(kvw_last_error_info(&info), KVW_OK);
    CHECK(info.status == KVW_OK && info.limit == 0);
    return finish("test_header");
}
