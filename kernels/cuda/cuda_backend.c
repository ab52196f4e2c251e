/* cuda_backend: the CUDA backend's table (C11 host code): contexts (one cudaStream_t per lcx_exec), events,
 * memory, the workspace query, and every op's argument checks (the CPU backend's messages) before its launcher
 * (cuda_ops.h) queues the kernels. Errors are one line with cudaGetErrorString; nothing here prints.
 *
 * Status: compiled in CI, not yet run on a GPU (docs/cuda.md). matmul is the next step and reports
 * LCX_ERR_UNSUPPORTED, so the table is not registered in kernels/backend.c yet (lcx_backend_get("cuda") fails
 * and the model cannot pick it); lcx_backend_cuda_partial() hands it to the op tests. */
#include <math.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_runtime_info.h"

/* ---- errors -------------------------------------------------------------------------------------------------- */

/* LCX_OK, or LCX_ERR_CUDA "op: what: CUDA's message" (the non-sticky error is cleared). */
static lcx_status cuda_check(cudaError_t e, const char *op, const char *what) {
    if (e == cudaSuccess) return LCX_OK;
    (void)cudaGetLastError();
    return lcx_fail(LCX_ERR_CUDA, "%s: %s: %s", op, what, cudaGetErrorString(e));
}
static lcx_status launched(cudaError_t e, const char *op) { return cuda_check(e, op, "kernel launch"); }

#define CU_ARGS(x, a, op)                                                                                     \
    LCX_FAIL_IF((x) == NULL || (a) == NULL, LCX_ERR_INVALID, "%s: NULL %s", (op), (x) == NULL ? "exec" : "arguments")
#define CU_NEED(ptr, count, op)                                                                               \
    LCX_FAIL_IF((ptr) == NULL && (count) > 0, LCX_ERR_INVALID, "%s: '%s' is NULL", (op), #ptr)

static lcx_status act_check(lcx_dtype dt, const char *op) {
    LCX_FAIL_IF(dt != LCX_F32 && dt != LCX_BF16, LCX_ERR_UNSUPPORTED, "%s: activation dtype %s (use F32 or BF16)",
                op, lcx_dtype_name(dt));
    return LCX_OK;
}

/* Kernels with one block per row take the row count as the grid size. */
static lcx_status grid_rows(int64_t rows, const char *op) {
    LCX_FAIL_IF(rows > INT32_MAX, LCX_ERR_UNSUPPORTED, "%s: %lld rows (at most %d per call on CUDA)", op,
                (long long)rows, INT32_MAX);
    return LCX_OK;
}

static cudaStream_t stream_of(const lcx_exec *x) { return (cudaStream_t)x->queue; }

/* ---- contexts and events --------------------------------------------------------------------------------------- */

static int cu_available(void) { return lcx_cuda_device_count() > 0; }

static lcx_status cu_exec_init(lcx_exec *x) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "exec_init: NULL exec");
    LCX_FAIL_IF(!cu_available(), LCX_ERR_CUDA, "exec_init: no CUDA device is visible");
    cudaStream_t s = NULL;
    LCX_TRY(cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "exec_init", "cudaStreamCreate"));
    x->queue = s;
    x->handles = NULL; /* cuBLASLt comes with matmul */
    return LCX_OK;
}

static void cu_exec_destroy(lcx_exec *x) {
    if (!x || !x->queue) return;
    (void)cudaStreamDestroy(stream_of(x));
    x->queue = NULL;
}

static lcx_status cu_sync(lcx_exec *x) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "sync: NULL exec");
    return cuda_check(cudaStreamSynchronize(stream_of(x)), "sync", "cudaStreamSynchronize");
}

