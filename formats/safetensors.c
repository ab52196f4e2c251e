/* safetensors reader: validation of every header rule, zero-copy views into the mapping. Writer in
 * safetensors_write.c, sets (sharded checkpoints) in safetensors_set.c. */
#include "formats/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"

/* Rust's str::from_utf8 rules: no overlong forms, no surrogates, nothing above U+10FFFF. Returns the offset of
 * the first bad byte, or n when the whole buffer is valid. */
static size_t utf8_check(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint8_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c == 0xe0) { len = 3; lo = 0xa0; }
        else if (c >= 0xe1 && c <= 0xec) len = 3;
        else if (c == 0xed) { len = 3; hi = 0x9f; }
        else if (c >= 0xee && c <= 0xef) len = 3;
        else if (c == 0xf0) { len = 4; lo = 0x90; }
        else if (c >= 0xf1 && c <= 0xf3) len = 4;
        else if (c == 0xf4) { len = 4; hi = 0x8f; }
        else return i;
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80) return i;
        i += len;
    }
    return n;
}

void lcx_st_close(lcx_st_file *f) {
    if (!f) return;
    if (f->owns_mapping) {
        lcx_mapping m = {f->base, f->size};
        lcx_unmap(&m);
    }
    for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->by_name);
    free(f->path);
    free(f);
}

