/* hf_config: read, validate and write Hugging Face config.json (see hf_config.h, docs/formats.md, docs/rope.md). */
#include "formats/hf_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"
#include "src/core/strbuf.h"

static const struct {
    const char *model_type, *class_name;
} arch_names[LCX_ARCH_COUNT] = {
    [LCX_ARCH_LLAMA] = {"llama", "LlamaForCausalLM"},
    [LCX_ARCH_MISTRAL] = {"mistral", "MistralForCausalLM"},
    [LCX_ARCH_QWEN2] = {"qwen2", "Qwen2ForCausalLM"},
    [LCX_ARCH_QWEN3] = {"qwen3", "Qwen3ForCausalLM"},
};
#define SUPPORTED_ARCHS "llama (LlamaForCausalLM), mistral (MistralForCausalLM), qwen2 (Qwen2ForCausalLM), " \
                        "qwen3 (Qwen3ForCausalLM)"

const char *lcx_arch_name(lcx_arch a) { return (unsigned)a < LCX_ARCH_COUNT ? arch_names[a].model_type : "?"; }
const char *lcx_arch_class(lcx_arch a) { return (unsigned)a < LCX_ARCH_COUNT ? arch_names[a].class_name : "?"; }

/* ---- typed getters: each names the source and key in its error --------------------------------------------- */

/* JSON type in words, for "expected an integer, got a string". */
static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* v: the value at `key` (NULL = absent). A present null counts as absent for optional keys. */
static lcx_status get_int(const char *label, const char *key, const json_t *v, int64_t lo, int64_t hi,
                          int64_t *out) {
    LCX_FAIL_IF(!json_is_integer(v), LCX_ERR_FORMAT, "%s: key '%s': expected an integer, got %s", label, key,
                json_kind(v));
    json_int_t x = json_integer_value(v);
    LCX_FAIL_IF(x < lo || x > hi, LCX_ERR_INVALID, "%s: key '%s': %lld is out of range [%lld, %lld]", label, key,
                (long long)x, (long long)lo, (long long)hi);
    *out = (int64_t)x;
    return LCX_OK;
}

static lcx_status get_real(const char *label, const char *key, const json_t *v, double *out) {
    LCX_FAIL_IF(!json_is_number(v), LCX_ERR_FORMAT, "%s: key '%s': expected a number, got %s", label, key,
                json_kind(v));
    double x = json_number_value(v);
    LCX_FAIL_IF(!isfinite(x), LCX_ERR_INVALID, "%s: key '%s': not a finite number", label, key);
    *out = x;
    return LCX_OK;
}

static lcx_status get_bool(const char *label, const char *key, const json_t *v, int *out) {
    LCX_FAIL_IF(!json_is_boolean(v), LCX_ERR_FORMAT, "%s: key '%s': expected true or false, got %s", label, key,
                json_kind(v));
    *out = json_is_true(v);
    return LCX_OK;
}