/* An lcx_event is a cudaEvent_t (a pointer to CUDA's own event struct), without timing. */
static lcx_status cu_event_create(lcx_event **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "event_create: 'out' is NULL");
    *out = NULL;
    cudaEvent_t e = NULL;
    LCX_TRY(cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event_create", "cudaEventCreate"));
    *out = (lcx_event *)e;
    return LCX_OK;
}
static void cu_event_free(lcx_event *e) {
    if (e) (void)cudaEventDestroy((cudaEvent_t)e);
}
static lcx_status cu_event_record(lcx_exec *x, lcx_event *e) {
    LCX_FAIL_IF(x == NULL || e == NULL, LCX_ERR_INVALID, "event_record: NULL exec or event");
    return cuda_check(cudaEventRecord((cudaEvent_t)e, stream_of(x)), "event_record", "cudaEventRecord");
}
static lcx_status cu_event_wait(lcx_exec *x, lcx_event *e) {
    LCX_FAIL_IF(x == NULL || e == NULL, LCX_ERR_INVALID, "event_wait: NULL exec or event");
    return cuda_check(cudaStreamWaitEvent(stream_of(x), (cudaEvent_t)e, 0), "event_wait", "cudaStreamWaitEvent");
}
static lcx_status cu_event_sync(lcx_event *e) {
    LCX_FAIL_IF(e == NULL, LCX_ERR_INVALID, "event_sync: NULL event");
    return cuda_check(cudaEventSynchronize((cudaEvent_t)e), "event_sync", "cudaEventSynchronize");
}

/* ---- memory -------------------------------------------------------------------------------------------------- */

/* cudaMalloc's pointers are aligned to at least 256 bytes; 0 bytes allocates 64 so that the pointer is valid. */
static lcx_status cu_alloc(size_t bytes, void **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "alloc: 'out' is NULL");
    *out = NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 64);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return lcx_fail(LCX_ERR_OOM, "alloc: cudaMalloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
    }
    *out = p;
    return LCX_OK;
}

static void cu_free(void *p) {
    if (p) (void)cudaFree(p);
}

static lcx_status copy_args(const char *op, lcx_exec *x, void *dst, const void *src, size_t bytes) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "%s: NULL exec", op);
    LCX_FAIL_IF(bytes > 0 && (dst == NULL || src == NULL), LCX_ERR_INVALID, "%s: NULL pointer with %zu bytes", op,
                bytes);
    return LCX_OK;
}

/* The host buffer may be reused as soon as this returns: the copy is queued and waited for (first version: a
 * pinned staging buffer would let it return earlier). */
static lcx_status cu_copy_h2d(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    LCX_TRY(copy_args("copy_h2d", x, dst, src, bytes));
    if (bytes == 0) return LCX_OK;
    LCX_TRY(cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(x)), "copy_h2d",
                       "cudaMemcpyAsync"));
    return cuda_check(cudaStreamSynchronize(stream_of(x)), "copy_h2d", "cudaStreamSynchronize");
}

/* Waits for the queue's earlier work, then returns with the host buffer filled. */
static lcx_status cu_copy_d2h(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    LCX_TRY(copy_args("copy_d2h", x, dst, src, bytes));
    if (bytes == 0) return LCX_OK;
    LCX_TRY(cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(x)), "copy_d2h",
                       "cudaMemcpyAsync"));
    return cuda_check(cudaStreamSynchronize(stream_of(x)), "copy_d2h", "cudaStreamSynchronize");
}

static lcx_status cu_copy_d2d(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    LCX_TRY(copy_args("copy_d2d", x, dst, src, bytes));
    if (bytes == 0) return LCX_OK;
    return cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(x)), "copy_d2d",
                      "cudaMemcpyAsync");
}

static lcx_status cu_zero(lcx_exec *x, void *p, size_t bytes) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "zero: NULL exec");
    if (bytes == 0) return LCX_OK;
    LCX_FAIL_IF(p == NULL, LCX_ERR_INVALID, "zero: NULL pointer with %zu bytes", bytes);
    return cuda_check(cudaMemsetAsync(p, 0, bytes, stream_of(x)), "zero", "cudaMemsetAsync");
}

/* ---- workspace ------------------------------------------------------------------------------------------------ */

