/* cpu_swiglu: h = silu(gate) * up and its backward. */
#include <math.h>

#include "cpu_internal.h"

static inline float sigmoidf(float g) { return 1.0f / (1.0f + expf(-g)); }

lcx_status lcx_cpu_swiglu_fwd(const float *gate, const float *up, float *h, int64_t n) {
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "swiglu_fwd: negative size %lld", (long long)n);
    LCX_CPU_NEED(gate, n, "swiglu_fwd");
    LCX_CPU_NEED(up, n, "swiglu_fwd");
    LCX_CPU_NEED(h, n, "swiglu_fwd");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        h[i] = g * sigmoidf(g) * up[i];
    }
    return LCX_OK;
}

/* d/dg silu(g) = s (1 + g (1 - s)), s = sigmoid(g). */
lcx_status lcx_cpu_swiglu_bwd(const float *dh, const float *gate, const float *up, float *dgate, float *dup,
                              int64_t n) {
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "swiglu_bwd: negative size %lld", (long long)n);
    LCX_CPU_NEED(dh, n, "swiglu_bwd");
    LCX_CPU_NEED(gate, n, "swiglu_bwd");
    LCX_CPU_NEED(up, n, "swiglu_bwd");
    LCX_CPU_NEED(dgate, n, "swiglu_bwd");
    LCX_CPU_NEED(dup, n, "swiglu_bwd");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i], d = dh[i], s = sigmoidf(g);
        dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
        dup[i] = d * g * s;
    }
    return LCX_OK;
}
