/* source: detect a checkpoint's form and open it (source.h). The Hugging Face forms are the catalog's; the .lcx
 * and GGUF openers are in source_lcx.c and source_gguf.c, reading in source_read.c. */
#include "src/checkpoint/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/checkpoint/source_internal.h"
#include "src/core/fileio.h"

const char *const lcx_hf_side_files[] = {
    "tokenizer.json",    "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
    "vocab.json",        "merges.txt",            "added_tokens.json",       "generation_config.json",
    "chat_template.jinja", "chat_template.json",
};
const size_t lcx_hf_n_side_files = sizeof lcx_hf_side_files / sizeof lcx_hf_side_files[0];

const char *lcx_source_form_name(lcx_source_form f) {
    static const char *const names[] = {"Hugging Face directory", "safetensors file", "safetensors index",
                                        ".lcx checkpoint", "GGUF file"};
    return (unsigned)f < LCX_SOURCE_FORM_COUNT ? names[f] : "?";
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int has_gguf_magic(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char m[4] = {0};
    size_t r = fread(m, 1, 4, f);
    fclose(f);
    return r == 4 && memcmp(m, "GGUF", 4) == 0;
}

#define EXPECTED "expected a Hugging Face model directory, a .safetensors file, a model.safetensors.index.json, " \
                 "an .lcx checkpoint directory or a .gguf file"

lcx_status lcx_source_detect(const char *path, lcx_source_form *form) {
    struct stat sb;
    LCX_FAIL_IF(stat(path, &sb) != 0, errno == ENOENT ? LCX_ERR_NOT_FOUND : LCX_ERR_IO, "%s: %s", path,
                errno == ENOENT ? "no such file or directory" : strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        char *m = lcx_path_join(path, LCX_CKPT_MANIFEST), *c = lcx_path_join(path, "config.json");
        /* Anything named manifest.json makes it an .lcx: the reader then refuses a FIFO or link by name. */
        struct stat mb;
        int oom = !m || !c, is_lcx = m && lstat(m, &mb) == 0, is_hf = c && lcx_is_file(c);
        free(m);
        free(c);
        LCX_FAIL_IF(oom, LCX_ERR_OOM, "%s: out of memory", path);
        LCX_FAIL_IF(!is_lcx && !is_hf, LCX_ERR_NOT_FOUND,
                    "%s: not a Hugging Face model directory: config.json is missing (nor an .lcx checkpoint: no "
                    "manifest.json)",
                    path);
        *form = is_lcx ? LCX_SOURCE_LCX : LCX_SOURCE_HF_DIR;
        return LCX_OK;
    }
    LCX_FAIL_IF(!S_ISREG(sb.st_mode), LCX_ERR_INVALID, "%s: not a checkpoint (" EXPECTED ")", path);
    if (has_gguf_magic(path) || ends_with(path, ".gguf")) *form = LCX_SOURCE_GGUF;
    else if (ends_with(path, ".safetensors")) *form = LCX_SOURCE_SAFETENSORS;
    else if (ends_with(path, "config.json") && !ends_with(path, ".index.json"))
        return lcx_fail(LCX_ERR_INVALID, "%s: give the model directory (or a .safetensors file / index), not its "
                                         "config.json",
                        path);
    else if (ends_with(path, ".json")) *form = LCX_SOURCE_ST_INDEX;
    else return lcx_fail(LCX_ERR_INVALID, "%s: not a checkpoint (" EXPECTED ")", path);
    return LCX_OK;
}

/* ---- shared helpers (source_internal.h) --------------------------------------------------------------------- */

lcx_status lcx_source_config_from_json(lcx_source *s, const json_t *j, const char *label) {
    s->owns_cfg = 1;
    char *text = json_dumps(j, JSON_COMPACT);
    LCX_FAIL_IF(!text, LCX_ERR_OOM, "%s: cannot serialise the model config", label);
    lcx_status st = lcx_config_parse(label, text, strlen(text), &s->cfg);
    free(text);
    LCX_TRY(st);
    s->has_config = 1;
    return lcx_param_table_init(&s->params, &s->cfg);
}

lcx_status lcx_source_alloc_tensors(lcx_source *s) {
    s->tensor_of = calloc(s->params.n + 1, sizeof *s->tensor_of);
    LCX_FAIL_IF(!s->tensor_of, LCX_ERR_OOM, "%s: out of memory", s->path);
    return LCX_OK;
}

lcx_status lcx_source_add_side_file(lcx_source *s, char *path_owned) {
    char **v = path_owned ? realloc(s->side_files, (s->n_side_files + 1) * sizeof *v) : NULL;
    if (!v) {
        free(path_owned);
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", s->path);
    }
    s->side_files = v;
    s->side_files[s->n_side_files++] = path_owned;
    return LCX_OK;
}

/* ---- Hugging Face forms ------------------------------------------------------------------------------------- */

/* Directory part of a file path ("." when none); heap string. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* The catalog matches (or, config-only, config.json alone is read); side files sit next to config.json. */
static lcx_status open_hf(lcx_source *s, unsigned flags, int config_file) {
    char *dir = s->form == LCX_SOURCE_HF_DIR && !config_file ? strdup(s->path) : dir_of(s->path);
    LCX_FAIL_IF(!dir, LCX_ERR_OOM, "%s: out of memory", s->path);
    lcx_status st = LCX_OK;
    if (flags & LCX_SOURCE_CONFIG_ONLY) {
        s->config_path = config_file ? strdup(s->path) : lcx_path_join(dir, "config.json");
        LCX_FAIL_GOTO(!s->config_path, LCX_ERR_OOM, done, "%s: out of memory", s->path);
        if (lcx_is_file(s->config_path)) {
            s->owns_cfg = 1;
            LCX_TRY_GOTO(lcx_config_load(s->config_path, &s->cfg), done);
            s->has_config = 1;
            LCX_TRY_GOTO(lcx_param_table_init(&s->params, &s->cfg), done);
        } else {
            free(s->config_path);
            s->config_path = NULL;
        }
    } else {
        LCX_TRY_GOTO(lcx_catalog_open(s->path, &s->catalog), done);
        const lcx_catalog *c = s->catalog;
        if (c->has_config) {
            s->config_path = strdup(c->config_path);
            LCX_FAIL_GOTO(!s->config_path, LCX_ERR_OOM, done, "%s: out of memory", s->path);
            s->cfg = c->cfg; /* the catalog's: owns_cfg stays 0 */
            s->params = c->params;
            s->has_config = 1;
            LCX_TRY_GOTO(lcx_source_alloc_tensors(s), done);
            for (size_t i = 0; i < s->params.n; i++) {
                const lcx_st_tensor *t = c->tensor_of[i];
                lcx_source_tensor *o = &s->tensor_of[i];
                o->name = t->name;
                o->stored = o->dtype = t->dtype;
                o->bytes = t->end - t->begin;
                o->ref = t;
            }
            s->matched = 1;
        }
    }
    /* lcx_tokenizer_open takes the directory (its tokenizer.json): the path itself for a directory, as given */
    s->tokenizer_path = strdup(dir);
    LCX_FAIL_GOTO(!s->tokenizer_path, LCX_ERR_OOM, done, "%s: out of memory", s->path);
    for (size_t i = 0; i < lcx_hf_n_side_files; i++) {
        char *p = lcx_path_join(dir, lcx_hf_side_files[i]);
        int present = 1;
        if (p) {
            st = lcx_optional_input(p, 0, &present); /* a FIFO or directory there is refused, not skipped */
            if (st != LCX_OK || !present) free(p);
            if (st != LCX_OK) goto done;
            if (!present) continue;
        }
        LCX_TRY_GOTO(lcx_source_add_side_file(s, p), done);
    }
done:
    free(dir);
    return st;
}

/* ---- open / close ------------------------------------------------------------------------------------------- */

lcx_status lcx_source_open(const char *path, unsigned flags, lcx_source **out) {
    *out = NULL;
    lcx_source_form form;
    int config_file = (flags & LCX_SOURCE_CONFIG_FILE) && lcx_is_file(path) && ends_with(path, ".json") &&
                      !ends_with(path, ".index.json");
    if (config_file) flags |= LCX_SOURCE_CONFIG_ONLY, form = LCX_SOURCE_HF_DIR;
    else LCX_TRY(lcx_source_detect(path, &form));
    if (flags & LCX_SOURCE_CONFIG_FILE) flags |= LCX_SOURCE_CONFIG_ONLY;
    lcx_source *s = calloc(1, sizeof *s);
    LCX_FAIL_IF(!s, LCX_ERR_OOM, "%s: out of memory", path);
    s->form = form;
    s->path = strdup(path);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!s->path, LCX_ERR_OOM, fail, "%s: out of memory", path);
    if (form == LCX_SOURCE_LCX) st = lcx_source_open_lcx(s, flags);
    else if (form == LCX_SOURCE_GGUF) st = lcx_source_open_gguf(s, flags);
    else st = open_hf(s, flags, config_file);
    if (st != LCX_OK) goto fail;
    *out = s;
    return LCX_OK;
fail:
    lcx_source_close(s);
    return st;
}

