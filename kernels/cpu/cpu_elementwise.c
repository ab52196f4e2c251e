/* cpu_elementwise: casts, add/scale/axpy and the squared norm. */
#include <stdlib.h>

#include "cpu_internal.h"

#define CHECK_N(op, n) LCX_FAIL_IF((n) < 0, LCX_ERR_INVALID, "%s: negative size %lld", (op), (long long)(n))

/* Partial sums over fixed blocks, then the blocks in order: the same result for any thread count. */
enum { NORM_BLOCK = 8192 };

lcx_status lcx_cpu_sqnorm(const float *x, int64_t n, double *out) {
    CHECK_N("sqnorm", n);
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "sqnorm: NULL output");
    LCX_CPU_NEED(x, n, "sqnorm");
    int64_t nb = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *part = malloc(sizeof(double) * (size_t)(nb > 0 ? nb : 1));
    LCX_FAIL_IF(part == NULL, LCX_ERR_OOM, "sqnorm: no memory for %lld partial sums", (long long)nb);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * NORM_BLOCK, i1 = i0 + NORM_BLOCK < n ? i0 + NORM_BLOCK : n;
        double s = 0.0;
        for (int64_t i = i0; i < i1; i++) s += (double)x[i] * x[i];
        part[b] = s;
    }
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    free(part);
    *out = s;
    return LCX_OK;
}

lcx_status lcx_cpu_cast_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) {
    CHECK_N("cast_f32_to_bf16", n);
    LCX_CPU_NEED(src, n, "cast_f32_to_bf16");
    LCX_CPU_NEED(dst, n, "cast_f32_to_bf16");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = lcx_f32_to_bf16(src[i]);
    return LCX_OK;
}

lcx_status lcx_cpu_cast_bf16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    CHECK_N("cast_bf16_to_f32", n);
    LCX_CPU_NEED(src, n, "cast_bf16_to_f32");
    LCX_CPU_NEED(dst, n, "cast_bf16_to_f32");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = lcx_bf16_to_f32(src[i]);
    return LCX_OK;
}

lcx_status lcx_cpu_add(const float *a, const float *b, float *out, int64_t n) {
    CHECK_N("add", n);
    LCX_CPU_NEED(a, n, "add");
    LCX_CPU_NEED(b, n, "add");
    LCX_CPU_NEED(out, n, "add");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    return LCX_OK;
}

lcx_status lcx_cpu_scale(float *x, float s, int64_t n) {
    CHECK_N("scale", n);
    LCX_CPU_NEED(x, n, "scale");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return LCX_OK;
}

lcx_status lcx_cpu_axpy(float alpha, const float *x, float *y, int64_t n) {
    CHECK_N("axpy", n);
    LCX_CPU_NEED(x, n, "axpy");
    LCX_CPU_NEED(y, n, "axpy");
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
    return LCX_OK;
}
