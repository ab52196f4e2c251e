/* model: one Llama-family decoder (llama, mistral, qwen2, qwen3) written once against the backend table
 * (kernels/backend.h): forward, backward, chunked loss, AdamW training step, per-layer activation policy.
 *
 * Memory: one backend allocation per family of buffers, with views carved out of it (parameter order and
 * shapes of src/checkpoint/model_params.h):
 *   params  stored weights, LCX_F32 or LCX_BF16 (what the forward reads)
 *   master  fp32 master weights (training with bf16 params; with f32 params the params are the master)
 *   grads   fp32 gradients, same offsets as params (one buffer: the global norm is one sqnorm call)
 *   adam_m, adam_v  fp32 moments
 *   normw   fp32 copies of the 1-D norm weights (bf16 params only: rmsnorm takes f32 weights)
 *   acts    training: activations for max_tokens tokens under the layer policies, plus backward scratch;
 *           forward-only (training == 0): one layer's working set shared by all layers (lcx_model_forward_bytes)
 * Every op runs on the model's exec (opts.exec). Its scratch arena is sized once, at init, to the largest
 * workspace of any op call the model makes at max_tokens / loss_chunk; loss sums, counts and the gradient norm
 * accumulate on the device and are read back once per forward, forward_backward, optimizer or training step.
 * (On the CPU the arena's per-thread tiles are sized for the OpenMP thread count at init: raising it later makes
 * ops fail with the arena-size message.)
 * Tied embeddings: lm_head reads model.embed_tokens.weight and its gradient adds into the embedding's.
 *
 * Positions are explicit global positions (context parallelism passes its chunk positions); RoPE cos/sin come
 * from src/rope for seq_len = max(position) + 1, so dynamic and longrope follow the length like HF.
 *
 * Activation policy per layer (docs/parallel.md "Memory"): KEEP stores everything backward needs; RECOMPUTE
 * stores the layer
 * input plus the attention output and its log-sum-exp and reruns the rest of the layer forward in backward
 * (same kernels, same order: bit-identical gradients; the MLP's intermediates are recomputed per MLP tile);
 * OFFLOAD stores what KEEP stores in a host pool between
 * forward and backward, RECOMPUTE_OFFLOAD what RECOMPUTE stores (model_offload.c): bit-identical too. */
#ifndef LCX_MODEL_H
#define LCX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "formats/hf_config.h"
#include "kernels/backend.h"
#include "src/checkpoint/catalog.h"
#include "src/checkpoint/model_params.h"
#include "src/checkpoint/source.h"
#include "src/rope/rope.h"
#include "src/model/act_policy.h"
#include "src/core/layout.h"
#include "src/core/status.h"

/* Activation policies (lcx_act_policy, lcx_act_policy_parse) are in src/model/act_policy.h. */

struct lcx_comm; /* src/comm/comm.h */

