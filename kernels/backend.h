/* backend: the compute contract. One table of function pointers, implemented by the CPU backend (kernels/cpu,
 * the reference: clear loops, float32 math) and by CUDA (kernels/cuda, registered in CUDA builds). The model,
 * the trainer, evaluation and the parallel algorithms are written once against this table, and
 * tests/unit/test_backend_ops.c runs every op case on every compiled backend against the CPU in float32.
 *
 * ---- Execution context ------------------------------------------------------------------------------------
 * Every op takes an lcx_exec: the backend's queue (a CUDA stream; nothing on the CPU), its library handles
 * (cuBLASLt) and a scratch arena. Ops never allocate memory. An op that needs temporary memory says how much in
 * `workspace` (for the same arguments) and takes it from the front of the arena: the caller sizes one arena up
 * front from the largest call it will make (lcx_exec_reserve) and an op with too small an arena fails with
 * LCX_ERR_INVALID naming both sizes. Ops on one queue run in issue order, so every op may use the whole arena.
 *
 * ---- Ordering and synchronisation ---------------------------------------------------------------------------
 * - Ops, copy_d2d and zero are queued: they may return before the work is done (CUDA) and run in issue order on
 *   their exec's queue. Their pointer arguments must stay valid until the queue has passed them.
 * - copy_h2d may return before the copy is done only if the backend has staged the source: the host buffer
 *   may be reused as soon as it returns. copy_d2h waits for the queue's earlier work and returns with the host
 *   buffer filled. So reading a result (a loss sum, a norm) costs one copy_d2h: read it once per step.
 * - sync(x) returns when every op queued on x has finished.
 * - Events order two queues without the host: event_record(x, e) marks the current end of x's queue;
 *   event_wait(y, e) makes later work on y wait for that mark; event_sync(e) blocks the host until it.
 * - Timed events (created with LCX_EVENT_TIMED) also take the time their mark is reached: event_elapsed(a, b)
 *   gives the seconds between two of them, so a stall of one queue is measured where it happens (a mark before
 *   event_wait and one after it), not by the host, which only queues the wait.
 * - The CPU backend implements the same contract with a synchronous queue: every op has finished when it
 *   returns, and events are complete when recorded.
 * - Ops report bad arguments (sizes, NULL pointers, dtypes, a too small arena) when they are called. They never
 *   read device data on the host, so they never fail on data values: ids, targets and positions are validated
 *   once on the host before upload (the model does it in lcx_model_prepare). Backends stay memory safe on
 *   invalid values anyway (documented per op: a row outside the range reads and writes nothing).
 *
 * ---- Tensors and dtypes -------------------------------------------------------------------------------------
 * - Dense, row-major, outermost dimension first; each argument's comment gives its shape. Sizes are int64_t
 *   element counts. Pointers live in the backend's memory (host memory for the CPU backend).
 * - Activations: every op that reads or writes activations takes their storage dtype `dt`, LCX_F32 or
 *   LCX_BF16, for all its tensors marked "act". Math and accumulation are float32 either way; a bfloat16 store
 *   rounds to nearest even (lcx_f32_to_bf16). Tensors not marked "act" are float32 whatever `dt` is: norm
 *   weights, rstd, LSE, parameter gradients and optimizer state, attention's dQ/dK/dV accumulators, and the
 *   device results (loss sums, counts, squared norms, in double/int64).
 * - Weights may be float32 or bfloat16 (w_dtype/a_dtype/b_dtype).
 * - "accumulated" outputs are added to (+=): the caller zeroes them first. Every other output is overwritten.
 * - Determinism: on the CPU backend every op except matmul gives bit-identical results for any OpenMP thread
 *   count (fixed work partition, reductions in a fixed order, no float atomics). Matmul is bit-identical from
 *   run to run at a fixed thread count.
 *
 * Llama conventions: linear layers hold HF weights W [out, in] and compute y = x W^T (matmul with trans_b = 1);
 * RoPE uses the HF "rotate_half" layout (dimension i pairs with i + rot_dim/2); attention q/k/v are
 * [tokens, heads, head_dim]; GQA maps query head h to key/value head h / (n_heads / n_kv_heads). */
