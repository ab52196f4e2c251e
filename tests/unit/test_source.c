/* source: the one checkpoint loader (src/checkpoint/source.h). Form detection on every form, one-line errors for
 * what is none of them or broken (no config.json, a config.json given, a truncated GGUF, an .lcx missing a
 * shard, a GGUF whose tensors do not match its metadata); config-only opening; and the same parameters read
 * from one fixture model as an HF directory, a .safetensors file, a TP-2 .lcx and an F32 GGUF exported from it
 * (bit-identical), plus a Q4_0/Q4_1 GGUF against the dequantised values gguf-py computed. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "src/checkpoint/gguf_map.h"
#include "src/checkpoint/source.h"
#include "src/convert/convert.h"
#include "src/core/fileio.h"
#include "test_util.h"
#include "test_tmpdir.h"

static char workdir[64];
static char path_buf[8][512];
static int path_next;

/* workdir/name (a few live at once). */
static const char *wpath(const char *name) {
    char *p = path_buf[path_next++ % 8];
    snprintf(p, sizeof path_buf[0], "%s/%s", workdir, name);
    return p;
}

static const char *fixture(const char *rel) {
    char *p = path_buf[path_next++ % 8];
    snprintf(p, sizeof path_buf[0], "%s/tests/fixtures/%s", LCX_SOURCE_DIR, rel);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    CHECK_OK(lcx_write_file_atomic(path, data, n));
}

/* ---- detection and its errors -------------------------------------------------------------------------------- */

static void test_detect(void) {
    lcx_source_form f;
    CHECK_OK(lcx_source_detect(fixture("models/llama_gqa"), &f));
    CHECK(f == LCX_SOURCE_HF_DIR);
    CHECK_OK(lcx_source_detect(fixture("models/llama_gqa/model.safetensors"), &f));
    CHECK(f == LCX_SOURCE_SAFETENSORS);
    CHECK_OK(lcx_source_detect(fixture("models/llama_sharded/model.safetensors.index.json"), &f));
    CHECK(f == LCX_SOURCE_ST_INDEX);
    CHECK_OK(lcx_source_detect(fixture("gguf/llama_tiny.gguf"), &f));
    CHECK(f == LCX_SOURCE_GGUF);

    /* content wins over the name: a GGUF called model.bin is a GGUF */
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(lcx_read_file(fixture("gguf/llama_tiny.gguf"), (size_t)1 << 26, &buf, &len));
    write_bytes(wpath("model.bin"), buf, len);
    CHECK_OK(lcx_source_detect(wpath("model.bin"), &f));
    CHECK(f == LCX_SOURCE_GGUF);
    /* a truncated GGUF is detected as one and fails in its reader, naming the file */
    write_bytes(wpath("cut.gguf"), buf, len > 100 ? 100 : len);
    lcx_source *s = NULL;
    CHECK_FAILS(lcx_source_open(wpath("cut.gguf"), 0, &s), LCX_ERR_FORMAT, "cut.gguf");
    CHECK(!s);
    CHECK_FAILS(lcx_source_open(wpath("cut.gguf"), LCX_SOURCE_CONFIG_ONLY, &s), LCX_ERR_FORMAT, "cut.gguf");
    free(buf);

    CHECK_FAILS(lcx_source_detect(wpath("nothing-here"), &f), LCX_ERR_NOT_FOUND, "nothing-here: no such file");
    mkdir(wpath("empty"), 0755);
    CHECK_FAILS(lcx_source_detect(wpath("empty"), &f), LCX_ERR_NOT_FOUND, "empty: not a Hugging Face model directory: "
                                                                          "config.json is missing");
    CHECK_FAILS(lcx_source_open(wpath("empty"), 0, &s), LCX_ERR_NOT_FOUND, "manifest.json");
    write_bytes(wpath("notes.txt"), "hello", 5);
    CHECK_FAILS(lcx_source_detect(wpath("notes.txt"), &f), LCX_ERR_INVALID, "notes.txt: not a checkpoint (expected");
    CHECK_FAILS(lcx_source_detect(fixture("models/llama_gqa/config.json"), &f), LCX_ERR_INVALID, "not its config.json");
    /* a .safetensors that is not one: the safetensors reader names it */
    write_bytes(wpath("junk.safetensors"), "12345678junk", 12);
    CHECK_FAILS(lcx_source_open(wpath("junk.safetensors"), 0, &s), LCX_ERR_FORMAT, "junk.safetensors");
}

/* ---- the same model in four forms reads the same -------------------------------------------------------------- */