/* Value of an optional key: NULL when absent or null. */
static json_t *opt(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static lcx_status req_int(const char *label, const json_t *root, const char *key, int64_t hi, int64_t *out) {
    json_t *v = opt(root, key);
    LCX_FAIL_IF(!v, LCX_ERR_FORMAT, "%s: required key '%s' is missing", label, key);
    LCX_TRY(get_int(label, key, v, INT64_MIN, INT64_MAX, out));
    LCX_FAIL_IF(*out <= 0, LCX_ERR_INVALID, "%s: key '%s': must be positive, got %lld", label, key,
                (long long)*out);
    LCX_FAIL_IF(*out > hi, LCX_ERR_INVALID, "%s: key '%s': %lld is larger than the supported maximum %lld", label,
                key, (long long)*out, (long long)hi);
    return LCX_OK;
}

/* ---- architecture -------------------------------------------------------------------------------------------- */

static lcx_status parse_arch(const char *label, const json_t *root, lcx_arch *out) {
    int from_type = -1, from_class = -1;
    json_t *mt = opt(root, "model_type");
    if (mt) {
        LCX_FAIL_IF(!json_is_string(mt), LCX_ERR_FORMAT, "%s: key 'model_type': expected a string, got %s", label,
                    json_kind(mt));
        for (int a = 0; a < LCX_ARCH_COUNT; a++)
            if (strcmp(json_string_value(mt), arch_names[a].model_type) == 0) from_type = a;
        char pb[64];
        LCX_FAIL_IF(from_type < 0, LCX_ERR_UNSUPPORTED,
                    "%s: key 'model_type': unsupported architecture '%s' (supported: " SUPPORTED_ARCHS ")", label,
                    lcx_printable(json_string_value(mt), pb, sizeof pb));
    }
    json_t *archs = opt(root, "architectures");
    if (archs) {
        LCX_FAIL_IF(!json_is_array(archs), LCX_ERR_FORMAT, "%s: key 'architectures': expected an array, got %s",
                    label, json_kind(archs));
        size_t i;
        json_t *e;
        json_array_foreach(archs, i, e) {
            LCX_FAIL_IF(!json_is_string(e), LCX_ERR_FORMAT, "%s: key 'architectures': entry %zu is %s, not a string",
                        label, i, json_kind(e));
            int found = -1;
            for (int a = 0; a < LCX_ARCH_COUNT; a++)
                if (strcmp(json_string_value(e), arch_names[a].class_name) == 0) found = a;
            char pb[64];
            LCX_FAIL_IF(found < 0, LCX_ERR_UNSUPPORTED,
                        "%s: key 'architectures': unsupported architecture '%s' (supported: " SUPPORTED_ARCHS ")",
                        label, lcx_printable(json_string_value(e), pb, sizeof pb));
            LCX_FAIL_IF(from_class >= 0 && found != from_class, LCX_ERR_INVALID,
                        "%s: key 'architectures': lists both %s and %s", label, arch_names[from_class].class_name,
                        arch_names[found].class_name);
            from_class = found;
        }
    }
    LCX_FAIL_IF(from_type < 0 && from_class < 0, LCX_ERR_FORMAT,
                "%s: required key 'model_type' is missing (and no 'architectures'; supported: " SUPPORTED_ARCHS ")",
                label);
    LCX_FAIL_IF(from_type >= 0 && from_class >= 0 && from_type != from_class, LCX_ERR_INVALID,
                "%s: key 'architectures': %s does not match model_type '%s'", label,
                arch_names[from_class].class_name, arch_names[from_type].model_type);
    *out = (lcx_arch)(from_type >= 0 ? from_type : from_class);
    return LCX_OK;
}

/* ---- rope -------------------------------------------------------------------------------------------------- */

static lcx_status rope_real(const char *label, const char *obj_name, const json_t *obj, const char *key, int *has,
                            double *out) {
    json_t *v = opt(obj, key);
    if (!v) return LCX_OK;
    char k[96];
    snprintf(k, sizeof k, "%s.%s", obj_name, key);
    LCX_TRY(get_real(label, k, v, out));
    *has = 1;
    return LCX_OK;
}

static lcx_status rope_list(const char *label, const char *obj_name, const json_t *obj, const char *key, int *n,
                            double *out) {
    json_t *v = opt(obj, key);
    if (!v) return LCX_OK;
    char k[96];
    snprintf(k, sizeof k, "%s.%s", obj_name, key);
    LCX_FAIL_IF(!json_is_array(v), LCX_ERR_FORMAT, "%s: key '%s': expected an array of numbers, got %s", label, k,
                json_kind(v));
    LCX_FAIL_IF(json_array_size(v) > LCX_ROPE_MAX_PAIRS, LCX_ERR_INVALID,
                "%s: key '%s': %zu entries, more than the supported %d", label, k, json_array_size(v),
                LCX_ROPE_MAX_PAIRS);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        char ki[128];
        snprintf(ki, sizeof ki, "%s[%zu]", k, i);
        LCX_TRY(get_real(label, ki, e, &out[i]));
    }
    *n = (int)json_array_size(v);
    return LCX_OK;
}

