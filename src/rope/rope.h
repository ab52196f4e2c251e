/* rope: rotary position embedding for every Hugging Face rope type (docs/rope.md).
 *
 * Flow: lcx_rope_params (as the config states them) -> lcx_rope_plan_init (validate like transformers 5.23,
 * resolve defaults) -> lcx_rope_inv_freq (inv_freq[d/2] + attention factor for one sequence length: dynamic and
 * longrope depend on it) -> lcx_rope_table (cos/sin for positions [p0, p0+n)) -> lcx_rope_apply_fwd/bwd.
 *
 * Numerics follow transformers' float32 arithmetic step by step (same operation order, same float32 roundings;
 * the only difference is torch's pow/cos being within 1 ulp of the correctly rounded result we use), so inv_freq
 * matches HF to ~2e-7 relative. The attention factor is computed in double like HF (a Python float).
 *
 * Also here: writing a rope config into a config.json object (lcx_rope_export) and planning an extension
 * (lcx_rope_plan_extension) with the re-extension rule of docs/rope.md. */
#ifndef LCX_ROPE_H
#define LCX_ROPE_H

#include <jansson.h>
#include <stdint.h>

#include "formats/hf_config.h"
#include "src/core/status.h"

typedef enum lcx_rope_type {
    LCX_ROPE_DEFAULT = 0,
    LCX_ROPE_LINEAR,
    LCX_ROPE_DYNAMIC,
    LCX_ROPE_YARN,
    LCX_ROPE_LONGROPE,
    LCX_ROPE_LLAMA3,
    LCX_ROPE_TYPE_COUNT
} lcx_rope_type;

/* HF name ("default", "linear", ...). Never NULL ("?" when out of range). */
const char *lcx_rope_type_name(lcx_rope_type t);
/* Parse a rope_type string; an unknown one fails (LCX_ERR_UNSUPPORTED) naming it and listing the supported. */
lcx_status lcx_rope_type_parse(const char *name, lcx_rope_type *out);

/* Non-fatal findings (the ones transformers logs as warnings) go here; warn may be NULL (ignored). */
typedef void (*lcx_rope_warn_fn)(void *user, const char *msg);

/* Set p to the plain default: type "default", theta 10000, partial_rotary_factor 1, nothing else set. */
void lcx_rope_params_default(lcx_rope_params *p);

/* A validated, resolved rope configuration. Plain value; no _free needed. */
typedef struct lcx_rope_plan {
    lcx_rope_type type;
    int64_t head_dim;         /* config head_dim (explicit or hidden/heads) */
    int64_t rot_dim;          /* d = int(head_dim * partial_rotary_factor), even, >= 2 */
    int64_t n_pairs;          /* d/2 */
    int64_t max_pos;          /* M: max_position_embeddings */
    int64_t original_max;     /* L (yarn/longrope/llama3; defaults to M like HF), else M */
    double theta;             /* b */
    double factor;            /* s; 1 for default; longrope without factor: M/L */
    double attn;              /* attention factor (independent of the sequence length) */
    double beta_fast, beta_slow;          /* yarn, after defaults (32, 1; zero = unset) */
    int truncate;                         /* yarn */
    double yarn_lo, yarn_hi;              /* yarn correction range after truncation/clamping */
    double low_freq_factor, high_freq_factor; /* llama3 */
    float short_factor[LCX_ROPE_MAX_PAIRS];   /* longrope, float32 like HF's tensors */
    float long_factor[LCX_ROPE_MAX_PAIRS];
} lcx_rope_plan;

/* Validate p for a model with this head_dim and max_position_embeddings and resolve it into plan.
 * Errors (as in HF, where a KeyError or a crash follows): unknown type (LCX_ERR_UNSUPPORTED, listing the
 * supported ones), a missing required key (factor; llama3 low/high_freq_factor; longrope short/long_factor),
 * longrope lists of length != d/2. Errors where HF would compute inf/NaN: theta <= 0, factor <= 0, negative
 * beta, rotary dim odd or < 2 (dynamic: < 4), partial_rotary_factor outside (0, 1]. Warnings (HF logs them):
 * factor < 1, yarn beta_fast < beta_slow, yarn factor != M/L, llama3 high_freq_factor <= low_freq_factor,
 * llama3 L >= M, longrope without factor, negative attention_factor. */
lcx_status lcx_rope_plan_init(lcx_rope_plan *plan, const lcx_rope_params *p, int64_t head_dim, int64_t max_pos,
                              lcx_rope_warn_fn warn, void *user);

/* inv_freq[n_pairs] and the attention factor for a forward over positions [0, seq_len), i.e. HF's
 * seq_len = max(position_ids) + 1 (the global length under context parallelism). Only dynamic (n = max(seq_len, M))
 * and longrope (long factors when seq_len > L) depend on it. HF's dynamic module is stateful (it only recomputes
 * when the length grows past the cached one); this is the stateless per-length value, equal to what a fresh
 * module computes. attn may be NULL. */
lcx_status lcx_rope_inv_freq(const lcx_rope_plan *plan, int64_t seq_len, float *inv_freq, double *attn);

/* cos/sin tables for positions p0 .. p0+n-1: cos[i*n_pairs + k] = cos(float(p0+i) * inv_freq[k]) * attn,
 * the angle being one float32 multiply as in HF; same for sin. (HF's cos has d columns: the two halves are equal,
 * so only n_pairs are stored.) */
