/* cuda_matmul: C = alpha op(A) op(B) + beta C (kernels/backend.h) through cuBLASLt, float32 accumulation:
 * bf16 A and B (C bf16 or f32) and f32 A, B and C run on cuBLASLt with CUBLAS_COMPUTE_32F -- not
 * CUBLAS_COMPUTE_32F_FAST_TF32, so f32 products keep float32's 24-bit mantissa and match the CPU's sgemm within the
 * op tests' float32 tolerance. Everything else runs on the tiled kernel of cuda_gemm_tiled.cu (cuda_ops.h):
 *  - dtype mixes cuBLASLt has no kernel for (f32 with bf16 operands; a bf16 C from f32 operands),
 *  - k = 0 (C = beta C), a C shared by every batch entry (stride_c 0: the entries update it one after the other),
 *  - shapes whose leading dimensions or pointer alignments cuBLASLt's heuristic offers no algorithm for. The
 *    heuristic is asked with the call's real alignments (MIN_ALIGNMENT_*_BYTES, up to 16 bytes: a bf16 tensor
 *    at an odd element offset is 2-byte aligned), and "no algorithm" is remembered like any other answer. A
 *    failing cublasLtMatmul itself is an error (LCX_ERR_CUDA), never a silent second path.
 *
 * Row-major operands: cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is, byte for byte,
 * the column-major [c, r] matrix with leading dimension ld -- its transpose. So the row-major C = op(A) op(B) is
 * computed as the column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B and its "B" is our A, with the
 * same transpose flags, M = n, N = m, K = k, and no data moves.
 *
 * Plans: the descriptors (operation, three layouts) and the heuristic's first algorithm depend on the shape,
 * dtypes, strides and alignments only, so each exec caches them per such key (PLANS slots, the oldest replaced
 * when full); a training step has a dozen shapes. Each cuBLASLt call takes LCX_CUDA_MATMUL_WS bytes from the
 * front of the exec's arena, which the workspace query declares, starting at the arena's first 256-byte boundary
 * (cuBLASLt refuses a workspace pointer off that alignment; the query declares the 255 bytes it may skip). The
 * contract has no bias, so there is no epilogue to fuse (beta = 1 accumulates in the GEMM itself). */
#include "kernels/cuda/cuda_matmul.h"

#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "kernels/backend_check.h"
#include "kernels/cuda/cuda_ops.h"

enum { PLANS = 64, MAX_ALIGN = 16 };

/* What a plan depends on. Built with memset first, so that memcmp compares no stray padding. */
typedef struct plan_key {
    int64_t m, n, k, batch, lda, ldb, ldc, stride_a, stride_b, stride_c;
    int32_t trans_a, trans_b;
    int32_t a_dtype, b_dtype, c_dtype;
    uint32_t align_a, align_b, align_c;
} plan_key;

typedef struct plan {
    plan_key key;
    int used;
    int lt;                    /* 1: cuBLASLt runs it with `algo`; 0: no algorithm, the tiled kernel runs it */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lay_b, lay_a, lay_c; /* cuBLASLt's A, B and C = D: our B, A and C (see above) */
    cublasLtMatmulAlgo_t algo;
} plan;

typedef struct lcx_cuda_handles {
    cublasLtHandle_t lt;
    plan plans[PLANS];
    int next; /* the slot replaced next once every slot is used */
} lcx_cuda_handles;

static lcx_status lt_check(cublasStatus_t st, const char *op, const char *what) {
    if (st == CUBLAS_STATUS_SUCCESS) return LCX_OK;
    return lcx_fail(LCX_ERR_CUDA, "%s: %s: %s", op, what, cublasLtGetStatusString(st));
}

