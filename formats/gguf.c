/* GGUF reader: every length, count, offset and shape is checked against the file size before use. */
#include "formats/gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"

/* ---- type tables ----------------------------------------------------------------------------------------- */

static const char *const value_type_names[LCX_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
/* Bytes of a scalar value; strings and arrays: the minimum (a u64 length / elem type + count). */
static const unsigned value_type_size[LCX_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

const char *lcx_gguf_type_name(uint32_t type) {
    return type < LCX_GGUF_TYPE_COUNT ? value_type_names[type] : "?";
}

typedef struct ggml_type_info {
    const char *name;
    uint32_t block_elems, block_bytes;
} ggml_type_info;

/* ggml's type ids (ids 4, 5, 31-33 and 36-38 were removed from ggml and stay unknown). */
static const ggml_type_info ggml_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},     [3] = {"Q4_1", 32, 20},
    [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},     [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 40},
    [10] = {"Q2_K", 256, 84},   [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50}, [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},  [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},       [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},  [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

const char *lcx_ggml_type_name(uint32_t t) {
    return t < N_GGML_TYPES && ggml_types[t].name ? ggml_types[t].name : "?";
}

int lcx_ggml_type_block(uint32_t t, uint64_t *block_elems, uint64_t *block_bytes) {
    if (t >= N_GGML_TYPES || !ggml_types[t].name) return 0;
    *block_elems = ggml_types[t].block_elems;
    *block_bytes = ggml_types[t].block_bytes;
    return 1;
}

lcx_dtype lcx_ggml_type_to_dtype(uint32_t t) {
    switch (t) {
    case LCX_GGML_F32: return LCX_F32;
    case LCX_GGML_F16: return LCX_F16;
    case LCX_GGML_BF16: return LCX_BF16;
    case LCX_GGML_Q8_0: return LCX_Q8_0;
    case LCX_GGML_Q4_0: return LCX_Q4_0;
    case LCX_GGML_Q4_1: return LCX_Q4_1;
    default: return LCX_DTYPE_INVALID;
    }
}

int lcx_dtype_to_ggml_type(lcx_dtype dt) {
    switch (dt) {
    case LCX_F32: return LCX_GGML_F32;
    case LCX_F16: return LCX_GGML_F16;
    case LCX_BF16: return LCX_GGML_BF16;
    case LCX_Q8_0: return LCX_GGML_Q8_0;
    case LCX_Q4_0: return LCX_GGML_Q4_0;
    case LCX_Q4_1: return LCX_GGML_Q4_1;
    default: return -1;
    }
}

/* ---- cursor over the file image -------------------------------------------------------------------------- */

typedef struct cursor {
    const char *label;
    const uint8_t *buf;
    size_t size, pos;
    char what[160]; /* the item being read, for truncation messages */
} cursor;

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static lcx_status need(cursor *c, uint64_t n) {
    if (n > remaining(c))
        return lcx_fail(LCX_ERR_FORMAT, "%s: %s: truncated: needs %llu bytes at offset %zu, only %zu left", c->label,
                        c->what, (unsigned long long)n, c->pos, remaining(c));
    return LCX_OK;
}

static lcx_status rd_u32(cursor *c, uint32_t *v) {
    *v = 0;
    LCX_TRY(need(c, 4));
    *v = le32(c->buf + c->pos);
    c->pos += 4;
    return LCX_OK;
}

static lcx_status rd_u64(cursor *c, uint64_t *v) {
    *v = 0;
    LCX_TRY(need(c, 8));
    *v = le64(c->buf + c->pos);
    c->pos += 8;
    return LCX_OK;
}

/* A string: u64 length (bounded by the bytes left) then the bytes; returns a view (NULL, 0 on failure). */
static lcx_status rd_str(cursor *c, const uint8_t **s, uint64_t *len) {
    *s = NULL;
    LCX_TRY(rd_u64(c, len));
    if (*len > remaining(c)) {
        lcx_status st = lcx_fail(LCX_ERR_FORMAT, "%s: %s: string length %llu at offset %zu exceeds the %zu bytes left",
                                 c->label, c->what, (unsigned long long)*len, c->pos - 8, remaining(c));
        *len = 0;
        return st;
    }
    *s = c->buf + c->pos;
    c->pos += (size_t)*len;
    return LCX_OK;
}

static char *dup_bytes(const uint8_t *s, size_t len) {
    char *d = malloc(len + 1);
    if (d) {
        if (len) memcpy(d, s, len);
        d[len] = 0;
    }
    return d;
}

/* Printable, shortened copy of a hostile name for messages (control bytes escaped, long names cut). */
static void safe_name(char *out, size_t cap, const uint8_t *s, uint64_t len) {
    size_t o = 0;
    uint64_t i = 0;
    for (; i < len && o + 8 < cap; i++) {
        uint8_t ch = s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'') out[o++] = (char)ch;
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (i < len) memcpy(out + o, "...", 3), o += 3;
    out[o] = 0;
}

/* ---- parsing ---------------------------------------------------------------------------------------------- */

/* Minimum bytes one KV takes: key length 8 + >= 1 key byte + type 4 + >= 1 value byte. */
#define KV_MIN_BYTES 14u
/* Minimum bytes one tensor info takes: name length 8 + >= 1 name byte + n_dims 4 + type 4 + offset 8. */
#define TI_MIN_BYTES 25u

static lcx_status parse_value(cursor *c, lcx_gguf_kv *kv) {
    uint32_t type;
    LCX_TRY(rd_u32(c, &type));
    if (type >= LCX_GGUF_TYPE_COUNT)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s': unknown value type %u", c->label, kv->key, type);
    kv->type = kv->elem_type = (lcx_gguf_type)type;
    kv->count = 1;
    if (type == LCX_GGUF_STRING) {
        LCX_TRY(rd_str(c, &kv->data, &kv->str_len));
        return LCX_OK;
    }
    if (type != LCX_GGUF_ARRAY) {
        LCX_TRY(need(c, value_type_size[type]));
        kv->data = c->buf + c->pos;
        c->pos += value_type_size[type];
        return LCX_OK;
    }
    uint32_t et;
    uint64_t count;
    LCX_TRY(rd_u32(c, &et));
    LCX_TRY(rd_u64(c, &count));
    if (et == LCX_GGUF_ARRAY)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s': nested arrays are not supported", c->label, kv->key);
    if (et >= LCX_GGUF_TYPE_COUNT)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s': unknown array element type %u", c->label, kv->key, et);
    kv->elem_type = (lcx_gguf_type)et;
    kv->count = count;
    /* Every element takes at least value_type_size bytes, so a hostile count fails before any allocation. */
    if (count > remaining(c) / value_type_size[et])
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s': array count %llu of %s needs more than the %zu bytes left",
                        c->label, kv->key, (unsigned long long)count, value_type_names[et], remaining(c));
    kv->data = c->buf + c->pos;
    if (et != LCX_GGUF_STRING) {
        c->pos += (size_t)count * value_type_size[et];
        return LCX_OK;
    }
    kv->str_offsets = malloc((size_t)(count ? count : 1) * sizeof(uint64_t));
    kv->str_lens = malloc((size_t)(count ? count : 1) * sizeof(uint64_t));
    if (!kv->str_offsets || !kv->str_lens)
        return lcx_fail(LCX_ERR_OOM, "%s: key '%s': cannot allocate an index of %llu strings", c->label, kv->key,
                        (unsigned long long)count);
    size_t start = c->pos;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *s;
        uint64_t len;
        if (remaining(c) < 8 || le64(c->buf + c->pos) > remaining(c) - 8)
            snprintf(c->what, sizeof c->what, "key '%s': string %llu of %llu", kv->key, (unsigned long long)i,
                     (unsigned long long)count);
        LCX_TRY(rd_str(c, &s, &len));
        kv->str_offsets[i] = (uint64_t)(s - (c->buf + start));
        kv->str_lens[i] = len;
    }
    return LCX_OK;
}

