/* GGUF writer (atomic, tensor data streamed in chunks), ggml's Q8_0 reference quantiser, Q/K row permutation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "src/core/fileio.h"

typedef struct out_tensor {
    char *name;
    lcx_dtype type;
    uint32_t n_dims;
    uint64_t dims[LCX_GGUF_MAX_DIMS]; /* innermost first */
    uint64_t numel, nbytes;
    lcx_dtype src_dtype;
    const void *src;
    lcx_gguf_fetch_fn fetch; /* lazy tensors: src comes from fetch at write time */
    lcx_gguf_release_fn release;
    void *user;
    size_t key;
} out_tensor;

struct lcx_gguf_writer {
    uint32_t alignment;
    uint8_t *kv;             /* serialised KVs, in order added */
    size_t kv_len, kv_cap;
    size_t n_kv;
    char **keys;             /* for the uniqueness check */
    size_t keys_cap;
    out_tensor *tensors;
    size_t n_tensors, tensors_cap;
};

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

lcx_status lcx_gguf_writer_init(lcx_gguf_writer **out, uint32_t alignment) {
    *out = NULL;
    if (alignment == 0) alignment = LCX_GGUF_DEFAULT_ALIGNMENT;
    LCX_FAIL_IF((alignment & (alignment - 1)) != 0 || alignment > (1u << 30), LCX_ERR_INVALID,
                "GGUF alignment %u is not a power of two <= 2^30", alignment);
    lcx_gguf_writer *w = calloc(1, sizeof *w);
    LCX_FAIL_IF(!w, LCX_ERR_OOM, "out of memory");
    w->alignment = alignment;
    *out = w;
    return LCX_OK;
}

void lcx_gguf_writer_free(lcx_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    free(w);
}

/* ---- KV serialisation ------------------------------------------------------------------------------------ */

static lcx_status kv_reserve(lcx_gguf_writer *w, size_t extra) {
    size_t need;
    LCX_FAIL_IF(!lcx_add_size(w->kv_len, extra, &need), LCX_ERR_OOM, "GGUF metadata too large");
    if (need <= w->kv_cap) return LCX_OK;
    size_t cap = w->kv_cap ? w->kv_cap : 4096;
    while (cap < need) {
        LCX_FAIL_IF(cap > SIZE_MAX / 2, LCX_ERR_OOM, "GGUF metadata too large");
        cap *= 2;
    }
    uint8_t *p = realloc(w->kv, cap);
    LCX_FAIL_IF(!p, LCX_ERR_OOM, "cannot allocate %zu bytes of GGUF metadata", cap);
    w->kv = p;
    w->kv_cap = cap;
    return LCX_OK;
}

/* Caller reserved the room. */
static void put(lcx_gguf_writer *w, const void *p, size_t n) {
    if (n) memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}
static void put_le(lcx_gguf_writer *w, uint64_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; i++) w->kv[w->kv_len++] = (uint8_t)(v >> (8 * i));
}

