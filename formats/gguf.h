/* gguf: GGUF v3 reader (mmap, zero-copy, hostile-input checks of docs/formats.md "GGUF"; v2 read as well) and writer
 * (atomic, streamed tensor data, F32/F16/BF16/Q8_0), plus the llama.cpp Q/K row permutation.
 *
 * Layout (little-endian): "GGUF" | u32 version | u64 tensor_count | u64 kv_count | KVs | tensor infos | zero
 * padding to general.alignment | data. Tensor dims are stored innermost first; lcx_gguf_tensor_shape gives the
 * outermost-first shape the rest of lcextend uses (an HF [out, in] weight has GGUF dims [in, out]).
 *
 * Errors name the file and the key or tensor: "m.gguf: tensor 'blk.0.attn_q.weight': offset 40 is not a
 * multiple of the alignment 32". Tensors of ggml types we cannot convert (Q4_K, ...) are listed normally; the
 * error "unsupported ggml type 12 (Q4_K) for tensor 'x'" comes only when one is used. */
#ifndef LCX_FORMATS_GGUF_H
#define LCX_FORMATS_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"
#include "src/core/tensor.h"

#define LCX_GGUF_VERSION 3
#define LCX_GGUF_DEFAULT_ALIGNMENT 32
#define LCX_GGUF_MAX_DIMS 4
#define LCX_GGUF_MAX_NAME 63 /* llama.cpp refuses tensor names of 64 bytes or more; our writer does too */

/* Metadata value types (numbers as stored in the file). */
typedef enum lcx_gguf_type {
    LCX_GGUF_U8 = 0, LCX_GGUF_I8 = 1, LCX_GGUF_U16 = 2, LCX_GGUF_I16 = 3, LCX_GGUF_U32 = 4, LCX_GGUF_I32 = 5,
    LCX_GGUF_F32 = 6, LCX_GGUF_BOOL = 7, LCX_GGUF_STRING = 8, LCX_GGUF_ARRAY = 9, LCX_GGUF_U64 = 10,
    LCX_GGUF_I64 = 11, LCX_GGUF_F64 = 12,
    LCX_GGUF_TYPE_COUNT
} lcx_gguf_type;

/* ggml tensor types we convert (the file may hold any known ggml type). */
enum {
    LCX_GGML_F32 = 0, LCX_GGML_F16 = 1, LCX_GGML_Q4_0 = 2, LCX_GGML_Q4_1 = 3, LCX_GGML_Q8_0 = 8,
    LCX_GGML_BF16 = 30
};

/* "u32", "string", ... ("?" when out of range). */
const char *lcx_gguf_type_name(uint32_t type);
/* "Q4_K" etc., "?" for an unknown id. */
const char *lcx_ggml_type_name(uint32_t ggml_type);
/* Block geometry of a known ggml type; 0 if the id is unknown (or a removed type). */
int lcx_ggml_type_block(uint32_t ggml_type, uint64_t *block_elems, uint64_t *block_bytes);
/* lcx dtype of a ggml type (F32, F16, BF16, Q8_0, Q4_0, Q4_1), LCX_DTYPE_INVALID for others. */
lcx_dtype lcx_ggml_type_to_dtype(uint32_t ggml_type);
/* ggml type of an lcx dtype; -1 if it has none we write. */
int lcx_dtype_to_ggml_type(lcx_dtype dt);

typedef struct lcx_gguf_kv {
    char *key;               /* NUL-terminated copy; never empty, no NUL inside */
    lcx_gguf_type type;      /* LCX_GGUF_ARRAY for arrays */
    lcx_gguf_type elem_type; /* arrays: element type (never ARRAY); scalars: same as type */
    uint64_t count;          /* arrays: element count; scalars: 1 */
    const uint8_t *data;     /* scalars and numeric arrays: the little-endian value bytes (unaligned);
                              * a string: its bytes (not NUL-terminated), count = 1, len in str_len */
    uint64_t str_len;        /* string scalars */
    uint64_t *str_offsets;   /* string arrays: element i's bytes start at data + str_offsets[i] ... */
    uint64_t *str_lens;      /* ... and are str_lens[i] long (use lcx_gguf_arr_str) */
} lcx_gguf_kv;

typedef struct lcx_gguf_tensor {
    char *name;              /* NUL-terminated copy; unique, no NUL inside */
    uint32_t ggml_type;      /* a known ggml type (see lcx_ggml_type_name) */
    uint32_t n_dims;         /* 0..4 (0: one element, as llama.cpp) */
    uint64_t dims[LCX_GGUF_MAX_DIMS]; /* innermost first, as stored; unused entries are 1 */
    uint64_t numel;
    uint64_t offset;         /* relative to the data section; a multiple of the alignment */
    uint64_t nbytes;
    const uint8_t *data;     /* inside the file image */
} lcx_gguf_tensor;