static lcx_status parse_rope(const char *label, const json_t *root, lcx_rope_params *r) {
    memset(r, 0, sizeof *r);
    const json_t *src = NULL;
    const char *src_name = "rope_parameters";
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        LCX_FAIL_IF(!json_is_object(rs), LCX_ERR_FORMAT, "%s: key 'rope_scaling': expected an object or null, got %s",
                    label, json_kind(rs));
        if (json_object_size(rs) > 0) src = rs, src_name = "rope_scaling"; /* transformers: `rope_scaling or ...` */
    }
    if (!src) {
        json_t *rp = json_object_get(root, "rope_parameters");
        if (rp && !json_is_null(rp)) {
            LCX_FAIL_IF(!json_is_object(rp), LCX_ERR_FORMAT,
                        "%s: key 'rope_parameters': expected an object or null, got %s", label, json_kind(rp));
            /* Per-layer-type form ({"full_attention": {...}}): our architectures only have full attention. */
            json_t *full = json_object_get(rp, "full_attention");
            if (json_is_object(full)) src = full, src_name = "rope_parameters.full_attention";
            else src = rp;
        }
    }
    const json_t *o = src;

    /* type: rope_type, else the older alias `type`, else default. */
    json_t *rt = o ? opt(o, "rope_type") : NULL, *ty = o ? opt(o, "type") : NULL;
    char k[96];
    if (rt) {
        snprintf(k, sizeof k, "%s.rope_type", src_name);
        LCX_FAIL_IF(!json_is_string(rt), LCX_ERR_FORMAT, "%s: key '%s': expected a string, got %s", label, k,
                    json_kind(rt));
    }
    if (ty) {
        snprintf(k, sizeof k, "%s.type", src_name);
        LCX_FAIL_IF(!json_is_string(ty), LCX_ERR_FORMAT, "%s: key '%s': expected a string, got %s", label, k,
                    json_kind(ty));
    }
    char p1[48], p2[48];
    LCX_FAIL_IF(rt && ty && strcmp(json_string_value(rt), json_string_value(ty)) != 0, LCX_ERR_INVALID,
                "%s: key '%s.type': '%s' disagrees with rope_type '%s'", label, src_name,
                lcx_printable(json_string_value(ty), p1, sizeof p1), lcx_printable(json_string_value(rt), p2, sizeof p2));
    const char *type = rt ? json_string_value(rt) : ty ? json_string_value(ty) : "default";
    snprintf(k, sizeof k, "%s.%s", src_name, rt ? "rope_type" : "type");
    LCX_FAIL_IF(strlen(type) == 0 || strlen(type) >= sizeof r->type, LCX_ERR_UNSUPPORTED,
                "%s: key '%s': unsupported rope type '%s'", label, k, lcx_printable(type, p1, sizeof p1));
    strcpy(r->type, type);

    /* theta and partial_rotary_factor: the object first, then the top level. */
    int has = 0;
    r->theta = 10000.0;
    if (o) LCX_TRY(rope_real(label, src_name, o, "rope_theta", &has, &r->theta));
    if (!has) {
        json_t *v = opt(root, "rope_theta");
        if (v) LCX_TRY(get_real(label, "rope_theta", v, &r->theta));
    }
    has = 0;
    r->partial_rotary_factor = 1.0;
    if (o) LCX_TRY(rope_real(label, src_name, o, "partial_rotary_factor", &has, &r->partial_rotary_factor));
    if (!has) {
        json_t *v = opt(root, "partial_rotary_factor");
        if (v) LCX_TRY(get_real(label, "partial_rotary_factor", v, &r->partial_rotary_factor));
    }
    if (o) {
        LCX_TRY(rope_real(label, src_name, o, "factor", &r->has_factor, &r->factor));
        LCX_TRY(rope_real(label, src_name, o, "attention_factor", &r->has_attention_factor, &r->attention_factor));
        LCX_TRY(rope_real(label, src_name, o, "beta_fast", &r->has_beta_fast, &r->beta_fast));
        LCX_TRY(rope_real(label, src_name, o, "beta_slow", &r->has_beta_slow, &r->beta_slow));
        LCX_TRY(rope_real(label, src_name, o, "mscale", &r->has_mscale, &r->mscale));
        LCX_TRY(rope_real(label, src_name, o, "mscale_all_dim", &r->has_mscale_all_dim, &r->mscale_all_dim));
        LCX_TRY(rope_real(label, src_name, o, "low_freq_factor", &r->has_low_freq_factor, &r->low_freq_factor));
        LCX_TRY(rope_real(label, src_name, o, "high_freq_factor", &r->has_high_freq_factor, &r->high_freq_factor));
        LCX_TRY(rope_list(label, src_name, o, "short_factor", &r->n_short_factor, r->short_factor));
        LCX_TRY(rope_list(label, src_name, o, "long_factor", &r->n_long_factor, r->long_factor));
        json_t *v = opt(o, "truncate");
        if (v) {
            snprintf(k, sizeof k, "%s.truncate", src_name);
            LCX_TRY(get_bool(label, k, v, &r->truncate));
            r->has_truncate = 1;
        }
        v = opt(o, "original_max_position_embeddings");
        if (v) {
            snprintf(k, sizeof k, "%s.original_max_position_embeddings", src_name);
            LCX_TRY(get_int(label, k, v, 1, LCX_CONFIG_MAX_POSITIONS, &r->original_max_position_embeddings));
            r->has_original_max = 1;
        }
    }
    /* transformers gives a top-level original_max_position_embeddings priority for these types (Phi3 style). */
    json_t *top_orig = opt(root, "original_max_position_embeddings");
    if (top_orig && (!strcmp(r->type, "llama3") || !strcmp(r->type, "yarn") || !strcmp(r->type, "longrope"))) {
        LCX_TRY(get_int(label, "original_max_position_embeddings", top_orig, 1, LCX_CONFIG_MAX_POSITIONS,
                        &r->original_max_position_embeddings));
        r->has_original_max = 1;
    }
    return LCX_OK;
}

/* ---- sliding window ---------------------------------------------------------------------------------------- */

