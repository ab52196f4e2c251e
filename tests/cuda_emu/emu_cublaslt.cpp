/* emu_cublaslt.cpp: emu_cublaslt.h on the host. A matmul is column-major D = alpha op(A) op(B) + beta C, each
 * element accumulated in float32 over k in order (bf16: 16 of k per step, as an MMA adds its products; cuBLASLt's
 * own tiling and split-K are not emulated), rounded once to D's type. Misuse the real library would refuse or
 * mis-compute stops the run with a message. */
#include "emu_cublaslt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/tensor.h"

struct emu_lt_handle {
    int magic;
};
struct emu_lt_desc {
    cublasOperation_t ta, tb;
};
struct emu_lt_layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld, batch, stride;
};
struct emu_lt_pref {
    uint64_t max_ws;
    uint32_t align[4]; /* A, B, C, D */
};
enum { ALGO_MAGIC = 0x6c7478 };

static void die(const char *what) {
    fprintf(stderr, "emu_cublaslt: %s\n", what);
    abort();
}
static size_t elem(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }
static float load(const void *p, cudaDataType_t t, int64_t i) {
    if (t == CUDA_R_16BF) return lcx_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
static uint32_t align_of(const void *p, const emu_lt_layout *l) {
    uint64_t v = (uint64_t)(uintptr_t)p;
    if (l->batch > 1) v |= (uint64_t)l->stride * elem(l->type);
    uint32_t al = 256;
    while (al > 1 && (v & (al - 1))) al >>= 1;
    return al;
}

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = (cublasLtHandle_t)calloc(1, sizeof(emu_lt_handle));
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasLtGetStatusString(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(other)";
    }
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = (cublasLtMatmulDesc_t)calloc(1, sizeof(emu_lt_desc));
    return *d ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
    if (size != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_DESC_TRANSA) memcpy(&d->ta, buf, size);
    else if (attr == CUBLASLT_MATMUL_DESC_TRANSB) memcpy(&d->tb, buf, size);
    else return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    *l = (cublasLtMatrixLayout_t)calloc(1, sizeof(emu_lt_layout));
    if (!*l) return CUBLAS_STATUS_ALLOC_FAILED;
    **l = emu_lt_layout{type, rows, cols, ld, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size) {
    if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == sizeof(int32_t)) {
        int32_t v;
        memcpy(&v, buf, size);
        l->batch = v;
    } else if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && size == sizeof(int64_t)) {
        memcpy(&l->stride, buf, size);
    } else {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = (cublasLtMatmulPreference_t)calloc(1, sizeof(emu_lt_pref));
    return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size) {
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        if (size != 8) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&p->max_ws, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
        return size == 4 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        if (size != 4) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, 4);
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

/* An algorithm for the supported dtype pairs (A, B both bf16 or both f32; C = D f32, or bf16 with bf16 A, B) and
 * consistent sizes; the promised alignments and workspace travel in it to the matmul. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t *res, int *found) {
    *found = 0;
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    if (a->type != b->type || c->type != d->type || (a->type == CUDA_R_32F && c->type != CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const uint64_t m = op->ta == CUBLAS_OP_N ? a->rows : a->cols, k = op->ta == CUBLAS_OP_N ? a->cols : a->rows;
    const uint64_t kb = op->tb == CUBLAS_OP_N ? b->rows : b->cols, n = op->tb == CUBLAS_OP_N ? b->cols : b->rows;
    if (k != kb || m != d->rows || n != d->cols || c->rows != d->rows || c->cols != d->cols)
        return CUBLAS_STATUS_INVALID_VALUE;
    const emu_lt_layout *ls[] = {a, b, c, d};
    for (const emu_lt_layout *l : ls)
        if (l->ld < (int64_t)l->rows || l->batch != d->batch) return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < 4; i++)
        if (pref->align[i] < elem(ls[i]->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(res, 0, sizeof *res);
    res->algo.data[0] = ALGO_MAGIC;
    res->algo.data[1] = pref->max_ws;
    for (int i = 0; i < 4; i++) res->algo.data[2 + i] = pref->align[i];
    res->state = CUBLAS_STATUS_SUCCESS;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t op, const void *alpha_p, const void *a,
                              cublasLtMatrixLayout_t la, const void *b, cublasLtMatrixLayout_t lb, const void *beta_p,
                              const void *c, cublasLtMatrixLayout_t lc, void *d, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes, cudaStream_t) {
    if (!algo || algo->data[0] != ALGO_MAGIC) die("cublasLtMatmul without an algorithm from the heuristic");
    if ((uintptr_t)ws % 256) die("workspace pointer not 256-byte aligned");
    if (ws_bytes > algo->data[1]) die("workspace larger than the preference promised the heuristic");
    const void *ptrs[] = {a, b, c, d};
    const emu_lt_layout *ls[] = {la, lb, lc, ld};
    for (int i = 0; i < 4; i++)
        if (align_of(ptrs[i], ls[i]) < algo->data[2 + i]) die("a pointer less aligned than the heuristic was told");
    if (c != d || memcmp(lc, ld, sizeof *lc) != 0) die("C and D differ (the backend computes in place)");
    const float alpha = *(const float *)alpha_p, beta = *(const float *)beta_p;
    if (ld->type == CUDA_R_16BF && beta != 0.0f)
        die("bf16 D with beta != 0: cuBLASLt rounds alpha op(A) op(B) to bf16 before adding beta C");
    const int64_t M = (int64_t)ld->rows, N = (int64_t)ld->cols;
    const int64_t K = (int64_t)(op->ta == CUBLAS_OP_N ? la->cols : la->rows);
    /* bf16 products as tensor cores take them, 16 of k at a time (each MMA's sum, then one float32 addition to
     * the accumulator); float32 ones as one fma per k */
    const int64_t tile = la->type == CUDA_R_16BF ? 16 : 1;
    for (int64_t bi = 0; bi < ld->batch; bi++) {
        const int64_t a0 = bi * la->stride, b0 = bi * lb->stride, d0 = bi * ld->stride;
        for (int64_t j = 0; j < N; j++)
            for (int64_t i = 0; i < M; i++) {
                float acc = 0.0f;
                for (int64_t k0 = 0; k0 < K; k0 += tile) {
                    double part = 0.0; /* exact: at most 16 products of bf16 values */
                    for (int64_t k = k0; k < K && k < k0 + tile; k++) {
                        const int64_t ai = a0 + (op->ta == CUBLAS_OP_N ? i + k * la->ld : k + i * la->ld);
                        const int64_t bi2 = b0 + (op->tb == CUBLAS_OP_N ? k + j * lb->ld : j + k * lb->ld);
                        if (tile == 1) acc = fmaf(load(a, la->type, ai), load(b, lb->type, bi2), acc);
                        else part += (double)load(a, la->type, ai) * load(b, lb->type, bi2);
                    }
                    if (tile > 1) acc += (float)part;
                }
                const int64_t di = d0 + i + j * ld->ld;
                float r = alpha * acc;
                if (beta != 0.0f) r += beta * load(c, lc->type, di);
                if (ld->type == CUDA_R_16BF) ((uint16_t *)d)[di] = lcx_f32_to_bf16(r);
                else ((float *)d)[di] = r;
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