typedef struct lcx_gguf_file {
    char *path;              /* label used in messages */
    const uint8_t *base;
    size_t size;
    int owns_mapping;
    uint32_t version;        /* 2 or 3 */
    uint32_t alignment;
    uint64_t data_offset;    /* start of the data section in the file */
    size_t n_kv;
    lcx_gguf_kv *kv;         /* file order */
    size_t n_tensors;
    lcx_gguf_tensor *tensors; /* file order */
    size_t *kv_sorted, *tensor_sorted; /* indices sorted by key / name, for lookup */
} lcx_gguf_file;

/* Map and validate a file. */
lcx_status lcx_gguf_open(const char *path, lcx_gguf_file **out);
/* Validate an image already in memory (fuzzer, tests); `label` names it in errors; buf must outlive the result. */
lcx_status lcx_gguf_parse(const char *label, const uint8_t *buf, size_t size, lcx_gguf_file **out);
void lcx_gguf_close(lcx_gguf_file *f); /* NULL ok */

/* ---- metadata -------------------------------------------------------------------------------------------- */
const lcx_gguf_kv *lcx_gguf_find_kv(const lcx_gguf_file *f, const char *key); /* NULL if absent */

/* Typed getters by key: LCX_ERR_NOT_FOUND if absent (message names file and key), LCX_ERR_FORMAT on a type or
 * range mismatch. Integer getters accept every integer type (u8..u64, i8..i64) whose value fits. */
lcx_status lcx_gguf_get_u64(const lcx_gguf_file *f, const char *key, uint64_t *out);
lcx_status lcx_gguf_get_u32(const lcx_gguf_file *f, const char *key, uint32_t *out);
lcx_status lcx_gguf_get_i64(const lcx_gguf_file *f, const char *key, int64_t *out);
/* f32 or f64 values. */
lcx_status lcx_gguf_get_f64(const lcx_gguf_file *f, const char *key, double *out);
lcx_status lcx_gguf_get_f32(const lcx_gguf_file *f, const char *key, float *out);
lcx_status lcx_gguf_get_bool(const lcx_gguf_file *f, const char *key, int *out);
/* String view (not NUL-terminated) into the file image. */
lcx_status lcx_gguf_get_str(const lcx_gguf_file *f, const char *key, const char **s, size_t *len);
/* NUL-terminated heap copy; fails if the value contains a NUL byte. Caller frees. */
lcx_status lcx_gguf_get_str_dup(const lcx_gguf_file *f, const char *key, char **out);
/* An array KV; elem_type must match unless it is LCX_GGUF_TYPE_COUNT (any). */
lcx_status lcx_gguf_get_array(const lcx_gguf_file *f, const char *key, lcx_gguf_type elem_type,
                              const lcx_gguf_kv **kv);

/* Element access on an array KV (index checked, LCX_ERR_INVALID when out of range or of the wrong kind). */
lcx_status lcx_gguf_arr_int(const lcx_gguf_kv *kv, uint64_t i, int64_t *out);   /* integer element types
                                                                                    * (u64 above INT64_MAX fails) */
lcx_status lcx_gguf_arr_float(const lcx_gguf_kv *kv, uint64_t i, double *out); /* f32/f64 and integers */
lcx_status lcx_gguf_arr_str(const lcx_gguf_kv *kv, uint64_t i, const char **s, size_t *len);

/* ---- tensors --------------------------------------------------------------------------------------------- */
const lcx_gguf_tensor *lcx_gguf_find_tensor(const lcx_gguf_file *f, const char *name); /* NULL if absent */
/* lcx dtype of a tensor; LCX_ERR_UNSUPPORTED "unsupported ggml type 12 (Q4_K) for tensor 'x'" otherwise. */
lcx_status lcx_gguf_tensor_dtype(const lcx_gguf_file *f, const lcx_gguf_tensor *t, lcx_dtype *out);
/* Outermost-first shape (dims reversed; n_dims 0 gives a rank-0 shape). */
lcx_shape lcx_gguf_tensor_shape(const lcx_gguf_tensor *t);
/* Dequantise / convert a whole tensor to float32 (dst holds numel floats). */
lcx_status lcx_gguf_tensor_to_f32(const lcx_gguf_file *f, const lcx_gguf_tensor *t, float *dst);

/* ---- writing ---------------------------------------------------------------------------------------------- */
typedef struct lcx_gguf_writer lcx_gguf_writer;

/* alignment: 0 for the default 32, else a power of two <= 2^30 (then general.alignment is written as u32). */
lcx_status lcx_gguf_writer_init(lcx_gguf_writer **out, uint32_t alignment);
void lcx_gguf_writer_free(lcx_gguf_writer *w); /* NULL ok */

/* KVs are written in the order added. Keys must be non-empty and unique; "general.alignment" is reserved (it
 * is set through lcx_gguf_writer_init). */