#ifndef LCX_KERNELS_BACKEND_H
#define LCX_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"
#include "src/core/tensor.h"

/* Target id that contributes nothing to the loss (PyTorch's default ignore_index). */
#define LCX_IGNORE_INDEX (-100)

typedef struct lcx_backend lcx_backend;

/* An execution context: one queue of one backend, its library handles and its scratch arena. Created by
 * lcx_exec_create; the caller owns it. Several contexts of one backend are independent queues. */
typedef struct lcx_exec {
    const lcx_backend *be;
    void *queue;          /* backend queue (cudaStream_t); NULL on the CPU */
    void *handles;        /* backend library handles (cuBLASLt); NULL on the CPU */
    void *scratch;        /* device arena for op workspaces (lcx_exec_reserve) */
    size_t scratch_bytes;
} lcx_exec;

/* An event of one backend (opaque; on the CPU every event is complete once recorded). */
typedef struct lcx_event lcx_event;
/* event_create flag: the event also records the time its mark is reached (event_elapsed). Without it events are
 * cheaper on a GPU (CUDA's cudaEventDisableTiming). */
#define LCX_EVENT_TIMED 1u

/* The ops, for workspace queries and the op tests. */
typedef enum lcx_op {
    LCX_OP_MATMUL = 0,
    LCX_OP_EMBEDDING_FWD,
    LCX_OP_EMBEDDING_BWD,
    LCX_OP_RMSNORM_FWD,
    LCX_OP_RMSNORM_BWD,
    LCX_OP_ROPE_FWD,
    LCX_OP_ROPE_BWD,
    LCX_OP_ATTENTION_FWD,
    LCX_OP_ATTENTION_BWD,
    LCX_OP_ATTENTION_MERGE,
    LCX_OP_SWIGLU_FWD,
    LCX_OP_SWIGLU_BWD,
    LCX_OP_CROSS_ENTROPY,
    LCX_OP_ADAMW,
    LCX_OP_SQNORM,
    LCX_OP_CAST,
    LCX_OP_ADD,
    LCX_OP_SCALE,
    LCX_OP_AXPY,
    LCX_OP_COUNT
} lcx_op;

/* ---- argument structs (one per op family; forward and backward share one where their shapes agree) -------- */

/* C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] for b in [0, batch), accumulation in float32.
 * op(A) is [m, k]: A is stored [m, k] (trans_a = 0) or [k, m] (trans_a = 1); op(B) is [k, n]: B is stored
 * [k, n] (trans_b = 0) or [n, k] (trans_b = 1). y = x W^T with W [out, in]: A = x [t, in], B = W, trans_b = 1.
 * Leading dimensions are in elements (row strides of the stored matrices); 0 means dense (the stored row length).
 * Batch strides are in elements; 0 means the operand is shared by every batch entry.
 * beta = 0 overwrites C (its old contents, even NaN, are ignored); otherwise C is read in c_dtype. */
typedef struct lcx_matmul_args {
    int trans_a, trans_b;
    int64_t m, n, k, batch;  /* batch >= 1 */
    float alpha, beta;
    lcx_dtype a_dtype;       /* LCX_F32 or LCX_BF16 */
    const void *a;           /* [batch][m, k] or [batch][k, m] (trans_a), row stride lda */
    int64_t lda, stride_a;
    lcx_dtype b_dtype;       /* LCX_F32 or LCX_BF16 */
    const void *b;           /* [batch][k, n] or [batch][n, k] (trans_b), row stride ldb */
    int64_t ldb, stride_b;
    lcx_dtype c_dtype;       /* LCX_F32 or LCX_BF16 (0 means LCX_F32) */
    void *c;                 /* [batch][m, n], row stride ldc */
    int64_t ldc, stride_c;
} lcx_matmul_args;

/* Embedding rows of one vocabulary shard (vocab-parallel ready): rows vocab_start .. vocab_start + n_rows - 1
 * of the global vocabulary [0, n_vocab) live here.
 * fwd: out[t, :] = weight[ids[t] - vocab_start, :] when the id is in this shard, else 0.
 * bwd: dweight[ids[t] - vocab_start, :] += dout[t, :] for the ids in this shard (scatter-add, in token order
 *      per row); other ids contribute nothing. */
