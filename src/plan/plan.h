/* plan: turn (model config, --to, recipe, --method, layout, memory budget) into the concrete stage list that
 * `lcextend CKPT --to N` runs, with estimates (tokens, FLOPs, time, peak memory), before any work is done.
 * Formulas: docs/plan.md. Every stage's rope config comes from lcx_rope_plan_extension against the input model
 * (its factors are relative to the original pretraining length, so this equals chaining stage after stage).
 *
 * Stage expansion (recipe seq_len): explicit lengths at or below the current context are skipped (re-extension),
 * lengths above --to are dropped, and the last stage must end exactly at --to; `auto` doubles from the current
 * context (or the previous stage) while the target is at least 1.5x ahead, then ends at --to (8k -> 128k: 16k,
 * 32k, 64k, 128k; 8k -> 130k: 16k, 32k, 64k, 130k); `target` is one stage at --to. */
#ifndef LCX_PLAN_H
#define LCX_PLAN_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/hf_config.h"
#include "kernels/backend.h"
#include "src/plan/recipe.h"
#include "src/train/lr_schedule.h"
#include "src/rope/rope.h"
#include "src/core/status.h"

/* Model dimensions the estimates need. */
typedef struct lcx_mem_model {
    int64_t n_layers, hidden, ffn, heads, kv_heads, head_dim, vocab;
    uint64_t n_params;      /* all parameters, tied embedding once */
    int64_t tp, cp;         /* tensor / context parallel sizes (>= 1) */
    int weight_bytes;       /* 2 (bf16 weights + fp32 master) or 4 (fp32 weights, no master) */
    int act_bytes;          /* bytes per stored activation element (2 bf16, 4 f32) */
    int64_t loss_chunk;     /* tokens per chunk of the chunked output projection + cross-entropy */
    int64_t mlp_tile;       /* rows per MLP tile (the model's opts.mlp_chunk); 0 = all rows at once */
    /* The exec arena: the largest op workspace (ops share one arena, so it is the largest one, not their sum).
     * Set by lcx_mem_set_op_ws for a backend: either the closed form max(op_ws_fixed, op_ws_per_token x tokens)
     * or the backend's own workspace queries over the model's call shapes. */
    double op_ws_fixed;     /* bytes independent of the length: CUDA's matmul (cuBLASLt workspace, staging, split) */
    double op_ws_per_token; /* bytes per token: CUDA's attention backward's row sums */
    const lcx_backend *arena_backend; /* set: lcx_model_arena with this backend's queries (the CPU's) */
    int distribute;         /* distributed saved activations (with TP > 1; docs/parallel.md): a recomputed layer
                               stores 1/TP of its input, one shared [T, H] buffer holds it whole */
    int sequence_parallel;  /* sequence parallelism (with TP > 1; docs/parallel.md): the residual stream, the norms
                               and their outputs 1/TP of the rows; three [T, H] buffers hold whole rows */
    int64_t zero_shards;    /* ZeRO-1 (docs/parallel.md "Data parallelism"): the ranks the AdamW moments (and with
                               bf16 weights the fp32 master) are sharded over, the gradient group CP x DP; 0 or 1 =
                               every rank holds them all */
    int64_t grad_ranks;     /* the gradient group's size CP x DP (its sum's scratch without ZeRO-1); 0 or 1: none */
} lcx_mem_model;

/* cfg's dimensions (layers, hidden, ffn, heads, kv heads, head_dim, vocab) and n_params, TP = CP = 1; every other
 * field zero, for the caller to set. */
lcx_mem_model lcx_mem_model_of(const lcx_model_config *cfg, uint64_t n_params);

/* Which backend's arena the memory model counts. The planner's default is the GPU's: CUDA. */
typedef enum lcx_mem_backend { LCX_MEM_CUDA = 0, LCX_MEM_CPU } lcx_mem_backend;

