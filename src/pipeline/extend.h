/* extend: the whole context extension `lcextend CKPT --to N` runs, as one library call (docs/extend.md).
 *
 *   plan (reported; dry_run stops here) -> import the input into RUN/import.lcx -> evaluate the input (before)
 *   -> per stage: the stage's rope config, train at its sequence length (src/train/train.h), evaluate, save
 *   -> evaluate the result (after) and the before/after table -> export RUN/hf (and RUN/model.gguf).
 *
 * resume continues from RUN/checkpoints/latest (stage and step). Nothing here writes to the terminal: everything
 * the run says goes to the reporter (src/core/report.h), which may be NULL (a silent run).
 *
 * Lines:
 *   RESULT  the plan table and its time-estimate note (on a backend other than the CPU "backend: NAME ..."), the
 *           evaluation tables (src/eval/eval_run.h), each stage's
 *           "  eval length L: loss X, perplexity Y (T tokens, W windows)", "exported PATH ..."
 *   NOTE    "resuming from ...", "evaluating the input/result ...", "stage i/n: ...", "stage i/n done: ...",
 *           "PATH exists: not exported again", training's "saved ..." (unless quiet)
 *   STEP    training's per-step lines (unless quiet)
 * Tables: the before/after summary (title "before / after (...)", columns length, ppl before, ppl after, passkey
 *   before, passkey after; "-" for a missing value).
 * Progress: training steps and evaluation forward passes (unless quiet).
 * Events (name: JSON object fields), in the order of the run:
 *   "plan":        target, stages, recipe, total_tokens, backend
 *   "resume":      from (checkpoint path), stage (1-based), stage_done (bool)
 *   "ppl", "passkey": the before/after evaluations' numbers (src/eval/eval_run.h)
 *   "evaluated":   which ("before" | "after"), checkpoint, json (the path of the before.json / after.json written)
 *   "stage_start": stage (1-based), stages, seq_len, method, max_position_embeddings, steps, tokens_per_step
 *   training's "step" and "saved" events (src/train/train.h)
 *   "stage_done":  stage, stages, loss, tokens_per_s, peak_rss (bytes), saved (checkpoint path)
 *   "eval":        stage, eval_len, loss, ppl, tokens, windows: one per stage and eval length (the last stage's
 *                  after the "after" evaluation when one runs)
 *   "export":      format ("hf" | "gguf"), path, context, skipped (bool: already there from an earlier run) */
#ifndef LCX_PIPELINE_EXTEND_H
#define LCX_PIPELINE_EXTEND_H

#include "src/comm/run_ranks.h"
#include "src/core/report.h"
#include "src/core/status.h"
#include "src/core/tensor.h"
#include "src/plan/plan.h"
#include "src/plan/recipe.h"

typedef struct lcx_backend lcx_backend; /* kernels/backend.h */

