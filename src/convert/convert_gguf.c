/* convert: GGUF (llama architecture) <-> .lcx. Names, metadata and the q/k row permutation follow
 * docs/formats.md "GGUF" ("Architectures, names and metadata", "Rope metadata", "The q/k row permutation"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/convert/convert_internal.h"
#include "formats/gguf.h"
#include "src/core/fileio.h"
#include "src/core/outpath.h"
#include "src/checkpoint/gguf_map.h"
#include "src/checkpoint/model_params.h"
#include "src/checkpoint/source.h"

lcx_status lcx_import_gguf_file(const char *src, const char *out, const lcx_convert_opts *o);

/* "<arch>.<key>" into buf (GGUF metadata keys are prefixed with the architecture name). */
static const char *arch_key(char *buf, size_t cap, const char *arch, const char *key) {
    snprintf(buf, cap, "%s.%s", arch, key);
    return buf;
}
#define K(k) arch_key(kb, sizeof kb, ga, (k))

/* GGUF architecture of a model: llama.cpp writes Mistral as llama; Qwen2/Qwen3 have their own (tensor names as
 * llama's, q/k not permuted: transformers' GGUF reader un-permutes only llama). */
static const char *gguf_arch_of(lcx_arch a) {
    return a == LCX_ARCH_QWEN2 ? "qwen2" : a == LCX_ARCH_QWEN3 ? "qwen3" : "llama";
}

/* ---- import ----------------------------------------------------------------------------------------------- */

typedef struct gg_src {
    lcx_gguf_file *f;
    int64_t nh, ng;
    int permuted; /* llama: q/k rows in llama.cpp's pair order */
} gg_src;

typedef struct gg_ts {
    size_t item; /* cached converted tensor */
    int valid;
    uint8_t *full, *tmp;
    size_t cap;
} gg_ts;

static lcx_status gg_init(void *ctx, void **ts) {
    (void)ctx;
    *ts = calloc(1, sizeof(gg_ts));
    LCX_FAIL_IF(!*ts, LCX_ERR_OOM, "out of memory");
    return LCX_OK;
}
static void gg_free(void *p) {
    gg_ts *t = p;
    if (!t) return;
    free(t->full);
    free(t->tmp);
    free(t);
}

static lcx_status gg_read(void *ctx, void *tsv, const cv_item *it, const lcx_box *box, void *dst) {
    gg_src *g = ctx;
    gg_ts *ts = tsv;
    size_t es = lcx_dtype_bits(it->dtype) / 8;
    if (!ts->valid || ts->item != it->src) {
        const lcx_gguf_tensor *t = &g->f->tensors[it->src];
        size_t need = (size_t)it->bytes + 1;
        if (need > ts->cap) {
            free(ts->full), free(ts->tmp);
            ts->full = malloc(need), ts->tmp = malloc(need);
            ts->cap = ts->full && ts->tmp ? need : 0;
            LCX_FAIL_IF(!ts->cap, LCX_ERR_OOM, "tensor '%s': out of memory", t->name);
        }
        ts->valid = 0;
        if (it->dtype == LCX_F32 && t->ggml_type != LCX_GGML_F32) {
            LCX_TRY(lcx_gguf_tensor_to_f32(g->f, t, (float *)ts->tmp));
        } else {
            memcpy(ts->tmp, t->data, it->bytes);
        }
        int64_t heads = g->permuted ? lcx_gguf_qk_heads(it->name, g->nh, g->ng) : 0;
        if (heads) {
            size_t rows = it->shape[0], cols = it->ndim == 2 ? it->shape[1] : 1;
            LCX_TRY(lcx_gguf_unpermute_qk(ts->full, ts->tmp, rows, cols, es, (size_t)heads));
        } else {
            uint8_t *x = ts->full;
            ts->full = ts->tmp, ts->tmp = x;
        }
        ts->item = it->src;
        ts->valid = 1;
    }
    lcx_box full = lcx_box_full(it->ndim, it->shape);
    return lcx_box_copy(&full, ts->full, box, dst, es, NULL);
}

