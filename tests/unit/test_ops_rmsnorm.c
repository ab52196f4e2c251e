/* RMSNorm forward against a double reference of y = w * x / sqrt(mean(x^2) + eps); backward (dx, accumulated
 * dw) against central differences of that reference; in-place aliasing; bf16 activations (the rounding of the
 * float32 result on the same values); the workspace and a too small arena. */
#include "ops_common.h"
#include "worst_of.h"

typedef struct ctx {
    int64_t R, D;
    double eps, *x, *w, *r; /* r: the weights of the scalar loss sum(r * y) */
} ctx;

static void ref_fwd(const ctx *c, double *y, double *rstd) {
    for (int64_t i = 0; i < c->R; i++) {
        double ss = 0;
        for (int64_t d = 0; d < c->D; d++) ss += c->x[i * c->D + d] * c->x[i * c->D + d];
        double rs = 1.0 / sqrt(ss / (double)c->D + c->eps);
        if (rstd) rstd[i] = rs;
        for (int64_t d = 0; d < c->D; d++) y[i * c->D + d] = c->w[d] * c->x[i * c->D + d] * rs;
    }
}

static double loss(void *p) {
    ctx *c = p;
    double *y = zeros_f64(c->R * c->D), s = 0;
    ref_fwd(c, y, NULL);
    for (int64_t i = 0; i < c->R * c->D; i++) s += c->r[i] * y[i];
    free(y);
    return s;
}

static lcx_exec *X;

static lcx_status fwd(const void *x, const float *w, void *y, float *rstd, int64_t R, int64_t D, float eps,
                      lcx_dtype dt) {
    lcx_rmsnorm_args a = {.dt = dt, .n_rows = R, .dim = D, .eps = eps, .x = x, .w = w, .y = y, .rstd = rstd};
    return op_exact(X, LCX_OP_RMSNORM_FWD, &a);
}
static lcx_status bwd(const void *dy, const void *x, const float *w, float *rstd, void *dx, float *dw, int64_t R,
                      int64_t D, lcx_dtype dt) {
    lcx_rmsnorm_args a = {.dt = dt, .n_rows = R, .dim = D, .x = x, .w = w, .rstd = rstd, .dy = dy, .dx = dx, .dw = dw};
    return op_exact(X, LCX_OP_RMSNORM_BWD, &a);
}

/* bf16 storage: y, dx are the rounding of the float32 results on the same (bf16) values; rstd and dw equal. */
static void check_bf16(int64_t R, int64_t D) {
    float *x = rand_f32(R * D, -2, 2), *w = rand_f32(D, 0.5, 1.5), *dy = rand_f32(R * D, -1, 1);
    round_bf16(x, R * D);
    round_bf16(dy, R * D);
    uint16_t *xh = to_bf16(x, R * D), *dyh = to_bf16(dy, R * D), *yh = malloc(2 * (size_t)(R * D));
    uint16_t *dxh = malloc(2 * (size_t)(R * D));
    float *y = zeros_f32(R * D), *r32 = zeros_f32(R), *r16 = zeros_f32(R), *dx = zeros_f32(R * D);
    float *dw32 = zeros_f32(D), *dw16 = zeros_f32(D);
    CHECK_OK(fwd(x, w, y, r32, R, D, 1e-5f, LCX_F32));
    CHECK_OK(fwd(xh, w, yh, r16, R, D, 1e-5f, LCX_BF16));
    CHECK_OK(bwd(dy, x, w, r32, dx, dw32, R, D, LCX_F32));
    CHECK_OK(bwd(dyh, xh, w, r16, dxh, dw16, R, D, LCX_BF16));
    CHECK(bf16_mismatch(yh, y, R * D) == 0 && bf16_mismatch(dxh, dx, R * D) == 0);
    CHECK(memcmp(r32, r16, sizeof(float) * (size_t)R) == 0 && memcmp(dw32, dw16, sizeof(float) * (size_t)D) == 0);
    /* in place: y over x, dx over dy */
    CHECK_OK(bwd(dyh, xh, w, r16, dyh, dw16, R, D, LCX_BF16));
    CHECK_OK(fwd(xh, w, xh, NULL, R, D, 1e-5f, LCX_BF16));
    CHECK(memcmp(xh, yh, 2 * (size_t)(R * D)) == 0 && memcmp(dyh, dxh, 2 * (size_t)(R * D)) == 0);
    /* arena one byte short */
    int short_checked = 0;
    lcx_rmsnorm_args a = {.dt = LCX_BF16, .n_rows = R, .dim = D, .eps = 1e-5f, .x = xh, .w = w, .y = yh, .rstd = r16,
                          .dy = dyh, .dx = dxh, .dw = dw16};
    check_arena_short(X, LCX_OP_RMSNORM_FWD, &a, &short_checked);
    check_arena_short(X, LCX_OP_RMSNORM_BWD, &a, &short_checked);
    CHECK(short_checked == 2);
    free(x); free(w); free(dy); free(xh); free(dyh); free(yh); free(dxh); free(y); free(r32); free(r16); free(dx);
    free(dw32); free(dw16);
}