typedef struct lcx_extend_options {
    const char *ckpt;      /* the input, any form of src/checkpoint/source.h (required); a GGUF is planned from
                              its metadata, before its import */
    const char *to_text;   /* the target as the user wrote it ("32k"): names the default run directory (CKPT's
                              base name + '-' + to_text); NULL: the number plan.target */
    lcx_plan_opts plan;    /* plan.target (required), method override, tokens_per_s, weight/act bytes of the
                              memory estimate; tokens_per_s 0: estimate times from this machine's sgemm rate */
    const char *recipe;    /* built-in recipe name or YAML file (default "yarn-x2") */
    const char *data;      /* training data PREFIX.bin/.idx ... */
    const char *const *more_data; /* with data: the other sources of a data mix (src/train/mix.h), n_more_data of
                                     them (data plus them at most LCX_MIX_MAX); every stage draws from the mix */
    int n_more_data;
    const double *data_weights; /* with more_data: one weight > 0 per source, data's first; NULL: one source */
    const char *ids;       /* ... or a file of whitespace-separated token ids (exactly one, unless dry_run) */
    const char *eval_data; /* held-out PREFIX.bin/.idx: per-stage perplexities and the before/after evaluation */
    int64_t eval_every;    /* with eval_data, > 0: also the validation loss at the stage's seq_len after every
                              eval_every-th step of each stage and its last (lcx_tool_validate) */
    const char *out;       /* the run directory RUN; NULL: the default above */
    int passkey_trials;    /* per (length, depth) before and after; -1: 2 when CKPT has a tokenizer and eval_data
                              is given, else 0; > 0 alone also runs the before/after evaluation */
    const double *depths;  /* passkey key depths in [0, 1] (n_depths of them; default 0, .25, .5, .75, 1) */
    int n_depths;
    int needles;           /* passkey keys per prompt, one asked for (multi-key retrieval); 0 or 1: the classic test */
    const char *haystack;  /* NULL: the passkey prompts' repeated filler; else a text file whose words fill them */
    int stage_passkey;     /* also the passkey test after every stage but the last (whose result the after-
                              evaluation tests), at the stage's eval lengths: RUN/eval/passkey-stageN.json and .svg */
    int resume;            /* continue RUN from its latest checkpoint */
    double peak_tflops;    /* the device's peak TFLOP/s for the metrics' MFU (0: no MFU) */
    int override_lr;       /* resume: go on with the recipe's learning-rate schedule where it differs from the
                              saved stage's (lcx_train_ctx.override_lr); 0: refused */
    int dry_run;           /* report the plan and stop */
    int gguf;              /* also export RUN/model.gguf */
    lcx_dtype param_dtype; /* stored weights while training (LCX_F32 | LCX_BF16) */
    lcx_dtype act_dtype;   /* activation storage while training */
    const lcx_backend *backend; /* where every model of the run (stages, evaluations) runs; NULL: the CPU. Checked
                                   available by the caller; recorded in the training state's "run" object. With
                                   several ranks the communicators must move its buffers (lcx_comm_for_backend) */
    int keep;              /* checkpoints kept (0 = all) */
    int quiet;             /* no training step lines, "saved" notes or progress states (the run's own notes and
                              results still go out) */
    /* The job's ranks (src/comm/run_ranks.h; all zero: one rank): every rank calls lcx_extend_run with the same
     * options but these, with plan.tp = tp_size, plan.cp = cp_size and plan.dp = dp_size (the plan's micro_seqs
     * and grad_accum are then per rank). The lead (rank 0 of the job) checks, creates RUN, imports, evaluates,
     * records and exports; every rank trains each stage on its share of the steps, on the model built over
     * cp_comm and tp_comm (its TP slices, seq_len / cp_size tokens of every sequence; every stage length a
     * multiple of 2 cp_size, checked before any work); the others wait for the lead at fixed points (over the
     * world) and start each stage from its checkpoint. The stage evaluations run on the TP and CP ranks of DP rank
     * 0 (ring attention, the window losses summed over CP); the before/after evaluation, the passkey test and the
     * export stay on the lead (a one-rank forward-only model, whole tensors read from the checkpoint) while the
     * others wait. Only the lead says anything through the reporter; every rank returns the same success or
     * failure (a failure only some ranks see while training ends the job with lcx_comm_abort). */
    lcx_run_ranks ranks;
} lcx_extend_options;

/* The defaults of `lcextend CKPT --to N` without flags (ckpt, plan.target and data/ids still to fill). */
void lcx_extend_options_default(lcx_extend_options *o);

/* Run the extension. Errors (lcx_last_error() says what) come before any work where they can: a missing input
 * or data, an unknown recipe, a plan that does not fit, a run directory that already holds a run (without
 * resume). LCX_ERR_INTERRUPTED after a Ctrl-C (the position is saved; resume continues). */
lcx_status lcx_extend_run(const lcx_extend_options *o, const lcx_reporter *r);

#endif
