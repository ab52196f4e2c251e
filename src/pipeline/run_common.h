/* run_common: what a training run (`lcextend train`, `lcextend CKPT --to N`) needs around the training loop: the
 * input checkpoint as an .lcx, token-id text files as indexed datasets, a model built from a checkpoint, tokenizer
 * files to carry along, the run directory's state. The lcx_tool_ names are those of tools/train_common.h, where
 * these helpers lived before. */
#ifndef LCX_PIPELINE_RUN_COMMON_H
#define LCX_PIPELINE_RUN_COMMON_H

#include <stdint.h>

#include "formats/hf_config.h"
#include "src/model/model.h"
#include "src/core/report.h"
#include "src/core/status.h"
#include "src/eval/eval.h"
#include "src/train/mix.h"

/* Read a text file of whitespace-separated token ids (integers in [0, 2^31)). *ids is malloc'd. Errors name
 * the file and the token index ("ids.txt: token 3: 'abc' is not a non-negative integer"). */
lcx_status lcx_tool_read_ids(const char *path, int32_t **ids, int64_t *n);

/* 1 when path is an .lcx checkpoint directory (holds manifest.json). */
int lcx_tool_is_lcx(const char *path);

/* src as an .lcx directory: itself when it is one, else imported (HF directory, .safetensors file or index,
 * GGUF: the forms of src/checkpoint/source.h) into run_dir/import.lcx (kept; reused when already there, e.g. on
 * --resume). *lcx_dir is heap-allocated. */
lcx_status lcx_tool_source_lcx(const char *src, const char *run_dir, char **lcx_dir);

/* Whitespace-separated token ids in a text file -> Megatron dataset PREFIX.bin/.idx (one document). Ids must be
 * below vocab. */
lcx_status lcx_tool_ids_to_tokdata(const char *ids_path, const char *prefix, int64_t vocab);

struct lcx_tokdata;
/* --ids FILE of a run: converted into run_dir/ids.bin/.idx (lcx_tool_ids_to_tokdata) and opened into *td. */
lcx_status lcx_tool_ids_open(const char *ids_path, const char *run_dir, int64_t vocab, struct lcx_tokdata *td);

/* --data (and a data mix's other sources, n_more of them, each needing a weight: weights non-NULL) opened into
 * td[0 .. *n_open) (src/train/mix.h): on failure the ones opened are counted in *n_open, for the caller to close. */
lcx_status lcx_tool_data_open(const char *data, const char *const *more, int n_more, const double *weights,
                              struct lcx_tokdata *td, int *n_open);
/* The data mix over td[0 .. n) (weights NULL: one source, weight 1), and its sources for a run's info as given
 * ([{"data": prefix, "weight": w}], NULL for one source). */
lcx_mix_data lcx_tool_mix(const struct lcx_tokdata *td, int n, const double *weights);
json_t *lcx_tool_mix_info(const struct lcx_tokdata *td, int n, const double *weights);
/* ", MFU 41.2% of 989 TFLOP/s" for a mean of tflops model TFLOP/s per device on a device of peak_tflops, "" without
 * a peak; into buf (cap bytes), returned. */
const char *lcx_tool_mfu_text(double tflops, double peak_tflops, char *buf, size_t cap);

struct lcx_run_groups;
/* How a run's model is laid out over its groups g, for a header line: " over CP 4 (32768 tokens per rank), TP 2
 * (sequence parallel), ZeRO-1 over 8 ranks" for sequences of seq_len tokens ("" on one rank); into buf (cap
 * bytes), returned. */
const char *lcx_tool_layout_text(const lcx_model *m, const struct lcx_run_groups *g, int64_t seq_len, char *buf,
                                 size_t cap);

/* What a run writes to its directory at most, beyond what is there (docs/plan.md "Disk"): `held` checkpoints of
 * `ckpt` bytes at once (lcx_ckpt_held_new), the input's import (0: none, an .lcx input or one imported already)
 * and the export (0: none). */
typedef struct lcx_disk_need {
    int64_t held;
    double ckpt, import_bytes, export_bytes;
} lcx_disk_need;
/* A one-line warning when the filesystem of dir (of its parent before dir exists) has less free space than need.
 * A warning, not a refusal: the bound is before zstd. */
void lcx_tool_warn_disk(const lcx_reporter *r, const char *dir, const lcx_disk_need *need);
/* The run directory's checkpoints now (RUN/checkpoints; 0 for a new run). */
int64_t lcx_tool_run_checkpoints(const char *run_dir);

/* Validation during training (an lcx_train_eval_fn, src/train/train.h): the mean NLL per token of the held-out
 * documents cut into non-overlapping windows of seq_len positions (BOS first when bos >= 0; a document shorter
 * than a window as one shorter window), scored by the training model on every rank: the CP ranks of a group score
 * each window together (the ring), the DP ranks shares of the windows, added up over the gradient group. */
typedef struct lcx_tool_validation {
    const struct lcx_ppl_doc *docs;
    int64_t n_docs, seq_len;
    int32_t bos;
    int cp_rank, cp_size; /* the model's CP group (cp_size 0 or 1: none) */
    struct lcx_comm *grad; /* with dp_size > 1: the gradient group (CP x DP, rank c + CP d); each DP rank's CP ranks
                              score a shard of the windows and the shards are added up over it */
    int dp_rank, dp_size;
} lcx_tool_validation;
lcx_status lcx_tool_validate(void *validation, lcx_model *m, double *loss, int64_t *tokens);

/* Perplexities of the training model m over docs (lcx_ppl_eval with pc) on every rank of a run: the CP ranks of a
 * group score each window together (the ring, lcx_train_window_score_cp), DP rank d of D the windows of shard d,
 * and the shards' sums are added over the gradient group grad (rank c + CP d), one CP rank of each
 * (lcx_ppl_results_gather). cp_size / dp_size 0 or 1: none. What the stage evaluations and validation run. */
lcx_status lcx_tool_ppl(const lcx_ppl_config *pc, const lcx_ppl_doc *docs, int64_t n_docs, lcx_model *m,
                        int cp_rank, int cp_size, struct lcx_comm *grad, int dp_rank, int dp_size,
                        lcx_ppl_result *res);

/* Tokenizer files stored in checkpoint dir, as full paths (heap array of heap strings; lcx_tool_strv_free). */
lcx_status lcx_tool_ckpt_tokenizer_files(const char *dir, char ***paths, int *n);
void lcx_tool_strv_free(char **v, int n);

struct lcx_train_state;
struct lcx_comm;
/* Build a model for cfg with opts (a training model: opts->training set) and load checkpoint dir into it (and its
 * training state into state when non-NULL): each rank reads only its own boxes (lcx_train_load), so a checkpoint
 * of any layout loads. */
lcx_status lcx_tool_model_from_lcx(const char *dir, const lcx_model_config *cfg, const lcx_model_opts *opts,
                                   struct lcx_train_state *state, lcx_model **out);

/* The run directory OUT before any work. With resume: OUT must be a directory holding a checkpoint, whose path
 * goes to *latest (heap); without: OUT must not already hold a run (checkpoints/latest). Creates nothing. Errors
 * name OUT and the flag to use. */
lcx_status lcx_tool_run_dir_check(const char *out, int resume, char **latest);

/* A reporter passing to inner what --quiet keeps of a training run: results, warnings, events and tables (no
 * notes such as "saved ...", no step lines, no progress). inner must outlive it; NULL is a silent reporter. */
lcx_reporter lcx_tool_quiet_reporter(const lcx_reporter *inner);


#endif
