/* hf_config: Hugging Face config.json for the Llama family (llama, mistral, qwen2, qwen3).
 *
 * Reads both rope forms (legacy rope_theta + rope_scaling with rope_type or type; v5 rope_parameters), keeps
 * the whole JSON document so unknown fields are written back on export, and refuses what we cannot run
 * (unknown architecture, an active sliding window, non-silu activation) with an error naming file and key. */
#ifndef LCX_FORMATS_HF_CONFIG_H
#define LCX_FORMATS_HF_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "src/core/status.h"
#include "src/core/tensor.h"

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
    int qkv_bias;        /* llama, qwen3: attention_bias; qwen2: always; mistral: never (HF ignores the key) */
    int o_bias;          /* llama, qwen3: attention_bias; qwen2, mistral: never */
    int mlp_bias;        /* llama: mlp_bias; others: never */
    int qk_norm;         /* qwen3 */
    lcx_dtype dtype;     /* torch_dtype / dtype; LCX_F32 when absent */
    int64_t bos_token_id;             /* -1 when absent/null; ids are >= 0 */
    int n_eos;  int64_t eos_token_ids[16];
    /* Sliding-window attention as HF would apply it (Mistral: sliding_window, absent = 4096 as in MistralConfig;
     * Qwen: only with use_sliding_window and on layers >= max_window_layers or marked in layer_types).
     * 0 = none. Parsing refuses a window smaller than max_position_embeddings (it changes attention inside
     * the pretrained context, which we do not implement); a window >= max_position_embeddings is recorded
     * here so extension/export can lift it. */
    int64_t sliding_window;
    lcx_rope_params rope;
    json_t *json;        /* the whole document (owned): unknown fields survive a write */
} lcx_model_config;

/* Limits on sizes (far above any real model; they keep later products of sizes inside 64 bits). */
#define LCX_CONFIG_MAX_VOCAB     (INT64_C(1) << 28)
#define LCX_CONFIG_MAX_HIDDEN    (INT64_C(1) << 20)
#define LCX_CONFIG_MAX_FFN       (INT64_C(1) << 22)
#define LCX_CONFIG_MAX_LAYERS    INT64_C(4096)
#define LCX_CONFIG_MAX_HEADS     (INT64_C(1) << 16)
#define LCX_CONFIG_MAX_HEAD_DIM  (INT64_C(1) << 16)
#define LCX_CONFIG_MAX_POSITIONS (INT64_C(1) << 34)
#define LCX_CONFIG_MAX_BYTES     (16u << 20) /* config.json larger than this is refused */

/* HF class name of an architecture ("LlamaForCausalLM", ...). */
const char *lcx_arch_class(lcx_arch a);

/* Parse config.json at path. Errors name the path and the key, e.g.
 * "/m/config.json: key 'num_key_value_heads': 3 does not divide num_attention_heads 8".
 * Required: model_type or architectures, vocab_size, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, max_position_embeddings. Integer fields take JSON integers only, float fields integers
 * or reals, booleans true/false only (as transformers' strict config validation). Defaults follow transformers:
 * rms_norm_eps 1e-6, hidden_act silu, tie_word_embeddings false, rope_theta 10000, no rope scaling.
 * Rope: a non-null, non-empty rope_scaling wins over rope_parameters; rope_theta and partial_rotary_factor are
 * taken from that object, else from the top level; for llama3/yarn/longrope a top-level
 * original_max_position_embeddings takes priority over the one in the object (as transformers does). */
lcx_status lcx_config_load(const char *path, lcx_model_config *cfg);
/* Parse from memory; label names the source in errors. */
lcx_status lcx_config_parse(const char *label, const char *text, size_t len, lcx_model_config *cfg);
/* Write cfg->json (with the typed fields above written back into it) atomically, formatted exactly like
 * transformers' to_json_file (json.dumps indent=2, sort_keys=True, ensure_ascii, Python float repr, trailing
 * newline). Rope is written in the legacy form of docs/rope.md "Export form": top-level rope_theta (float) and a
 * rope_scaling object with rope_type and type (null for "default"); rope_parameters is removed, and for
 * llama3 a top-level original_max_position_embeddings is written. Mistral's sliding_window is written (null
 * when 0); Qwen's window keys are left as they are. */
lcx_status lcx_config_write(const lcx_model_config *cfg, const char *path);
void lcx_config_free(lcx_model_config *cfg); /* NULL ok; frees json */


/* Sync the typed fields into cfg->json (what lcx_config_write does before writing). */
lcx_status lcx_config_sync_json(lcx_model_config *cfg);
/* Serialise any JSON value like Python's json.dumps(v, indent=2, sort_keys=True) (no trailing newline).
 * Returns a malloc'd string or NULL when out of memory. */
char *lcx_json_dumps_hf(const json_t *v);
/* v as lcx_json_dumps_hf writes it, plus a trailing newline (how transformers writes config.json, the tokenizer
 * files and the safetensors index), to path atomically. */
lcx_status lcx_json_write_hf(const char *path, const json_t *v);

#endif