typedef struct lcx_embedding_args {
    lcx_dtype dt;            /* act dtype of out / dout */
    int64_t n_tokens, n_rows, dim, vocab_start, n_vocab;
    const int32_t *ids;      /* [n_tokens] */
    lcx_dtype w_dtype;       /* fwd: weight dtype, LCX_F32 or LCX_BF16 */
    const void *weight;      /* fwd: [n_rows, dim] */
    void *out;               /* fwd: act [n_tokens, dim] */
    const void *dout;        /* bwd: act [n_tokens, dim] */
    float *dweight;          /* bwd: f32 [n_rows, dim], accumulated */
} lcx_embedding_args;

/* RMSNorm y = w * x / sqrt(mean(x^2) + eps) over rows of dim elements, float32 math.
 * fwd reads x, w and writes y and rstd; bwd reads dy, x, w, rstd, writes dx and accumulates dw. */
typedef struct lcx_rmsnorm_args {
    lcx_dtype dt;            /* act dtype of x, y, dy, dx */
    int64_t n_rows, dim;
    float eps;
    const void *x;           /* act [n_rows, dim] (bwd: the forward input) */
    const float *w;          /* f32 [dim] */
    void *y;                 /* fwd: act [n_rows, dim] (may alias x) */
    float *rstd;             /* fwd: f32 [n_rows] 1/sqrt(mean(x^2)+eps), saved for the backward (NULL: not saved);
                                bwd: input */
    const void *dy;          /* bwd: act [n_rows, dim] */
    void *dx;                /* bwd: act [n_rows, dim], overwritten (may alias dy) */
    float *dw;               /* bwd: f32 [dim], accumulated */
} lcx_rmsnorm_args;

/* RoPE, HF rotate_half layout with partial rotary. For each token t, head h and i < rot_dim/2, with
 * p = pos[t], c = cos[p, i], s = sin[p, i]:
 *   out[i] = x[i] c - x[i + rot_dim/2] s,  out[i + rot_dim/2] = x[i + rot_dim/2] c + x[i] s;
 * dims rot_dim .. head_dim-1 pass through. bwd applies the transpose (rotation by -angle) to x = dout.
 * Tables come from src/rope (attention scaling folded in). A token whose position is outside [0, n_pos) is
 * passed through unrotated (invalid input: positions are validated on the host). */
typedef struct lcx_rope_args {
    lcx_dtype dt;            /* act dtype of x and out */
    int64_t n_tokens, n_heads, head_dim, rot_dim, n_pos; /* rot_dim even, <= head_dim */
    const void *x;           /* act [n_tokens, n_heads, head_dim] (bwd: the output gradient) */
    void *out;               /* act [n_tokens, n_heads, head_dim] (may alias x) */
    const int32_t *pos;      /* [n_tokens] global positions */
    const float *cos, *sin;  /* f32 [n_pos, rot_dim/2] */
} lcx_rope_args;

/* Which keys a query sees in one attention call (positions are global: q_offset + i, k_offset + j). With
 * document masking (lcx_attn_args.q_doc_start) a key must also be at or after the first position of the query's
 * document: the mask then keeps a query inside its own document of a packed row. */
typedef enum lcx_attn_mask {
    LCX_MASK_CAUSAL = 0, /* key visible iff k_offset + j <= q_offset + i */
    LCX_MASK_FULL,       /* every key visible */
    LCX_MASK_NONE,       /* no key visible: every row fully masked (O = 0, LSE = -inf) */
} lcx_attn_mask;

/* Attention over one query block and one key block (one ring step of context parallelism, or the new tokens
 * against a KV cache). n_heads % n_kv_heads == 0; query head h reads key/value head h / (n_heads / n_kv_heads).
 * fwd (flash-style: O(n) memory, online softmax, never an n x n matrix): O = softmax(scale Q K^T + mask) V per
 *   head, and LSE = log(sum_j exp(scale q.k_j)) over visible keys (natural log, of the scaled scores). A row
 *   with no visible key gets O = 0 and LSE = -inf.
 * bwd (flash-attention-2, one block pair): D = rowsum(dO * O), P = exp(scale q.k - LSE), dV += P^T dO,
 *   dS = P (dO V^T - D), dQ += scale dS K, dK += scale dS^T Q. o and lse are the FINAL output and log-sum-exp
 *   of the rows (after merging all key blocks), so calling this once per key block and summing gives the
 *   gradient of the full attention. */