static const unsigned scalar_size[LCX_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Check the key and write it with the value type; `value_bytes` is the size of what follows the type. */
static lcx_status begin_kv(lcx_gguf_writer *w, const char *key, lcx_gguf_type type, size_t value_bytes) {
    LCX_FAIL_IF(!key || !key[0], LCX_ERR_INVALID, "GGUF writer: empty key");
    LCX_FAIL_IF(strcmp(key, "general.alignment") == 0, LCX_ERR_INVALID,
                "GGUF writer: 'general.alignment' is set by lcx_gguf_writer_init, not as a KV");
    for (size_t i = 0; i < w->n_kv; i++)
        LCX_FAIL_IF(strcmp(w->keys[i], key) == 0, LCX_ERR_INVALID, "GGUF writer: duplicate key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? 2 * w->keys_cap : 32;
        char **k = realloc(w->keys, cap * sizeof *k);
        LCX_FAIL_IF(!k, LCX_ERR_OOM, "out of memory");
        w->keys = k;
        w->keys_cap = cap;
    }
    size_t klen = strlen(key), total;
    LCX_FAIL_IF(!lcx_add_size(12 + klen, value_bytes, &total), LCX_ERR_OOM, "GGUF value for '%s' too large", key);
    LCX_TRY(kv_reserve(w, total));
    char *k = dup_str(key);
    LCX_FAIL_IF(!k, LCX_ERR_OOM, "out of memory");
    w->keys[w->n_kv++] = k;
    put_le(w, klen, 8);
    put(w, key, klen);
    put_le(w, (uint64_t)type, 4);
    return LCX_OK;
}

static lcx_status add_scalar(lcx_gguf_writer *w, const char *key, lcx_gguf_type t, uint64_t bits) {
    LCX_TRY(begin_kv(w, key, t, scalar_size[t]));
    put_le(w, bits, scalar_size[t]);
    return LCX_OK;
}

lcx_status lcx_gguf_writer_add_u8(lcx_gguf_writer *w, const char *key, uint8_t v) { return add_scalar(w, key, LCX_GGUF_U8, v); }
lcx_status lcx_gguf_writer_add_i8(lcx_gguf_writer *w, const char *key, int8_t v) { return add_scalar(w, key, LCX_GGUF_I8, (uint8_t)v); }
lcx_status lcx_gguf_writer_add_u16(lcx_gguf_writer *w, const char *key, uint16_t v) { return add_scalar(w, key, LCX_GGUF_U16, v); }
lcx_status lcx_gguf_writer_add_i16(lcx_gguf_writer *w, const char *key, int16_t v) { return add_scalar(w, key, LCX_GGUF_I16, (uint16_t)v); }
lcx_status lcx_gguf_writer_add_u32(lcx_gguf_writer *w, const char *key, uint32_t v) { return add_scalar(w, key, LCX_GGUF_U32, v); }
lcx_status lcx_gguf_writer_add_i32(lcx_gguf_writer *w, const char *key, int32_t v) { return add_scalar(w, key, LCX_GGUF_I32, (uint32_t)v); }
lcx_status lcx_gguf_writer_add_u64(lcx_gguf_writer *w, const char *key, uint64_t v) { return add_scalar(w, key, LCX_GGUF_U64, v); }
lcx_status lcx_gguf_writer_add_i64(lcx_gguf_writer *w, const char *key, int64_t v) { return add_scalar(w, key, LCX_GGUF_I64, (uint64_t)v); }
lcx_status lcx_gguf_writer_add_bool(lcx_gguf_writer *w, const char *key, int v) { return add_scalar(w, key, LCX_GGUF_BOOL, v != 0); }

lcx_status lcx_gguf_writer_add_f32(lcx_gguf_writer *w, const char *key, float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return add_scalar(w, key, LCX_GGUF_F32, b);
}

lcx_status lcx_gguf_writer_add_f64(lcx_gguf_writer *w, const char *key, double v) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return add_scalar(w, key, LCX_GGUF_F64, b);
}

lcx_status lcx_gguf_writer_add_strn(lcx_gguf_writer *w, const char *key, const char *s, size_t len) {
    LCX_FAIL_IF(len && !s, LCX_ERR_INVALID, "GGUF writer: key '%s': NULL string", key ? key : "");
    LCX_FAIL_IF(len > SIZE_MAX - 8, LCX_ERR_OOM, "GGUF writer: string too long");
    LCX_TRY(begin_kv(w, key, LCX_GGUF_STRING, 8 + len));
    put_le(w, len, 8);
    put(w, s, len);
    return LCX_OK;
}

lcx_status lcx_gguf_writer_add_str(lcx_gguf_writer *w, const char *key, const char *s) {
    LCX_FAIL_IF(!s, LCX_ERR_INVALID, "GGUF writer: key '%s': NULL string", key ? key : "");
    return lcx_gguf_writer_add_strn(w, key, s, strlen(s));
}

