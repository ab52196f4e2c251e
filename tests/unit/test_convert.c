/* convert: import / export / reshard against independent references.
 * - every fixture model (written by transformers) -> .lcx in TP1, TP2, TP4, TP2xCP2 -> HF gives the source's
 *   tensors byte for byte and an equivalent config (same typed fields after reparsing, unknown fields kept),
 *   generation_config.json copied through;
 * - GGUF fixture (written by gguf-py) -> .lcx equals gguf-py's dequantised values with q/k rows put back by the
 *   permutation gen_gguf.py recorded; its tokenizer KVs survive .lcx -> GGUF;
 * - HF -> GGUF -> .lcx -> HF is byte-identical for the llama-architecture fixtures (permute/unpermute, biases,
 *   bf16, rope linear/yarn/llama3 metadata); the exported q/k rows follow docs/formats.md's formula;
 * - HF export dtypes equal lcx_f32_to_bf16 / lcx_f32_to_f16 of the source;
 * - reshard chains TP1 -> TP2 -> TP4 -> TP1 and TP2xCP2 -> TP4xCP1 -> TP2xCP2 keep every tensor of every role
 *   bit-exact (kv heads < TP, vocab 13 not divisible by TP, ZeRO-partitioned optimizer state), also under a tiny
 *   --max-memory that forces row chunks;
 * - errors: impossible layouts, existing outputs, missing sources, unsupported GGUF architectures; nothing is
 *   left behind by a failure. */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/lcx.h"
#include "formats/safetensors.h"
#include "src/convert/convert.h"
#include "src/core/fileio.h"
#include "src/checkpoint/model_params.h"
#include "test_util.h"
#include "test_tmpdir.h"

#define MODELS LCX_SOURCE_DIR "/tests/fixtures/models/"
#define GG LCX_SOURCE_DIR "/tests/fixtures/gguf/"

static char workdir[256];

static char *wpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *wpath(const char *fmt, ...) {
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    int n = snprintf(b, 512, "%s/", workdir);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + n, 512 - (size_t)n, fmt, ap);
    va_end(ap);
    return b;
}

static lcx_convert_opts opts(int tp, int cp) {
    lcx_convert_opts o;
    lcx_convert_opts_default(&o);
    o.tp = tp;
    o.cp = cp;
    o.threads = 2;
    return o;
}

/* No *.tmp-* or tokenizer temp left in the work directory. */
static int leftovers(void) {
    DIR *d = opendir(workdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp-") || strstr(e->d_name, ".tokenizer-")) n++, fprintf(stderr, "leftover %s\n", e->d_name);
    if (d) closedir(d);
    return n;
}

/* Every tensor of src equal (dtype, shape, bytes) in out, and no others. */
static void check_same_tensors(const char *src, const char *out, const char *what) {
    lcx_st_set *a = NULL, *b = NULL;
    CHECK_OK(lcx_st_set_open(src, &a));
    CHECK_OK(lcx_st_set_open(out, &b));
    if (!a || !b) goto done;
    CHECK_MSG(a->n_tensors == b->n_tensors, "%s: %zu vs %zu tensors", what, a->n_tensors, b->n_tensors);
    size_t bad = 0;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lcx_st_tensor *x = a->tensors[i], *y = lcx_st_set_find(b, x->name);
        if (!y || y->dtype != x->dtype || !lcx_shape_equal(&x->shape, &y->shape) || y->end - y->begin != x->end - x->begin ||
            memcmp(x->data, y->data, x->end - x->begin) != 0) {
            if (bad++ < 3) fprintf(stderr, "%s: tensor %s differs\n", what, x->name);
        }
    }
    CHECK_MSG(bad == 0, "%s: %zu tensors differ", what, bad);
done:
    lcx_st_set_close(a);
    lcx_st_set_close(b);
}

/* Same typed fields after reparsing; every source key outside the rope/dtype keys kept with its value. */
static void check_same_config(const char *src_cfg, const char *out_cfg, const char *what, int same_arch) {
    lcx_model_config a, b;
    CHECK_OK(lcx_config_load(src_cfg, &a));
    CHECK_OK(lcx_config_load(out_cfg, &b));
    if (same_arch) CHECK_MSG(a.arch == b.arch, "%s: arch", what);
    CHECK_MSG(a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
                  a.intermediate_size == b.intermediate_size && a.num_hidden_layers == b.num_hidden_layers &&
                  a.num_attention_heads == b.num_attention_heads && a.num_key_value_heads == b.num_key_value_heads &&
                  a.head_dim == b.head_dim && a.max_position_embeddings == b.max_position_embeddings &&
                  a.tie_word_embeddings == b.tie_word_embeddings && a.qkv_bias == b.qkv_bias && a.o_bias == b.o_bias &&
                  a.mlp_bias == b.mlp_bias && a.qk_norm == b.qk_norm && a.dtype == b.dtype,
              "%s: sizes/flags differ", what);
    CHECK_MSG((float)a.rms_norm_eps == (float)b.rms_norm_eps, "%s: rms_norm_eps %g vs %g", what, a.rms_norm_eps,
              b.rms_norm_eps);
    CHECK_MSG(a.bos_token_id == b.bos_token_id && a.n_eos == b.n_eos, "%s: bos/eos", what);
    const lcx_rope_params *r = &a.rope, *s = &b.rope;
    CHECK_MSG(strcmp(r->type, s->type) == 0 && r->theta == s->theta && r->partial_rotary_factor == s->partial_rotary_factor &&
                  r->has_factor == s->has_factor && (!r->has_factor || r->factor == s->factor) &&
                  r->has_low_freq_factor == s->has_low_freq_factor && r->has_high_freq_factor == s->has_high_freq_factor &&
                  (!r->has_low_freq_factor || r->low_freq_factor == s->low_freq_factor) &&
                  (!r->has_high_freq_factor || r->high_freq_factor == s->high_freq_factor),
              "%s: rope %s/%g vs %s/%g", what, r->type, r->theta, s->type, s->theta);
    /* llama3/yarn: the original length must survive whichever way it was stated */
    if (r->has_original_max) CHECK_MSG(s->has_original_max && r->original_max_position_embeddings == s->original_max_position_embeddings,
                                       "%s: original_max_position_embeddings", what);
    if (same_arch) {
        static const char *const rewritten[] = {"rope_parameters", "rope_scaling", "rope_theta", "dtype", "torch_dtype",
                                                "original_max_position_embeddings"};
        const char *key;
        json_t *v;
        json_object_foreach(a.json, key, v) {
            int skip = 0;
            for (size_t k = 0; k < sizeof rewritten / sizeof rewritten[0]; k++) skip |= !strcmp(key, rewritten[k]);
            if (skip) continue;
            CHECK_MSG(json_equal(v, json_object_get(b.json, key)), "%s: key '%s' not kept", what, key);
        }
    }
    lcx_config_free(&a);
    lcx_config_free(&b);
}

