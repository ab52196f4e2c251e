/* cuda_backend: the CUDA backend's table (C11 host code): contexts (one cudaStream_t per lcx_exec), events,
 * memory, the workspace query, and the ops: after the shared argument checks (kernels/backend_check.c) each adds
 * CUDA's own limits (grid sizes) and its launcher (cuda_ops.h) queues the kernels. Errors are one line with
 * cudaGetErrorString; nothing here prints.
 *
 * Status (docs/cuda.md): on an H200 every op case passed but one matmul case, whose fix awaits the next GPU run
 * (code written since that run has not run on a GPU); matmul is cuda_matmul.c (cuBLASLt), attention
 * cuda_attention_fwd*.cu / cuda_attention_bwd*.cu (flash-style). kernels/backend.c registers the table as "cuda"
 * (lcx_backend_get, `--backend cuda`). */
#include <math.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/backend_check.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_runtime_info.h"
#include "kernels/mem_ledger.h"

/* ---- errors -------------------------------------------------------------------------------------------------- */

/* LCX_OK, or LCX_ERR_CUDA "op: what: CUDA's message" (the non-sticky error is cleared). */
static lcx_status cuda_check(cudaError_t e, const char *op, const char *what) {
    if (e == cudaSuccess) return LCX_OK;
    (void)cudaGetLastError();
    return lcx_fail(LCX_ERR_CUDA, "%s: %s: %s", op, what, cudaGetErrorString(e));
}
static lcx_status launched(cudaError_t e, const char *op) { return cuda_check(e, op, "kernel launch"); }

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
    x->handles = NULL;
    lcx_status st = lcx_cuda_handles_create(x); /* cuBLASLt and the matmul plans */
    if (st != LCX_OK) {
        (void)cudaStreamDestroy(s);
        x->queue = NULL;
    }
    return st;
}

static void cu_exec_destroy(lcx_exec *x) {
    lcx_cuda_handles_destroy(x);
    if (!x || !x->queue) return;
    (void)cudaStreamDestroy(stream_of(x));
    x->queue = NULL;
}

static lcx_status cu_sync(lcx_exec *x) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "sync: NULL exec");
    return cuda_check(cudaStreamSynchronize(stream_of(x)), "sync", "cudaStreamSynchronize");
}

/* An lcx_event is a cudaEvent_t (a pointer to CUDA's own event struct), without timing unless asked. */
static lcx_status cu_event_create(lcx_event **out, unsigned flags) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "event_create: 'out' is NULL");
    LCX_FAIL_IF(flags & ~LCX_EVENT_TIMED, LCX_ERR_INVALID, "event_create: unknown flags %#x", flags);
    *out = NULL;
    cudaEvent_t e = NULL;
    const unsigned cf = flags & LCX_EVENT_TIMED ? cudaEventDefault : cudaEventDisableTiming;
    LCX_TRY(cuda_check(cudaEventCreateWithFlags(&e, cf), "event_create", "cudaEventCreate"));
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
/* cudaEventElapsedTime: milliseconds at about 0.5 us resolution; an untimed or unrecorded event is
 * cudaErrorInvalidResourceHandle, an incomplete one cudaErrorNotReady, each named in the message. */
static lcx_status cu_event_elapsed(lcx_event *a, lcx_event *b, double *seconds) {
    LCX_FAIL_IF(a == NULL || b == NULL || seconds == NULL, LCX_ERR_INVALID, "event_elapsed: NULL argument");
    float ms = 0;
    const cudaError_t e = cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b);
    LCX_FAIL_IF(e == cudaErrorInvalidResourceHandle, LCX_ERR_INVALID,
                "event_elapsed: an event created without LCX_EVENT_TIMED, or never recorded");
    LCX_FAIL_IF(e == cudaErrorNotReady, LCX_ERR_INVALID, "event_elapsed: an event not yet complete (event_sync first)");
    LCX_TRY(cuda_check(e, "event_elapsed", "cudaEventElapsedTime"));
    *seconds = ms * 1e-3;
    return LCX_OK;
}

/* ---- memory -------------------------------------------------------------------------------------------------- */

/* cudaMalloc's pointers are aligned to at least 256 bytes; 0 bytes allocates 64 so that the pointer is valid. */
static lcx_mem_ledger ledger = LCX_MEM_LEDGER_INIT;

static lcx_status cu_alloc(size_t bytes, void **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "alloc: 'out' is NULL");
    *out = NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 64);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return lcx_fail(LCX_ERR_OOM, "alloc: cudaMalloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
    }
    lcx_status st = lcx_mem_ledger_add(&ledger, p, bytes ? bytes : 64);
    if (st != LCX_OK) {
        (void)cudaFree(p);
        return st;
    }
    *out = p;
    return LCX_OK;
}

static void cu_free(void *p) {
    if (!p) return;
    lcx_mem_ledger_remove(&ledger, p);
    (void)cudaFree(p);
}

