/* rope_config: writing rope params into config.json (legacy form) and planning a context extension.
 * The rules are written down in docs/rope.md. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/rope/rope.h"

__attribute__((format(printf, 3, 4))) static void warnf(lcx_rope_warn_fn warn, void *user, const char *fmt, ...) {
    if (!warn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    warn(user, msg);
}

/* ---- export ---------------------------------------------------------------------------------------------- */

static lcx_status set(json_t *obj, const char *key, json_t *val) {
    LCX_FAIL_IF(!val || json_object_set_new(obj, key, val) != 0, LCX_ERR_OOM, "config.json: cannot set '%s'", key);
    return LCX_OK;
}

static lcx_status set_list(json_t *obj, const char *key, const double *v, int n) {
    json_t *arr = json_array();
    LCX_FAIL_IF(!arr, LCX_ERR_OOM, "config.json: cannot set '%s'", key);
    for (int i = 0; i < n; i++) {
        if (json_array_append_new(arr, json_real(v[i])) != 0) {
            json_decref(arr);
            return lcx_fail(LCX_ERR_OOM, "config.json: cannot set '%s'", key);
        }
    }
    return set(obj, key, arr);
}

static lcx_status fill_scaling(const lcx_rope_params *p, const lcx_rope_plan *plan, json_t *rs) {
    const char *name = lcx_rope_type_name(plan->type);
    LCX_TRY(set(rs, "rope_type", json_string(name)));
    LCX_TRY(set(rs, "type", json_string(name))); /* the pre-4.45 alias; transformers ignores it when both match */
    switch (plan->type) {
    case LCX_ROPE_LINEAR:
    case LCX_ROPE_DYNAMIC: return set(rs, "factor", json_real(p->factor));
    case LCX_ROPE_YARN:
        LCX_TRY(set(rs, "factor", json_real(p->factor)));
        LCX_TRY(set(rs, "original_max_position_embeddings", json_integer(plan->original_max)));
        LCX_TRY(set(rs, "beta_fast", json_real(plan->beta_fast)));
        LCX_TRY(set(rs, "beta_slow", json_real(plan->beta_slow)));
        if (p->has_attention_factor) LCX_TRY(set(rs, "attention_factor", json_real(p->attention_factor)));
        if (p->has_mscale) LCX_TRY(set(rs, "mscale", json_real(p->mscale)));
        if (p->has_mscale_all_dim) LCX_TRY(set(rs, "mscale_all_dim", json_real(p->mscale_all_dim)));
        if (!plan->truncate) LCX_TRY(set(rs, "truncate", json_false()));
        return LCX_OK;
    case LCX_ROPE_LONGROPE:
        LCX_TRY(set_list(rs, "short_factor", p->short_factor, p->n_short_factor));
        LCX_TRY(set_list(rs, "long_factor", p->long_factor, p->n_long_factor));
        LCX_TRY(set(rs, "original_max_position_embeddings", json_integer(plan->original_max)));
        if (p->has_factor) LCX_TRY(set(rs, "factor", json_real(p->factor)));
        if (p->has_attention_factor) LCX_TRY(set(rs, "attention_factor", json_real(p->attention_factor)));
        return LCX_OK;
    case LCX_ROPE_LLAMA3:
        LCX_TRY(set(rs, "factor", json_real(p->factor)));
        LCX_TRY(set(rs, "low_freq_factor", json_real(p->low_freq_factor)));
        LCX_TRY(set(rs, "high_freq_factor", json_real(p->high_freq_factor)));
        LCX_TRY(set(rs, "original_max_position_embeddings", json_integer(plan->original_max)));
        return LCX_OK;
    default: break;
    }
    LCX_ASSERT(0);
    return LCX_ERR_INVALID;
}