typedef struct lcx_model_opts {
    lcx_dtype param_dtype;       /* LCX_F32 or LCX_BF16 (stored parameters); 0 means LCX_F32 */
    int64_t max_tokens;          /* activation capacity: tokens per micro-batch (n_seq * seq_len), >= 1 */
    int64_t loss_chunk;          /* rows of logits per loss chunk; 0 = 256. Never seq x vocab at once. */
    int training;                /* allocate grads, master (bf16), AdamW moments */
    lcx_act_policy policy;       /* every layer (unless layer_policy); keep (0), recompute or offload (not auto) */
    const lcx_act_policy *layer_policy; /* [num_hidden_layers] or NULL */
    const lcx_backend *backend;  /* NULL = CPU (or exec's backend) */
    lcx_exec *exec;              /* queue the model runs on; NULL: the model creates and owns one on backend. A
                                    given exec is not freed with the model; its arena is grown (never shrunk) to
                                    what the model needs, so several models may share one queue */
    int64_t mlp_chunk;           /* rows per MLP tile, 0 (or >= max_tokens) = all rows at once: forward-only models
                                    (see below) and training models (docs/model.md "Tiled MLP in training") */
    lcx_dtype act_dtype;         /* activation storage: LCX_F32 or LCX_BF16 (docs/model.md "bf16 activations");
                                    0 means LCX_F32. Math stays float32; rstd, LSE, attention's dQ/dK/dV, the
                                    logits chunk and the loss, gradients and optimizer state stay float32 */
    int offload_prefetch;        /* layers an offloaded layer's tensors are fetched ahead of its backward; 0 means 1
                                    (docs/model.md "Activation policy (per layer)") */
    struct lcx_comm *cp_comm;    /* context parallelism (docs/model.md "Context parallelism"): the CP group, CP size
                                    and this rank's place in it from the communicator (it must outlive the model).
                                    A batch is then this rank's local tokens (lcx_cp_local_batch): rows of
                                    seq_len = global row length / CP in local order, with their global positions
                                    and targets; each layer's attention runs the ring over the group. NULL: one
                                    rank, the whole sequence (no communication) */
    struct lcx_comm *tp_comm;    /* tensor parallelism (docs/parallel.md "Tensor parallelism"): the TP group (it must
                                    outlive the model). Each rank holds its slice of every parameter
                                    (lcx_model_param_slice) and computes its heads, its part of the MLP and its
                                    vocabulary rows. A forward-only model (training == 0) hands out whole logits
                                    rows, the vocabulary slices all-gathered (lcx_model_forward_logits, the
                                    cached forward): every TP rank gets the same bits. NULL: every parameter whole */
    struct lcx_comm *zero_comm;  /* ZeRO-1 (docs/parallel.md "Data parallelism"): the gradient group (GRAD: CP x DP)
                                    the AdamW moments are sharded over; it must outlive the model and be the group
                                    every training step is given. Rank r of D holds the moments of rows
                                    [r R / D, (r+1) R / D) of each parameter's local buffer (R = its dim 0) and
                                    updates only those; the weights stay whole on every rank. NULL or one rank:
                                    every rank holds all moments */
    int distribute_saved;        /* with TP > 1 (docs/parallel.md "Distributed saved activations", Megatron's
                                    --distribute-saved-activations): a recompute or recompute+offload layer keeps
                                    only this TP rank's rows (ceil(T / TP)) of its input, replicated over TP
                                    otherwise, and the backward all-gathers them before the rerun; the same bits,
                                    TP-fold less stored input, plus one whole input shared by those layers (a
                                    saving once more than TP/(TP-1) of them stay on the device). No effect with
                                    TP 1 or on keep/offload layers */
    int sequence_parallel;       /* with TP > 1, training models (docs/parallel.md "Sequence parallelism",
                                    Megatron's --sequence-parallel): the residual stream, the RMSNorms and their
                                    outputs hold this TP rank's ceil(T / TP) rows; the row-parallel outputs are
                                    reduce-scattered instead of all-reduced and the column-parallel inputs
                                    all-gathered. The same forward bits; the norm weights' gradients summed over
                                    TP (another order of the same sum). Excludes distribute_saved, which it
                                    covers. No effect with TP 1 or on forward-only models */
} lcx_model_opts;

/* One micro-batch of packed sequences: n_seq rows of seq_len tokens, attention stays inside a row. */
typedef struct lcx_batch {
    int64_t n_seq, seq_len;
    const int32_t *ids;       /* host [n_seq * seq_len] token ids */
    const int32_t *targets;   /* host [n_seq * seq_len]: id predicted at each token, LCX_IGNORE_INDEX = none;
                                 NULL = HF shift of ids (labels = inputs: target t = ids[t+1], last ignored) */
    const int32_t *positions; /* host [n_seq * seq_len] global positions, consecutive inside a row;
                                 NULL = 0 .. seq_len-1 in every row */
    const int32_t *doc_start; /* host [n_seq * seq_len] document masking (training models only): the global
                                 position of the first token of each token's document, in [0, its position];
                                 attention keeps a token inside its document. NULL = no document mask */
    int64_t rope_len;         /* the sequence length the rope frequencies are for, where they depend on it
                                 (dynamic NTK, longrope; HF: the pass's length): 0 = the last position + 1. A
                                 window padded for CP passes its own length, so the pad changes nothing */
} lcx_batch;