typedef struct lcx_attn_args {
    lcx_dtype dt;               /* act dtype of q, k, v, o, dout */
    int64_t n_q, n_k;           /* query and key rows in this block (either may be 0) */
    int64_t n_heads, n_kv_heads, head_dim;
    int64_t q_offset, k_offset; /* global position of query row 0 and key row 0 (used by LCX_MASK_CAUSAL) */
    lcx_attn_mask mask;
    const int32_t *q_doc_start; /* [n_q] device: global position of the first key query row i may see (its
                                   document's first token), with any mask: key j is visible only if
                                   k_offset + j >= q_doc_start[i]. NULL: no lower bound (no document mask) */
    float scale;                /* softmax scale, usually 1/sqrt(head_dim) */
    const void *q;              /* act [n_q, n_heads, head_dim] */
    const void *k, *v;          /* act [n_k, n_kv_heads, head_dim] */
    void *o;                    /* fwd: act [n_q, n_heads, head_dim] out; bwd: input (final) */
    float *lse;                 /* fwd: f32 [n_q, n_heads] out; bwd: input (final) */
    const void *dout;           /* bwd: act [n_q, n_heads, head_dim] */
    float *dq;                  /* bwd: f32 [n_q, n_heads, head_dim], accumulated */
    float *dk, *dv;             /* bwd: f32 [n_k, n_kv_heads, head_dim], accumulated */
} lcx_attn_args;

/* Combine a partial attention result into an accumulator, in float32 with the safe formula
 * lse = max + log(exp(a - max) + exp(b - max)), O = O_a exp(a - lse) + O_b exp(b - lse). Rows where both are
 * -inf stay O = 0, LSE = -inf. */
typedef struct lcx_attn_merge_args {
    lcx_dtype dt;               /* act dtype of o_acc and o_part */
    int64_t n_rows, n_heads, head_dim;
    void *o_acc;                /* act [n_rows, n_heads, head_dim], updated */
    float *lse_acc;             /* f32 [n_rows, n_heads], updated */
    const void *o_part;         /* act [n_rows, n_heads, head_dim] */
    const float *lse_part;      /* f32 [n_rows, n_heads] */
} lcx_attn_merge_args;

/* SwiGLU activation h = silu(gate) * up, silu(g) = g / (1 + exp(-g)), over n elements of any shape.
 * fwd: h (may alias gate or up). bwd: dgate, dup from dh (dgate may alias gate, dup may alias up). */
typedef struct lcx_swiglu_args {
    lcx_dtype dt;               /* act dtype of every tensor */
    int64_t n;
    const void *gate, *up;      /* act [n] */
    void *h;                    /* fwd: act [n] */
    const void *dh;             /* bwd: act [n] */
    void *dgate, *dup;          /* bwd: act [n], overwritten */
} lcx_swiglu_args;

/* Cross-entropy on a chunk of logits. For each row r with targets[r] != LCX_IGNORE_INDEX:
 * loss_r = logsumexp(logits[r, :]) - logits[r, t_r] and dlogits[r, :] = dscale * (softmax(logits[r, :]) -
 * onehot(t_r)); ignored rows get dlogits 0 and no loss. The results stay on the device: *loss_sum += the sum of
 * loss_r in row order (double), *count += the rows not ignored. dscale lets the caller divide by the global
 * token count. A target outside [0, vocab) other than the ignore index is invalid input (validated on the host);
 * a backend treats it as ignored.
 *
 * Vocab-parallel rows (tensor parallelism, docs/parallel.md): each of tp ranks holds columns [vocab_start,
 * vocab_start + vocab) of the global vocabulary, of which the first n_valid are real and the rest padding (never a
 * target, masked out of every sum); targets are global ids. A full row never exists on one rank:
 *   LCX_XENT_STATS: stats[r] = {max, sum of exp(x - max), x[target] or 0 when the target is not in this shard}
 *     over this shard's valid columns of each counted row (max -inf and sum 0 for an empty shard; ignored rows
 *     all 0); nothing else is written. The caller gathers the tp ranks' stats in rank order.
 *   LCX_XENT_FINISH: stats holds the gathered stats [tp][n_rows][3]; the global max, sum of exponentials (ranks
 *     combined in rank order, in double) and target logit give each row's loss, added to loss_sum/count exactly
 *     as the whole-row op does (every rank adds the same values), and dlogits of this shard (padding columns 0).
 * LCX_XENT_WHOLE (0): the whole row is here (vocab_start, n_valid, tp, stats unused). */