static lcx_status parse_sliding_window(const char *label, const json_t *root, lcx_model_config *c) {
    c->sliding_window = 0;
    if (c->arch == LCX_ARCH_LLAMA) return LCX_OK; /* Llama has no sliding window; the key is ignored by HF too */
    int64_t window = 4096; /* MistralConfig / Qwen2Config default when the key is absent */
    json_t *sw = json_object_get(root, "sliding_window");
    if (json_is_null(sw)) window = 0;
    else if (sw) LCX_TRY(get_int(label, "sliding_window", sw, 0, INT64_MAX, &window));
    int active = window > 0;
    if (c->arch == LCX_ARCH_QWEN2 || c->arch == LCX_ARCH_QWEN3) {
        int use = 0;
        json_t *u = opt(root, "use_sliding_window");
        if (u) LCX_TRY(get_bool(label, "use_sliding_window", u, &use));
        active = use && window > 0;
        if (active) {
            /* Which layers slide: layer_types when given, else layers >= max_window_layers (default 28). */
            int any = 0;
            json_t *lt = opt(root, "layer_types");
            if (lt) {
                LCX_FAIL_IF(!json_is_array(lt), LCX_ERR_FORMAT, "%s: key 'layer_types': expected an array, got %s",
                            label, json_kind(lt));
                size_t i;
                json_t *e;
                json_array_foreach(lt, i, e) any |= json_is_string(e) && !strcmp(json_string_value(e), "sliding_attention");
            } else {
                int64_t mwl = 28;
                json_t *m = opt(root, "max_window_layers");
                if (m) LCX_TRY(get_int(label, "max_window_layers", m, INT64_MIN, INT64_MAX, &mwl));
                any = mwl < c->num_hidden_layers;
            }
            active = any;
        }
    }
    if (!active) return LCX_OK;
    LCX_FAIL_IF(window < c->max_position_embeddings, LCX_ERR_UNSUPPORTED,
                "%s: key 'sliding_window': sliding-window attention (window %lld < max_position_embeddings %lld) "
                "is not supported",
                label, (long long)window, (long long)c->max_position_embeddings);
    c->sliding_window = window;
    return LCX_OK;
}

/* ---- the whole config -------------------------------------------------------------------------------------- */

/* What a later command would refuse, refused here (docs/reliability.md "Parsers and validation"): the rope
 * needs a positive base and an even rotary dimension (lcx_rope_plan_init), token ids index the vocabulary. */
static lcx_status check_semantics(const char *label, const lcx_model_config *c) {
    const lcx_rope_params *r = &c->rope;
    LCX_FAIL_IF(!(r->theta > 0), LCX_ERR_INVALID, "%s: key 'rope_theta': must be positive, got %g", label, r->theta);
    LCX_FAIL_IF(!(r->partial_rotary_factor > 0 && r->partial_rotary_factor <= 1), LCX_ERR_INVALID,
                "%s: key 'partial_rotary_factor': %g is not in (0, 1]", label, r->partial_rotary_factor);
    int64_t rot = (int64_t)((double)c->head_dim * r->partial_rotary_factor); /* as transformers: int() */
    LCX_FAIL_IF(rot < 2 || rot % 2, LCX_ERR_INVALID,
                "%s: key 'partial_rotary_factor': rotary dimension %lld (head_dim %lld x %g) must be even and >= 2",
                label, (long long)rot, (long long)c->head_dim, r->partial_rotary_factor);
    LCX_FAIL_IF(c->bos_token_id >= c->vocab_size, LCX_ERR_INVALID,
                "%s: key 'bos_token_id': %lld is not below vocab_size %lld", label, (long long)c->bos_token_id,
                (long long)c->vocab_size);
    for (int i = 0; i < c->n_eos; i++)
        LCX_FAIL_IF(c->eos_token_ids[i] >= c->vocab_size, LCX_ERR_INVALID,
                    "%s: key 'eos_token_id': %lld is not below vocab_size %lld", label, (long long)c->eos_token_ids[i],
                    (long long)c->vocab_size);
    return LCX_OK;
}