typedef struct lcx_adamw_opts {
    double lr, beta1, beta2, eps, weight_decay;
    double max_grad_norm;     /* global-norm clipping threshold; <= 0 disables */
    int decay_norms_biases;   /* 0 (default): norms and biases get no weight decay (1-D parameters) */
} lcx_adamw_opts;

/* The defaults: lr 1e-4, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, max_grad_norm 1, no decay on
 * norms/biases. */
lcx_adamw_opts lcx_adamw_opts_default(void);

typedef struct lcx_step_result {
    double loss;          /* mean next-token loss over counted tokens of all micro-batches */
    int64_t n_tokens;     /* counted (non-ignored) targets */
    double grad_norm;     /* global L2 norm before clipping */
    double clip_scale;    /* factor applied to the gradients (1 when not clipped) */
    int64_t step;         /* optimizer step number after this step (1-based) */
    uint64_t peak_rss;    /* process peak RSS in bytes during this step (0 when unknown) */
    double comm_s;        /* seconds in the collectives of the gradient group and of the TP group (waits for the
                             other ranks included); 0 for a step of one rank */
    double tp_comm_s;     /* the part of comm_s in the TP group's collectives (the layers' partial sums, the loss
                             statistics, the partial gradients and the norm's shares); 0 without TP */
    double ring_wait_s;   /* seconds blocked waiting for the CP ring's K/V messages (forward and backward), i.e.
                             the ring transfer not hidden behind attention compute; outside comm_s; 0 without CP */
    double offload_wait_s; /* seconds the compute waited for offloaded activations fetched back for the backward
                              (the transfer not hidden behind compute); 0 without offload (and ~0 on the CPU,
                              whose copies are synchronous) */
} lcx_step_result;

typedef struct lcx_model lcx_model;
typedef struct lcx_comm lcx_comm; /* src/comm/comm.h */

/* Allocate a model for cfg (validated config) with opts. Parameters are undefined until loaded or initialised. */
lcx_status lcx_model_init(lcx_model **out, const lcx_model_config *cfg, const lcx_model_opts *opts);
void lcx_model_free(lcx_model *m); /* NULL ok */

/* Copy every parameter from an opened checkpoint (any float-loadable dtype, converted to the stored dtype;
 * master weights keep the float32 value). The catalog must have a config equal in shape to the model's. */
lcx_status lcx_model_load(lcx_model *m, const lcx_catalog *c);
/* Random init (norm gains 1, biases 0, weights N(0, std)) from a seed: deterministic. */
lcx_status lcx_model_init_random(lcx_model *m, uint64_t seed, double std);

/* Copy every parameter from an opened checkpoint of any form (src/checkpoint/source.h: matched tensors, a config
 * equal in shape to the model's), read one at a time as float32. */
lcx_status lcx_model_load_source(lcx_model *m, lcx_source *s);
/* Build a model for s's config (opts as for lcx_model_init) and load s into it. */
lcx_status lcx_model_from_source(lcx_source *s, const lcx_model_opts *opts, lcx_model **out);
/* Open path as a checkpoint of any form (HF directory, .safetensors, shard index, .lcx, .gguf) and build + load a
 * model (opts->max_tokens etc. as for lcx_model_init). */
lcx_status lcx_model_from_checkpoint(const char *path, const lcx_model_opts *opts, lcx_model **out);

/* Forward passes of a model built with training == 0 run layer by layer over one working set (src/model/model_infer.c):
 * no per-layer activations, no backward scratch, so memory is weights + O(tokens x (hidden + intermediate))
 * whatever the depth, and float32 results are bit-identical to the training model's forward. opts.mlp_chunk > 0
 * runs the MLP (norm, gate, up, SwiGLU, down, residual add) mlp_chunk rows at a time, so its intermediate-wide
 * temporaries no longer grow with the tokens (O(tokens x hidden) in all); its GEMMs then have other shapes and
 * the CPU backend's thread split and OpenBLAS's register blocking make the last bits differ (docs/model.md
 * "Forward-only passes": relative differences ~1e-7).
 * Training models keep their per-layer buffers (what lcx_model_forward_backward needs); there opts.mlp_chunk = C
 * runs the MLP forward and backward in row tiles of C: a recompute (or recompute+offload) layer's gate/up/SwiGLU
 * exist for one tile only (recomputed tile by tile in the backward) and the backward's dgate/dup/dact are [C, F]
 * for every layer, so with recompute no [tokens x intermediate] buffer exists; keep and offload layers still
 * store theirs [tokens, F]. Gradients equal the untiled ones to float tolerance (docs/model.md). */

