/* train: the training loop of one stage and its checkpoints (what `lcextend train` and `lcextend CKPT --to N`
 * run). A stage is steps x (grad_accum micro-batches of micro_seqs packed sequences of seq_len tokens) drawn
 * from a sampler over a Megatron indexed dataset (src/train/sampler.h), with the learning rate of src/train/lr_schedule.h,
 * global-norm clipping and AdamW (src/model/model.h).
 *
 * Run directory:
 *   RUN/metrics.jsonl      one JSON object per line: {"stage","step","loss","lr","grad_norm","clip","tokens",
 *                          "tokens_per_s","peak_rss","time","comm_s","compute_s","ring_wait_s","tp_comm_s",
 *                          "offload_wait_s"} per
 *                          step (time: the step's seconds; comm_s: those in the collectives of the gradient group
 *                          and the TP group, waits included, 0 on one rank; compute_s: the rest; ring_wait_s: the
 *                          part of compute_s blocked waiting for the CP ring's K/V messages, the transfer not
 *                          hidden behind attention, 0 without CP; tp_comm_s: the part of comm_s in the TP group's
 *                          collectives, 0 without TP; offload_wait_s: the part of compute_s waiting for
 *                          offloaded activations fetched back, 0 without offload), {"stage","eval_len","loss","ppl",...} per evaluation
 *                          (appended; after a resume the replayed steps appear again with the same values)
 *   RUN/checkpoints/NAME   .lcx checkpoints (formats/lcx.h) with `latest`; NAME = sSS-stepNNNNNN. Each holds
 *                          role `param` (stored dtype), `master` (fp32, bf16 models only), `adam_m`, `adam_v`,
 *                          the stage's config.json, tokenizer files, and the training state (below).
 * Training state JSON: {"format":"lcextend-train","stage":i+1 (1-based, as in checkpoint names),"step":s,"stage_steps":n,"stage_done":0|1,
 *   "tokens":total trained tokens of the run,"optimizer_step":AdamW step count,"seq_len":L,
 *   "sampler":{"seed","epoch","pos","offset","samples"} (source 0's),"next_lr":x,"loss":last loss,
 *   "attention_mask":"causal"|"document", with a data mix of several sources "mix":{"weights":[normalised],
 *   "cursors":[[epoch,pos,offset,samples] per source]},
 *   "run":caller's object,
 *   "recipe": run.recipe when given}.
 * The only randomness is the sampler's (seeded shuffle); with the cursor, master weights, moments and step
 * restored the continued run computes exactly the same numbers as an uninterrupted one (same backend and
 * thread count: OpenBLAS/OpenMP reductions are deterministic for a fixed thread count).
 *
 * Interruption: lcx_train_catch_signals() makes SIGINT/SIGTERM set a flag; the loop finishes the current step,
 * saves a checkpoint and returns LCX_ERR_INTERRUPTED. */
#ifndef LCX_TRAIN_H
#define LCX_TRAIN_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/tokdata.h"
#include "src/train/lr_schedule.h"
#include "src/model/model.h"
#include "src/train/mix.h"
#include "src/comm/comm.h"
#include "src/core/report.h"
#include "src/core/status.h"

typedef struct lcx_train_stage {
    int index;               /* 0-based stage number within the run */
    int n_stages;            /* for display */
    int64_t seq_len;         /* tokens per sequence, >= 2 */
    int64_t steps;           /* optimizer steps, >= 1 */
    int64_t micro_seqs;      /* sequences per micro-batch, >= 1 */
    int64_t grad_accum;      /* micro-batches per step, >= 1 */
    lcx_lr_schedule lr;      /* lr.total_steps = steps */
    double clip_norm;        /* <= 0: off */
    double weight_decay;
    double beta1, beta2, eps; /* 0 = AdamW defaults */
    uint64_t seed;           /* sampler seed */
    int64_t save_interval;   /* steps between saves inside the stage; 0 = stage end only */
    int doc_mask;            /* 1: document masking, attention stays inside each document of a packed sequence
                                (the sampler's document starts, lcx_batch.doc_start) */
    int64_t min_doc_tokens;  /* the sampler's filter and upsampling (src/train/sampler.h; 0, 0, 0 or 1: none) */
    int64_t long_doc_tokens, long_doc_repeat;
} lcx_train_stage;

/* Validation during a stage (lcx_train_ctx.eval): the held-out loss of model m as it stands after a step, as a
 * mean NLL per token over *tokens scored tokens. Called on every rank of the job after the same steps; the
 * callee picks the ranks that evaluate (the writer among them: its result is the one recorded). It must leave
 * the training as it was: the steps after it compute what they would have without it. */
typedef lcx_status (*lcx_train_eval_fn)(void *user, lcx_model *m, double *loss, int64_t *tokens);

