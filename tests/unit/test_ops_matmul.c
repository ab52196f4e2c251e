/* matmul: every transpose combination, f32/bf16 operands, alpha/beta, batching (strided and shared operands),
 * padded leading dimensions, tile edges of the bf16 path, a bf16 C, against a naive triple loop in double. The
 * error of each element is measured against sum_k |a_ik b_kj| (the scale of float32 rounding in a dot product).
 * Every product runs with an arena of exactly its workspace, and fails with one a byte short. */
#include "ops_common.h"
#include "worst_of.h"

static lcx_exec *X;
static int short_checked = 0;

/* element (r, c) of a stored matrix */
static double get(lcx_dtype dt, const void *p, int64_t ld, int64_t r, int64_t c) {
    if (dt == LCX_F32) return ((const float *)p)[r * ld + c];
    uint16_t h = ((const uint16_t *)p)[r * ld + c];
    uint32_t u = (uint32_t)h << 16; /* bf16 is the top half of a float32: decode independently of tensor.c */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* random stored matrix [rows, ld] with values in [-1, 1] */
static void *rand_mat(lcx_dtype dt, int64_t n) {
    if (dt == LCX_F32) return rand_f32(n, -1, 1);
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = lcx_f32_to_bf16((float)rng_uniform(-1, 1));
    return h;
}

static double worst = 0, worst_c16 = 0;

/* dc: C's dtype. A bf16 C is read (beta != 0) and rounded on store: its error bound adds half a bf16 ulp. */
static void run_c(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch, lcx_dtype da, lcx_dtype db,
                  lcx_dtype dc, float alpha, float beta, int pad, int share_b) {
    lcx_matmul_args g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .batch = batch, .alpha = alpha,
                         .beta = beta, .a_dtype = da, .b_dtype = db, .c_dtype = dc};
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    g.lda = pad ? ac + 3 : 0;
    g.ldb = pad ? bc + 5 : 0;
    g.ldc = pad ? n + 2 : 0;
    int64_t lda = pad ? g.lda : ac, ldb = pad ? g.ldb : bc, ldc = pad ? g.ldc : n;
    g.stride_a = ar * lda + (pad ? 7 : 0);
    g.stride_b = share_b ? 0 : br * ldb;
    g.stride_c = m * ldc;
    const size_t ec = dc == LCX_BF16 ? 2 : 4;
    void *a = rand_mat(da, g.stride_a * batch), *b = rand_mat(db, share_b ? br * ldb : g.stride_b * batch);
    void *c = rand_mat(dc, g.stride_c * batch);
    if (beta == 0.0f) { /* beta = 0 must ignore old contents */
        if (dc == LCX_F32) ((float *)c)[0] = NAN;
        else ((uint16_t *)c)[0] = 0x7fc0;
    }
    void *c0 = malloc(ec * (size_t)(g.stride_c * batch));
    memcpy(c0, c, ec * (size_t)(g.stride_c * batch));
    g.a = a;
    g.b = b;
    g.c = c;
    CHECK_OK(op_exact(X, LCX_OP_MATMUL, &g));
    check_arena_short(X, LCX_OP_MATMUL, &g, &short_checked);
    double err = 0;
    int pad_touched = 0;
    for (int64_t bi = 0; bi < batch; bi++) {
        const char *ap = (const char *)a + (size_t)(bi * g.stride_a) * (da == LCX_F32 ? 4 : 2);
        const char *bp = (const char *)b + (size_t)(bi * g.stride_b) * (db == LCX_F32 ? 4 : 2);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < ldc; j++) {
                int64_t x = bi * g.stride_c + i * ldc + j;
                if (j >= n) { /* padding columns of C stay untouched */
                    pad_touched += memcmp((char *)c + x * ec, (char *)c0 + x * ec, ec) != 0;
                    continue;
                }
                double s = 0, sa = 0;
                for (int64_t kk = 0; kk < k; kk++) {
                    double av = ta ? get(da, ap, lda, kk, i) : get(da, ap, lda, i, kk);
                    double bv = tb ? get(db, bp, ldb, j, kk) : get(db, bp, ldb, kk, j);
                    s += av * bv;
                    sa += fabs(av * bv);
                }
                double cv = get(dc, c0, 0, 0, x), want = alpha * s + (beta == 0.0f ? 0.0 : beta * cv);
                /* beta = 0: the old C (a NaN above) is not read, in the error scale either */
                double scale = fabs(alpha) * sa + (beta == 0.0f ? 0.0 : fabs(beta * cv)) + 1e-30;
                if (dc == LCX_BF16) scale = fmax(scale, fabs(want)); /* the final rounding is relative to C */
                double e = fabs(get(dc, c, 0, 0, x) - want) / scale;
                err = worst_of(err, e);
            }
    }
    double tol = dc == LCX_BF16 ? 0x1p-8 + 1e-6 : 1e-6;
    CHECK_MSG(err <= tol && pad_touched == 0,
              "ta=%d tb=%d m=%lld n=%lld k=%lld batch=%lld A %s B %s C %s alpha %g beta %g pad %d: err %.3e, "
              "padding changed %d", ta, tb, (long long)m, (long long)n, (long long)k, (long long)batch,
              lcx_dtype_name(da), lcx_dtype_name(db), lcx_dtype_name(dc), (double)alpha, (double)beta, pad, err,
              pad_touched);
    if (dc == LCX_BF16) worst_c16 = worst_of(worst_c16, err);
    else worst = worst_of(worst, err);
    free(a);
    free(b);
    free(c);
    free(c0);
}

