/* rope: rope types, tables and the reference rotation. Float32 steps mirror transformers 5.23
 * (modeling_rope_utils.py and LlamaRotaryEmbedding) operation by operation; see rope.h and docs/rope.md. */
#include "src/rope/rope.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The float32 steps mirror torch's separately rounded operations: no fused multiply-adds (gcc in ISO C mode
 * already does not contract; this tells clang). */
#pragma STDC FP_CONTRACT OFF

#define SUPPORTED_TYPES "default, linear, dynamic, yarn, longrope, llama3"

static const char *const type_names[LCX_ROPE_TYPE_COUNT] = {"default", "linear",   "dynamic",
                                                            "yarn",    "longrope", "llama3"};

const char *lcx_rope_type_name(lcx_rope_type t) {
    return (t >= 0 && t < LCX_ROPE_TYPE_COUNT) ? type_names[t] : "?";
}

lcx_status lcx_rope_type_parse(const char *name, lcx_rope_type *out) {
    for (int t = 0; t < LCX_ROPE_TYPE_COUNT; t++) {
        if (strcmp(name, type_names[t]) == 0) {
            *out = (lcx_rope_type)t;
            return LCX_OK;
        }
    }
    return lcx_fail(LCX_ERR_UNSUPPORTED, "rope_type '%s' is not supported (supported: " SUPPORTED_TYPES ")", name);
}

void lcx_rope_params_default(lcx_rope_params *p) {
    memset(p, 0, sizeof *p);
    strcpy(p->type, "default");
    p->theta = 10000.0;
    p->partial_rotary_factor = 1.0;
}