void lcx_rope_table(const float *inv_freq, int64_t n_pairs, double attn, int64_t p0, int64_t n, float *cos,
                    float *sin);

/* Both steps at once for a forward of global length seq_len: cos/sin [n, n_pairs] for positions p0 .. p0+n-1. */
lcx_status lcx_rope_cos_sin(const lcx_rope_plan *plan, int64_t seq_len, int64_t p0, int64_t n, float *cos,
                            float *sin);

/* In-place rotation of x [seq, heads, head_dim] in HF's half-split layout over the first rot_dim dims of each head
 * (dims >= rot_dim untouched): x'[i] = x[i] c - x[i+h] s, x'[i+h] = x[i+h] c + x[i] s, h = rot_dim/2, with
 * cos/sin [seq, h] from lcx_rope_table. Reference implementation (kernels/ has the backend one). */
void lcx_rope_apply_fwd(float *x, int64_t seq, int64_t heads, int64_t head_dim, int64_t rot_dim, const float *cos,
                        const float *sin);
/* Backward of the above (the transpose): turns dy into dx in place: dx[i] = dy[i] c + dy[i+h] s,
 * dx[i+h] = dy[i+h] c - dy[i] s. */
void lcx_rope_apply_bwd(float *g, int64_t seq, int64_t heads, int64_t head_dim, int64_t rot_dim, const float *cos,
                        const float *sin);

/* Write p into a config.json object in the legacy form (docs/rope.md "Export"): top-level rope_theta (and
 * partial_rotary_factor when != 1), rope_scaling {rope_type, type, ...} (null for default), numbers as reals,
 * original_max_position_embeddings as an integer; max_position_embeddings = max_pos (yarn: L*s); llama3 and
 * longrope also write a top-level original_max_position_embeddings (yarn: rewritten when already present, since
 * transformers lets the top-level value override the rope dict's). Removes a v5 "rope_parameters" (it would
 * otherwise be stale: transformers 5.23 ignores it when rope_scaling is non-null but uses it when rope_scaling is
 * null). Validates p first (same errors as lcx_rope_plan_init); llama3 with L >= M is an error here; warnings:
 * dynamic (vLLM/llama.cpp cannot run it), longrope factor != M/L (transformers 4.x uses M/L). */
lcx_status lcx_rope_export(const lcx_rope_params *p, int64_t head_dim, int64_t max_pos, json_t *config,
                           lcx_rope_warn_fn warn, void *user);

/* ---- extension planning ----------------------------------------------------------------------------------- */
typedef enum lcx_rope_method {
    LCX_EXTEND_YARN = 0,
    LCX_EXTEND_PI,        /* linear */
    LCX_EXTEND_NTK,       /* static NTK-aware: theta' = theta * s^(d/(d-2)), type default */
    LCX_EXTEND_ABF,       /* explicit new theta, type default */
    LCX_EXTEND_LLAMA3,
    LCX_EXTEND_LONGROPE,  /* user-given factor lists */
    LCX_EXTEND_DYNAMIC,   /* dynamic NTK (evaluation only) */
    LCX_EXTEND_METHOD_COUNT
} lcx_rope_method;

const char *lcx_rope_method_name(lcx_rope_method m); /* "yarn", "pi", "ntk", "abf", "llama3", "longrope", "dynamic" */
lcx_status lcx_rope_method_parse(const char *name, lcx_rope_method *out);

typedef struct lcx_rope_extend {
    lcx_rope_method method;
    int64_t target;            /* N: the new context length */
    double theta;              /* abf: required new theta; others: 0 (ignored) */
    double low_freq_factor;    /* llama3: 0 = keep the model's (llama3) or 1 */
    double high_freq_factor;   /* llama3: 0 = keep the model's (llama3) or 4 */
    int n_short_factor, n_long_factor;     /* longrope: both required, length d/2 */
    const double *short_factor, *long_factor;
    double attention_factor;   /* longrope/yarn: 0 = derived */
} lcx_rope_extend;

/* The pretraining length the current config was extended from: L for yarn/longrope/llama3 (M if absent),
 * M/s for linear, M for default/dynamic. */
double lcx_rope_original_length(const lcx_rope_params *p, int64_t max_pos);

/* New rope params and max_position_embeddings for extending a model (params cur, max_pos M) to req->target.
 * Re-extension rule (docs/rope.md): factors are computed against the original pretraining length L0
 * (lcx_rope_original_length): yarn/llama3/longrope s = N/L0 with L = L0, pi s = N/L0 (an already-linear model's
 * factor multiplies), ntk theta' = theta * (N/M)^(d/(d-2)) (compounds with earlier NTK steps), dynamic
 * s = N/L0 with M = L0. ntk/abf over a model with a scaling type other than default/dynamic is refused.
 * out is validated with lcx_rope_plan_init before returning; out may be the same object as cur. */
lcx_status lcx_rope_plan_extension(const lcx_rope_params *cur, int64_t head_dim, int64_t max_pos,
                                   const lcx_rope_extend *req, lcx_rope_params *out, int64_t *out_max_pos,
                                   lcx_rope_warn_fn warn, void *user);

#endif /* LCX_ROPE_H */
