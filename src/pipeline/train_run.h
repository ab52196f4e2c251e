/* train_run: `lcextend train` as one library call: one training stage at one sequence length into a run directory
 * with checkpoints, metrics and resume (src/train/train.h), from a checkpoint or from random init, optionally
 * exported as an HF directory at the end. Nothing here writes to the terminal; everything goes to the reporter
 * (src/core/report.h), which may be NULL.
 *
 * Lines: NOTE "resuming PATH at step S/N (T tokens trained)", NOTE "train: ARCH, P parameters, seq ..." (ending
 *   ", backend NAME" unless the backend is the CPU),
 *   training's "saved ..." notes and STEP lines (unless quiet), RESULT "done: S steps, final loss ...",
 *   RESULT "exported DIR".
 * Progress: training steps (unless quiet).
 * Events: "train_start": parameters, seq_len, steps, micro_seqs, grad_accum, lr, schedule, backend, resumed_from
 *   (or null);
 *   training's "step" and "saved" (src/train/train.h);
 *   "train_done": steps, loss, tokens_per_s, peak_rss (bytes), checkpoint;
 *   "export": format ("hf"), path. */
#ifndef LCX_PIPELINE_TRAIN_RUN_H
#define LCX_PIPELINE_TRAIN_RUN_H

#include <stdint.h>

#include "src/comm/run_ranks.h"
#include "src/core/report.h"
#include "src/core/status.h"
#include "src/core/tensor.h"
#include "src/model/act_policy.h"
#include "src/train/lr_schedule.h"

typedef struct lcx_backend lcx_backend; /* kernels/backend.h */

typedef struct lcx_train_run_options {
    const char *ckpt;        /* start from: any form of src/checkpoint/source.h (imported unless an .lcx) ... */
    const char *config;      /* ... or random weights for this config.json (exactly one of both) */
    const char *data;        /* training data PREFIX.bin/.idx ... */
    const char *const *more_data; /* with data: the other sources of a data mix (src/train/mix.h), n_more_data
                                     of them (data plus them at most LCX_MIX_MAX) */
    int n_more_data;
    const double *data_weights; /* with more_data: one weight > 0 per source, data's first; NULL: one source */
    const char *ids;         /* ... or a file of whitespace-separated token ids (exactly one of both) */
    const char *out;         /* the run directory (required) */
    const char *export_hf;   /* NULL, or an HF directory exported from the final checkpoint */
    const char *const *tokenizer_files; /* copied into every checkpoint, before the checkpoint's own of the same
                                           name */
    int n_tokenizer_files;
    int64_t seq_len, steps;  /* required */
    int64_t batch, accum;    /* sequences per micro-batch, micro-batches per step */
    int64_t warmup, save_every, keep, seed;
    double lr, min_lr, clip, weight_decay, init_std;
    lcx_lr_kind schedule;
    int64_t decay_steps;     /* schedule wsd: the last decay_steps steps decay (lcx_lr_schedule) */
    lcx_lr_decay decay;
    lcx_act_policy policy;
    int doc_mask;            /* document masking (lcx_train_stage.doc_mask); recorded in RUN's training state */
    const char *eval_data;   /* NULL, or held-out PREFIX.bin/.idx: the validation loss at seq_len after every
                                eval_every-th step and the last (lcx_tool_validate), into metrics.jsonl */
    int64_t eval_every;      /* 0: after the last step only */
    int64_t eval_docs;       /* the first eval_docs held-out documents (0: all) */
    int64_t min_doc_tokens, long_doc_tokens, long_doc_repeat; /* the sampler's filter and upsampling
                                                                 (lcx_train_stage; 0, 0, 0: none) */
    int64_t mlp_tile;        /* rows per MLP tile of the model (opts.mlp_chunk; 0 = untiled; docs/model.md "Tiled
                                MLP in training"). Not recorded in RUN: changes the last bits only */
    int distribute_saved;    /* the model's opts.distribute_saved (with TP; docs/parallel.md): no bit changes */
    int sequence_parallel;   /* the model's opts.sequence_parallel (with TP; docs/parallel.md) */
    double mem_budget, host_budget; /* policy LCX_ACT_AUTO: bytes per device to fit (required) and of offload host
                                       pool (0: not limited); the planner picks each layer's policy */
    lcx_dtype param_dtype, act_dtype;
    const lcx_backend *backend; /* where the model runs (NULL: the CPU; checked available by the caller); recorded
                                   as "run": {"backend": NAME} in each checkpoint's training state. With several
                                   ranks the communicators must move its buffers (lcx_comm_for_backend) */
    int resume;              /* continue from the run's latest checkpoint */
    double peak_tflops;      /* the device's peak TFLOP/s for the metrics' MFU (0: no MFU) */
    int override_lr;         /* resume with another schedule than the saved one (lcx_train_ctx.override_lr) */
    int quiet;               /* no step lines, "saved" notes or progress states */
    /* The job's ranks (src/comm/run_ranks.h; all zero: one rank): every rank calls lcx_train_run with the same
     * options but these. The lead (rank 0 of the job) checks, creates RUN, imports and converts first; the others
     * wait for it, then read what it wrote. Only the lead writes metrics and the export (every rank its own pieces
     * of each checkpoint, committed by the lead; the manifest's layout says tp_size, and the export reads the whole
     * tensors back from the committed checkpoint) and says anything that reaches the reporter; every rank returns
     * the same success or failure (a failure that only some ranks see while training ends the job with
     * lcx_comm_abort). --batch and --accum are per rank: a step trains on dp_size x accum x batch sequences.
     * seq_len is a multiple of 2 cp_size, checked before any work. */
    lcx_run_ranks ranks;
} lcx_train_run_options;

/* The defaults of `lcextend train` (batch 1, accum 1, keep 2, seed 1234, lr 3e-4 cosine, clip 1, wd 0.01,
 * init_std 0.02, keep policy, f32); sources, out, seq_len and steps still to fill. */
void lcx_train_run_options_default(lcx_train_run_options *o);

/* Train. Errors before any work where they can (missing data, checkpoint or config; a run directory that holds a
 * run without resume). LCX_ERR_INTERRUPTED after a Ctrl-C (saved; resume continues). */
lcx_status lcx_train_run(const lcx_train_run_options *o, const lcx_reporter *r);

#endif
