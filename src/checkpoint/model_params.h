/* model_params: the parameter table of a Llama-family model — every tensor a config implies, with its Hugging
 * Face name, shape ([out, in] for linear weights, y = x W^T), role and layer (docs/formats.md "Hugging Face model
 * directory"). Checkpoint readers match files against it; the model code allocates from it; TP slicing picks
 * rows/columns by kind.
 *
 * Order: model.embed_tokens.weight; per layer i: input_layernorm, q/k/v/o_proj weights (each followed by its
 * bias when the architecture has one), q_norm, k_norm (Qwen3), post_attention_layernorm, gate/up/down_proj
 * (+ bias with mlp_bias); then model.norm.weight and lm_head.weight (absent when tie_word_embeddings). */
#ifndef LCX_MODEL_PARAMS_H
#define LCX_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "formats/hf_config.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

/* Coarse role: how a tensor is used (and initialised/decayed by training). */
typedef enum lcx_param_role {
    LCX_ROLE_EMBEDDING = 0, /* [V, H] token embedding */
    LCX_ROLE_NORM,          /* RMSNorm weight (1-D) */
    LCX_ROLE_LINEAR,        /* linear weight [out, in] */
    LCX_ROLE_BIAS,          /* linear bias [out] */
    LCX_ROLE_LM_HEAD,       /* output projection [V, H] */
    LCX_ROLE_COUNT
} lcx_param_role;

/* Fine kind: which tensor of the block it is. */
typedef enum lcx_param_kind {
    LCX_PARAM_EMBED = 0,
    LCX_PARAM_ATTN_NORM,       /* input_layernorm [H] */
    LCX_PARAM_Q, LCX_PARAM_K, LCX_PARAM_V, LCX_PARAM_O,
    LCX_PARAM_Q_BIAS, LCX_PARAM_K_BIAS, LCX_PARAM_V_BIAS, LCX_PARAM_O_BIAS,
    LCX_PARAM_Q_NORM, LCX_PARAM_K_NORM, /* Qwen3 per-head RMSNorm [d] */
    LCX_PARAM_MLP_NORM,        /* post_attention_layernorm [H] */
    LCX_PARAM_GATE, LCX_PARAM_UP, LCX_PARAM_DOWN,
    LCX_PARAM_GATE_BIAS, LCX_PARAM_UP_BIAS, LCX_PARAM_DOWN_BIAS,
    LCX_PARAM_FINAL_NORM,      /* model.norm [H] */
    LCX_PARAM_LM_HEAD,
    LCX_PARAM_KIND_COUNT
} lcx_param_kind;

#define LCX_PARAM_NAME_MAX 96

typedef struct lcx_param_spec {
    char name[LCX_PARAM_NAME_MAX]; /* HF name, e.g. "model.layers.3.self_attn.q_proj.weight" */
    lcx_param_kind kind;
    lcx_param_role role;
    int layer;                     /* decoder layer index, -1 for embed/final norm/lm_head */
    lcx_shape shape;               /* global shape */
    uint64_t numel;
} lcx_param_spec;

typedef struct lcx_param_table {
    lcx_arch arch;
    size_t n;
    lcx_param_spec *params;        /* in the order described above */
    const lcx_param_spec **by_name; /* entries of params sorted by name (for lookup) */
    uint64_t total_numel;          /* sum over params: tied embeddings counted once, like num_parameters() */
    int tied;                      /* tie_word_embeddings: lm_head is not in the table */
} lcx_param_table;

/* Build the table for a validated config. Fails (LCX_ERR_INVALID) if a size product overflows 64 bits. */
lcx_status lcx_param_table_init(lcx_param_table *t, const lcx_model_config *cfg);
void lcx_param_table_free(lcx_param_table *t); /* NULL ok */
/* Entry by HF name, or NULL. O(log n). */
const lcx_param_spec *lcx_param_table_find(const lcx_param_table *t, const char *name);
/* Number of entries per layer (same for every layer). */
size_t lcx_param_table_per_layer(const lcx_param_table *t);

const char *lcx_param_role_name(lcx_param_role r); /* "embedding", "norm", "linear", "bias", "lm_head" */
const char *lcx_param_kind_name(lcx_param_kind k); /* "q_proj.weight", ... */

#endif