static void cu_mem_stats(size_t *in_use, size_t *peak) { lcx_mem_ledger_stats(&ledger, in_use, peak); }
static void cu_mem_reset_peak(void) { lcx_mem_ledger_reset_peak(&ledger); }
static size_t cu_device_used(void) {
    size_t free_b = 0, total_b = 0;
    return cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && total_b >= free_b ? total_b - free_b : 0;
}

static lcx_status copy_args(const char *op, lcx_exec *x, void *dst, const void *src, size_t bytes) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "%s: NULL exec", op);
    LCX_FAIL_IF(bytes > 0 && (dst == NULL || src == NULL), LCX_ERR_INVALID, "%s: NULL pointer with %zu bytes", op,
                bytes);
    return LCX_OK;
}

/* Queues a copy of `kind` on x's stream; with `wait`, returns only when the stream has done it (and all before). */
static lcx_status queue_copy(const char *op, lcx_exec *x, void *dst, const void *src, size_t bytes,
                             enum cudaMemcpyKind kind, int wait) {
    LCX_TRY(copy_args(op, x, dst, src, bytes));
    if (bytes == 0) return LCX_OK;
    LCX_TRY(cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, stream_of(x)), op, "cudaMemcpyAsync"));
    return wait ? cuda_check(cudaStreamSynchronize(stream_of(x)), op, "cudaStreamSynchronize") : LCX_OK;
}

/* The host buffer may be reused as soon as this returns: the copy is queued and waited for (first version: a
 * pinned staging buffer would let it return earlier). */
static lcx_status cu_copy_h2d(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    return queue_copy("copy_h2d", x, dst, src, bytes, cudaMemcpyHostToDevice, 1);
}
/* Waits for the queue's earlier work, then returns with the host buffer filled. */
static lcx_status cu_copy_d2h(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    return queue_copy("copy_d2h", x, dst, src, bytes, cudaMemcpyDeviceToHost, 1);
}
static lcx_status cu_copy_d2d(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    return queue_copy("copy_d2d", x, dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
}
/* Asynchronous copies to and from pinned host memory (cu_host_alloc): queued only. */
static lcx_status cu_copy_d2h_async(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    return queue_copy("copy_d2h_async", x, dst, src, bytes, cudaMemcpyDeviceToHost, 0);
}
static lcx_status cu_copy_h2d_async(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    return queue_copy("copy_h2d_async", x, dst, src, bytes, cudaMemcpyHostToDevice, 0);
}

/* Pinned (page-locked) host memory: what lets cudaMemcpyAsync overlap with the host and with compute. */
static lcx_status cu_host_alloc(size_t bytes, void **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "host_alloc: 'out' is NULL");
    *out = NULL;
    cudaError_t e = cudaMallocHost(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = NULL;
        return lcx_fail(LCX_ERR_OOM, "host_alloc: %zu bytes of pinned host memory: %s", bytes, cudaGetErrorString(e));
    }
    return LCX_OK;
}
static void cu_host_free(void *p) {
    if (p) (void)cudaFreeHost(p);
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
    case LCX_OP_MATMUL: return lcx_cuda_matmul_ws(args);
    case LCX_OP_ATTENTION_BWD: return lcx_cuda_attention_bwd_ws(args);
    default: return 0; /* the other ops need no scratch */
    }
}

/* ---- attention (cuda_attention_fwd.cu, cuda_attention_bwd.cu) -------------------------------------------------- */

/* The kernels' own limits (the shared checks ran before): a lane's head dims in registers, the heads in the
 * grid's y dimension. */
static lcx_status attn_limits(const char *op, const lcx_attn_args *a) {
    LCX_FAIL_IF(a->head_dim > LCX_CUDA_ATTN_MAX_HEAD_DIM || a->n_heads > 65535, LCX_ERR_UNSUPPORTED,
                "%s: head_dim %lld, %lld heads (at most %d and 65535 on CUDA)", op, (long long)a->head_dim,
                (long long)a->n_heads, LCX_CUDA_ATTN_MAX_HEAD_DIM);
    return LCX_OK;
}

static lcx_status cu_attention_fwd(lcx_exec *x, const lcx_attn_args *a) {
    LCX_TRY(attn_limits("attention_fwd", a));
    return launched(lcx_cuda_attention_fwd_launch(stream_of(x), a), "attention_fwd");
}

static lcx_status cu_attention_bwd(lcx_exec *x, const lcx_attn_args *a) {
    LCX_TRY(attn_limits("attention_bwd", a));
    return launched(lcx_cuda_attention_bwd_launch(stream_of(x), a, x->scratch), "attention_bwd");
}

static lcx_status cu_matmul(lcx_exec *x, const lcx_matmul_args *a) { return lcx_cuda_matmul(x, a); }

