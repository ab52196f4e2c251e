/* SwiGLU h = silu(gate) * up: forward against double, backward against central differences, including large
 * |gate| (saturated sigmoid) and in-place aliasing. */
#include "ops_common.h"

typedef struct ctx {
    int64_t n;
    double *g, *u, *r;
} ctx;

static double silu(double g) { return g / (1.0 + exp(-g)); }

static double loss(void *p) {
    ctx *c = p;
    double s = 0;
    for (int64_t i = 0; i < c->n; i++) s += c->r[i] * silu(c->g[i]) * c->u[i];
    return s;
}

int main(void) {
    const lcx_backend *be = cpu();
    rng_seed(3);
    const int64_t n = 1000;
    float *g = rand_f32(n, -8, 8), *u = rand_f32(n, -2, 2), *dh = rand_f32(n, -1, 1);
    g[0] = 60.0f;
    g[1] = -60.0f; /* exp overflow territory for a careless sigmoid */
    g[2] = 0.0f;
    float *h = zeros_f32(n), *dg = zeros_f32(n), *du = zeros_f32(n);
    ctx c = {n, to_f64(g, n), to_f64(u, n), to_f64(dh, n)};
    double *hr = zeros_f64(n), *gg = zeros_f64(n), *gu = zeros_f64(n);
    for (int64_t i = 0; i < n; i++) hr[i] = silu(c.g[i]) * c.u[i];
    CHECK_OK(be->swiglu_fwd(g, u, h, n));
    CHECK_ERR("swiglu forward (rel, floor 1e-3 of max)", rel_err(h, hr, n, 1e-3), 1e-6);
    CHECK_OK(be->swiglu_bwd(dh, g, u, dg, du, n));
    fd_grad(loss, &c, c.g, n, 1e-6, gg);
    fd_grad(loss, &c, c.u, n, 1e-6, gu);
    CHECK_ERR("swiglu dgate vs central differences", rel_err(dg, gg, n, 1e-3), 1e-5);
    CHECK_ERR("swiglu dup vs central differences", rel_err(du, gu, n, 1e-3), 1e-5);
    int finite = 1;
    for (int64_t i = 0; i < n; i++) finite &= isfinite(h[i]) && isfinite(dg[i]) && isfinite(du[i]);
    CHECK(finite);
    /* aliasing: h over gate; dgate over gate and dup over up */
    float *g2 = malloc(sizeof(float) * n), *u2 = malloc(sizeof(float) * n);
    memcpy(g2, g, sizeof(float) * n);
    memcpy(u2, u, sizeof(float) * n);
    CHECK_OK(be->swiglu_bwd(dh, g2, u2, g2, u2, n));
    CHECK(memcmp(g2, dg, sizeof(float) * n) == 0 && memcmp(u2, du, sizeof(float) * n) == 0);
    memcpy(g2, g, sizeof(float) * n);
    CHECK_OK(be->swiglu_fwd(g2, u, g2, n));
    CHECK(memcmp(g2, h, sizeof(float) * n) == 0);
    CHECK_FAILS(be->swiglu_fwd(g, u, h, -1), LCX_ERR_INVALID, "negative");
    free(g); free(u); free(dh); free(h); free(dg); free(du); free(c.g); free(c.u); free(c.r); free(hr); free(gg);
    free(gu); free(g2); free(u2);
    return test_summary("test_ops_swiglu");
}
