/* catalog: checkpoint = config + tensors, matched against the parameter table (see catalog.h). */
#include "src/checkpoint/catalog.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/problems.h"
#include "src/core/fileio.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Directory part of a file path ("." when none); heap string. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = 0;
    return d;
}

/* ---- tied lm_head check ------------------------------------------------------------------------------------ */

/* 1 if two float-loadable tensors of equal shape hold the same values (bitwise when the dtypes match). */
static lcx_status tensors_equal(const lcx_st_tensor *a, const lcx_st_tensor *b, uint64_t numel, int *equal,
                                uint64_t *first_diff) {
    *equal = 1;
    *first_diff = 0;
    if (numel == 0) return LCX_OK;
    if (a->dtype == b->dtype) {
        uint64_t bytes = a->end - a->begin;
        if (memcmp(a->data, b->data, (size_t)bytes) == 0) return LCX_OK;
        *equal = 0;
        uint64_t per = lcx_dtype_bits(a->dtype) / 8;
        for (uint64_t i = 0; i < bytes; i++)
            if (a->data[i] != b->data[i]) { *first_diff = per ? i / per : 0; break; }
        return LCX_OK;
    }
    /* different storage types: compare as float32, a chunk at a time (chunk = multiple of every block size) */
    enum { CHUNK = 32 * 1024 };
    float *fa = malloc(CHUNK * sizeof(float)), *fb = malloc(CHUNK * sizeof(float));
    lcx_status st = LCX_OK;
    if (!fa || !fb) {
        st = lcx_fail(LCX_ERR_OOM, "out of memory comparing tensors");
        goto done;
    }
    size_t ea, ba, eb, bb;
    lcx_dtype_block(a->dtype, &ea, &ba);
    lcx_dtype_block(b->dtype, &eb, &bb);
    for (uint64_t off = 0; off < numel && *equal; off += CHUNK) {
        size_t n = (size_t)(numel - off < CHUNK ? numel - off : CHUNK);
        if (n % ea || n % eb || off % ea || off % eb) {
            st = lcx_fail(LCX_ERR_UNSUPPORTED, "cannot compare block-quantised tensors of %llu elements",
                          (unsigned long long)numel);
            goto done;
        }
        LCX_TRY_GOTO(lcx_convert_to_f32(a->dtype, a->data + off / ea * ba, fa, n), done);
        LCX_TRY_GOTO(lcx_convert_to_f32(b->dtype, b->data + off / eb * bb, fb, n), done);
        for (size_t i = 0; i < n; i++) {
            int same = fa[i] == fb[i] || (isnan(fa[i]) && isnan(fb[i]));
            if (!same) {
                *equal = 0;
                *first_diff = off + i;
                break;
            }
        }
    }
done:
    free(fa);
    free(fb);
    return st;
}

/* ---- open -------------------------------------------------------------------------------------------------- */

static void add_stats(lcx_catalog *c) {
    for (size_t i = 0; i < c->set->n_tensors; i++) {
        const lcx_st_tensor *t = c->set->tensors[i];
        uint64_t numel = 0;
        (void)lcx_shape_numel(&t->shape, &numel); /* validated by the reader */
        lcx_dtype_stat *s = &c->dtypes[(unsigned)t->dtype < LCX_DTYPE_COUNT ? t->dtype : 0];
        s->tensors++;
        s->elements += numel;
        s->bytes += t->end - t->begin;
        c->total_elements += numel;
        c->total_bytes += t->end - t->begin;
    }
    c->n_tensors = c->set->n_tensors;
}