static lcx_status parse_fields(const char *label, json_t *root, lcx_model_config *c) {
    LCX_FAIL_IF(!json_is_object(root), LCX_ERR_FORMAT, "%s: expected a JSON object at the top level, got %s",
                label, json_kind(root));
    LCX_TRY(parse_arch(label, root, &c->arch));
    LCX_TRY(req_int(label, root, "vocab_size", LCX_CONFIG_MAX_VOCAB, &c->vocab_size));
    LCX_TRY(req_int(label, root, "hidden_size", LCX_CONFIG_MAX_HIDDEN, &c->hidden_size));
    LCX_TRY(req_int(label, root, "intermediate_size", LCX_CONFIG_MAX_FFN, &c->intermediate_size));
    LCX_TRY(req_int(label, root, "num_hidden_layers", LCX_CONFIG_MAX_LAYERS, &c->num_hidden_layers));
    LCX_TRY(req_int(label, root, "num_attention_heads", LCX_CONFIG_MAX_HEADS, &c->num_attention_heads));
    LCX_TRY(req_int(label, root, "max_position_embeddings", LCX_CONFIG_MAX_POSITIONS, &c->max_position_embeddings));

    c->num_key_value_heads = c->num_attention_heads;
    if (opt(root, "num_key_value_heads"))
        LCX_TRY(req_int(label, root, "num_key_value_heads", LCX_CONFIG_MAX_HEADS, &c->num_key_value_heads));
    LCX_FAIL_IF(c->num_attention_heads % c->num_key_value_heads != 0, LCX_ERR_INVALID,
                "%s: key 'num_key_value_heads': %lld does not divide num_attention_heads %lld", label,
                (long long)c->num_key_value_heads, (long long)c->num_attention_heads);
    if (opt(root, "head_dim")) {
        LCX_TRY(req_int(label, root, "head_dim", LCX_CONFIG_MAX_HEAD_DIM, &c->head_dim));
        c->head_dim_explicit = 1;
    } else if (c->arch == LCX_ARCH_QWEN3) {
        /* Qwen3Config's own default is 128, not hidden/heads (transformers configuration_qwen3.py). */
        c->head_dim = 128;
    } else {
        LCX_FAIL_IF(c->hidden_size % c->num_attention_heads != 0, LCX_ERR_INVALID,
                    "%s: key 'hidden_size': %lld is not divisible by num_attention_heads %lld (and no head_dim given)",
                    label, (long long)c->hidden_size, (long long)c->num_attention_heads);
        c->head_dim = c->hidden_size / c->num_attention_heads;
    }

    c->rms_norm_eps = 1e-6;
    json_t *v = opt(root, "rms_norm_eps");
    if (v) {
        LCX_TRY(get_real(label, "rms_norm_eps", v, &c->rms_norm_eps));
        LCX_FAIL_IF(!(c->rms_norm_eps > 0), LCX_ERR_INVALID, "%s: key 'rms_norm_eps': must be positive, got %g",
                    label, c->rms_norm_eps);
    }
    v = opt(root, "hidden_act");
    if (v) {
        LCX_FAIL_IF(!json_is_string(v), LCX_ERR_FORMAT, "%s: key 'hidden_act': expected a string, got %s", label,
                    json_kind(v));
        char pb[48];
        LCX_FAIL_IF(strcmp(json_string_value(v), "silu") != 0, LCX_ERR_UNSUPPORTED,
                    "%s: key 'hidden_act': activation '%s' is not supported (only silu)", label,
                    lcx_printable(json_string_value(v), pb, sizeof pb));
    }
    if ((v = opt(root, "tie_word_embeddings"))) LCX_TRY(get_bool(label, "tie_word_embeddings", v, &c->tie_word_embeddings));
    int attention_bias = 0, mlp_bias = 0;
    if ((v = opt(root, "attention_bias"))) LCX_TRY(get_bool(label, "attention_bias", v, &attention_bias));
    if ((v = opt(root, "mlp_bias"))) LCX_TRY(get_bool(label, "mlp_bias", v, &mlp_bias));
    switch (c->arch) {
    case LCX_ARCH_LLAMA: c->qkv_bias = c->o_bias = attention_bias; c->mlp_bias = mlp_bias; break;
    case LCX_ARCH_MISTRAL: break; /* MistralAttention/MLP are bias-free whatever the config says */
    case LCX_ARCH_QWEN2: c->qkv_bias = 1; break;
    case LCX_ARCH_QWEN3: c->qkv_bias = c->o_bias = attention_bias; c->qk_norm = 1; break;
    default: LCX_ASSERT(0);
    }

    /* dtype (v5 name) wins over torch_dtype (v4 name) when both are present. */
    c->dtype = LCX_F32;
    const char *dkey = opt(root, "dtype") ? "dtype" : "torch_dtype";
    if ((v = opt(root, dkey))) {
        LCX_FAIL_IF(!json_is_string(v), LCX_ERR_FORMAT, "%s: key '%s': expected a string, got %s", label, dkey,
                    json_kind(v));
        const char *d = json_string_value(v);
        if (!strncmp(d, "torch.", 6)) d += 6;
        if (!strcmp(d, "float32")) c->dtype = LCX_F32;
        else if (!strcmp(d, "bfloat16")) c->dtype = LCX_BF16;
        else if (!strcmp(d, "float16")) c->dtype = LCX_F16;
        else {
            char pb[48];
            return lcx_fail(LCX_ERR_UNSUPPORTED,
                            "%s: key '%s': unsupported dtype '%s' (supported: float32, bfloat16, float16)", label,
                            dkey, lcx_printable(d, pb, sizeof pb));
        }
    }

    c->bos_token_id = -1;
    if ((v = opt(root, "bos_token_id"))) LCX_TRY(get_int(label, "bos_token_id", v, 0, INT64_MAX, &c->bos_token_id));
    if ((v = opt(root, "eos_token_id"))) {
        if (json_is_array(v)) {
            size_t cap = sizeof c->eos_token_ids / sizeof c->eos_token_ids[0];
            LCX_FAIL_IF(json_array_size(v) > cap, LCX_ERR_UNSUPPORTED,
                        "%s: key 'eos_token_id': %zu ids, more than the supported %zu", label, json_array_size(v), cap);
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) {
                char k[48];
                snprintf(k, sizeof k, "eos_token_id[%zu]", i);
                LCX_TRY(get_int(label, k, e, 0, INT64_MAX, &c->eos_token_ids[i]));
            }
            c->n_eos = (int)json_array_size(v);
        } else {
            LCX_FAIL_IF(!json_is_integer(v), LCX_ERR_FORMAT,
                        "%s: key 'eos_token_id': expected an integer or a list of integers, got %s", label, json_kind(v));
            LCX_TRY(get_int(label, "eos_token_id", v, 0, INT64_MAX, &c->eos_token_ids[0]));
            c->n_eos = 1;
        }
    }
    LCX_TRY(parse_sliding_window(label, root, c));
    LCX_TRY(parse_rope(label, root, &c->rope));
    return check_semantics(label, c);
}

