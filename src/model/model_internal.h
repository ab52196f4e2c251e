/* model internals shared by the model_*.c files (not part of the API). */
#ifndef LCX_MODEL_INTERNAL_H
#define LCX_MODEL_INTERNAL_H

#include "src/comm/comm.h"
#include "src/core/layout.h"
#include "src/model/model.h"

/* Views of one layer's activations (T = tokens of the current batch, capacity max_tokens; Q = nh*hd,
 * KV = nkv*hd). With RECOMPUTE only x_in, o and lse are the layer's own; the rest point into shared scratch.
 * void *: act tensors in the model's activation dtype m->adt (index them with lcx_m_at); float *: always f32. */
typedef struct lcx_layer_acts {
    void *x_in;           /* [T, H] layer input (residual stream); distributed layers: the shared x_full */
    void *x_part;         /* distributed layers (lcx_m_distributes): [ceil(T / TP), H] this TP rank's rows of the
                             input, kept for the backward (else NULL) */
    void *xn1;            /* [T, H] */
    float *rstd1;         /* [T] */
    void *qpre, *kpre;    /* [T, Q], [T, KV] before q_norm/k_norm (qwen3 only, else NULL) */
    float *rstdq, *rstdk; /* [T*nh], [T*nkv] (qwen3 only) */
    void *q, *k, *v;      /* [T, Q], [T, KV], [T, KV]: q, k after norm + rope */
    void *o;              /* [T, Q] attention output */
    float *lse;           /* [T, nh] log-sum-exp */
    void *h;              /* [T, H] residual after attention */
    void *xn2;            /* [T, H] */
    float *rstd2;         /* [T] */
    void *gate, *up, *act; /* [T, F]; recompute layers: [mlp_tile, F], one MLP tile's (shared scratch) */
} lcx_layer_acts;

/* Results that stay on the device until read once per call or step: the gradients' squared norm and the loss
 * sum and count of each micro-batch (a training step reads them all with one copy). */
typedef struct lcx_loss_slot {
    double loss_sum;
    int64_t count;
} lcx_loss_slot;
typedef struct lcx_dev_results {
    double grad_sq;
    int64_t pad_;
    lcx_loss_slot loss[]; /* [res_cap] */
} lcx_dev_results;

/* Forward-only working set (training == 0, src/model/model_infer.c): what one layer needs for T = max_tokens tokens,
 * shared by all layers. y holds the attention norm's output, then the residual after attention (h), then the
 * final norm's output; the MLP runs in chunks of mlp_chunk rows. */
typedef struct lcx_infer_ws {
    int64_t mlp_chunk;        /* rows per MLP chunk (<= max_tokens) */
    void *x, *y;              /* act [T, H] residual stream; norm output / h */
    void *q, *k, *v, *o;      /* act [T, Q], [T, KV], [T, KV], [T, Q] (q/k normalised in place for qwen3) */
    float *lse;               /* f32 [T, nh] */
    void *xn2, *gate, *up;    /* act [C, H], [C, F], [C, F]: one MLP chunk (SwiGLU output over gate) */
} lcx_infer_ws;

/* Activation offload (model_offload.c; docs/model.md "Activation policy (per layer)"). The stored tensors of an
 * offload layer (everything backward reads: layer input, lcx_layer_acts' own tensors, attention output, LSE) or
 * of a recompute+offload layer (layer input, attention output, LSE) live in a slot of the device pool while the
 * layer runs; right after its forward they are copied to the layer's host buffer on the copy queue xc and the
 * slot goes back to the pool; the backward fetches them into a free slot `depth` layers ahead. Slot s is reused
 * only after free_ev[s] (the compute queue's last use, or the copy out of it) and read by compute only after
 * ready_ev[s] (the copy into it). Bytes held are accounted per pool (used, high-water mark). */
