/* convert: .lcx -> Hugging Face directory, one safetensors shard in memory at a time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/convert/convert_internal.h"
#include "formats/safetensors.h"
#include "src/core/fileio.h"
#include "src/checkpoint/model_params.h"

/* Read tensor (name, "param") whole and convert it to dt (as stored when dt is the stored dtype). */
lcx_status cv_read_param(lcx_ckpt *ck, const lcx_ckpt_tensor *t, lcx_dtype dt, void **out, uint64_t *nbytes);

lcx_status cv_read_param(lcx_ckpt *ck, const lcx_ckpt_tensor *t, lcx_dtype dt, void **out, uint64_t *nbytes) {
    *out = NULL;
    *nbytes = 0;
    lcx_box full = lcx_box_full(t->ndim, t->shape);
    uint64_t vol, ob;
    LCX_TRY(lcx_box_volume(&full, &vol));
    LCX_TRY(lcx_dtype_nbytes(dt, vol, &ob));
    void *raw = malloc(vol * t->es + 1);
    LCX_FAIL_IF(!raw, LCX_ERR_OOM, "tensor '%s': out of memory", t->name);
    lcx_status st = lcx_ckpt_read_box(ck, t->name, t->role, &full, raw);
    if (st == LCX_OK && dt != t->dtype) {
        float *f = malloc(vol * sizeof(float) + 1);
        void *o = malloc(ob + 1);
        if (!f || !o) st = lcx_fail(LCX_ERR_OOM, "tensor '%s': out of memory", t->name);
        if (st == LCX_OK) st = lcx_convert_to_f32(t->dtype, raw, f, vol);
        if (st == LCX_OK) st = lcx_convert_from_f32(dt, f, o, vol);
        free(f);
        free(raw);
        raw = o;
        if (st != LCX_OK) lcx_fail_context(st, "tensor '%s': ", t->name);
    }
    if (st != LCX_OK) {
        free(raw);
        return st;
    }
    *out = raw;
    *nbytes = ob;
    return LCX_OK;
}

/* The `param` tensors of a checkpoint in parameter-table order; checks none is missing, mis-shaped or extra. */
lcx_status cv_param_list(lcx_ckpt *ck, const lcx_param_table *tab, const lcx_ckpt_tensor ***list);

lcx_status cv_param_list(lcx_ckpt *ck, const lcx_param_table *tab, const lcx_ckpt_tensor ***list) {
    const lcx_ckpt_tensor **l = calloc(tab->n + 1, sizeof *l);
    LCX_FAIL_IF(!l, LCX_ERR_OOM, "out of memory");
    const char *dir = lcx_ckpt_dir(ck);
    for (size_t i = 0; i < tab->n; i++) {
        const lcx_param_spec *p = &tab->params[i];
        const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, p->name, "param");
        int ok = t && t->ndim == p->shape.ndim;
        for (int d = 0; ok && d < t->ndim; d++) ok = t->shape[d] == p->shape.dims[d];
        if (!ok) {
            free(l);
            return lcx_fail(t ? LCX_ERR_FORMAT : LCX_ERR_NOT_FOUND, "%s: parameter '%s' %s", dir, p->name,
                            t ? "has a shape other than the config implies" : "is missing");
        }
        l[i] = t;
    }
    for (int i = 0; i < lcx_ckpt_tensor_count(ck); i++) {
        const lcx_ckpt_tensor *t = lcx_ckpt_tensor_at(ck, i);
        if (strcmp(t->role, "param") == 0 && !lcx_param_table_find(tab, t->name)) {
            free(l);
            return lcx_fail(LCX_ERR_FORMAT, "%s: parameter '%s' is not part of the model the config describes", dir,
                            t->name);
        }
    }
    *list = l;
    return LCX_OK;
}

/* Lazy tensor source for the safetensors writer: one parameter read (and converted) at a time. */
typedef struct hf_export {
    lcx_ckpt *ck;
    const lcx_ckpt_tensor **list;
    const lcx_convert_opts *o;
    size_t *index;    /* shard entry -> parameter */
    lcx_dtype *dtype; /* shard entry -> output dtype */
    void *buf;
    uint64_t done, total;
    size_t n, n_done;
} hf_export;

static lcx_status hf_fetch(void *user, size_t k, const void **data) {
    hf_export *ex = user;
    uint64_t nb;
    LCX_TRY(cv_read_param(ex->ck, ex->list[ex->index[k]], ex->dtype[k], &ex->buf, &nb));
    *data = ex->buf;
    ex->done += nb;
    ex->n_done++;
    if (ex->o->progress) ex->o->progress(ex->o->progress_user, ex->n_done, ex->n, ex->done, ex->total);
    return LCX_OK;
}

