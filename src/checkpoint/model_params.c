/* model_params: expected tensors of a config (see model_params.h). */
#include "src/checkpoint/model_params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *suffix; /* after "model.layers.{i}." for layer kinds */
    lcx_param_role role;
} kinds[LCX_PARAM_KIND_COUNT] = {
    [LCX_PARAM_EMBED] = {"model.embed_tokens.weight", LCX_ROLE_EMBEDDING},
    [LCX_PARAM_ATTN_NORM] = {"input_layernorm.weight", LCX_ROLE_NORM},
    [LCX_PARAM_Q] = {"self_attn.q_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_K] = {"self_attn.k_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_V] = {"self_attn.v_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_O] = {"self_attn.o_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_Q_BIAS] = {"self_attn.q_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_K_BIAS] = {"self_attn.k_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_V_BIAS] = {"self_attn.v_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_O_BIAS] = {"self_attn.o_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_Q_NORM] = {"self_attn.q_norm.weight", LCX_ROLE_NORM},
    [LCX_PARAM_K_NORM] = {"self_attn.k_norm.weight", LCX_ROLE_NORM},
    [LCX_PARAM_MLP_NORM] = {"post_attention_layernorm.weight", LCX_ROLE_NORM},
    [LCX_PARAM_GATE] = {"mlp.gate_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_UP] = {"mlp.up_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_DOWN] = {"mlp.down_proj.weight", LCX_ROLE_LINEAR},
    [LCX_PARAM_GATE_BIAS] = {"mlp.gate_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_UP_BIAS] = {"mlp.up_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_DOWN_BIAS] = {"mlp.down_proj.bias", LCX_ROLE_BIAS},
    [LCX_PARAM_FINAL_NORM] = {"model.norm.weight", LCX_ROLE_NORM},
    [LCX_PARAM_LM_HEAD] = {"lm_head.weight", LCX_ROLE_LM_HEAD},
};

const char *lcx_param_role_name(lcx_param_role r) {
    static const char *names[LCX_ROLE_COUNT] = {"embedding", "norm", "linear", "bias", "lm_head"};
    return (unsigned)r < LCX_ROLE_COUNT ? names[r] : "?";
}

const char *lcx_param_kind_name(lcx_param_kind k) {
    return (unsigned)k < LCX_PARAM_KIND_COUNT ? kinds[k].suffix : "?";
}

typedef struct builder {
    lcx_param_table *t;
    size_t cap;
} builder;

static lcx_status add(builder *b, lcx_param_kind kind, int layer, lcx_shape shape) {
    lcx_param_table *t = b->t;
    LCX_ASSERT(t->n < b->cap);
    lcx_param_spec *p = &t->params[t->n];
    memset(p, 0, sizeof *p);
    if (layer >= 0) snprintf(p->name, sizeof p->name, "model.layers.%d.%s", layer, kinds[kind].suffix);
    else snprintf(p->name, sizeof p->name, "%s", kinds[kind].suffix);
    p->kind = kind;
    p->role = kinds[kind].role;
    p->layer = layer;
    p->shape = shape;
    LCX_FAIL_IF(lcx_shape_numel(&shape, &p->numel) != LCX_OK, LCX_ERR_INVALID,
                "config: tensor '%s': element count overflows", p->name);
    LCX_FAIL_IF(__builtin_add_overflow(t->total_numel, p->numel, &t->total_numel), LCX_ERR_INVALID,
                "config: total parameter count overflows");
    t->n++;
    return LCX_OK;
}

static size_t per_layer_count(const lcx_model_config *c) {
    return 9 + (c->qkv_bias ? 3 : 0) + (c->o_bias ? 1 : 0) + (c->qk_norm ? 2 : 0) + (c->mlp_bias ? 3 : 0);
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const lcx_param_spec *const *)a)->name, (*(const lcx_param_spec *const *)b)->name);
}