lcx_status lcx_config_parse(const char *label, const char *text, size_t len, lcx_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    char pb[sizeof err.text];
    LCX_FAIL_IF(!root, LCX_ERR_FORMAT, "%s: invalid JSON at line %d, column %d: %s", label, err.line, err.column,
                lcx_printable(err.text, pb, sizeof pb));
    lcx_status st = parse_fields(label, root, cfg);
    if (st != LCX_OK) {
        json_decref(root);
        memset(cfg, 0, sizeof *cfg);
        return st;
    }
    cfg->json = root;
    return LCX_OK;
}

lcx_status lcx_config_load(const char *path, lcx_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char *buf = NULL;
    size_t len = 0;
    lcx_status st = lcx_read_file(path, LCX_CONFIG_MAX_BYTES, &buf, &len);
    if (st != LCX_OK) return st;
    st = lcx_config_parse(path, buf, len, cfg);
    free(buf);
    return st;
}

void lcx_config_free(lcx_model_config *cfg) {
    if (!cfg) return;
    json_decref(cfg->json);
    cfg->json = NULL;
}

/* ---- writing ----------------------------------------------------------------------------------------------- */

#define SET(obj, key, val)                                                                                   \
    do {                                                                                                     \
        if (json_object_set_new((obj), (key), (val)) != 0) return lcx_fail(LCX_ERR_OOM, "config: out of memory"); \
    } while (0)

static lcx_status sync_rope(const lcx_rope_params *r, json_t *doc) {
    json_object_del(doc, "rope_parameters");
    SET(doc, "rope_theta", json_real(r->theta));
    if (r->partial_rotary_factor != 1.0 || json_object_get(doc, "partial_rotary_factor"))
        SET(doc, "partial_rotary_factor", json_real(r->partial_rotary_factor));
    int any_param = r->has_factor || r->has_original_max || r->has_attention_factor || r->has_beta_fast ||
                    r->has_beta_slow || r->has_mscale || r->has_mscale_all_dim || r->has_truncate ||
                    r->has_low_freq_factor || r->has_high_freq_factor || r->n_short_factor || r->n_long_factor;
    if ((!strcmp(r->type, "default") || r->type[0] == 0) && !any_param) {
        if (json_object_get(doc, "rope_scaling")) SET(doc, "rope_scaling", json_null());
        return LCX_OK;
    }
    json_t *o = json_object();
    if (!o) return lcx_fail(LCX_ERR_OOM, "config: out of memory");
    SET(doc, "rope_scaling", o);
    SET(o, "rope_type", json_string(r->type));
    SET(o, "type", json_string(r->type));
    if (r->has_factor) SET(o, "factor", json_real(r->factor));
    if (r->has_original_max) SET(o, "original_max_position_embeddings", json_integer(r->original_max_position_embeddings));
    if (r->has_attention_factor) SET(o, "attention_factor", json_real(r->attention_factor));
    if (r->has_beta_fast) SET(o, "beta_fast", json_real(r->beta_fast));
    if (r->has_beta_slow) SET(o, "beta_slow", json_real(r->beta_slow));
    if (r->has_mscale) SET(o, "mscale", json_real(r->mscale));
    if (r->has_mscale_all_dim) SET(o, "mscale_all_dim", json_real(r->mscale_all_dim));
    if (r->has_truncate) SET(o, "truncate", json_boolean(r->truncate));
    if (r->has_low_freq_factor) SET(o, "low_freq_factor", json_real(r->low_freq_factor));
    if (r->has_high_freq_factor) SET(o, "high_freq_factor", json_real(r->high_freq_factor));
    const struct { const char *key; int n; const double *v; } lists[2] = {
        {"short_factor", r->n_short_factor, r->short_factor}, {"long_factor", r->n_long_factor, r->long_factor}};
    for (int l = 0; l < 2; l++) {
        if (lists[l].n <= 0) continue;
        json_t *a = json_array();
        if (!a) return lcx_fail(LCX_ERR_OOM, "config: out of memory");
        SET(o, lists[l].key, a);
        for (int i = 0; i < lists[l].n; i++)
            if (json_array_append_new(a, json_real(lists[l].v[i])) != 0) return lcx_fail(LCX_ERR_OOM, "config: out of memory");
    }
    /* llama.cpp's converter reads the pretraining length at the top level. */
    if (!strcmp(r->type, "llama3") && r->has_original_max)
        SET(doc, "original_max_position_embeddings", json_integer(r->original_max_position_embeddings));
    return LCX_OK;
}

