/* safetensors writer: one file (atomic, streamed from the callers' buffers) and sharded checkpoints with
 * model.safetensors.index.json as transformers writes them. */
#include "formats/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/hf_config.h"
#include "src/core/fileio.h"
#include "src/core/strbuf.h"

/* Position of each dtype in the reference's Dtype enum; its writer sorts by that, descending, then by name. */
static int dtype_rank(lcx_dtype dt) {
    static const lcx_dtype order[] = {
        LCX_BOOL,    LCX_F4,          LCX_F6_E2M3,     LCX_F6_E3M2, LCX_U8,  LCX_I8,  LCX_F8_E5M2, LCX_F8_E4M3,
        LCX_F8_E8M0, LCX_F8_E4M3FNUZ, LCX_F8_E5M2FNUZ, LCX_I16,     LCX_U16, LCX_F16, LCX_BF16,    LCX_I32,
        LCX_U32,     LCX_F32,         LCX_C64,         LCX_F64,     LCX_I64, LCX_U64,
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (order[i] == dt) return (int)i;
    return -1;
}

static int cmp_write_order(const void *a, const void *b) {
    const lcx_st_out_tensor *x = *(const lcx_st_out_tensor *const *)a, *y = *(const lcx_st_out_tensor *const *)b;
    int rx = dtype_rank(x->dtype), ry = dtype_rank(y->dtype);
    if (rx != ry) return rx > ry ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_out_name(const void *a, const void *b) {
    const lcx_st_out_tensor *x = *(const lcx_st_out_tensor *const *)a, *y = *(const lcx_st_out_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* Byte size of an output tensor after checking what the format can hold. */
static lcx_status out_tensor_bytes(const char *path, const lcx_st_out_tensor *t, uint64_t *bytes) {
    LCX_FAIL_IF(!t->name, LCX_ERR_INVALID, "%s: tensor without a name", path);
    LCX_FAIL_IF(strcmp(t->name, "__metadata__") == 0, LCX_ERR_INVALID,
                "%s: '__metadata__' cannot be a tensor name", path);
    LCX_FAIL_IF(dtype_rank(t->dtype) < 0, LCX_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s cannot be stored in safetensors",
                path, t->name, lcx_dtype_name(t->dtype));
    LCX_FAIL_IF(t->shape.ndim < 0 || t->shape.ndim > LCX_MAX_DIMS, LCX_ERR_INVALID, "%s: tensor '%s': bad rank %d",
                path, t->name, t->shape.ndim);
    for (int i = 0; i < t->shape.ndim; i++) /* JSON integers are signed 64-bit for the readers we care about */
        LCX_FAIL_IF(t->shape.dims[i] > (uint64_t)INT64_MAX, LCX_ERR_INVALID, "%s: tensor '%s': dimension too large",
                    path, t->name);
    uint64_t numel;
    if (lcx_shape_numel(&t->shape, &numel) != LCX_OK || lcx_dtype_nbytes(t->dtype, numel, bytes) != LCX_OK)
        return lcx_fail_context(LCX_ERR_INVALID, "%s: tensor '%s': ", path, t->name);
    LCX_FAIL_IF(*bytes > 0 && !t->data, LCX_ERR_INVALID, "%s: tensor '%s': no data", path, t->name);
    return LCX_OK;
}

/* Ordered, validated view of the tensors to write and the header bytes (padded). */
typedef struct st_plan {
    const lcx_st_out_tensor **ord;
    uint64_t *bytes; /* per entry of ord */
    char *header;
    size_t header_len; /* padded */
} st_plan;

static void plan_free(st_plan *p) {
    free(p->ord);
    free(p->bytes);
    free(p->header);
}

static lcx_status json_set(const char *path, json_t *obj, const char *key, json_t *val) {
    /* jansson refuses keys that are not valid UTF-8 (and steals val either way) */
    LCX_FAIL_IF(!val || json_object_set_new(obj, key, val) != 0, LCX_ERR_INVALID,
                "%s: cannot encode '%s' in the header (not valid UTF-8?)", path, key);
    return LCX_OK;
}

/* A JSON string escaped as serde_json (the reference writer) escapes it: \" \\ \b \f \n \r \t, other control
 * characters as \u00xx in lower case, everything else (DEL, non-ASCII UTF-8, '/') verbatim. */
static void sb_jstr(lcx_strbuf *b, const char *s) {
    lcx_strbuf_put(b, "\"", 1);
    for (const char *q = s; *q; q++) {
        unsigned char c = (unsigned char)*q;
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) lcx_strbuf_str(b, esc);
        else if (c < 0x20) {
            char t[8];
            snprintf(t, sizeof t, "\\u%04x", c);
            lcx_strbuf_str(b, t);
        } else lcx_strbuf_put(b, q, 1);
    }
    lcx_strbuf_put(b, "\"", 1);
}

/* Header strings must be valid UTF-8 (jansson's check, the same rules our reader applies). */
static lcx_status check_utf8(const char *path, const char *what, const char *s) {
    json_t *j = json_string(s);
    LCX_FAIL_IF(!j, LCX_ERR_INVALID, "%s: %s '%s' is not valid UTF-8", path, what, s);
    json_decref(j);
    return LCX_OK;
}

static lcx_status plan_build(const char *path, const lcx_st_out_tensor *tensors, size_t n,
                             const char *const *meta_keys, const char *const *meta_values, size_t n_meta,
                             st_plan *p) {
    memset(p, 0, sizeof *p);
    lcx_status st = LCX_OK;
    lcx_strbuf h = {0}; /* an allocation failure is sticky: checked once at the end */
    p->ord = malloc((n ? n : 1) * sizeof *p->ord);
    p->bytes = malloc((n ? n : 1) * sizeof *p->bytes);
    LCX_FAIL_GOTO(!p->ord || !p->bytes, LCX_ERR_OOM, fail, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        LCX_FAIL_GOTO(!tensors[i].name, LCX_ERR_INVALID, fail, "%s: tensor %zu has no name", path, i);
        p->ord[i] = &tensors[i];
    }
    /* duplicates: adjacent after sorting by name */
    qsort(p->ord, n, sizeof *p->ord, cmp_out_name);
    for (size_t i = 1; i < n; i++)
        LCX_FAIL_GOTO(strcmp(p->ord[i - 1]->name, p->ord[i]->name) == 0, LCX_ERR_INVALID, fail,
                      "%s: tensor '%s' given twice", path, p->ord[i]->name);
    for (size_t i = 0; i < n; i++) {
        LCX_TRY_GOTO(out_tensor_bytes(path, p->ord[i], &p->bytes[i]), fail);
        LCX_TRY_GOTO(check_utf8(path, "tensor name", p->ord[i]->name), fail);
    }
    qsort(p->ord, n, sizeof *p->ord, cmp_write_order);

    /* __metadata__: "format" first ("pt" unless an extra replaces it), then the extras in the given order */
    const char *format = "pt";
    for (size_t i = 0; i < n_meta; i++) {
        LCX_FAIL_GOTO(!meta_keys[i] || !meta_values[i], LCX_ERR_INVALID, fail, "%s: metadata entry %zu is NULL",
                      path, i);
        LCX_TRY_GOTO(check_utf8(path, "metadata key", meta_keys[i]), fail);
        LCX_TRY_GOTO(check_utf8(path, "metadata value", meta_values[i]), fail);
        for (size_t j = 0; j < i; j++)
            LCX_FAIL_GOTO(strcmp(meta_keys[i], meta_keys[j]) == 0, LCX_ERR_INVALID, fail,
                          "%s: metadata key '%s' given twice", path, meta_keys[i]);
        if (strcmp(meta_keys[i], "format") == 0) format = meta_values[i];
    }
    lcx_strbuf_str(&h, "{\"__metadata__\":{\"format\":");
    sb_jstr(&h, format);
    for (size_t i = 0; i < n_meta; i++) {
        if (strcmp(meta_keys[i], "format") == 0) continue;
        lcx_strbuf_put(&h, ",", 1);
        sb_jstr(&h, meta_keys[i]);
        lcx_strbuf_put(&h, ":", 1);
        sb_jstr(&h, meta_values[i]);
    }
    lcx_strbuf_put(&h, "}", 1);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const lcx_st_out_tensor *t = p->ord[i];
        uint64_t b = 0;
        LCX_TRY_GOTO(out_tensor_bytes(path, t, &b), fail); /* validated above; sizes again in write order */
        LCX_FAIL_GOTO(__builtin_add_overflow(off, b, &off) || off > (uint64_t)INT64_MAX, LCX_ERR_INVALID, fail,
                      "%s: total size overflows", path);
        lcx_strbuf_put(&h, ",", 1);
        sb_jstr(&h, t->name);
        lcx_strbuf_str(&h, ":{\"dtype\":\"");
        lcx_strbuf_str(&h, lcx_dtype_name(t->dtype));
        lcx_strbuf_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->shape.ndim; d++) {
            if (d) lcx_strbuf_put(&h, ",", 1);
            lcx_strbuf_printf(&h, "%llu", (unsigned long long)(t->shape.dims[d]));
        }
        lcx_strbuf_str(&h, "],\"data_offsets\":[");
        lcx_strbuf_printf(&h, "%llu", (unsigned long long)(off - b));
        lcx_strbuf_put(&h, ",", 1);
        lcx_strbuf_printf(&h, "%llu", (unsigned long long)(off));
        lcx_strbuf_str(&h, "]}");
        p->bytes[i] = b;
    }
    lcx_strbuf_put(&h, "}", 1);
    while (h.len % 8) lcx_strbuf_put(&h, " ", 1); /* pad with spaces to a multiple of 8, as the reference */
    LCX_FAIL_GOTO(h.oom, LCX_ERR_OOM, fail, "%s: out of memory building the header", path);
    p->header = h.s;
    p->header_len = h.len;
    return LCX_OK;
fail:
    lcx_strbuf_free(&h);
    plan_free(p);
    memset(p, 0, sizeof *p);
    return st;
}

lcx_status lcx_st_write(const char *path, const lcx_st_out_tensor *tensors, size_t n, const char *const *meta_keys,
                        const char *const *meta_values, size_t n_meta) {
    st_plan p;
    LCX_TRY(plan_build(path, tensors, n, meta_keys, meta_values, n_meta, &p));
    if (p.header_len > LCX_ST_MAX_HEADER) {
        plan_free(&p);
        return lcx_fail(LCX_ERR_INVALID, "%s: header of %zu bytes exceeds the %llu-byte limit", path, p.header_len,
                        LCX_ST_MAX_HEADER);
    }
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)p.header_len >> (8 * i));
    lcx_atomic_file af;
    lcx_status st = lcx_atomic_open(path, &af);
    if (st != LCX_OK) {
        plan_free(&p);
        return st;
    }
    st = lcx_atomic_write(&af, lenbuf, 8);
    if (st == LCX_OK) st = lcx_atomic_write(&af, p.header, p.header_len);
    for (size_t i = 0; i < n && st == LCX_OK; i++)
        if (p.bytes[i]) st = lcx_atomic_write(&af, p.ord[i]->data, (size_t)p.bytes[i]);
    plan_free(&p);
    if (st != LCX_OK) {
        lcx_atomic_abort(&af);
        return st;
    }
    return lcx_atomic_commit(&af);
}