static size_t sqnorm_ws(const lcx_sqnorm_args *a) {
    return lcx_cuda_ws_part((a->n + LCX_CUDA_NORM_BLOCK - 1) / LCX_CUDA_NORM_BLOCK, sizeof(double));
}
/* Row losses for the whole-row op and FINISH; STATS writes the stats only. */
static size_t xent_ws(const lcx_xent_args *a) {
    if (a->phase == LCX_XENT_STATS || a->vocab <= 0) return 0;
    return lcx_cuda_ws_part(a->n_rows, sizeof(double));
}

static size_t cu_workspace(const lcx_exec *x, lcx_op op, const void *args) {
    (void)x;
    if (args == NULL) return 0;
    switch (op) {
    case LCX_OP_SQNORM: return sqnorm_ws(args);
    case LCX_OP_CROSS_ENTROPY: return xent_ws(args);
    case LCX_OP_ATTENTION_BWD: return lcx_cuda_attention_bwd_ws(args);
    default: return 0; /* the other ops need no scratch (matmul: not yet implemented) */
    }
}

/* ---- not yet implemented (the next step of issue 14) ----------------------------------------------------------- */

static lcx_status cu_matmul(lcx_exec *x, const lcx_matmul_args *a) {
    (void)x, (void)a;
    return lcx_fail(LCX_ERR_UNSUPPORTED, "matmul: not implemented on the CUDA backend yet (cuBLASLt, issue 14)");
}

/* ---- attention (cuda_attention_fwd.cu, cuda_attention_bwd.cu) -------------------------------------------------- */

/* The CPU's checks (lcx_cpu_attn_check and its NULL checks), then the kernels' limits: a lane's head dims in
 * registers, the heads in the grid's y dimension. */
static lcx_status attn_check(const char *op, const lcx_attn_args *a) {
    LCX_FAIL_IF(a->n_q < 0 || a->n_k < 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->head_dim <= 0 ||
                    a->n_heads % a->n_kv_heads != 0,
                LCX_ERR_INVALID, "%s: bad sizes q=%lld k=%lld heads=%lld kv_heads=%lld head_dim=%lld", op,
                (long long)a->n_q, (long long)a->n_k, (long long)a->n_heads, (long long)a->n_kv_heads,
                (long long)a->head_dim);
    LCX_FAIL_IF(a->mask != LCX_MASK_CAUSAL && a->mask != LCX_MASK_FULL && a->mask != LCX_MASK_NONE,
                LCX_ERR_INVALID, "%s: unknown mask mode %d", op, (int)a->mask);
    LCX_FAIL_IF(!isfinite(a->scale), LCX_ERR_INVALID, "%s: scale is not finite", op);
    LCX_TRY(act_check(a->dt, op));
    LCX_FAIL_IF(a->head_dim > LCX_CUDA_ATTN_MAX_HEAD_DIM || a->n_heads > 65535, LCX_ERR_UNSUPPORTED,
                "%s: head_dim %lld, %lld heads (at most %d and 65535 on CUDA)", op, (long long)a->head_dim,
                (long long)a->n_heads, LCX_CUDA_ATTN_MAX_HEAD_DIM);
    CU_NEED(a->q, a->n_q, op);
    CU_NEED(a->o, a->n_q, op);
    CU_NEED(a->lse, a->n_q, op);
    CU_NEED(a->k, a->n_k, op);
    CU_NEED(a->v, a->n_k, op);
    return LCX_OK;
}

static lcx_status cu_attention_fwd(lcx_exec *x, const lcx_attn_args *a) {
    CU_ARGS(x, a, "attention_fwd");
    LCX_TRY(attn_check("attention_fwd", a));
    return launched(lcx_cuda_attention_fwd_launch(stream_of(x), a), "attention_fwd");
}