static int same_params(lcx_source *a, lcx_source *b) {
    if (!a->matched || !b->matched || a->params.n != b->params.n) return 0;
    int same = 1;
    for (size_t i = 0; i < a->params.n && same; i++) {
        size_t n = (size_t)a->params.params[i].numel;
        float *x = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
        CHECK_OK(lcx_source_read_f32(a, i, x));
        CHECK_OK(lcx_source_read_f32(b, i, y));
        same = strcmp(a->params.params[i].name, b->params.params[i].name) == 0 && memcmp(x, y, n * 4) == 0;
        if (!same) fprintf(stderr, "parameter %s differs\n", a->params.params[i].name);
        free(x);
        free(y);
    }
    return same;
}

static void test_forms_agree(void) {
    char hf[512], lcx[512], gguf[512]; /* own copies: wpath/fixture buffers rotate */
    snprintf(hf, sizeof hf, "%s", fixture("models/llama_gqa"));
    snprintf(lcx, sizeof lcx, "%s", wpath("gqa.lcx"));
    snprintf(gguf, sizeof gguf, "%s", wpath("gqa.gguf"));
    lcx_convert_opts o;
    lcx_convert_opts_default(&o);
    o.threads = 2; /* two data files */
    o.tp = 2;      /* the .lcx reader must gather q/k/v/o and MLP pieces */
    CHECK_OK(lcx_import(hf, lcx, &o));
    o.dtype = LCX_F32;
    CHECK_OK(lcx_export_gguf(lcx, gguf, &o));

    lcx_source *s_hf = NULL, *s_st = NULL, *s_lcx = NULL, *s_gg = NULL;
    CHECK_OK(lcx_source_open(hf, 0, &s_hf));
    CHECK_OK(lcx_source_open(fixture("models/llama_gqa/model.safetensors"), 0, &s_st));
    CHECK_OK(lcx_source_open(lcx, 0, &s_lcx));
    CHECK_OK(lcx_source_open(gguf, 0, &s_gg));
    if (!s_hf || !s_st || !s_lcx || !s_gg) goto done;
    CHECK(s_hf->form == LCX_SOURCE_HF_DIR && s_st->form == LCX_SOURCE_SAFETENSORS && s_lcx->form == LCX_SOURCE_LCX &&
          s_gg->form == LCX_SOURCE_GGUF);
    CHECK(s_hf->catalog && s_lcx->ckpt && s_gg->gguf);
    CHECK(strstr(s_lcx->config_path, "manifest.json") != NULL);
    CHECK(strcmp(s_gg->config_path, gguf) == 0 && strcmp(s_gg->tokenizer_path, gguf) == 0);
    /* the configs agree where the GGUF metadata can state them */
    lcx_source *all[] = {s_st, s_lcx, s_gg};
    for (int k = 0; k < 3; k++) {
        const lcx_model_config *a = &s_hf->cfg, *b = &all[k]->cfg;
        CHECK(a->arch == b->arch && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
              a->intermediate_size == b->intermediate_size && a->num_hidden_layers == b->num_hidden_layers &&
              a->num_attention_heads == b->num_attention_heads && a->num_key_value_heads == b->num_key_value_heads &&
              a->head_dim == b->head_dim && a->max_position_embeddings == b->max_position_embeddings &&
              a->tie_word_embeddings == b->tie_word_embeddings && a->rope.theta == b->rope.theta &&
              (float)a->rms_norm_eps == (float)b->rms_norm_eps);
        CHECK(all[k]->params.total_numel == s_hf->params.total_numel);
    }
    CHECK(s_gg->tensor_of[1].qk_heads == 0); /* input_layernorm */
    CHECK_MSG(same_params(s_hf, s_st), "HF directory vs .safetensors file");
    CHECK_MSG(same_params(s_hf, s_lcx), "HF directory vs TP-2 .lcx");
    CHECK_MSG(same_params(s_hf, s_gg), "HF directory vs F32 GGUF (q/k un-permuted)");
    /* native-dtype reads and conversion */
    size_t q = 2; /* model.layers.0.self_attn.q_proj.weight */
    CHECK(strcmp(s_gg->params.params[q].name, "model.layers.0.self_attn.q_proj.weight") == 0);
    CHECK(s_gg->tensor_of[q].qk_heads == 4);
    size_t n = (size_t)s_gg->params.params[q].numel;
    uint16_t *h1 = malloc(n * 2), *h2 = malloc(n * 2);
    CHECK_OK(lcx_source_read(s_gg, q, LCX_BF16, h1));
    CHECK_OK(lcx_source_read(s_lcx, q, LCX_BF16, h2));
    CHECK(memcmp(h1, h2, n * 2) == 0);
    CHECK_FAILS(lcx_source_read(s_gg, q, LCX_I32, h1), LCX_ERR_INVALID, "cannot read as");
    CHECK_FAILS(lcx_source_read(s_gg, 9999, LCX_F32, h1), LCX_ERR_INVALID, "no parameter");
    free(h1);
    free(h2);
    json_t *j = lcx_source_gguf_summary_json(s_gg);
    CHECK(j && json_integer_value(json_object_get(j, "num_parameters")) == (json_int_t)s_hf->params.total_numel);
    CHECK(j && json_integer_value(json_object_get(j, "vocab_size")) == 256);
    json_decref(j);
    CHECK(lcx_source_gguf_summary_json(s_hf) == NULL);
    CHECK_OK(lcx_source_need_model(s_gg, "score"));
done:
    lcx_source_close(s_hf);
    lcx_source_close(s_st);
    lcx_source_close(s_lcx);
    lcx_source_close(s_gg);

    /* an .lcx missing one of its TP shards fails at open, naming the file */
    char p[600];
    snprintf(p, sizeof p, "%s/data-1.bin", lcx);
    CHECK(unlink(p) == 0);
    lcx_source *s = NULL;
    CHECK_FAILS(lcx_source_open(lcx, 0, &s), LCX_ERR_NOT_FOUND, "data-1.bin");
    CHECK(!s);
}