/* Copy one KV of a read file into a writer, whatever its type. */
static lcx_status copy_kv(lcx_gguf_writer *w, const lcx_gguf_kv *kv) {
    if (kv->type == LCX_GGUF_ARRAY) {
        if (kv->elem_type != LCX_GGUF_STRING) return lcx_gguf_writer_add_array(w, kv->key, kv->elem_type, kv->data, kv->count);
        const char **s = malloc((kv->count + 1) * sizeof *s);
        size_t *l = malloc((kv->count + 1) * sizeof *l);
        lcx_status st = s && l ? LCX_OK : lcx_fail(LCX_ERR_OOM, "out of memory");
        for (uint64_t i = 0; st == LCX_OK && i < kv->count; i++) st = lcx_gguf_arr_str(kv, i, &s[i], &l[i]);
        if (st == LCX_OK) st = lcx_gguf_writer_add_str_array(w, kv->key, s, l, kv->count);
        free(s);
        free(l);
        return st;
    }
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32; uint64_t u64;
            int64_t i64; double f64; } v;
    switch (kv->type) {
    case LCX_GGUF_STRING: return lcx_gguf_writer_add_strn(w, kv->key, (const char *)kv->data, kv->str_len);
    case LCX_GGUF_U8: memcpy(&v, kv->data, 1); return lcx_gguf_writer_add_u8(w, kv->key, v.u8);
    case LCX_GGUF_I8: memcpy(&v, kv->data, 1); return lcx_gguf_writer_add_i8(w, kv->key, v.i8);
    case LCX_GGUF_BOOL: memcpy(&v, kv->data, 1); return lcx_gguf_writer_add_bool(w, kv->key, v.u8 != 0);
    case LCX_GGUF_U16: memcpy(&v, kv->data, 2); return lcx_gguf_writer_add_u16(w, kv->key, v.u16);
    case LCX_GGUF_I16: memcpy(&v, kv->data, 2); return lcx_gguf_writer_add_i16(w, kv->key, v.i16);
    case LCX_GGUF_U32: memcpy(&v, kv->data, 4); return lcx_gguf_writer_add_u32(w, kv->key, v.u32);
    case LCX_GGUF_I32: memcpy(&v, kv->data, 4); return lcx_gguf_writer_add_i32(w, kv->key, v.i32);
    case LCX_GGUF_F32: memcpy(&v, kv->data, 4); return lcx_gguf_writer_add_f32(w, kv->key, v.f32);
    case LCX_GGUF_U64: memcpy(&v, kv->data, 8); return lcx_gguf_writer_add_u64(w, kv->key, v.u64);
    case LCX_GGUF_I64: memcpy(&v, kv->data, 8); return lcx_gguf_writer_add_i64(w, kv->key, v.i64);
    case LCX_GGUF_F64: memcpy(&v, kv->data, 8); return lcx_gguf_writer_add_f64(w, kv->key, v.f64);
    default: return lcx_fail(LCX_ERR_FORMAT, "key '%s': unknown type %d", kv->key, (int)kv->type);
    }
}

