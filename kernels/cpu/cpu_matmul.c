/* cpu_matmul: C = alpha op(A) op(B) + beta C through OpenBLAS sgemm. bf16 operands are widened to float32 tiles
 * first (exact), so the GEMM itself always runs in float32; a bf16 C is computed in float32 tiles and rounded.
 * Tiles bound the scratch (per thread, from the exec's arena). */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>

#include "kernels/backend_check.h"
#include "kernels/cpu/cpu_internal.h"

/* Tile sizes (rows/cols of op(A)/op(B), and of the reduction dimension) used when an operand is bf16. */
enum { TILE_MN = 256, TILE_K = 2048 };

/* Conversion is done by the thread that owns the block: it is O(tile) against the GEMM's O(tile * other dim).
 *
 * One operand as float32: the block rows [r0, r1) x reduction [k0, k1) of op(X), where op(X) is [rows, k]
 * (for A: rows = m; for B seen as op(B)^T: rows = n). `trans` says whether X is stored [k, rows].
 * f32 operands are returned in place (pointer offset); bf16 ones are converted into `scratch`. */
typedef struct operand {
    lcx_dtype dtype;
    const void *p;
    int64_t ld;
    int trans; /* stored [k, rows] */
} operand;

static const float *operand_tile(const operand *x, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                                 float *scratch, int64_t *ld_out) {
    if (x->dtype == LCX_F32) {
        const float *f = x->p;
        *ld_out = x->ld;
        return x->trans ? f + k0 * x->ld + r0 : f + r0 * x->ld + k0;
    }
    const uint16_t *h = x->p;
    int64_t nr = r1 - r0, nk = k1 - k0;
    if (x->trans) { /* stored [k, rows]: tile is [nk, nr] */
        for (int64_t kk = 0; kk < nk; kk++)
            for (int64_t r = 0; r < nr; r++) scratch[kk * nr + r] = lcx_bf16_to_f32(h[(k0 + kk) * x->ld + r0 + r]);
        *ld_out = nr;
    } else { /* stored [rows, k]: tile is [nr, nk] */
        for (int64_t r = 0; r < nr; r++)
            for (int64_t kk = 0; kk < nk; kk++) scratch[r * nk + kk] = lcx_bf16_to_f32(h[(r0 + r) * x->ld + k0 + kk]);
        *ld_out = nk;
    }
    return scratch;
}

static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

/* C = beta C (k == 0: no product). beta == 0 writes zeros, ignoring NaN in C. */
static void scale_c(float *c, int64_t m, int64_t n, int64_t ldc, float beta) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

static lcx_status one_matmul(const lcx_matmul_args *g, const void *a, const void *b, float *c, float *sa,
                             float *sb) {
    if (g->m == 0 || g->n == 0) return LCX_OK;
    if (g->k == 0) {
        scale_c(c, g->m, g->n, g->ldc, g->beta);
        return LCX_OK;
    }
    operand A = {g->a_dtype, a, g->lda, g->trans_a};
    operand B = {g->b_dtype, b, g->ldb, !g->trans_b}; /* op(B)^T is [n, k]: stored [k, n] unless trans_b */
    if (A.dtype == LCX_F32 && B.dtype == LCX_F32) {
        gemm(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a, g->lda, b, g->ldb, g->beta, c, g->ldc);
        return LCX_OK;
    }
    /* f32 operands are not tiled along m/n (no conversion to amortise); bf16 ones are. */
    int64_t tm = A.dtype == LCX_F32 ? g->m : TILE_MN, tn = B.dtype == LCX_F32 ? g->n : TILE_MN, tk = TILE_K;
    for (int64_t m0 = 0; m0 < g->m; m0 += tm) {
        int64_t m1 = m0 + tm < g->m ? m0 + tm : g->m;
        for (int64_t k0 = 0; k0 < g->k; k0 += tk) {
            int64_t k1 = k0 + tk < g->k ? k0 + tk : g->k, lda, ldb;
            const float *ta = operand_tile(&A, m0, m1, k0, k1, sa, &lda);
            float beta = k0 == 0 ? g->beta : 1.0f;
            for (int64_t n0 = 0; n0 < g->n; n0 += tn) {
                int64_t n1 = n0 + tn < g->n ? n0 + tn : g->n;
                const float *tb = operand_tile(&B, n0, n1, k0, k1, sb, &ldb);
                /* op(B) tile: stored [k, n] tile (ld ldb) -> no transpose; stored [n, k] -> transpose. */
                gemm(A.trans, !B.trans, m1 - m0, n1 - n0, k1 - k0, g->alpha, ta, lda, tb, ldb, beta,
                     c + m0 * g->ldc + n0, g->ldc);
            }
        }
    }
    return LCX_OK;
}

static void blas_serial_once(void) {
    if (openblas_get_parallel() == 1) openblas_set_num_threads(1);
}

void lcx_cpu_blas_serial(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_serial_once);
}