/* ---- ops (their arguments are checked in front of the table, kernels/backend_check.c) --------------------------- */

static lcx_status cu_cast(lcx_exec *x, const lcx_cast_args *a) {
    return launched(lcx_cuda_cast_launch(stream_of(x), a), "cast");
}

static lcx_status cu_add(lcx_exec *x, const lcx_elementwise_args *a) {
    return launched(lcx_cuda_elementwise_launch(stream_of(x), 0, a), "add");
}
static lcx_status cu_scale(lcx_exec *x, const lcx_elementwise_args *a) {
    return launched(lcx_cuda_elementwise_launch(stream_of(x), 1, a), "scale");
}
static lcx_status cu_axpy(lcx_exec *x, const lcx_elementwise_args *a) {
    return launched(lcx_cuda_elementwise_launch(stream_of(x), 2, a), "axpy");
}

static lcx_status cu_sqnorm(lcx_exec *x, const lcx_sqnorm_args *a) {
    LCX_TRY(grid_rows((a->n + LCX_CUDA_NORM_BLOCK - 1) / LCX_CUDA_NORM_BLOCK, "sqnorm"));
    return launched(lcx_cuda_sqnorm_launch(stream_of(x), a, x->scratch), "sqnorm");
}

static lcx_status cu_embedding_fwd(lcx_exec *x, const lcx_embedding_args *a) {
    return launched(lcx_cuda_embedding_fwd_launch(stream_of(x), a), "embedding_fwd");
}
static lcx_status cu_embedding_bwd(lcx_exec *x, const lcx_embedding_args *a) {
    return launched(lcx_cuda_embedding_bwd_launch(stream_of(x), a), "embedding_bwd");
}

static lcx_status cu_rmsnorm_fwd(lcx_exec *x, const lcx_rmsnorm_args *a) {
    LCX_TRY(grid_rows(a->n_rows, "rmsnorm_fwd"));
    return launched(lcx_cuda_rmsnorm_fwd_launch(stream_of(x), a), "rmsnorm_fwd");
}
static lcx_status cu_rmsnorm_bwd(lcx_exec *x, const lcx_rmsnorm_args *a) {
    LCX_TRY(grid_rows(a->n_rows, "rmsnorm_bwd"));
    return launched(lcx_cuda_rmsnorm_bwd_launch(stream_of(x), a), "rmsnorm_bwd");
}

static lcx_status cu_rope_fwd(lcx_exec *x, const lcx_rope_args *a) {
    return launched(lcx_cuda_rope_launch(stream_of(x), a, 1.0f), "rope_fwd");
}
static lcx_status cu_rope_bwd(lcx_exec *x, const lcx_rope_args *a) {
    return launched(lcx_cuda_rope_launch(stream_of(x), a, -1.0f), "rope_bwd");
}

static lcx_status cu_swiglu_fwd(lcx_exec *x, const lcx_swiglu_args *a) {
    return launched(lcx_cuda_swiglu_fwd_launch(stream_of(x), a), "swiglu_fwd");
}
static lcx_status cu_swiglu_bwd(lcx_exec *x, const lcx_swiglu_args *a) {
    return launched(lcx_cuda_swiglu_bwd_launch(stream_of(x), a), "swiglu_bwd");
}

static lcx_status cu_cross_entropy(lcx_exec *x, const lcx_xent_args *a) {
    LCX_TRY(grid_rows(a->n_rows, "cross_entropy"));
    return launched(lcx_cuda_cross_entropy_launch(stream_of(x), a, x->scratch), "cross_entropy");
}

static lcx_status cu_adamw(lcx_exec *x, const lcx_adamw_args *a) {
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
    return launched(lcx_cuda_attention_merge_launch(stream_of(x), a), "attention_merge");
}

/* ---- the table ---------------------------------------------------------------------------------------------- */

/* The table's ops: the shared argument checks (kernels/backend_check.c), then the op. */
LCX_CHECKED_OPS(cu_)

/* Registered in kernels/backend.c. */
const lcx_backend lcx_cuda_backend_table = {
    .name = "cuda",
    .available = cu_available,
    .exec_init = cu_exec_init,
    .exec_destroy = cu_exec_destroy,
    .sync = cu_sync,
    .event_create = cu_event_create,
    .event_elapsed = cu_event_elapsed,
    .mem_stats = cu_mem_stats,
    .mem_reset_peak = cu_mem_reset_peak,
    .device_used = cu_device_used,
    .event_free = cu_event_free,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_sync = cu_event_sync,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy_h2d = cu_copy_h2d,
    .copy_d2h = cu_copy_d2h,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .copy_d2h_async = cu_copy_d2h_async,
    .copy_h2d_async = cu_copy_h2d_async,
    .copy_d2d = cu_copy_d2d,
    .zero = cu_zero,
    .workspace = cu_workspace,
    LCX_CHECKED_ENTRIES,
};
