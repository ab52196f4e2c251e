/* convert: any checkpoint form (src/checkpoint/source.h) -> Hugging Face directory, one tensor in memory at a
 * time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/convert/convert_internal.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "src/core/fileio.h"
#include "src/core/outpath.h"
#include "src/checkpoint/model_params.h"
#include "src/checkpoint/source.h"
#include "src/tokenizer/tokenizer.h"

/* Lazy tensor source for the safetensors writer: one parameter read (and converted) at a time. */
typedef struct hf_export {
    lcx_source *src;
    const lcx_convert_opts *o;
    lcx_dtype *dtype; /* parameter -> output dtype */
    void *buf;
    uint64_t done, total;
    size_t n, n_done;
} hf_export;

static lcx_status hf_fetch(void *user, size_t i, const void **data) {
    hf_export *ex = user;
    uint64_t nb;
    LCX_TRY(lcx_dtype_nbytes(ex->dtype[i], ex->src->params.params[i].numel, &nb));
    ex->buf = malloc(nb + 1);
    LCX_FAIL_IF(!ex->buf, LCX_ERR_OOM, "tensor '%s': out of memory", ex->src->params.params[i].name);
    LCX_TRY(lcx_source_read(ex->src, i, ex->dtype[i], ex->buf));
    *data = ex->buf;
    ex->done += nb;
    ex->n_done++;
    if (ex->o->progress) ex->o->progress(ex->o->progress_user, ex->n_done, ex->n, ex->done, ex->total);
    return LCX_OK;
}

static void hf_release(void *user, size_t i) {
    hf_export *ex = user;
    (void)i;
    free(ex->buf);
    ex->buf = NULL;
    lcx_source_release(ex->src);
}

static lcx_status copy_file(const char *from, int flags, const char *to) {
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_input(from, flags, (size_t)1 << 31, &buf, &len));
    lcx_status st = lcx_write_file_atomic(to, buf, len);
    free(buf);
    return st;
}

static lcx_status write_json(const char *dir, const char *name, const json_t *v) {
    char *path = lcx_path_join(dir, name);
    lcx_status st = path ? lcx_json_write_hf(path, v) : lcx_fail(LCX_ERR_OOM, "%s: out of memory", name);
    free(path);
    return st;
}

/* A GGUF source (the file itself, or the tokenizer.gguf a GGUF import kept in its .lcx) has no Hugging Face
 * tokenizer files: write tokenizer.json and tokenizer_config.json converted from its tokenizer.ggml.* keys, so
 * that the exported directory is complete. A vocabulary we cannot convert is a warning, not a failed export. */
static lcx_status write_gguf_tokenizer(const lcx_source *s, const lcx_model_config *cfg, const char *dir,
                                       const lcx_convert_opts *o) {
    const lcx_gguf_file *tkv = s->gguf;
    lcx_gguf_file *opened = NULL;
    for (size_t i = 0; !tkv && i < s->n_side_files; i++) {
        const char *f = s->side_files[i], *b = strrchr(f, '/') ? strrchr(f, '/') + 1 : f;
        if (strcmp(b, "tokenizer.json") == 0) return LCX_OK; /* an HF tokenizer travels as it is */
        if (strcmp(b, LCX_GGUF_TOKENIZER_FILE) != 0) continue;
        LCX_TRY(lcx_gguf_open(f, &opened));
        tkv = opened;
    }
    if (!tkv || !lcx_gguf_find_kv(tkv, "tokenizer.ggml.tokens")) {
        lcx_gguf_close(opened);
        return LCX_OK;
    }
    json_t *tok = NULL, *tcfg = NULL;
    lcx_status st = lcx_tokenizer_hf_from_gguf(tkv, cfg->max_position_embeddings, &tok, &tcfg);
    if (st == LCX_ERR_UNSUPPORTED) {
        if (o->warn) o->warn(o->warn_user, lcx_last_error());
        st = LCX_OK;
    } else if (st == LCX_OK) {
        st = write_json(dir, "tokenizer.json", tok);
        if (st == LCX_OK) st = write_json(dir, "tokenizer_config.json", tcfg);
    }
    json_decref(tok);
    json_decref(tcfg);
    lcx_gguf_close(opened);
    return st;
}