static void hf_release(void *user, size_t k) {
    hf_export *ex = user;
    (void)k;
    free(ex->buf);
    ex->buf = NULL;
    lcx_ckpt_release(ex->ck);
}

static lcx_status copy_file(const char *from, const char *to) {
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_file(from, (size_t)1 << 31, &buf, &len));
    lcx_status st = lcx_write_file_atomic(to, buf, len);
    free(buf);
    return st;
}

lcx_status lcx_export_hf(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(src, &ck));
    lcx_status st = LCX_OK;
    lcx_model_config cfg = {0};
    int have_cfg = 0;
    lcx_param_table tab = {0};
    const lcx_ckpt_tensor **list = NULL;
    char *parent = NULL, *base = NULL, *tmp = NULL, *path = NULL;
    size_t *shard_of = NULL;
    lcx_st_out_tensor *part = NULL;
    size_t *ex_index = NULL;
    lcx_dtype *ex_dtype = NULL;
    json_t *index = NULL;
    size_t n = 0, n_shards = 0;

    const json_t *cj = lcx_ckpt_model_config(ck);
    LCX_FAIL_GOTO(!json_is_object(cj), LCX_ERR_FORMAT, done, "%s: the checkpoint holds no model config", src);
    LCX_TRY_GOTO(cv_config_from_json(cj, "model config", &cfg), done);
    have_cfg = 1;
    LCX_FAIL_GOTO(o->dtype != LCX_DTYPE_INVALID && !lcx_dtype_is_compute(o->dtype), LCX_ERR_INVALID, done,
                  "--dtype: HF export writes bf16, f16 or f32");
    LCX_TRY_GOTO(lcx_param_table_init(&tab, &cfg), done);
    LCX_TRY_GOTO(cv_param_list(ck, &tab, &list), done);
    n = tab.n;
    if (o->dtype != LCX_DTYPE_INVALID) {
        cfg.dtype = o->dtype;
    } else if (n > 0) {
        /* As stored: config.json's dtype must name what the files hold, since transformers 5 loads in that
         * dtype when from_pretrained gets none (an fp32 training run of a bf16 model would load rounded).
         * Mixed stored dtypes keep the config's value. */
        int same = 1;
        for (size_t i = 1; i < n; i++) same &= list[i]->dtype == list[0]->dtype;
        if (same && lcx_dtype_is_compute(list[0]->dtype)) cfg.dtype = list[0]->dtype;
    }

    LCX_TRY_GOTO(cv_check_absent(out), done);
    LCX_TRY_GOTO(cv_split_path(out, &parent, &base), done);
    LCX_FAIL_GOTO(!lcx_is_dir(parent), LCX_ERR_NOT_FOUND, done, "%s: directory does not exist", parent);
    tmp = malloc(strlen(out) + 16);
    LCX_FAIL_GOTO(!tmp, LCX_ERR_OOM, done, "out of memory");
    sprintf(tmp, "%s.tmp-XXXXXX", out);
    if (!mkdtemp(tmp)) {
        free(tmp);
        tmp = NULL;
        LCX_FAIL_GOTO(1, LCX_ERR_IO, done, "%s: cannot create a temporary directory: %s", out, strerror(errno));
    }

    /* Shards as huggingface_hub splits them (see lcx_st_write_sharded), computed up front from the sizes. */
    uint64_t max_shard = o->shard_bytes ? o->shard_bytes : LCX_ST_DEFAULT_SHARD_BYTES;
    shard_of = calloc(n + 1, sizeof *shard_of);
    part = calloc(n + 1, sizeof *part);
    ex_index = calloc(n + 1, sizeof *ex_index);
    ex_dtype = calloc(n + 1, sizeof *ex_dtype);
    LCX_FAIL_GOTO(!shard_of || !part || !ex_index || !ex_dtype, LCX_ERR_OOM, done, "out of memory");
    uint64_t cur_bytes = 0, total_size = 0, total_params = 0;
    size_t cur = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        lcx_dtype dt = o->dtype != LCX_DTYPE_INVALID ? o->dtype : list[i]->dtype;
        uint64_t b;
        LCX_TRY_GOTO(lcx_dtype_nbytes(dt, tab.params[i].numel, &b), done);
        total_size += b;
        total_params += tab.params[i].numel;
        if (b > max_shard) {
            shard_of[i] = n_shards++;
            continue;
        }
        if (cur == (size_t)-1 || cur_bytes + b > max_shard) cur = n_shards++, cur_bytes = 0;
        shard_of[i] = cur;
        cur_bytes += b;
    }
    if (n_shards == 0) n_shards = 1;
    LCX_FAIL_GOTO(n_shards > 99999, LCX_ERR_INVALID, done, "--shard-size: %zu shards are more than 99999", n_shards);
    if (n_shards > 1) {
        index = json_object();
        json_t *meta = json_object(), *wmap = json_object();
        LCX_FAIL_GOTO(!index || !meta || !wmap, LCX_ERR_OOM, done, "out of memory");
        json_object_set_new(index, "metadata", meta);
        json_object_set_new(index, "weight_map", wmap);
        json_object_set_new(meta, "total_parameters", json_integer((json_int_t)total_params));
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total_size));
        for (size_t i = 0; i < n; i++) {
            char name[64];
            snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", shard_of[i] + 1, n_shards);
            json_object_set_new(wmap, tab.params[i].name, json_string(name));
        }
    }
    hf_export ex = {.ck = ck, .list = list, .o = o, .total = total_size, .n = n, .index = ex_index, .dtype = ex_dtype};
    for (size_t s = 0; s < n_shards; s++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (shard_of[i] != s) continue;
            lcx_dtype dt = o->dtype != LCX_DTYPE_INVALID ? o->dtype : list[i]->dtype;
            part[k] = (lcx_st_out_tensor){.name = tab.params[i].name, .dtype = dt, .shape = tab.params[i].shape};
            ex.index[k] = i;
            ex.dtype[k] = dt;
            k++;
        }
        char name[64];
        if (n_shards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, n_shards);
        free(path);
        path = lcx_path_join(tmp, name);
        LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "out of memory");
        LCX_TRY_GOTO(lcx_st_write_lazy(path, part, k, hf_fetch, hf_release, &ex), done);
    }
    if (index) {
        char *txt = lcx_json_dumps_hf(index);
        LCX_FAIL_GOTO(!txt, LCX_ERR_OOM, done, "out of memory");
        size_t len = strlen(txt);
        char *nl = realloc(txt, len + 2);
        if (!nl) free(txt);
        LCX_FAIL_GOTO(!nl, LCX_ERR_OOM, done, "out of memory");
        nl[len] = '\n';
        free(path);
        path = lcx_path_join(tmp, "model.safetensors.index.json");
        st = path ? lcx_write_file_atomic(path, nl, len + 1) : lcx_fail(LCX_ERR_OOM, "out of memory");
        free(nl);
        if (st != LCX_OK) goto done;
    }
    free(path);
    path = lcx_path_join(tmp, "config.json");
    LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "out of memory");
    LCX_TRY_GOTO(lcx_config_write(&cfg, path), done);
    for (int i = 0; i < lcx_ckpt_tokenizer_file_count(ck); i++) {
        const char *f = lcx_ckpt_tokenizer_file(ck, i);
        if (strcmp(f, LCX_GGUF_TOKENIZER_FILE) == 0) continue; /* GGUF tokenizer KVs: only GGUF export uses them */
        char *from = lcx_path_join(src, f);
        free(path);
        path = lcx_path_join(tmp, f);
        st = from && path ? copy_file(from, path) : lcx_fail(LCX_ERR_OOM, "out of memory");
        free(from);
        if (st != LCX_OK) goto done;
    }
    /* mkdtemp made it 0700; give it the mode a plain mkdir would have */
    mode_t um = umask(0);
    umask(um);
    LCX_FAIL_GOTO(chmod(tmp, 0777 & ~um) != 0, LCX_ERR_IO, done, "%s: chmod failed: %s", tmp, strerror(errno));
    LCX_TRY_GOTO(lcx_fsync_dir(tmp), done);
    LCX_TRY_GOTO(cv_check_absent(out), done);
    LCX_FAIL_GOTO(rename(tmp, out) != 0, LCX_ERR_IO, done, "%s: cannot rename %s into place: %s", out, tmp,
                  strerror(errno));
    free(tmp);
    tmp = NULL;
    st = lcx_fsync_dir(parent);
done:
    if (tmp) lcx_remove_flat_dir(tmp);
    free(ex_index);
    free(ex_dtype);
    free(part);
    free(shard_of);
    json_decref(index);
    free(path);
    free(tmp);
    free(parent);
    free(base);
    free(list);
    lcx_param_table_free(&tab);
    if (have_cfg) lcx_config_free(&cfg);
    lcx_ckpt_free(ck);
    return st;
}
