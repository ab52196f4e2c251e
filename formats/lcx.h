/* lcx: the native sharded checkpoint — a directory with manifest.json and one data file per writer rank.
 * Format reference: docs/lcx-format.md (version LCX_CKPT_VERSION).
 *
 * Saving (each rank writes its own pieces; only rank 0 touches the manifest and the parent directory):
 *   rank 0:     lcx_ckpt_tmpdir_create(parent, "step-100", &tmp)      -> broadcast tmp to the other ranks
 *   every rank: lcx_ckpt_writer_open(tmp, rank, &opts, &w); lcx_ckpt_writer_put(w, ...) per piece;
 *               lcx_ckpt_writer_close(w, &rank_json)                  -> gather rank_json (json_dumps) on rank 0
 *   rank 0:     lcx_ckpt_copy_file(tmp, "tokenizer.json", ...); lcx_ckpt_finalize(tmp, &meta, all_rank_json, n);
 *               lcx_ckpt_commit(tmp, parent, "step-100", keep_last)
 * A crash anywhere before the commit's rename leaves only a NAME.tmp-* directory that the next save removes;
 * `latest` always names a complete checkpoint.
 *
 * Loading: lcx_ckpt_open(dir) checks the whole manifest (shapes, boxes inside shapes, no overlapping pieces,
 * params covered exactly once, offsets within files, files present, codecs/dtypes known); lcx_ckpt_read_box
 * reads any box of any tensor from whatever pieces intersect it, one piece at a time, verifying each piece's
 * checksum once. Any layout reads any other this way. */
#ifndef LCX_FORMATS_LCX_H
#define LCX_FORMATS_LCX_H

#include <jansson.h>
#include <stdint.h>

#include "formats/lcx_codec.h"
#include "src/core/layout.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

#define LCX_CKPT_FORMAT "lcextend-checkpoint"
#define LCX_CKPT_VERSION 1
#define LCX_CKPT_MANIFEST "manifest.json"
#define LCX_CKPT_LATEST "latest"
#define LCX_CKPT_ROLE_MAX 32

/* ---- writing --------------------------------------------------------------------------------------------- */

typedef struct lcx_ckpt_write_opts {
    lcx_codec codec;          /* default zstd */
    lcx_filter filter;        /* default shuffle */
    int level;                /* zstd level, default 1 */
    int threads;              /* zstd worker threads, default 0 (compress in the calling thread) */
    uint64_t max_piece_bytes; /* a put larger than this is split along dim 0 (bounds reader memory); default
                                 256 MiB, 0 = never split */
} lcx_ckpt_write_opts;

void lcx_ckpt_write_opts_default(lcx_ckpt_write_opts *o);

/* Create parent/NAME.tmp-<host>-<pid>-<random>/ (src/core/outpath.h; stale ones of killed saves are removed
 * first; parent must exist, parent/NAME must not). NAME: letters, digits, '.', '_', '-', not starting with
 * '.', not "latest", without ".tmp-". *tmp_dir is heap-allocated. */
lcx_status lcx_ckpt_tmpdir_create(const char *parent, const char *name, char **tmp_dir);

typedef struct lcx_ckpt_writer lcx_ckpt_writer;

/* Start data-<rank>.bin in tmp_dir (must not exist). opts NULL = defaults. */
lcx_status lcx_ckpt_writer_open(const char *tmp_dir, int rank, const lcx_ckpt_write_opts *opts,
                                lcx_ckpt_writer **w);
/* Append the piece `box` of global tensor (name, role) of the given dtype and global shape; data holds the box's
 * elements contiguous row-major. dtype must have whole-byte elements (no F4/F6/GGUF blocks). An empty box
 * records the tensor without storing anything. role: [a-z0-9_]{1,32}. */
lcx_status lcx_ckpt_writer_put(lcx_ckpt_writer *w, const char *name, const char *role, lcx_dtype dtype, int ndim,
                               const uint64_t *shape, const lcx_box *box, const void *data);