lcx_status lcx_export_hf(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_source *s = NULL;
    LCX_TRY(lcx_source_open(src, 0, &s));
    lcx_status st = LCX_OK;
    lcx_model_config *cfg = &s->cfg; /* dtype set below, then written: the source is ours until closed */
    const lcx_source_tensor *list = s->tensor_of;
    char *parent = NULL, *base = NULL, *tmp = NULL, *path = NULL;
    lcx_st_out_tensor *outs = NULL;
    lcx_dtype *ex_dtype = NULL;
    size_t n = 0;

    LCX_TRY_GOTO(lcx_source_need_model(s, "HF export"), done);
    LCX_FAIL_GOTO(o->dtype != LCX_DTYPE_INVALID && !lcx_dtype_is_compute(o->dtype), LCX_ERR_INVALID, done,
                  "--dtype: HF export writes bf16, f16 or f32");
    const lcx_param_table tab = s->params;
    n = tab.n;
    if (o->dtype != LCX_DTYPE_INVALID) {
        cfg->dtype = o->dtype;
    } else if (n > 0) {
        /* As stored: config.json's dtype must name what the files hold, since transformers 5 loads in that
         * dtype when from_pretrained gets none (an fp32 training run of a bf16 model would load rounded).
         * Mixed stored dtypes keep the config's value. */
        int same = 1;
        for (size_t i = 1; i < n; i++) same &= list[i].dtype == list[0].dtype;
        if (same && lcx_dtype_is_compute(list[0].dtype)) cfg->dtype = list[0].dtype;
    }

    LCX_TRY_GOTO(lcx_out_absent(out), done);
    LCX_TRY_GOTO(cv_split_path(out, &parent, &base), done);
    LCX_FAIL_GOTO(!lcx_is_dir(parent), LCX_ERR_NOT_FOUND, done, "%s: directory does not exist", parent);
    LCX_TRY_GOTO(lcx_out_temp_dir(out, &tmp), done);

    /* every tensor in its output dtype, in the parameter table's order; the shards as huggingface_hub splits them */
    outs = calloc(n + 1, sizeof *outs);
    ex_dtype = calloc(n + 1, sizeof *ex_dtype);
    LCX_FAIL_GOTO(!outs || !ex_dtype, LCX_ERR_OOM, done, "out of memory");
    uint64_t total_size = 0;
    for (size_t i = 0; i < n; i++) {
        ex_dtype[i] = o->dtype != LCX_DTYPE_INVALID ? o->dtype : list[i].dtype;
        outs[i] = (lcx_st_out_tensor){.name = tab.params[i].name, .dtype = ex_dtype[i], .shape = tab.params[i].shape};
        uint64_t b;
        LCX_TRY_GOTO(lcx_dtype_nbytes(ex_dtype[i], tab.params[i].numel, &b), done);
        total_size += b;
    }
    hf_export ex = {.src = s, .o = o, .total = total_size, .n = n, .dtype = ex_dtype};
    st = lcx_st_write_sharded_lazy(tmp, outs, n, o->shard_bytes, hf_fetch, hf_release, &ex);
    free(ex.buf);
    if (st != LCX_OK) goto done;
    free(path);
    path = lcx_path_join(tmp, "config.json");
    LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "out of memory");
    LCX_TRY_GOTO(lcx_config_write(cfg, path), done);
    LCX_TRY_GOTO(write_gguf_tokenizer(s, cfg, tmp, o), done);
    for (size_t i = 0; i < s->n_side_files; i++) {
        const char *from = s->side_files[i];
        const char *f = strrchr(from, '/') ? strrchr(from, '/') + 1 : from;
        if (strcmp(f, LCX_GGUF_TOKENIZER_FILE) == 0) continue; /* GGUF tokenizer KVs: only GGUF export uses them */
        free(path);
        path = lcx_path_join(tmp, f);
        st = path ? copy_file(from, s->form == LCX_SOURCE_LCX ? LCX_IN_OWN : 0, path)
                  : lcx_fail(LCX_ERR_OOM, "out of memory");
        if (st != LCX_OK) goto done;
    }
    LCX_TRY_GOTO(lcx_fsync_dir(tmp), done);
    LCX_TRY_GOTO(lcx_out_claim(tmp, out), done);
    free(tmp);
    tmp = NULL;
done:
    if (tmp) lcx_out_remove_temp(tmp);
    free(ex_dtype);
    free(outs);
    free(path);
    free(tmp);
    free(parent);
    free(base);
    lcx_source_close(s);
    return st;
}