typedef struct lcx_offload {
    int n;                    /* offloaded layers (0: nothing below is allocated) */
    int depth;                /* prefetch depth (>= 1): layers fetched ahead of the backward */
    int n_slots;              /* device slots: depth + 2 */
    size_t slot_bytes;        /* the largest offloaded layer's stored bytes */
    size_t *bytes;            /* [L] each offloaded layer's stored bytes (0 for the others) */
    void *dev;                /* device pool: n_slots x slot_bytes, one backend allocation */
    char *host_mem;           /* host pool: the offloaded layers' buffers back to back */
    size_t host_bytes;
    char **host;              /* [L] layer l's host buffer (NULL when not offloaded) */
    int *slot_of;             /* [L] the slot layer l's tensors are in, -1 when not on the device */
    int *holder;              /* [n_slots] the layer a slot holds, -1 free */
    uint64_t *freed_at;       /* [n_slots] release tick (the least recently released free slot is taken) */
    uint64_t tick;
    lcx_exec *xc;             /* the copy queue */
    lcx_event **ready_ev, **free_ev; /* [n_slots] */
    /* Timed marks on the compute queue around each wait for a fetch (the stall is the time between them, measured
     * on the queue: a GPU host only queues the wait), one pair per wait of the step in order: n_marks used since
     * the step began, a pool of cap_marks pairs that grows (event_create only) the first time a step waits more */
    lcx_event **wait_beg, **wait_end;
    int n_marks, cap_marks;
    size_t dev_used, dev_hwm, host_used, host_hwm;
    double wait_s;            /* seconds the compute queue waited for fetches (summed by lcx_offload_wait_collect) */
} lcx_offload;

struct lcx_model {
    const lcx_backend *be;
    lcx_exec *x;              /* every op runs on it; its arena holds lcx_model_workspace() bytes */
    int own_x;                /* created by lcx_model_init (freed with the model) */
    lcx_dtype adt;            /* activation dtype of the op calls (opts.act_dtype: LCX_F32 or LCX_BF16) */
    lcx_dev_results *d_res;   /* device */
    int64_t res_cap;          /* loss slots in d_res */
    lcx_model_config cfg;     /* copy; json not owned (NULL) */
    lcx_param_table tab;      /* global shapes (what checkpoints hold) */
    lcx_tp_slice *slice;      /* [tab.n] what this rank holds of each parameter (TP 1: the whole tensor) */
    uint64_t *numel;          /* [tab.n] elements of this rank's buffer of each parameter (slice local shape) */
    lcx_rope_plan rope;
    lcx_dtype pdt;            /* stored parameter dtype */
    int training;
    int64_t L, H, nh, nkv, hd, Q, KV, F, V; /* nh, nkv, Q, KV, F: this rank's (TP) share; V: the whole vocabulary */
    int64_t Vl, v0;           /* vocabulary rows held here (Vp / TP, padding included) and the first one's id */
    int64_t max_tokens, loss_chunk, loss_chunk_cap;
    int64_t mlp_tile;         /* rows per MLP tile (opts.mlp_chunk, <= max_tokens; max_tokens = untiled): the MLP
                                 runs rows [r0, r0 + mlp_tile) at a time (docs/model.md "Tiled MLP") */
    lcx_act_policy *policy;   /* [L] */

    /* parameter families (device) */
    size_t *off;              /* [tab.n] element offset of each parameter */
    uint64_t n_elems;         /* elements over all parameters */
    void *params;             /* pdt [n_elems] */
    float *master;            /* f32 [n_elems]: == params when pdt is f32; NULL for bf16 without training; bf16
                                 under ZeRO-1 (master_sharded): this rank's moment rows only, laid out as adam_m */
    int master_sharded;       /* bf16 training under ZeRO-1: the master holds this rank's rows (model_zero.c) */
    float *grads;             /* f32 [n_elems] or NULL */
    float *adam_m, *adam_v;   /* f32 [n_elems] or NULL */
    float *normw;             /* bf16 params: f32 copies of the norm weights [n_norm_elems], else NULL */
    size_t *norm_off;         /* [tab.n] element offset of each norm weight inside normw */
    uint64_t n_norm_elems;
    int64_t *idx;             /* [L * LCX_PARAM_KIND_COUNT] parameter index per (layer, kind), -1 absent */
    int64_t embed_i, final_norm_i, lm_head_i; /* lm_head_i == embed_i when tied */
    int64_t step;