/* Forward only. *loss_sum / *count: summed next-token loss and counted targets (may be NULL). logits: host
 * [n_tokens, vocab] float32 filled chunk by chunk, or NULL (then no seq x vocab buffer exists anywhere). */
lcx_status lcx_model_forward(lcx_model *m, const lcx_batch *b, float *logits, double *loss_sum, int64_t *count);

/* Receives host float32 logits of rows [row0, row0 + rows) of the flattened batch (rows x vocab, row-major),
 * one loss chunk at a time; the buffer is reused after the call returns. */
typedef lcx_status (*lcx_logits_fn)(void *user, int64_t row0, int64_t rows, const float *logits, int64_t vocab);
/* Forward only, handing the logits of rows >= first_row (of the flattened n_seq * seq_len rows) to fn chunk by
 * chunk: what per-token scoring needs (e.g. src/eval/eval_model.h) without a seq x vocab buffer. Rows below
 * first_row skip the output projection. */
lcx_status lcx_model_forward_logits(lcx_model *m, const lcx_batch *b, int64_t first_row, lcx_logits_fn fn,
                                    void *user);

/* Forward + backward of one micro-batch, gradients ACCUMULATED (+=) into the grads buffer; the loss gradient is
 * scaled by dscale (1 / global counted tokens, so micro-batches add up to the mean). */
lcx_status lcx_model_forward_backward(lcx_model *m, const lcx_batch *b, float dscale, double *loss_sum,
                                      int64_t *count);

/* Counted targets of a batch (targets != LCX_IGNORE_INDEX, or seq_len-1 per row for the HF shift). */
int64_t lcx_batch_count(const lcx_batch *b);

/* One optimizer step over n_micro micro-batches (gradient accumulation): zero grads, forward+backward each
 * with dscale = 1/total count, global-norm clipping, AdamW on the fp32 master weights (bias correction,
 * decoupled weight decay on 2-D weights only unless decay_norms_biases), then the stored params are refreshed
 * (bf16: round to nearest even). */
lcx_status lcx_model_train_step(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                lcx_step_result *res);
/* The same step over a gradient group (docs/parallel.md "Data parallelism"; grad: the mesh's GRAD communicator,
 * src/comm/comm.h). Every rank of grad calls it, each with its own micro-batches (their number may differ between
 * ranks); the loss gradient is scaled by 1 / the counted targets of the whole
 * group, the gradients are summed over the group in rank order (bit-identical on every rank and from run to
 * run), the clipping norm is that of the summed gradients, and AdamW runs on every rank: the replicas stay
 * identical. res: the group's mean loss and counted targets. grad NULL or of size 1: lcx_model_train_step,
 * bit for bit. A failure on one rank is returned on every rank (the others name it).
 * Context parallelism (opts.cp_comm of more than one rank): each rank passes its local micro-batches
 * (lcx_cp_local_batch; the CP ranks of one DP rank the same sequences, the same number of micro-batches) and grad
 * is the GRAD group (CP x DP; NULL: the CP group). The local loss sums and counts are summed once, over grad (not
 * also over CP as lcx_model_forward_backward does), and the partial gradients of the CP ranks with the DP ranks'. */
lcx_status lcx_model_train_step_group(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                      lcx_comm *grad, lcx_step_result *res);
/* The optimizer half of a step on the gradients already in the grads buffer: global-norm clipping, AdamW,
 * stored-parameter refresh (res: grad_norm, clip_scale, step). */
lcx_status lcx_model_optimizer_step(lcx_model *m, const lcx_adamw_opts *o, lcx_step_result *res);
/* Zero the grads buffer. */
lcx_status lcx_model_zero_grads(lcx_model *m);