static void plan_clear(plan *p) {
    if (p->lay_c) (void)cublasLtMatrixLayoutDestroy(p->lay_c);
    if (p->lay_a) (void)cublasLtMatrixLayoutDestroy(p->lay_a);
    if (p->lay_b) (void)cublasLtMatrixLayoutDestroy(p->lay_b);
    if (p->op) (void)cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

lcx_status lcx_cuda_handles_create(lcx_exec *x) {
    lcx_cuda_handles *h = calloc(1, sizeof *h);
    LCX_FAIL_IF(h == NULL, LCX_ERR_OOM, "exec_init: out of host memory for the cuBLASLt plans");
    lcx_status st = lt_check(cublasLtCreate(&h->lt), "exec_init", "cublasLtCreate");
    if (st != LCX_OK) {
        free(h);
        return st;
    }
    x->handles = h;
    return LCX_OK;
}

void lcx_cuda_handles_destroy(lcx_exec *x) {
    lcx_cuda_handles *h = x ? x->handles : NULL;
    if (!h) return;
    for (int i = 0; i < PLANS; i++) plan_clear(&h->plans[i]);
    (void)cublasLtDestroy(h->lt);
    free(h);
    x->handles = NULL;
}

/* Whether cuBLASLt may run these sizes and dtypes (pointers aside: they only choose the algorithm). */
static int lt_may_run(const lcx_matmul_args *g) {
    const int bf16_ab = g->a_dtype == LCX_BF16 && g->b_dtype == LCX_BF16;
    const int f32_all = g->a_dtype == LCX_F32 && g->b_dtype == LCX_F32 && g->c_dtype == LCX_F32;
    return (bf16_ab || f32_all) && g->m > 0 && g->n > 0 && g->k > 0 && g->batch <= INT32_MAX &&
           g->stride_a >= 0 && g->stride_b >= 0 && g->stride_c >= 0 && !(g->batch > 1 && g->stride_c == 0);
}

/* cuBLASLt's workspace pointer alignment: "must be aligned to at least a multiple of 256 bytes". */
#define WS_ALIGN ((uintptr_t)256)

/* Two cases run through cuBLASLt in blocks rather than in one call (matmul_blocked below):
 *  - a bf16 C that beta adds to: cuBLASLt would round alpha op(A) op(B) to bf16 before adding beta C (measured on
 *    an H200), so the product goes to a float32 staging behind the workspace (row blocks of C within
 *    LCX_CUDA_MATMUL_STAGE) and a kernel adds beta C with one rounding, as the CPU does;
 *  - f32 x bf16 (one operand of each): cuBLASLt has no such kernel, so the f32 operand enters as three bf16 terms
 *    whose sum is x to 2^-24 (t0 = bf16(x), t1 = bf16(x - t0), t2 = bf16(x - t0 - t1): float32's own
 *    rounding, so the result is float32-exact in the op tests' sense), three bf16 GEMMs accumulating in float32
 *    (two terms, 2^-16, were not enough: a 4500-long reduction came within a factor 2 of the f32 allowance), into C
 *    (f32) or the staging (bf16 C). Blocks of at most MIX_ROWS rows of C by kb of the reduction (the three terms
 *    within LCX_CUDA_MATMUL_SPLIT bytes; kb a multiple of 8 below k). The loss chunk's GEMMs are this case
 *    (float32 dlogits against bf16 weights or activations), which the tiled kernel ran at 5.5 TF/s on an H200. */
enum { MIX_ROWS = 4096, MIX_K = 2048 };
typedef struct blocks {
    int split;           /* the f32 operand split into bf16 terms: 0 none, 1 A, 2 B */
    int stage;           /* C goes through the float32 staging */
    int64_t rb, kb;      /* rows of C and reduction indices per block; rb = 0: blocks do not fit (tiled kernel) */
    size_t split_bytes, stage_bytes; /* multiples of WS_ALIGN, behind the cuBLASLt workspace */
} blocks;

static size_t ws_round(size_t bytes) { return (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

/* Whether g runs in blocks, and their sizes. */
static int blocks_of(const lcx_matmul_args *g, blocks *z) {
    memset(z, 0, sizeof *z);
    const int fa = g->a_dtype == LCX_F32, fb = g->b_dtype == LCX_F32;
    if (fa != fb) { /* mixed: any sizes and strides cuBLASLt's bf16 GEMMs take */
        if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0 ||
            (g->batch > 1 && g->stride_c == 0))
            return 0;
        z->split = fa ? 1 : 2;
    } else if (!(lt_may_run(g) && g->c_dtype == LCX_BF16 && g->beta != 0.0f)) {
        return 0;
    }
    z->stage = g->c_dtype == LCX_BF16;
    int64_t rb = z->split && g->m > MIX_ROWS ? MIX_ROWS : g->m;
    if (z->stage && (int64_t)(LCX_CUDA_MATMUL_STAGE / 4) / g->n < rb) rb = (int64_t)(LCX_CUDA_MATMUL_STAGE / 4) / g->n;
    int64_t kb = g->k;
    const int64_t term_k = 2 * (z->split == 1 ? rb : g->n); /* bytes of one bf16 term per reduction index */
    if (z->split) {
        kb = (int64_t)(LCX_CUDA_MATMUL_SPLIT / 3 / (size_t)term_k);
        if (kb > MIX_K) kb = MIX_K;
        if (kb >= g->k) kb = g->k;
        else kb -= kb % 8;
    }
    if (rb < 1 || kb < 1) return 1;
    z->rb = rb, z->kb = kb;
    z->split_bytes = z->split ? 3 * ws_round((size_t)(term_k * kb)) : 0; /* each term 256-aligned */
    z->stage_bytes = z->stage ? ws_round((size_t)(rb * g->n) * 4) : 0;
    return 1;
}

size_t lcx_cuda_matmul_ws(const lcx_matmul_args *a) {
    const lcx_matmul_args g = lcx_matmul_resolved(a);
    blocks z;
    if (blocks_of(&g, &z)) return z.rb ? LCX_CUDA_MATMUL_WS + (WS_ALIGN - 1) + z.split_bytes + z.stage_bytes : 0;
    return lt_may_run(&g) ? LCX_CUDA_MATMUL_WS + (WS_ALIGN - 1) : 0;
}

/* The alignment (bytes, a power of two up to MAX_ALIGN) of every batch entry's start: the pointer's and, with
 * a batch, the stride's. */
static uint32_t align_of(const void *p, int64_t batch, int64_t stride, size_t elem) {
    uint64_t v = (uint64_t)(uintptr_t)p;
    if (batch > 1) v |= (uint64_t)stride * elem;
    uint32_t al = MAX_ALIGN;
    while (al > 1 && (v & (al - 1))) al >>= 1;
    return al;
}

static plan_key key_of(const lcx_matmul_args *g) {
    plan_key k;
    memset(&k, 0, sizeof k);
    k.m = g->m, k.n = g->n, k.k = g->k, k.batch = g->batch;
    k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
    k.stride_a = g->stride_a, k.stride_b = g->stride_b, k.stride_c = g->stride_c;
    k.trans_a = g->trans_a != 0, k.trans_b = g->trans_b != 0;
    k.a_dtype = (int32_t)g->a_dtype, k.b_dtype = (int32_t)g->b_dtype, k.c_dtype = (int32_t)g->c_dtype;
    k.align_a = align_of(g->a, g->batch, g->stride_a, lcx_act_size(g->a_dtype));
    k.align_b = align_of(g->b, g->batch, g->stride_b, lcx_act_size(g->b_dtype));
    k.align_c = align_of(g->c, g->batch, g->stride_c, lcx_act_size(g->c_dtype));
    return k;
}

static cudaDataType_t cuda_type(lcx_dtype dt) { return dt == LCX_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* A column-major [rows, cols] layout with leading dimension ld, strided over the batch. */
static lcx_status layout(cublasLtMatrixLayout_t *l, lcx_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                         int64_t batch, int64_t stride) {
    LCX_TRY(lt_check(cublasLtMatrixLayoutCreate(l, cuda_type(dt), (uint64_t)rows, (uint64_t)cols, ld), "matmul",
                     "cublasLtMatrixLayoutCreate"));
    if (batch == 1) return LCX_OK;
    const int32_t count = (int32_t)batch;
    LCX_TRY(lt_check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                     "matmul", "cublasLtMatrixLayoutSetAttribute"));
    return lt_check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                     sizeof stride),
                    "matmul", "cublasLtMatrixLayoutSetAttribute");
}