    /* activations (device): one allocation */
    void *acts_buf;
    size_t acts_bytes;
    lcx_layer_acts *layer;    /* [L] */
    /* void *: act dtype (adt); float *: f32 whatever adt is (the backend contract's non-act tensors) */
    void **resid;             /* [L+1] act [T, H]: resid[l] is layer l's input, resid[L] the last output */
    void *xf;                 /* act [T, H] final norm output */
    float *rstdf;             /* f32 [T] */
    float *ones;              /* f32 [T] all 1 (bias add / bias grad through matmul with a_dtype F32) */
    int32_t *d_ids, *d_tgt, *d_pos; /* [T] */
    int32_t *d_doc;           /* [T] document starts of the batch (training models; NULL otherwise) */
    int doc_on;               /* the prepared batch has document starts in d_doc */
    float *logit_chunk;       /* f32 [loss_chunk, V]: the loss is computed from float32 logits whatever adt is */
    /* backward scratch */
    void *dres, *dxn;         /* act [T, H] */
    float *dq, *dk, *dv;      /* f32 [T, Q], [T, KV], [T, KV]: attention_bwd's accumulators */
    void *dout;               /* act [T, Q]: attention's output gradient, then dq/dk/dv cast to adt (KV <= Q) */
    void *dgate, *dup, *dact; /* act [mlp_tile, F]: one MLP tile's */

    lcx_infer_ws ws;          /* forward-only models: the shared working set (else zero) */

    /* rope tables (device), recomputed when the length changes */
    int64_t rope_len;         /* positions the tables hold (0 = none) */
    float *rope_cos, *rope_sin; /* [rope_len, n_pairs] */
    float *inv_freq;          /* host [n_pairs]: the frequencies the tables were built from */
    double rope_attn;         /* and their attention factor */

    /* context parallelism (model_ring.c; all NULL/0 without opts.cp_comm) */
    lcx_comm *cp;             /* the CP group, or NULL */
    int cp_size, cp_rank;
    void *ring_mem;           /* one allocation: the two ring buffers, the partial output and its LSE */
    size_t ring_bytes;        /* its size */
    char *ring_buf[2];        /* K | V (act [S, KV] each) | dK | dV (f32 [S, KV] each, training only) */
    void *ring_o;             /* act [T, Q]: one task's partial output */
    float *ring_lse;          /* f32 [T, nh]: its log-sum-exp */
    double ring_wait_s;       /* seconds blocked in the ring's waits since the step began (model_train.c resets) */

    /* tensor parallelism (model_tp.c; NULL/1 without opts.tp_comm) */
    lcx_comm *tp;             /* the TP group, or NULL */
    int tp_size, tp_rank;
    void *tp_mem;             /* one allocation: the gather scratch and the loss statistics */
    size_t tp_bytes;          /* its size */
    void *tp_gather;          /* TP x the largest summed buffer */
    double *tp_stats;         /* f64 [C][3] this rank's loss-chunk statistics, then [TP][C][3] gathered */
    float *tp_logits;         /* forward-only: f32 [TP][C][Vl], a logits chunk's vocabulary slices gathered */
    double tp_comm_s;         /* seconds in the TP group's collectives since the step began (model_train.c resets) */
    int distribute;           /* opts.distribute_saved with TP > 1: recompute layers keep their input's rows */
    void *x_full;             /* act [TP * ceil(T / TP), H]: a distributed layer's whole input (the residual stream
                                 in the forward, the all-gathered rows before its backward); NULL when none */
    int sp;                   /* opts.sequence_parallel with TP > 1 (training models): the residual stream, the norms
                                 and their outputs hold this TP rank's rows only (lcx_m_rows; docs/parallel.md
                                 "Sequence parallelism") */
    void *sp_full;            /* act [TP * ceil(T / TP), H]: a norm output all-gathered, the column-parallel input */
    void *sp_part;            /* act [TP * ceil(T / TP), H]: a row-parallel output (or a column-parallel layer's
                                 input gradient) before its reduce-scatter */
    void *sp_dfull;           /* act [TP * ceil(T / TP), H]: the residual gradient all-gathered (the row-parallel
                                 layers' output gradient, the embedding's) */