int main(void) {
    X = cpu_exec();
    rng_seed(5);
    double wf = 0, wr = 0, wdx = 0, wdw = 0;
    static const int64_t shapes[][2] = {{1, 1}, {13, 37}, {7, 130}, {4, 64}};
    for (size_t si = 0; si < 4; si++)
        for (int e = 0; e < 2; e++) {
            int64_t R = shapes[si][0], D = shapes[si][1], n = R * D;
            float eps = e ? 1e-6f : 1e-5f;
            float *x = rand_f32(n, -2, 2), *w = rand_f32(D, 0.5, 1.5), *dy = rand_f32(n, -1, 1);
            for (int64_t d = 0; d < D; d++) x[d] *= 1e-3f; /* a tiny row, where eps matters */
            ctx c = {R, D, eps, to_f64(x, n), to_f64(w, D), to_f64(dy, n)};
            float *y = zeros_f32(n), *rstd = zeros_f32(R), *dx = rand_f32(n, -1, 1), *dw = rand_f32(D, -1, 1);
            double *dw0 = to_f64(dw, D), *yr = zeros_f64(n), *rr = zeros_f64(R);
            CHECK_OK(fwd(x, w, y, rstd, R, D, eps, LCX_F32));
            ref_fwd(&c, yr, rr);
            wf = worst_of(wf, rel_err(y, yr, n, 1e-3));
            wr = worst_of(wr, rel_err(rstd, rr, R, 0));
            CHECK_OK(bwd(dy, x, w, rstd, dx, dw, R, D, LCX_F32));
            double *gx = zeros_f64(n), *gw = zeros_f64(D);
            fd_grad(loss, &c, c.x, n, 1e-6, gx);
            fd_grad(loss, &c, c.w, D, 1e-6, gw);
            for (int64_t d = 0; d < D; d++) gw[d] += dw0[d];
            wdx = worst_of(wdx, rel_err(dx, gx, n, 1e-2));
            wdw = worst_of(wdw, rel_err(dw, gw, D, 1e-2));

            /* in place: y over x, dx over dy, same bits as out of place */
            float *xi = malloc(sizeof(float) * (size_t)n), *gi = malloc(sizeof(float) * (size_t)n), *dw2 = zeros_f32(D);
            float *dx1 = zeros_f32(n), *dw1 = zeros_f32(D);
            memcpy(xi, x, sizeof(float) * (size_t)n);
            memcpy(gi, dy, sizeof(float) * (size_t)n);
            CHECK_OK(bwd(dy, x, w, rstd, dx1, dw1, R, D, LCX_F32));
            CHECK_OK(bwd(gi, x, w, rstd, gi, dw2, R, D, LCX_F32));
            CHECK_OK(fwd(xi, w, xi, NULL, R, D, eps, LCX_F32));
            CHECK(memcmp(xi, y, sizeof(float) * (size_t)n) == 0);
            CHECK(memcmp(gi, dx1, sizeof(float) * (size_t)n) == 0);
            CHECK(memcmp(dw1, dw2, sizeof(float) * (size_t)D) == 0);
            free(xi); free(gi); free(dw2); free(dx1); free(dw1);
            free(x); free(w); free(dy); free(c.x); free(c.w); free(c.r); free(y); free(rstd); free(dx); free(dw);
            free(dw0); free(yr); free(rr); free(gx); free(gw);
        }
    CHECK_ERR("rmsnorm forward y (rel, floor 1e-3 of max)", wf, 1e-6);
    CHECK_ERR("rmsnorm forward rstd (rel)", wr, 1e-6);
    CHECK_ERR("rmsnorm dx vs central diff. (floor 1% max)", wdx, 1e-5);
    CHECK_ERR("rmsnorm dw (accum.) vs central diff. (floor 1%)", wdw, 1e-5);
    check_bf16(13, 130);
    check_bf16(1, 1);
    float buf[4] = {0};
    CHECK_FAILS(fwd(buf, buf, buf, buf, 1, 0, 1e-5f, LCX_F32), LCX_ERR_INVALID, "dim=0");
    CHECK_FAILS(fwd(buf, buf, buf, buf, 1, 4, 1e-5f, LCX_F16), LCX_ERR_UNSUPPORTED, "activation dtype F16");
    lcx_rmsnorm_args f32 = {.dt = LCX_F32, .n_rows = 100, .dim = 100};
    CHECK(lcx_exec_workspace(X, LCX_OP_RMSNORM_FWD, &f32) == 0); /* float32 needs no scratch */
    return test_summary("test_ops_rmsnorm");
}