static void run(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch, lcx_dtype da, lcx_dtype db,
                float alpha, float beta, int pad, int share_b) {
    run_c(ta, tb, m, n, k, batch, da, db, LCX_F32, alpha, beta, pad, share_b);
}

int main(void) {
    X = cpu_exec();
    rng_seed(77);
    lcx_dtype dts[] = {LCX_F32, LCX_BF16};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++) {
                    run(ta, tb, 7, 5, 9, 1, dts[x], dts[y], 1.0f, 0.0f, 0, 0);
                    run(ta, tb, 33, 17, 40, 3, dts[x], dts[y], 0.5f, 1.0f, 1, 0);  /* padded, batched */
                    run(ta, tb, 12, 20, 31, 2, dts[x], dts[y], -2.0f, 0.25f, 0, 1); /* shared B */
                }
    /* the bf16 path tiles m and n by 256 and k by 2048: cross those edges */
    run(0, 1, 300, 260, 70, 1, LCX_F32, LCX_BF16, 1.0f, 0.0f, 0, 0);
    run(1, 0, 260, 9, 2100, 1, LCX_BF16, LCX_BF16, 1.0f, 1.0f, 1, 0);
    run(0, 0, 5, 270, 2049, 1, LCX_BF16, LCX_F32, 1.0f, 0.0f, 0, 0);
    /* y = x W^T with W [out, in] (the HF convention) */
    run(0, 1, 19, 48, 64, 1, LCX_F32, LCX_BF16, 1.0f, 0.0f, 0, 0);
    /* degenerate sizes: k = 0 scales C by beta; m or n = 0 does nothing */
    run(0, 0, 4, 3, 0, 1, LCX_F32, LCX_F32, 1.0f, 0.5f, 0, 0);
    run(0, 0, 4, 3, 0, 1, LCX_F32, LCX_F32, 1.0f, 0.0f, 0, 0);
    run(1, 1, 0, 3, 5, 2, LCX_BF16, LCX_F32, 1.0f, 0.5f, 0, 0);
    CHECK_ERR("matmul |C - ref| / (|alpha| sum|a b| + |beta c|)", worst, 1e-6);
    /* bf16 C: every operand combination, tiles of 256 crossed, beta reading the old C, threads splitting */
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 2; y++) {
            run_c(0, 1, 7, 5, 9, 1, dts[x], dts[y], LCX_BF16, 1.0f, 0.0f, 0, 0);
            run_c(1, 0, 33, 17, 40, 3, dts[x], dts[y], LCX_BF16, 0.5f, 1.0f, 1, 0);
        }
    run_c(0, 1, 300, 270, 70, 1, LCX_F32, LCX_BF16, LCX_BF16, 1.0f, 0.5f, 1, 0);
    run_c(0, 0, 4, 3, 0, 1, LCX_F32, LCX_F32, LCX_BF16, 1.0f, 0.5f, 0, 0); /* k = 0: C = beta C, rounded */
    CHECK_ERR("matmul bf16 C (same, floor |C|; half a bf16 ulp)", worst_c16, 0x1p-8 + 1e-6);
    printf("  %d shapes checked with an arena one byte short\n", short_checked);
    CHECK(short_checked > 10);
    {
        lcx_matmul_args f = {.m = 500, .n = 500, .k = 500, .batch = 1, .a_dtype = LCX_F32, .b_dtype = LCX_F32};
        CHECK(lcx_exec_workspace(X, LCX_OP_MATMUL, &f) == 0); /* float32 operands need no scratch */
    }

    /* argument errors */
    float buf[64] = {0};
    lcx_matmul_args g = {.m = 4, .n = 4, .k = 4, .batch = 1, .alpha = 1, .a_dtype = LCX_F32, .b_dtype = LCX_F16,
                         .a = buf, .b = buf, .c = buf};
    CHECK_FAILS(op_exact(X, LCX_OP_MATMUL, &g), LCX_ERR_UNSUPPORTED, "F16");
    g.b_dtype = LCX_F32;
    g.c_dtype = LCX_F64;
    CHECK_FAILS(op_exact(X, LCX_OP_MATMUL, &g), LCX_ERR_UNSUPPORTED, "C F64");
    g.c_dtype = 0;
    g.lda = 3;
    CHECK_FAILS(op_exact(X, LCX_OP_MATMUL, &g), LCX_ERR_INVALID, "lda=3");
    g.lda = 0;
    g.batch = 0;
    CHECK_FAILS(op_exact(X, LCX_OP_MATMUL, &g), LCX_ERR_INVALID, "batch=0");
    return test_summary("test_ops_matmul");
}