typedef struct name_ref {
    const char *name;
    size_t idx;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    int r = strcmp(x->name, y->name);
    return r ? r : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sort names; on a duplicate return the later index (file order) in *dup. */
static lcx_status sort_names(name_ref *refs, size_t n, size_t **sorted, size_t *dup_a, size_t *dup_b, int *has_dup) {
    *has_dup = 0;
    if (n) qsort(refs, n, sizeof *refs, cmp_name_ref);
    *sorted = malloc((n ? n : 1) * sizeof(size_t));
    if (!*sorted) return lcx_fail(LCX_ERR_OOM, "cannot allocate a name index");
    for (size_t i = 0; i < n; i++) {
        (*sorted)[i] = refs[i].idx;
        if (i && !*has_dup && strcmp(refs[i].name, refs[i - 1].name) == 0) {
            *has_dup = 1;
            *dup_a = refs[i - 1].idx;
            *dup_b = refs[i].idx;
        }
    }
    return LCX_OK;
}

typedef struct span {
    uint64_t begin, end;
    size_t idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static lcx_status parse_kvs(cursor *c, lcx_gguf_file *f) {
    for (size_t i = 0; i < f->n_kv; i++) {
        lcx_gguf_kv *kv = &f->kv[i];
        const uint8_t *key;
        uint64_t klen;
        snprintf(c->what, sizeof c->what, "key #%zu", i);
        LCX_TRY(rd_str(c, &key, &klen));
        if (klen == 0) return lcx_fail(LCX_ERR_FORMAT, "%s: key #%zu is empty", c->label, i);
        if (memchr(key, 0, (size_t)klen)) {
            char nm[96];
            safe_name(nm, sizeof nm, key, klen);
            return lcx_fail(LCX_ERR_FORMAT, "%s: key #%zu '%s' contains a NUL byte", c->label, i, nm);
        }
        kv->key = dup_bytes(key, (size_t)klen);
        if (!kv->key) return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate key #%zu", c->label, i);
        snprintf(c->what, sizeof c->what, "key '%.100s'", kv->key);
        LCX_TRY(parse_value(c, kv));
    }
    name_ref *refs = malloc((f->n_kv ? f->n_kv : 1) * sizeof *refs);
    if (!refs) return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate the key index", c->label);
    for (size_t i = 0; i < f->n_kv; i++) refs[i] = (name_ref){f->kv[i].key, i};
    size_t a = 0, b = 0;
    int dup;
    lcx_status st = sort_names(refs, f->n_kv, &f->kv_sorted, &a, &b, &dup);
    free(refs);
    LCX_TRY(st);
    if (dup) return lcx_fail(LCX_ERR_FORMAT, "%s: duplicate key '%s' (#%zu and #%zu)", c->label, f->kv[b].key, a, b);

    f->alignment = LCX_GGUF_DEFAULT_ALIGNMENT;
    const lcx_gguf_kv *al = lcx_gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != LCX_GGUF_U32)
            return lcx_fail(LCX_ERR_FORMAT, "%s: key 'general.alignment' has type %s, expected u32", c->label,
                            value_type_names[al->type]);
        uint32_t v = le32(al->data);
        if (v == 0 || (v & (v - 1)) != 0)
            return lcx_fail(LCX_ERR_FORMAT, "%s: general.alignment %u is not a power of two", c->label, v);
        f->alignment = v;
    }
    return LCX_OK;
}