static lcx_status sync_fields(const lcx_model_config *c, json_t *doc) {
    LCX_FAIL_IF((unsigned)c->arch >= LCX_ARCH_COUNT, LCX_ERR_INVALID, "config: invalid architecture %d", (int)c->arch);
    SET(doc, "model_type", json_string(arch_names[c->arch].model_type));
    if (json_object_get(doc, "architectures")) {
        json_t *a = json_array();
        if (!a || json_array_append_new(a, json_string(arch_names[c->arch].class_name)) != 0) {
            json_decref(a);
            return lcx_fail(LCX_ERR_OOM, "config: out of memory");
        }
        SET(doc, "architectures", a);
    }
    SET(doc, "vocab_size", json_integer(c->vocab_size));
    SET(doc, "hidden_size", json_integer(c->hidden_size));
    SET(doc, "intermediate_size", json_integer(c->intermediate_size));
    SET(doc, "num_hidden_layers", json_integer(c->num_hidden_layers));
    SET(doc, "num_attention_heads", json_integer(c->num_attention_heads));
    SET(doc, "num_key_value_heads", json_integer(c->num_key_value_heads));
    if (c->head_dim_explicit || opt(doc, "head_dim")) SET(doc, "head_dim", json_integer(c->head_dim));
    SET(doc, "rms_norm_eps", json_real(c->rms_norm_eps));
    SET(doc, "max_position_embeddings", json_integer(c->max_position_embeddings));
    SET(doc, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
    if (c->arch == LCX_ARCH_LLAMA || c->arch == LCX_ARCH_QWEN3)
        if (c->qkv_bias || json_object_get(doc, "attention_bias")) SET(doc, "attention_bias", json_boolean(c->qkv_bias));
    if (c->arch == LCX_ARCH_LLAMA && (c->mlp_bias || json_object_get(doc, "mlp_bias")))
        SET(doc, "mlp_bias", json_boolean(c->mlp_bias));
    const char *dname = c->dtype == LCX_BF16 ? "bfloat16" : c->dtype == LCX_F16 ? "float16" : "float32";
    int had_dtype = 0;
    if (json_object_get(doc, "dtype")) {
        SET(doc, "dtype", json_string(dname));
        had_dtype = 1;
    }
    if (json_object_get(doc, "torch_dtype")) {
        SET(doc, "torch_dtype", json_string(dname));
        had_dtype = 1;
    }
    if (!had_dtype && c->dtype != LCX_F32) SET(doc, "torch_dtype", json_string(dname));
    if (c->bos_token_id >= 0) SET(doc, "bos_token_id", json_integer(c->bos_token_id));
    else if (json_object_get(doc, "bos_token_id")) SET(doc, "bos_token_id", json_null());
    LCX_FAIL_IF(c->n_eos < 0 || c->n_eos > 16, LCX_ERR_INVALID, "config: %d eos token ids", c->n_eos);
    if (c->n_eos == 0) {
        if (json_object_get(doc, "eos_token_id")) SET(doc, "eos_token_id", json_null());
    } else if (c->n_eos == 1 && !json_is_array(json_object_get(doc, "eos_token_id"))) {
        SET(doc, "eos_token_id", json_integer(c->eos_token_ids[0]));
    } else {
        json_t *a = json_array();
        if (!a) return lcx_fail(LCX_ERR_OOM, "config: out of memory");
        SET(doc, "eos_token_id", a);
        for (int i = 0; i < c->n_eos; i++)
            if (json_array_append_new(a, json_integer(c->eos_token_ids[i])) != 0) return lcx_fail(LCX_ERR_OOM, "config: out of memory");
    }
    if (c->arch == LCX_ARCH_MISTRAL)
        SET(doc, "sliding_window", c->sliding_window > 0 ? json_integer(c->sliding_window) : json_null());
    return sync_rope(&c->rope, doc);
}

lcx_status lcx_config_sync_json(lcx_model_config *cfg) {
    if (!cfg->json) {
        cfg->json = json_object();
        if (!cfg->json) return lcx_fail(LCX_ERR_OOM, "config: out of memory");
    }
    return sync_fields(cfg, cfg->json);
}

/* ---- Python-compatible JSON text --------------------------------------------------------------------------- */


/* Python's repr(float): shortest digits that round-trip, fixed notation for 1e-4 <= |x| < 1e16. */
static void put_py_float(lcx_strbuf *b, double x) {
    char tmp[64], digits[32];
    if (x == 0) { lcx_strbuf_str(b, signbit(x) ? "-0.0" : "0.0"); return; }
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    const char *p = tmp;
    int neg = *p == '-';
    if (neg) p++;
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int e = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = e + 1; /* value = 0.digits * 10^decpt */
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0', out[o++] = '.';
            for (int i = 0; i < -decpt; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
            for (int i = nd; i < decpt; i++) out[o++] = '0';
            out[o++] = '.', out[o++] = '0';
        } else {
            for (int i = 0; i < nd; i++) {
                if (i == decpt) out[o++] = '.';
                out[o++] = digits[i];
            }
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
    }
    lcx_strbuf_str(b, out);
}

/* json.dumps(ensure_ascii=True) string escaping; input is valid UTF-8 (jansson guarantees it). */
static void put_py_string(lcx_strbuf *b, const char *s, size_t n) {
    lcx_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char esc[16];
        if (c == '"') lcx_strbuf_str(b, "\\\""), i++;
        else if (c == '\\') lcx_strbuf_str(b, "\\\\"), i++;
        else if (c == '\n') lcx_strbuf_str(b, "\\n"), i++;
        else if (c == '\r') lcx_strbuf_str(b, "\\r"), i++;
        else if (c == '\t') lcx_strbuf_str(b, "\\t"), i++;
        else if (c == '\b') lcx_strbuf_str(b, "\\b"), i++;
        else if (c == '\f') lcx_strbuf_str(b, "\\f"), i++;
        else if (c >= 0x20 && c < 0x7f) lcx_strbuf_put(b, (const char *)&s[i], 1), i++;
        else {
            uint32_t cp = c;
            int len = 1;
            if (c >= 0xf0) cp = c & 0x07, len = 4;
            else if (c >= 0xe0) cp = c & 0x0f, len = 3;
            else if (c >= 0xc0) cp = c & 0x1f, len = 2;
            for (int k = 1; k < len && i + k < n; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3f);
            i += (size_t)len;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            lcx_strbuf_str(b, esc);
        }
    }
    lcx_strbuf_put(b, "\"", 1);
}

