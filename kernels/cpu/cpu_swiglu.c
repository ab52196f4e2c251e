/* cpu_swiglu: h = silu(gate) * up and its backward. bf16 storage widens each element, computes the same
 * float32 expression and rounds the result. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

static inline float sigmoidf(float g) { return 1.0f / (1.0f + expf(-g)); }

lcx_status lcx_cpu_swiglu_fwd(lcx_exec *x, const lcx_swiglu_args *a) {
    (void)x;
    const int64_t n = a->n;
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
    (void)x;
    const int64_t n = a->n;
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