lcx_status lcx_st_write_lazy(const char *path, const lcx_st_out_tensor *tensors, size_t n, lcx_st_fetch_fn fetch,
                             lcx_st_release_fn release, void *user) {
    static const uint8_t placeholder; /* stands for the data the plan checks for; never read */
    LCX_FAIL_IF(!fetch, LCX_ERR_INVALID, "%s: no fetch function", path);
    lcx_st_out_tensor *tmp = malloc((n ? n : 1) * sizeof *tmp);
    LCX_FAIL_IF(!tmp, LCX_ERR_OOM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        tmp[i] = tensors[i];
        tmp[i].data = &placeholder;
    }
    st_plan p;
    lcx_status st = plan_build(path, tmp, n, NULL, NULL, 0, &p);
    if (st != LCX_OK) {
        free(tmp);
        return st;
    }
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)p.header_len >> (8 * i));
    lcx_atomic_file af;
    if (p.header_len > LCX_ST_MAX_HEADER)
        st = lcx_fail(LCX_ERR_INVALID, "%s: header of %zu bytes exceeds the limit", path, p.header_len);
    if (st == LCX_OK) st = lcx_atomic_open(path, &af);
    if (st != LCX_OK) {
        plan_free(&p);
        free(tmp);
        return st;
    }
    st = lcx_atomic_write(&af, lenbuf, 8);
    if (st == LCX_OK) st = lcx_atomic_write(&af, p.header, p.header_len);
    for (size_t i = 0; i < n && st == LCX_OK; i++) {
        if (!p.bytes[i]) continue;
        size_t k = (size_t)(p.ord[i] - tmp);
        const void *data = NULL;
        st = fetch(user, k, &data);
        if (st == LCX_OK && !data) st = lcx_fail(LCX_ERR_INVALID, "%s: tensor '%s': fetch gave no data", path, tmp[k].name);
        if (st == LCX_OK) st = lcx_atomic_write(&af, data, (size_t)p.bytes[i]);
        if (release) release(user, k);
    }
    plan_free(&p);
    free(tmp);
    if (st != LCX_OK) {
        lcx_atomic_abort(&af);
        return st;
    }
    return lcx_atomic_commit(&af);
}

