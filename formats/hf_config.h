/* hf_config: Hugging Face config.json for the Llama family (llama, mistral, qwen2, qwen3).
 *
 * Reads both rope forms (legacy rope_theta + rope_scaling with rope_type or type; v5 rope_parameters), keeps
 * the whole JSON document so unknown fields are written back on export, and refuses what we cannot run
 * (unknown architecture, an active sliding window, non-silu activation) with an error naming file and key. */
#ifndef LCX_FORMATS_HF_CONFIG_H
#define LCX_FORMATS_HF_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "src/status.h"
#include "src/tensor.h"

typedef enum lcx_arch { LCX_ARCH_LLAMA = 0, LCX_ARCH_MISTRAL, LCX_ARCH_QWEN2, LCX_ARCH_QWEN3, LCX_ARCH_COUNT } lcx_arch;
const char *lcx_arch_name(lcx_arch a); /* "llama", ... (the model_type) */

#define LCX_ROPE_MAX_PAIRS 1024

/* Rope parameters exactly as the config states them. Semantics, defaults and validation live in src/rope. */
typedef struct lcx_rope_params {
    char type[32];                 /* "default", "linear", "dynamic", "yarn", "longrope", "llama3", or as given */
    double theta;                  /* rope_theta (default 10000) */
    double partial_rotary_factor;  /* default 1 */
    int has_factor;                double factor;
    int has_original_max;          int64_t original_max_position_embeddings;
    int has_attention_factor;      double attention_factor;
    int has_beta_fast;             double beta_fast;
    int has_beta_slow;             double beta_slow;
    int has_mscale;                double mscale;
    int has_mscale_all_dim;        double mscale_all_dim;
    int has_truncate;              int truncate;
    int has_low_freq_factor;       double low_freq_factor;
    int has_high_freq_factor;      double high_freq_factor;
    int n_short_factor;            double short_factor[LCX_ROPE_MAX_PAIRS];
    int n_long_factor;             double long_factor[LCX_ROPE_MAX_PAIRS];
} lcx_rope_params;

typedef struct lcx_model_config {
    lcx_arch arch;
    int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
    int64_t num_attention_heads, num_key_value_heads, head_dim; /* head_dim: explicit or hidden/heads */
    int head_dim_explicit;
    double rms_norm_eps;
    int64_t max_position_embeddings;
    int tie_word_embeddings;
    int qkv_bias;        /* llama/mistral: attention_bias; qwen2: always; qwen3: attention_bias */
    int o_bias;          /* llama/mistral/qwen3: attention_bias; qwen2: never */
    int mlp_bias;
    int qk_norm;         /* qwen3 */
    lcx_dtype dtype;     /* torch_dtype / dtype; LCX_F32 when absent */
    int64_t bos_token_id;             /* -1 when absent/null */
    int n_eos;  int64_t eos_token_ids[16];
    int64_t sliding_window;           /* 0 = none or inactive */
    lcx_rope_params rope;
    json_t *json;        /* the whole document (owned): unknown fields survive a write */
} lcx_model_config;

/* Parse config.json at path. */
lcx_status lcx_config_load(const char *path, lcx_model_config *cfg);
/* Parse from memory; label names the source in errors. */
lcx_status lcx_config_parse(const char *label, const char *text, size_t len, lcx_model_config *cfg);
/* Write cfg->json (with the typed fields above written back into it) atomically, indented like HF. */
lcx_status lcx_config_write(const lcx_model_config *cfg, const char *path);
void lcx_config_free(lcx_model_config *cfg); /* NULL ok; frees json */

#endif