/* fsync and close the data file; *rank_json (new reference) describes the file and its pieces, for
 * lcx_ckpt_finalize (serialisable with json_dumps to gather it across ranks). The writer stays to be freed. */
lcx_status lcx_ckpt_writer_close(lcx_ckpt_writer *w, json_t **rank_json);
/* Closes (without fsync) and frees; NULL is a no-op. A writer freed before close leaves its file behind. */
void lcx_ckpt_writer_free(lcx_ckpt_writer *w);

/* Copy a file (e.g. tokenizer.json) into the checkpoint directory as dst_name (a plain file name), fsynced.
 * src_flags: how the source is opened (src/core/fileio.h; LCX_IN_OWN when it is a file of an .lcx). */
lcx_status lcx_ckpt_copy_file(const char *tmp_dir, const char *src_path, int src_flags, const char *dst_name);

typedef struct lcx_ckpt_meta {
    const json_t *model_config;   /* HF config.json object, stored as is (NULL = null) */
    const json_t *training_state; /* step, tokens, rng, cursors, ... stored as is (NULL = null) */
    int tp, cp, dp;               /* the layout the checkpoint was written with */
    const char *kv_layout;        /* "split" or "replicated" (kv heads < tp); NULL = "split" */
    const char *const *tokenizer_files; /* names of files already copied into the directory */
    int n_tokenizer_files;
} lcx_ckpt_meta;

/* Merge the ranks' piece lists, write manifest.json (fsynced) and re-open the directory with every reader check,
 * so a bad save fails here rather than at load time. Does not fsync the data files (close did). */
lcx_status lcx_ckpt_finalize(const char *tmp_dir, const lcx_ckpt_meta *meta, json_t *const *rank_json,
                             int n_ranks);

/* Rename tmp_dir to parent/name (must not exist yet), fsync parent, point parent/latest at it (atomic), then
 * prune: keep the keep_last newest checkpoints of parent (by save time; keep_last <= 0 keeps all) and remove
 * leftover *.tmp-* directories of crashed saves. Only flat directories holding an lcx manifest (or tmp
 * directories) are ever removed. */
lcx_status lcx_ckpt_commit(const char *tmp_dir, const char *parent, const char *name, int keep_last);
/* The checkpoints (complete directories of this format) in parent now: 0 when it cannot be listed. */
int64_t lcx_ckpt_count(const char *parent);
/* The most checkpoints that `saves` more commits with keep_last (<= 0: all kept) hold at once in a parent that has
 * `existing` now, beyond those: a commit's directory is complete before the prune, so keep_last + 1 exist at its
 * peak (keep_last + 1, or saves, from an empty parent). What a run's disk must have room for, a checkpoint each. */
int64_t lcx_ckpt_held_new(int64_t existing, int64_t saves, int keep_last);

/* Point parent/latest at parent/name (atomic), an existing complete checkpoint: a save that finds its checkpoint
 * already there (claimed by a run killed before it moved `latest`, then resumed from an older one). */
lcx_status lcx_ckpt_set_latest(const char *parent, const char *name);
/* Remove the leftovers of crashed saves and prunes in parent whose owner is gone (*.tmp-* directories,
 * latest.tmp-*), as a commit's prune does, keeping every checkpoint: a resume does it first, since it may have
 * nothing left to save (a run killed in its last save's prune or `latest` update). */
lcx_status lcx_ckpt_sweep(const char *parent);

/* For a standalone checkpoint (import, reshard: no run directory around it): rename tmp_dir to parent/name (must
 * not exist yet) and fsync parent. No `latest` file, no pruning. */
lcx_status lcx_ckpt_publish(const char *tmp_dir, const char *parent, const char *name);

/* parent/<contents of parent/latest>, heap-allocated. LCX_ERR_NOT_FOUND if there is no latest file. */
lcx_status lcx_ckpt_latest(const char *parent, char **dir);

