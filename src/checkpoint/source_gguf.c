/* source: a GGUF file — config rebuilt from its metadata (src/checkpoint/gguf_map.h) without touching tensor
 * data, tensors matched by their Hugging Face names, the file itself as the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/gguf_map.h"
#include "src/checkpoint/problems.h"
#include "src/checkpoint/source_internal.h"

static lcx_status match(lcx_source *s, int permuted) {
    const lcx_param_table *pt = &s->params;
    const lcx_gguf_file *f = s->gguf;
    LCX_TRY(lcx_source_alloc_tensors(s));
    lcx_problems ps;
    memset(&ps, 0, sizeof ps);
    char s1[160], s2[160];
    for (size_t k = 0; k < f->n_tensors; k++) {
        const lcx_gguf_tensor *t = &f->tensors[k];
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue; /* rope config, read into cfg */
        char hf[LCX_PARAM_NAME_MAX];
        const lcx_param_spec *p = lcx_gguf_to_hf_name(t->name, hf, sizeof hf) ? lcx_param_table_find(pt, hf) : NULL;
        if (!p) {
            lcx_problems_add(&ps, LCX_PROBLEM_EXTRA, "%s", t->name);
            continue;
        }
        lcx_shape sh = lcx_gguf_tensor_shape(t);
        if (!lcx_shape_equal(&sh, &p->shape)) {
            lcx_problems_add(&ps, LCX_PROBLEM_SHAPE, "%s %s (expected %s)", t->name, lcx_shape_str(&sh, s1, sizeof s1),
                             lcx_shape_str(&p->shape, s2, sizeof s2));
            continue;
        }
        lcx_dtype dt = lcx_ggml_type_to_dtype(t->ggml_type);
        if (dt == LCX_DTYPE_INVALID) { /* Q4_K etc.: listed by the reader, not convertible */
            lcx_problems_add(&ps, LCX_PROBLEM_DTYPE, "%s %s", t->name, lcx_ggml_type_name(t->ggml_type));
            continue;
        }
        s->tensor_of[p - pt->params] = (lcx_source_tensor){
            .name = t->name,
            .stored = dt,
            .dtype = lcx_dtype_is_compute(dt) ? dt : LCX_F32, /* quantised: dequantised */
            .bytes = t->nbytes,
            .ref = t,
            .qk_heads = permuted ? lcx_gguf_qk_heads(p->name, s->cfg.num_attention_heads, s->cfg.num_key_value_heads)
                                 : 0};
    }
    for (size_t i = 0; i < pt->n; i++)
        if (!s->tensor_of[i].ref) {
            char g[LCX_GGUF_MAX_NAME + 1];
            lcx_problems_add(&ps, LCX_PROBLEM_MISSING, "%s",
                             lcx_hf_to_gguf_name(pt->params[i].name, g, sizeof g) ? g : pt->params[i].name);
        }
    if (lcx_problems_total(&ps)) {
        char list[1800];
        lcx_problems_format(&ps, list, sizeof list);
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensors do not match its metadata (%s, %lld layers): %s", s->path,
                        lcx_arch_name(s->cfg.arch), (long long)s->cfg.num_hidden_layers, list);
    }
    s->matched = 1;
    return LCX_OK;
}

lcx_status lcx_source_open_gguf(lcx_source *s, unsigned flags) {
    LCX_TRY(lcx_gguf_open(s->path, &s->gguf)); /* mapped, header checked; no tensor data read */
    s->tokenizer_path = strdup(s->path);
    s->config_path = strdup(s->path);
    LCX_FAIL_IF(!s->tokenizer_path || !s->config_path, LCX_ERR_OOM, "%s: out of memory", s->path);
    json_t *cj = NULL;
    int permuted = 0;
    LCX_TRY(lcx_gguf_config_json(s->gguf, &cj, &permuted));
    lcx_status st = lcx_source_config_from_json(s, cj, s->path);
    json_decref(cj);
    LCX_TRY(st);
    return flags & LCX_SOURCE_CONFIG_ONLY ? LCX_OK : match(s, permuted);
}

/* ---- summary ------------------------------------------------------------------------------------------------ */

static void put(json_t *o, const char *key, json_t *v, int *ok) {
    if (!v || json_object_set_new(o, key, v) != 0) *ok = 0;
}

json_t *lcx_source_gguf_summary_json(const lcx_source *s) {
    if (s->form != LCX_SOURCE_GGUF || !s->has_config) return NULL;
    const lcx_gguf_file *f = s->gguf;
    json_t *o = json_object(), *types = json_object();
    int ok = o && types;
    if (!ok) {
        json_decref(o);
        json_decref(types);
        return NULL;
    }
    put(o, "path", json_string(s->path), &ok);
    put(o, "format", json_string("gguf"), &ok);
    put(o, "gguf_version", json_integer(f->version), &ok);
    if (!lcx_config_summary_put(o, &s->cfg)) ok = 0;
    put(o, "num_parameters", json_integer((json_int_t)s->params.total_numel), &ok);
    put(o, "num_tensors", json_integer((json_int_t)f->n_tensors), &ok);
    uint64_t total = 0;
    for (size_t k = 0; k < f->n_tensors; k++) {
        const lcx_gguf_tensor *t = &f->tensors[k];
        total += t->nbytes;
        const char *tn = lcx_ggml_type_name(t->ggml_type);
        json_t *e = json_object_get(types, tn);
        if (!e) {
            e = json_pack("{s:I, s:I, s:I}", "tensors", (json_int_t)0, "elements", (json_int_t)0, "bytes", (json_int_t)0);
            put(types, tn, e, &ok);
            if (!e) break;
        }
        static const char *const keys[] = {"tensors", "elements", "bytes"};
        uint64_t add[] = {1, t->numel, t->nbytes};
        for (int i = 0; i < 3; i++)
            put(e, keys[i], json_integer(json_integer_value(json_object_get(e, keys[i])) + (json_int_t)add[i]), &ok);
    }
    put(o, "total_bytes", json_integer((json_int_t)total), &ok);
    put(o, "ggml_types", types, &ok);
    char *model = NULL;
    if (lcx_gguf_find_kv(f, "tokenizer.ggml.model") && lcx_gguf_get_str_dup(f, "tokenizer.ggml.model", &model) == LCX_OK)
        put(o, "tokenizer", json_string(model), &ok);
    else
        put(o, "tokenizer", json_null(), &ok);
    free(model);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