static lcx_status parse_tensor_info(cursor *c, lcx_gguf_file *f, size_t i) {
    lcx_gguf_tensor *t = &f->tensors[i];
    const uint8_t *name;
    uint64_t nlen;
    snprintf(c->what, sizeof c->what, "tensor #%zu", i);
    LCX_TRY(rd_str(c, &name, &nlen));
    if (nlen == 0) return lcx_fail(LCX_ERR_FORMAT, "%s: tensor #%zu has an empty name", c->label, i);
    if (memchr(name, 0, (size_t)nlen)) {
        char nm[96];
        safe_name(nm, sizeof nm, name, nlen);
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor #%zu name '%s' contains a NUL byte", c->label, i, nm);
    }
    t->name = dup_bytes(name, (size_t)nlen);
    if (!t->name) return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate tensor name #%zu", c->label, i);
    const char *tn = t->name;
    snprintf(c->what, sizeof c->what, "tensor '%.100s'", tn);

    LCX_TRY(rd_u32(c, &t->n_dims));
    if (t->n_dims > LCX_GGUF_MAX_DIMS)
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': n_dims %u exceeds the maximum of %d", c->label, tn,
                        t->n_dims, LCX_GGUF_MAX_DIMS);
    t->numel = 1;
    for (uint32_t d = 0; d < LCX_GGUF_MAX_DIMS; d++) {
        t->dims[d] = 1;
        if (d >= t->n_dims) continue;
        LCX_TRY(rd_u64(c, &t->dims[d]));
        if (t->dims[d] > (uint64_t)INT64_MAX)
            return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': dimension %u is %llu (negative as int64)", c->label,
                            tn, d, (unsigned long long)t->dims[d]);
    }
    int overflow = 0;
    for (uint32_t d = 0; d < LCX_GGUF_MAX_DIMS; d++) overflow |= __builtin_mul_overflow(t->numel, t->dims[d], &t->numel);
    if (overflow || t->numel > (uint64_t)INT64_MAX)
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': element count of dims [%llu, %llu, %llu, %llu] overflows",
                        c->label, tn, (unsigned long long)t->dims[0], (unsigned long long)t->dims[1],
                        (unsigned long long)t->dims[2], (unsigned long long)t->dims[3]);

    LCX_TRY(rd_u32(c, &t->ggml_type));
    uint64_t be, bb;
    if (!lcx_ggml_type_block(t->ggml_type, &be, &bb))
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': unknown ggml type %u", c->label, tn, t->ggml_type);
    if (t->dims[0] % be != 0)
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': dims[0] = %llu is not a multiple of the %s block size %llu",
                        c->label, tn, (unsigned long long)t->dims[0], lcx_ggml_type_name(t->ggml_type),
                        (unsigned long long)be);
    /* numel is a multiple of be because dims[0] is. */
    if (__builtin_mul_overflow(t->numel / be, bb, &t->nbytes))
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->label, tn);
    LCX_TRY(rd_u64(c, &t->offset));
    return LCX_OK;
}