/* Bytes per device, i.e. per rank: each device runs one rank of TP x CP x DP (docs/plan.md "Memory"). */
typedef struct lcx_mem_estimate {
    double weights, grads, master, optimizer; /* P/TP x (w, 4, 4 if w < 4, 8); ZeRO-1: master and moments / shards */
    double activations;     /* stored for backward, all layers by policy + embedding/final norm */
    double workspace;       /* the backward's temporaries (+ the recompute scratch, + the offload device pool,
                               + ZeRO-1's exchange scratch) */
    double logits;          /* one loss chunk: chunk x V/TP x 4 (its gradient is written in place) */
    double cp_buffers;      /* ring attention K/V (+ dK/dV) double buffers, CP > 1 */
    double total;           /* sum of the above */
    double host;            /* offload: pinned host memory for offloaded layers */
} lcx_mem_estimate;

/* The device memory a rank holds outside its allocations, which the memory model does not count and no allocator
 * high-water mark shows (docs/plan.md "Reserve"): on CUDA the context with cuBLASLt and cuDNN loaded,
 * LCX_MEM_CUDA_CONTEXT, and LCX_MEM_NCCL_COMM for each NCCL communicator of more than one rank the runtime
 * creates (lcx_mem_nccl_comms); 0 on the CPU. Estimates, to be replaced by a GPU's figures (`lcextend
 * train-steps --backend cuda` prints what the device holds outside the allocator). */
#define LCX_MEM_CUDA_CONTEXT (1024.0 * 1048576)
#define LCX_MEM_NCCL_COMM (512.0 * 1048576)
/* The NCCL communicators of more than one rank that a rank of a TP x CP x DP job holds: the world and the TP, CP,
 * DP and gradient (CP x DP) groups that have more than one rank (src/comm/mesh.c; single-rank groups hold no
 * peer buffers). */
int lcx_mem_nccl_comms(int64_t tp, int64_t cp, int64_t dp);
double lcx_mem_runtime(lcx_mem_backend b, int64_t tp, int64_t cp, int64_t dp);

/* m's exec arena for backend b at m's shape (heads per TP rank nh'):
 *  - CUDA: LCX_CUDA_MATMUL_WS_MAX (kernels/cuda/cuda_matmul.h: the cuBLASLt workspace plus the f32 x bf16 split
 *    and the bf16-C staging, 80 MiB), or past it the attention backward's row sums, 4 nh' bytes a token (the
 *    other ops' workspaces are smaller at any length); a closed form, so that a machine without a GPU plans
 *    for one;
 *  - CPU: the CPU backend's workspace queries over every call shape of the model (src/model/model_arena.h),
 *    the bytes the model's own arena holds: at long lengths the attention backward's fp32 dK, dV per query head
 *    and row sums, 4 nh' (2 d + 1) bytes a token, at short ones the per-thread tiles (for this process's
 *    threads) of the attention and of bf16 matmul operands. */
void lcx_mem_set_op_ws(lcx_mem_model *m, lcx_mem_backend b);

/* Bytes stored per token per layer for each policy (docs/plan.md): keep, recompute (of the input 1/TP with
 * distribute); fp32 parts included. */
double lcx_mem_layer_keep(const lcx_mem_model *m);
double lcx_mem_layer_recompute(const lcx_mem_model *m);
/* Peak memory of one micro-batch of micro_seqs sequences of seq_len tokens (split over CP) with one policy per
 * layer (policy[n_layers], no LCX_ACT_AUTO). */
void lcx_mem_estimate_compute(const lcx_mem_model *m, int64_t seq_len, int64_t micro_seqs,
                              const lcx_act_policy *policy, lcx_mem_estimate *out);

/* Model FLOPs per trained token at sequence length S (docs/plan.md): 6 N_mm + 6 L nh d (S + 1), N_mm = weights
 * used in matmuls (every linear + the output projection), the second term causal attention (QK^T and PV,
 * forward + backward = 3 x forward). */
double lcx_flops_per_token(const lcx_mem_model *m, int64_t seq_len);
/* N_mm of the formula above. */
double lcx_matmul_params(const lcx_mem_model *m);
/* lcx_flops_per_token of a checkpoint's whole model (no TP): the training metrics' "tflops". */
double lcx_config_flops_per_token(const lcx_model_config *cfg, int64_t seq_len);