void lcx_source_close(lcx_source *s) {
    if (!s) return;
    if (s->owns_cfg) {
        lcx_param_table_free(&s->params);
        lcx_config_free(&s->cfg);
    }
    lcx_catalog_close(s->catalog);
    lcx_ckpt_free(s->ckpt);
    lcx_gguf_close(s->gguf);
    for (size_t i = 0; i < s->n_side_files; i++) free(s->side_files[i]);
    free(s->side_files);
    free(s->tensor_of);
    free(s->tokenizer_path);
    free(s->config_path);
    free(s->path);
    free(s);
}

lcx_status lcx_source_check_lcx(const char *path) {
    lcx_source *s = NULL;
    lcx_status st = lcx_source_open(path, 0, &s);
    if (st == LCX_OK && s->form != LCX_SOURCE_LCX)
        st = lcx_fail(LCX_ERR_FORMAT, "%s: not an .lcx checkpoint (it is a %s)", path, lcx_source_form_name(s->form));
    lcx_source_close(s);
    return st;
}

lcx_status lcx_source_need_model(const lcx_source *s, const char *what) {
    LCX_FAIL_IF(!s->has_config, LCX_ERR_INVALID, "%s: no model config (%s): %s needs one", s->path,
                s->form == LCX_SOURCE_LCX ? "the manifest has none" : "no config.json beside the tensors", what);
    LCX_FAIL_IF(!s->matched, LCX_ERR_INVALID, "%s: opened for its config only: %s needs the tensors", s->path, what);
    return LCX_OK;
}
