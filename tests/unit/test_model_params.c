/* model_params: the expected tensor list per architecture, checked against docs/formats.md's table with counts
 * worked out by hand. */
#include <stdio.h>
#include <string.h>

#include "src/checkpoint/model_params.h"
#include "test_util.h"

static lcx_status cfg_from(const char *text, lcx_model_config *c) {
    return lcx_config_parse("config.json", text, strlen(text), c);
}

static int shape_is(const lcx_shape *s, int ndim, uint64_t a, uint64_t b) {
    return s->ndim == ndim && s->dims[0] == a && (ndim < 2 || s->dims[1] == b);
}

static void test_llama(void) {
    /* V=10 H=6 F=12 L=3 heads 3 kv 1 (d=2), untied, no bias */
    lcx_model_config c;
    CHECK_OK(cfg_from("{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":6,\"intermediate_size\":12,"
                      "\"num_hidden_layers\":3,\"num_attention_heads\":3,\"num_key_value_heads\":1,"
                      "\"max_position_embeddings\":32}",
                      &c));
    lcx_param_table t;
    CHECK_OK(lcx_param_table_init(&t, &c));
    CHECK(t.n == 1 + 3 * 9 + 2 && lcx_param_table_per_layer(&t) == 9 && !t.tied);
    /* embed 60; layer: 6 + q 36 + k 12 + v 12 + o 36 + 6 + 72*3 = 324; norm 6; lm_head 60 */
    CHECK(t.total_numel == 60 + 3 * 324 + 6 + 60);
    CHECK(!strcmp(t.params[0].name, "model.embed_tokens.weight") && t.params[0].role == LCX_ROLE_EMBEDDING);
    CHECK(shape_is(&t.params[0].shape, 2, 10, 6) && t.params[0].layer == -1);
    CHECK(!strcmp(t.params[1].name, "model.layers.0.input_layernorm.weight") && t.params[1].role == LCX_ROLE_NORM);
    CHECK(!strcmp(t.params[t.n - 1].name, "lm_head.weight") && t.params[t.n - 1].role == LCX_ROLE_LM_HEAD);
    CHECK(!strcmp(t.params[t.n - 2].name, "model.norm.weight") && t.params[t.n - 2].kind == LCX_PARAM_FINAL_NORM);
    const lcx_param_spec *p = lcx_param_table_find(&t, "model.layers.2.self_attn.k_proj.weight");
    CHECK(p && p->layer == 2 && p->kind == LCX_PARAM_K && p->role == LCX_ROLE_LINEAR && shape_is(&p->shape, 2, 2, 6));
    p = lcx_param_table_find(&t, "model.layers.1.self_attn.o_proj.weight");
    CHECK(p && shape_is(&p->shape, 2, 6, 6) && p->numel == 36);
    p = lcx_param_table_find(&t, "model.layers.1.mlp.down_proj.weight");
    CHECK(p && shape_is(&p->shape, 2, 6, 12));
    p = lcx_param_table_find(&t, "model.layers.0.mlp.gate_proj.weight");
    CHECK(p && shape_is(&p->shape, 2, 12, 6));
    CHECK(!lcx_param_table_find(&t, "model.layers.3.mlp.gate_proj.weight"));
    CHECK(!lcx_param_table_find(&t, "model.layers.0.self_attn.q_proj.bias"));
    CHECK(!lcx_param_table_find(&t, ""));
    /* every entry is found under its own name */
    for (size_t i = 0; i < t.n; i++) CHECK(lcx_param_table_find(&t, t.params[i].name) == &t.params[i]);
    lcx_param_table_free(&t);
    lcx_param_table_free(&t);
    lcx_param_table_free(NULL);

    /* llama with attention_bias + mlp_bias, tied */
    lcx_config_free(&c);
    CHECK_OK(cfg_from("{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":6,\"intermediate_size\":12,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":3,\"num_key_value_heads\":1,"
                      "\"max_position_embeddings\":32,\"attention_bias\":true,\"mlp_bias\":true,"
                      "\"tie_word_embeddings\":true}",
                      &c));
    CHECK_OK(lcx_param_table_init(&t, &c));
    CHECK(t.tied && t.n == 1 + 16 + 1 && !lcx_param_table_find(&t, "lm_head.weight"));
    /* embed 60 + layer 324 + biases (6 + 2 + 2 + 6 + 12 + 12 + 6 = 46) + norm 6 */
    CHECK(t.total_numel == 60 + 324 + 46 + 6);
    p = lcx_param_table_find(&t, "model.layers.0.self_attn.o_proj.bias");
    CHECK(p && p->role == LCX_ROLE_BIAS && p->kind == LCX_PARAM_O_BIAS && shape_is(&p->shape, 1, 6, 0));
    p = lcx_param_table_find(&t, "model.layers.0.mlp.up_proj.bias");
    CHECK(p && shape_is(&p->shape, 1, 12, 0));
    /* biases follow their weights */
    CHECK(!strcmp(t.params[3].name, "model.layers.0.self_attn.q_proj.bias"));
    lcx_param_table_free(&t);
    lcx_config_free(&c);
}