static lcx_status parse_tensors(cursor *c, lcx_gguf_file *f) {
    for (size_t i = 0; i < f->n_tensors; i++) LCX_TRY(parse_tensor_info(c, f, i));

    name_ref *refs = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *refs);
    if (!refs) return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate the tensor index", c->label);
    for (size_t i = 0; i < f->n_tensors; i++) refs[i] = (name_ref){f->tensors[i].name, i};
    size_t a = 0, b = 0;
    int dup;
    lcx_status st = sort_names(refs, f->n_tensors, &f->tensor_sorted, &a, &b, &dup);
    free(refs);
    LCX_TRY(st);
    if (dup)
        return lcx_fail(LCX_ERR_FORMAT, "%s: duplicate tensor name '%s' (#%zu and #%zu)", c->label,
                        f->tensors[b].name, a, b);

    /* The data section starts at the aligned end of the tensor infos. */
    uint64_t al = f->alignment;
    f->data_offset = ((uint64_t)c->pos + al - 1) / al * al;
    uint64_t data_size = f->data_offset <= c->size ? c->size - f->data_offset : 0;
    if (f->n_tensors && f->data_offset > c->size)
        return lcx_fail(LCX_ERR_FORMAT, "%s: data section would start at %llu, past the end of the file (%zu bytes)",
                        c->label, (unsigned long long)f->data_offset, c->size);

    span *spans = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *spans);
    if (!spans) return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate the tensor span list", c->label);
    size_t ns = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        lcx_gguf_tensor *t = &f->tensors[i];
        if (t->offset % al != 0) {
            st = lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %u",
                          c->label, t->name, (unsigned long long)t->offset, f->alignment);
            goto out;
        }
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            st = lcx_fail(LCX_ERR_FORMAT,
                          "%s: tensor '%s': data [%llu, +%llu bytes) extends past the end of the data section "
                          "(%llu bytes)", c->label, t->name, (unsigned long long)t->offset,
                          (unsigned long long)t->nbytes, (unsigned long long)data_size);
            goto out;
        }
        t->data = c->buf + (size_t)f->data_offset + (size_t)t->offset;
        if (t->nbytes) spans[ns++] = (span){t->offset, t->offset + t->nbytes, i};
    }
    if (ns) qsort(spans, ns, sizeof *spans, cmp_span);
    for (size_t k = 1; k < ns; k++) {
        if (spans[k].begin < spans[k - 1].end) {
            st = lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, %llu)", c->label,
                          f->tensors[spans[k].idx].name, (unsigned long long)spans[k].begin,
                          (unsigned long long)spans[k].end, f->tensors[spans[k - 1].idx].name,
                          (unsigned long long)spans[k - 1].begin, (unsigned long long)spans[k - 1].end);
            goto out;
        }
    }
    st = LCX_OK;
