/* SwiGLU h = silu(gate) * up: forward against double, backward against central differences, including large
 * |gate| (saturated sigmoid), in-place aliasing and bf16 activations. */
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

static lcx_exec *X;

static lcx_status fwd(lcx_dtype dt, const void *g, const void *u, void *h, int64_t n) {
    lcx_swiglu_args a = {.dt = dt, .n = n, .gate = g, .up = u, .h = h};
    return op_exact(X, LCX_OP_SWIGLU_FWD, &a);
}
static lcx_status bwd(lcx_dtype dt, const void *dh, const void *g, const void *u, void *dg, void *du, int64_t n) {
    lcx_swiglu_args a = {.dt = dt, .n = n, .gate = g, .up = u, .dh = dh, .dgate = dg, .dup = du};
    return op_exact(X, LCX_OP_SWIGLU_BWD, &a);
}

int main(void) {
    X = cpu_exec();
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
    CHECK_OK(fwd(LCX_F32, g, u, h, n));
    CHECK_ERR("swiglu forward (rel, floor 1e-3 of max)", rel_err(h, hr, n, 1e-3), 1e-6);
    CHECK_OK(bwd(LCX_F32, dh, g, u, dg, du, n));
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
    CHECK_OK(bwd(LCX_F32, dh, g2, u2, g2, u2, n));
    CHECK(memcmp(g2, dg, sizeof(float) * n) == 0 && memcmp(u2, du, sizeof(float) * n) == 0);
    memcpy(g2, g, sizeof(float) * n);
    CHECK_OK(fwd(LCX_F32, g2, u, g2, n));
    CHECK(memcmp(g2, h, sizeof(float) * n) == 0);
    /* bf16: the rounding of the float32 results on the same values, with the same aliasing */
    {
        uint16_t *gh = to_bf16(g, n), *uh = to_bf16(u, n), *dhh = to_bf16(dh, n), *hh = malloc(2 * n);
        uint16_t *dgh = malloc(2 * n), *duh = malloc(2 * n);
        float *gw = widen_bf16(gh, n), *uw = widen_bf16(uh, n), *dhw = widen_bf16(dhh, n);
        CHECK_OK(fwd(LCX_F32, gw, uw, h, n));
        CHECK_OK(fwd(LCX_BF16, gh, uh, hh, n));
        CHECK(bf16_mismatch(hh, h, n) == 0);
        CHECK_OK(bwd(LCX_F32, dhw, gw, uw, dg, du, n));
        CHECK_OK(bwd(LCX_BF16, dhh, gh, uh, dgh, duh, n));
        CHECK(bf16_mismatch(dgh, dg, n) == 0 && bf16_mismatch(duh, du, n) == 0);
        CHECK_OK(bwd(LCX_BF16, dhh, gh, uh, gh, uh, n));
        CHECK(memcmp(gh, dgh, 2 * n) == 0 && memcmp(uh, duh, 2 * n) == 0);
        free(gh); free(uh); free(dhh); free(hh); free(dgh); free(duh); free(gw); free(uw); free(dhw);
    }
    CHECK_FAILS(fwd(LCX_F32, g, u, h, -1), LCX_ERR_INVALID, "negative");
    CHECK_FAILS(fwd(LCX_DTYPE_INVALID, g, u, h, 1), LCX_ERR_UNSUPPORTED, "activation dtype");
    free(g); free(u); free(dh); free(h); free(dg); free(du); free(c.g); free(c.u); free(c.r); free(hr); free(gg);
    free(gu); free(g2); free(u2);
    return test_summary("test_ops_swiglu");
}