lcx_status lcx_import_gguf_file(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_gguf_file *f = NULL;
    LCX_TRY(lcx_gguf_open(src, &f));
    lcx_status st = LCX_OK;
    cv_item *items = calloc(f->n_tensors + 1, sizeof *items);
    size_t n = 0;
    json_t *config = NULL;
    lcx_model_config cfg = {0};
    int have_cfg = 0;
    lcx_param_table tab = {0};
    lcx_gguf_writer *tw = NULL;
    char *tokpath = NULL, *tokname = NULL, *parent = NULL, *base = NULL;
    int tok_written = 0, permuted = 0;
    LCX_FAIL_GOTO(!items, LCX_ERR_OOM, done, "out of memory");
    const lcx_gguf_tensor *embd = lcx_gguf_find_tensor(f, "token_embd.weight");
    LCX_FAIL_GOTO(!embd || embd->n_dims != 2, LCX_ERR_FORMAT, done, "%s: no 2-D tensor 'token_embd.weight'", src);
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lcx_gguf_tensor *t = &f->tensors[i];
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue; /* rope config, rebuilt from it below */
        char hf[LCX_PARAM_NAME_MAX];
        LCX_FAIL_GOTO(!lcx_gguf_to_hf_name(t->name, hf, sizeof hf), LCX_ERR_UNSUPPORTED, done,
                      "%s: tensor '%s' has no Hugging Face llama equivalent", src, t->name);
        lcx_dtype dt;
        LCX_TRY_GOTO(lcx_gguf_tensor_dtype(f, t, &dt), done);
        if (dt != LCX_F32 && dt != LCX_F16 && dt != LCX_BF16) dt = LCX_F32; /* dequantised */
        cv_item *it = &items[n];
        it->name = strdup(hf);
        LCX_FAIL_GOTO(!it->name, LCX_ERR_OOM, done, "out of memory");
        n++;
        strcpy(it->role, "param");
        it->dtype = dt;
        lcx_shape sh = lcx_gguf_tensor_shape(t);
        it->ndim = sh.ndim;
        for (int d = 0; d < sh.ndim; d++) it->shape[d] = sh.dims[d];
        LCX_TRY_GOTO(lcx_dtype_nbytes(dt, t->numel, &it->bytes), done);
        it->src = i;
    }
    LCX_TRY_GOTO(lcx_gguf_config_json(f, &config, &permuted), done);
    /* The tensors must be exactly the ones the rebuilt config implies. */
    LCX_TRY_GOTO(cv_config_from_json(config, src, &cfg), done);
    have_cfg = 1;
    LCX_TRY_GOTO(lcx_param_table_init(&tab, &cfg), done);
    LCX_FAIL_GOTO(tab.n != n, LCX_ERR_FORMAT, done, "%s: %zu model tensors, but its llama metadata implies %zu", src, n, tab.n);
    for (size_t i = 0; i < n; i++) {
        const lcx_param_spec *p = lcx_param_table_find(&tab, items[i].name);
        int ok = p && p->shape.ndim == items[i].ndim;
        for (int d = 0; ok && d < p->shape.ndim; d++) ok = p->shape.dims[d] == items[i].shape[d];
        LCX_FAIL_GOTO(!ok, LCX_ERR_FORMAT, done, "%s: tensor '%s' is %s by the llama metadata", src,
                      f->tensors[items[i].src].name, p ? "shaped otherwise" : "not implied");
    }
    /* Tokenizer KVs -> tokenizer.gguf (a temporary file next to the output until it is copied in). */
    LCX_TRY_GOTO(lcx_gguf_writer_init(&tw, 0), done);
    int ntok = 0;
    for (size_t i = 0; i < f->n_kv; i++)
        if (strncmp(f->kv[i].key, "tokenizer.", 10) == 0) {
            LCX_TRY_GOTO(copy_kv(tw, &f->kv[i]), done);
            ntok++;
        }
    cv_target t = {.out = out, .config = config};
    if (ntok) {
        LCX_TRY_GOTO(cv_split_path(out, &parent, &base), done);
        tokpath = lcx_out_temp_name(out); /* a temporary like any other: a killed import's is swept */
        LCX_FAIL_GOTO(!tokpath, LCX_ERR_OOM, done, "out of memory");
        LCX_TRY_GOTO(lcx_out_absent(out), done);
        LCX_TRY_GOTO(lcx_gguf_writer_write(tw, tokpath), done);
        tok_written = 1;
        tokname = strdup(LCX_GGUF_TOKENIZER_FILE);
        LCX_FAIL_GOTO(!tokname, LCX_ERR_OOM, done, "out of memory");
        t.n_files = 1;
        t.src_paths = &tokpath;
        t.names = &tokname;
    }
    gg_src g = {.f = f, .nh = cfg.num_attention_heads, .ng = cfg.num_key_value_heads, .permuted = permuted};
    cv_source s = {.ctx = &g, .thread_init = gg_init, .thread_free = gg_free, .read = gg_read};
    st = cv_write_lcx(&s, items, n, &t, o);