out:
    free(spans);
    return st;
}

static lcx_status parse_image(lcx_gguf_file *f) {
    cursor c = {.label = f->path, .buf = f->base, .size = f->size, .pos = 0};
    snprintf(c.what, sizeof c.what, "header");
    if (f->size < 4)
        return lcx_fail(LCX_ERR_FORMAT, "%s: not a GGUF file: only %zu bytes (no magic)", f->path, f->size);
    if (memcmp(f->base, "GGUF", 4) != 0)
        return lcx_fail(LCX_ERR_FORMAT, "%s: not a GGUF file: bad magic %02x %02x %02x %02x (expected \"GGUF\")",
                        f->path, f->base[0], f->base[1], f->base[2], f->base[3]);
    c.pos = 4;
    LCX_TRY(rd_u32(&c, &f->version));
    if (f->version != 2 && f->version != 3)
        return lcx_fail(LCX_ERR_FORMAT, "%s: unsupported GGUF version %u (2 and 3 are readable)%s", f->path,
                        f->version, f->version && (f->version & 0xffffu) == 0 ? " (a big-endian file?)" : "");
    uint64_t n_tensors, n_kv;
    LCX_TRY(rd_u64(&c, &n_tensors));
    LCX_TRY(rd_u64(&c, &n_kv));
    /* Counts are bounded by what the rest of the file can hold, so a hostile count allocates nothing large. */
    size_t left = remaining(&c);
    if (n_kv > left / KV_MIN_BYTES)
        return lcx_fail(LCX_ERR_FORMAT, "%s: kv_count %llu is impossible: only %zu bytes follow the header", f->path,
                        (unsigned long long)n_kv, left);
    if (n_tensors > (left - n_kv * KV_MIN_BYTES) / TI_MIN_BYTES)
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensor_count %llu is impossible: only %zu bytes follow the header",
                        f->path, (unsigned long long)n_tensors, left);
    f->n_kv = (size_t)n_kv;
    f->n_tensors = (size_t)n_tensors;
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate the KV/tensor tables", f->path);
    LCX_TRY(parse_kvs(&c, f));
    LCX_TRY(parse_tensors(&c, f));
    return LCX_OK;
}

static lcx_status finish(lcx_gguf_file *f, lcx_gguf_file **out) {
    lcx_status st = parse_image(f);
    if (st != LCX_OK) {
        lcx_gguf_close(f);
        return st;
    }
    *out = f;
    return LCX_OK;
}

lcx_status lcx_gguf_parse(const char *label, const uint8_t *buf, size_t size, lcx_gguf_file **out) {
    *out = NULL;
    lcx_gguf_file *f = calloc(1, sizeof *f);
    if (!f) return lcx_fail(LCX_ERR_OOM, "%s: out of memory", label);
    f->path = dup_bytes((const uint8_t *)label, strlen(label));
    if (!f->path) {
        free(f);
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", label);
    }
    f->base = buf;
    f->size = size;
    return finish(f, out);
}

lcx_status lcx_gguf_open(const char *path, lcx_gguf_file **out) {
    *out = NULL;
    lcx_mapping m = {0};
    LCX_TRY(lcx_map_file(path, &m));
    lcx_gguf_file *f = calloc(1, sizeof *f);
    if (f) f->path = dup_bytes((const uint8_t *)path, strlen(path));
    if (!f || !f->path) {
        free(f);
        lcx_unmap(&m);
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
    }
    f->base = m.data;
    f->size = m.size;
    f->owns_mapping = 1;
    static const uint8_t empty[1] = {0};
    if (!f->base) f->base = empty; /* zero-length file: parse reports it as too short */
    return finish(f, out);
}