typedef struct lcx_plan_opts {
    int64_t target;            /* --to (tokens) */
    int has_method;            /* --method given: overrides every stage's method */
    lcx_rope_method method;
    int64_t tp, cp, dp;        /* layout; sequence lengths must be multiples of 2*CP */
    double mem_budget;         /* bytes per device; 0 = none (auto activation = recompute, no fit check) */
    double tokens_per_s;       /* training throughput for time estimates; 0 = none */
    int weight_bytes, act_bytes;
    int64_t loss_chunk;
    int64_t mlp_tile;          /* rows per MLP tile, 0 = none (with gpus > 0: 0 = searched) */
    /* Layout search (docs/plan.md "Layout search"): gpus > 0 searches TP x CP x DP = gpus, the loss chunk and the
     * per-layer policy of every `activation: auto` stage for the best predicted throughput that fits mem_budget
     * (required). tp, cp, dp, loss_chunk, mlp_tile: 0 = searched, > 0 = kept as given. gpus = 0: no search (all
     * but mlp_tile >= 1). */
    int64_t gpus;
    double host_budget;        /* pinned host bytes per device for offload; 0 = not limited */
    double dev_flops;          /* throughput model: sustained FLOP/s of one device (default 400e12) */
    double link_bytes_s;       /* TP / CP / gradient collectives, bytes/s per device (default 150e9) */
    double host_bytes_s;       /* device <-> host copies for offload, bytes/s (default 25e9) */
    lcx_mem_backend backend;   /* whose op arena the memory model counts (default CUDA) */
    int distribute_saved;      /* distributed saved activations (docs/parallel.md; TP > 1 only): 1 on, 0 off, -1
                                  (lcx_plan_opts_default's) both tried where a choice is made: by the search
                                  (gpus > 0) and by lcx_plan_build with a budget and TP > 1; else off */
    int sequence_parallel;     /* sequence parallelism (docs/parallel.md; TP > 1 only; excludes distribute_saved):
                                  1 on, 0 off, -1 (lcx_plan_opts_default's) tried where distribute_saved is */
    int zero1;                 /* ZeRO-1, the AdamW moments (and a bf16 model's fp32 master) sharded over the
                                  gradient group CP x DP (in effect where it has more than one rank): 1 on, 0 off,
                                  -1 (lcx_plan_opts_default's) on wherever the planner decides (a memory budget,
                                  with or without a search): it costs no predicted time (its reduce-scatter and
                                  all-gather move at most what the gradient sum does) and saves 12 (1 - 1/(CP x
                                  DP)) bytes a parameter per device with bf16 weights, 8 (...) with fp32 */
    int64_t keep_checkpoints;  /* training checkpoints a run keeps (the main command's --keep: 2 by default, 0 all),
                                  for the disk estimate */
    double reserve;            /* bytes of each device's mem_budget kept for what the memory model does not count
                                  (the CUDA context, NCCL's buffers): the plan fits mem_budget - reserve. -1
                                  (lcx_plan_opts_default's): lcx_mem_runtime of each layout in a search (gpus > 0)
                                  on CUDA, else 0 */
} lcx_plan_opts;
void lcx_plan_opts_default(lcx_plan_opts *o); /* tp=cp=dp=1, bf16 (2/2), loss_chunk 4096, no search, model rates */

/* The policies the search assigns to the layers of an `activation: auto` stage, in layer order: the first policy
 * takes the first layers (recompute+offload, recompute, offload, then keep: the transfer of the last layers cannot
 * be hidden).
 * A new policy is one more entry here plus its bytes in lcx_mem_estimate_compute and its cost in the
 * throughput model (plan.c step_time). */
#define LCX_PLAN_SEARCH_POLICIES {LCX_ACT_RECOMPUTE_OFFLOAD, LCX_ACT_RECOMPUTE, LCX_ACT_OFFLOAD, LCX_ACT_KEEP}

/* One layout the search considered. */
typedef struct lcx_plan_candidate {
    int64_t tp, cp, dp, loss_chunk, mlp_tile; /* mlp_tile 0: no tiling */
    int distribute;            /* distributed saved activations (TP > 1) */
    int sequence_parallel;     /* sequence parallelism (TP > 1) */
    int zero1;                 /* ZeRO-1 in effect (CP x DP > 1) */
    int valid;                 /* the layout rules hold and the plan builds */
    int fits;                  /* every stage fits the budget (device and host) */
    double peak;               /* the plan's peak bytes per device (with the least-memory policies when !fits) */
    double host_peak;          /* pinned host bytes per device (offload) */
    double tokens_per_s;       /* predicted throughput, all devices (fits only) */
    double reserve;            /* kept out of the budget for this layout (lcx_plan_opts.reserve) */
    char reason[200];          /* !valid: the rule broken */
} lcx_plan_candidate;