lcx_status lcx_gguf_writer_add_u8(lcx_gguf_writer *w, const char *key, uint8_t v);
lcx_status lcx_gguf_writer_add_i8(lcx_gguf_writer *w, const char *key, int8_t v);
lcx_status lcx_gguf_writer_add_u16(lcx_gguf_writer *w, const char *key, uint16_t v);
lcx_status lcx_gguf_writer_add_i16(lcx_gguf_writer *w, const char *key, int16_t v);
lcx_status lcx_gguf_writer_add_u32(lcx_gguf_writer *w, const char *key, uint32_t v);
lcx_status lcx_gguf_writer_add_i32(lcx_gguf_writer *w, const char *key, int32_t v);
lcx_status lcx_gguf_writer_add_f32(lcx_gguf_writer *w, const char *key, float v);
lcx_status lcx_gguf_writer_add_bool(lcx_gguf_writer *w, const char *key, int v);
lcx_status lcx_gguf_writer_add_u64(lcx_gguf_writer *w, const char *key, uint64_t v);
lcx_status lcx_gguf_writer_add_i64(lcx_gguf_writer *w, const char *key, int64_t v);
lcx_status lcx_gguf_writer_add_f64(lcx_gguf_writer *w, const char *key, double v);
lcx_status lcx_gguf_writer_add_str(lcx_gguf_writer *w, const char *key, const char *s);
lcx_status lcx_gguf_writer_add_strn(lcx_gguf_writer *w, const char *key, const char *s, size_t len);
/* Numeric/bool array: `values` holds count packed host values of elem_type (bool: one byte each, 0 or 1). */
lcx_status lcx_gguf_writer_add_array(lcx_gguf_writer *w, const char *key, lcx_gguf_type elem_type,
                                     const void *values, uint64_t count);
/* String array (lens NULL: NUL-terminated strings). */
lcx_status lcx_gguf_writer_add_str_array(lcx_gguf_writer *w, const char *key, const char *const *strs,
                                         const size_t *lens, uint64_t count);

/* A tensor stored as `type` (F32, F16, BF16 or Q8_0) with outermost-first shape (rank 1..4; for Q8_0 the last
 * dim must be a multiple of 32). `src` holds numel values of src_dtype: either `type` itself (bytes copied as
 * is) or any float-loadable dtype (converted while streaming; Q8_0 uses ggml's reference quantiser). src is not
 * copied: it must stay valid until lcx_gguf_writer_write returns. Names: unique, 1..63 bytes. */
lcx_status lcx_gguf_writer_add_tensor(lcx_gguf_writer *w, const char *name, lcx_dtype type, const lcx_shape *shape,
                                      lcx_dtype src_dtype, const void *src);

/* Like lcx_gguf_writer_add_tensor, but the source values are produced while the file is written, one tensor at a
 * time: fetch(user, key, &src) must return a pointer to numel values of src_dtype, valid until
 * release(user, key) (may be NULL), which is called after every fetch, right after the tensor's data is written
 * or the fetch / write failed. Keeps memory at one tensor for exporters that read from disk. */
typedef lcx_status (*lcx_gguf_fetch_fn)(void *user, size_t key, const void **src);
typedef void (*lcx_gguf_release_fn)(void *user, size_t key);
lcx_status lcx_gguf_writer_add_tensor_lazy(lcx_gguf_writer *w, const char *name, lcx_dtype type,
                                           const lcx_shape *shape, lcx_dtype src_dtype, lcx_gguf_fetch_fn fetch,
                                           lcx_gguf_release_fn release, void *user, size_t key);

/* Write the file atomically to a new path (anything already there, or appearing meanwhile, is refused, never
 * replaced: src/core/outpath.h): tensor offsets laid out in order, each padded to the alignment (as llama.cpp
 * requires). The writer may be written again or freed afterwards. */
lcx_status lcx_gguf_writer_write(lcx_gguf_writer *w, const char *path);

/* ggml's reference Q8_0 quantiser on n floats (n multiple of 32) into n/32 34-byte blocks: per block
 * d = amax/127, q = roundf(x * (1/d)) (round half away from zero), d stored as f16. Non-finite input fails. */
lcx_status lcx_quantize_q8_0(const float *src, uint8_t *dst, size_t n);

/* ---- llama.cpp Q/K row permutation ---------------------------------------------------------------------- */
/* Row-major [rows, cols] of elem_size-byte elements, rows = n_head * d with d even. HF -> GGUF (export):
 * dst row h*d + 2j + s = src row h*d + s*d/2 + j (s in {0,1}, j < d/2). unpermute is the inverse (import).
 * dst and src must not overlap. */
lcx_status lcx_gguf_permute_qk(void *dst, const void *src, size_t rows, size_t cols, size_t elem_size,
                               size_t n_head);
lcx_status lcx_gguf_unpermute_qk(void *dst, const void *src, size_t rows, size_t cols, size_t elem_size,
                                 size_t n_head);

#endif