static lcx_status match(lcx_catalog *c) {
    const lcx_param_table *pt = &c->params;
    const char *label = c->path;
    c->tensor_of = calloc(pt->n ? pt->n : 1, sizeof *c->tensor_of);
    LCX_FAIL_IF(!c->tensor_of, LCX_ERR_OOM, "%s: out of memory", label);
    lcx_problems ps;
    memset(&ps, 0, sizeof ps);
    char s1[160], s2[160];
    for (size_t i = 0; i < pt->n; i++) {
        const lcx_param_spec *p = &pt->params[i];
        const lcx_st_tensor *t = lcx_st_set_find(c->set, p->name);
        if (!t) {
            lcx_problems_add(&ps, LCX_PROBLEM_MISSING, "%s", p->name);
            continue;
        }
        if (!lcx_shape_equal(&t->shape, &p->shape)) {
            lcx_problems_add(&ps, LCX_PROBLEM_SHAPE, "%s %s (expected %s)", p->name, lcx_shape_str(&t->shape, s1, sizeof s1),
                        lcx_shape_str(&p->shape, s2, sizeof s2));
            continue;
        }
        if (!lcx_dtype_is_float_loadable(t->dtype)) {
            lcx_problems_add(&ps, LCX_PROBLEM_DTYPE, "%s %s", p->name, lcx_dtype_name(t->dtype));
            continue;
        }
        c->tensor_of[i] = t;
    }
    const lcx_st_tensor *tied_head = NULL;
    for (size_t i = 0; i < c->set->n_tensors; i++) {
        const lcx_st_tensor *t = c->set->tensors[i];
        if (lcx_param_table_find(pt, t->name)) continue;
        if (pt->tied && strcmp(t->name, "lm_head.weight") == 0) {
            tied_head = t;
            continue;
        }
        if (strncmp(t->name, "model.layers.", 13) == 0 && ends_with(t->name, ".self_attn.rotary_emb.inv_freq")) {
            c->n_ignored++;
            continue;
        }
        lcx_problems_add(&ps, LCX_PROBLEM_EXTRA, "%s", t->name);
    }
    const lcx_param_spec *embed = lcx_param_table_find(pt, "model.embed_tokens.weight");
    LCX_ASSERT(embed);
    if (tied_head) {
        if (!lcx_shape_equal(&tied_head->shape, &embed->shape))
            lcx_problems_add(&ps, LCX_PROBLEM_SHAPE, "lm_head.weight %s (tied: expected %s)",
                        lcx_shape_str(&tied_head->shape, s1, sizeof s1), lcx_shape_str(&embed->shape, s2, sizeof s2));
        else if (!lcx_dtype_is_float_loadable(tied_head->dtype))
            lcx_problems_add(&ps, LCX_PROBLEM_DTYPE, "lm_head.weight %s", lcx_dtype_name(tied_head->dtype));
    }
    if (lcx_problems_total(&ps)) {
        char list[1800];
        lcx_problems_format(&ps, list, sizeof list);
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensors do not match %s (%s, %lld layers): %s", label,
                        c->config_path, lcx_arch_name(c->cfg.arch), (long long)c->cfg.num_hidden_layers, list);
    }
    if (tied_head) {
        const lcx_st_tensor *emb = c->tensor_of[embed - pt->params];
        int equal;
        uint64_t at;
        LCX_TRY(tensors_equal(emb, tied_head, embed->numel, &equal, &at));
        LCX_FAIL_IF(!equal, LCX_ERR_INVALID,
                    "%s: tensor 'lm_head.weight': present while tie_word_embeddings is true, but differs from "
                    "model.embed_tokens.weight (first at element %llu)",
                    label, (unsigned long long)at);
        c->lm_head_tied = tied_head;
    }
    return LCX_OK;
}

lcx_status lcx_catalog_open(const char *path, lcx_catalog **out) {
    *out = NULL;
    lcx_catalog *c = calloc(1, sizeof *c);
    LCX_FAIL_IF(!c, LCX_ERR_OOM, "%s: out of memory", path);
    lcx_status st = LCX_OK;
    char *dir = NULL;
    c->path = strdup(path);
    LCX_FAIL_GOTO(!c->path, LCX_ERR_OOM, fail, "%s: out of memory", path);
    int config_required = 0;
    if (lcx_is_dir(path)) {
        dir = strdup(path);
        config_required = 1;
    } else if (lcx_is_file(path)) {
        LCX_FAIL_GOTO(ends_with(path, "config.json") && !ends_with(path, ".index.json"), LCX_ERR_INVALID, fail,
                      "%s: give the model directory (or a .safetensors file / index), not its config.json", path);
        LCX_FAIL_GOTO(!ends_with(path, ".safetensors") && !ends_with(path, ".json"), LCX_ERR_INVALID, fail,
                      "%s: not a checkpoint (expected a directory, a .safetensors file or a "
                      "model.safetensors.index.json)",
                      path);
        dir = dir_of(path);
    } else {
        st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no such file or directory", path);
        goto fail;
    }
    LCX_FAIL_GOTO(!dir, LCX_ERR_OOM, fail, "%s: out of memory", path);
    c->config_path = lcx_path_join(dir, "config.json");
    LCX_FAIL_GOTO(!c->config_path, LCX_ERR_OOM, fail, "%s: out of memory", path);
    if (lcx_is_file(c->config_path)) {
        LCX_TRY_GOTO(lcx_config_load(c->config_path, &c->cfg), fail);
        c->has_config = 1;
        LCX_TRY_GOTO(lcx_param_table_init(&c->params, &c->cfg), fail);
    } else {
        LCX_FAIL_GOTO(config_required, LCX_ERR_NOT_FOUND, fail,
                      "%s: not a Hugging Face model directory: config.json is missing", path);
        free(c->config_path);
        c->config_path = NULL;
    }
    LCX_TRY_GOTO(lcx_st_set_open(path, &c->set), fail);
    add_stats(c);
    if (c->has_config) {
        LCX_TRY_GOTO(match(c), fail);
        c->n_parameters = c->params.total_numel;
    } else {
        c->n_parameters = c->total_elements;
    }
    free(dir);
    *out = c;
    return LCX_OK;
fail:
    free(dir);
    lcx_catalog_close(c);
    return st;
}

void lcx_catalog_close(lcx_catalog *c) {
    if (!c) return;
    lcx_st_set_close(c->set);
    free(c->tensor_of);
    lcx_param_table_free(&c->params);
    lcx_config_free(&c->cfg);
    free(c->config_path);
    free(c->path);
    free(c);
}

/* ---- summary ----------------------------------------------------------------------------------------------- */

