/* cpu_swiglu: h = silu(gate) * up and its backward. bf16 storage widens each element, computes the same
 * float32 expression and rounds the result. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

static inline float sigmoidf(float g) { return 1.0f / (1.0f + expf(-g)); }

static lcx_status check(const char *op, lcx_exec *x, const lcx_swiglu_args *a) {
    LCX_CPU_ARGS(x, a, op);
    LCX_FAIL_IF(a->n < 0, LCX_ERR_INVALID, "%s: negative size %lld", op, (long long)a->n);
    return lcx_cpu_act_check(a->dt, op);
}

lcx_status lcx_cpu_swiglu_fwd(lcx_exec *x, const lcx_swiglu_args *a) {
    LCX_TRY(check("swiglu_fwd", x, a));
    const int64_t n = a->n;
    LCX_CPU_NEED(a->gate, n, "swiglu_fwd");
    LCX_CPU_NEED(a->up, n, "swiglu_fwd");
    LCX_CPU_NEED(a->h, n, "swiglu_fwd");
    if (a->dt == LCX_F32) {
        const float *gate = a->gate, *up = a->up;
        float *h = a->h;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i];
            h[i] = g * sigmoidf(g) * up[i];
        }
        return LCX_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = lcx_cpu_bf16_get(a->gate, i);
        lcx_cpu_bf16_put(a->h, i, g * sigmoidf(g) * lcx_cpu_bf16_get(a->up, i));
    }
    return LCX_OK;
}

/* d/dg silu(g) = s (1 + g (1 - s)), s = sigmoid(g). */
lcx_status lcx_cpu_swiglu_bwd(lcx_exec *x, const lcx_swiglu_args *a) {
    LCX_TRY(check("swiglu_bwd", x, a));
    const int64_t n = a->n;
    LCX_CPU_NEED(a->dh, n, "swiglu_bwd");
    LCX_CPU_NEED(a->gate, n, "swiglu_bwd");
    LCX_CPU_NEED(a->up, n, "swiglu_bwd");
    LCX_CPU_NEED(a->dgate, n, "swiglu_bwd");
    LCX_CPU_NEED(a->dup, n, "swiglu_bwd");
    if (a->dt == LCX_F32) {
        const float *dh = a->dh, *gate = a->gate, *up = a->up;
        float *dgate = a->dgate, *dup = a->dup;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i], u = up[i], d = dh[i], s = sigmoidf(g);
            dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
            dup[i] = d * g * s;
        }
        return LCX_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = lcx_cpu_bf16_get(a->gate, i), u = lcx_cpu_bf16_get(a->up, i), d = lcx_cpu_bf16_get(a->dh, i);
        float s = sigmoidf(g);
        lcx_cpu_bf16_put(a->dgate, i, d * u * s * (1.0f + g * (1.0f - s)));
        lcx_cpu_bf16_put(a->dup, i, d * g * s);
    }
    return LCX_OK;
}