/* ---- introspection ------------------------------------------------------------------------------------- */
/* The parameter table: every tensor with its global shape (what checkpoints store). */
const lcx_param_table *lcx_model_params(const lcx_model *m);
/* What this rank holds of parameter i (docs/parallel.md "Tensor parallelism"): its box of the global tensor, the
 * shape of its buffer (the box's, except vocab-parallel rows padded to Vp / TP, the padding rows zero and after
 * the stored ones) and whether it is a replica (norms, replicated kv heads) and which one. Without tensor
 * parallelism: the whole tensor, one replica. Every per-parameter accessor below (get/set param, master, grad,
 * moments) reads or writes this rank's buffer: the product of out->local[] floats. */
lcx_status lcx_model_param_slice(const lcx_model *m, size_t i, lcx_tp_slice *out);
const lcx_model_config *lcx_model_config_of(const lcx_model *m);
/* The backend the model's buffers live on (opts.backend, or the CPU's): its mem_stats and device_used give the
 * process-wide figures (allocator high-water mark, device memory in use) beside the model's own in
 * lcx_model_memory_of. */
const lcx_backend *lcx_model_backend(const lcx_model *m);
lcx_dtype lcx_model_param_dtype(const lcx_model *m);
/* opts.cp_comm: the CP group a batch is split over, NULL when none. */
struct lcx_comm *lcx_model_cp_comm(const lcx_model *m);
/* Host copies (float32) of parameter i's stored value / fp32 master (the stored value for bf16 inference) /
 * gradient; dst holds the floats of this rank's buffer (lcx_model_param_slice: the tensor's numel at TP 1). */
lcx_status lcx_model_get_param(const lcx_model *m, size_t i, float *dst);
lcx_status lcx_model_get_master(const lcx_model *m, size_t i, float *dst);
lcx_status lcx_model_get_grad(const lcx_model *m, size_t i, float *dst);
/* Overwrite parameter i's gradient from host float32 (tests inject reference gradients). */
lcx_status lcx_model_set_grad(lcx_model *m, size_t i, const float *src);
/* Set the loss chunk (rows per chunk, >= 1) without reallocating beyond the capacity given at init (a larger
 * chunk than the init one fails). */
lcx_status lcx_model_set_loss_chunk(lcx_model *m, int64_t rows);
/* The rows of parameter i's local buffer (dim 0 of lcx_model_param_slice's local shape; a 1-D buffer's rows are
 * its elements) whose AdamW moments this rank holds: [*row0, *row0 + *rows). ZeRO-1 (opts.zero_comm of D > 1
 * ranks): rank r's [r R / D, (r+1) R / D); otherwise all R rows. lcx_model_get_moments and lcx_model_set_state
 * (src/model/model_state.h) read and write these rows only. */
lcx_status lcx_model_moment_rows(const lcx_model *m, size_t i, uint64_t *row0, uint64_t *rows);
/* The ranks the moments are sharded over: opts.zero_comm's size under ZeRO-1, else 1. */
int lcx_model_moment_shards(const lcx_model *m);
/* ZeRO-1's exchanges run over batches of about this many float32 elements (a larger parameter in windows of its
 * rows): the optimizer step's scratch is about 2 x this x 4 bytes (src/model/model_zero.c; the planner counts it). */
#define LCX_ZERO_CHUNK ((uint64_t)1 << 22)
/* Without ZeRO-1 the gradient group's sum runs over chunks of this many float32 elements: its scratch is
 * lcx_group_sum_all_scratch(D, min(elements, this)) floats (src/model/model_dp.h), (D + 1)/D x 4 MiB. */
#define LCX_DP_CHUNK ((int64_t)1 << 20)
/* Set that batch size in elements for the models the process builds after it (0: LCX_ZERO_CHUNK). The results do
 * not depend on it; tests set a small one so that their parameters are split into windows of rows as a large
 * model's are. */
