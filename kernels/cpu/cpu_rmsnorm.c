/* cpu_rmsnorm: y = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps); sums of squares in double. bf16 activations
 * go through one float32 row per thread (scratch) and the same row code. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

/* bf16 only: one float32 row per thread (forward), two (backward: x and dy). */
size_t lcx_cpu_rmsnorm_ws(int bwd, const lcx_rmsnorm_args *a) {
    if (a->dt != LCX_BF16 || a->n_rows <= 0 || a->dim <= 0) return 0;
    return lcx_cpu_ws_mul(lcx_cpu_ws_part(a->dim, sizeof(float)), (int64_t)lcx_cpu_threads() * (bwd ? 2 : 1));
}

/* One row forward (yr may alias xr). */
static inline void fwd_row(const float *xr, const float *w, float *yr, float *rstd, int64_t dim, float eps) {
    double ss = 0.0;
    for (int64_t d = 0; d < dim; d++) ss += (double)xr[d] * xr[d];
    float rs = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
    for (int64_t d = 0; d < dim; d++) yr[d] = w[d] * (xr[d] * rs);
    if (rstd) *rstd = rs;
}

lcx_status lcx_cpu_rmsnorm_fwd(lcx_exec *x, const lcx_rmsnorm_args *a) {
    const int64_t n_rows = a->n_rows, dim = a->dim;
    const float eps = a->eps, *w = a->w;
    float *rstd = a->rstd;
    if (a->dt == LCX_F32) {
        const float *xs = a->x;
        float *ys = a->y;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) fwd_row(xs + r * dim, w, ys + r * dim, rstd ? rstd + r : NULL, dim, eps);
        return LCX_OK;
    }
    const int nt = lcx_cpu_threads();
    const size_t row = lcx_cpu_ws_part(dim, sizeof(float));
#pragma omp parallel num_threads(nt)
    {
        float *s = (float *)((char *)x->scratch + row * (size_t)omp_get_thread_num());
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) {
            lcx_cpu_act_load(a->dt, a->x, r * dim, dim, 1, dim, s);
            fwd_row(s, w, s, rstd ? rstd + r : NULL, dim, eps);
            lcx_cpu_act_store(a->dt, a->y, r * dim, dim, 1, dim, s);
        }
    }
    return LCX_OK;
}

/* Column blocks for dw: each thread sums whole columns over the rows in order (deterministic). */
enum { NORM_COLS = 64 };

/* dx of one row = rstd * (w dy) - rstd^3 / dim * x * sum_k(w_k dy_k x_k) (dxr may alias gr). */
static inline void dx_row(const float *xr, const float *gr, const float *w, float rs, float *dxr, int64_t dim) {
    double dot = 0.0;
    for (int64_t d = 0; d < dim; d++) dot += (double)w[d] * gr[d] * xr[d];
    float c = (float)(dot / (double)dim) * rs * rs * rs;
    for (int64_t d = 0; d < dim; d++) dxr[d] = rs * (w[d] * gr[d]) - c * xr[d];
}

lcx_status lcx_cpu_rmsnorm_bwd(lcx_exec *x, const lcx_rmsnorm_args *a) {
    const int64_t n_rows = a->n_rows, dim = a->dim;
    const float *w = a->w, *rstd = a->rstd;
    float *dw = a->dw;
    /* dw first: dx may alias dy. */
    const int64_t n_blocks = (dim + NORM_COLS - 1) / NORM_COLS;
    if (a->dt == LCX_F32) {
        const float *x32 = a->x, *dy = a->dy;
        float *dx = a->dx;
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < n_blocks; b++) {
            int64_t d0 = b * NORM_COLS, d1 = d0 + NORM_COLS < dim ? d0 + NORM_COLS : dim;
            double acc[NORM_COLS] = {0};
            for (int64_t r = 0; r < n_rows; r++) {
                const float *xr = x32 + r * dim, *gr = dy + r * dim;
                double rs = rstd[r];
                for (int64_t d = d0; d < d1; d++) acc[d - d0] += (double)gr[d] * xr[d] * rs;
            }
            for (int64_t d = d0; d < d1; d++) dw[d] += (float)acc[d - d0];
        }
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) dx_row(x32 + r * dim, dy + r * dim, w, rstd[r], dx + r * dim, dim);
        return LCX_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n_blocks; b++) {
        int64_t d0 = b * NORM_COLS, d1 = d0 + NORM_COLS < dim ? d0 + NORM_COLS : dim;
        double acc[NORM_COLS] = {0};
        for (int64_t r = 0; r < n_rows; r++) {
            double rs = rstd[r];
            for (int64_t d = d0; d < d1; d++)
                acc[d - d0] += (double)lcx_cpu_bf16_get(a->dy, r * dim + d) * lcx_cpu_bf16_get(a->x, r * dim + d) * rs;
        }
        for (int64_t d = d0; d < d1; d++) dw[d] += (float)acc[d - d0];
    }
    const int nt = lcx_cpu_threads();
    const size_t row = lcx_cpu_ws_part(dim, sizeof(float));
#pragma omp parallel num_threads(nt)
    {
        float *sx = (float *)((char *)x->scratch + 2 * row * (size_t)omp_get_thread_num());
        float *sg = (float *)((char *)sx + row);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) {
            lcx_cpu_act_load(a->dt, a->x, r * dim, dim, 1, dim, sx);
            lcx_cpu_act_load(a->dt, a->dy, r * dim, dim, 1, dim, sg);
            dx_row(sx, sg, w, rstd[r], sg, dim);
            lcx_cpu_act_store(a->dt, a->dx, r * dim, dim, 1, dim, sg);
        }
    }
    return LCX_OK;
}