static int files_equal(const char *p, const char *q) {
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    int ok = lcx_read_file(p, 1 << 24, &a, &la) == LCX_OK && lcx_read_file(q, 1 << 24, &b, &lb) == LCX_OK && la == lb &&
             memcmp(a, b, la) == 0;
    free(a);
    free(b);
    return ok;
}

/* ---- HF fixtures through every layout ------------------------------------------------------------------------ */
static void test_hf_roundtrips(void) {
    static const char *const models[] = {"llama_gqa", "llama_tied", "llama_bf16", "llama_rope_legacy", "llama_rope_llama3",
                                         "llama_rope_v5", "llama_sharded", "mistral", "qwen2", "qwen3"};
    static const int layouts[][2] = {{1, 1}, {2, 1}, {4, 1}, {2, 2}};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        char src[512], srccfg[600], srcgen[600];
        snprintf(src, sizeof src, MODELS "%s", models[m]);
        snprintf(srccfg, sizeof srccfg, "%s/config.json", src);
        snprintf(srcgen, sizeof srcgen, "%s/generation_config.json", src);
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            int tp = layouts[l][0], cp = layouts[l][1];
            char *ck = wpath("%s-tp%dcp%d.lcx", models[m], tp, cp), *hf = wpath("%s-tp%dcp%d.hf", models[m], tp, cp);
            lcx_convert_opts o = opts(tp, cp);
            CHECK_OK(lcx_import(src, ck, &o));
            lcx_ckpt *c = NULL;
            CHECK_OK(lcx_ckpt_open(ck, &c));
            if (c) {
                int t, p, d;
                const char *kv;
                lcx_ckpt_layout(c, &t, &p, &d, &kv);
                CHECK(t == tp && p == cp && d == 1);
                /* one piece per TP rank for a split weight */
                const lcx_ckpt_tensor *q = lcx_ckpt_find(c, "model.layers.0.self_attn.q_proj.weight", "param");
                CHECK_MSG(q && q->n_pieces == tp, "%s tp%d: q_proj in %d pieces", models[m], tp, q ? q->n_pieces : -1);
                CHECK_OK(lcx_ckpt_verify(c));
                lcx_ckpt_free(c);
            }
            CHECK_OK(lcx_export_hf(ck, hf, &o));
            char what[128];
            snprintf(what, sizeof what, "%s tp%d cp%d", models[m], tp, cp);
            check_same_tensors(src, hf, what);
            char outcfg[600], outgen[600];
            snprintf(outcfg, sizeof outcfg, "%s/config.json", hf);
            snprintf(outgen, sizeof outgen, "%s/generation_config.json", hf);
            check_same_config(srccfg, outcfg, what, 1);
            CHECK_MSG(files_equal(srcgen, outgen), "%s: generation_config.json not copied through", what);
        }
    }
    /* sharded export: a small shard size gives an index whose total_size is the data bytes */
    lcx_convert_opts o = opts(1, 1);
    o.shard_bytes = 40000;
    CHECK_OK(lcx_export_hf(wpath("llama_gqa-tp2cp1.lcx"), wpath("gqa_sharded.hf"), &o));
    CHECK(lcx_is_file(wpath("gqa_sharded.hf/model.safetensors.index.json")));
    CHECK(!lcx_is_file(wpath("gqa_sharded.hf/model.safetensors")));
    check_same_tensors(MODELS "llama_gqa", wpath("gqa_sharded.hf"), "sharded export");
    lcx_st_set *s = NULL;
    CHECK_OK(lcx_st_set_open(wpath("gqa_sharded.hf"), &s));
    if (s) {
        CHECK(s->n_files > 2);
        CHECK(s->total_size_index == 34976 * 4); /* llama_gqa: 34976 float32 parameters */
    }
    lcx_st_set_close(s);
}