typedef enum lcx_xent_phase { LCX_XENT_WHOLE = 0, LCX_XENT_STATS, LCX_XENT_FINISH } lcx_xent_phase;
typedef struct lcx_xent_args {
    lcx_dtype dt;               /* act dtype of logits and dlogits */
    int64_t n_rows, vocab;      /* vocab: the columns of logits (a shard's, with padding, when vocab-parallel) */
    float dscale;
    const void *logits;         /* act [n_rows, vocab] */
    const int32_t *targets;     /* [n_rows] */
    void *dlogits;              /* act [n_rows, vocab] (may alias logits; NULL: loss only) */
    double *loss_sum;           /* [1] device, accumulated */
    int64_t *count;             /* [1] device, accumulated */
    lcx_xent_phase phase;       /* vocab-parallel phases (above); 0: whole rows */
    int tp;                     /* ranks sharing the vocabulary (FINISH: stats rows), >= 1 */
    int64_t vocab_start;        /* global id of column 0 */
    int64_t n_valid;            /* real columns (0 .. vocab); the rest is padding */
    double *stats;              /* device: STATS writes [n_rows][3], FINISH reads [tp][n_rows][3] */
} lcx_xent_args;

/* One AdamW step, in this order (torch.optim.AdamW): g = grad_scale * grad; p -= lr * weight_decay * p;
 * m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; bc1 = 1 - beta1^t; bc2 = 1 - beta2^t;
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). Scalars are formed in double, element math is float32
 * in PyTorch's operation order (m = fma(1-beta1, g-m, m), v = fma((1-beta2) g, g, v*beta2),
 * p = p + ((-lr/bc1) m) / denom); against torch.optim.AdamW (CPU, float32) the moments match bit for bit and
 * the parameters to 1 ulp (tests/unit/test_ops_adamw.c). The clipping coefficient is a host scalar: the
 * trainer reads the squared norm once per step (one copy_d2h) before it. */
typedef struct lcx_adamw_args {
    double lr, beta1, beta2, eps, weight_decay; /* host scalars in double, as PyTorch keeps them */
    int64_t step;       /* 1-based step count t used for bias correction */
    double grad_scale;  /* gradient multiplier applied before the update (clipping coefficient; 1 = none) */
    int64_t n;
    float *param;       /* f32 [n] master weights, updated */
    const float *grad;  /* f32 [n] */
    float *m, *v;       /* f32 [n] moments, updated (zero before step 1) */
    uint16_t *param_bf16; /* bf16 [n]: RNE copy of the updated param, or NULL */
} lcx_adamw_args;

/* *out += sum of x[i]^2 over n elements, in double, in a fixed order (device result). */
typedef struct lcx_sqnorm_args {
    int64_t n;
    const float *x;     /* f32 [n] */
    double *out;        /* [1] device, accumulated */
} lcx_sqnorm_args;

/* dst = src converted between LCX_F32 and LCX_BF16 (round to nearest even to bf16, exact to f32; the same
 * dtype copies). */
typedef struct lcx_cast_args {
    int64_t n;
    lcx_dtype src_dt, dst_dt;
    const void *src;
    void *dst;
} lcx_cast_args;

/* Elementwise on n act elements: add: out = a + b (out may alias a or b); scale: out = alpha * a (out may alias
 * a, which scales in place; b unused); axpy: y += alpha * x with x = a, y = out (b unused). */
typedef struct lcx_elementwise_args {
    lcx_dtype dt;       /* act dtype of every tensor */
    int64_t n;
    float alpha;        /* scale and axpy: alpha */
    const void *a, *b;
    void *out;
} lcx_elementwise_args;