/* ---- config only ----------------------------------------------------------------------------------------------- */

static void test_config_only(void) {
    lcx_source *s = NULL;
    CHECK_OK(lcx_source_open(fixture("models/llama_sharded/model.safetensors.index.json"), LCX_SOURCE_CONFIG_ONLY, &s));
    if (s) {
        CHECK(s->form == LCX_SOURCE_ST_INDEX && s->has_config && !s->matched && !s->catalog);
        CHECK(strstr(s->config_path, "llama_sharded/config.json") != NULL);
        CHECK(s->n_side_files >= 1); /* generation_config.json */
        CHECK_FAILS(lcx_source_need_model(s, "score"), LCX_ERR_INVALID, "score needs the tensors");
        float x;
        CHECK_FAILS(lcx_source_read_f32(s, 0, &x), LCX_ERR_INVALID, "no parameter");
    }
    lcx_source_close(s);
    /* a config file stands for its directory with LCX_SOURCE_CONFIG_FILE (plan, rope --show) */
    const char *cj = fixture("models/llama_gqa/config.json");
    s = NULL;
    CHECK_OK(lcx_source_open(cj, LCX_SOURCE_CONFIG_FILE, &s));
    CHECK(s && s->form == LCX_SOURCE_HF_DIR && s->has_config && !s->matched && strcmp(s->config_path, cj) == 0);
    lcx_source_close(s);
    s = NULL;
    CHECK_FAILS(lcx_source_open(cj, LCX_SOURCE_CONFIG_ONLY, &s), LCX_ERR_INVALID, "not its config.json");
    /* ... while checkpoints stay what they are */
    CHECK_OK(lcx_source_open(fixture("gguf/llama_tiny.gguf"), LCX_SOURCE_CONFIG_FILE, &s));
    CHECK(s && s->form == LCX_SOURCE_GGUF && s->has_config && !s->matched);
    lcx_source_close(s);
    /* an HF directory whose tensors are gone still gives its config */
    mkdir(wpath("cfg-only"), 0755);
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(lcx_read_file(fixture("models/llama_gqa/config.json"), 1 << 20, &buf, &len));
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", wpath("cfg-only"));
    write_bytes(p, buf, len);
    free(buf);
    s = NULL;
    CHECK_OK(lcx_source_open(wpath("cfg-only"), LCX_SOURCE_CONFIG_ONLY, &s));
    CHECK(s && s->cfg.vocab_size == 256);
    lcx_source_close(s);
    s = NULL;
    CHECK_FAILS(lcx_source_open(wpath("cfg-only"), 0, &s), LCX_ERR_NOT_FOUND, "cfg-only");
    /* a .safetensors with no config.json beside it: tensors only */
    CHECK_OK(lcx_read_file(fixture("models/llama_gqa/model.safetensors"), 1 << 24, &buf, &len));
    write_bytes(wpath("alone.safetensors"), buf, len);
    free(buf);
    s = NULL;
    CHECK_OK(lcx_source_open(wpath("alone.safetensors"), 0, &s));
    CHECK(s && !s->has_config && !s->matched && !s->config_path && s->catalog);
    if (s) CHECK_FAILS(lcx_source_need_model(s, "eval"), LCX_ERR_INVALID, "no config.json beside the tensors");
    lcx_source_close(s);
}

/* ---- quantised GGUF: dequantised values as gguf-py computed them ------------------------------------------------ */