void lcx_gguf_close(lcx_gguf_file *f) {
    if (!f) return;
    if (f->kv)
        for (size_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            free(f->kv[i].str_offsets);
            free(f->kv[i].str_lens);
        }
    if (f->tensors)
        for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->kv_sorted);
    free(f->tensor_sorted);
    if (f->owns_mapping && f->size) {
        lcx_mapping m = {f->base, f->size};
        lcx_unmap(&m);
    }
    free(f->path);
    free(f);
}

/* ---- lookup and getters ---------------------------------------------------------------------------------- */

const lcx_gguf_kv *lcx_gguf_find_kv(const lcx_gguf_file *f, const char *key) {
    size_t lo = 0, hi = f->n_kv;
    if (!f->kv_sorted) return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const lcx_gguf_kv *kv = &f->kv[f->kv_sorted[mid]];
        int r = strcmp(kv->key, key);
        if (r == 0) return kv;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const lcx_gguf_tensor *lcx_gguf_find_tensor(const lcx_gguf_file *f, const char *name) {
    size_t lo = 0, hi = f->n_tensors;
    if (!f->tensor_sorted) return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const lcx_gguf_tensor *t = &f->tensors[f->tensor_sorted[mid]];
        int r = strcmp(t->name, name);
        if (r == 0) return t;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static lcx_status find_typed(const lcx_gguf_file *f, const char *key, const lcx_gguf_kv **kv) {
    *kv = lcx_gguf_find_kv(f, key);
    if (!*kv) return lcx_fail(LCX_ERR_NOT_FOUND, "%s: key '%s' not found", f->path, key);
    return LCX_OK;
}

/* Integer element at p: u64 goes to *u (is_signed 0), every other integer type to *s; 0 if not an integer. */
static int read_int(lcx_gguf_type t, const uint8_t *p, uint64_t *u, int64_t *s, int *is_signed) {
    *is_signed = 1;
    switch (t) {
    case LCX_GGUF_U8: *s = p[0]; break;
    case LCX_GGUF_I8: *s = (int8_t)p[0]; break;
    case LCX_GGUF_U16: *s = le16(p); break;
    case LCX_GGUF_I16: *s = (int16_t)le16(p); break;
    case LCX_GGUF_U32: *s = le32(p); break;
    case LCX_GGUF_I32: *s = (int32_t)le32(p); break;
    case LCX_GGUF_I64: *s = (int64_t)le64(p); break;
    case LCX_GGUF_U64: *u = le64(p); *is_signed = 0; return 1;
    default: return 0;
    }
    return 1;
}

static lcx_status scalar_int(const lcx_gguf_file *f, const char *key, const lcx_gguf_kv **kv, uint64_t *u,
                             int64_t *s, int *is_signed) {
    LCX_TRY(find_typed(f, key, kv));
    if ((*kv)->type == LCX_GGUF_ARRAY || !read_int((*kv)->type, (*kv)->data, u, s, is_signed))
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' has type %s, expected an integer", f->path, key,
                        value_type_names[(*kv)->type]);
    return LCX_OK;
}

lcx_status lcx_gguf_get_u64(const lcx_gguf_file *f, const char *key, uint64_t *out) {
    const lcx_gguf_kv *kv;
    uint64_t u = 0;
    int64_t s = 0;
    int sg;
    LCX_TRY(scalar_int(f, key, &kv, &u, &s, &sg));
    if (sg && s < 0)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' is %lld, expected a non-negative integer", f->path, key,
                        (long long)s);
    *out = sg ? (uint64_t)s : u;
    return LCX_OK;
}

lcx_status lcx_gguf_get_u32(const lcx_gguf_file *f, const char *key, uint32_t *out) {
    uint64_t v;
    LCX_TRY(lcx_gguf_get_u64(f, key, &v));
    if (v > UINT32_MAX)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' is %llu, more than a u32 can hold", f->path, key,
                        (unsigned long long)v);
    *out = (uint32_t)v;
    return LCX_OK;
}