static int cmp_name(const void *a, const void *b) {
    const lcx_st_tensor *x = *(const lcx_st_tensor *const *)a, *y = *(const lcx_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* Order of the tiling check: by begin, then end (zero-size tensors before the tensor that starts where they
 * sit, as the reference sorts), then name so messages are deterministic. */
static int cmp_offsets(const void *a, const void *b) {
    const lcx_st_tensor *x = *(const lcx_st_tensor *const *)a, *y = *(const lcx_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

const lcx_st_tensor *lcx_st_find(const lcx_st_file *f, const char *name) {
    if (!f || !f->by_name) return NULL;
    lcx_st_tensor key = {.name = (char *)name};
    const lcx_st_tensor *kp = &key;
    const lcx_st_tensor **hit = bsearch(&kp, f->by_name, f->n_tensors, sizeof *f->by_name, cmp_name);
    return hit ? *hit : NULL;
}

const char *lcx_st_meta(const lcx_st_file *f, const char *key) {
    if (!f) return NULL;
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

/* A JSON integer >= 0 into *v. */
static int json_uint(const json_t *j, uint64_t *v) {
    if (!json_is_integer(j) || json_integer_value(j) < 0) return 0;
    *v = (uint64_t)json_integer_value(j);
    return 1;
}

static lcx_status parse_metadata(const char *label, json_t *meta, lcx_st_file *f) {
    if (json_is_null(meta)) return LCX_OK; /* the reference reads it as an absent Option */
    LCX_FAIL_IF(!json_is_object(meta), LCX_ERR_FORMAT, "%s: __metadata__ is not an object", label);
    size_t n = json_object_size(meta);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    LCX_FAIL_IF(!f->meta_keys || !f->meta_values, LCX_ERR_OOM, "%s: out of memory", label);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        LCX_FAIL_IF(!json_is_string(v), LCX_ERR_FORMAT, "%s: __metadata__ key '%s': value is not a string", label,
                    k);
        f->meta_keys[f->n_meta] = strdup(k);
        f->meta_values[f->n_meta] = strdup(json_string_value(v));
        f->n_meta++;
        LCX_FAIL_IF(!f->meta_keys[f->n_meta - 1] || !f->meta_values[f->n_meta - 1], LCX_ERR_OOM,
                    "%s: out of memory", label);
    }
    return LCX_OK;
}

/* One header entry: dtype, shape, data_offsets, and the size rule end-begin == numel*bits/8. */
static lcx_status parse_tensor(const char *label, const char *name, json_t *e, lcx_st_tensor *t) {
    LCX_FAIL_IF(!json_is_object(e), LCX_ERR_FORMAT, "%s: tensor '%s': entry is not an object", label, name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    LCX_FAIL_IF(!jd, LCX_ERR_FORMAT, "%s: tensor '%s': missing dtype", label, name);
    LCX_FAIL_IF(!js, LCX_ERR_FORMAT, "%s: tensor '%s': missing shape", label, name);
    LCX_FAIL_IF(!jo, LCX_ERR_FORMAT, "%s: tensor '%s': missing data_offsets", label, name);
    LCX_FAIL_IF(!json_is_string(jd), LCX_ERR_FORMAT, "%s: tensor '%s': dtype is not a string", label, name);
    t->dtype = lcx_dtype_from_name(json_string_value(jd));
    LCX_FAIL_IF(t->dtype == LCX_DTYPE_INVALID, LCX_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", label, name,
                json_string_value(jd));

    LCX_FAIL_IF(!json_is_array(js), LCX_ERR_FORMAT, "%s: tensor '%s': shape is not an array", label, name);
    size_t nd = json_array_size(js);
    LCX_FAIL_IF(nd > LCX_MAX_DIMS, LCX_ERR_UNSUPPORTED, "%s: tensor '%s': shape has %zu dimensions, more than the %d supported",
                label, name, nd, LCX_MAX_DIMS);
    t->shape.ndim = (int)nd;
    for (size_t i = 0; i < nd; i++)
        LCX_FAIL_IF(!json_uint(json_array_get(js, i), &t->shape.dims[i]), LCX_ERR_FORMAT,
                    "%s: tensor '%s': shape[%zu] is not a non-negative integer", label, name, i);

    LCX_FAIL_IF(!json_is_array(jo) || json_array_size(jo) != 2, LCX_ERR_FORMAT,
                "%s: tensor '%s': data_offsets is not an array [begin, end]", label, name);
    LCX_FAIL_IF(!json_uint(json_array_get(jo, 0), &t->begin) || !json_uint(json_array_get(jo, 1), &t->end),
                LCX_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", label, name);
    LCX_FAIL_IF(t->end < t->begin, LCX_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu,%llu] end before they begin",
                label, name, (unsigned long long)t->begin, (unsigned long long)t->end);

    char sh[256];
    uint64_t numel, bytes;
    if (lcx_shape_numel(&t->shape, &numel) != LCX_OK)
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': element count of shape %s overflows", label, name,
                        lcx_shape_str(&t->shape, sh, sizeof sh));
    if (lcx_dtype_nbytes(t->dtype, numel, &bytes) != LCX_OK)
        return lcx_fail_context(LCX_ERR_FORMAT, "%s: tensor '%s': shape %s x %s: ", label, name,
                                lcx_shape_str(&t->shape, sh, sizeof sh), lcx_dtype_name(t->dtype));
    LCX_FAIL_IF(t->end - t->begin != bytes, LCX_ERR_FORMAT,
                "%s: tensor '%s': data_offsets [%llu,%llu] do not match shape %s x %s (%llu bytes)", label, name,
                (unsigned long long)t->begin, (unsigned long long)t->end, lcx_shape_str(&t->shape, sh, sizeof sh),
                lcx_dtype_name(t->dtype), (unsigned long long)bytes);
    return LCX_OK;
}

/* Sorted by offsets, the tensors must cover [0, data_len) exactly, without gaps or overlaps. */
static lcx_status check_tiling(const char *label, lcx_st_file *f, uint64_t data_len) {
    const lcx_st_tensor **ord = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *ord);
    LCX_FAIL_IF(!ord, LCX_ERR_OOM, "%s: out of memory", label);
    for (size_t i = 0; i < f->n_tensors; i++) ord[i] = &f->tensors[i];
    qsort(ord, f->n_tensors, sizeof *ord, cmp_offsets);
    lcx_status st = LCX_OK;
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < f->n_tensors && st == LCX_OK; i++) {
        const lcx_st_tensor *t = ord[i];
        if (t->begin > pos && !prev)
            st = lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu,%llu]: the first tensor must begin at 0",
                          label, t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
        else if (t->begin > pos)
            st = lcx_fail(LCX_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu,%llu] leave a gap after tensor '%s' (ends at %llu)",
                          label, t->name, (unsigned long long)t->begin, (unsigned long long)t->end, prev,
                          (unsigned long long)pos);
        else if (t->begin < pos)
            st = lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu,%llu] overlap tensor '%s' (ends at %llu)",
                          label, t->name, (unsigned long long)t->begin, (unsigned long long)t->end, prev,
                          (unsigned long long)pos);
        pos = t->end;
        prev = t->name;
    }
    free(ord);
    LCX_TRY(st);
    LCX_FAIL_IF(pos < data_len, LCX_ERR_FORMAT,
                "%s: %llu trailing bytes after the last tensor (data buffer is %llu bytes, tensors cover %llu)", label,
                (unsigned long long)(data_len - pos), (unsigned long long)data_len, (unsigned long long)pos);
    LCX_FAIL_IF(pos > data_len, LCX_ERR_FORMAT,
                "%s: file is truncated: tensors need a %llu-byte data buffer, only %llu bytes follow the header",
                label, (unsigned long long)pos, (unsigned long long)data_len);
    return LCX_OK;
}