static lcx_status cu_attention_bwd(lcx_exec *x, const lcx_attn_args *a) {
    const char *op = "attention_bwd";
    CU_ARGS(x, a, op);
    LCX_TRY(attn_check(op, a));
    CU_NEED(a->dout, a->n_q, op);
    CU_NEED(a->dq, a->n_q, op);
    CU_NEED(a->dk, a->n_k, op);
    CU_NEED(a->dv, a->n_k, op);
    LCX_TRY(lcx_exec_need(x, lcx_cuda_attention_bwd_ws(a), op));
    return launched(lcx_cuda_attention_bwd_launch(stream_of(x), a, x->scratch), op);
}

/* ---- ops ------------------------------------------------------------------------------------------------------ */

static lcx_status cu_cast(lcx_exec *x, const lcx_cast_args *a) {
    CU_ARGS(x, a, "cast");
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "cast: negative size %lld", (long long)n);
    LCX_FAIL_IF((a->src_dt != LCX_F32 && a->src_dt != LCX_BF16) || (a->dst_dt != LCX_F32 && a->dst_dt != LCX_BF16),
                LCX_ERR_UNSUPPORTED, "cast: %s to %s (F32 and BF16 only)", lcx_dtype_name(a->src_dt),
                lcx_dtype_name(a->dst_dt));
    CU_NEED(a->src, n, "cast");
    CU_NEED(a->dst, n, "cast");
    return launched(lcx_cuda_cast_launch(stream_of(x), a), "cast");
}

static lcx_status elementwise(const char *op, int kind, lcx_exec *x, const lcx_elementwise_args *a) {
    CU_ARGS(x, a, op);
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "%s: negative size %lld", op, (long long)n);
    LCX_TRY(act_check(a->dt, op));
    CU_NEED(a->a, n, op);
    if (kind == 0) CU_NEED(a->b, n, op);
    CU_NEED(a->out, n, op);
    return launched(lcx_cuda_elementwise_launch(stream_of(x), kind, a), op);
}
static lcx_status cu_add(lcx_exec *x, const lcx_elementwise_args *a) { return elementwise("add", 0, x, a); }
static lcx_status cu_scale(lcx_exec *x, const lcx_elementwise_args *a) { return elementwise("scale", 1, x, a); }
static lcx_status cu_axpy(lcx_exec *x, const lcx_elementwise_args *a) { return elementwise("axpy", 2, x, a); }

static lcx_status cu_sqnorm(lcx_exec *x, const lcx_sqnorm_args *a) {
    CU_ARGS(x, a, "sqnorm");
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "sqnorm: negative size %lld", (long long)n);
    LCX_FAIL_IF(a->out == NULL, LCX_ERR_INVALID, "sqnorm: NULL output");
    CU_NEED(a->x, n, "sqnorm");
    LCX_TRY(grid_rows((n + LCX_CUDA_NORM_BLOCK - 1) / LCX_CUDA_NORM_BLOCK, "sqnorm"));
    LCX_TRY(lcx_exec_need(x, sqnorm_ws(a), "sqnorm"));
    return launched(lcx_cuda_sqnorm_launch(stream_of(x), a, x->scratch), "sqnorm");
}

static lcx_status emb_check(const char *op, lcx_exec *x, const lcx_embedding_args *a) {
    CU_ARGS(x, a, op);
    LCX_FAIL_IF(a->n_tokens < 0 || a->n_rows < 0 || a->dim < 0 || a->vocab_start < 0 ||
                    a->vocab_start + a->n_rows > a->n_vocab,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld rows=%lld dim=%lld vocab_start=%lld vocab=%lld", op,
                (long long)a->n_tokens, (long long)a->n_rows, (long long)a->dim, (long long)a->vocab_start,
                (long long)a->n_vocab);
    LCX_TRY(act_check(a->dt, op));
    CU_NEED(a->ids, a->n_tokens, op);
    return LCX_OK;
}