lcx_status lcx_gguf_writer_add_array(lcx_gguf_writer *w, const char *key, lcx_gguf_type elem_type,
                                     const void *values, uint64_t count) {
    LCX_FAIL_IF((unsigned)elem_type >= LCX_GGUF_TYPE_COUNT || scalar_size[elem_type] == 0, LCX_ERR_INVALID,
                "GGUF writer: key '%s': arrays of %s are written with add_str_array or not at all", key ? key : "",
                lcx_gguf_type_name(elem_type));
    LCX_FAIL_IF(count && !values, LCX_ERR_INVALID, "GGUF writer: key '%s': NULL values", key ? key : "");
    size_t es = scalar_size[elem_type], bytes;
    LCX_FAIL_IF(count > SIZE_MAX || !lcx_mul_size((size_t)count, es, &bytes) || bytes > SIZE_MAX - 12,
                LCX_ERR_OOM, "GGUF writer: key '%s': array too large", key ? key : "");
    LCX_TRY(begin_kv(w, key, LCX_GGUF_ARRAY, 12 + bytes));
    put_le(w, (uint64_t)elem_type, 4);
    put_le(w, count, 8);
    const uint8_t *p = values;
    for (uint64_t i = 0; i < count; i++, p += es) {
        uint64_t v = 0;
        switch (es) {
        case 1: v = elem_type == LCX_GGUF_BOOL ? (p[0] != 0) : p[0]; break;
        case 2: { uint16_t x; memcpy(&x, p, 2); v = x; break; }
        case 4: { uint32_t x; memcpy(&x, p, 4); v = x; break; }
        default: memcpy(&v, p, 8); break;
        }
        put_le(w, v, (unsigned)es);
    }
    return LCX_OK;
}

lcx_status lcx_gguf_writer_add_str_array(lcx_gguf_writer *w, const char *key, const char *const *strs,
                                         const size_t *lens, uint64_t count) {
    LCX_FAIL_IF(count && !strs, LCX_ERR_INVALID, "GGUF writer: key '%s': NULL strings", key ? key : "");
    size_t bytes = 12;
    for (uint64_t i = 0; i < count; i++) {
        LCX_FAIL_IF(!strs[i] && (!lens || lens[i]), LCX_ERR_INVALID, "GGUF writer: key '%s': string %llu is NULL",
                    key ? key : "", (unsigned long long)i);
        size_t len = lens ? lens[i] : strlen(strs[i]);
        LCX_FAIL_IF(!lcx_add_size(bytes, 8, &bytes) || !lcx_add_size(bytes, len, &bytes), LCX_ERR_OOM,
                    "GGUF writer: key '%s': array too large", key ? key : "");
    }
    LCX_TRY(begin_kv(w, key, LCX_GGUF_ARRAY, bytes));
    put_le(w, LCX_GGUF_STRING, 4);
    put_le(w, count, 8);
    for (uint64_t i = 0; i < count; i++) {
        size_t len = lens ? lens[i] : strlen(strs[i]);
        put_le(w, len, 8);
        put(w, strs[i], len);
    }
    return LCX_OK;
}

/* ---- tensors --------------------------------------------------------------------------------------------- */

static lcx_status add_tensor(lcx_gguf_writer *w, const char *name, lcx_dtype type, const lcx_shape *shape,
                             lcx_dtype src_dtype, const void *src, lcx_gguf_fetch_fn fetch);

lcx_status lcx_gguf_writer_add_tensor(lcx_gguf_writer *w, const char *name, lcx_dtype type, const lcx_shape *shape,
                                      lcx_dtype src_dtype, const void *src) {
    return add_tensor(w, name, type, shape, src_dtype, src, NULL);
}

lcx_status lcx_gguf_writer_add_tensor_lazy(lcx_gguf_writer *w, const char *name, lcx_dtype type,
                                           const lcx_shape *shape, lcx_dtype src_dtype, lcx_gguf_fetch_fn fetch,
                                           lcx_gguf_release_fn release, void *user, size_t key) {
    LCX_FAIL_IF(!fetch, LCX_ERR_INVALID, "GGUF writer: tensor '%s': no fetch function", name ? name : "");
    LCX_TRY(add_tensor(w, name, type, shape, src_dtype, NULL, fetch));
    out_tensor *t = &w->tensors[w->n_tensors - 1];
    t->release = release;
    t->user = user;
    t->key = key;
    return LCX_OK;
}