lcx_status lcx_gguf_get_i64(const lcx_gguf_file *f, const char *key, int64_t *out) {
    const lcx_gguf_kv *kv;
    uint64_t u = 0;
    int64_t s = 0;
    int sg;
    LCX_TRY(scalar_int(f, key, &kv, &u, &s, &sg));
    if (!sg && u > (uint64_t)INT64_MAX)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' is %llu, more than an i64 can hold", f->path, key,
                        (unsigned long long)u);
    *out = sg ? s : (int64_t)u;
    return LCX_OK;
}

static double rd_f32(const uint8_t *p) {
    uint32_t b = le32(p);
    float v;
    memcpy(&v, &b, 4);
    return v;
}

static double rd_f64(const uint8_t *p) {
    uint64_t b = le64(p);
    double v;
    memcpy(&v, &b, 8);
    return v;
}

lcx_status lcx_gguf_get_f64(const lcx_gguf_file *f, const char *key, double *out) {
    const lcx_gguf_kv *kv;
    LCX_TRY(find_typed(f, key, &kv));
    if (kv->type == LCX_GGUF_F32) *out = rd_f32(kv->data);
    else if (kv->type == LCX_GGUF_F64) *out = rd_f64(kv->data);
    else
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' has type %s, expected f32 or f64", f->path, key,
                        value_type_names[kv->type]);
    return LCX_OK;
}

lcx_status lcx_gguf_get_f32(const lcx_gguf_file *f, const char *key, float *out) {
    double v;
    LCX_TRY(lcx_gguf_get_f64(f, key, &v));
    *out = (float)v;
    return LCX_OK;
}

lcx_status lcx_gguf_get_bool(const lcx_gguf_file *f, const char *key, int *out) {
    const lcx_gguf_kv *kv;
    LCX_TRY(find_typed(f, key, &kv));
    if (kv->type != LCX_GGUF_BOOL)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' has type %s, expected bool", f->path, key,
                        value_type_names[kv->type]);
    *out = kv->data[0] != 0;
    return LCX_OK;
}

lcx_status lcx_gguf_get_str(const lcx_gguf_file *f, const char *key, const char **s, size_t *len) {
    *s = NULL;
    *len = 0;
    const lcx_gguf_kv *kv;
    LCX_TRY(find_typed(f, key, &kv));
    if (kv->type != LCX_GGUF_STRING)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' has type %s, expected string", f->path, key,
                        value_type_names[kv->type]);
    *s = (const char *)kv->data;
    *len = (size_t)kv->str_len;
    return LCX_OK;
}

lcx_status lcx_gguf_get_str_dup(const lcx_gguf_file *f, const char *key, char **out) {
    const char *s;
    size_t len;
    LCX_TRY(lcx_gguf_get_str(f, key, &s, &len));
    if (memchr(s, 0, len)) return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s': string contains a NUL byte", f->path, key);
    *out = dup_bytes((const uint8_t *)s, len);
    if (!*out) return lcx_fail(LCX_ERR_OOM, "%s: key '%s': out of memory", f->path, key);
    return LCX_OK;
}

lcx_status lcx_gguf_get_array(const lcx_gguf_file *f, const char *key, lcx_gguf_type elem_type,
                              const lcx_gguf_kv **kv) {
    LCX_TRY(find_typed(f, key, kv));
    if ((*kv)->type != LCX_GGUF_ARRAY)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' has type %s, expected an array", f->path, key,
                        value_type_names[(*kv)->type]);
    if (elem_type != LCX_GGUF_TYPE_COUNT && (*kv)->elem_type != elem_type)
        return lcx_fail(LCX_ERR_FORMAT, "%s: key '%s' is an array of %s, expected an array of %s", f->path, key,
                        value_type_names[(*kv)->elem_type], lcx_gguf_type_name(elem_type));
    return LCX_OK;
}

