/* gguf_map: GGUF <-> Hugging Face names, the config a GGUF's metadata implies, llama3 rope_freqs (gguf_map.h).
 * Names, metadata and the q/k row permutation follow docs/formats.md "GGUF" ("Architectures, names and metadata",
 * "Rope metadata", "The q/k row permutation"). */
#include "src/checkpoint/gguf_map.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "src/core/layout.h"

/* ---- names ------------------------------------------------------------------------------------------------ */

static const char *const GLOBAL_NAMES[][2] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
static const char *const LAYER_NAMES[][2] = {
    {"input_layernorm", "attn_norm"},       {"self_attn.q_proj", "attn_q"},    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},         {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},    {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},              {"mlp.down_proj", "ffn_down"},
};
#define N_GLOBAL (sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0])
#define N_LAYER (sizeof LAYER_NAMES / sizeof LAYER_NAMES[0])

/* Map a name between HF (side 0) and GGUF (side 1); 0 if it is not a known name. */
static int map_name(const char *in, int from, char *out, size_t cap) {
    for (size_t i = 0; i < N_GLOBAL; i++)
        if (strcmp(in, GLOBAL_NAMES[i][from]) == 0) return snprintf(out, cap, "%s", GLOBAL_NAMES[i][!from]) < (int)cap;
    const char *prefix = from == 0 ? "model.layers." : "blk.";
    size_t pl = strlen(prefix);
    if (strncmp(in, prefix, pl) != 0) return 0;
    const char *p = in + pl;
    char *end;
    unsigned long layer = strtoul(p, &end, 10);
    if (end == p || *end != '.' || (p[0] == '0' && end - p > 1) || layer > 100000) return 0;
    const char *rest = end + 1;
    for (size_t i = 0; i < N_LAYER; i++) {
        size_t n = strlen(LAYER_NAMES[i][from]);
        if (strncmp(rest, LAYER_NAMES[i][from], n) != 0) continue;
        const char *suf = rest + n;
        if (strcmp(suf, ".weight") != 0 && strcmp(suf, ".bias") != 0) continue;
        int w = from == 0 ? snprintf(out, cap, "blk.%lu.%s%s", layer, LAYER_NAMES[i][1], suf)
                          : snprintf(out, cap, "model.layers.%lu.%s%s", layer, LAYER_NAMES[i][0], suf);
        return w > 0 && w < (int)cap;
    }
    return 0;
}

int lcx_hf_to_gguf_name(const char *hf, char *out, size_t cap) { return map_name(hf, 0, out, cap); }
int lcx_gguf_to_hf_name(const char *gguf, char *out, size_t cap) { return map_name(gguf, 1, out, cap); }

/* q/k weights and biases are row-permuted by llama.cpp; returns the head count to (un)permute with, else 0. */
int64_t lcx_gguf_qk_heads(const char *hf_name, int64_t nh, int64_t ng) {
    lcx_weight_kind k = lcx_weight_kind_of_name(hf_name);
    if (k == LCX_W_Q_PROJ || k == LCX_W_Q_BIAS) return nh;
    if (k == LCX_W_K_PROJ || k == LCX_W_K_BIAS) return ng;
    return 0;
}

/* ---- config ----------------------------------------------------------------------------------------------- */

/* "<arch>.<key>" into buf (GGUF metadata keys are prefixed with the architecture name). */
static const char *arch_key(char *buf, size_t cap, const char *arch, const char *key) {
    snprintf(buf, cap, "%s.%s", arch, key);
    return buf;
}
#define K(k) arch_key(kb, sizeof kb, ga, (k))

/* Shortest decimal that reads back as the same float32 (1e-05 rather than 9.99999974738e-06). */
static double f32_to_decimal(float v) {
    char buf[48];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)v);
        if ((float)strtod(buf, NULL) == v) return strtod(buf, NULL);
    }
    return (double)v;
}

static const char *torch_dtype_name(lcx_dtype d) {
    return d == LCX_BF16 ? "bfloat16" : d == LCX_F16 ? "float16" : "float32";
}

void lcx_llama3_rope_divisors(double theta, int64_t rot_dim, double factor, double low, double high,
                              int64_t original_max, float *div) {
    const double L = (double)original_max;
    const double low_wavelen = L / low, high_wavelen = L / high;
    for (int64_t k = 0; k < rot_dim / 2; k++) {
        double freq = 1.0 / pow(theta, (double)(2 * k) / (double)rot_dim);
        double wavelen = 2.0 * M_PI / freq;
        double d;
        if (wavelen < high_wavelen) d = 1.0;
        else if (wavelen > low_wavelen) d = factor;
        else {
            double t = (L / wavelen - low) / (high - low);
            d = 1.0 / ((1.0 - t) / factor + t);
        }
        div[k] = (float)d;
    }
}


