/* RMSNorm forward against a double reference of y = w * x / sqrt(mean(x^2) + eps); backward (dx, accumulated
 * dw) against central differences of that reference; in-place aliasing. */
#include "ops_common.h"

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

int main(void) {
    const lcx_backend *be = cpu();
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
            CHECK_OK(be->rmsnorm_fwd(x, w, y, rstd, R, D, eps));
            ref_fwd(&c, yr, rr);
            wf = fmax(wf, rel_err(y, yr, n, 1e-3));
            wr = fmax(wr, rel_err(rstd, rr, R, 0));
            CHECK_OK(be->rmsnorm_bwd(dy, x, w, rstd, dx, dw, R, D));
            double *gx = zeros_f64(n), *gw = zeros_f64(D);
            fd_grad(loss, &c, c.x, n, 1e-6, gx);
            fd_grad(loss, &c, c.w, D, 1e-6, gw);
            for (int64_t d = 0; d < D; d++) gw[d] += dw0[d];
            wdx = fmax(wdx, rel_err(dx, gx, n, 1e-2));
            wdw = fmax(wdw, rel_err(dw, gw, D, 1e-2));

            /* in place: y over x, dx over dy, same bits as out of place */
            float *xi = malloc(sizeof(float) * (size_t)n), *gi = malloc(sizeof(float) * (size_t)n), *dw2 = zeros_f32(D);
            float *dx1 = zeros_f32(n), *dw1 = zeros_f32(D);
            memcpy(xi, x, sizeof(float) * (size_t)n);
            memcpy(gi, dy, sizeof(float) * (size_t)n);
            CHECK_OK(be->rmsnorm_bwd(dy, x, w, rstd, dx1, dw1, R, D));
            CHECK_OK(be->rmsnorm_bwd(gi, x, w, rstd, gi, dw2, R, D));
            CHECK_OK(be->rmsnorm_fwd(xi, w, xi, NULL, R, D, eps));
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
    float buf[4] = {0};
    CHECK_FAILS(be->rmsnorm_fwd(buf, buf, buf, buf, 1, 0, 1e-5f), LCX_ERR_INVALID, "dim=0");
    return test_summary("test_ops_rmsnorm");
}