done:
    if (tok_written) unlink(tokpath);
    free(tokpath);
    free(tokname);
    free(parent);
    free(base);
    lcx_gguf_writer_free(tw);
    lcx_param_table_free(&tab);
    if (have_cfg) lcx_config_free(&cfg);
    json_decref(config);
    cv_items_free(items, n);
    lcx_gguf_close(f);
    return st;
}

/* ---- export ----------------------------------------------------------------------------------------------- */

static lcx_status add_u32(lcx_gguf_writer *w, const char *key, int64_t v) {
    LCX_FAIL_IF(v < 0 || v > (int64_t)UINT32_MAX, LCX_ERR_INVALID, "GGUF key '%s': %lld does not fit u32", key, (long long)v);
    return lcx_gguf_writer_add_u32(w, key, (uint32_t)v);
}

/* Lazy tensor source for the GGUF writer: one parameter read (and q/k permuted) at a time. */
typedef struct gg_export {
    lcx_source *src;
    int64_t nh, ng;
    const lcx_convert_opts *o;
    int permute;
    void *buf;
    uint64_t done, total;
} gg_export;

static lcx_status ex_fetch(void *user, size_t i, const void **src) {
    gg_export *ex = user;
    const lcx_source_tensor *t = &ex->src->tensor_of[i];
    const lcx_param_spec *p = &ex->src->params.params[i];
    uint64_t nb;
    LCX_TRY(lcx_dtype_nbytes(t->dtype, p->numel, &nb));
    void *raw = malloc(nb + 1);
    LCX_FAIL_IF(!raw, LCX_ERR_OOM, "tensor '%s': out of memory", p->name);
    lcx_status st = lcx_source_read(ex->src, i, t->dtype, raw); /* as stored (dequantised for a quantised GGUF) */
    int64_t heads = ex->permute ? lcx_gguf_qk_heads(p->name, ex->nh, ex->ng) : 0;
    if (st == LCX_OK && heads) {
        void *perm = malloc(nb + 1);
        st = perm ? lcx_gguf_permute_qk(perm, raw, p->shape.dims[0], p->shape.ndim == 2 ? p->shape.dims[1] : 1,
                                        lcx_dtype_bits(t->dtype) / 8, (size_t)heads)
                  : lcx_fail(LCX_ERR_OOM, "out of memory");
        free(raw);
        raw = perm;
    }
    if (st != LCX_OK) {
        free(raw);
        return st;
    }
    ex->buf = raw;
    *src = raw;
    ex->done += nb;
    if (ex->o->progress) ex->o->progress(ex->o->progress_user, i + 1, ex->src->params.n, ex->done, ex->total);
    return LCX_OK;
}

static void ex_release(void *user, size_t i) {
    gg_export *ex = user;
    (void)i;
    free(ex->buf);
    ex->buf = NULL;
    lcx_source_release(ex->src);
}