static lcx_status check_elem(const lcx_gguf_kv *kv, uint64_t i) {
    LCX_FAIL_IF(kv->type != LCX_GGUF_ARRAY, LCX_ERR_INVALID, "key '%s' is not an array", kv->key);
    LCX_FAIL_IF(i >= kv->count, LCX_ERR_INVALID, "key '%s': index %llu out of range (%llu elements)", kv->key,
                (unsigned long long)i, (unsigned long long)kv->count);
    return LCX_OK;
}

lcx_status lcx_gguf_arr_int(const lcx_gguf_kv *kv, uint64_t i, int64_t *out) {
    LCX_TRY(check_elem(kv, i));
    uint64_t u = 0;
    int64_t s = 0;
    int sg;
    if (!read_int(kv->elem_type, kv->data + i * value_type_size[kv->elem_type], &u, &s, &sg))
        return lcx_fail(LCX_ERR_INVALID, "key '%s' is an array of %s, not of integers", kv->key,
                        value_type_names[kv->elem_type]);
    LCX_FAIL_IF(!sg && u > (uint64_t)INT64_MAX, LCX_ERR_FORMAT, "key '%s': element %llu = %llu exceeds int64",
                kv->key, (unsigned long long)i, (unsigned long long)u);
    *out = sg ? s : (int64_t)u;
    return LCX_OK;
}

lcx_status lcx_gguf_arr_float(const lcx_gguf_kv *kv, uint64_t i, double *out) {
    LCX_TRY(check_elem(kv, i));
    const uint8_t *p = kv->data + i * value_type_size[kv->elem_type];
    uint64_t u = 0;
    int64_t s = 0;
    int sg;
    if (kv->elem_type == LCX_GGUF_F32) *out = rd_f32(p);
    else if (kv->elem_type == LCX_GGUF_F64) *out = rd_f64(p);
    else if (read_int(kv->elem_type, p, &u, &s, &sg)) *out = sg ? (double)s : (double)u;
    else
        return lcx_fail(LCX_ERR_INVALID, "key '%s' is an array of %s, not of numbers", kv->key,
                        value_type_names[kv->elem_type]);
    return LCX_OK;
}

lcx_status lcx_gguf_arr_str(const lcx_gguf_kv *kv, uint64_t i, const char **s, size_t *len) {
    LCX_TRY(check_elem(kv, i));
    LCX_FAIL_IF(kv->elem_type != LCX_GGUF_STRING, LCX_ERR_INVALID, "key '%s' is an array of %s, not of strings",
                kv->key, value_type_names[kv->elem_type]);
    *s = (const char *)kv->data + kv->str_offsets[i];
    *len = (size_t)kv->str_lens[i];
    return LCX_OK;
}

/* ---- tensors --------------------------------------------------------------------------------------------- */

lcx_status lcx_gguf_tensor_dtype(const lcx_gguf_file *f, const lcx_gguf_tensor *t, lcx_dtype *out) {
    *out = lcx_ggml_type_to_dtype(t->ggml_type);
    if (*out == LCX_DTYPE_INVALID)
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: unsupported ggml type %u (%s) for tensor '%s'", f->path,
                        t->ggml_type, lcx_ggml_type_name(t->ggml_type), t->name);
    return LCX_OK;
}

lcx_shape lcx_gguf_tensor_shape(const lcx_gguf_tensor *t) {
    lcx_shape s = {0};
    s.ndim = (int)t->n_dims;
    for (uint32_t d = 0; d < t->n_dims; d++) s.dims[d] = t->dims[t->n_dims - 1 - d];
    return s;
}

lcx_status lcx_gguf_tensor_to_f32(const lcx_gguf_file *f, const lcx_gguf_tensor *t, float *dst) {
    lcx_dtype dt;
    LCX_TRY(lcx_gguf_tensor_dtype(f, t, &dt));
    if (t->numel > SIZE_MAX / sizeof(float))
        return lcx_fail(LCX_ERR_INVALID, "%s: tensor '%s' is too large for this machine", f->path, t->name);
    if (t->numel == 0) return LCX_OK;
    lcx_status st = lcx_convert_to_f32(dt, t->data, dst, (size_t)t->numel);
    if (st != LCX_OK) return lcx_fail_context(st, "%s: tensor '%s': ", f->path, t->name);
    return LCX_OK;
}