static lcx_status pref_u32(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, uint32_t v) {
    return lt_check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof v), "matmul",
                    "cublasLtMatmulPreferenceSetAttribute");
}

/* The heuristic's first algorithm for the plan's descriptors, or p->lt = 0 when it has none for them. */
static lcx_status choose_algo(cublasLtHandle_t lt, plan *p) {
    cublasLtMatmulPreference_t pref = NULL;
    LCX_TRY(lt_check(cublasLtMatmulPreferenceCreate(&pref), "matmul", "cublasLtMatmulPreferenceCreate"));
    const uint64_t ws = LCX_CUDA_MATMUL_WS;
    lcx_status st = lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                                  sizeof ws),
                             "matmul", "cublasLtMatmulPreferenceSetAttribute");
    if (st == LCX_OK) st = pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p->key.align_b);
    if (st == LCX_OK) st = pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p->key.align_a);
    if (st == LCX_OK) st = pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p->key.align_c);
    if (st == LCX_OK) st = pref_u32(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p->key.align_c);
    /* Split-K only with its partial sums in the compute type (f32, in the workspace): the in-place and output-type
     * schemes round every partial to a bf16 C (the first GPU run: 0.0018 off a -0.0021 result at K = 128). */
    if (st == LCX_OK)
        st = pref_u32(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
    if (st == LCX_OK) {
        cublasLtMatmulHeuristicResult_t res;
        memset(&res, 0, sizeof res);
        int found = 0;
        cublasStatus_t cs = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->lay_b, p->lay_a, p->lay_c, p->lay_c, pref, 1,
                                                           &res, &found);
        if (cs == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
            p->algo = res.algo;
            p->lt = 1;
        } else if (cs == CUBLAS_STATUS_SUCCESS || cs == CUBLAS_STATUS_NOT_SUPPORTED ||
                   cs == CUBLAS_STATUS_INVALID_VALUE) {
            p->lt = 0; /* no algorithm for this shape or alignment: the tiled kernel */
        } else {
            st = lt_check(cs, "matmul", "cublasLtMatmulAlgoGetHeuristic");
        }
    }
    (void)cublasLtMatmulPreferenceDestroy(pref);
    return st;
}