void lcx_zero_set_chunk(uint64_t elems);
/* Bytes of each buffer family (params, master, grads, moments, activations). */
typedef struct lcx_model_memory {
    size_t params, master, grads, moments, acts;
    size_t offload_device;  /* the offload device pool: (prefetch depth + 2) slots of the largest offloaded layer's
                               stored bytes (0 without an offload or recompute+offload layer) */
    size_t offload_host;    /* the offload host pool: every offloaded layer's stored bytes (pinned on a GPU) */
    size_t tp_scratch;      /* TP > 1: the group's gather scratch (TP x the largest summed buffer), the loss
                               statistics and, forward-only, the gathered logits chunk (src/model/model_tp.c) */
    size_t cp_ring;         /* CP > 1: the ring's two K | V (| dK | dV in training) blocks, a task's partial output
                               and its LSE (src/model/model_ring.c) */
    size_t grad_scratch;    /* the gradient group's exchange scratch, held by the model so that the steps reuse it:
                               ZeRO-1's two batch buffers (src/model/model_zero.c), or the unsharded sum's (after
                               the first group step; src/model/model_dp.h) */
} lcx_model_memory;
lcx_model_memory lcx_model_memory_of(const lcx_model *m);
/* 1 when some layer keeps only this TP rank's rows of its input (opts.distribute_saved in effect: TP > 1 and a
 * recompute or recompute+offload layer), else 0. */
int lcx_model_distributes_saved(const lcx_model *m);
/* 1 when the residual stream is split over TP by rows (opts.sequence_parallel in effect), else 0. */
int lcx_model_sequence_parallel(const lcx_model *m);

/* The offload pools' accounting (docs/model.md "Activation policy (per layer)"): bytes of offloaded layers'
 * stored tensors held in the device pool and in the host pool, and their high-water marks since the model was
 * built (lcx_model_offload_reset: since then). A layer's stored bytes are its layer input plus what its policy
 * stores (each tensor rounded up to 64 bytes). With every layer offloaded and prefetch depth d the device
 * high-water mark is max(2, d + 1) layers' stored bytes: 2 in the forward (the running layer and the next
 * layer's input), d + 1 in the backward (the running layer and d fetched ahead); the host one is all layers'. */
typedef struct lcx_offload_stats {
    int n_layers;           /* layers with policy offload or recompute+offload */
    int prefetch;           /* prefetch depth */
    int slots;              /* device pool slots (prefetch + 2) */
    size_t slot_bytes;      /* one slot: the largest offloaded layer's stored bytes */
    size_t device_used, device_hwm; /* device pool: bytes held now and at most */
    size_t host_used, host_hwm;     /* host pool: the same */
    double wait_s;          /* seconds the compute waited for fetches since the step began */
} lcx_offload_stats;
lcx_offload_stats lcx_model_offload_stats(const lcx_model *m);
void lcx_model_offload_reset(lcx_model *m); /* high-water marks = bytes held now, wait_s = 0 */

/* Bytes of the activation buffer (lcx_model_memory_of(m).acts) of a model built with opts->training == 0, for
 * T = opts->max_tokens tokens (docs/model.md "Forward-only passes"), each piece rounded up to 64 bytes:
 *   residual stream and norm output/h [T, H] x 2, q and o [T, nh*hd] x 2, k and v [T, nkv*hd] x 2,
 *   log-sum-exp [T, nh], ones [T], ids/targets/positions [T] int32 x 3,
 *   the MLP rows: C = T (mlp_chunk 0) or min(mlp_chunk, T) rows of [H] + 2 x [F] (SwiGLU writes over gate),
 *   one logits chunk [min(loss_chunk, T), vocab].
 * Independent of the number of layers. 0 when the size overflows. With opts->tp_comm the widths are a TP rank's
 * (nh / TP query heads, nkv / TP KV heads or one replicated head, F / TP), as lcx_model_forward_bytes_tp with
 * the group's size, which the planner calls without a group. */
size_t lcx_model_forward_bytes(const lcx_model_config *cfg, const lcx_model_opts *opts);
size_t lcx_model_forward_bytes_tp(const lcx_model_config *cfg, const lcx_model_opts *opts, int tp);

/* MLP rows per chunk of the evaluations' forward-only models (lcextend eval, the main command's before/after
 * evaluation, the planner's estimate of it): past this many tokens the [tokens x intermediate] temporaries are
 * cut to it (e.g. 7.5 GB -> 0.2 GB a rank for Llama-3-8B at 128k, TP 2), at the price of last-bit differences
 * (docs/model.md "Forward-only passes"); at or below it every row at once, as before. */