lcx_status lcx_export_gguf(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_source *s = NULL;
    LCX_TRY(lcx_source_open(src, 0, &s));
    lcx_status st = LCX_OK;
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_gguf_writer *w = NULL;
    lcx_gguf_file *tok = NULL;
    gg_export ex = {0};
    float *freqs = NULL;
    size_t n = 0;

    LCX_TRY_GOTO(lcx_source_need_model(s, "GGUF export"), done);
    cfg = s->cfg; /* the source's: not freed here */
    const json_t *cj = cfg.json;
    const lcx_param_table tab = s->params;
    const char *ga = gguf_arch_of(cfg.arch);
    char kb[128];
    int permute = !strcmp(ga, "llama");
    LCX_FAIL_GOTO(permute && cfg.qkv_bias != cfg.o_bias, LCX_ERR_UNSUPPORTED, done,
                  "GGUF export: llama with q/k/v biases but no o bias (or the reverse) has no llama.cpp form");
    LCX_FAIL_GOTO(cfg.arch == LCX_ARCH_QWEN3 && cfg.qkv_bias, LCX_ERR_UNSUPPORTED, done,
                  "GGUF export: qwen3 with attention_bias has no llama.cpp form");
    LCX_FAIL_GOTO(o->dtype != LCX_DTYPE_INVALID && o->dtype != LCX_F32 && o->dtype != LCX_F16 && o->dtype != LCX_BF16 &&
                      o->dtype != LCX_Q8_0,
                  LCX_ERR_INVALID, done, "--dtype: GGUF export writes f32, f16, bf16 or q8_0");
    lcx_rope_plan plan;
    LCX_TRY_GOTO(lcx_rope_plan_init(&plan, &cfg.rope, cfg.head_dim, cfg.max_position_embeddings, o->warn,
                                    o->warn_user),
                 done);
    LCX_FAIL_GOTO(plan.type == LCX_ROPE_DYNAMIC || plan.type == LCX_ROPE_LONGROPE, LCX_ERR_UNSUPPORTED, done,
                  "GGUF export: %s rope has no llama.cpp equivalent (re-extend with yarn, pi or llama3 first)",
                  lcx_rope_type_name(plan.type));
    n = tab.n;
    LCX_TRY_GOTO(lcx_out_absent(out), done);

    LCX_TRY_GOTO(lcx_gguf_writer_init(&w, 0), done);
    LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "general.architecture", ga), done);
    const json_t *nm = json_object_get(cj, "_name_or_path");
    if (json_is_string(nm) && json_string_length(nm))
        LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "general.name", json_string_value(nm)), done);
    LCX_TRY_GOTO(add_u32(w, K("vocab_size"), cfg.vocab_size), done);
    LCX_TRY_GOTO(add_u32(w, K("context_length"), cfg.max_position_embeddings), done);
    LCX_TRY_GOTO(add_u32(w, K("embedding_length"), cfg.hidden_size), done);
    LCX_TRY_GOTO(add_u32(w, K("block_count"), cfg.num_hidden_layers), done);
    LCX_TRY_GOTO(add_u32(w, K("feed_forward_length"), cfg.intermediate_size), done);
    LCX_TRY_GOTO(add_u32(w, K("attention.head_count"), cfg.num_attention_heads), done);
    LCX_TRY_GOTO(add_u32(w, K("attention.head_count_kv"), cfg.num_key_value_heads), done);
    if (cfg.head_dim * cfg.num_attention_heads != cfg.hidden_size) {
        LCX_TRY_GOTO(add_u32(w, K("attention.key_length"), cfg.head_dim), done);
        LCX_TRY_GOTO(add_u32(w, K("attention.value_length"), cfg.head_dim), done);
    }
    LCX_TRY_GOTO(lcx_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), (float)cfg.rms_norm_eps), done);
    LCX_TRY_GOTO(lcx_gguf_writer_add_f32(w, K("rope.freq_base"), (float)plan.theta), done);
    LCX_TRY_GOTO(add_u32(w, K("rope.dimension_count"), plan.rot_dim), done);
    if (plan.type == LCX_ROPE_YARN && o->warn &&
        (cfg.rope.has_attention_factor || cfg.rope.has_beta_fast || cfg.rope.has_beta_slow || cfg.rope.has_mscale ||
         cfg.rope.has_mscale_all_dim))
        o->warn(o->warn_user, "GGUF export: yarn attention_factor / beta / mscale settings are not written (llama.cpp "
                              "uses its defaults)");
    if (plan.type == LCX_ROPE_LINEAR || plan.type == LCX_ROPE_YARN) {
        LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, K("rope.scaling.type"), lcx_rope_type_name(plan.type)), done);
        LCX_TRY_GOTO(lcx_gguf_writer_add_f32(w, K("rope.scaling.factor"), (float)plan.factor), done);
        if (plan.type == LCX_ROPE_YARN)
            LCX_TRY_GOTO(add_u32(w, K("rope.scaling.original_context_length"), plan.original_max), done);
    }
    /* Tokenizer KVs: the source GGUF's own, or those a GGUF import kept in the .lcx (tokenizer.gguf). */
    const lcx_gguf_file *tkv = s->gguf;
    for (size_t i = 0; !tkv && i < s->n_side_files; i++) {
        const char *f = s->side_files[i], *b = strrchr(f, '/') ? strrchr(f, '/') + 1 : f;
        if (strcmp(b, LCX_GGUF_TOKENIZER_FILE) != 0) continue;
        LCX_TRY_GOTO(lcx_gguf_open(f, &tok), done);
        tkv = tok;
    }
    for (size_t k = 0; tkv && k < tkv->n_kv; k++)
        if (strncmp(tkv->kv[k].key, "tokenizer.", 10) == 0) LCX_TRY_GOTO(copy_kv(w, &tkv->kv[k]), done);
    /* From a Hugging Face source: tokenizer.json converted (byte-level BPE). */
    int64_t bos = cfg.bos_token_id;
    for (size_t i = 0; !tkv && i < s->n_side_files; i++) {
        const char *f = s->side_files[i], *b = strrchr(f, '/') ? strrchr(f, '/') + 1 : f;
        if (strcmp(b, "tokenizer.json") != 0) continue;
        int written;
        LCX_TRY_GOTO(cv_gguf_tokenizer_kvs(f, cfg.vocab_size, &bos, w, o, &written), done);
    }
    /* bos/eos from the config when no tokenizer metadata states them (GGUF has one eos id: the first) */
    if (bos >= 0 && !(tkv && lcx_gguf_find_kv(tkv, "tokenizer.ggml.bos_token_id")))
        LCX_TRY_GOTO(add_u32(w, "tokenizer.ggml.bos_token_id", bos), done);
    if (cfg.n_eos > 0 && !(tkv && lcx_gguf_find_kv(tkv, "tokenizer.ggml.eos_token_id")))
        LCX_TRY_GOTO(add_u32(w, "tokenizer.ggml.eos_token_id", cfg.eos_token_ids[0]), done);
    if (plan.type == LCX_ROPE_LLAMA3) {
        freqs = malloc((size_t)plan.n_pairs * sizeof *freqs);
        LCX_FAIL_GOTO(!freqs, LCX_ERR_OOM, done, "out of memory");
        lcx_llama3_rope_divisors(plan.theta, plan.rot_dim, plan.factor, plan.low_freq_factor, plan.high_freq_factor,
                                 plan.original_max, freqs);
        lcx_shape fs = lcx_shape_1d((uint64_t)plan.n_pairs);
        LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "rope_freqs.weight", LCX_F32, &fs, LCX_F32, freqs), done);
    }
    ex.src = s;
    ex.nh = cfg.num_attention_heads;
    ex.ng = cfg.num_key_value_heads;
    ex.permute = permute;
    ex.o = o;
    for (size_t i = 0; i < n; i++) ex.total += lcx_dtype_bits(s->tensor_of[i].dtype) / 8 * tab.params[i].numel;
    for (size_t i = 0; i < n; i++) {
        const lcx_source_tensor *t = &s->tensor_of[i];
        const lcx_param_spec *p = &tab.params[i];
        char gname[LCX_GGUF_MAX_NAME + 1];
        LCX_FAIL_GOTO(!lcx_hf_to_gguf_name(p->name, gname, sizeof gname), LCX_ERR_INVALID, done, "tensor %s has no GGUF name",
                      p->name);
        lcx_dtype dt = o->dtype == LCX_DTYPE_INVALID ? t->dtype : o->dtype;
        if (p->shape.ndim != 2) dt = LCX_F32;                              /* norms and biases stay F32 */
        else if (dt == LCX_Q8_0 && p->shape.dims[1] % 32 != 0) dt = LCX_F16; /* rows must be whole blocks */
        if (dt != LCX_F32 && dt != LCX_F16 && dt != LCX_BF16 && dt != LCX_Q8_0) dt = LCX_F32;
        LCX_TRY_GOTO(lcx_gguf_writer_add_tensor_lazy(w, gname, dt, &p->shape, t->dtype, ex_fetch, ex_release, &ex, i),
                     done);
    }
    st = lcx_gguf_writer_write(w, out);
done:
    free(ex.buf);
    free(freqs);
    lcx_gguf_close(tok);
    lcx_gguf_writer_free(w);
    lcx_source_close(s);
    return st;
}