/* Fill p (cleared) for g: the operation, the three layouts in cuBLASLt's order, the algorithm. */
static lcx_status plan_build(cublasLtHandle_t lt, const lcx_matmul_args *g, const plan_key *key, plan *p) {
    p->key = *key;
    const cublasOperation_t op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    LCX_TRY(lt_check(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul",
                     "cublasLtMatmulDescCreate"));
    LCX_TRY(lt_check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b), "matmul",
                     "cublasLtMatmulDescSetAttribute"));
    LCX_TRY(lt_check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a), "matmul",
                     "cublasLtMatmulDescSetAttribute"));
    /* cuBLASLt's A = our B: op_b(it) is [n, k]; stored column-major [n, k] (N) or [k, n] (T) */
    LCX_TRY(layout(&p->lay_b, g->b_dtype, g->trans_b ? g->k : g->n, g->trans_b ? g->n : g->k, g->ldb, g->batch,
                   g->stride_b));
    /* cuBLASLt's B = our A: op_a(it) is [k, m]; stored column-major [k, m] (N) or [m, k] (T) */
    LCX_TRY(layout(&p->lay_a, g->a_dtype, g->trans_a ? g->m : g->k, g->trans_a ? g->k : g->m, g->lda, g->batch,
                   g->stride_a));
    LCX_TRY(layout(&p->lay_c, g->c_dtype, g->n, g->m, g->ldc, g->batch, g->stride_c));
    LCX_TRY(choose_algo(lt, p));
    p->used = 1;
    return LCX_OK;
}