lcx_status lcx_rope_export(const lcx_rope_params *p, int64_t head_dim, int64_t max_pos, json_t *config,
                           lcx_rope_warn_fn warn, void *user) {
    LCX_FAIL_IF(!json_is_object(config), LCX_ERR_INVALID, "config.json: rope export needs a JSON object");
    lcx_rope_type type;
    char tname[sizeof p->type + 1];
    memcpy(tname, p->type, sizeof p->type);
    tname[sizeof p->type] = '\0';
    LCX_TRY(lcx_rope_type_parse(tname, &type));
    int64_t M = max_pos;
    if (type == LCX_ROPE_YARN && p->has_factor && p->factor > 0 && isfinite(p->factor)) {
        /* yarn's context is L*s; writing it keeps HF's implicit-factor check quiet and vLLM's length right. */
        double L = p->has_original_max ? (double)p->original_max_position_embeddings : (double)max_pos;
        double m = nearbyint(L * p->factor);
        LCX_FAIL_IF(!(m >= 1 && m < 9.2e18), LCX_ERR_INVALID, "rope export: yarn L*factor = %g is out of range",
                    L * p->factor);
        M = (int64_t)m;
        if (M != max_pos)
            warnf(warn, user, "rope export: yarn max_position_embeddings written as L*factor = %lld (was %lld)",
                  (long long)M, (long long)max_pos);
    }
    lcx_rope_plan plan;
    LCX_TRY(lcx_rope_plan_init(&plan, p, head_dim, M, warn, user));
    LCX_FAIL_IF(type == LCX_ROPE_LLAMA3 && plan.original_max >= M, LCX_ERR_INVALID,
                "rope export: llama3 original_max_position_embeddings %lld must be < max_position_embeddings %lld",
                (long long)plan.original_max, (long long)M);
    if (type == LCX_ROPE_LONGROPE && p->has_factor &&
        fabs((double)plan.original_max * p->factor - (double)M) > 0.5)
        warnf(warn, user,
              "rope export: longrope factor %g != max_position_embeddings / original_max_position_embeddings = %g; "
              "transformers before 5.0 derives the factor from that ratio",
              p->factor, (double)M / (double)plan.original_max);
    if (type == LCX_ROPE_DYNAMIC)
        warnf(warn, user, "rope export: dynamic NTK has no vLLM or llama.cpp equivalent; those runtimes will "
                          "ignore or reject it");

    LCX_TRY(set(config, "max_position_embeddings", json_integer(M)));
    LCX_TRY(set(config, "rope_theta", json_real(p->theta)));
    if (p->partial_rotary_factor != 1.0 || json_object_get(config, "partial_rotary_factor"))
        LCX_TRY(set(config, "partial_rotary_factor", json_real(p->partial_rotary_factor)));
    if (type == LCX_ROPE_DEFAULT) {
        LCX_TRY(set(config, "rope_scaling", json_null()));
    } else {
        json_t *rs = json_object();
        LCX_FAIL_IF(!rs, LCX_ERR_OOM, "config.json: cannot set 'rope_scaling'");
        lcx_status st = fill_scaling(p, &plan, rs);
        if (st != LCX_OK) {
            json_decref(rs);
            return st;
        }
        LCX_TRY(set(config, "rope_scaling", rs));
    }
    /* transformers lets a top-level original_max_position_embeddings override the one in the rope dict; 4.x
     * longrope reads only the top-level one (Phi-3 style); llama.cpp's converter reads it for llama3. */
    if (type == LCX_ROPE_LLAMA3 || type == LCX_ROPE_LONGROPE ||
        (type == LCX_ROPE_YARN && json_object_get(config, "original_max_position_embeddings")))
        LCX_TRY(set(config, "original_max_position_embeddings", json_integer(plan.original_max)));
    /* A v5 rope_parameters would be stale; 5.23 reads it whenever rope_scaling is null. */
    json_object_del(config, "rope_parameters");
    return LCX_OK;
}

/* ---- extension planning ---------------------------------------------------------------------------------- */

static const char *const method_names[LCX_EXTEND_METHOD_COUNT] = {"yarn",   "pi",       "ntk",    "abf",
                                                                  "llama3", "longrope", "dynamic"};

const char *lcx_rope_method_name(lcx_rope_method m) {
    return (m >= 0 && m < LCX_EXTEND_METHOD_COUNT) ? method_names[m] : "?";
}

lcx_status lcx_rope_method_parse(const char *name, lcx_rope_method *out) {
    for (int m = 0; m < LCX_EXTEND_METHOD_COUNT; m++) {
        if (strcmp(name, method_names[m]) == 0) {
            *out = (lcx_rope_method)m;
            return LCX_OK;
        }
    }
    return lcx_fail(LCX_ERR_INVALID,
                    "rope method '%s' is not known (known: yarn, pi, ntk, abf, llama3, longrope, dynamic)", name);
}