/* Threads of one product: small products run on one, and never more than there are rows (columns) to split. */
static int matmul_threads(const lcx_matmul_args *g) {
    const int64_t macs = g->m * g->n * (g->k > 0 ? g->k : 1);
    int nt = macs < ((int64_t)1 << 18) ? 1 : lcx_cpu_threads();
    const int64_t span = g->m >= g->n ? g->m : g->n;
    if (nt > span) nt = (int)span;
    return nt > 0 ? nt : 1;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Per-thread float32 tiles (bytes, 64-aligned): bf16 A and B tiles of one_matmul, and (bf16 C) the C tile. */
typedef struct tiles {
    size_t a, b, c;
} tiles;
static tiles tile_bytes(const lcx_matmul_args *g, lcx_dtype c_dtype) {
    tiles t = {0, 0, 0};
    if (g->a_dtype == LCX_BF16) t.a = lcx_cpu_ws_part(min64(TILE_MN, g->m) * min64(TILE_K, g->k), sizeof(float));
    if (g->b_dtype == LCX_BF16) t.b = lcx_cpu_ws_part(min64(TILE_MN, g->n) * min64(TILE_K, g->k), sizeof(float));
    if (c_dtype == LCX_BF16) t.c = lcx_cpu_ws_part(min64(TILE_MN, g->m) * min64(TILE_MN, g->n), sizeof(float));
    return t;
}

size_t lcx_cpu_matmul_ws(const lcx_matmul_args *g) {
    if (g->m <= 0 || g->n <= 0 || g->k < 0 || g->batch < 1) return 0;
    tiles t = tile_bytes(g, g->c_dtype ? g->c_dtype : LCX_F32);
    return lcx_cpu_ws_mul(lcx_cpu_ws_add(lcx_cpu_ws_add(t.a, t.b), t.c), matmul_threads(g));
}

/* One block of a bf16 C: C tiles of TILE_MN x TILE_MN widened into sc (when beta reads them), computed by
 * one_matmul in float32 and rounded back. a, b: the block's operands; c: its first element. */
static lcx_status bf16_c_block(const lcx_matmul_args *g, const char *a, const char *b, uint16_t *c, size_t ea,
                               size_t eb, float *sa, float *sb, float *sc) {
    for (int64_t i0 = 0; i0 < g->m; i0 += TILE_MN)
        for (int64_t j0 = 0; j0 < g->n; j0 += TILE_MN) {
            lcx_matmul_args t = *g;
            t.m = min64(TILE_MN, g->m - i0);
            t.n = min64(TILE_MN, g->n - j0);
            t.ldc = t.n;
            const char *at = a ? a + (size_t)(g->trans_a ? i0 : i0 * g->lda) * ea : NULL;
            const char *bt = b ? b + (size_t)(g->trans_b ? j0 * g->ldb : j0) * eb : NULL;
            uint16_t *ct = c + i0 * g->ldc + j0;
            if (g->beta != 0.0f) lcx_cpu_act_load(LCX_BF16, ct, 0, g->ldc, t.m, t.n, sc);
            LCX_TRY(one_matmul(&t, at, bt, sc, sa, sb));
            lcx_cpu_act_store(LCX_BF16, ct, 0, g->ldc, t.m, t.n, sc);
        }
    return LCX_OK;
}

lcx_status lcx_cpu_matmul(lcx_exec *x, const lcx_matmul_args *args) {
    /* the arguments are checked (kernels/backend_check.c); BLAS adds its 32-bit dimensions */
    const lcx_matmul_args g = lcx_matmul_resolved(args);
    LCX_FAIL_IF(g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX || g.lda > INT_MAX || g.ldb > INT_MAX ||
                    g.ldc > INT_MAX,
                LCX_ERR_UNSUPPORTED, "matmul: dimension beyond 32-bit BLAS range");
    if (g.m == 0 || g.n == 0) return LCX_OK;

    /* One OpenMP team, one thread pool: the product is split into row (or column) blocks of C, one per thread,
     * each a single-threaded sgemm (see lcx_cpu_blas_serial). Every element of C is computed by the same
     * sequence of operations whatever the split, so results do not depend on the thread count. */
    lcx_cpu_blas_serial();
    const size_t ea = g.a_dtype == LCX_BF16 ? 2 : 4, eb = g.b_dtype == LCX_BF16 ? 2 : 4;
    const size_t ec = g.c_dtype == LCX_BF16 ? 2 : 4;
    const int nt = matmul_threads(&g);
    const int split_m = g.m >= g.n;
    const int64_t span = split_m ? g.m : g.n;
    const tiles tb = tile_bytes(&g, g.c_dtype);
    const size_t per_thread = tb.a + tb.b + tb.c;
    lcx_status st = LCX_OK;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n_t = omp_get_num_threads();
        /* blocks of whole 16-row (column) groups, so each sgemm keeps full register tiles */
        int64_t groups = (span + 15) / 16, g0 = groups * t / n_t, g1 = groups * (t + 1) / n_t;
        int64_t lo = g0 * 16, hi = g1 * 16 < span ? g1 * 16 : span;
        char *mine = (char *)x->scratch + per_thread * (size_t)t;
        float *sa = tb.a ? (float *)mine : NULL, *sb = tb.b ? (float *)(mine + tb.a) : NULL;
        float *sc = tb.c ? (float *)(mine + tb.a + tb.b) : NULL;
        lcx_matmul_args part = g;
        int64_t a_off = 0, b_off = 0; /* element offsets of the block's first row/column of op(A)/op(B) */
        if (split_m) {
            part.m = hi - lo;
            a_off = g.trans_a ? lo : lo * g.lda;
        } else {
            part.n = hi - lo;
            b_off = g.trans_b ? lo * g.ldb : lo;
        }
        for (int64_t bi = 0; bi < g.batch && lo < hi; bi++) {
            const char *a = g.a ? (const char *)g.a + (size_t)(bi * g.stride_a + a_off) * ea : NULL;
            const char *b = g.b ? (const char *)g.b + (size_t)(bi * g.stride_b + b_off) * eb : NULL;
            char *c = (char *)g.c + (size_t)(bi * g.stride_c + (split_m ? lo * g.ldc : lo)) * ec;
            lcx_status r = g.c_dtype == LCX_F32 ? one_matmul(&part, a, b, (float *)c, sa, sb)
                                                : bf16_c_block(&part, a, b, (uint16_t *)c, ea, eb, sa, sb, sc);
            if (r != LCX_OK) {
#pragma omp critical(lcx_cpu_matmul_status)
                st = r;
                break;
            }
        }
    }
    return st;
}