/* The cached plan for g, built (into a free slot, or the oldest one) on first use. */
static lcx_status plan_get(lcx_cuda_handles *h, const lcx_matmul_args *g, plan **out) {
    const plan_key key = key_of(g);
    int slot = -1;
    for (int i = 0; i < PLANS; i++) {
        if (h->plans[i].used && memcmp(&h->plans[i].key, &key, sizeof key) == 0) {
            *out = &h->plans[i];
            return LCX_OK;
        }
        if (slot < 0 && !h->plans[i].used) slot = i;
    }
    if (slot < 0) {
        slot = h->next;
        h->next = (h->next + 1) % PLANS;
    }
    plan *p = &h->plans[slot];
    plan_clear(p); /* a replaced plan's last call was queued already: cuBLASLt reads descriptors when called */
    lcx_status st = plan_build(h->lt, g, &key, p);
    if (st != LCX_OK) {
        plan_clear(p);
        return st;
    }
    *out = p;
    return LCX_OK;
}

static void *ws_aligned(void *arena) {
    return (void *)(((uintptr_t)arena + WS_ALIGN - 1) & ~(WS_ALIGN - 1));
}

/* One cuBLASLt GEMM of checked, resolved arguments; *ran = 0 (nothing queued) when it has no algorithm. */
static lcx_status lt_run(lcx_exec *x, const lcx_matmul_args *g, int *ran) {
    lcx_cuda_handles *h = x->handles;
    plan *p = NULL;
    LCX_TRY(plan_get(h, g, &p));
    *ran = p->lt;
    if (!p->lt) return LCX_OK;
    return lt_check(cublasLtMatmul(h->lt, p->op, &g->alpha, g->b, p->lay_b, g->a, p->lay_a, &g->beta, g->c, p->lay_c,
                                   g->c, p->lay_c, &p->algo, ws_aligned(x->scratch), LCX_CUDA_MATMUL_WS,
                                   (cudaStream_t)x->queue),
                    "matmul", "cublasLtMatmul");
}

/* Elements between the split terms: each starts 256-byte aligned, as cuBLASLt's fastest kernels want. */
static int64_t term_stride(int64_t elems) { return (elems + 127) / 128 * 128; }

static lcx_status launched(cudaError_t e) {
    if (e == cudaSuccess) return LCX_OK;
    (void)cudaGetLastError();
    return lcx_fail(LCX_ERR_CUDA, "matmul: kernel launch: %s", cudaGetErrorString(e));
}

/* The blocked cases (blocks_of above): per batch entry, block of rows of C and block of the reduction, the f32
 * operand's block (if any) is split into three bf16 terms behind the cuBLASLt workspace, and bf16 GEMMs (one per
 * term) add alpha op(A) op(B) into C (float32: the first block with the caller's beta, then 1) or into the float32
 * staging, which a kernel then adds to the bf16 C with one rounding. *done = 0 when cuBLASLt has no algorithm for
 * the first GEMM (nothing written: the tiled kernel runs the call). */