#define LCX_PLAN_MAX_CANDIDATES 256

typedef struct lcx_plan_search_info {
    int64_t gpus;
    int n_candidates, n_valid, n_fit;
    lcx_plan_candidate cand[LCX_PLAN_MAX_CANDIDATES];
    int chosen, runner_up;     /* indices into cand; runner_up -1 when only one fits */
    int n_lines;
    char lines[8][512];        /* the explanation (lcx_plan_print prints them, the JSON has them) */
} lcx_plan_search_info;

/* Predicted seconds of one optimizer step of a planned stage on every device (docs/plan.md "Throughput model"):
 * compute (model FLOPs + recompute's extra forward) / dev_flops + TP all-reduces + CP ring + gradient
 * all-reduce over link_bytes_s + the offload transfer not hidden behind a layer's compute. */
typedef struct lcx_plan_cost {
    double compute, tp, cp, grad, offload; /* seconds of each term */
    double total;                          /* their sum */
} lcx_plan_cost;
/* policy_counts[LCX_ACT_POLICY_COUNT]: layers per concrete policy. dp: data-parallel size (the gradient
 * all-reduce runs over CP x DP). seqs_per_rank: sequences one rank works on per step (micro_seqs x grad_accum).
 * out may be NULL. Returns out->total. */
double lcx_plan_step_time(const lcx_plan_opts *o, const lcx_mem_model *m, int64_t dp, int64_t seq_len,
                          int64_t seqs_per_rank, uint64_t ring_per_step, const int *policy_counts,
                          lcx_plan_cost *out);

/* Ring attention traffic of one stage, per rank (docs/plan.md "Ring traffic"). Message sizes come from
 * lcx_cp_ring_msg_bytes, the sends per direction from the schedule (lcx_cp_ring_step), for one layer and one
 * sequence: every rank sends the same. Recompute layers add nothing: the memory model (and the model) keep the
 * attention output and LSE, so the attention forward, and with it the forward ring, is not rerun. */
typedef struct lcx_plan_ring {
    int64_t block_len;         /* rows of one sequence a rank holds: seq_len / CP */
    int64_t kv_heads;          /* KV heads per rank: max(1, ceil(kv_heads / TP)) */
    int64_t steps;             /* ring steps (compute steps) each way: CP */
    int64_t fwd_sends, bwd_sends, ret_sends; /* messages per layer and sequence: CP-1 K|V, CP-1 K|V+dK|dV, 1 dK|dV */
    uint64_t fwd_msg;          /* bytes of one forward message: K|V in the activation dtype */
    uint64_t bwd_msg;          /* one backward message: K|V + float32 dK|dV */
    uint64_t ret_msg;          /* the final backward message: float32 dK|dV back to the block's owner */
    uint64_t per_layer_seq;    /* all messages of one layer and one sequence, forward + backward */
    int64_t seqs_per_rank;     /* sequences a rank works on per optimizer step: micro_seqs x grad_accum */
    uint64_t per_step;         /* bytes a rank sends per optimizer step: layers x seqs_per_rank x per_layer_seq */
} lcx_plan_ring;

