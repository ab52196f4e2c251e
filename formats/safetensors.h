/* safetensors: reader (mmap, zero-copy, every rule of docs/formats.md "safetensors" enforced) and writer (atomic),
 * single files and
 * sharded sets with model.safetensors.index.json.
 *
 * Errors name the file and, where relevant, the tensor: "model.safetensors: tensor 'lm_head.weight':
 * data_offsets [0,64] do not match shape [4, 4] x BF16 (32 bytes)". */
#ifndef LCX_FORMATS_SAFETENSORS_H
#define LCX_FORMATS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"
#include "src/core/tensor.h"

#define LCX_ST_MAX_HEADER 100000000ull /* header length limit of the reference implementation */

typedef struct lcx_st_tensor {
    char *name;
    lcx_dtype dtype;
    lcx_shape shape;
    uint64_t begin, end;   /* data_offsets, relative to the data buffer */
    const uint8_t *data;   /* begin of the bytes inside the mapping (NULL for zero-size tensors) */
} lcx_st_tensor;

typedef struct lcx_st_file {
    char *path;            /* as opened (used in messages) */
    const uint8_t *base;   /* whole file (mapping, or caller's buffer for lcx_st_parse) */
    size_t size;
    int owns_mapping;
    size_t n_tensors;
    lcx_st_tensor *tensors; /* in header order */
    size_t n_meta;
    char **meta_keys, **meta_values; /* __metadata__, string -> string */
    const lcx_st_tensor **by_name;   /* private: tensors sorted by name, for lcx_st_find */
} lcx_st_file;

/* Reader rules are those of the reference (Rust `safetensors` crate), with these deliberate differences:
 * duplicate keys anywhere in the header (tensor names, __metadata__ keys) are errors (the reference keeps the
 * last one); ranks above LCX_MAX_DIMS are LCX_ERR_UNSUPPORTED; names containing NUL are rejected; integers
 * above 2^63-1 are rejected by the JSON parser (only a zero-size tensor could carry such a dim). Like the
 * reference we accept "__metadata__": null (= absent) and ignore unknown keys inside a tensor entry.
 * Tensors sorted by (begin, end) must tile the data buffer, so zero-size tensors may sit at any boundary. */

/* Map and validate a file. */
lcx_status lcx_st_open(const char *path, lcx_st_file **out);
/* Validate a file image already in memory (used by the fuzzer and tests); `label` names it in errors.
 * The buffer must outlive the result. */
lcx_status lcx_st_parse(const char *label, const uint8_t *buf, size_t size, lcx_st_file **out);
void lcx_st_close(lcx_st_file *f); /* NULL ok */
/* Tensor by name (binary search) or NULL. */
const lcx_st_tensor *lcx_st_find(const lcx_st_file *f, const char *name);
/* Value of a __metadata__ key or NULL. */
const char *lcx_st_meta(const lcx_st_file *f, const char *key);

/* ---- writing ---------------------------------------------------------------------------------------------- */
typedef struct lcx_st_out_tensor {
    const char *name;
    lcx_dtype dtype;
    lcx_shape shape;
    const void *data; /* numel * bits / 8 bytes */
} lcx_st_out_tensor;

/* Write one file atomically. Tensors are ordered largest dtype first, then by name; the header is compact JSON
 * with __metadata__ {"format": "pt", ...extra} first, padded with spaces to a multiple of 8. Extra metadata:
 * n_meta key/value string pairs (may be 0); an extra "format" key replaces the value "pt".
 * Dtypes of equal size are ordered as the reference writer orders them (its dtype enum, descending: I64 > F64,
 * F32 > I32, BF16 > F16, I8 > U8; BOOL after the sub-byte types), so for the same tensors and metadata
 * {"format": "pt"} our bytes equal those of safetensors' save_file. Tensor data is streamed from the callers'
 * buffers (no copy). Names must be unique, valid UTF-8 and not "__metadata__". */
lcx_status lcx_st_write(const char *path, const lcx_st_out_tensor *tensors, size_t n, const char *const *meta_keys,
                        const char *const *meta_values, size_t n_meta);

/* lcx_st_write with tensor bytes produced while the file is written, one tensor at a time (the `data` members are
 * ignored): fetch(user, i, &data) gives tensors[i]'s bytes, valid until release(user, i) (may be NULL), which is
 * called after every fetch, once the bytes are written or the fetch / write failed. Same file bytes as
 * lcx_st_write. */
typedef lcx_status (*lcx_st_fetch_fn)(void *user, size_t i, const void **data);
typedef void (*lcx_st_release_fn)(void *user, size_t i);
lcx_status lcx_st_write_lazy(const char *path, const lcx_st_out_tensor *tensors, size_t n, lcx_st_fetch_fn fetch,
                             lcx_st_release_fn release, void *user);

#define LCX_ST_DEFAULT_SHARD_BYTES 5000000000ull /* 5 GB, as transformers' save_pretrained */

/* Write a checkpoint's tensors into dir: one model.safetensors when they fit in max_shard_bytes, else
 * model-0000i-of-0000N.safetensors + model.safetensors.index.json (a tensor larger than the limit gets its own
 * file). Each file is atomic; the index is written last. Splitting follows huggingface_hub (tensors in the given
 * order; a new shard starts when the next tensor would push the current one past the limit; a tensor larger
 * than the limit gets its own shard, numbered when it is met). The index is what transformers writes:
 * {"metadata": {"total_parameters": sum numel, "total_size": sum bytes}, "weight_map": {...}}, indent 2,
 * sorted keys, trailing newline. Afterwards the other form's leftovers in dir (a stale index, model.safetensors,
 * or model-*-of-*.safetensors files not written now) are removed so lcx_st_set_open cannot pick them up.
 * max_shard_bytes 0 = LCX_ST_DEFAULT_SHARD_BYTES. */
lcx_status lcx_st_write_sharded(const char *dir, const lcx_st_out_tensor *tensors, size_t n,
                                uint64_t max_shard_bytes);
/* lcx_st_write_sharded with tensor bytes produced while each file is written, as lcx_st_write_lazy (the `data`
 * members are ignored): fetch and release get the tensor's index in tensors. */
lcx_status lcx_st_write_sharded_lazy(const char *dir, const lcx_st_out_tensor *tensors, size_t n,
                                     uint64_t max_shard_bytes, lcx_st_fetch_fn fetch, lcx_st_release_fn release,
                                     void *user);

/* ---- sets: a checkpoint made of one or more files -------------------------------------------------------- */
typedef struct lcx_st_set {
    char *dir;
    size_t n_files;
    lcx_st_file **files;
    size_t n_tensors;                 /* over all files */
    const lcx_st_tensor **tensors;    /* sorted by name for lookup */
    uint64_t total_size_index;        /* metadata.total_size of the index, 0 when absent */
} lcx_st_set;

/* path: a directory (model.safetensors.index.json if present, else model.safetensors, else every *.safetensors
 * when exactly one exists), an index .json, or one .safetensors file. Checks that the index's weight_map names
 * exactly the tensors found in its files (no missing, extra or duplicated tensors across shards). Files named
 * by an index are relative to its directory; absolute names and ".." components are refused. Any JSON values
 * are accepted inside the index's "metadata"; an integer total_size is recorded, not enforced. */
lcx_status lcx_st_set_open(const char *path, lcx_st_set **out);
void lcx_st_set_close(lcx_st_set *s);
const lcx_st_tensor *lcx_st_set_find(const lcx_st_set *s, const char *name);

#endif