    lcx_offload offl;         /* activation offload (model_offload.c) */

    /* ZeRO-1 (model_zero.c): AdamW moments sharded over opts.zero_comm (NULL/0 without it) */
    lcx_comm *zero;           /* the gradient group the moments are sharded over, or NULL */
    int zero_size, zero_rank;
    uint64_t *zrow0, *zrows;  /* [tab.n] this rank's rows of each parameter's local buffer (all rows: no ZeRO) */
    size_t *moff;             /* [tab.n] element offset of each parameter's moments in adam_m / adam_v */
    uint64_t n_moment_elems;  /* elements of adam_m and adam_v each */
    float *zbuf_a, *zbuf_b;   /* ZeRO-1's exchange scratch, zbuf_elems floats each (model_zero.c), allocated once */
    uint64_t zbuf_elems;
    uint64_t zbuf_chunk;      /* elements per exchange batch (lcx_zero_set_chunk's when the model was built) */
    lcx_comm_request **zreq;  /* [2 zero_size] the requests of one batch's exchange */
    float *gsum;              /* without ZeRO-1: the gradient group sum's scratch, gsum_elems floats (model_train.c,
                                 allocated at the first group step) */
    uint64_t gsum_elems;
};

/* Byte cursor over one allocation (c->base NULL: sizing pass only); every piece 64-byte aligned. */
typedef struct lcx_cursor {
    char *base;
    size_t used;
    int overflow;
} lcx_cursor;

static inline void *lcx_cursor_take(lcx_cursor *c, int64_t n, size_t elem) {
    size_t bytes;
    if (n < 0 || !lcx_mul_size((size_t)n, elem, &bytes) || !lcx_add_size(bytes, 63, &bytes)) {
        c->overflow = 1;
        return NULL;
    }
    bytes &= ~(size_t)63;
    void *p = c->base ? c->base + c->used : NULL;
    if (!lcx_add_size(c->used, bytes, &c->used)) c->overflow = 1;
    return p;
}

/* Parameter pointers. */
static inline void *lcx_m_param(const lcx_model *m, int64_t i) {
    return (char *)m->params + m->off[i] * (m->pdt == LCX_BF16 ? 2 : 4);
}
static inline float *lcx_m_grad(const lcx_model *m, int64_t i) { return m->grads + m->off[i]; }
/* Elements of this rank's buffer of parameter i (its tensor-parallel slice; the whole tensor at TP 1). */
static inline size_t lcx_m_numel(const lcx_model *m, size_t i) { return (size_t)m->numel[i]; }
/* Element n of an act tensor p (in the model's activation dtype: byte offset n * lcx_act_size(adt)). */
static inline void *lcx_m_at(const lcx_model *m, const void *p, int64_t n) {
    return (char *)(uintptr_t)p + (size_t)n * lcx_act_size(m->adt);
}
/* f32 weights for rmsnorm */
static inline const float *lcx_m_normw(const lcx_model *m, int64_t i) {
    return m->pdt == LCX_BF16 ? m->normw + m->norm_off[i] : (const float *)m->params + m->off[i];
}
static inline int64_t lcx_m_idx(const lcx_model *m, int layer, lcx_param_kind k) {
    return m->idx[(size_t)layer * LCX_PARAM_KIND_COUNT + k];
}

/* Forward-only models (model_infer.c): lay out the working set and the shared buffers (ones, ids, logits
 * chunk) in place of the per-layer activations. */