int64_t lcx_rope_implied_context(const lcx_model_config *cfg) {
    const lcx_rope_params *r = &cfg->rope;
    /* Types that name their pretraining length L (transformers fills L = max_position_embeddings when absent);
     * linear/dynamic configs conventionally carry the target length in max_position_embeddings already. */
    int has_l = !strcmp(r->type, "yarn") || !strcmp(r->type, "llama3") || !strcmp(r->type, "longrope");
    if (!has_l || !r->has_factor || !(r->factor > 0)) return cfg->max_position_embeddings;
    double base = (double)(r->has_original_max ? r->original_max_position_embeddings : cfg->max_position_embeddings);
    double ctx = base * r->factor;
    if (!(ctx < 9.2e18)) return INT64_MAX;
    return (int64_t)llround(ctx);
}

/* json_object_set_new that records allocation failure in *ok. */
static void put(json_t *o, const char *key, json_t *v, int *ok) {
    if (!v || json_object_set_new(o, key, v) != 0) *ok = 0;
}

int lcx_config_summary_put(json_t *o, const lcx_model_config *m) {
    int ok = 1;
    put(o, "arch", json_string(lcx_arch_name(m->arch)), &ok);
    put(o, "architecture", json_string(lcx_arch_class(m->arch)), &ok);
    put(o, "num_hidden_layers", json_integer(m->num_hidden_layers), &ok);
    put(o, "hidden_size", json_integer(m->hidden_size), &ok);
    put(o, "num_attention_heads", json_integer(m->num_attention_heads), &ok);
    put(o, "num_key_value_heads", json_integer(m->num_key_value_heads), &ok);
    put(o, "head_dim", json_integer(m->head_dim), &ok);
    put(o, "intermediate_size", json_integer(m->intermediate_size), &ok);
    put(o, "vocab_size", json_integer(m->vocab_size), &ok);
    put(o, "max_position_embeddings", json_integer(m->max_position_embeddings), &ok);
    put(o, "tie_word_embeddings", json_boolean(m->tie_word_embeddings), &ok);
    put(o, "rms_norm_eps", json_real(m->rms_norm_eps), &ok);
    put(o, "torch_dtype",
        json_string(m->dtype == LCX_BF16 ? "bfloat16" : m->dtype == LCX_F16 ? "float16" : "float32"), &ok);
    if (m->sliding_window > 0) put(o, "sliding_window", json_integer(m->sliding_window), &ok);
    json_t *r = json_object();
    put(o, "rope", r, &ok);
    if (r) {
        put(r, "type", json_string(m->rope.type), &ok);
        put(r, "theta", json_real(m->rope.theta), &ok);
        put(r, "partial_rotary_factor", json_real(m->rope.partial_rotary_factor), &ok);
        if (m->rope.has_factor) put(r, "factor", json_real(m->rope.factor), &ok);
        if (m->rope.has_original_max)
            put(r, "original_max_position_embeddings", json_integer(m->rope.original_max_position_embeddings), &ok);
        put(r, "implied_context", json_integer(lcx_rope_implied_context(m)), &ok);
    }
    return ok;
}

json_t *lcx_catalog_summary_json(const lcx_catalog *c) {
    int ok = 1;
    json_t *o = json_object();
    if (!o) return NULL;
    put(o, "path", json_string(c->path), &ok);
    if (c->has_config && !lcx_config_summary_put(o, &c->cfg)) ok = 0;
    put(o, "num_parameters", json_integer((json_int_t)c->n_parameters), &ok);
    put(o, "num_tensors", json_integer((json_int_t)c->n_tensors), &ok);
    put(o, "total_bytes", json_integer((json_int_t)c->total_bytes), &ok);
    json_t *d = json_object();
    put(o, "dtypes", d, &ok);
    for (int dt = 0; d && dt < LCX_DTYPE_COUNT; dt++) {
        const lcx_dtype_stat *s = &c->dtypes[dt];
        if (!s->tensors) continue;
        json_t *e = json_object();
        put(d, lcx_dtype_name((lcx_dtype)dt), e, &ok);
        if (!e) continue;
        put(e, "tensors", json_integer((json_int_t)s->tensors), &ok);
        put(e, "elements", json_integer((json_int_t)s->elements), &ok);
        put(e, "bytes", json_integer((json_int_t)s->bytes), &ok);
    }
    if (!c->has_config) {
        json_t *list = json_array();
        put(o, "tensors", list, &ok);
        for (size_t i = 0; list && i < c->set->n_tensors; i++) {
            const lcx_st_tensor *t = c->set->tensors[i];
            json_t *e = json_object(), *shape = json_array();
            if (!e || !shape || json_array_append_new(list, e) != 0) {
                json_decref(shape);
                ok = 0;
                break;
            }
            put(e, "name", json_string(t->name), &ok);
            put(e, "dtype", json_string(lcx_dtype_name(t->dtype)), &ok);
            put(e, "shape", shape, &ok);
            for (int k = 0; k < t->shape.ndim; k++)
                if (json_array_append_new(shape, json_integer((json_int_t)t->shape.dims[k])) != 0) ok = 0;
        }
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
