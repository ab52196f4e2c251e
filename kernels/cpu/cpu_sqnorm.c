/* cpu_sqnorm: *out += sum of x^2 in double. Partial sums over fixed blocks (in the arena), then the blocks in
 * order: the same result for any thread count. */
#include "kernels/cpu/cpu_internal.h"

enum { NORM_BLOCK = 8192 };

static int64_t n_blocks(int64_t n) { return (n + NORM_BLOCK - 1) / NORM_BLOCK; }

size_t lcx_cpu_sqnorm_ws(const lcx_sqnorm_args *a) {
    return a->n > 0 ? lcx_cpu_ws_part(n_blocks(a->n), sizeof(double)) : 0;
}

lcx_status lcx_cpu_sqnorm(lcx_exec *x, const lcx_sqnorm_args *a) {
    const int64_t n = a->n;
    const float *xs = a->x;
    const int64_t nb = n_blocks(n);
    double *part = x->scratch;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * NORM_BLOCK, i1 = i0 + NORM_BLOCK < n ? i0 + NORM_BLOCK : n;
        double s = 0.0;
        for (int64_t i = i0; i < i1; i++) s += (double)xs[i] * xs[i];
        part[b] = s;
    }
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    *a->out += s;
    return LCX_OK;
}