__attribute__((format(printf, 3, 4))) static void warnf(lcx_rope_warn_fn warn, void *user, const char *fmt, ...) {
    if (!warn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    warn(user, msg);
}

/* A scaling factor: missing is an error (HF KeyError), <= 0 or non-finite an error (HF would produce inf/NaN),
 * < 1 a warning (as HF). */
static lcx_status check_factor(const lcx_rope_params *p, lcx_rope_warn_fn warn, void *user) {
    LCX_FAIL_IF(!p->has_factor, LCX_ERR_INVALID, "rope_scaling: rope_type '%s' requires key 'factor'", p->type);
    LCX_FAIL_IF(!(p->factor > 0) || !isfinite(p->factor), LCX_ERR_INVALID,
                "rope_scaling: rope_type '%s': factor %g must be a positive number", p->type, p->factor);
    if (p->factor < 1.0)
        warnf(warn, user, "rope_scaling: rope_type '%s': factor should be >= 1, got %g", p->type, p->factor);
    return LCX_OK;
}

static lcx_status resolve_original(lcx_rope_plan *plan, const lcx_rope_params *p) {
    /* HF's standardize_rope_params fills a missing L with M for yarn/longrope/llama3. */
    plan->original_max = p->has_original_max ? p->original_max_position_embeddings : plan->max_pos;
    LCX_FAIL_IF(plan->original_max <= 0, LCX_ERR_INVALID,
                "rope_scaling: original_max_position_embeddings %lld must be positive",
                (long long)plan->original_max);
    return LCX_OK;
}

static double yarn_mscale(double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * log(s) + 1.0; }

static double yarn_corr_dim(double rot, int64_t d, double base, int64_t L) {
    return ((double)d * log((double)L / (rot * 2.0 * M_PI))) / (2.0 * log(base));
}

static lcx_status plan_yarn(lcx_rope_plan *plan, const lcx_rope_params *p, lcx_rope_warn_fn warn, void *user) {
    LCX_TRY(check_factor(p, warn, user));
    LCX_TRY(resolve_original(plan, p));
    plan->factor = p->factor;
    double s = p->factor;
    if (p->has_attention_factor) {
        plan->attn = p->attention_factor;
        if (p->attention_factor < 0)
            warnf(warn, user, "rope_scaling: yarn attention_factor should be > 0, got %g", p->attention_factor);
    } else if (p->has_mscale && p->mscale != 0 && p->has_mscale_all_dim && p->mscale_all_dim != 0) {
        plan->attn = yarn_mscale(s, p->mscale) / yarn_mscale(s, p->mscale_all_dim);
    } else {
        plan->attn = yarn_mscale(s, 1.0);
    }
    /* HF: `get("beta_fast") or 32`, so a zero counts as unset. */
    plan->beta_fast = (p->has_beta_fast && p->beta_fast != 0) ? p->beta_fast : 32.0;
    plan->beta_slow = (p->has_beta_slow && p->beta_slow != 0) ? p->beta_slow : 1.0;
    LCX_FAIL_IF(!(plan->beta_fast > 0) || !(plan->beta_slow > 0) || !isfinite(plan->beta_fast) ||
                    !isfinite(plan->beta_slow),
                LCX_ERR_INVALID, "rope_scaling: yarn beta_fast %g and beta_slow %g must be positive",
                plan->beta_fast, plan->beta_slow);
    if (plan->beta_fast < plan->beta_slow)
        warnf(warn, user, "rope_scaling: yarn beta_fast (%g) should be greater than beta_slow (%g)",
              plan->beta_fast, plan->beta_slow);
    double implicit = (double)plan->max_pos / (double)plan->original_max;
    if (implicit != s && implicit != 1.0)
        warnf(warn, user,
              "rope_scaling: yarn factor %g differs from max_position_embeddings / "
              "original_max_position_embeddings = %g; the explicit factor is used",
              s, implicit);
    plan->truncate = p->has_truncate ? (p->truncate != 0) : 1;
    double lo = yarn_corr_dim(plan->beta_fast, plan->rot_dim, plan->theta, plan->original_max);
    double hi = yarn_corr_dim(plan->beta_slow, plan->rot_dim, plan->theta, plan->original_max);
    if (plan->truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    lo = fmax(lo, 0.0);
    hi = fmin(hi, (double)(plan->rot_dim - 1));
    if (lo == hi) hi += 0.001; /* HF: prevent a singular ramp */
    plan->yarn_lo = lo;
    plan->yarn_hi = hi;
    return LCX_OK;
}

static lcx_status plan_longrope(lcx_rope_plan *plan, const lcx_rope_params *p, lcx_rope_warn_fn warn,
                                void *user) {
    LCX_FAIL_IF(p->n_short_factor == 0, LCX_ERR_INVALID,
                "rope_scaling: rope_type 'longrope' requires key 'short_factor'");
    LCX_FAIL_IF(p->n_long_factor == 0, LCX_ERR_INVALID,
                "rope_scaling: rope_type 'longrope' requires key 'long_factor'");
    /* HF only warns, then fails broadcasting (or silently broadcasts a length-1 list): an error here. */
    LCX_FAIL_IF(p->n_short_factor != plan->n_pairs, LCX_ERR_INVALID,
                "rope_scaling: longrope short_factor has %d entries, expected rotary dim / 2 = %lld",
                p->n_short_factor, (long long)plan->n_pairs);
    LCX_FAIL_IF(p->n_long_factor != plan->n_pairs, LCX_ERR_INVALID,
                "rope_scaling: longrope long_factor has %d entries, expected rotary dim / 2 = %lld",
                p->n_long_factor, (long long)plan->n_pairs);
    for (int64_t k = 0; k < plan->n_pairs; k++) {
        LCX_FAIL_IF(!(p->short_factor[k] > 0) || !isfinite(p->short_factor[k]) || !(p->long_factor[k] > 0) ||
                        !isfinite(p->long_factor[k]),
                    LCX_ERR_INVALID, "rope_scaling: longrope short_factor/long_factor[%lld] must be positive",
                    (long long)k);
        plan->short_factor[k] = (float)p->short_factor[k];
        plan->long_factor[k] = (float)p->long_factor[k];
    }
    LCX_TRY(resolve_original(plan, p));
    if (p->has_factor) {
        LCX_TRY(check_factor(p, warn, user));
        plan->factor = p->factor;
    } else {
        warnf(warn, user,
              "rope_scaling: longrope without 'factor': using max_position_embeddings / "
              "original_max_position_embeddings = %g",
              (double)plan->max_pos / (double)plan->original_max);
        plan->factor = (double)plan->max_pos / (double)plan->original_max;
    }
    if (p->has_attention_factor) {
        plan->attn = p->attention_factor;
        if (p->attention_factor < 0)
            warnf(warn, user, "rope_scaling: longrope attention_factor should be > 0, got %g", p->attention_factor);
    } else if (plan->factor <= 1.0) {
        plan->attn = 1.0;
    } else {
        LCX_FAIL_IF(plan->original_max < 2, LCX_ERR_INVALID,
                    "rope_scaling: longrope original_max_position_embeddings %lld must be >= 2",
                    (long long)plan->original_max);
        plan->attn = sqrt(1.0 + log(plan->factor) / log((double)plan->original_max));
    }
    return LCX_OK;
}

static lcx_status plan_llama3(lcx_rope_plan *plan, const lcx_rope_params *p, lcx_rope_warn_fn warn, void *user) {
    LCX_TRY(check_factor(p, warn, user));
    LCX_FAIL_IF(!p->has_low_freq_factor, LCX_ERR_INVALID,
                "rope_scaling: rope_type 'llama3' requires key 'low_freq_factor'");
    LCX_FAIL_IF(!p->has_high_freq_factor, LCX_ERR_INVALID,
                "rope_scaling: rope_type 'llama3' requires key 'high_freq_factor'");
    LCX_FAIL_IF(!(p->low_freq_factor > 0) || !(p->high_freq_factor > 0) || !isfinite(p->low_freq_factor) ||
                    !isfinite(p->high_freq_factor),
                LCX_ERR_INVALID, "rope_scaling: llama3 low_freq_factor %g and high_freq_factor %g must be positive",
                p->low_freq_factor, p->high_freq_factor);
    LCX_TRY(resolve_original(plan, p));
    plan->factor = p->factor;
    plan->low_freq_factor = p->low_freq_factor;
    plan->high_freq_factor = p->high_freq_factor;
    if (p->high_freq_factor <= p->low_freq_factor)
        warnf(warn, user, "rope_scaling: llama3 high_freq_factor (%g) should be greater than low_freq_factor (%g)",
              p->high_freq_factor, p->low_freq_factor);
    if (plan->original_max >= plan->max_pos)
        warnf(warn, user,
              "rope_scaling: llama3 original_max_position_embeddings (%lld) should be less than "
              "max_position_embeddings (%lld)",
              (long long)plan->original_max, (long long)plan->max_pos);
    return LCX_OK;
}

lcx_status lcx_rope_plan_init(lcx_rope_plan *plan, const lcx_rope_params *p, int64_t head_dim, int64_t max_pos,
                              lcx_rope_warn_fn warn, void *user) {
    memset(plan, 0, sizeof *plan);
    char type[sizeof p->type + 1];
    memcpy(type, p->type, sizeof p->type);
    type[sizeof p->type] = '\0';
    LCX_TRY(lcx_rope_type_parse(type, &plan->type));
    LCX_FAIL_IF(head_dim <= 0 || head_dim > 2 * LCX_ROPE_MAX_PAIRS, LCX_ERR_INVALID,
                "head_dim %lld out of range [1, %d]", (long long)head_dim, 2 * LCX_ROPE_MAX_PAIRS);
    LCX_FAIL_IF(max_pos <= 0, LCX_ERR_INVALID, "max_position_embeddings %lld must be positive", (long long)max_pos);
    LCX_FAIL_IF(!(p->theta > 0) || !isfinite(p->theta), LCX_ERR_INVALID, "rope_theta %g must be a positive number",
                p->theta);
    LCX_FAIL_IF(!(p->partial_rotary_factor > 0 && p->partial_rotary_factor <= 1), LCX_ERR_INVALID,
                "partial_rotary_factor %g must be in (0, 1]", p->partial_rotary_factor);
    plan->head_dim = head_dim;
    plan->max_pos = max_pos;
    plan->original_max = max_pos;
    plan->theta = p->theta;
    plan->factor = 1.0;
    plan->attn = 1.0;
    plan->rot_dim = (int64_t)((double)head_dim * p->partial_rotary_factor); /* Python int(): truncation */
    LCX_FAIL_IF(plan->rot_dim < 2 || plan->rot_dim % 2, LCX_ERR_INVALID,
                "rotary dim %lld (head_dim %lld x partial_rotary_factor %g) must be even and >= 2",
                (long long)plan->rot_dim, (long long)head_dim, p->partial_rotary_factor);
    plan->n_pairs = plan->rot_dim / 2;
    switch (plan->type) {
    case LCX_ROPE_DEFAULT: return LCX_OK;
    case LCX_ROPE_LINEAR:
        LCX_TRY(check_factor(p, warn, user));
        plan->factor = p->factor;
        return LCX_OK;
    case LCX_ROPE_DYNAMIC:
        LCX_TRY(check_factor(p, warn, user));
        LCX_FAIL_IF(plan->rot_dim <= 2, LCX_ERR_INVALID, "rope_scaling: dynamic needs rotary dim > 2 (got %lld)",
                    (long long)plan->rot_dim);
        plan->factor = p->factor;
        return LCX_OK;
    case LCX_ROPE_YARN: return plan_yarn(plan, p, warn, user);
    case LCX_ROPE_LONGROPE: return plan_longrope(plan, p, warn, user);
    case LCX_ROPE_LLAMA3: return plan_llama3(plan, p, warn, user);
    default: break;
    }
    LCX_ASSERT(0);
    return LCX_ERR_INVALID;
}

/* ---- inverse frequencies --------------------------------------------------------------------------------- */

/* HF: torch.arange(0, dim, 2, dtype=int64).float() / dim, a float32 division. */
static float exponent(int64_t k, int64_t d) { return (float)(2 * k) / (float)d; }

/* HF: `base ** exponent` with a Python-float base and a float32 tensor: base rounded to float32, float32 pow
 * (torch's is within 1 ulp of this correctly rounded value). */
static float pow_f32(double base, float e) { return (float)pow((double)(float)base, (double)e); }

static void inv_default(const lcx_rope_plan *plan, double base, float *inv) {
    for (int64_t k = 0; k < plan->n_pairs; k++) inv[k] = 1.0f / pow_f32(base, exponent(k, plan->rot_dim));
}

static void inv_dynamic(const lcx_rope_plan *plan, int64_t seq_len, float *inv) {
    double s = plan->factor, e = (double)plan->rot_dim / (double)(plan->rot_dim - 2);
    if (seq_len <= plan->max_pos) {
        /* The module keeps its init-time table (Python floats, seq_len = M). */
        double b = plan->theta * pow((s * (double)plan->max_pos / (double)plan->max_pos) - (s - 1.0), e);
        inv_default(plan, b, inv);
        return;
    }
    /* Growth past M: seq_len is an int64 tensor, so HF's base arithmetic runs in float32 (0-d tensors). */
    float a = (float)s * (float)seq_len;
    a = a / (float)plan->max_pos;
    a = a - (float)(s - 1.0);
    float pw = (float)pow((double)a, e); /* tensor ** Python float: the exponent stays double */
    float b = (float)plan->theta * pw;
    for (int64_t k = 0; k < plan->n_pairs; k++)
        inv[k] = 1.0f / (float)pow((double)b, (double)exponent(k, plan->rot_dim));
}

static void inv_yarn(const lcx_rope_plan *plan, float *inv) {
    float s = (float)plan->factor, lo = (float)plan->yarn_lo, span = (float)(plan->yarn_hi - plan->yarn_lo);
    for (int64_t k = 0; k < plan->n_pairs; k++) {
        float pos = pow_f32(plan->theta, exponent(k, plan->rot_dim));
        float extra = 1.0f / pos;
        float interp = 1.0f / (s * pos);
        float ramp = ((float)k - lo) / span;
        ramp = ramp < 0.0f ? 0.0f : (ramp > 1.0f ? 1.0f : ramp);
        float ef = 1.0f - ramp; /* HF's "extrapolation factor" */
        inv[k] = interp * (1.0f - ef) + extra * ef;
    }
}

static void inv_longrope(const lcx_rope_plan *plan, int64_t seq_len, float *inv) {
    const float *ext = seq_len > plan->original_max ? plan->long_factor : plan->short_factor;
    for (int64_t k = 0; k < plan->n_pairs; k++)
        inv[k] = 1.0f / (ext[k] * pow_f32(plan->theta, exponent(k, plan->rot_dim)));
}

static void inv_llama3(const lcx_rope_plan *plan, float *inv) {
    float s = (float)plan->factor, L = (float)plan->original_max;
    float lff = (float)plan->low_freq_factor;
    float lo_wl = (float)((double)plan->original_max / plan->low_freq_factor);
    float hi_wl = (float)((double)plan->original_max / plan->high_freq_factor);
    float span = (float)(plan->high_freq_factor - plan->low_freq_factor);
    float two_pi = (float)(2.0 * M_PI);
    for (int64_t k = 0; k < plan->n_pairs; k++) {
        float inv0 = 1.0f / pow_f32(plan->theta, exponent(k, plan->rot_dim));
        float wl = two_pi / inv0;
        float il = wl > lo_wl ? inv0 / s : inv0;
        int medium = !(wl < hi_wl) && !(wl > lo_wl);
        if (medium && span != 0.0f) {
            float t = (L / wl - lff) / span;
            il = (1.0f - t) * il / s + t * il;
        }
        inv[k] = il;
    }
}

lcx_status lcx_rope_inv_freq(const lcx_rope_plan *plan, int64_t seq_len, float *inv_freq, double *attn) {
    LCX_FAIL_IF(seq_len < 0, LCX_ERR_INVALID, "rope: sequence length %lld is negative", (long long)seq_len);
    switch (plan->type) {
    case LCX_ROPE_DEFAULT: inv_default(plan, plan->theta, inv_freq); break;
    case LCX_ROPE_LINEAR: {
        inv_default(plan, plan->theta, inv_freq);
        float s = (float)plan->factor;
        for (int64_t k = 0; k < plan->n_pairs; k++) inv_freq[k] /= s;
        break;
    }
    case LCX_ROPE_DYNAMIC: inv_dynamic(plan, seq_len, inv_freq); break;
    case LCX_ROPE_YARN: inv_yarn(plan, inv_freq); break;
    case LCX_ROPE_LONGROPE: inv_longrope(plan, seq_len, inv_freq); break;
    case LCX_ROPE_LLAMA3: inv_llama3(plan, inv_freq); break;
    default: LCX_ASSERT(0);
    }
    if (attn) *attn = plan->attn;
    return LCX_OK;
}

/* ---- tables and the rotation ----------------------------------------------------------------------------- */

void lcx_rope_table(const float *inv_freq, int64_t n_pairs, double attn, int64_t p0, int64_t n, float *cos_out,
                    float *sin_out) {
    float a = (float)attn;
    for (int64_t i = 0; i < n; i++) {
        float p = (float)(p0 + i);
        for (int64_t k = 0; k < n_pairs; k++) {
            float th = p * inv_freq[k];
            cos_out[i * n_pairs + k] = (float)cos((double)th) * a;
            sin_out[i * n_pairs + k] = (float)sin((double)th) * a;
        }
    }
}

lcx_status lcx_rope_cos_sin(const lcx_rope_plan *plan, int64_t seq_len, int64_t p0, int64_t n, float *cos_out,
                            float *sin_out) {
    LCX_FAIL_IF(p0 < 0 || n < 0 || p0 > INT64_MAX - n, LCX_ERR_INVALID, "rope: positions [%lld, +%lld) out of range",
                (long long)p0, (long long)n);
    float inv[LCX_ROPE_MAX_PAIRS];
    double attn;
    LCX_TRY(lcx_rope_inv_freq(plan, seq_len, inv, &attn));
    lcx_rope_table(inv, plan->n_pairs, attn, p0, n, cos_out, sin_out);
    return LCX_OK;
}

/* sign = +1: forward rotation; -1: its transpose (backward). */
static void rotate(float *x, int64_t seq, int64_t heads, int64_t head_dim, int64_t rot_dim, const float *cos_t,
                   const float *sin_t, float sign) {
    LCX_ASSERT(rot_dim >= 2 && rot_dim % 2 == 0 && rot_dim <= head_dim);
    int64_t h = rot_dim / 2;
    for (int64_t t = 0; t < seq; t++) {
        const float *c = cos_t + t * h, *s = sin_t + t * h;
        for (int64_t j = 0; j < heads; j++) {
            float *v = x + (t * heads + j) * head_dim;
            for (int64_t i = 0; i < h; i++) {
                float a = v[i], b = v[i + h], sn = sign * s[i];
                v[i] = a * c[i] - b * sn;
                v[i + h] = b * c[i] + a * sn;
            }
        }
    }
}

void lcx_rope_apply_fwd(float *x, int64_t seq, int64_t heads, int64_t head_dim, int64_t rot_dim, const float *cos,
                        const float *sin) {
    rotate(x, seq, heads, head_dim, rot_dim, cos, sin, 1.0f);
}

void lcx_rope_apply_bwd(float *g, int64_t seq, int64_t heads, int64_t head_dim, int64_t rot_dim, const float *cos,
                        const float *sin) {
    rotate(g, seq, heads, head_dim, rot_dim, cos, sin, -1.0f);
}