/* ---- sharded -------------------------------------------------------------------------------------------- */

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

/* "model-00001-of-00003.safetensors": 5-digit numbers, as huggingface_hub's "-{i:05d}-of-{n:05d}" suffix. */
static int is_shard_name(const char *s, unsigned *idx, unsigned *total) {
    static const char pat[] = "model-#####-of-#####.safetensors";
    if (strlen(s) != sizeof pat - 1) return 0;
    unsigned a = 0, b = 0;
    for (size_t i = 0; i < sizeof pat - 1; i++) {
        if (pat[i] != '#') {
            if (s[i] != pat[i]) return 0;
            continue;
        }
        if (s[i] < '0' || s[i] > '9') return 0;
        if (i < 11) a = a * 10 + (unsigned)(s[i] - '0');
        else b = b * 10 + (unsigned)(s[i] - '0');
    }
    *idx = a;
    *total = b;
    return 1;
}

/* Remove what a previous save of the other form left behind (keep_total: shard count written now, 0 = none). */
static lcx_status remove_stale(const char *dir, int remove_index, int remove_single, unsigned keep_total) {
    lcx_status st = LCX_OK;
    char *p;
    if (remove_index && (p = lcx_path_join(dir, ST_INDEX_NAME))) {
        if (unlink(p) != 0 && errno != ENOENT) st = lcx_fail(LCX_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
        free(p);
    }
    if (remove_single && (p = lcx_path_join(dir, ST_SINGLE_NAME))) {
        if (unlink(p) != 0 && errno != ENOENT) st = lcx_fail(LCX_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
        free(p);
    }
    DIR *d = opendir(dir);
    if (!d) return lcx_fail(LCX_ERR_IO, "%s: cannot list directory: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        unsigned idx, total;
        if (!is_shard_name(de->d_name, &idx, &total)) continue;
        if (total == keep_total && idx >= 1 && idx <= keep_total) continue;
        if ((p = lcx_path_join(dir, de->d_name))) {
            if (unlink(p) != 0 && errno != ENOENT)
                st = lcx_fail(LCX_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
            free(p);
        }
    }
    closedir(d);
    return st;
}

/* One shard's tensors as the sharded writer's: fetch and release with the index in the whole list. */
typedef struct shard_view {
    const size_t *index; /* shard entry -> tensor */
    lcx_st_fetch_fn fetch;
    lcx_st_release_fn release;
    void *user;
} shard_view;

static lcx_status shard_fetch(void *user, size_t k, const void **data) {
    const shard_view *v = user;
    return v->fetch(v->user, v->index[k], data);
}

static void shard_release(void *user, size_t k) {
    const shard_view *v = user;
    if (v->release) v->release(v->user, v->index[k]);
}

lcx_status lcx_st_write_sharded_lazy(const char *dir, const lcx_st_out_tensor *tensors, size_t n,
                                     uint64_t max_shard_bytes, lcx_st_fetch_fn fetch, lcx_st_release_fn release,
                                     void *user) {
    if (max_shard_bytes == 0) max_shard_bytes = LCX_ST_DEFAULT_SHARD_BYTES;
    LCX_FAIL_IF(!fetch, LCX_ERR_INVALID, "%s: no fetch function", dir);
    LCX_FAIL_IF(!lcx_is_dir(dir), LCX_ERR_NOT_FOUND, "%s: not a directory", dir);
    static const uint8_t placeholder; /* stands for the data out_tensor_bytes checks for; never read */
    lcx_status st = LCX_OK;
    size_t *shard_of = calloc(n ? n : 1, sizeof *shard_of), *part_index = calloc(n ? n : 1, sizeof *part_index);
    lcx_st_out_tensor *part = malloc((n ? n : 1) * sizeof *part);
    json_t *index = NULL;
    char *path = NULL;
    LCX_FAIL_GOTO(!shard_of || !part_index || !part, LCX_ERR_OOM, done, "%s: out of memory", dir);

    /* Assign shards exactly as huggingface_hub's split_state_dict_into_shards_factory. */
    size_t n_shards = 0, cur = (size_t)-1;
    uint64_t cur_bytes = 0, total_size = 0, total_params = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b, numel;
        lcx_st_out_tensor t = tensors[i];
        t.data = &placeholder;
        LCX_TRY_GOTO(out_tensor_bytes(dir, &t, &b), done);
        LCX_ASSERT(lcx_shape_numel(&t.shape, &numel) == LCX_OK);
        LCX_FAIL_GOTO(__builtin_add_overflow(total_size, b, &total_size) ||
                          __builtin_add_overflow(total_params, numel, &total_params),
                      LCX_ERR_INVALID, done, "%s: total size overflows", dir);
        if (b > max_shard_bytes) {
            shard_of[i] = n_shards++;
            continue;
        }
        if (cur == (size_t)-1 || cur_bytes + b > max_shard_bytes) {
            cur = n_shards++;
            cur_bytes = 0;
        }
        shard_of[i] = cur;
        cur_bytes += b;
    }
    if (n_shards == 0) n_shards = 1; /* no tensors: one empty model.safetensors */
    LCX_FAIL_GOTO(n_shards > 99999, LCX_ERR_INVALID, done, "%s: %zu shards are more than 99999", dir, n_shards);

    if (n_shards > 1) {
        index = json_object();
        json_t *meta = json_object(), *wmap = json_object();
        LCX_FAIL_GOTO(!index || !meta || !wmap, LCX_ERR_OOM, done, "%s: out of memory", dir);
        json_object_set_new(index, "metadata", meta);
        json_object_set_new(index, "weight_map", wmap);
        json_object_set_new(meta, "total_parameters", json_integer((json_int_t)total_params));
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total_size));
        /* The whole weight_map first: a duplicate name fails before any file is written. */
        for (size_t i = 0; i < n; i++) {
            char name[64];
            snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", shard_of[i] + 1, n_shards);
            LCX_FAIL_GOTO(json_object_get(wmap, tensors[i].name), LCX_ERR_INVALID, done,
                          "%s: tensor '%s' given twice", dir, tensors[i].name);
            LCX_TRY_GOTO(json_set(dir, wmap, tensors[i].name, json_string(name)), done);
        }
    }
    for (size_t sh = 0; sh < n_shards; sh++) {
        char name[64];
        if (n_shards == 1) snprintf(name, sizeof name, ST_SINGLE_NAME);
        else snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", sh + 1, n_shards);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (shard_of[i] != sh) continue;
            part[k] = tensors[i];
            part_index[k++] = i;
        }
        free(path);
        path = lcx_path_join(dir, name);
        LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "%s: out of memory", dir);
        shard_view v = {.index = part_index, .fetch = fetch, .release = release, .user = user};
        LCX_TRY_GOTO(lcx_st_write_lazy(path, part, k, shard_fetch, shard_release, &v), done);
    }
    free(path);
    path = NULL;
    /* the index last, as transformers writes it (json.dumps(indent=2, sort_keys=True) + "\n"); then what a save
     * of the other form left in dir */
    if (index) {
        path = lcx_path_join(dir, ST_INDEX_NAME);
        LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "%s: out of memory", dir);
        LCX_TRY_GOTO(lcx_json_write_hf(path, index), done);
    }
    st = n_shards == 1 ? remove_stale(dir, 1, 0, 0) : remove_stale(dir, 0, 1, (unsigned)n_shards);
done:
    json_decref(index);
    free(path);
    free(shard_of);
    free(part_index);
    free(part);
    return st;
}

static lcx_status eager_fetch(void *user, size_t i, const void **data) {
    *data = ((const lcx_st_out_tensor *)user)[i].data;
    return LCX_OK;
}

lcx_status lcx_st_write_sharded(const char *dir, const lcx_st_out_tensor *tensors, size_t n,
                                uint64_t max_shard_bytes) {
    for (size_t i = 0; i < n; i++) { /* checked here, since the lazy writer stands in for every tensor's data */
        uint64_t b;
        LCX_TRY(out_tensor_bytes(dir, &tensors[i], &b));
    }
    return lcx_st_write_sharded_lazy(dir, tensors, n, max_shard_bytes, eager_fetch, NULL, (void *)tensors);
}