typedef struct lcx_plan_stage {
    int index;                 /* 1-based */
    size_t recipe_stage;       /* which recipe stage it came from */
    int line;                  /* that stage's line in the recipe */
    int64_t seq_len;
    lcx_rope_method method;
    lcx_rope_params rope;      /* the config for this stage */
    int64_t max_pos;           /* new max_position_embeddings */
    double attn_factor;        /* attention factor of the rope config */
    int64_t steps, tokens;     /* tokens = steps x tokens_per_step */
    int64_t seqs_per_step, micro_seqs, grad_accum, tokens_per_step; /* micro_seqs: per device per micro-batch */
    lcx_lr_schedule lr;
    int n_eval;
    int64_t eval_lengths[LCX_RECIPE_MAX_EVAL];
    int64_t eval_stride;       /* 0 = window */
    int64_t save_interval;
    lcx_act_policy *activation; /* [n_layers], resolved (owned) */
    int n_keep, n_recompute, n_offload, n_rec_offload; /* layers per policy */
    double clip_norm, weight_decay;
    uint64_t seed;
    int doc_mask;              /* attention_mask: document */
    int64_t min_doc_tokens, long_doc_tokens, long_doc_repeat; /* the stage's sampling (recipe keys; repeat >= 1) */
    double flops;              /* model FLOPs of the stage */
    double time_s;             /* tokens / tokens_per_s (0 when no throughput) */
    lcx_mem_estimate mem;      /* per rank (= per device: every device runs one rank of TP x CP x DP) */
    lcx_plan_ring ring;        /* CP > 1; all zero when CP = 1 */
    double step_s;             /* predicted seconds per optimizer step (lcx_plan_step_time) */
    lcx_plan_cost step_cost;   /* its terms */
} lcx_plan_stage;

/* The main command's before/after evaluation, per device of the lead's TP x CP group (docs/plan.md "Evaluation"):
 * the forward-only model lcx_extend_eval_ckpt builds (float32 weights and activations) at the last stage's longest
 * eval length: each CP rank holds 1/CP of the window (padded to a multiple of 2 CP) and the ring's buffers; at
 * CP 1 the whole window and the passkey prompts' KV cache. */
typedef struct lcx_mem_eval {
    int64_t tokens;        /* the window: the longest eval length + 16 (room for a passkey answer) */
    int64_t local_tokens;  /* the model's capacity on a CP rank: lcx_cp_local_len(tokens, CP) */
    double weights;        /* P/TP x 4 */
    double working_set;    /* one layer's working set for local_tokens (lcx_model_forward_bytes_tp) */
    double kv_cache;       /* CP 1: the passkey prompts' cache, L x tokens x 2 KV' x 4 (under CP there is none) */
    double tp_scratch;     /* TP > 1: TP x [local_tokens, H] floats of sums and the gathered logits chunk, TP x
                              [chunk, V/TP] floats (+ its loss statistics) */
    double cp_ring;        /* CP > 1: two blocks of K | V, a partial output and its LSE for local_tokens */
    double total;          /* the sum (the exec arena not included) */
} lcx_mem_eval;

/* e for cfg on TP x CP ranks at `tokens` (BOS included; the capacity is tokens + 16) with logits chunks of `chunk`
 * rows. */
void lcx_mem_eval_compute(const lcx_model_config *cfg, uint64_t n_params, int64_t tp, int64_t cp, int64_t tokens,
                          int64_t chunk, lcx_mem_eval *e);

#define LCX_PLAN_MAX_NOTES 16

/* Bytes of one training checkpoint before zstd: n_params x (the weight bytes, + 4 for the fp32 master with bf16
 * weights, + 8 for the AdamW moments) (docs/plan.md "Disk"). How many a run writes and holds at once: the
 * training loop's rule (lcx_train_saves) and the checkpoint directory's (lcx_ckpt_held_new). */
double lcx_plan_checkpoint_bytes(double n_params, int weight_bytes);

/* What a run of the plan writes to its run directory, before zstd (docs/plan.md "Disk"). */
typedef struct lcx_plan_disk {
    double checkpoint;         /* one training checkpoint: P x (weights, + the fp32 master with bf16 weights, + the
                                  AdamW moments 8) bytes; ZeRO-1 and TP shard it over files, not in size */
    int64_t saves;             /* checkpoints the stages write: every save_interval steps and at each stage's end
                                  (lcx_train_saves) */
    int64_t held;              /* at most at once: keep + 1 (a new one is complete before the oldest goes), or all
                                  (lcx_ckpt_held_new) */
    double export_hf;          /* the Hugging Face export: P x the weights' bytes */
    double total;              /* held x checkpoint + export_hf */
} lcx_plan_disk;