void lcx_infer_layout(lcx_model *m, lcx_cursor *c);
/* Every decoder layer of a forward pass after lcx_model_embed: resid[L] holds the output. Training models run
 * lcx_layer_forward into their per-layer buffers, forward-only ones the working set. */
lcx_status lcx_model_layers_fwd(lcx_model *m, const lcx_batch *b);
/* The layers of a cached forward (model_kv.c): b is one row of new tokens at positions n_past .. n_past+T-1,
 * k and v the cache [L][cap][KV] whose rows 0 .. n_past-1 hold the prefix; the new keys/values are written to
 * rows n_past .. of every layer. Forward-only models only. */
lcx_status lcx_infer_layers_cached(lcx_model *m, const lcx_batch *b, void *k, void *v, int64_t cap,
                                   int64_t n_past);

/* A KV cache under CP (model_kv.c): rank c's cache rows 0 .. rows-1 hold its two chunks of a prefix of `len`
 * tokens run through the ring (padded to a multiple of 2 CP), the first `valid` of them before the pad; a
 * continuation's new tokens, the same on every rank, go to rows `rows` ... Each layer's new queries see this
 * rank's valid prefix keys (a partial result), the partials of every CP rank are all-gathered into o/lse
 * ([CP][n][Q] act, [CP][n][nh] f32) and merged in rank order with the new tokens' causal block, so every rank
 * computes the same bits. */
typedef struct lcx_cp_cached {
    int64_t len, rows, valid;
    void *o;
    float *lse;
} lcx_cp_cached;
/* The layers of a prefill (b: this rank's chunks of the prefix, cc NULL) or of a continuation (b: the new tokens,
 * every rank the same; cc the cache's state) into the CP cache k/v [L][cap][KV]. */
lcx_status lcx_infer_layers_cp_cached(lcx_model *m, const lcx_batch *b, void *k, void *v, int64_t cap,
                                      const lcx_cp_cached *cc);
/* A continuation's attention (model_ring.c): T new query rows q over this layer's cache k/v [cap][KV] as cc says,
 * into o [T, Q] and lse [T, nh]. */
lcx_status lcx_cp_cached_attn(lcx_model *m, int64_t T, const void *q, const void *k, const void *v,
                              const lcx_cp_cached *cc, void *o, float *lse);
/* Final norm of rows [0, T) of resid[L], then the logits of rows first_row .. T-1 handed to fn one loss chunk at
 * a time (model_logits.c). */
lcx_status lcx_model_emit_logits(lcx_model *m, int64_t T, int64_t first_row, lcx_logits_fn fn, void *user);

/* Internal steps (model_forward.c, model_backward.c, model_loss.c). */
/* Validate and upload ids/positions/targets, (re)build the rope tables; *count = counted targets. */
lcx_status lcx_model_prepare(lcx_model *m, const lcx_batch *b, int64_t *count);
/* The same; split 0 under CP: every rank holds the same whole rows (a cached continuation, model_kv.c), not its
 * chunks of them. */
lcx_status lcx_model_prepare_rows(lcx_model *m, const lcx_batch *b, int64_t *count, int split);
lcx_status lcx_model_embed(lcx_model *m, int64_t T);
/* Layer forward into a. recompute (the rerun before a recompute layer's backward): o/lse already hold the
 * attention result, and the rerun stops at the MLP norm's output xn2 (the backward recomputes each MLP tile's
 * gate/up/act itself; the layer output is not written). */
lcx_status lcx_layer_forward(lcx_model *m, int l, const lcx_layer_acts *a, const lcx_batch *b, int recompute);
lcx_status lcx_layer_backward(lcx_model *m, int l, const lcx_layer_acts *a, const lcx_batch *b);
/* Rows [r0, r0 + c) of layer l's MLP intermediates (model_forward.c): rows r0.. of a's gate/up/act for a layer
 * that stores them, the one-tile scratch of a recompute layer; computed from rows r0.. of xn2 when compute
 * (gate, up, SwiGLU). Any of gate/up/act may be NULL. */