static lcx_status cu_embedding_fwd(lcx_exec *x, const lcx_embedding_args *a) {
    LCX_TRY(emb_check("embedding_fwd", x, a));
    LCX_FAIL_IF(a->w_dtype != LCX_F32 && a->w_dtype != LCX_BF16, LCX_ERR_UNSUPPORTED,
                "embedding_fwd: weight dtype %s (use F32 or BF16)", lcx_dtype_name(a->w_dtype));
    CU_NEED(a->out, a->n_tokens * a->dim, "embedding_fwd");
    CU_NEED(a->weight, a->n_rows * a->dim, "embedding_fwd");
    return launched(lcx_cuda_embedding_fwd_launch(stream_of(x), a), "embedding_fwd");
}

static lcx_status cu_embedding_bwd(lcx_exec *x, const lcx_embedding_args *a) {
    LCX_TRY(emb_check("embedding_bwd", x, a));
    CU_NEED(a->dout, a->n_tokens * a->dim, "embedding_bwd");
    CU_NEED(a->dweight, a->n_rows * a->dim, "embedding_bwd");
    return launched(lcx_cuda_embedding_bwd_launch(stream_of(x), a), "embedding_bwd");
}

static lcx_status rms_check(const char *op, lcx_exec *x, const lcx_rmsnorm_args *a) {
    CU_ARGS(x, a, op);
    LCX_FAIL_IF(a->n_rows < 0 || a->dim <= 0, LCX_ERR_INVALID, "%s: bad sizes rows=%lld dim=%lld", op,
                (long long)a->n_rows, (long long)a->dim);
    LCX_TRY(act_check(a->dt, op));
    LCX_TRY(grid_rows(a->n_rows, op));
    CU_NEED(a->x, a->n_rows, op);
    CU_NEED(a->w, a->n_rows, op);
    return LCX_OK;
}

static lcx_status cu_rmsnorm_fwd(lcx_exec *x, const lcx_rmsnorm_args *a) {
    LCX_TRY(rms_check("rmsnorm_fwd", x, a));
    CU_NEED(a->y, a->n_rows, "rmsnorm_fwd");
    return launched(lcx_cuda_rmsnorm_fwd_launch(stream_of(x), a), "rmsnorm_fwd");
}

static lcx_status cu_rmsnorm_bwd(lcx_exec *x, const lcx_rmsnorm_args *a) {
    LCX_TRY(rms_check("rmsnorm_bwd", x, a));
    CU_NEED(a->dy, a->n_rows, "rmsnorm_bwd");
    CU_NEED(a->rstd, a->n_rows, "rmsnorm_bwd");
    CU_NEED(a->dx, a->n_rows, "rmsnorm_bwd");
    CU_NEED(a->dw, a->n_rows, "rmsnorm_bwd");
    return launched(lcx_cuda_rmsnorm_bwd_launch(stream_of(x), a), "rmsnorm_bwd");
}

static lcx_status rope(const char *op, lcx_exec *x, const lcx_rope_args *a, float sign) {
    CU_ARGS(x, a, op);
    const int64_t n_tokens = a->n_tokens, n_heads = a->n_heads, head_dim = a->head_dim, rot_dim = a->rot_dim;
    LCX_FAIL_IF(n_tokens < 0 || n_heads < 0 || head_dim <= 0 || rot_dim < 0 || rot_dim > head_dim ||
                    rot_dim % 2 != 0 || a->n_pos < 0,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld heads=%lld head_dim=%lld rot_dim=%lld positions=%lld",
                op, (long long)n_tokens, (long long)n_heads, (long long)head_dim, (long long)rot_dim,
                (long long)a->n_pos);
    LCX_TRY(act_check(a->dt, op));
    CU_NEED(a->x, n_tokens * n_heads, op);
    CU_NEED(a->out, n_tokens * n_heads, op);
    CU_NEED(a->pos, n_tokens, op);
    CU_NEED(a->cos, rot_dim, op);
    CU_NEED(a->sin, rot_dim, op);
    return launched(lcx_cuda_rope_launch(stream_of(x), a, sign), op);
}
static lcx_status cu_rope_fwd(lcx_exec *x, const lcx_rope_args *a) { return rope("rope_fwd", x, a, 1.0f); }
static lcx_status cu_rope_bwd(lcx_exec *x, const lcx_rope_args *a) { return rope("rope_bwd", x, a, -1.0f); }