static void indent_to(lcx_strbuf *b, int level) {
    lcx_strbuf_put(b, "\n", 1);
    for (int i = 0; i < level; i++) lcx_strbuf_put(b, "  ", 2);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void put_value(lcx_strbuf *b, const json_t *v, int level) {
    char tmp[32];
    switch (json_typeof(v)) {
    case JSON_NULL: lcx_strbuf_str(b, "null"); break;
    case JSON_TRUE: lcx_strbuf_str(b, "true"); break;
    case JSON_FALSE: lcx_strbuf_str(b, "false"); break;
    case JSON_INTEGER:
        snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(v));
        lcx_strbuf_str(b, tmp);
        break;
    case JSON_REAL: put_py_float(b, json_real_value(v)); break;
    case JSON_STRING: put_py_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY: {
        if (json_array_size(v) == 0) { lcx_strbuf_str(b, "[]"); break; }
        lcx_strbuf_str(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) lcx_strbuf_str(b, ",");
            indent_to(b, level + 1);
            put_value(b, json_array_get(v, i), level + 1);
        }
        indent_to(b, level);
        lcx_strbuf_str(b, "]");
        break;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        if (n == 0) { lcx_strbuf_str(b, "{}"); break; }
        const char **keys = malloc(n * sizeof *keys);
        if (!keys) { b->oom = 1; break; }
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) keys[k++] = key;
        qsort(keys, n, sizeof *keys, cmp_str); /* UTF-8 byte order = Python's code point order */
        lcx_strbuf_str(b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i) lcx_strbuf_str(b, ",");
            indent_to(b, level + 1);
            put_py_string(b, keys[i], strlen(keys[i]));
            lcx_strbuf_str(b, ": ");
            put_value(b, json_object_get(v, keys[i]), level + 1);
        }
        free(keys);
        indent_to(b, level);
        lcx_strbuf_str(b, "}");
        break;
    }
    }
}

char *lcx_json_dumps_hf(const json_t *v) {
    lcx_strbuf b = {0};
    put_value(&b, v, 0);
    if (b.oom || !b.s) {
        lcx_strbuf_free(&b);
        return NULL;
    }
    return b.s;
}

lcx_status lcx_json_write_hf(const char *path, const json_t *v) {
    lcx_strbuf b = {0};
    put_value(&b, v, 0);
    lcx_strbuf_put(&b, "\n", 1);
    lcx_status st = b.oom || !b.s ? lcx_fail(LCX_ERR_OOM, "%s: out of memory", path)
                                  : lcx_write_file_atomic(path, b.s, b.len);
    lcx_strbuf_free(&b);
    return st;
}

lcx_status lcx_config_write(const lcx_model_config *cfg, const char *path) {
    json_t *doc = cfg->json ? json_deep_copy(cfg->json) : json_object();
    LCX_FAIL_IF(!doc, LCX_ERR_OOM, "%s: out of memory", path);
    lcx_status st = sync_fields(cfg, doc);
    if (st != LCX_OK) {
        json_decref(doc);
        return lcx_fail_context(st, "%s: ", path);
    }
    st = lcx_json_write_hf(path, doc);
    json_decref(doc);
    return st;
}