static void test_qwen(void) {
    lcx_model_config c;
    lcx_param_table t;
    /* qwen2: q/k/v bias, no o bias */
    CHECK_OK(cfg_from("{\"model_type\":\"qwen2\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":4,"
                      "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
                      "\"max_position_embeddings\":32}",
                      &c));
    CHECK_OK(lcx_param_table_init(&t, &c));
    CHECK(lcx_param_table_per_layer(&t) == 12);
    const lcx_param_spec *p = lcx_param_table_find(&t, "model.layers.1.self_attn.k_proj.bias");
    CHECK(p && shape_is(&p->shape, 1, 4, 0));
    CHECK(!lcx_param_table_find(&t, "model.layers.1.self_attn.o_proj.bias"));
    lcx_param_table_free(&t);
    lcx_config_free(&c);
    /* qwen3: head_dim 16 != hidden/heads = 2: q [64, 8], o [8, 64], q_norm/k_norm [16] */
    CHECK_OK(cfg_from("{\"model_type\":\"qwen3\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":4,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
                      "\"max_position_embeddings\":32,\"tie_word_embeddings\":true}",
                      &c));
    CHECK_OK(lcx_param_table_init(&t, &c));
    CHECK(lcx_param_table_per_layer(&t) == 11);
    p = lcx_param_table_find(&t, "model.layers.0.self_attn.q_proj.weight");
    CHECK(p && shape_is(&p->shape, 2, 64, 8));
    p = lcx_param_table_find(&t, "model.layers.0.self_attn.v_proj.weight");
    CHECK(p && shape_is(&p->shape, 2, 32, 8));
    p = lcx_param_table_find(&t, "model.layers.0.self_attn.o_proj.weight");
    CHECK(p && shape_is(&p->shape, 2, 8, 64));
    p = lcx_param_table_find(&t, "model.layers.0.self_attn.q_norm.weight");
    CHECK(p && p->role == LCX_ROLE_NORM && p->kind == LCX_PARAM_Q_NORM && shape_is(&p->shape, 1, 16, 0));
    p = lcx_param_table_find(&t, "model.layers.0.self_attn.k_norm.weight");
    CHECK(p && shape_is(&p->shape, 1, 16, 0));
    /* embed 80; layer: 8 + q 512 + k 256 + v 256 + o 512 + 16 + 16 + 8 + 3*32; norm 8 */
    CHECK(t.total_numel == 80 + (8 + 512 + 256 + 256 + 512 + 32 + 8 + 96) + 8);
    lcx_param_table_free(&t);
    lcx_config_free(&c);
    CHECK(!strcmp(lcx_param_role_name(LCX_ROLE_BIAS), "bias"));
    CHECK(!strcmp(lcx_param_kind_name(LCX_PARAM_DOWN), "mlp.down_proj.weight"));
}

int main(void) {
    test_llama();
    test_qwen();
    return test_summary("test_model_params");
}