lcx_status lcx_mlp_tile(lcx_model *m, int l, const lcx_layer_acts *a, int64_t r0, int64_t c, int compute,
                        void **gate, void **up, void **act);
/* Final norm + lm_head + cross-entropy in chunks. With backward: dres = gradient wrt resid[L], lm_head grads
 * accumulated. logits: optional host [T, V] output. The loss sum and count accumulate into the device slot acc. */
lcx_status lcx_model_loss(lcx_model *m, int64_t T, int backward, float dscale, float *logits, lcx_loss_slot *acc);
/* Forward + backward of one micro-batch into the device slot acc (the public call reads it back). */
lcx_status lcx_model_fwd_bwd(lcx_model *m, const lcx_batch *b, float dscale, lcx_loss_slot *acc);
/* y[T, out] (=|+=) x[T, in] W^T (+ bias) for parameter index wi (bias index bi or -1). */
lcx_status lcx_linear_fwd(lcx_model *m, const void *x, int64_t T, int64_t in, int64_t out, int64_t wi, int64_t bi,
                          void *y);
/* The same for a row-parallel layer (o_proj, down_proj): with TP, x W^T over this rank's input columns, summed
 * over the TP group, then the bias (model_forward.c). */
lcx_status lcx_row_parallel_fwd(lcx_model *m, const void *x, int64_t T, int64_t in, int64_t out, int64_t wi,
                                int64_t bi, void *y);
/* The model's exec (model_exec.c): taken from opts or created (init, before any buffer), arena and result slots
 * sized once the shapes are known (reserve), released last (free). */
lcx_status lcx_model_exec_init(lcx_model *m, const lcx_model_opts *opts);
lcx_status lcx_model_exec_reserve(lcx_model *m);
void lcx_model_exec_free(lcx_model *m);
/* Scratch bytes the exec's arena needs for every op call of the model at its capacity. */
size_t lcx_model_workspace(const lcx_model *m);
/* Context parallelism (model_ring.c). init: take opts.cp_comm and allocate the ring buffers (nothing without
 * it); free: release them. row_base: global position of local row 0's chunk start minus chunk c's offset, i.e.
 * the position the row's global sequence starts at (lcx_model_prepare has checked the positions). fwd: the
 * ring attention of every row of b into o, lse (overwritten). bwd: dq += the ring's dQ; dk, dv = the gradient
 * of this rank's own K/V (overwritten), after the reverse ring. */
lcx_status lcx_ring_init(lcx_model *m, lcx_comm *cp);
void lcx_ring_free(lcx_model *m);
int64_t lcx_ring_row_base(const lcx_model *m, const lcx_batch *b, int64_t s);
lcx_status lcx_ring_attn_fwd(lcx_model *m, const lcx_batch *b, const void *q, const void *k, const void *v, void *o,
                             float *lse);
lcx_status lcx_ring_attn_bwd(lcx_model *m, const lcx_batch *b, const void *q, const void *k, const void *v,
                             const void *o, const float *lse, const void *dout, float *dq, float *dk, float *dv);
/* Tensor parallelism (model_tp.c). init: take opts.tp_comm (before the sizes are made local); alloc: the scratch
 * (after them); free. sum: buf[0..n) (act) = the sum over the TP group of every rank's buf, in rank order (no-op
 * without TP). loss_chunk: the vocab-parallel cross-entropy of c rows (rows r0.. of the batch) of the logits in
 * logit_chunk ([c, Vl] f32), dlogits in place with backward. reduce_grads: sum the gradients that are partial on
 * each rank (q_norm/k_norm, replicated kv heads) over their sharers, once per optimizer step. sum_host: *v = the
 * sum over TP of every rank's *v in rank order (the global norm from the ranks' shares, lcx_rows_sqnorm_queue;
 * the same bits on every rank). */
