/* eval_checkpoint: `lcextend eval CKPT` as one library call: perplexity by context length (sliding window) and
 * passkey retrieval of a checkpoint, reported as tables and optionally stored as JSON and SVG pictures. The
 * protocol is docs/evaluation-protocol.md. Nothing here writes to the terminal: the tables go to the reporter
 * (src/core/report.h) as RESULT lines (the text `lcextend eval` prints), the forward-pass counts as progress, and
 * the numbers as events ("ppl", "passkey": src/eval/eval_run.h). */
#ifndef LCX_EVAL_EVAL_CHECKPOINT_H
#define LCX_EVAL_EVAL_CHECKPOINT_H

#include <stdint.h>

#include "src/core/report.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

typedef struct lcx_backend lcx_backend; /* kernels/backend.h */

typedef struct lcx_eval_options {
    const char *ckpt;          /* any checkpoint form of src/checkpoint/source.h (required) */
    const char *data;          /* perplexity on a tokenized dataset PREFIX.bin/.idx, one document each ... */
    const char *text;          /* ... or on a plain-text file encoded as one document (at most one of both) */
    const char *tokenizer;     /* tokenizer.json, a directory holding one or a .gguf; NULL: CKPT's, as the loader
                                  names it (then optional with data: BOS from config.json) */
    const int64_t *lengths;    /* window lengths, BOS included; n_lengths 0: the model's context, then powers of
                                  two up to `to` */
    int n_lengths;
    int64_t to;                /* the largest default length (0: the model's context) */
    int64_t stride;            /* sliding-window stride (0: non-overlapping windows) */
    int short_score;           /* documents shorter than a window: 1 scored as one window, 0 skipped */
    int truncate;              /* score only the first window of each document; all lengths then come from one
                                  pass per document unless the rope depends on the pass length (dynamic, longrope) */
    int trials;                /* passkey trials per (length, depth); 0: no passkey test */
    const int64_t *pk_lengths; /* passkey prompt lengths; n_pk_lengths 0: the perplexity lengths */
    int n_pk_lengths;
    const double *depths;      /* key depths in [0, 1] */
    int n_depths;
    int modes;                 /* LCX_PASSKEY_GREEDY and/or LCX_PASSKEY_LOGLIK */
    int distractors;           /* loglik: keys compared against */
    int needles;               /* keys in each prompt, one asked for (multi-key retrieval); 1: the classic test */
    const char *haystack;      /* NULL: the repeated filler; else a text file whose words fill the prompts */
    uint64_t seed;             /* key seed */
    const char *json_out;      /* NULL, or the JSON {"checkpoint", "perplexity"?, "passkey"?} written there */
    const char *svg_out;       /* NULL, or perplexity vs length drawn there, with one line per compare file */
    const char *const *compare; /* earlier json_out files drawn in the same picture */
    int n_compare;
    const char *series;        /* this run's name in JSON and legend; NULL: CKPT's last path component */
    const char *pk_svg;        /* NULL, or the passkey heat map (greedy mode, else loglik) */
    lcx_dtype dtype;           /* stored weights: LCX_F32 or LCX_BF16 */
    int64_t chunk;             /* rows per logits chunk */
    const lcx_backend *backend; /* where the model runs (NULL: the CPU); checked available by the caller */
    struct lcx_comm *tp_comm;  /* NULL (or one rank): one process. Else the TP group of a job under mpirun: each
                                  rank loads its slice of the weights and runs the same evaluation on the same
                                  whole logits rows (src/model/model.h opts.tp_comm), so every rank computes the
                                  same results; TP rank 0 alone checks and writes the output files (the terminal
                                  reporter of the others prints warnings only). A rank failing during the
                                  evaluation ends the job (lcx_comm_abort) */
    struct lcx_comm *cp_comm;  /* NULL (or one rank): every window whole on each rank. Else the CP group of a job
                                  under mpirun: every window is split over it (each rank 1/CP of the tokens, the
                                  attention a ring over the group: src/eval/eval_model.h); the passkey's loglik
                                  mode keeps its prompt in a KV cache split over the ring */
    struct lcx_comm *replicas; /* NULL (or one rank): no replicas. Else the ranks holding the same TP rank of the
                                  other copies of this model, a copy's CP ranks consecutive (the mesh's gradient
                                  group; without CP its DP group): each copy scores its shard of the windows and
                                  trials and the results are added up (src/eval/eval_run.h replicas); rank 0 of
                                  every group writes */
    int quiet;                 /* no progress states */
    double progress_s;         /* the least seconds between two progress states (0: 2) */
} lcx_eval_options;

/* The defaults of `lcextend eval` (stride 256, depths 0,.25,.5,.75,1, greedy, 4 distractors, seed 1, f32,
 * chunk 256); ckpt and data/text/trials still to fill. */
void lcx_eval_options_default(lcx_eval_options *o);

/* Evaluate o->ckpt. r may be NULL. */
lcx_status lcx_eval_checkpoint(const lcx_eval_options *o, const lcx_reporter *r);

#endif