/* ---- the table ---------------------------------------------------------------------------------------------- */

struct lcx_backend {
    const char *name; /* "cpu", "cuda" */

    /* 1 when the backend can run here (the CUDA backend without a visible device: 0, and its op tests skip). */
    int (*available)(void);

    /* ---- contexts and events ----------------------------------------------------------------------------- */
    /* Fill x->queue and x->handles (x->be is set by the caller, scratch is empty). */
    lcx_status (*exec_init)(lcx_exec *x);
    void (*exec_destroy)(lcx_exec *x);   /* releases queue and handles, not the scratch */
    lcx_status (*sync)(lcx_exec *x);     /* wait for every op queued on x */
    lcx_status (*event_create)(lcx_event **out, unsigned flags); /* flags: 0 or LCX_EVENT_TIMED */
    void (*event_free)(lcx_event *e);    /* NULL ok */
    lcx_status (*event_record)(lcx_exec *x, lcx_event *e);
    lcx_status (*event_wait)(lcx_exec *x, lcx_event *e); /* later work on x waits for e */
    lcx_status (*event_sync)(lcx_event *e);              /* the host waits for e */
    /* *seconds = the time from a's mark to b's (>= 0 when b was recorded after a on one queue): both timed,
     * recorded and complete (event_sync), else LCX_ERR_INVALID naming the problem. */
    lcx_status (*event_elapsed)(lcx_event *a, lcx_event *b, double *seconds);

    /* ---- memory (alloc/free are not queued: call them outside hot loops) ---------------------------------- */
    /* *out = device buffer of `bytes` bytes (64-byte aligned, contents undefined); bytes 0 gives a valid
     * pointer that can be freed. Fails with LCX_ERR_OOM naming the size. */
    lcx_status (*alloc)(size_t bytes, void **out);
    void (*free)(void *p); /* free(NULL) is a no-op */
    lcx_status (*copy_h2d)(lcx_exec *x, void *dst_device, const void *src_host, size_t bytes);
    lcx_status (*copy_d2h)(lcx_exec *x, void *dst_host, const void *src_device, size_t bytes);
    lcx_status (*copy_d2d)(lcx_exec *x, void *dst_device, const void *src_device, size_t bytes); /* no overlap */
    lcx_status (*zero)(lcx_exec *x, void *p_device, size_t bytes);
    /* Host memory for asynchronous copies (pinned on a GPU, so a copy engine moves it while the host goes on;
     * ordinary memory on the CPU); 64-byte aligned, bytes 0 gives a freeable pointer, LCX_ERR_OOM naming the size.
     * Not queued. */
    lcx_status (*host_alloc)(size_t bytes, void **out);
    void (*host_free)(void *p); /* NULL ok; the copies that use it must be complete */
    /* Queued copies between device memory and host memory from host_alloc: they return at once, and neither buffer
     * may be touched until an event recorded on x after the copy has completed (event_sync, or event_wait on
     * another queue for its device side). On the CPU they are done when they return. */
    lcx_status (*copy_d2h_async)(lcx_exec *x, void *dst_host, const void *src_device, size_t bytes);
    lcx_status (*copy_h2d_async)(lcx_exec *x, void *dst_device, const void *src_host, size_t bytes);
    /* The bytes this backend's alloc holds now (alloc's sizes, host_alloc's not) and at most since the start or the
     * last mem_reset_peak: the allocator high-water mark the planner's memory model predicts (docs/plan.md). Not
     * counted: the allocator's own rounding, and memory the libraries take outside the contract (CUDA's context,
     * cuBLASLt's handles). */
    void (*mem_stats)(size_t *in_use, size_t *peak); /* either may be NULL */
    void (*mem_reset_peak)(void);
    /* What the device has in use now, by everything (CUDA: cudaMemGetInfo's total - free: this process's context,
     * libraries and allocations, and any other process's); less mem_stats' in_use it is what the planner's
     * reserve stands for (docs/plan.md "Reserve"). 0: unknown, or the device is the host (the CPU). */
    size_t (*device_used)(void);