lcx_status lcx_tp_init(lcx_model *m, lcx_comm *tp);
lcx_status lcx_tp_alloc(lcx_model *m);
void lcx_tp_free(lcx_model *m);
lcx_status lcx_tp_sum(lcx_model *m, void *buf, int64_t n);
lcx_status lcx_tp_loss_chunk(lcx_model *m, int64_t c, float dscale, int backward, lcx_loss_slot *acc, int64_t r0);
lcx_status lcx_tp_reduce_grads(lcx_model *m);
lcx_status lcx_tp_sum_host(lcx_model *m, double *v);
/* Distributed saved activations (opts.distribute_saved): layer l keeps this TP rank's rows of its input. */
static inline int lcx_m_distributes(const lcx_model *m, int l) {
    return m->distribute && lcx_act_recomputes(m->policy[l]);
}
/* Rows of the input each TP rank keeps for T tokens: ceil(T / TP) (the last ranks' may be partly padding). */
static inline int64_t lcx_m_part_rows(const lcx_model *m, int64_t T) {
    return (T + m->tp_size - 1) / m->tp_size;
}
/* Rows of the residual stream this rank holds for T tokens: ceil(T / TP) under sequence parallelism (the last
 * ranks' rows past T are padding: zeros through the layers' sums, never read as tokens), else T. */
static inline int64_t lcx_m_rows(const lcx_model *m, int64_t T) { return m->sp ? lcx_m_part_rows(m, T) : T; }
/* Sequence parallelism (model_tp.c). gather: full [TP * ceil(T/TP), H] = every TP rank's rows [ceil(T/TP), H] of
 * local, in rank order (rows 0 .. T-1 are the T tokens'). scatter_sum: local [ceil(T/TP), H] = this rank's rows
 * of the sum over TP of every rank's full (its rows T .. zeroed first), added in rank order: the bits lcx_tp_sum
 * gives those rows (each rank receives only its rows of the others' full, into tp_gather). */
lcx_status lcx_sp_gather(lcx_model *m, const void *local, void *full, int64_t T);
lcx_status lcx_sp_scatter_sum(lcx_model *m, void *full, void *local, int64_t T);
/* A row-parallel layer's output under sequence parallelism (model_forward.c): y (this rank's rows) = the
 * scatter-sum of the partial products in sp_part, then the bias (bi, or -1) added to those rows. */
lcx_status lcx_sp_row_parallel_finish(lcx_model *m, int64_t T, int64_t bi, void *y);
/* Before layer l's forward: copy this rank's rows of its input (x_full) into x_part (no-op unless distributed). */
lcx_status lcx_tp_keep_input(lcx_model *m, int l, int64_t T);
/* Before layer l's backward: all-gather the TP ranks' x_part into x_full (no-op unless distributed). */
lcx_status lcx_tp_gather_input(lcx_model *m, int l, int64_t T);
/* With CP: sum a loss sum and count over the CP group (every rank then reports the global values). */
lcx_status lcx_ring_reduce_loss(lcx_model *m, lcx_loss_slot *r);
/* ZeRO-1 (model_zero.c). init: the row ranges and moment offsets of every parameter (every row, offsets = off,
 * without a group of more than one rank) and, with one, its exchange scratch; called before the master and the
 * moments are allocated. free: those, and the unsharded gradient sum's scratch (model_train.c). range: elements
 * [*e0, *e1) of parameter i's local buffer whose moments this rank holds, and their offset in adam_m / adam_v. */
lcx_status lcx_zero_init(lcx_model *m, lcx_comm *g);
void lcx_zero_free(lcx_model *m);
void lcx_zero_range(const lcx_model *m, size_t i, uint64_t *e0, uint64_t *e1, size_t *moff);
/* The master values of parameter i this rank holds, elements [*e0, *e1) of its local buffer (its moment rows; with
 * f32 parameters the master is the parameter, whole, and these are its rows of it). e0, e1 may be NULL. */