static lcx_status swiglu_check(const char *op, lcx_exec *x, const lcx_swiglu_args *a) {
    CU_ARGS(x, a, op);
    LCX_FAIL_IF(a->n < 0, LCX_ERR_INVALID, "%s: negative size %lld", op, (long long)a->n);
    LCX_TRY(act_check(a->dt, op));
    CU_NEED(a->gate, a->n, op);
    CU_NEED(a->up, a->n, op);
    return LCX_OK;
}

static lcx_status cu_swiglu_fwd(lcx_exec *x, const lcx_swiglu_args *a) {
    LCX_TRY(swiglu_check("swiglu_fwd", x, a));
    CU_NEED(a->h, a->n, "swiglu_fwd");
    return launched(lcx_cuda_swiglu_fwd_launch(stream_of(x), a), "swiglu_fwd");
}

static lcx_status cu_swiglu_bwd(lcx_exec *x, const lcx_swiglu_args *a) {
    LCX_TRY(swiglu_check("swiglu_bwd", x, a));
    CU_NEED(a->dh, a->n, "swiglu_bwd");
    CU_NEED(a->dgate, a->n, "swiglu_bwd");
    CU_NEED(a->dup, a->n, "swiglu_bwd");
    return launched(lcx_cuda_swiglu_bwd_launch(stream_of(x), a), "swiglu_bwd");
}

static lcx_status cu_cross_entropy(lcx_exec *x, const lcx_xent_args *a) {
    CU_ARGS(x, a, "cross_entropy");
    const int64_t n_rows = a->n_rows, vocab = a->vocab;
    LCX_FAIL_IF(n_rows < 0 || vocab <= 0, LCX_ERR_INVALID, "cross_entropy: bad sizes rows=%lld vocab=%lld",
                (long long)n_rows, (long long)vocab);
    LCX_TRY(act_check(a->dt, "cross_entropy"));
    LCX_TRY(grid_rows(n_rows, "cross_entropy"));
    CU_NEED(a->logits, n_rows, "cross_entropy");
    CU_NEED(a->targets, n_rows, "cross_entropy");
    if (a->phase != LCX_XENT_WHOLE) {
        LCX_FAIL_IF(a->dt != LCX_F32, LCX_ERR_UNSUPPORTED,
                    "cross_entropy: vocab-parallel phases take F32 logits, not %s", lcx_dtype_name(a->dt));
        LCX_FAIL_IF(a->phase != LCX_XENT_STATS && a->phase != LCX_XENT_FINISH, LCX_ERR_INVALID,
                    "cross_entropy: unknown phase %d", (int)a->phase);
        LCX_FAIL_IF(a->n_valid < 0 || a->n_valid > vocab || a->vocab_start < 0 || a->tp < 1, LCX_ERR_INVALID,
                    "cross_entropy: bad vocab shard (start %lld, %lld valid of %lld columns, tp %d)",
                    (long long)a->vocab_start, (long long)a->n_valid, (long long)vocab, a->tp);
        CU_NEED(a->stats, n_rows, "cross_entropy");
    }
    if (a->phase != LCX_XENT_STATS) {
        LCX_FAIL_IF(a->loss_sum == NULL || a->count == NULL, LCX_ERR_INVALID,
                    "cross_entropy: NULL loss_sum or count");
        LCX_TRY(lcx_exec_need(x, xent_ws(a), "cross_entropy"));
    }
    return launched(lcx_cuda_cross_entropy_launch(stream_of(x), a, x->scratch), "cross_entropy");
}