double lcx_rope_original_length(const lcx_rope_params *p, int64_t max_pos) {
    char tname[sizeof p->type + 1];
    memcpy(tname, p->type, sizeof p->type);
    tname[sizeof p->type] = '\0';
    if (strcmp(tname, "yarn") == 0 || strcmp(tname, "longrope") == 0 || strcmp(tname, "llama3") == 0)
        return p->has_original_max ? (double)p->original_max_position_embeddings : (double)max_pos;
    if (strcmp(tname, "linear") == 0 && p->has_factor && p->factor > 0) return (double)max_pos / p->factor;
    return (double)max_pos;
}

/* Keep theta, partial rotary and (when staying yarn) the yarn shape knobs; drop everything else. */
static void reset_scaling(lcx_rope_params *out, const lcx_rope_params *cur, const char *type) {
    lcx_rope_params_default(out);
    snprintf(out->type, sizeof out->type, "%s", type);
    out->theta = cur->theta;
    out->partial_rotary_factor = cur->partial_rotary_factor;
}

lcx_status lcx_rope_plan_extension(const lcx_rope_params *cur_in, int64_t head_dim, int64_t max_pos,
                                   const lcx_rope_extend *req, lcx_rope_params *out, int64_t *out_max_pos,
                                   lcx_rope_warn_fn warn, void *user) {
    lcx_rope_params cur_copy = *cur_in; /* out may alias cur_in */
    const lcx_rope_params *cur = &cur_copy;
    lcx_rope_plan plan;
    LCX_TRY(lcx_rope_plan_init(&plan, cur, head_dim, max_pos, warn, user));
    const char *mname = lcx_rope_method_name(req->method);
    LCX_FAIL_IF(req->method < 0 || req->method >= LCX_EXTEND_METHOD_COUNT, LCX_ERR_INVALID,
                "rope extension: unknown method %d", (int)req->method);
    int64_t N = req->target;
    LCX_FAIL_IF(N <= 0, LCX_ERR_INVALID, "rope extension: target length %lld must be positive", (long long)N);
    double L0 = lcx_rope_original_length(cur, max_pos);
    int64_t L0i = (int64_t)nearbyint(L0);
    int needs_L = req->method == LCX_EXTEND_YARN || req->method == LCX_EXTEND_LLAMA3 ||
                  req->method == LCX_EXTEND_LONGROPE || req->method == LCX_EXTEND_DYNAMIC;
    if (needs_L || req->method == LCX_EXTEND_PI) {
        /* pi only needs the ratio; the others write L (an integer) into the config. */
        LCX_FAIL_IF(needs_L && fabs(L0 - (double)L0i) > 1e-6 * L0, LCX_ERR_INVALID,
                    "rope extension (%s): original length max_position_embeddings / factor = %g is not a whole "
                    "number",
                    mname, L0);
        LCX_FAIL_IF((double)N <= L0, LCX_ERR_INVALID,
                    "rope extension (%s): target %lld must be longer than the original pretraining length %g",
                    mname, (long long)N, L0);
    }
    double s = (double)N / (double)L0i;
    int64_t newM = N;
    switch (req->method) {
    case LCX_EXTEND_YARN:
        reset_scaling(out, cur, "yarn");
        if (plan.type == LCX_ROPE_YARN) {
            /* Same method again: keep the shape knobs, the factor is recomputed against L. */
            out->has_beta_fast = cur->has_beta_fast, out->beta_fast = cur->beta_fast;
            out->has_beta_slow = cur->has_beta_slow, out->beta_slow = cur->beta_slow;
            out->has_mscale = cur->has_mscale, out->mscale = cur->mscale;
            out->has_mscale_all_dim = cur->has_mscale_all_dim, out->mscale_all_dim = cur->mscale_all_dim;
            out->has_truncate = cur->has_truncate, out->truncate = cur->truncate;
            if (cur->has_attention_factor && !(req->attention_factor > 0))
                warnf(warn, user, "rope extension: dropping the explicit yarn attention_factor %g (it belonged to "
                                  "factor %g); it is now derived from the new factor",
                      cur->attention_factor, cur->factor);
        }
        out->has_factor = 1, out->factor = s;
        out->has_original_max = 1, out->original_max_position_embeddings = L0i;
        if (req->attention_factor > 0) out->has_attention_factor = 1, out->attention_factor = req->attention_factor;
        break;
    case LCX_EXTEND_PI:
        /* Over an already-linear model L0 = M/s0, so s = N/L0 = s0 * N/M: the factors multiply. */
        reset_scaling(out, cur, "linear");
        out->has_factor = 1, out->factor = (double)N / L0;
        break;
    case LCX_EXTEND_NTK:
    case LCX_EXTEND_ABF:
        LCX_FAIL_IF(plan.type != LCX_ROPE_DEFAULT && plan.type != LCX_ROPE_DYNAMIC, LCX_ERR_UNSUPPORTED,
                    "rope extension (%s): the model already uses rope_type '%s'; raising theta on top of it is not "
                    "supported (use --method %s, computed against the original length %lld)",
                    mname, lcx_rope_type_name(plan.type), lcx_rope_type_name(plan.type), (long long)L0i);
        reset_scaling(out, cur, "default");
        if (req->method == LCX_EXTEND_NTK) {
            /* theta' = theta * (N/M)^(d/(d-2)); successive NTK steps compound to the same as one from the start. */
            double r = (double)N / (double)max_pos;
            LCX_FAIL_IF(r <= 1.0, LCX_ERR_INVALID, "rope extension (ntk): target %lld must be longer than %lld",
                        (long long)N, (long long)max_pos);
            LCX_FAIL_IF(plan.rot_dim <= 2, LCX_ERR_INVALID, "rope extension (ntk): rotary dim must be > 2");
            out->theta = cur->theta * pow(r, (double)plan.rot_dim / (double)(plan.rot_dim - 2));
        } else {
            LCX_FAIL_IF(!(req->theta > 0) || !isfinite(req->theta), LCX_ERR_INVALID,
                        "rope extension (abf): a new rope_theta (> 0) is required");
            if (req->theta <= cur->theta)
                warnf(warn, user, "rope extension (abf): new rope_theta %g is not larger than the current %g",
                      req->theta, cur->theta);
            out->theta = req->theta;
        }
        break;
    case LCX_EXTEND_LLAMA3:
        reset_scaling(out, cur, "llama3");
        out->has_factor = 1, out->factor = s;
        out->has_original_max = 1, out->original_max_position_embeddings = L0i;
        out->has_low_freq_factor = 1;
        out->has_high_freq_factor = 1;
        out->low_freq_factor = req->low_freq_factor > 0                   ? req->low_freq_factor
                               : (plan.type == LCX_ROPE_LLAMA3)          ? cur->low_freq_factor
                                                                          : 1.0;
        out->high_freq_factor = req->high_freq_factor > 0                  ? req->high_freq_factor
                                : (plan.type == LCX_ROPE_LLAMA3)          ? cur->high_freq_factor
                                                                           : 4.0;
        break;
    case LCX_EXTEND_LONGROPE:
        LCX_FAIL_IF(!req->short_factor || !req->long_factor || req->n_short_factor != plan.n_pairs ||
                        req->n_long_factor != plan.n_pairs,
                    LCX_ERR_INVALID,
                    "rope extension (longrope): short_factor and long_factor lists of length %lld (rotary dim / 2) "
                    "are required",
                    (long long)plan.n_pairs);
        reset_scaling(out, cur, "longrope");
        out->has_factor = 1, out->factor = s;
        out->has_original_max = 1, out->original_max_position_embeddings = L0i;
        out->n_short_factor = req->n_short_factor;
        out->n_long_factor = req->n_long_factor;
        memcpy(out->short_factor, req->short_factor, (size_t)req->n_short_factor * sizeof(double));
        memcpy(out->long_factor, req->long_factor, (size_t)req->n_long_factor * sizeof(double));
        if (req->attention_factor > 0) out->has_attention_factor = 1, out->attention_factor = req->attention_factor;
        break;
    case LCX_EXTEND_DYNAMIC:
        /* Dynamic NTK reads M as the pretraining length: M stays L0 and the factor carries the target. */
        reset_scaling(out, cur, "dynamic");
        out->has_factor = 1, out->factor = s;
        newM = L0i;
        break;
    default: LCX_ASSERT(0);
    }
    lcx_rope_plan check;
    LCX_TRY(lcx_rope_plan_init(&check, out, head_dim, newM, warn, user));
    *out_max_pos = newM;
    return LCX_OK;
}