float *lcx_zero_master(const lcx_model *m, size_t i, uint64_t *e0, uint64_t *e1);
/* Set parameter i from host float32 values of its whole local buffer: the master (this rank's rows of it when
 * sharded), the stored value (src itself, or its bf16 round to nearest even) and a norm's float32 copy. scratch:
 * numel uint16, used where the rounding is done on the host (no whole master on the device to round from). */
lcx_status lcx_m_set_from_f32(lcx_model *m, size_t i, const float *src, uint16_t *scratch);
/* The sharded half of a group step (m->zero set, g the same group): reduce_scatter leaves, in this rank's rows of
 * grads, the sum over g of every rank's gradients added in rank order (the bits lcx_dp_sum_f32 gives them);
 * sqnorm gives the squared norm of the summed gradients (each rank's rows, then the ranks' sums in rank order);
 * all_gather copies every rank's updated rows of the stored parameters to every rank (bf16: the values AdamW
 * rounded from its master rows; f32: the master itself) and refreshes the norm weights' float32 copies. */
lcx_status lcx_zero_reduce_scatter(lcx_model *m);
lcx_status lcx_zero_sqnorm(lcx_model *m, double *sq);
/* The unsharded group step's norm, formed as ZeRO-1 forms it (so both give the same double): for each rank q of
 * D the squared norm of q's rows of the summed gradients, then the D sums in rank order. */
lcx_status lcx_zero_group_sqnorm(lcx_model *m, int D, double *sq);
/* Queue into d_res->grad_sq (zeroed first) the squared norm of rank q of D's rows of every gradient, parameter
 * order, one sqnorm per parameter; with TP a box held by several TP ranks counts only on its first replica. D 1:
 * this rank's share of the norm of whole parameters (lcx_tp_sum_host adds the TP ranks' shares). */
lcx_status lcx_rows_sqnorm_queue(lcx_model *m, int q, int D);
lcx_status lcx_zero_all_gather(lcx_model *m);
/* The full stored set of one layer (everything but x_in, o, lse) from cursor c (model_init.c): T rows, the MLP's
 * gate/up/act Tf rows (T for a layer that stores them, mlp_tile for the recompute scratch). */
void lcx_layer_take_full(lcx_model *m, lcx_cursor *c, lcx_layer_acts *a, int64_t T, int64_t Tf);
/* Activation offload (model_offload.c). init: after the activations' layout (m->policy, max_tokens set), size and
 * allocate the pools, the copy queue and the events (nothing without an offloaded layer); free. begin: a new
 * forward (every slot free, the host buffers unused), layer 0's slot taken when it is offloaded (the embedding
 * writes its input). fwd_pre(l): the next layer's slot (layer l writes its input). fwd_post(l, store): layer l's
 * tensors to its host buffer (store = 0, a forward without backward: dropped) and its slot back to the pool.
 * bwd_pre(l): fetch layers l .. l-depth not on the device, then make the compute queue wait for layer l's.
 * bwd_post(l): layer l's slot back to the pool. (A recomputed layer's rerun stops at xn2 and writes no output, so
 * it needs no slot of layer l+1.) */
lcx_status lcx_offload_init(lcx_model *m, int depth);
void lcx_offload_free(lcx_model *m);
lcx_status lcx_offload_begin(lcx_model *m);
lcx_status lcx_offload_fwd_pre(lcx_model *m, int l);
lcx_status lcx_offload_fwd_post(lcx_model *m, int l, int store);
lcx_status lcx_offload_bwd_pre(lcx_model *m, int l);
lcx_status lcx_offload_bwd_post(lcx_model *m, int l);
/* Add the step's recorded waits to offl.wait_s (one event_sync, on the last mark: call it after the step's results
 * were read, when the compute queue has passed them). */
lcx_status lcx_offload_wait_collect(lcx_model *m);
/* Make room for n loss slots in d_res (kept when large enough; contents are not kept). */
lcx_status lcx_model_reserve_results(lcx_model *m, int64_t n);

#include "src/model/model_ops.h"

#endif