static lcx_status build(builder *b, const lcx_model_config *c) {
    /* Every size is bounded by the config limits, but products are still checked by add(). */
    uint64_t V = (uint64_t)c->vocab_size, H = (uint64_t)c->hidden_size, F = (uint64_t)c->intermediate_size;
    uint64_t d = (uint64_t)c->head_dim, nh = (uint64_t)c->num_attention_heads, ng = (uint64_t)c->num_key_value_heads;
    uint64_t qdim, kvdim;
    LCX_FAIL_IF(__builtin_mul_overflow(nh, d, &qdim) || __builtin_mul_overflow(ng, d, &kvdim), LCX_ERR_INVALID,
                "config: heads x head_dim overflows");
    LCX_TRY(add(b, LCX_PARAM_EMBED, -1, lcx_shape_2d(V, H)));
    for (int i = 0; i < (int)c->num_hidden_layers; i++) {
        LCX_TRY(add(b, LCX_PARAM_ATTN_NORM, i, lcx_shape_1d(H)));
        LCX_TRY(add(b, LCX_PARAM_Q, i, lcx_shape_2d(qdim, H)));
        if (c->qkv_bias) LCX_TRY(add(b, LCX_PARAM_Q_BIAS, i, lcx_shape_1d(qdim)));
        LCX_TRY(add(b, LCX_PARAM_K, i, lcx_shape_2d(kvdim, H)));
        if (c->qkv_bias) LCX_TRY(add(b, LCX_PARAM_K_BIAS, i, lcx_shape_1d(kvdim)));
        LCX_TRY(add(b, LCX_PARAM_V, i, lcx_shape_2d(kvdim, H)));
        if (c->qkv_bias) LCX_TRY(add(b, LCX_PARAM_V_BIAS, i, lcx_shape_1d(kvdim)));
        LCX_TRY(add(b, LCX_PARAM_O, i, lcx_shape_2d(H, qdim)));
        if (c->o_bias) LCX_TRY(add(b, LCX_PARAM_O_BIAS, i, lcx_shape_1d(H)));
        if (c->qk_norm) {
            LCX_TRY(add(b, LCX_PARAM_Q_NORM, i, lcx_shape_1d(d)));
            LCX_TRY(add(b, LCX_PARAM_K_NORM, i, lcx_shape_1d(d)));
        }
        LCX_TRY(add(b, LCX_PARAM_MLP_NORM, i, lcx_shape_1d(H)));
        LCX_TRY(add(b, LCX_PARAM_GATE, i, lcx_shape_2d(F, H)));
        if (c->mlp_bias) LCX_TRY(add(b, LCX_PARAM_GATE_BIAS, i, lcx_shape_1d(F)));
        LCX_TRY(add(b, LCX_PARAM_UP, i, lcx_shape_2d(F, H)));
        if (c->mlp_bias) LCX_TRY(add(b, LCX_PARAM_UP_BIAS, i, lcx_shape_1d(F)));
        LCX_TRY(add(b, LCX_PARAM_DOWN, i, lcx_shape_2d(H, F)));
        if (c->mlp_bias) LCX_TRY(add(b, LCX_PARAM_DOWN_BIAS, i, lcx_shape_1d(H)));
    }
    LCX_TRY(add(b, LCX_PARAM_FINAL_NORM, -1, lcx_shape_1d(H)));
    if (!c->tie_word_embeddings) LCX_TRY(add(b, LCX_PARAM_LM_HEAD, -1, lcx_shape_2d(V, H)));
    return LCX_OK;
}

lcx_status lcx_param_table_init(lcx_param_table *t, const lcx_model_config *cfg) {
    memset(t, 0, sizeof *t);
    LCX_FAIL_IF(cfg->num_hidden_layers <= 0 || cfg->num_hidden_layers > LCX_CONFIG_MAX_LAYERS || cfg->vocab_size <= 0 ||
                    cfg->hidden_size <= 0 || cfg->intermediate_size <= 0 || cfg->head_dim <= 0 ||
                    cfg->num_attention_heads <= 0 || cfg->num_key_value_heads <= 0,
                LCX_ERR_INVALID, "config: sizes must be positive (is the config validated?)");
    size_t cap = 3 + (size_t)cfg->num_hidden_layers * per_layer_count(cfg);
    t->params = calloc(cap, sizeof *t->params);
    t->by_name = calloc(cap, sizeof *t->by_name);
    if (!t->params || !t->by_name) {
        lcx_param_table_free(t);
        return lcx_fail(LCX_ERR_OOM, "config: out of memory for %zu parameter entries", cap);
    }
    t->arch = cfg->arch;
    t->tied = cfg->tie_word_embeddings;
    builder b = {t, cap};
    lcx_status st = build(&b, cfg);
    if (st != LCX_OK) {
        lcx_param_table_free(t);
        return st;
    }
    for (size_t i = 0; i < t->n; i++) t->by_name[i] = &t->params[i];
    qsort(t->by_name, t->n, sizeof *t->by_name, cmp_by_name);
    return LCX_OK;
}

void lcx_param_table_free(lcx_param_table *t) {
    if (!t) return;
    free(t->params);
    free(t->by_name);
    memset(t, 0, sizeof *t);
}

const lcx_param_spec *lcx_param_table_find(const lcx_param_table *t, const char *name) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->by_name[mid]->name, name);
        if (c == 0) return t->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

size_t lcx_param_table_per_layer(const lcx_param_table *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) n += t->params[i].layer == 0;
    return n;
}