typedef struct lcx_train_ctx {
    const char *run_dir;          /* must exist */
    const json_t *model_config;   /* config.json saved in checkpoints (the stage's rope); required */
    const char *const *tokenizer_paths; /* files copied into every checkpoint under their base names */
    int n_tokenizer;
    int keep_last;                /* checkpoints kept (0 = all) */
    const lcx_reporter *report;   /* step lines, progress, "step"/"saved" events (NULL: silent) */
    const json_t *run_info;       /* stored as "run" in the training state (may be NULL) */
    int64_t run_tokens;           /* tokens of the whole run (all stages), for a run ETA; 0 = stage ETA only */
    /* Data parallelism (docs/parallel.md "Data parallelism"); zero: one rank. Each step draws dp_size x
     * grad_accum x micro_seqs sequences from the one sample order, and DP rank d trains on the d-th
     * grad_accum x micro_seqs of them; the gradients are reduced over grad (lcx_model_train_step_group). Only
     * rank 0 of grad writes metrics.jsonl (every rank its pieces of each checkpoint); a caught signal stops every rank after the same step. */
    lcx_comm *grad;               /* the gradient group (CP x DP), NULL: no reduction */
    int dp_rank, dp_size;         /* this rank's data slice; dp_size 0 or 1: all of the step's sequences */
    /* Context parallelism (the model's opts.cp_comm); cp_size 0 or 1: none. The CP ranks of one DP rank take the
     * same sequences and each trains on its local part of every row (lcx_cp_local_batch: seq_len / cp_size
     * tokens, with their global targets and positions; seq_len a multiple of 2 x cp_size); grad is then the
     * GRAD group (cp_size x dp_size ranks). */
    int cp_rank, cp_size;
    /* Checkpoints in the layout (docs/lcx-format.md "Who writes what"): with a gradient group of more than one
     * rank every rank of world calls lcx_train_save and writes its own pieces (data-<world rank>.bin): params
     * and master by rank 0 of each GRAD group (replica 0 of its TP slice), the AdamW moments by every rank for
     * its ZeRO-1 rows (lcx_model_moment_rows; without ZeRO-1 with the params). world NULL: the gradient group
     * (the world while TP is 1). */
    lcx_comm *world;
    int tp_size;                  /* the model's TP size (opts.tp_comm), recorded as the manifest's layout; 0 or 1:
                                     none */
    int test_fail_save;           /* tests: 1 + the world rank whose part of every save fails after it wrote its
                                     data file (0: none) */
    lcx_train_eval_fn eval;       /* NULL: no validation; else after every eval_every-th step and the stage's last:
                                     a "val_loss" line in metrics.jsonl and a report line */
    void *eval_user;
    int64_t eval_every;
    /* Throughput in model FLOPs (Megatron's TFLOP/s per GPU): flops_per_token at the stage's length (0: not
     * reported), over the job's ranks (world, else grad: TP x CP x DP devices); peak_flops, when > 0, the device's
     * peak FLOP/s for the model FLOPs utilisation (MFU). Written as "tflops" and "mfu" in metrics.jsonl. */
    double flops_per_token;
    double peak_flops;
    int override_lr;              /* a resume with another learning-rate schedule than the saved one continues with
                                     this stage's (Megatron's --override-opt_param-scheduler); 0: refused */
} lcx_train_ctx;

typedef struct lcx_train_state {
    int stage;                    /* stage of the saved position */
    int64_t step;                 /* steps done in that stage */
    int stage_done;               /* the stage finished */
    int64_t tokens;               /* trained tokens over the run */
    lcx_mix_cursor cursor;        /* where the stage's samplers stand (cursor.n: the data mix's sources) */
    double mix_weight[LCX_MIX_MAX]; /* the mix's normalised weights (one source: 1) */
    int64_t seq_len, stage_steps; /* of the saved stage (0 = unknown): a resume with other values is refused */
    uint64_t seed;                /* the saved stage's sampler seed */
    int64_t min_doc_tokens, long_doc_tokens, long_doc_repeat; /* ... and its filter and upsampling (0, 0, 1: none) */
    int doc_mask;                 /* the saved stage's attention mask: 1 document, 0 causal, -1 unknown (a
                                     checkpoint from before the key) */
    lcx_lr_schedule lr;           /* the saved stage's learning-rate schedule (lr.peak 0: unknown, a checkpoint
                                     from before the key) */
    double loss;                  /* last step's loss (NaN when none) */
    char *saved;                  /* path of the last checkpoint written or loaded (owned) */
} lcx_train_state;

void lcx_train_state_init(lcx_train_state *s);  /* stage 0, step 0, nothing saved */
void lcx_train_state_free(lcx_train_state *s);  /* frees saved */

