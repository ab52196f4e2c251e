/* catalog: open a checkpoint (Hugging Face directory, sharded index, or single .safetensors file), read its
 * config.json and match the stored tensors against the parameter table of that config.
 *
 * Matching rules (docs/formats.md "Hugging Face model directory"): every expected tensor present with the expected
 * shape and a float-loadable dtype; no tensor the config does not imply. All problems are reported in one error
 * ("... 2 missing: a, b; 1 unexpected: c; 1 wrong shape: d [4, 4] (expected [4, 8])", at most a few names per
 * list plus a count). With tie_word_embeddings, lm_head.weight may be absent, or present and equal in value to
 * model.embed_tokens.weight (else an error). Rotary inv_freq buffers (model.layers.N.self_attn.rotary_emb
 * .inv_freq, saved by old conversions and ignored by transformers) are skipped and counted. */
#ifndef LCX_CATALOG_H
#define LCX_CATALOG_H

#include <jansson.h>
#include <stdint.h>

#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "src/checkpoint/model_params.h"
#include "src/core/status.h"

typedef struct lcx_dtype_stat {
    uint64_t tensors, elements, bytes;
} lcx_dtype_stat;

typedef struct lcx_catalog {
    char *path;                        /* as given */
    char *config_path;                 /* config.json used; NULL in tensors-only mode */
    int has_config;
    lcx_model_config cfg;              /* valid when has_config */
    lcx_param_table params;            /* valid when has_config */
    lcx_st_set *set;
    const lcx_st_tensor **tensor_of;   /* [params.n]: stored tensor of each parameter (has_config only) */
    const lcx_st_tensor *lm_head_tied; /* a stored lm_head.weight equal to the tied embedding, else NULL */
    size_t n_ignored;                  /* rotary inv_freq buffers skipped */
    lcx_dtype_stat dtypes[LCX_DTYPE_COUNT]; /* over every stored tensor */
    uint64_t n_tensors;                /* stored tensors */
    uint64_t total_elements, total_bytes; /* over stored tensors (data bytes, headers excluded) */
    uint64_t n_parameters;             /* model parameters, tied embedding once (transformers' num_parameters());
                                          tensors-only mode: total_elements */
} lcx_catalog;

/* path: a directory (must hold config.json), a model.safetensors.index.json, or one .safetensors file (config.json
 * beside an index or file is used when present; without it the catalog is tensors-only). */
lcx_status lcx_catalog_open(const char *path, lcx_catalog **out);
void lcx_catalog_close(lcx_catalog *c); /* NULL ok */

/* Context length the rope configuration is designed for: for yarn, llama3 and longrope with a factor,
 * factor x original_max_position_embeddings (max_position_embeddings when absent, as transformers fills it);
 * otherwise max_position_embeddings (linear/dynamic configs conventionally state the target length there). */
int64_t lcx_rope_implied_context(const lcx_model_config *cfg);

/* Summary as one JSON object (what `lcextend inspect --json` prints). Keys (config ones absent when
 * tensors-only): path, arch, architecture, num_hidden_layers, hidden_size, num_attention_heads,
 * num_key_value_heads, head_dim, intermediate_size, vocab_size, max_position_embeddings, tie_word_embeddings,
 * rms_norm_eps, torch_dtype, sliding_window (when set), num_parameters, num_tensors, total_bytes,
 * dtypes {NAME: {tensors, elements, bytes}}, rope {type, theta, partial_rotary_factor, factor?,
 * original_max_position_embeddings?, implied_context}; tensors-only: tensors [{name, dtype, shape}].
 * Returns a new reference or NULL when out of memory. */
json_t *lcx_catalog_summary_json(const lcx_catalog *c);
/* The config keys of that summary (arch ... rope) added to o; 0 when out of memory. */
int lcx_config_summary_put(json_t *o, const lcx_model_config *m);

#endif