static lcx_status matmul_blocked(lcx_exec *x, const lcx_matmul_args *g, const blocks *z, int *done) {
    cudaStream_t s = (cudaStream_t)x->queue;
    char *ws = (char *)ws_aligned(x->scratch) + LCX_CUDA_MATMUL_WS;
    uint16_t *terms = (uint16_t *)ws;
    float *stage = (float *)(ws + z->split_bytes);
    const size_t ea = lcx_act_size(g->a_dtype), eb = lcx_act_size(g->b_dtype), ec = lcx_act_size(g->c_dtype);
    const int n_terms = z->split ? 3 : 1;
    *done = 0;
    for (int64_t bi = 0; bi < g->batch; bi++)
        for (int64_t r0 = 0; r0 < g->m; r0 += z->rb) {
            const int64_t rows = g->m - r0 < z->rb ? g->m - r0 : z->rb;
            char *c = (char *)g->c + (size_t)(bi * g->stride_c + r0 * g->ldc) * ec;
            for (int64_t k0 = 0; k0 < g->k; k0 += z->kb) {
                const int64_t kk = g->k - k0 < z->kb ? g->k - k0 : z->kb;
                /* op(A)[r0.., k0..] and op(B)[k0.., all n] of batch entry bi */
                const char *a = (const char *)g->a +
                                (size_t)(bi * g->stride_a + (g->trans_a ? k0 * g->lda + r0 : r0 * g->lda + k0)) * ea;
                const char *b = (const char *)g->b + (size_t)(bi * g->stride_b + (g->trans_b ? k0 : k0 * g->ldb)) * eb;
                lcx_matmul_args blk = *g;
                blk.m = rows, blk.k = kk, blk.batch = 1, blk.stride_a = blk.stride_b = blk.stride_c = 0;
                blk.a = a, blk.b = b;
                blk.c_dtype = LCX_F32;
                blk.c = z->stage ? (void *)stage : (void *)c;
                blk.ldc = z->stage ? g->n : g->ldc;
                blk.beta = k0 > 0 ? 1.0f : z->stage ? 0.0f : g->beta;
                int64_t per_term = 0;
                if (z->split == 1) { /* op(A)'s block as 3 x [rows][kk] */
                    per_term = term_stride(rows * kk);
                    LCX_TRY(launched(lcx_cuda_split_bf16_launch(s, (const float *)a, g->lda, g->trans_a, rows, kk,
                                                                terms, per_term)));
                    blk.trans_a = 0, blk.a_dtype = LCX_BF16, blk.lda = kk;
                } else if (z->split == 2) { /* op(B)'s block as 3 x [kk][n] */
                    per_term = term_stride(kk * g->n);
                    LCX_TRY(launched(lcx_cuda_split_bf16_launch(s, (const float *)b, g->ldb, g->trans_b, kk, g->n,
                                                                terms, per_term)));
                    blk.trans_b = 0, blk.b_dtype = LCX_BF16, blk.ldb = g->n;
                }
                for (int term = 0; term < n_terms; term++) {
                    if (z->split == 1) blk.a = terms + term * per_term;
                    if (z->split == 2) blk.b = terms + term * per_term;
                    if (term) blk.beta = 1.0f;
                    int ran = 0;
                    LCX_TRY(lt_run(x, &blk, &ran));
                    if (!ran && bi == 0 && r0 == 0 && k0 == 0 && term == 0) return LCX_OK; /* the tiled kernel */
                    if (!ran)
                        return lcx_fail(LCX_ERR_CUDA,
                                        "matmul: cuBLASLt has no algorithm for a %lld x %lld x %lld block",
                                        (long long)blk.m, (long long)blk.n, (long long)blk.k);
                }
            }
            if (z->stage) LCX_TRY(launched(lcx_cuda_gemm_beta_bf16_launch(s, stage, rows, g->n, c, g->ldc, g->beta)));
        }
    *done = 1;
    return LCX_OK;
}

lcx_status lcx_cuda_matmul(lcx_exec *x, const lcx_matmul_args *args) {
    const lcx_matmul_args g = lcx_matmul_resolved(args);
    if (g.m == 0 || g.n == 0) return LCX_OK;
    cudaStream_t s = (cudaStream_t)x->queue;
    blocks z;
    if (x->handles && blocks_of(&g, &z)) {
        int done = 0;
        if (z.rb) LCX_TRY(matmul_blocked(x, &g, &z, &done));
        if (done) return LCX_OK;
    } else if (x->handles && lt_may_run(&g)) {
        int ran = 0;
        LCX_TRY(lt_run(x, &g, &ran));
        if (ran) return LCX_OK;
    }
    return launched(lcx_cuda_gemm_tiled_launch(s, &g));
}