    /* Bytes of scratch `op` needs for `args` (a pointer to that op's argument struct); 0 for most ops. Depends
     * on the sizes and dtypes only (and the backend's thread count: on the CPU omp_get_max_threads(), which must
     * not grow between sizing an arena and the call), never on pointer values. */
    size_t (*workspace)(const lcx_exec *x, lcx_op op, const void *args);

    /* ---- ops (queued) ------------------------------------------------------------------------------------ */
    lcx_status (*matmul)(lcx_exec *x, const lcx_matmul_args *a);
    lcx_status (*embedding_fwd)(lcx_exec *x, const lcx_embedding_args *a);
    lcx_status (*embedding_bwd)(lcx_exec *x, const lcx_embedding_args *a);
    lcx_status (*rmsnorm_fwd)(lcx_exec *x, const lcx_rmsnorm_args *a);
    lcx_status (*rmsnorm_bwd)(lcx_exec *x, const lcx_rmsnorm_args *a);
    lcx_status (*rope_fwd)(lcx_exec *x, const lcx_rope_args *a);
    lcx_status (*rope_bwd)(lcx_exec *x, const lcx_rope_args *a);
    lcx_status (*attention_fwd)(lcx_exec *x, const lcx_attn_args *a);
    lcx_status (*attention_bwd)(lcx_exec *x, const lcx_attn_args *a);
    lcx_status (*attention_merge)(lcx_exec *x, const lcx_attn_merge_args *a);
    lcx_status (*swiglu_fwd)(lcx_exec *x, const lcx_swiglu_args *a);
    lcx_status (*swiglu_bwd)(lcx_exec *x, const lcx_swiglu_args *a);
    lcx_status (*cross_entropy)(lcx_exec *x, const lcx_xent_args *a);
    lcx_status (*adamw)(lcx_exec *x, const lcx_adamw_args *a);
    lcx_status (*sqnorm)(lcx_exec *x, const lcx_sqnorm_args *a);
    lcx_status (*cast)(lcx_exec *x, const lcx_cast_args *a);
    lcx_status (*add)(lcx_exec *x, const lcx_elementwise_args *a);
    lcx_status (*scale)(lcx_exec *x, const lcx_elementwise_args *a);
    lcx_status (*axpy)(lcx_exec *x, const lcx_elementwise_args *a);
};

/* The backend registered under `name`: "cpu", and "cuda" in builds with CUDA (returned whether or not a device
 * is visible: ask ->available()). NULL, with the detail message "unknown backend 'NAME' (available: cpu, ...)"
 * listing the compiled backends, if there is none. */
const lcx_backend *lcx_backend_get(const char *name);

/* The CPU backend (always available). */
const lcx_backend *lcx_backend_cpu(void);

/* Every compiled backend, the CPU first; *n gets the count. (Whether each can run here: ->available().) */
const lcx_backend *const *lcx_backend_list(int *n);

/* ---- exec helpers (kernels/backend.c) ---------------------------------------------------------------------- */
/* A new context on be (NULL: the CPU backend) with an empty arena. */
lcx_status lcx_exec_create(const lcx_backend *be, lcx_exec **out);
/* Free the arena, the queue and the context (NULL ok). Waits for queued work first. */
void lcx_exec_free(lcx_exec *x);
/* Grow the arena to at least `bytes` (never shrinks; contents are not kept). Not queued: sync first if
 * queued ops may still use the arena. */
lcx_status lcx_exec_reserve(lcx_exec *x, size_t bytes);
/* Bytes of scratch op needs (x->be->workspace). */
size_t lcx_exec_workspace(const lcx_exec *x, lcx_op op, const void *args);
/* LCX_OK when the arena holds `need` bytes for `op_name`, else LCX_ERR_INVALID naming both sizes. */
lcx_status lcx_exec_need(const lcx_exec *x, size_t need, const char *op_name);

/* Bytes per element of an activation dtype (4 for LCX_F32, 2 for LCX_BF16, 0 for anything else). */
static inline size_t lcx_act_size(lcx_dtype dt) { return dt == LCX_F32 ? 4 : dt == LCX_BF16 ? 2 : 0; }

#endif /* LCX_KERNELS_BACKEND_H */