/* llama3 rope from rope_freqs.weight. The divisors fix factor (the largest) and, through the pairs between kept and
 * interpolated, L / (high - low) and low / (high - low) only; we take Llama 3.x's low_freq_factor 1 and
 * high_freq_factor 4, solve L from a transition pair (8192 when there is none) and accept the result only if it
 * reproduces every divisor. */
static lcx_status llama3_from_freqs(const lcx_gguf_file *f, const lcx_gguf_tensor *t, double theta, int64_t rot,
                                    json_t *rs) {
    LCX_FAIL_IF(t->numel != (uint64_t)(rot / 2), LCX_ERR_FORMAT, "%s: rope_freqs.weight has %llu values, expected %lld",
                f->path, (unsigned long long)t->numel, (long long)(rot / 2));
    float *got = malloc(t->numel * sizeof(float) + 1), *want = malloc(t->numel * sizeof(float) + 1);
    lcx_status st = got && want ? lcx_gguf_tensor_to_f32(f, t, got) : lcx_fail(LCX_ERR_OOM, "out of memory");
    if (st == LCX_OK) {
        const double low = 1.0, high = 4.0;
        double factor = 0;
        for (uint64_t k = 0; k < t->numel; k++) factor = fmax(factor, got[k]);
        double L = 8192;
        for (uint64_t k = 0; k < t->numel; k++) {
            if (!(got[k] > 1.0f + 1e-6f && got[k] < (float)factor * (1.0f - 1e-6f))) continue;
            double tt = (1.0 / got[k] - 1.0 / factor) / (1.0 - 1.0 / factor);
            double wavelen = 2.0 * M_PI * pow(theta, (double)(2 * (int64_t)k) / (double)rot);
            L = round(wavelen * (tt * (high - low) + low));
            break;
        }
        LCX_FAIL_IF(!(factor >= 1.0) || !(L >= 1.0 && L < 1e12), LCX_ERR_FORMAT, "%s: rope_freqs.weight: implausible values",
                    f->path);
        lcx_llama3_rope_divisors(theta, rot, factor, low, high, (int64_t)L, want);
        for (uint64_t k = 0; st == LCX_OK && k < t->numel; k++)
            if (fabsf(got[k] - want[k]) > 1e-4f * fabsf(want[k]))
                st = lcx_fail(LCX_ERR_UNSUPPORTED,
                              "%s: rope_freqs.weight (llama3 rope) is not reproduced by low_freq_factor 1, "
                              "high_freq_factor 4, factor %g, original context %.0f (pair %llu: %g vs %g); cannot "
                              "rebuild the rope config",
                              f->path, factor, L, (unsigned long long)k, (double)got[k], (double)want[k]);
        if (st == LCX_OK) {
            json_object_set_new(rs, "rope_type", json_string("llama3"));
            json_object_set_new(rs, "factor", json_real(f32_to_decimal((float)factor)));
            json_object_set_new(rs, "low_freq_factor", json_real(low));
            json_object_set_new(rs, "high_freq_factor", json_real(high));
            json_object_set_new(rs, "original_max_position_embeddings", json_integer((json_int_t)L));
        }
    }
    free(got);
    free(want);
    return st;
}

/* A float the config needs: finite and > 0 (jansson drops a NaN or an infinity silently, and a later default
 * would stand in for it; a negative value would only fail at the first command that builds the rope). */
static lcx_status positive_f32(const lcx_gguf_file *f, const char *key, float v) {
    LCX_FAIL_IF(!isfinite(v) || !(v > 0), LCX_ERR_FORMAT, "%s: key '%s': must be a positive finite number, got %g",
                f->path, key, (double)v);
    return LCX_OK;
}

/* An optional token id: absent leaves *out at -1; present, it must index the vocabulary. */
static lcx_status token_id(const lcx_gguf_file *f, const char *key, uint64_t n_vocab, int64_t *out) {
    *out = -1;
    if (!lcx_gguf_find_kv(f, key)) return LCX_OK;
    LCX_TRY(lcx_gguf_get_i64(f, key, out));
    LCX_FAIL_IF(*out < 0 || (uint64_t)*out >= n_vocab, LCX_ERR_FORMAT,
                "%s: key '%s': %lld is not a token id below the vocabulary size %llu", f->path, key, (long long)*out,
                (unsigned long long)n_vocab);
    return LCX_OK;
}

/* The metadata -> config.json rebuild; the tensor-derived facts come from lcx_gguf_config_json. Every value is
 * checked here, where it is read, so import refuses what score or tokenize would refuse later; the integer
 * fields' ranges and divisibility are the config validator's (lcx_config_parse), which every source runs. */