static lcx_status add_tensor(lcx_gguf_writer *w, const char *name, lcx_dtype type, const lcx_shape *shape,
                             lcx_dtype src_dtype, const void *src, lcx_gguf_fetch_fn fetch) {
    LCX_FAIL_IF(!name || !name[0], LCX_ERR_INVALID, "GGUF writer: empty tensor name");
    LCX_FAIL_IF(strlen(name) > LCX_GGUF_MAX_NAME, LCX_ERR_INVALID,
                "GGUF writer: tensor '%s': name longer than %d bytes (llama.cpp's limit)", name, LCX_GGUF_MAX_NAME);
    LCX_FAIL_IF(type != LCX_F32 && type != LCX_F16 && type != LCX_BF16 && type != LCX_Q8_0, LCX_ERR_UNSUPPORTED,
                "GGUF writer: tensor '%s': cannot write dtype %s (F32, F16, BF16 or Q8_0)", name,
                lcx_dtype_name(type));
    LCX_FAIL_IF(src_dtype != type && !lcx_dtype_is_float_loadable(src_dtype), LCX_ERR_UNSUPPORTED,
                "GGUF writer: tensor '%s': cannot convert source dtype %s", name, lcx_dtype_name(src_dtype));
    LCX_FAIL_IF(shape->ndim < 1 || shape->ndim > LCX_GGUF_MAX_DIMS, LCX_ERR_INVALID,
                "GGUF writer: tensor '%s': rank %d (GGUF holds 1 to 4 dims)", name, shape->ndim);
    for (size_t i = 0; i < w->n_tensors; i++)
        LCX_FAIL_IF(strcmp(w->tensors[i].name, name) == 0, LCX_ERR_INVALID, "GGUF writer: duplicate tensor '%s'",
                    name);
    out_tensor t = {.type = type, .n_dims = (uint32_t)shape->ndim, .src_dtype = src_dtype, .src = src, .fetch = fetch};
    for (uint32_t d = 0; d < LCX_GGUF_MAX_DIMS; d++)
        t.dims[d] = d < t.n_dims ? shape->dims[t.n_dims - 1 - d] : 1;
    if (type == LCX_Q8_0)
        LCX_FAIL_IF(t.dims[0] % 32 != 0, LCX_ERR_INVALID,
                    "GGUF writer: tensor '%s': Q8_0 needs the last dim to be a multiple of 32, got %llu", name,
                    (unsigned long long)t.dims[0]);
    lcx_status st = lcx_shape_numel(shape, &t.numel);
    if (st != LCX_OK) return lcx_fail_context(st, "GGUF writer: tensor '%s': ", name);
    LCX_FAIL_IF(t.numel > (uint64_t)INT64_MAX, LCX_ERR_INVALID, "GGUF writer: tensor '%s' too large", name);
    st = lcx_dtype_nbytes(type, t.numel, &t.nbytes);
    if (st != LCX_OK) return lcx_fail_context(st, "GGUF writer: tensor '%s': ", name);
    LCX_FAIL_IF(t.numel && !src && !fetch, LCX_ERR_INVALID, "GGUF writer: tensor '%s': NULL data", name);
    if (w->n_tensors == w->tensors_cap) {
        size_t cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
        out_tensor *p = realloc(w->tensors, cap * sizeof *p);
        LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
        w->tensors = p;
        w->tensors_cap = cap;
    }
    t.name = dup_str(name);
    LCX_FAIL_IF(!t.name, LCX_ERR_OOM, "out of memory");
    w->tensors[w->n_tensors++] = t;
    return LCX_OK;
}

/* ---- Q8_0 ------------------------------------------------------------------------------------------------ */

lcx_status lcx_quantize_q8_0(const float *src, uint8_t *dst, size_t n) {
    LCX_FAIL_IF(n % 32 != 0, LCX_ERR_INVALID, "Q8_0: %zu values are not whole 32-value blocks", n);
    for (size_t b = 0; b < n / 32; b++) {
        const float *x = src + 32 * b;
        uint8_t *y = dst + 34 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            LCX_FAIL_IF(!isfinite(x[j]), LCX_ERR_INVALID, "Q8_0: non-finite value at element %zu", 32 * b + j);
            float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        /* ggml's reference: scale by the reciprocal, round half away from zero (roundf). */
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = lcx_f32_to_f16(d);
        LCX_FAIL_IF((dh & 0x7c00) == 0x7c00, LCX_ERR_INVALID, "Q8_0: block %zu scale %g overflows f16", b, (double)d);
        y[0] = (uint8_t)dh;
        y[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++) y[2 + j] = (uint8_t)(int8_t)(int)roundf(x[j] * id);
    }
    return LCX_OK;
}

