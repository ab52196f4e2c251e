/* cpu_elementwise: the cast between float32 and bf16, and add/scale/axpy on activations (bf16: widen, the same
 * float32 expression, round). */
#include "kernels/cpu/cpu_internal.h"

lcx_status lcx_cpu_cast(lcx_exec *x, const lcx_cast_args *a) {
    const int64_t n = a->n;
    if (a->src_dt == a->dst_dt) return lcx_cpu_copy(x, a->dst, a->src, (size_t)n * lcx_act_size(a->src_dt));
    if (a->src_dt == LCX_F32) {
        const float *src = a->src;
        uint16_t *dst = a->dst;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) dst[i] = lcx_f32_to_bf16(src[i]);
    } else {
        const uint16_t *src = a->src;
        float *dst = a->dst;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) dst[i] = lcx_bf16_to_f32(src[i]);
    }
    return LCX_OK;
}

lcx_status lcx_cpu_add(lcx_exec *x, const lcx_elementwise_args *a) {
    (void)x;
    const int64_t n = a->n;
    if (a->dt == LCX_F32) {
        const float *p = a->a, *q = a->b;
        float *out = a->out;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) out[i] = p[i] + q[i];
        return LCX_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) lcx_cpu_bf16_put(a->out, i, lcx_cpu_bf16_get(a->a, i) + lcx_cpu_bf16_get(a->b, i));
    return LCX_OK;
}

lcx_status lcx_cpu_scale(lcx_exec *x, const lcx_elementwise_args *a) {
    (void)x;
    const int64_t n = a->n;
    const float s = a->alpha;
    if (a->dt == LCX_F32) {
        const float *p = a->a;
        float *out = a->out;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) out[i] = p[i] * s;
        return LCX_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) lcx_cpu_bf16_put(a->out, i, lcx_cpu_bf16_get(a->a, i) * s);
    return LCX_OK;
}

lcx_status lcx_cpu_axpy(lcx_exec *x, const lcx_elementwise_args *a) {
    (void)x;
    const int64_t n = a->n;
    const float alpha = a->alpha;
    if (a->dt == LCX_F32) {
        const float *p = a->a;
        float *y = a->out;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] += alpha * p[i];
        return LCX_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        lcx_cpu_bf16_put(a->out, i, lcx_cpu_bf16_get(a->out, i) + alpha * lcx_cpu_bf16_get(a->a, i));
    return LCX_OK;
}