#define LCX_EVAL_MLP_CHUNK 4096

/* ---- KV cache (src/model/model_kv.c): decoding, and scoring continuations of one prefilled prompt ---------------- */
typedef struct lcx_kv_cache lcx_kv_cache;

/* A cache for `capacity` tokens of a forward-only model's keys and values: K and V [layers][capacity][nkv*hd]
 * in the activation dtype, one backend allocation (2 x layers x capacity x nkv x hd x 4 bytes in float32).
 * Under context parallelism (opts.cp_comm, every rank of the group calls alike) each rank holds
 * [layers][lcx_cp_local_len(capacity, CP) + tail][nkv*hd]: its two chunks of a prefix of up to `capacity` tokens,
 * rows for a continuation of up to `tail` (64) new tokens, and the ranks' partial results of one
 * (docs/model.md "KV cache under CP"). */
lcx_status lcx_kv_cache_init(lcx_kv_cache **out, const lcx_model *m, int64_t capacity);
void lcx_kv_cache_free(lcx_kv_cache *c); /* NULL ok */
int64_t lcx_kv_cache_len(const lcx_kv_cache *c);      /* cached tokens, at positions 0 .. len-1 */
int64_t lcx_kv_cache_capacity(const lcx_kv_cache *c); /* the capacity asked for */
int64_t lcx_kv_cache_cp_tail(const lcx_kv_cache *c);  /* under CP the most new tokens of a continuation, else 0 */
size_t lcx_kv_cache_bytes(const lcx_kv_cache *c);
/* Keep only the first len cached tokens (len <= lcx_kv_cache_len; under CP 0 or all of them). */
lcx_status lcx_kv_cache_truncate(lcx_kv_cache *c, int64_t len);
/* How many cached tokens a cached forward ending at length `total` (its last position + 1) may reuse: all of
 * them, or 0 when the rope frequencies at that length differ from those the cached keys were rotated with
 * (dynamic past max_position_embeddings, longrope across original_max_position_embeddings: they depend on the
 * length, src/rope/rope.h). */
int64_t lcx_kv_cache_usable(const lcx_model *m, const lcx_kv_cache *c, int64_t total);
/* Whether passes of a and b tokens rotate with the same rope frequencies (always, but past the lengths where
 * dynamic and longrope change them). */
int lcx_model_rope_same(const lcx_model *m, int64_t a, int64_t b);

/* Cached forward: n new tokens ids[0..n) at positions len .. len+n-1 (len = lcx_kv_cache_len), attending to the
 * cached prefix and causally to themselves. fn (NULL: no logits) receives the logits of new rows >= first_row
 * one loss chunk at a time, row numbers counted from the first new token (row r predicts the token after
 * position len + r). Under CP a call is either the prefill of an empty cache (every token committed, fn NULL:
 * the prefix runs through the ring, each rank its chunks) or a continuation of a filled one (n_commit 0, n <= the
 * tail; every rank the same tokens and the same logits). The first n_commit (0 .. n) new tokens are appended to
 * the cache; the others leave it as it was, so candidate continuations can be scored one after another against
 * one prefilled prompt. Needs a forward-only model, n <= its max_tokens and len + n <= the cache's capacity. Same
 * kernels as lcx_model_forward_logits; a prefill into an empty cache gives bit-identical logits, later calls see
 * other attention tile shapes and may differ in the last bits (docs/model.md "KV cache"). */
lcx_status lcx_model_forward_cached(lcx_model *m, lcx_kv_cache *c, const int32_t *ids, int64_t n, int64_t n_commit,
                                    int64_t first_row, lcx_logits_fn fn, void *user);

/* Process peak resident set size in bytes (VmHWM), and a reset of it (Linux clear_refs; returns 0 if it could
 * not reset, then the peak is over the process lifetime). */
uint64_t lcx_peak_rss(void);
int lcx_peak_rss_reset(void);

#endif /* LCX_MODEL_H */