static lcx_status parse_into(const char *label, const uint8_t *buf, size_t size, lcx_st_file *f) {
    LCX_FAIL_IF(size < 8, LCX_ERR_FORMAT, "%s: file is %zu bytes, too small for the 8-byte header length", label,
                size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    LCX_FAIL_IF(n > LCX_ST_MAX_HEADER, LCX_ERR_FORMAT, "%s: header length %llu exceeds the limit of %llu bytes",
                label, (unsigned long long)n, LCX_ST_MAX_HEADER);
    LCX_FAIL_IF(n > size - 8, LCX_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)",
                label, (unsigned long long)n, size);
    const uint8_t *hdr = buf + 8;
    size_t bad = utf8_check(hdr, (size_t)n);
    LCX_FAIL_IF(bad != n, LCX_ERR_FORMAT, "%s: header is not valid UTF-8 (byte %zu of the header)", label, bad);

    json_error_t jerr;
    json_t *root = json_loadb((const char *)hdr, (size_t)n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    LCX_FAIL_IF(!root, LCX_ERR_FORMAT, "%s: header is not valid JSON: %s (line %d, column %d)", label, jerr.text,
                jerr.line, jerr.column);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!json_is_object(root), LCX_ERR_FORMAT, done, "%s: header is not a JSON object", label);

    size_t cap = json_object_size(root);
    f->tensors = calloc(cap ? cap : 1, sizeof *f->tensors);
    LCX_FAIL_GOTO(!f->tensors, LCX_ERR_OOM, done, "%s: out of memory", label);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            LCX_TRY_GOTO(parse_metadata(label, val, f), done);
            continue;
        }
        lcx_st_tensor *t = &f->tensors[f->n_tensors];
        LCX_TRY_GOTO(parse_tensor(label, key, val, t), done);
        t->name = strdup(key);
        LCX_FAIL_GOTO(!t->name, LCX_ERR_OOM, done, "%s: out of memory", label);
        f->n_tensors++;
    }
    uint64_t data_len = (uint64_t)size - 8 - n;
    LCX_TRY_GOTO(check_tiling(label, f, data_len), done);

    f->by_name = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *f->by_name);
    LCX_FAIL_GOTO(!f->by_name, LCX_ERR_OOM, done, "%s: out of memory", label);
    for (size_t i = 0; i < f->n_tensors; i++) {
        lcx_st_tensor *t = &f->tensors[i];
        t->data = t->end > t->begin ? hdr + n + t->begin : NULL;
        f->by_name[i] = t;
    }
    qsort(f->by_name, f->n_tensors, sizeof *f->by_name, cmp_name);
done:
    json_decref(root);
    return st;
}

lcx_status lcx_st_parse(const char *label, const uint8_t *buf, size_t size, lcx_st_file **out) {
    *out = NULL;
    lcx_st_file *f = calloc(1, sizeof *f);
    LCX_FAIL_IF(!f, LCX_ERR_OOM, "%s: out of memory", label);
    f->path = strdup(label);
    f->base = buf;
    f->size = size;
    lcx_status st = f->path ? parse_into(label, buf, size, f) : lcx_fail(LCX_ERR_OOM, "%s: out of memory", label);
    if (st != LCX_OK) {
        lcx_st_close(f);
        return st;
    }
    *out = f;
    return LCX_OK;
}

lcx_status lcx_st_open(const char *path, lcx_st_file **out) {
    *out = NULL;
    lcx_mapping m;
    LCX_TRY(lcx_map_file(path, &m));
    lcx_st_file *f = NULL;
    lcx_status st = lcx_st_parse(path, m.data, m.size, &f);
    if (st != LCX_OK) {
        lcx_unmap(&m);
        return st;
    }
    f->owns_mapping = 1;
    *out = f;
    return LCX_OK;
}