/* Summary of a stage run. */
typedef struct lcx_train_summary {
    int64_t steps_run;            /* steps executed by this call */
    double last_loss, mean_tokens_per_s, seconds;
    double mean_tflops;           /* model TFLOP/s per device over the steps (0 without ctx.flops_per_token) */
    uint64_t peak_rss;
    int agreed;                   /* the returned failure came back on every rank of the gradient group at the same
                                     point (rank 0's metrics file or a save failed), with the failing rank's message
                                     as "rank R: ...": no rank waits for another, the job need not be aborted */
} lcx_train_summary;

/* Whether the stage saves after `step` (1-based) of its `steps`: every save_interval steps (<= 0: none) and at
 * the last; and how many saves the steps after `done` make (a stage from its start: done 0). The planner counts
 * a run's disk with the same rule. A signal adds a save at the step it stops. */
int lcx_train_save_due(int64_t step, int64_t steps, int64_t save_interval);
int64_t lcx_train_saves(int64_t done, int64_t steps, int64_t save_interval);

/* Run (or continue) stage st on data (one dataset: lcx_mix_single, or a data mix, src/train/mix.h). When
 * state->stage == st->index and state->step > 0 (a loaded checkpoint), the stage continues from state->step with
 * the samplers at state->cursor (the same sources and weights, else refused); otherwise it starts at step 0.
 * Saves every save_interval steps and at the end (state->stage_done = 1). Returns LCX_ERR_INTERRUPTED (after
 * saving) when a caught signal arrived. */
lcx_status lcx_train_stage_run(lcx_model *m, const lcx_mix_data *data, const lcx_train_stage *st,
                               const lcx_train_ctx *ctx, lcx_train_state *state, lcx_train_summary *sum);

/* Save the model and state as RUN/checkpoints/NAME (atomically, then `latest` + pruning); state->saved is set.
 * With a gradient group of more than one rank (or ctx->world) every rank of the world calls it: rank 0 creates
 * the directory and shares its path, each rank writes and fsyncs its pieces, the piece lists are gathered to
 * rank 0, which finalizes and commits only when every rank succeeded; every rank returns the same outcome (a
 * failure names the lowest failing rank), and a failed save never moves `latest`. */
lcx_status lcx_train_save(lcx_model *m, const lcx_train_ctx *ctx, const lcx_train_state *state,
                          const lcx_train_stage *st);

/* Read config.json of checkpoint dir into cfg (lcx_config_free it). */
lcx_status lcx_train_ckpt_config(const char *dir, lcx_model_config *cfg);
/* Load weights (and master/moments/step/state when the checkpoint has them; a checkpoint without them, e.g. an
 * import, gives master = weights, zero moments, step 0, state at stage 0 step 0) into m, whose shapes must match.
 * A forward-only model (training = 0) gets the weights only. state may be NULL. Each rank reads exactly its own
 * boxes (lcx_ckpt_read_box): params and master of its TP slice (lcx_model_param_slice), moments of its ZeRO-1
 * rows (lcx_model_moment_rows), so a checkpoint saved in any layout loads into any other. */
lcx_status lcx_train_load(const char *dir, lcx_model *m, lcx_train_state *state);

/* `latest` checkpoint of a run directory (heap path), LCX_ERR_NOT_FOUND if none. */
lcx_status lcx_train_latest(const char *run_dir, char **dir);

/* An lcx_eval_score_fn (src/eval/eval.h) over a model: one forward pass of tokens[0..n) (n <= the model's max_tokens)
 * with targets only for positions first..n-1. The model reports a summed loss, not per-token values, so every
 * nll[i] is the window's mean NLL: each sum lcx_ppl_eval forms (per window, over windows) is the exact sum,
 * but the individual entries are not per-token values. model is an lcx_model *. */
lcx_status lcx_train_window_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll);

/* The same over a context-parallel model (opts.cp_comm): every CP rank of the group calls it with the same window.
 * The window is padded to a multiple of 2 x cp_size (lcx_cp_local_len; pad tokens after the last one, no
 * targets: under the causal mask they change nothing before them), each rank forwards its local part
 * (lcx_cp_local_batch, global targets and positions) and the model sums the loss and count over CP, so every rank
 * gets the window's mean NLL. cp_size 0 or 1: lcx_train_window_score of model. scorer is an lcx_train_cp_scorer *. */
typedef struct lcx_train_cp_scorer {
    lcx_model *model;
    int cp_rank, cp_size;
} lcx_train_cp_scorer;
lcx_status lcx_train_window_score_cp(void *scorer, const int32_t *tokens, int64_t n, int64_t first, double *nll);

/* SIGINT / SIGTERM set a flag checked after each step (installed once; idempotent). */
void lcx_train_catch_signals(void);
/* Back to the default actions once training is over (a signal then ends the process, as before the run). */
void lcx_train_release_signals(void);
int lcx_train_interrupted(void);
/* Clear the flag (tests, or a caller that handled the stop). */
void lcx_train_clear_interrupt(void);

#endif