typedef struct lcx_plan {
    char *recipe_name, *recipe_label;
    lcx_plan_opts opts;
    lcx_mem_model model;
    lcx_arch arch;
    lcx_rope_params rope_in;   /* the input model's rope */
    int64_t max_pos_in;
    int64_t current_context;   /* what the input model is configured for */
    int64_t original_length;   /* L0, the pretraining length factors are relative to */
    int64_t target;
    int n_stages;
    lcx_plan_stage *stages;
    int n_skipped;             /* recipe stages at or below the current context */
    double total_tokens, total_flops, total_time_s, peak_memory;
    int n_notes;
    char notes[LCX_PLAN_MAX_NOTES][256]; /* warnings (rope warnings, skipped stages, ...) */
    double predicted_tokens_per_s; /* total tokens / sum of steps x step_s (the throughput model) */
    lcx_plan_cost cost;            /* sum over stages of steps x each term (seconds) */
    double host_peak;              /* the largest stage's pinned host bytes per device (offload) */
    lcx_mem_eval eval;             /* the before/after evaluation at the last stage's longest eval length (all
                                      zero when it has none) */
    lcx_plan_search_info *search;  /* opts.gpus > 0: the layouts considered and the explanation; else NULL */
    int distributes;               /* distributed saved activations in effect: TP > 1, model.distribute and a
                                      stage that recomputes a layer (what the stages' models then do) */
    int seq_parallel;              /* sequence parallelism in effect: TP > 1 and model.sequence_parallel */
    int zero1;                     /* ZeRO-1 in effect: opts.zero1 (resolved) and CP x DP > 1; model.zero_shards */
    lcx_plan_disk disk;            /* the run directory's size at most */
    double reserve;                /* bytes kept out of the budget (opts.reserve resolved for this layout):
                                      opts.mem_budget is what is left of the budget given, the plan's to fill */
    int searching;                 /* internal: a search candidate (auto stages get the searched policies) */
} lcx_plan;

/* Build the plan; with opts.gpus > 0 search the layout first (opts.mem_budget required): the plan of the
 * candidate with the best predicted throughput among those that fit, with p->search explaining the choice;
 * nothing fits: LCX_ERR_INVALID naming the smallest peak any layout needs and the budget. Errors (LCX_ERR_INVALID, one line, naming the recipe FILE:LINE where a recipe value is at
 * fault): --to not longer than the current context, --to not a multiple of 2*CP, target not reachable by the
 * recipe (explicit stages end below it, or it falls between two of them), per-layer activation list of the
 * wrong length, longrope lists of the wrong length, warm-up longer than the stage, a sequence per step that
 * does not split over dp x grad_accum, a memory budget no policy fits, rope planning failures. */
lcx_status lcx_plan_build(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o,
                          lcx_plan **out);
void lcx_plan_free(lcx_plan *p); /* NULL ok */
/* The memory budget per device as given (opts.mem_budget + reserve), 0 without one. */
double lcx_plan_budget(const lcx_plan *p);

/* The per-layer policies the layout search gives an `activation: auto` stage, for one step of one sequence of
 * seq_len tokens on one device of layout o (its tp/cp/dp, rates and budgets): the fastest split of the layers
 * over LCX_PLAN_SEARCH_POLICIES that fits o->mem_budget (required) and o->host_budget (when > 0), written to
 * out[m->n_layers], its estimate in *e. None fits: LCX_ERR_INVALID naming the least any split needs and the
 * budgets (out and *e then hold that split). What `lcextend train-steps --policy auto` runs. */
lcx_status lcx_plan_step_policies(const lcx_mem_model *m, const lcx_plan_opts *o, int64_t seq_len,
                                  lcx_act_policy *out, lcx_mem_estimate *e);

/* The plan as a table (stages, rope, steps, tokens, lr, activation, memory, FLOPs, time) plus totals; with
 * CP > 1 also one ring-traffic line per stage and a line saying the memory figures are per rank. */
void lcx_plan_print(const lcx_plan *p, FILE *f);
/* The plan as JSON (new reference, NULL when out of memory). Each stage has "config": the rope keys
 * lcx_rope_export writes into config.json (rope_theta, rope_scaling, max_position_embeddings, ...); with CP > 1
 * also "ring" (the lcx_plan_ring fields). */
json_t *lcx_plan_json(const lcx_plan *p);

#endif
