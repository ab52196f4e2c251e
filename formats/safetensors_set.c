/* safetensors sets: a checkpoint in one file or in shards listed by model.safetensors.index.json. */
#include "formats/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
#define ST_INDEX_MAX_BYTES (256u << 20)

void lcx_st_set_close(lcx_st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) lcx_st_close(s->files[i]);
    free(s->files);
    free((void *)s->tensors);
    free(s->dir);
    free(s);
}

static int cmp_tensor_ptr(const void *a, const void *b) {
    const lcx_st_tensor *x = *(const lcx_st_tensor *const *)a, *y = *(const lcx_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

const lcx_st_tensor *lcx_st_set_find(const lcx_st_set *s, const char *name) {
    if (!s || !s->tensors) return NULL;
    lcx_st_tensor key = {.name = (char *)name};
    const lcx_st_tensor *kp = &key;
    const lcx_st_tensor **hit = bsearch(&kp, s->tensors, s->n_tensors, sizeof *s->tensors, cmp_tensor_ptr);
    return hit ? *hit : NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* Which file of f holds each tensor, for messages. */
static const char *file_of(const lcx_st_set *s, const lcx_st_tensor *t) {
    for (size_t i = 0; i < s->n_files; i++) {
        const lcx_st_file *f = s->files[i];
        if (f->n_tensors && t >= f->tensors && t < f->tensors + f->n_tensors) return f->path;
    }
    return "?";
}

/* Sorted lookup table over all files; a name found in two files is an error naming both. */
static lcx_status build_lookup(lcx_st_set *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_files; i++) n += s->files[i]->n_tensors;
    s->tensors = malloc((n ? n : 1) * sizeof *s->tensors);
    LCX_FAIL_IF(!s->tensors, LCX_ERR_OOM, "%s: out of memory", s->dir);
    size_t k = 0;
    for (size_t i = 0; i < s->n_files; i++)
        for (size_t j = 0; j < s->files[i]->n_tensors; j++) s->tensors[k++] = &s->files[i]->tensors[j];
    s->n_tensors = n;
    qsort((void *)s->tensors, n, sizeof *s->tensors, cmp_tensor_ptr);
    for (size_t i = 1; i < n; i++)
        LCX_FAIL_IF(strcmp(s->tensors[i - 1]->name, s->tensors[i]->name) == 0, LCX_ERR_FORMAT,
                    "tensor '%s' appears in both %s and %s", s->tensors[i]->name, file_of(s, s->tensors[i - 1]),
                    file_of(s, s->tensors[i]));
    return LCX_OK;
}

static lcx_status add_file(lcx_st_set *s, const char *path) {
    lcx_st_file **nf = realloc(s->files, (s->n_files + 1) * sizeof *nf);
    LCX_FAIL_IF(!nf, LCX_ERR_OOM, "%s: out of memory", path);
    s->files = nf;
    LCX_TRY(lcx_st_open(path, &s->files[s->n_files]));
    s->n_files++;
    return LCX_OK;
}

/* Index shard names are plain relative paths inside the checkpoint directory. */
static int safe_rel_name(const char *name) {
    if (!name[0] || name[0] == '/') return 0;
    for (const char *p = name; *p;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return 0;
        if (!e) break;
        p = e + 1;
    }
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static lcx_status open_index(lcx_st_set *s, const char *index_path) {
    char *text = NULL, *path = NULL;
    size_t len = 0;
    const char **names = NULL;
    json_t *root = NULL;
    lcx_status st = LCX_OK;
    LCX_TRY(lcx_read_file(index_path, ST_INDEX_MAX_BYTES, &text, &len));
    json_error_t jerr;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    LCX_FAIL_GOTO(!root, LCX_ERR_FORMAT, done, "%s: not valid JSON: %s (line %d, column %d)", index_path, jerr.text,
                  jerr.line, jerr.column);
    LCX_FAIL_GOTO(!json_is_object(root), LCX_ERR_FORMAT, done, "%s: not a JSON object", index_path);
    json_t *meta = json_object_get(root, "metadata"), *wmap = json_object_get(root, "weight_map");
    LCX_FAIL_GOTO(meta && !json_is_object(meta) && !json_is_null(meta), LCX_ERR_FORMAT, done,
                  "%s: metadata is not an object", index_path);
    json_t *ts = meta ? json_object_get(meta, "total_size") : NULL;
    if (json_is_integer(ts) && json_integer_value(ts) >= 0) s->total_size_index = (uint64_t)json_integer_value(ts);
    LCX_FAIL_GOTO(!json_is_object(wmap), LCX_ERR_FORMAT, done, "%s: weight_map is %s", index_path,
                  wmap ? "not an object" : "missing");

    /* Distinct file names, sorted so the set's file order does not depend on the index's key order. */
    size_t n_names = 0;
    names = malloc((json_object_size(wmap) ? json_object_size(wmap) : 1) * sizeof *names);
    LCX_FAIL_GOTO(!names, LCX_ERR_OOM, done, "%s: out of memory", index_path);
    const char *tname;
    json_t *fv;
    json_object_foreach(wmap, tname, fv) {
        LCX_FAIL_GOTO(!json_is_string(fv), LCX_ERR_FORMAT, done, "%s: weight_map entry '%s' is not a file name",
                      index_path, tname);
        const char *fname = json_string_value(fv);
        LCX_FAIL_GOTO(!safe_rel_name(fname), LCX_ERR_FORMAT, done,
                      "%s: weight_map entry '%s': file name '%s' must be relative and stay inside the directory",
                      index_path, tname, fname);
        names[n_names++] = fname;
    }
    qsort(names, n_names, sizeof *names, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < n_names; i++)
        if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
    for (size_t i = 0; i < u; i++) {
        free(path);
        path = lcx_path_join(s->dir, names[i]);
        LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "%s: out of memory", index_path);
        if (!lcx_is_file(path)) {
            const char *example = "?";
            json_object_foreach(wmap, tname, fv) if (strcmp(json_string_value(fv), names[i]) == 0) {
                example = tname;
                break;
            }
            LCX_FAIL_GOTO(1, LCX_ERR_NOT_FOUND, done, "%s: weight_map names file '%s' (e.g. for tensor '%s'), which does not exist",
                          index_path, names[i], example);
        }
        LCX_TRY_GOTO(add_file(s, path), done);
    }
    /* a tensor in two shards is named with both files before the map is compared */
    LCX_TRY_GOTO(build_lookup(s), done);
    for (size_t i = 0; i < s->n_files; i++) { /* every tensor of a file must be mapped to this very file */
        const lcx_st_file *f = s->files[i];
        for (size_t j = 0; j < f->n_tensors; j++) {
            json_t *m = json_object_get(wmap, f->tensors[j].name);
            LCX_FAIL_GOTO(!m, LCX_ERR_FORMAT, done, "%s: tensor '%s' of %s is not in the weight_map", index_path,
                          f->tensors[j].name, names[i]);
            LCX_FAIL_GOTO(strcmp(json_string_value(m), names[i]) != 0, LCX_ERR_FORMAT, done,
                          "%s: tensor '%s' is in %s but the weight_map assigns it to %s", index_path,
                          f->tensors[j].name, names[i], json_string_value(m));
        }
    }
    /* the other direction: each mapped tensor is in its file */
    json_object_foreach(wmap, tname, fv) {
        const char *fname = json_string_value(fv);
        /* names[i] (sorted, distinct) is s->files[i]'s: a bsearch, as a linear search per entry was quadratic */
        const char **hit = bsearch(&fname, names, u, sizeof *names, cmp_str);
        LCX_ASSERT(hit);
        const lcx_st_file *f = s->files[hit - names];
        LCX_FAIL_GOTO(!lcx_st_find(f, tname), LCX_ERR_FORMAT, done,
                      "%s: weight_map assigns tensor '%s' to %s, which does not contain it", index_path, tname, fname);
    }
done:
    json_decref(root);
    free(names);
    free(path);
    free(text);
    return st;
}

/* Directory without an index or model.safetensors: its only *.safetensors file. */
static lcx_status find_lone_file(const char *dir, char **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    LCX_FAIL_IF(!d, LCX_ERR_IO, "%s: cannot list directory: %s", dir, strerror(errno));
    char *first = NULL, *second = NULL;
    size_t count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!ends_with(de->d_name, ".safetensors")) continue;
        count++;
        if (!first) first = strdup(de->d_name);
        else if (!second) second = strdup(de->d_name);
    }
    closedir(d);
    lcx_status st = LCX_OK;
    if (count == 0)
        st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no %s, %s or other .safetensors file", dir, ST_INDEX_NAME, ST_SINGLE_NAME);
    else if (count > 1)
        st = lcx_fail(LCX_ERR_FORMAT, "%s: %zu .safetensors files (%s, %s, ...) but no %s to say which belong together",
                      dir, count, first ? first : "?", second ? second : "?", ST_INDEX_NAME);
    else if (!first)
        st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", dir);
    else if (!(*out = lcx_path_join(dir, first)))
        st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", dir);
    free(first);
    free(second);
    return st;
}