/* ---- export dtypes ------------------------------------------------------------------------------------------ */
static void test_export_dtypes(void) {
    lcx_st_set *src = NULL;
    CHECK_OK(lcx_st_set_open(MODELS "llama_gqa", &src));
    for (int k = 0; k < 2 && src; k++) {
        lcx_convert_opts o = opts(1, 1);
        o.dtype = k ? LCX_F16 : LCX_BF16;
        char *out = wpath("gqa_%s.hf", k ? "f16" : "bf16");
        CHECK_OK(lcx_export_hf(wpath("llama_gqa-tp4cp1.lcx"), out, &o));
        lcx_st_set *b = NULL;
        CHECK_OK(lcx_st_set_open(out, &b));
        size_t bad = 0;
        for (size_t i = 0; b && i < src->n_tensors; i++) {
            const lcx_st_tensor *x = src->tensors[i], *y = lcx_st_set_find(b, x->name);
            if (!y || y->dtype != o.dtype) {
                bad++;
                continue;
            }
            size_t n = (x->end - x->begin) / 4;
            const float *f = (const float *)x->data;
            const uint16_t *h = (const uint16_t *)y->data;
            for (size_t j = 0; j < n; j++) {
                float v;
                memcpy(&v, &f[j], 4);
                bad += h[j] != (k ? lcx_f32_to_f16(v) : lcx_f32_to_bf16(v));
            }
        }
        CHECK_MSG(bad == 0, "export --dtype %s: %zu values differ", k ? "f16" : "bf16", bad);
        lcx_st_set_close(b);
        lcx_model_config c;
        CHECK_OK(lcx_config_load(wpath("gqa_%s.hf/config.json", k ? "f16" : "bf16"), &c));
        CHECK(c.dtype == o.dtype);
        lcx_config_free(&c);
    }
    lcx_st_set_close(src);
}