static lcx_status cu_adamw(lcx_exec *x, const lcx_adamw_args *a) {
    CU_ARGS(x, a, "adamw");
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0 || a->step < 1, LCX_ERR_INVALID, "adamw: bad size %lld or step %lld (steps count from 1)",
                (long long)n, (long long)a->step);
    LCX_FAIL_IF(!(a->beta1 >= 0.0 && a->beta1 < 1.0 && a->beta2 >= 0.0 && a->beta2 < 1.0 && a->eps >= 0.0),
                LCX_ERR_INVALID, "adamw: betas must be in [0, 1) and eps >= 0 (beta1=%g beta2=%g eps=%g)", a->beta1,
                a->beta2, a->eps);
    CU_NEED(a->param, n, "adamw");
    CU_NEED(a->grad, n, "adamw");
    CU_NEED(a->m, n, "adamw");
    CU_NEED(a->v, n, "adamw");
    /* the constants exactly as kernels/cpu/cpu_adamw.c forms them */
    const double bc1 = 1.0 - pow(a->beta1, (double)a->step), bc2 = 1.0 - pow(a->beta2, (double)a->step);
    const float w1 = (float)(1.0 - a->beta1);
    const lcx_cuda_adamw_consts k = {
        .gs = (float)a->grad_scale,
        .decay = (float)(1.0 - a->lr * a->weight_decay),
        .w1 = w1,
        .b2 = (float)a->beta2,
        .w2 = (float)(1.0 - a->beta2),
        .neg_step = (float)(-(a->lr / bc1)),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = (float)a->eps,
        .lerp_small = fabsf(w1) < 0.5f,
    };
    return launched(lcx_cuda_adamw_launch(stream_of(x), a, &k), "adamw");
}

static lcx_status cu_attention_merge(lcx_exec *x, const lcx_attn_merge_args *a) {
    CU_ARGS(x, a, "attention_merge");
    const int64_t n_rows = a->n_rows, n_heads = a->n_heads, head_dim = a->head_dim;
    LCX_FAIL_IF(n_rows < 0 || n_heads <= 0 || head_dim <= 0, LCX_ERR_INVALID,
                "attention_merge: bad sizes rows=%lld heads=%lld head_dim=%lld", (long long)n_rows,
                (long long)n_heads, (long long)head_dim);
    LCX_TRY(act_check(a->dt, "attention_merge"));
    CU_NEED(a->o_acc, n_rows, "attention_merge");
    CU_NEED(a->lse_acc, n_rows, "attention_merge");
    CU_NEED(a->o_part, n_rows, "attention_merge");
    CU_NEED(a->lse_part, n_rows, "attention_merge");
    return launched(lcx_cuda_attention_merge_launch(stream_of(x), a), "attention_merge");
}

/* ---- the table ---------------------------------------------------------------------------------------------- */

static const lcx_backend lcx_cuda_backend_table = {
    .name = "cuda",
    .available = cu_available,
    .exec_init = cu_exec_init,
    .exec_destroy = cu_exec_destroy,
    .sync = cu_sync,
    .event_create = cu_event_create,
    .event_free = cu_event_free,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_sync = cu_event_sync,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy_h2d = cu_copy_h2d,
    .copy_d2h = cu_copy_d2h,
    .copy_d2d = cu_copy_d2d,
    .zero = cu_zero,
    .workspace = cu_workspace,
    .matmul = cu_matmul,
    .embedding_fwd = cu_embedding_fwd,
    .embedding_bwd = cu_embedding_bwd,
    .rmsnorm_fwd = cu_rmsnorm_fwd,
    .rmsnorm_bwd = cu_rmsnorm_bwd,
    .rope_fwd = cu_rope_fwd,
    .rope_bwd = cu_rope_bwd,
    .attention_fwd = cu_attention_fwd,
    .attention_bwd = cu_attention_bwd,
    .attention_merge = cu_attention_merge,
    .swiglu_fwd = cu_swiglu_fwd,
    .swiglu_bwd = cu_swiglu_bwd,
    .cross_entropy = cu_cross_entropy,
    .adamw = cu_adamw,
    .sqnorm = cu_sqnorm,
    .cast = cu_cast,
    .add = cu_add,
    .scale = cu_scale,
    .axpy = cu_axpy,
};

const lcx_backend *lcx_backend_cuda_partial(void) { return &lcx_cuda_backend_table; }
