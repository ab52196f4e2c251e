/* Shared pieces of src/convert*.c: the streaming .lcx writer that import and reshard both use. Not API. */
#ifndef LCX_CONVERT_INTERNAL_H
#define LCX_CONVERT_INTERNAL_H

#include <jansson.h>

#include "formats/hf_config.h"
#include "src/convert/convert.h"
#include "src/core/layout.h"

/* One tensor to write. */
typedef struct cv_item {
    char *name; /* owned */
    char role[LCX_CKPT_ROLE_MAX + 1];
    lcx_dtype dtype; /* as written */
    int ndim;
    uint64_t shape[LCX_BOX_MAX_DIMS];
    uint64_t bytes; /* whole tensor */
    size_t src;     /* the source's own index */
} cv_item;

/* Where the bytes come from. read fills dst with `box` of item `it` (row-major, it->dtype). thread_init gives
 * each worker its own state (NULL functions: none). */
typedef struct cv_source {
    void *ctx;
    lcx_status (*thread_init)(void *ctx, void **ts);
    void (*thread_free)(void *ts);
    lcx_status (*read)(void *ctx, void *ts, const cv_item *it, const lcx_box *box, void *dst);
    /* Optional zero-copy: *view = the box's bytes in place, or NULL when read must be used. */
    lcx_status (*view)(void *ctx, void *ts, const cv_item *it, const lcx_box *box, const void **view);
    /* Optional: called after an item is written (drop mapped pages, caches). */
    void (*item_done)(void *ctx, void *ts, const cv_item *it);
} cv_source;

typedef struct cv_target {
    const char *out;               /* checkpoint directory to create */
    const json_t *config;          /* model config (NULL: tensors are stored whole, tp must be 1) */
    const json_t *training_state;
    int n_files;                   /* files copied in: src_paths[i] -> names[i] */
    char **src_paths, **names;
    int src_flags;                 /* how src_paths are opened: LCX_IN_OWN for an .lcx's files */
} cv_target;

/* Write items from src into t->out in layout o->tp x o->cp x o->dp with a thread pool. */
lcx_status cv_write_lcx(const cv_source *src, cv_item *items, size_t n, const cv_target *t,
                        const lcx_convert_opts *o);

/* Parse a config object (label names it in errors). */
lcx_status cv_config_from_json(const json_t *j, const char *label, lcx_model_config *cfg);
/* TP dims of a config. */
void cv_tp_dims(const lcx_model_config *cfg, lcx_tp_dims *d);
/* Split a path into a heap dirname and basename; fails for an empty base. */
lcx_status cv_split_path(const char *path, char **parent, char **base);
void cv_items_free(cv_item *items, size_t n);

/* GGUF export: add tokenizer.ggml.* KVs (model, pre, tokens, token_type, merges, add_bos/eos_token) built from the
 * Hugging Face tokenizer.json at path, with vocab_size tokens. Byte-level BPE only; for anything else, or a
 * tokenizer llama.cpp could not load, it warns through o->warn, adds nothing and leaves *written 0. *bos_id (-1:
 * none) is set from the post-processor's leading special token when it is -1. */
struct lcx_gguf_writer;
lcx_status cv_gguf_tokenizer_kvs(const char *path, int64_t vocab_size, int64_t *bos_id, struct lcx_gguf_writer *w,
                                 const lcx_convert_opts *o, int *written);

#endif