static lcx_status gguf_config(const lcx_gguf_file *f, const lcx_gguf_tensor *embd, int tied, int qbias,
                              int obias, int mbias, lcx_dtype dtype, json_t **out, int *permuted) {
    char *arch = NULL, kb[128];
    LCX_TRY(lcx_gguf_get_str_dup(f, "general.architecture", &arch));
    const char *ga = !strcmp(arch, "llama") ? "llama" : !strcmp(arch, "qwen2") ? "qwen2" : !strcmp(arch, "qwen3") ? "qwen3" : NULL;
    if (!ga) {
        lcx_status st = lcx_fail(LCX_ERR_UNSUPPORTED,
                                 "%s: GGUF architecture '%s' is not supported (llama, qwen2, qwen3)", f->path, arch);
        free(arch);
        return st;
    }
    free(arch);
    int is_llama = !strcmp(ga, "llama");
    *permuted = is_llama;
    uint64_t ctx, H, L, F, nh, ng = 0, kl = 0, rot = 0;
    float eps, theta = 10000.0f;
    LCX_TRY(lcx_gguf_get_u64(f, K("context_length"), &ctx));
    LCX_TRY(lcx_gguf_get_u64(f, K("embedding_length"), &H));
    LCX_TRY(lcx_gguf_get_u64(f, K("block_count"), &L));
    LCX_TRY(lcx_gguf_get_u64(f, K("feed_forward_length"), &F));
    LCX_TRY(lcx_gguf_get_u64(f, K("attention.head_count"), &nh));
    LCX_TRY(lcx_gguf_get_f32(f, K("attention.layer_norm_rms_epsilon"), &eps));
    if (lcx_gguf_find_kv(f, K("attention.head_count_kv"))) LCX_TRY(lcx_gguf_get_u64(f, K("attention.head_count_kv"), &ng));
    else ng = nh;
    if (lcx_gguf_find_kv(f, K("rope.freq_base"))) LCX_TRY(lcx_gguf_get_f32(f, K("rope.freq_base"), &theta));
    LCX_TRY(positive_f32(f, K("attention.layer_norm_rms_epsilon"), eps));
    LCX_TRY(positive_f32(f, K("rope.freq_base"), theta));
    LCX_FAIL_IF(nh == 0 || nh > 65536 || H > ((uint64_t)1 << 20), LCX_ERR_FORMAT, "%s: implausible head count / hidden size",
                f->path);
    if (lcx_gguf_find_kv(f, K("attention.key_length"))) LCX_TRY(lcx_gguf_get_u64(f, K("attention.key_length"), &kl));
    uint64_t hd = kl ? kl : H / nh;
    if (lcx_gguf_find_kv(f, K("rope.dimension_count"))) LCX_TRY(lcx_gguf_get_u64(f, K("rope.dimension_count"), &rot));
    else rot = hd;
    /* rope rotates pairs of the first rot dimensions of a head */
    LCX_FAIL_IF(rot < 2 || rot % 2 || rot > hd, LCX_ERR_FORMAT,
                "%s: key '%s': %llu must be even, >= 2 and at most the head dimension %llu", f->path,
                K("rope.dimension_count"), (unsigned long long)rot, (unsigned long long)hd);
    lcx_shape es = lcx_gguf_tensor_shape(embd);
    /* token ids must index the tokenizer's vocabulary (tokenize refuses them otherwise), else the embedding's */
    const lcx_gguf_kv *toks = lcx_gguf_find_kv(f, "tokenizer.ggml.tokens");
    uint64_t n_vocab = toks && toks->type == LCX_GGUF_ARRAY ? toks->count : (uint64_t)es.dims[0];
    int64_t bos, eos;
    LCX_TRY(token_id(f, "tokenizer.ggml.bos_token_id", n_vocab, &bos));
    LCX_TRY(token_id(f, "tokenizer.ggml.eos_token_id", n_vocab, &eos));
    json_t *c = json_object();
    LCX_FAIL_IF(!c, LCX_ERR_OOM, "out of memory");
    lcx_arch a = is_llama ? LCX_ARCH_LLAMA : !strcmp(ga, "qwen2") ? LCX_ARCH_QWEN2 : LCX_ARCH_QWEN3;
    json_object_set_new(c, "architectures", json_pack("[s]", lcx_arch_class(a)));
    json_object_set_new(c, "model_type", json_string(lcx_arch_name(a)));
    json_object_set_new(c, "vocab_size", json_integer((json_int_t)es.dims[0]));
    json_object_set_new(c, "hidden_size", json_integer((json_int_t)H));
    json_object_set_new(c, "intermediate_size", json_integer((json_int_t)F));
    json_object_set_new(c, "num_hidden_layers", json_integer((json_int_t)L));
    json_object_set_new(c, "num_attention_heads", json_integer((json_int_t)nh));
    json_object_set_new(c, "num_key_value_heads", json_integer((json_int_t)ng));
    json_object_set_new(c, "head_dim", json_integer((json_int_t)hd));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "max_position_embeddings", json_integer((json_int_t)ctx));
    json_object_set_new(c, "rms_norm_eps", json_real(f32_to_decimal(eps)));
    json_object_set_new(c, "rope_theta", json_real(f32_to_decimal(theta)));
    if (rot != hd) json_object_set_new(c, "partial_rotary_factor", json_real((double)rot / (double)hd));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(tied));
    if (a != LCX_ARCH_QWEN2) json_object_set_new(c, "attention_bias", json_boolean(qbias)); /* qwen2: always */
    if (a == LCX_ARCH_LLAMA) json_object_set_new(c, "mlp_bias", json_boolean(mbias));
    if (a != LCX_ARCH_LLAMA) json_object_set_new(c, "use_sliding_window", json_false());
    json_object_set_new(c, "torch_dtype", json_string(torch_dtype_name(dtype)));
    lcx_status st = LCX_OK;
    if (is_llama && qbias != obias) st = lcx_fail(LCX_ERR_UNSUPPORTED, "%s: q/k/v biases without an output bias (or the reverse) "
                                      "have no llama config", f->path);
    if (bos >= 0) json_object_set_new(c, "bos_token_id", json_integer(bos));
    if (eos >= 0) json_object_set_new(c, "eos_token_id", json_integer(eos));
    /* rope scaling */
    json_t *rs = json_object();
    const lcx_gguf_tensor *rf = lcx_gguf_find_tensor(f, "rope_freqs.weight");
    char *type = NULL;
    if (st == LCX_OK && lcx_gguf_find_kv(f, K("rope.scaling.type"))) st = lcx_gguf_get_str_dup(f, K("rope.scaling.type"), &type);
    if (st == LCX_OK && rf) {
        st = llama3_from_freqs(f, rf, theta, (int64_t)rot, rs);
    } else if (st == LCX_OK && type && (strcmp(type, "linear") == 0 || strcmp(type, "yarn") == 0)) {
        float factor;
        st = lcx_gguf_get_f32(f, K("rope.scaling.factor"), &factor);
        if (st == LCX_OK) st = positive_f32(f, K("rope.scaling.factor"), factor);
        json_object_set_new(rs, "rope_type", json_string(type));
        if (st == LCX_OK) json_object_set_new(rs, "factor", json_real(f32_to_decimal(factor)));
        if (st == LCX_OK && strcmp(type, "yarn") == 0) {
            uint64_t orig;
            st = lcx_gguf_get_u64(f, K("rope.scaling.original_context_length"), &orig);
            if (st == LCX_OK) json_object_set_new(rs, "original_max_position_embeddings", json_integer((json_int_t)orig));
        }
    } else if (st == LCX_OK && type && strcmp(type, "none") != 0) {
        st = lcx_fail(LCX_ERR_UNSUPPORTED, "%s: key 'llama.rope.scaling.type': '%s' is not supported (none, linear, yarn)",
                      f->path, type);
    }
    free(type);
    if (json_object_size(rs)) {
        json_object_set(rs, "type", json_object_get(rs, "rope_type"));
        json_object_set_new(c, "rope_scaling", rs);
    } else {
        json_decref(rs);
        json_object_set_new(c, "rope_scaling", json_null());
    }
    if (st != LCX_OK) {
        json_decref(c);
        return st;
    }
    *out = c;
    return LCX_OK;
}

lcx_status lcx_gguf_config_json(const lcx_gguf_file *f, json_t **out, int *permuted) {
    *out = NULL;
    *permuted = 0;
    const lcx_gguf_tensor *embd = lcx_gguf_find_tensor(f, "token_embd.weight");
    LCX_FAIL_IF(!embd || embd->n_dims != 2, LCX_ERR_FORMAT, "%s: no 2-D tensor 'token_embd.weight'", f->path);
    lcx_dtype wdt = lcx_ggml_type_to_dtype(embd->ggml_type);
    if (wdt != LCX_F16 && wdt != LCX_BF16) wdt = LCX_F32;
    return gguf_config(f, embd, !lcx_gguf_find_tensor(f, "output.weight"), !!lcx_gguf_find_tensor(f, "blk.0.attn_q.bias"),
                       !!lcx_gguf_find_tensor(f, "blk.0.attn_output.bias"), !!lcx_gguf_find_tensor(f, "blk.0.ffn_gate.bias"),
                       wdt, out, permuted);
}