/* ---- GGUF fixture import ------------------------------------------------------------------------------------- */
static void gguf_hf_name(const char *g, char *out, size_t cap) {
    static const char *const map[][2] = {
        {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"}, {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
        {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
        {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
        {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
        {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"},
        {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
        {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"},
        {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"},
        {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"}};
    out[0] = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(g, map[i][0])) snprintf(out, cap, "%s", map[i][1]);
}

/* Every tensor of a GGUF description (name, ggml_type, f32_at, numel: gguf-py's dequantised values in ref) equals
 * the imported .lcx tensor, q/k rows put back with the recorded permutation. Returns the tensors checked. */
static int check_gguf_values(lcx_ckpt *ck, json_t *tensors, const float *ref, json_t *perm) {
    size_t i;
    json_t *e;
    int checked = 0;
    json_array_foreach(tensors, i, e) {
        const char *gname = json_string_value(json_object_get(e, "name"));
        char hf[128];
        gguf_hf_name(gname, hf, sizeof hf);
        const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, hf, "param");
        CHECK_MSG(t != NULL, "tensor %s (%s) missing", gname, hf);
        if (!t) continue;
        size_t n = (size_t)json_integer_value(json_object_get(e, "numel"));
        const float *want = ref + json_integer_value(json_object_get(e, "f32_at"));
        lcx_box full = lcx_box_full(t->ndim, t->shape);
        void *raw = malloc(n * t->es);
        float *got = malloc(n * sizeof(float));
        CHECK_OK(lcx_ckpt_read_box(ck, hf, "param", &full, raw));
        CHECK_OK(lcx_convert_to_f32(t->dtype, raw, got, n));
        /* GGUF row i holds HF row perm[i] for q/k (recorded by gen_gguf.py from llama.cpp's permute) */
        json_t *p = strstr(gname, "attn_q.") ? json_object_get(perm, "q") : strstr(gname, "attn_k.") ? json_object_get(perm, "k") : NULL;
        size_t rows = t->shape[0], cols = n / rows, bad = 0;
        for (size_t r = 0; r < rows; r++) {
            size_t hr = p ? (size_t)json_integer_value(json_array_get(p, r)) : r;
            for (size_t c = 0; c < cols; c++) bad += memcmp(&got[hr * cols + c], &want[r * cols + c], 4) != 0;
        }
        CHECK_MSG(bad == 0, "%s: %zu values differ from gguf-py", gname, bad);
        /* quantised tensors become F32, F16 / BF16 stay */
        int gt = (int)json_integer_value(json_object_get(e, "ggml_type"));
        CHECK_MSG(t->dtype == (gt == 1 ? LCX_F16 : gt == 30 ? LCX_BF16 : LCX_F32), "%s: dtype", gname);
        checked++;
        free(raw);
        free(got);
    }
    return checked;
}

static void test_gguf_import(void) {
    json_t *exp = json_load_file(GG "expected.json", 0, NULL);
    char *blob = NULL;
    size_t blen = 0;
    CHECK(exp != NULL);
    CHECK_OK(lcx_read_file(GG "expected.f32", 1 << 24, &blob, &blen));
    lcx_convert_opts o = opts(2, 1);
    CHECK_OK(lcx_import(GG "llama_tiny.gguf", wpath("tiny.lcx"), &o));
    lcx_ckpt *ck = NULL;
    CHECK_OK(lcx_ckpt_open(wpath("tiny.lcx"), &ck));
    if (!exp || !blob || !ck) goto done;
    json_t *tensors = json_object_get(json_object_get(json_object_get(exp, "files"), "llama_tiny.gguf"), "tensors");
    json_t *perm = json_object_get(exp, "permutation");
    int checked = check_gguf_values(ck, tensors, (const float *)blob, perm);
    CHECK(checked == 12);
    /* Q4_0 / Q4_1 / Q8_0 / BF16 weights: values equal gguf-py's dequantisation */
    {
        json_t *q4 = json_load_file(GG "llama_q4.json", 0, NULL);
        char *qb = NULL;
        size_t ql = 0;
        CHECK(q4 != NULL);
        CHECK_OK(lcx_read_file(GG "llama_q4.f32", 1 << 24, &qb, &ql));
        o = opts(2, 1);
        CHECK_OK(lcx_import(GG "llama_q4.gguf", wpath("q4.lcx"), &o));
        lcx_ckpt *c4 = NULL;
        CHECK_OK(lcx_ckpt_open(wpath("q4.lcx"), &c4));
        if (q4 && qb && c4) CHECK(check_gguf_values(c4, json_object_get(q4, "tensors"), (const float *)qb, perm) == 12);
        lcx_ckpt_free(c4);
        free(qb);
        json_decref(q4);
    }
    /* the rebuilt config */
    lcx_model_config c;
    CHECK_OK(lcx_ckpt_model_config(ck) ? LCX_OK : LCX_ERR_FORMAT);
    char *txt = json_dumps(lcx_ckpt_model_config(ck), 0);
    CHECK_OK(lcx_config_parse("tiny", txt, strlen(txt), &c));
    free(txt);
    json_t *ll = json_object_get(exp, "llama");
    CHECK(c.vocab_size == json_integer_value(json_object_get(ll, "vocab")) && c.hidden_size == 32 &&
          c.num_hidden_layers == 1 && c.num_attention_heads == 4 && c.num_key_value_heads == 2 &&
          c.intermediate_size == 64 && c.max_position_embeddings == 256 && c.rms_norm_eps == 1e-05 &&
          c.rope.theta == 10000.0 && !c.tie_word_embeddings && c.bos_token_id == 1 && c.n_eos == 1 &&
          c.eos_token_ids[0] == 2 && strcmp(c.rope.type, "default") == 0);
    lcx_config_free(&c);
    /* tokenizer KVs: .lcx -> GGUF gives every tokenizer.* KV of the source back unchanged */
    o = opts(1, 1);
    CHECK_OK(lcx_export_gguf(wpath("tiny.lcx"), wpath("tiny_out.gguf"), &o));
    lcx_gguf_file *a = NULL, *b = NULL;
    CHECK_OK(lcx_gguf_open(GG "llama_tiny.gguf", &a));
    CHECK_OK(lcx_gguf_open(wpath("tiny_out.gguf"), &b));
    int ntok = 0;
    for (size_t k = 0; a && b && k < a->n_kv; k++) {
        const lcx_gguf_kv *x = &a->kv[k];
        if (strncmp(x->key, "tokenizer.", 10) != 0) continue;
        ntok++;
        const lcx_gguf_kv *y = lcx_gguf_find_kv(b, x->key);
        int same = y && y->type == x->type && y->elem_type == x->elem_type && y->count == x->count;
        if (same && x->elem_type == LCX_GGUF_STRING && x->type == LCX_GGUF_ARRAY) {
            for (uint64_t j = 0; same && j < x->count; j++) {
                const char *s1, *s2;
                size_t l1, l2;
                same = lcx_gguf_arr_str(x, j, &s1, &l1) == LCX_OK && lcx_gguf_arr_str(y, j, &s2, &l2) == LCX_OK &&
                       l1 == l2 && memcmp(s1, s2, l1) == 0;
            }
        } else if (same && x->type == LCX_GGUF_STRING) {
            same = x->str_len == y->str_len && memcmp(x->data, y->data, x->str_len) == 0;
        } else if (same) {
            size_t es = x->elem_type == LCX_GGUF_U8 || x->elem_type == LCX_GGUF_I8 || x->elem_type == LCX_GGUF_BOOL ? 1
                        : x->elem_type == LCX_GGUF_U16 || x->elem_type == LCX_GGUF_I16                        ? 2
                        : x->elem_type == LCX_GGUF_U64 || x->elem_type == LCX_GGUF_I64 || x->elem_type == LCX_GGUF_F64 ? 8
                                                                                                                : 4;
            same = memcmp(x->data, y->data, es * x->count) == 0;
        }
        CHECK_MSG(same, "tokenizer KV %s not carried through", x->key);
    }
    CHECK(ntok >= 8);
    /* and q/k are permuted back: the exported tensor equals the fixture's */
    for (int qk = 0; a && b && qk < 2; qk++) {
        const char *nm = qk ? "blk.0.attn_k.weight" : "blk.0.attn_q.weight";
        const lcx_gguf_tensor *x = lcx_gguf_find_tensor(a, nm), *y = lcx_gguf_find_tensor(b, nm);
        CHECK(x && y && x->nbytes == y->nbytes && y->ggml_type == x->ggml_type && memcmp(x->data, y->data, x->nbytes) == 0);
    }
    lcx_gguf_close(a);
    lcx_gguf_close(b);
done:
    lcx_ckpt_free(ck);
    free(blob);
    json_decref(exp);
}

/* ---- HF -> GGUF -> HF ---------------------------------------------------------------------------------------- */
static void test_gguf_roundtrips(void) {
    static const char *const models[] = {"llama_gqa", "llama_tied", "llama_bf16", "llama_rope_legacy",
                                         "llama_rope_llama3", "llama_rope_v5", "qwen2", "qwen3"};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        lcx_convert_opts o = opts(1, 1);
        char *gg = wpath("%s.gguf", models[m]), *back = wpath("%s.g.lcx", models[m]), *hf = wpath("%s.g.hf", models[m]);
        CHECK_OK(lcx_export_gguf(wpath("%s-tp2cp1.lcx", models[m]), gg, &o));
        CHECK_OK(lcx_import(gg, back, &o));
        /* GGUF keeps 1-D tensors in F32 (as llama.cpp's converter): a bf16 model comes back exactly with --dtype bf16 */
        if (!strcmp(models[m], "llama_bf16")) o.dtype = LCX_BF16;
        CHECK_OK(lcx_export_hf(back, hf, &o));
        char src[512], what[128], a[600], b[600];
        snprintf(src, sizeof src, MODELS "%s", models[m]);
        snprintf(what, sizeof what, "%s via GGUF", models[m]);
        check_same_tensors(src, hf, what);
        snprintf(a, sizeof a, "%s/config.json", src);
        snprintf(b, sizeof b, "%s/config.json", hf);
        check_same_config(a, b, what, 0);
        lcx_model_config ca, cb;
        CHECK_OK(lcx_config_load(a, &ca));
        CHECK_OK(lcx_config_load(b, &cb));
        /* mistral is written as llama (as llama.cpp does); the others keep their architecture */
        CHECK_MSG(ca.arch == cb.arch, "%s: arch %s -> %s", what, lcx_arch_name(ca.arch), lcx_arch_name(cb.arch));
        lcx_config_free(&ca);
        lcx_config_free(&cb);
    }
    /* qwen: their own llama.cpp architectures, q/k rows not permuted */
    for (int k = 0; k < 2; k++) {
        lcx_gguf_file *q = NULL;
        lcx_st_set *hs = NULL;
        CHECK_OK(lcx_gguf_open(wpath("%s.gguf", k ? "qwen3" : "qwen2"), &q));
        CHECK_OK(lcx_st_set_open(k ? MODELS "qwen3" : MODELS "qwen2", &hs));
        if (q && hs) {
            const char *arch;
            size_t len;
            uint32_t u;
            CHECK_OK(lcx_gguf_get_str(q, "general.architecture", &arch, &len));
            CHECK(len == 5 && memcmp(arch, k ? "qwen3" : "qwen2", 5) == 0);
            CHECK_OK(lcx_gguf_get_u32(q, k ? "qwen3.block_count" : "qwen2.block_count", &u));
            const lcx_gguf_tensor *g = lcx_gguf_find_tensor(q, "blk.0.attn_q.weight");
            const lcx_st_tensor *h = lcx_st_set_find(hs, "model.layers.0.self_attn.q_proj.weight");
            CHECK(g && h && g->nbytes == h->end - h->begin && memcmp(g->data, h->data, g->nbytes) == 0);
            if (k) CHECK(lcx_gguf_find_tensor(q, "blk.0.attn_q_norm.weight") != NULL);
            else CHECK(lcx_gguf_find_tensor(q, "blk.0.attn_k.bias") != NULL);
        }
        lcx_gguf_close(q);
        lcx_st_set_close(hs);
    }
    /* the exported GGUF itself: metadata and the q/k permutation of docs/formats.md */
    lcx_gguf_file *f = NULL;
    lcx_st_set *s = NULL;
    CHECK_OK(lcx_gguf_open(wpath("llama_tied.gguf"), &f));
    CHECK_OK(lcx_st_set_open(MODELS "llama_tied", &s));
    if (f && s) {
        const char *arch;
        size_t len;
        uint32_t u;
        CHECK_OK(lcx_gguf_get_str(f, "general.architecture", &arch, &len));
        CHECK(len == 5 && memcmp(arch, "llama", 5) == 0);
        CHECK_OK(lcx_gguf_get_u32(f, "llama.attention.head_count", &u));
        CHECK(u == 4);
        CHECK(lcx_gguf_find_tensor(f, "output.weight") == NULL); /* tied */
        static const char *const qk[][2] = {{"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
                                            {"model.layers.0.self_attn.k_proj.bias", "blk.0.attn_k.bias"}};
        for (int k = 0; k < 2; k++) {
            const lcx_st_tensor *h = lcx_st_set_find(s, qk[k][0]);
            const lcx_gguf_tensor *g = lcx_gguf_find_tensor(f, qk[k][1]);
            CHECK(h && g);
            if (!h || !g) continue;
            size_t rows = h->shape.dims[0], cols = h->shape.ndim == 2 ? h->shape.dims[1] : 1, nh = 4, d = rows / nh, bad = 0;
            for (size_t hh = 0; hh < nh; hh++)
                for (size_t j = 0; j < d / 2; j++)
                    for (size_t sgn = 0; sgn < 2; sgn++) /* GGUF row h*d + 2j + s = HF row h*d + s*d/2 + j */
                        bad += memcmp(g->data + (hh * d + 2 * j + sgn) * cols * 4, h->data + (hh * d + sgn * d / 2 + j) * cols * 4,
                                      cols * 4) != 0;
            CHECK_MSG(bad == 0, "%s: %zu rows not permuted as llama.cpp expects", qk[k][1], bad);
        }
    }
    lcx_gguf_close(f);
    lcx_st_set_close(s);
    /* rope metadata: linear, yarn, llama3 (rope_freqs.weight with the divisors of docs/formats.md "Rope metadata") */
    CHECK_OK(lcx_gguf_open(wpath("llama_rope_legacy.gguf"), &f));
    if (f) {
        const char *t;
        size_t len;
        float fac;
        CHECK_OK(lcx_gguf_get_str(f, "llama.rope.scaling.type", &t, &len));
        CHECK(len == 6 && !memcmp(t, "linear", 6));
        CHECK_OK(lcx_gguf_get_f32(f, "llama.rope.scaling.factor", &fac));
        CHECK(fac == 4.0f);
    }
    lcx_gguf_close(f);
    CHECK_OK(lcx_gguf_open(wpath("llama_rope_v5.gguf"), &f));
    if (f) {
        uint32_t L;
        CHECK_OK(lcx_gguf_get_u32(f, "llama.rope.scaling.original_context_length", &L));
        CHECK(L == 64);
    }
    lcx_gguf_close(f);
    CHECK_OK(lcx_gguf_open(wpath("llama_rope_llama3.gguf"), &f));
    if (f) {
        const lcx_gguf_tensor *t = lcx_gguf_find_tensor(f, "rope_freqs.weight");
        CHECK(t && t->numel == 4 && lcx_gguf_find_kv(f, "llama.rope.scaling.type") == NULL);
        if (t && t->numel == 4) {
            /* llama_rope_llama3: theta 1e4, d 8, factor 4, low 1, high 4, L 64 -> wavelengths 2*pi*1e4^(k/4):
             * 6.28 (< L/high = 16: kept), 62.8 (between: smooth = (64/62.83 - 1)/3), 628 and 6283 (> 64: s) */
            float v[4];
            memcpy(v, t->data, sizeof v);
            double sm = (64.0 / (2 * M_PI * 10.0) - 1.0) / 3.0;
            CHECK(v[0] == 1.0f && v[2] == 4.0f && v[3] == 4.0f);
            CHECK_REL(v[1], 1.0 / ((1 - sm) / 4.0 + sm), 1e-6);
        }
    }
    lcx_gguf_close(f);
}

/* ---- reshard chains with optimizer state ---------------------------------------------------------------------- */
/* nh=4, ng=2 (replicated at TP4), V=13, H=8, F=12, d=4, 1 layer. Values encode (tensor, role, element). */
static json_t *small_config(void) {
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:b, s:s, s:s}", "architectures",
                     "LlamaForCausalLM", "model_type", "llama", "vocab_size", 13, "hidden_size", 8, "intermediate_size",
                     12, "num_hidden_layers", 1, "num_attention_heads", 4, "num_key_value_heads", 2, "head_dim", 4,
                     "max_position_embeddings", 64, "rms_norm_eps", 1e-5, "tie_word_embeddings", 0, "torch_dtype",
                     "bfloat16", "custom_field", "kept");
}
static const char *const ROLES[] = {"param", "adam_m", "adam_v"};

static float truth_value(size_t ti, int role, uint64_t k) { return (float)(ti * 1000003 + (size_t)role * 7919 + k) * 0.001f; }

/* Write a TP2 x CP2 checkpoint by hand: params once per TP box, adam_m/adam_v (F32) split ZeRO-style along dim 0
 * of the TP box across the CP ranks. */
static void write_small_tp2cp2(const char *name, const lcx_param_table *tab, const json_t *cfg) {
    char *tmp = NULL;
    CHECK_OK(lcx_ckpt_tmpdir_create(workdir, name, &tmp));
    if (!tmp) return;
    lcx_tp_dims dims = {.nh = 4, .ng = 2, .d = 4, .H = 8, .F = 12, .V = 13};
    json_t *rank_json[4] = {0};
    for (int rank = 0; rank < 4; rank++) {
        int t = rank % 2, c = rank / 2;
        lcx_ckpt_writer *w = NULL;
        CHECK_OK(lcx_ckpt_writer_open(tmp, rank, NULL, &w));
        for (size_t ti = 0; w && ti < tab->n; ti++) {
            const lcx_param_spec *p = &tab->params[ti];
            lcx_tp_slice s;
            CHECK_OK(lcx_tp_slice_of(lcx_weight_kind_of_name(p->name), &dims, 2, t, &s));
            if (s.replica_index != 0) continue;
            for (int ri = 0; ri < 3; ri++) {
                lcx_box box = s.box;
                if (ri == 0 && c != 0) continue;
                if (ri > 0) {
                    uint64_t R = box.shape[0];
                    box.start[0] += R * (uint64_t)c / 2;
                    box.shape[0] = R * (uint64_t)(c + 1) / 2 - R * (uint64_t)c / 2;
                }
                uint64_t vol;
                CHECK_OK(lcx_box_volume(&box, &vol));
                lcx_dtype dt = ri ? LCX_F32 : LCX_BF16;
                uint8_t *buf = malloc(vol * 4 + 4);
                /* fill from the global index of each element */
                uint64_t idx[4] = {0};
                for (uint64_t k = 0; k < vol; k++) {
                    uint64_t rem = k, g = 0;
                    for (int d = box.ndim - 1; d >= 0; d--) idx[d] = box.start[d] + rem % box.shape[d], rem /= box.shape[d];
                    for (int d = 0; d < box.ndim; d++) g = g * p->shape.dims[d] + idx[d];
                    float v = truth_value(ti, ri, g);
                    if (ri) memcpy(buf + 4 * k, &v, 4);
                    else {
                        uint16_t h = lcx_f32_to_bf16(v);
                        memcpy(buf + 2 * k, &h, 2);
                    }
                }
                CHECK_OK(lcx_ckpt_writer_put(w, p->name, ROLES[ri], dt, s.ndim, s.global.shape, &box, buf));
                free(buf);
            }
        }
        CHECK_OK(lcx_ckpt_writer_close(w, &rank_json[rank]));
        lcx_ckpt_writer_free(w);
    }
    json_t *state = json_pack("{s:i, s:i, s:s}", "step", 1234, "stage", 1, "rng", "abc");
    lcx_ckpt_meta meta = {.model_config = cfg, .training_state = state, .tp = 2, .cp = 2, .dp = 1};
    CHECK_OK(lcx_ckpt_finalize(tmp, &meta, rank_json, 4));
    CHECK_OK(lcx_ckpt_publish(tmp, workdir, name));
    json_decref(state);
    for (int r = 0; r < 4; r++) json_decref(rank_json[r]);
    free(tmp);
}

/* Every (name, role) whole equals the truth; returns pieces of the embedding param. */
static int check_small(const char *name, const lcx_param_table *tab, int tp, int cp) {
    lcx_ckpt *ck = NULL;
    CHECK_OK(lcx_ckpt_open(wpath("%s", name), &ck));
    if (!ck) return -1;
    int t, c, d;
    const char *kv;
    lcx_ckpt_layout(ck, &t, &c, &d, &kv);
    CHECK_MSG(t == tp && c == cp && !strcmp(kv, tp > 2 ? "replicated" : "split"), "%s: layout %d x %d %s", name, t, c, kv);
    CHECK(lcx_ckpt_tensor_count(ck) == (int)(3 * tab->n));
    CHECK(json_integer_value(json_object_get(lcx_ckpt_training_state(ck), "step")) == 1234);
    CHECK(!strcmp(json_string_value(json_object_get(lcx_ckpt_model_config(ck), "custom_field")), "kept"));
    size_t bad = 0;
    for (size_t ti = 0; ti < tab->n; ti++) {
        const lcx_param_spec *p = &tab->params[ti];
        for (int ri = 0; ri < 3; ri++) {
            const lcx_ckpt_tensor *ct = lcx_ckpt_find(ck, p->name, ROLES[ri]);
            if (!ct) {
                bad++;
                continue;
            }
            lcx_box full = lcx_box_full(ct->ndim, ct->shape);
            uint8_t *buf = malloc(p->numel * 4 + 4);
            CHECK_OK(lcx_ckpt_read_box(ck, p->name, ROLES[ri], &full, buf));
            for (uint64_t k = 0; k < p->numel; k++) {
                float v = truth_value(ti, ri, k);
                if (ri) bad += memcmp(buf + 4 * k, &v, 4) != 0;
                else {
                    uint16_t h = lcx_f32_to_bf16(v);
                    bad += memcmp(buf + 2 * k, &h, 2) != 0;
                }
            }
            free(buf);
        }
    }
    CHECK_MSG(bad == 0, "%s: %zu values differ", name, bad);
    CHECK_OK(lcx_ckpt_verify(ck));
    const lcx_ckpt_tensor *e = lcx_ckpt_find(ck, "model.embed_tokens.weight", "param");
    int n = e ? e->n_pieces : -1;
    /* split q_proj: one piece per TP rank; k_proj with 2 kv heads: min(tp, 2) pieces; norms: 1 */
    const lcx_ckpt_tensor *q = lcx_ckpt_find(ck, "model.layers.0.self_attn.q_proj.weight", "adam_m");
    const lcx_ckpt_tensor *k = lcx_ckpt_find(ck, "model.layers.0.self_attn.k_proj.weight", "param");
    const lcx_ckpt_tensor *nrm = lcx_ckpt_find(ck, "model.norm.weight", "adam_v");
    if (strcmp(name, "s_tp2cp2") != 0) /* the hand-written one splits optimizer state over CP as well */
        CHECK_MSG(q && k && nrm && q->n_pieces == tp && k->n_pieces == (tp < 2 ? tp : 2) && nrm->n_pieces == 1,
              "%s: pieces q %d k %d norm %d", name, q ? q->n_pieces : -1, k ? k->n_pieces : -1, nrm ? nrm->n_pieces : -1);
    lcx_ckpt_free(ck);
    return n;
}

static void test_reshard(void) {
    json_t *cfg = small_config();
    lcx_model_config mc;
    lcx_param_table tab = {0};
    char *txt = json_dumps(cfg, 0);
    CHECK_OK(lcx_config_parse("small", txt, strlen(txt), &mc));
    free(txt);
    CHECK_OK(lcx_param_table_init(&tab, &mc));
    write_small_tp2cp2("s_tp2cp2", &tab, cfg);
    check_small("s_tp2cp2", &tab, 2, 2);
    /* TP2xCP2 -> TP4xCP1 -> TP2xCP2 */
    lcx_convert_opts o = opts(4, 1);
    CHECK_OK(lcx_reshard(wpath("s_tp2cp2"), wpath("s_tp4"), &o));
    CHECK(check_small("s_tp4", &tab, 4, 1) == 4); /* vocab 13 over 4 ranks: rows 4+4+4+1 */
    o = opts(2, 2);
    o.write.codec = LCX_CODEC_RAW;
    o.write.filter = LCX_FILTER_NONE;
    CHECK_OK(lcx_reshard(wpath("s_tp4"), wpath("s_tp2cp2b"), &o));
    check_small("s_tp2cp2b", &tab, 2, 2);
    /* TP1 -> TP2 -> TP4 -> TP1 */
    static const int chain[] = {1, 2, 4, 1};
    const char *prev = "s_tp2cp2b";
    char names[4][32];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "s_chain%d_tp%d", i, chain[i]);
        o = opts(chain[i], 1);
        o.threads = 1 + i % 3;
        CHECK_OK(lcx_reshard(wpath("%s", prev), wpath("%s", names[i]), &o));
        check_small(names[i], &tab, chain[i], 1);
        prev = names[i];
    }
    /* a tiny memory bound: one thread, row chunks -> more pieces, same values */
    o = opts(2, 1);
    o.max_memory = 64;
    CHECK_OK(lcx_reshard(wpath("s_tp4"), wpath("s_chunked"), &o));
    lcx_ckpt *ck = NULL;
    CHECK_OK(lcx_ckpt_open(wpath("s_chunked"), &ck));
    if (ck) {
        const lcx_ckpt_tensor *e = lcx_ckpt_find(ck, "model.embed_tokens.weight", "param");
        /* bound 64 -> 32-byte chunks = 2 rows of 8 bf16; TP2 over Vp = 14: 7 + 6 stored rows -> 4 + 3 pieces */
        CHECK_MSG(e && e->n_pieces == 7, "chunked embedding in %d pieces", e ? e->n_pieces : -1);
        lcx_ckpt_free(ck);
    }
    /* impossible layouts: heads 4 over 3 ranks; kv heads 2 over 8 ranks is fine but 4 heads over 8 is not */
    o = opts(3, 1);
    CHECK_FAILS(lcx_reshard(wpath("s_tp4"), wpath("s_tp3"), &o), LCX_ERR_INVALID, "3");
    CHECK(!lcx_is_dir(wpath("s_tp3")));
    o = opts(8, 1);
    CHECK_FAILS(lcx_reshard(wpath("s_tp4"), wpath("s_tp8"), &o), LCX_ERR_INVALID, "8");
    o = opts(2, 1);
    CHECK_FAILS(lcx_reshard(wpath("s_tp4"), wpath("s_tp2cp2"), &o), LCX_ERR_INVALID, "already exists");
    CHECK(leftovers() == 0);
    lcx_param_table_free(&tab);
    lcx_config_free(&mc);
    json_decref(cfg);
}

/* ---- errors ---------------------------------------------------------------------------------------------------- */
static void test_errors(void) {
    lcx_convert_opts o = opts(3, 1);
    CHECK_FAILS(lcx_import(MODELS "llama_gqa", wpath("bad_tp3.lcx"), &o), LCX_ERR_INVALID, "3");
    CHECK(!lcx_is_dir(wpath("bad_tp3.lcx")));
    o = opts(1, 1);
    CHECK_FAILS(lcx_import(wpath("no_such_model"), wpath("x.lcx"), &o), LCX_ERR_NOT_FOUND, "no_such_model");
    CHECK_FAILS(lcx_import(MODELS "llama_gqa", wpath("llama_gqa-tp1cp1.lcx"), &o), LCX_ERR_INVALID, "already exists");
    CHECK_FAILS(lcx_export_hf(wpath("llama_gqa-tp1cp1.lcx"), wpath("llama_gqa-tp1cp1.hf"), &o), LCX_ERR_INVALID,
                "already exists");
    o.dtype = LCX_Q8_0;
    CHECK_FAILS(lcx_export_hf(wpath("llama_gqa-tp1cp1.lcx"), wpath("q8.hf"), &o), LCX_ERR_INVALID, "--dtype");
    CHECK(!lcx_is_dir(wpath("q8.hf")));
    /* GGUF q8_0 export: matrices quantised with ggml's reference quantiser, 1-D tensors F32 */
    CHECK_OK(lcx_export_gguf(wpath("llama_gqa-tp1cp1.lcx"), wpath("gqa_q8.gguf"), &o));
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(wpath("gqa_q8.gguf"), &f));
    if (f) {
        const lcx_gguf_tensor *w = lcx_gguf_find_tensor(f, "blk.1.ffn_down.weight"), *n = lcx_gguf_find_tensor(f, "output_norm.weight");
        CHECK(w && w->ggml_type == LCX_GGML_Q8_0 && n && n->ggml_type == LCX_GGML_F32);
    }
    lcx_gguf_close(f);
    /* a corrupt data file: every output fails on the checksum and leaves nothing behind */
    o = opts(1, 1);
    o.threads = 1;
    o.write.codec = LCX_CODEC_RAW;
    o.write.filter = LCX_FILTER_NONE;
    CHECK_OK(lcx_import(MODELS "llama_gqa", wpath("corrupt.lcx"), &o));
    FILE *fp = fopen(wpath("corrupt.lcx/data-0.bin"), "r+b");
    CHECK(fp != NULL);
    if (fp) {
        fseek(fp, 50000, SEEK_SET);
        int c = fgetc(fp);
        fseek(fp, 50000, SEEK_SET);
        fputc(c ^ 0x40, fp);
        fclose(fp);
    }
    CHECK_FAILS(lcx_export_gguf(wpath("corrupt.lcx"), wpath("corrupt.gguf"), &o), LCX_ERR_FORMAT, "checksum");
    CHECK(!lcx_is_file(wpath("corrupt.gguf")));
    CHECK_FAILS(lcx_export_hf(wpath("corrupt.lcx"), wpath("corrupt.hf"), &o), LCX_ERR_FORMAT, "checksum");
    CHECK(!lcx_is_dir(wpath("corrupt.hf")));
    CHECK_FAILS(lcx_reshard(wpath("corrupt.lcx"), wpath("corrupt2.lcx"), &o), LCX_ERR_FORMAT, "checksum");
    CHECK(!lcx_is_dir(wpath("corrupt2.lcx")));
    uint64_t v;
    CHECK_OK(lcx_parse_size("5GB", &v));
    CHECK(v == 5000000000ull);
    CHECK_OK(lcx_parse_size("2MiB", &v));
    CHECK(v == 2097152);
    CHECK_OK(lcx_parse_size("4096", &v));
    CHECK(v == 4096);
    CHECK_FAILS(lcx_parse_size("5XB", &v), LCX_ERR_INVALID, "unit");
    CHECK_FAILS(lcx_parse_size("-1", &v), LCX_ERR_INVALID, "size");
    CHECK(leftovers() == 0);
}

int main(void) {
    if (test_tmpdir_make(workdir, sizeof workdir, ".", "test_convert") != 0) return 1;
    test_hf_roundtrips();
    test_export_dtypes();
    test_gguf_import();
    test_gguf_roundtrips();
    test_reshard();
    test_errors();
    test_tmpdir_done(workdir);
    return test_summary("test_convert");
}