/* ---- reading --------------------------------------------------------------------------------------------- */

typedef struct lcx_ckpt_piece {
    int file;             /* index into the checkpoint's file list */
    uint64_t offset;      /* byte offset of the stored bytes in the file */
    uint64_t length;      /* stored bytes */
    uint64_t raw_length;  /* bytes after decoding = box volume * element size */
    lcx_codec codec;
    lcx_filter filter;
    lcx_box box;          /* in global coordinates */
    uint64_t checksum;    /* XXH3-64 of the stored bytes */
    int verified;         /* checksum already checked in this session */
} lcx_ckpt_piece;

typedef struct lcx_ckpt_tensor {
    char *name;
    char role[LCX_CKPT_ROLE_MAX + 1];
    lcx_dtype dtype;
    size_t es; /* bytes per element */
    int ndim;
    uint64_t shape[LCX_BOX_MAX_DIMS];
    int n_pieces;
    lcx_ckpt_piece *pieces;
} lcx_ckpt_tensor;

/* An open checkpoint. Not thread-safe: it holds decode scratch and lazily mapped files; use one per thread. */
typedef struct lcx_ckpt lcx_ckpt;

/* Open a checkpoint directory, validating everything but the data bytes. */
lcx_status lcx_ckpt_open(const char *dir, lcx_ckpt **ck);
void lcx_ckpt_free(lcx_ckpt *ck);

int lcx_ckpt_tensor_count(const lcx_ckpt *ck);
const lcx_ckpt_tensor *lcx_ckpt_tensor_at(const lcx_ckpt *ck, int i);
/* NULL when absent. */
const lcx_ckpt_tensor *lcx_ckpt_find(const lcx_ckpt *ck, const char *name, const char *role);
/* Borrowed from the manifest (json null when none was saved). */
const json_t *lcx_ckpt_model_config(const lcx_ckpt *ck);
const json_t *lcx_ckpt_training_state(const lcx_ckpt *ck);
/* The layout it was written with. kv_layout: "split" / "replicated". */
void lcx_ckpt_layout(const lcx_ckpt *ck, int *tp, int *cp, int *dp, const char **kv_layout);
int lcx_ckpt_tokenizer_file_count(const lcx_ckpt *ck);
const char *lcx_ckpt_tokenizer_file(const lcx_ckpt *ck, int i); /* plain name inside the directory */
const char *lcx_ckpt_dir(const lcx_ckpt *ck);
int lcx_ckpt_file_count(const lcx_ckpt *ck);
const char *lcx_ckpt_file_name(const lcx_ckpt *ck, int i); /* data file of lcx_ckpt_piece.file */

/* Read the box of tensor (name, role) into dst (box elements contiguous row-major, the tensor's dtype). Fails if
 * the box is outside the tensor, if the stored pieces do not cover all of it, or on a checksum / decode error
 * (naming file and tensor). Memory: at most one decoded piece at a time besides dst. */
lcx_status lcx_ckpt_read_box(lcx_ckpt *ck, const char *name, const char *role, const lcx_box *box, void *dst);

/* Zero-copy read: when the box is one contiguous run inside a single raw, unfiltered piece, *view points at its
 * bytes in the mapped data file (the piece's checksum is verified first); otherwise *view = NULL (use
 * lcx_ckpt_read_box). The pointer stays valid until lcx_ckpt_free. */
lcx_status lcx_ckpt_box_view(lcx_ckpt *ck, const char *name, const char *role, const lcx_box *box, const void **view);

/* Drop this handle's resident pages of the mapped data files (they stay in the page cache and fault back in when
 * read again): streaming readers call it between tensors so resident memory stays near one tensor. */
void lcx_ckpt_release(lcx_ckpt *ck);

/* Decode every piece, checking its checksum, zstd frame checksum and length. */
lcx_status lcx_ckpt_verify(lcx_ckpt *ck);

#endif