static void test_quantised(void) {
    lcx_source *s = NULL;
    CHECK_OK(lcx_source_open(fixture("gguf/llama_q4.gguf"), 0, &s));
    json_error_t je;
    json_t *exp = json_load_file(fixture("gguf/llama_q4.json"), 0, &je);
    char *ref = NULL;
    size_t ref_len = 0;
    CHECK_OK(lcx_read_file(fixture("gguf/llama_q4.f32"), (size_t)1 << 26, &ref, &ref_len));
    CHECK(s && exp && ref);
    if (!s || !exp || !ref) goto done;
    int n_quant = 0, n_checked = 0;
    size_t k;
    json_t *e;
    json_array_foreach(json_object_get(exp, "tensors"), k, e) {
        const char *gname = json_string_value(json_object_get(e, "name"));
        char hf[LCX_PARAM_NAME_MAX];
        if (!lcx_gguf_to_hf_name(gname, hf, sizeof hf)) continue;
        const lcx_param_spec *p = lcx_param_table_find(&s->params, hf);
        CHECK_MSG(p != NULL, "%s", hf);
        if (!p) continue;
        size_t i = (size_t)(p - s->params.params), n = (size_t)p->numel;
        const lcx_source_tensor *t = &s->tensor_of[i];
        n_quant += t->stored == LCX_Q4_0 || t->stored == LCX_Q4_1;
        CHECK(t->dtype == (lcx_dtype_is_compute(t->stored) ? t->stored : LCX_F32));
        float *got = malloc(n * 4 + 4), *back = malloc(n * 4 + 4);
        CHECK_OK(lcx_source_read_f32(s, i, got));
        const float *want = (const float *)ref + json_integer_value(json_object_get(e, "f32_at"));
        if (t->qk_heads) { /* the reference is in the file's (permuted) row order */
            CHECK_OK(lcx_gguf_permute_qk(back, got, (size_t)p->shape.dims[0], n / (size_t)p->shape.dims[0], 4,
                                         (size_t)t->qk_heads));
            memcpy(got, back, n * 4);
        }
        CHECK_MSG(memcmp(got, want, n * 4) == 0, "%s", gname);
        n_checked++;
        free(got);
        free(back);
    }
    CHECK(n_quant >= 2);
    CHECK(n_checked == (int)s->params.n);
done:
    json_decref(exp);
    free(ref);
    lcx_source_close(s);

    /* a GGUF whose tensors do not match its metadata: every problem in one line */
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(fixture("gguf/llama_tiny.gguf"), &f));
    if (!f) return;
    lcx_gguf_writer *w = NULL;
    CHECK_OK(lcx_gguf_writer_init(&w, 0));
    for (size_t i = 0; i < f->n_kv; i++) {
        const lcx_gguf_kv *kv = &f->kv[i];
        if (kv->type == LCX_GGUF_U32) {
            uint32_t v;
            memcpy(&v, kv->data, 4);
            CHECK_OK(lcx_gguf_writer_add_u32(w, kv->key, v));
        } else if (kv->type == LCX_GGUF_F32) {
            float v;
            memcpy(&v, kv->data, 4);
            CHECK_OK(lcx_gguf_writer_add_f32(w, kv->key, v));
        } else if (kv->type == LCX_GGUF_STRING && strncmp(kv->key, "general.", 8) == 0) {
            CHECK_OK(lcx_gguf_writer_add_strn(w, kv->key, (const char *)kv->data, kv->str_len));
        }
    }
    float *zeros = calloc(1 << 16, sizeof(float));
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lcx_gguf_tensor *t = &f->tensors[i];
        if (!strcmp(t->name, "blk.0.attn_q.weight")) continue; /* missing */
        lcx_shape sh = lcx_gguf_tensor_shape(t);
        CHECK_OK(lcx_gguf_writer_add_tensor(w, t->name, LCX_F32, &sh, LCX_F32, zeros));
    }
    lcx_shape one = lcx_shape_1d(4);
    CHECK_OK(lcx_gguf_writer_add_tensor(w, "blk.0.attn_extra.weight", LCX_F32, &one, LCX_F32, zeros));
    CHECK_OK(lcx_gguf_writer_write(w, wpath("bad.gguf")));
    s = NULL;
    CHECK_FAILS(lcx_source_open(wpath("bad.gguf"), 0, &s), LCX_ERR_FORMAT,
                "tensors do not match its metadata (llama, 1 layers): 1 missing: blk.0.attn_q.weight; 1 unexpected: "
                "blk.0.attn_extra.weight");
    /* ... and its config alone still opens */
    CHECK_OK(lcx_source_open(wpath("bad.gguf"), LCX_SOURCE_CONFIG_ONLY, &s));
    lcx_source_close(s);
    free(zeros);
    lcx_gguf_writer_free(w);
    lcx_gguf_close(f);
}

int main(void) {
    if (test_tmpdir_make(workdir, sizeof workdir, ".", "test_source") != 0) return 1;
    test_detect();
    test_forms_agree();
    test_config_only();
    test_quantised();
    test_tmpdir_done(workdir);
    return test_summary("test_source");
}