lcx_status lcx_st_set_open(const char *path, lcx_st_set **out) {
    *out = NULL;
    lcx_st_set *s = calloc(1, sizeof *s);
    LCX_FAIL_IF(!s, LCX_ERR_OOM, "%s: out of memory", path);
    lcx_status st = LCX_OK;
    char *file = NULL;
    if (lcx_is_dir(path)) {
        s->dir = strdup(path);
        LCX_FAIL_GOTO(!s->dir, LCX_ERR_OOM, fail, "%s: out of memory", path);
        char *idx = lcx_path_join(path, ST_INDEX_NAME), *single = lcx_path_join(path, ST_SINGLE_NAME);
        if (!idx || !single) {
            free(idx);
            free(single);
            LCX_FAIL_GOTO(1, LCX_ERR_OOM, fail, "%s: out of memory", path);
        }
        if (lcx_is_file(idx)) {
            free(single);
            st = open_index(s, idx);
            free(idx);
            LCX_TRY_GOTO(st, fail);
        } else {
            free(idx);
            if (lcx_is_file(single)) file = single;
            else {
                free(single);
                LCX_TRY_GOTO(find_lone_file(path, &file), fail);
            }
        }
    } else {
        s->dir = dir_of(path);
        LCX_FAIL_GOTO(!s->dir, LCX_ERR_OOM, fail, "%s: out of memory", path);
        if (ends_with(path, ".json")) LCX_TRY_GOTO(open_index(s, path), fail);
        else if (!(file = strdup(path))) LCX_FAIL_GOTO(1, LCX_ERR_OOM, fail, "%s: out of memory", path);
    }
    if (file) {
        LCX_TRY_GOTO(add_file(s, file), fail);
        LCX_TRY_GOTO(build_lookup(s), fail);
    }
    free(file);
    *out = s;
    return LCX_OK;
fail:
    free(file);
    lcx_st_set_close(s);
    return st;
}