/* ---- file output ----------------------------------------------------------------------------------------- */

typedef struct bufout {
    lcx_atomic_file af;
    uint8_t *buf;
    size_t len, cap;
    uint64_t written; /* bytes of the file so far, buffered included */
} bufout;

static lcx_status out_flush(bufout *o) {
    if (o->len) LCX_TRY(lcx_atomic_write(&o->af, o->buf, o->len));
    o->len = 0;
    return LCX_OK;
}

static lcx_status out_write(bufout *o, const void *p, size_t n) {
    const uint8_t *s = p;
    o->written += n;
    while (n) {
        if (o->len == 0 && n >= o->cap) return lcx_atomic_write(&o->af, s, n);
        size_t k = o->cap - o->len < n ? o->cap - o->len : n;
        memcpy(o->buf + o->len, s, k);
        o->len += k, s += k, n -= k;
        if (o->len == o->cap) LCX_TRY(out_flush(o));
    }
    return LCX_OK;
}

static lcx_status out_le(bufout *o, uint64_t v, unsigned bytes) {
    uint8_t b[8];
    for (unsigned i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    return out_write(o, b, bytes);
}

static lcx_status out_pad(bufout *o, uint32_t align) {
    static const uint8_t zeros[256];
    uint64_t pad = (align - o->written % align) % align;
    while (pad) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        LCX_TRY(out_write(o, zeros, k));
        pad -= k;
    }
    return LCX_OK;
}

#define CHUNK_ELEMS 65536 /* a multiple of every block size */

static lcx_status write_tensor_data(bufout *o, const out_tensor *t, float *f32, uint8_t *conv) {
    if (t->src_dtype == t->type) return out_write(o, t->src, (size_t)t->nbytes);
    const uint8_t *src = t->src;
    for (uint64_t i = 0; i < t->numel; i += CHUNK_ELEMS) {
        size_t n = (size_t)(t->numel - i < CHUNK_ELEMS ? t->numel - i : CHUNK_ELEMS);
        uint64_t off, bytes;
        LCX_TRY(lcx_dtype_nbytes(t->src_dtype, i, &off));
        LCX_TRY(lcx_convert_to_f32(t->src_dtype, src + off, f32, n));
        if (t->type == LCX_Q8_0) {
            lcx_status st = lcx_quantize_q8_0(f32, conv, n);
            if (st != LCX_OK) return lcx_fail_context(st, "tensor '%s': ", t->name);
        } else {
            LCX_TRY(lcx_convert_from_f32(t->type, f32, conv, n));
        }
        LCX_TRY(lcx_dtype_nbytes(t->type, n, &bytes));
        LCX_TRY(out_write(o, conv, (size_t)bytes));
    }
    return LCX_OK;
}

