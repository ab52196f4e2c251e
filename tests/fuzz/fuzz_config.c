/* libFuzzer target: lcx_config_parse on arbitrary bytes. Checks beyond "no crash": a failure leaves no JSON
 * and a one-line message naming the source; a success satisfies the documented invariants and survives a
 * write -> re-parse round trip through the HF-style serialiser with identical typed fields.
 * Seed corpus: tests/fuzz/corpus/config/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_config: invariant broken: %s\n", what);
        abort();
    }
}

static void check_invariants(const lcx_model_config *c) {
    require((unsigned)c->arch < LCX_ARCH_COUNT, "arch");
    require(c->vocab_size > 0 && c->vocab_size <= LCX_CONFIG_MAX_VOCAB, "vocab");
    require(c->hidden_size > 0 && c->hidden_size <= LCX_CONFIG_MAX_HIDDEN, "hidden");
    require(c->num_attention_heads > 0 && c->num_key_value_heads > 0, "heads");
    require(c->num_attention_heads % c->num_key_value_heads == 0, "kv divides heads");
    require(c->head_dim > 0 && (c->head_dim_explicit || c->head_dim * c->num_attention_heads == c->hidden_size ||
                                (c->arch == LCX_ARCH_QWEN3 && c->head_dim == 128)),
            "head_dim");
    require(c->rms_norm_eps > 0, "eps");
    require(c->sliding_window == 0 || c->sliding_window >= c->max_position_embeddings, "window");
    require(c->n_eos >= 0 && c->n_eos <= 16, "eos");
    require(strlen(c->rope.type) > 0 && strlen(c->rope.type) < sizeof c->rope.type, "rope type");
    require(c->json != NULL, "json kept");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lcx_model_config c;
    lcx_status st = lcx_config_parse("fuzz.json", (const char *)data, size, &c);
    if (st != LCX_OK) {
        const char *m = lcx_last_error();
        require(c.json == NULL, "json freed on failure");
        require(strncmp(m, "fuzz.json: ", 11) == 0, "message names the source");
        require(strchr(m, '\n') == NULL, "one-line message");
        return 0;
    }
    check_invariants(&c);
    /* round trip: sync + serialise + parse again gives the same typed config */
    lcx_model_config d = c;
    d.json = json_deep_copy(c.json);
    require(d.json != NULL, "copy");
    if (lcx_config_sync_json(&d) == LCX_OK) {
        char *text = lcx_json_dumps_hf(d.json);
        require(text != NULL, "dumps");
        lcx_model_config e;
        st = lcx_config_parse("roundtrip.json", text, strlen(text), &e);
        if (st != LCX_OK) fprintf(stderr, "re-parse failed: %s\n%s\n", lcx_last_error(), text);
        require(st == LCX_OK, "re-parse of written config");
        require(e.arch == c.arch && e.vocab_size == c.vocab_size && e.hidden_size == c.hidden_size &&
                    e.intermediate_size == c.intermediate_size && e.num_hidden_layers == c.num_hidden_layers &&
                    e.num_attention_heads == c.num_attention_heads && e.num_key_value_heads == c.num_key_value_heads &&
                    e.head_dim == c.head_dim && e.rms_norm_eps == c.rms_norm_eps &&
                    e.max_position_embeddings == c.max_position_embeddings &&
                    e.tie_word_embeddings == c.tie_word_embeddings && e.qkv_bias == c.qkv_bias &&
                    e.o_bias == c.o_bias && e.mlp_bias == c.mlp_bias && e.dtype == c.dtype &&
                    e.bos_token_id == c.bos_token_id && e.n_eos == c.n_eos && e.sliding_window == c.sliding_window,
                "typed fields survive a round trip");
        require(!strcmp(e.rope.type, c.rope.type) && e.rope.theta == c.rope.theta &&
                    e.rope.partial_rotary_factor == c.rope.partial_rotary_factor &&
                    e.rope.has_factor == c.rope.has_factor && (!c.rope.has_factor || e.rope.factor == c.rope.factor) &&
                    e.rope.has_original_max == c.rope.has_original_max &&
                    e.rope.original_max_position_embeddings == c.rope.original_max_position_embeddings &&
                    e.rope.n_long_factor == c.rope.n_long_factor && e.rope.n_short_factor == c.rope.n_short_factor,
                "rope survives a round trip");
        lcx_config_free(&e);
        free(text);
    }
    lcx_config_free(&d);
    lcx_config_free(&c);
    return 0;
}