lcx_status lcx_gguf_writer_write(lcx_gguf_writer *w, const char *path) {
    lcx_status st;
    bufout o = {.cap = 1 << 20};
    float *f32 = malloc(CHUNK_ELEMS * sizeof(float));
    uint8_t *conv = malloc(CHUNK_ELEMS * sizeof(float));
    o.buf = malloc(o.cap);
    o.af.fd = -1;
    LCX_FAIL_GOTO(!f32 || !conv || !o.buf, LCX_ERR_OOM, done, "%s: out of memory", path);
    LCX_TRY_GOTO(lcx_atomic_open_new(path, &o.af), done); /* never replaces what is at path */

    int custom_align = w->alignment != LCX_GGUF_DEFAULT_ALIGNMENT;
    LCX_TRY_GOTO(out_write(&o, "GGUF", 4), fail);
    LCX_TRY_GOTO(out_le(&o, LCX_GGUF_VERSION, 4), fail);
    LCX_TRY_GOTO(out_le(&o, w->n_tensors, 8), fail);
    LCX_TRY_GOTO(out_le(&o, w->n_kv + (size_t)custom_align, 8), fail);
    if (custom_align) {
        static const char k[] = "general.alignment";
        LCX_TRY_GOTO(out_le(&o, sizeof k - 1, 8), fail);
        LCX_TRY_GOTO(out_write(&o, k, sizeof k - 1), fail);
        LCX_TRY_GOTO(out_le(&o, LCX_GGUF_U32, 4), fail);
        LCX_TRY_GOTO(out_le(&o, w->alignment, 4), fail);
    }
    LCX_TRY_GOTO(out_write(&o, w->kv, w->kv_len), fail);

    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const out_tensor *t = &w->tensors[i];
        size_t nlen = strlen(t->name);
        LCX_TRY_GOTO(out_le(&o, nlen, 8), fail);
        LCX_TRY_GOTO(out_write(&o, t->name, nlen), fail);
        LCX_TRY_GOTO(out_le(&o, t->n_dims, 4), fail);
        for (uint32_t d = 0; d < t->n_dims; d++) LCX_TRY_GOTO(out_le(&o, t->dims[d], 8), fail);
        LCX_TRY_GOTO(out_le(&o, (uint64_t)lcx_dtype_to_ggml_type(t->type), 4), fail);
        LCX_TRY_GOTO(out_le(&o, offset, 8), fail);
        uint64_t padded = (t->nbytes + w->alignment - 1) / w->alignment * w->alignment;
        LCX_FAIL_GOTO(__builtin_add_overflow(offset, padded, &offset), LCX_ERR_INVALID, fail,
                      "%s: tensor data too large", path);
    }
    LCX_TRY_GOTO(out_pad(&o, w->alignment), fail);
    for (size_t i = 0; i < w->n_tensors; i++) {
        out_tensor t = w->tensors[i];
        st = t.fetch && t.numel ? t.fetch(t.user, t.key, &t.src) : LCX_OK;
        if (st == LCX_OK && t.numel && !t.src) st = lcx_fail(LCX_ERR_INVALID, "tensor '%s': fetch gave no data", t.name);
        if (st == LCX_OK) st = write_tensor_data(&o, &t, f32, conv);
        if (t.fetch && t.release && t.numel) t.release(t.user, t.key);
        if (st != LCX_OK) {
            if (strncmp(lcx_last_error(), path, strlen(path)) != 0) /* a write failure names the file already */
                lcx_fail_context(st, "%s: ", path);
            goto fail;
        }
        LCX_TRY_GOTO(out_pad(&o, w->alignment), fail);
    }
    LCX_TRY_GOTO(out_flush(&o), fail);
    LCX_TRY_GOTO(lcx_atomic_commit(&o.af), fail);
    st = LCX_OK;
    goto done;
fail:
    lcx_atomic_abort(&o.af);
done:
    free(f32);
    free(conv);
    free(o.buf);
    return st;
}

/* ---- Q/K permutation ------------------------------------------------------------------------------------- */

static lcx_status permute(void *dst, const void *src, size_t rows, size_t cols, size_t es, size_t n_head, int inv) {
    LCX_FAIL_IF(n_head == 0 || rows % n_head != 0, LCX_ERR_INVALID,
                "Q/K permutation: %zu rows do not split into %zu heads", rows, n_head);
    size_t d = rows / n_head, rb;
    LCX_FAIL_IF(d % 2 != 0, LCX_ERR_INVALID, "Q/K permutation: head size %zu is odd", d);
    LCX_FAIL_IF(!lcx_mul_size(cols, es, &rb), LCX_ERR_INVALID, "Q/K permutation: row size overflows");
    const uint8_t *s = src;
    uint8_t *o = dst;
    for (size_t h = 0; h < n_head; h++)
        for (size_t j = 0; j < d / 2; j++)
            for (size_t k = 0; k < 2; k++) {
                size_t gguf_row = h * d + 2 * j + k, hf_row = h * d + k * (d / 2) + j;
                size_t to = inv ? hf_row : gguf_row, from = inv ? gguf_row : hf_row;
                if (rb) memcpy(o + to * rb, s + from * rb, rb);
            }
    return LCX_OK;
}

lcx_status lcx_gguf_permute_qk(void *dst, const void *src, size_t rows, size_t cols, size_t elem_size,
                               size_t n_head) {
    return permute(dst, src, rows, cols, elem_size, n_head, 0);
}

lcx_status lcx_gguf_unpermute_qk(void *dst, const void *src, size_t rows, size_t cols, size_t elem_size,
                                 size_t n_head) {
    return permute(dst, src, rows, cols, elem_size, n_head, 1);
}
