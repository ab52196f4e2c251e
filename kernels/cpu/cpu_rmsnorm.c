/* cpu_rmsnorm: y = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps); sums of squares in double. */
#include <math.h>

#include "cpu_internal.h"

static lcx_status check(const char *op, int64_t n_rows, int64_t dim) {
    LCX_FAIL_IF(n_rows < 0 || dim <= 0, LCX_ERR_INVALID, "%s: bad sizes rows=%lld dim=%lld", op,
                (long long)n_rows, (long long)dim);
    return LCX_OK;
}

lcx_status lcx_cpu_rmsnorm_fwd(const float *x, const float *w, float *y, float *rstd, int64_t n_rows,
                               int64_t dim, float eps) {
    LCX_TRY(check("rmsnorm_fwd", n_rows, dim));
    LCX_CPU_NEED(x, n_rows, "rmsnorm_fwd");
    LCX_CPU_NEED(y, n_rows, "rmsnorm_fwd");
    LCX_CPU_NEED(w, n_rows, "rmsnorm_fwd");
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double ss = 0.0;
        for (int64_t d = 0; d < dim; d++) ss += (double)xr[d] * xr[d];
        float rs = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
        for (int64_t d = 0; d < dim; d++) yr[d] = w[d] * (xr[d] * rs);
        if (rstd) rstd[r] = rs;
    }
    return LCX_OK;
}

/* Column blocks for dw: each thread sums whole columns over the rows in order (deterministic). */
enum { NORM_COLS = 64 };

lcx_status lcx_cpu_rmsnorm_bwd(const float *dy, const float *x, const float *w, const float *rstd, float *dx,
                               float *dw, int64_t n_rows, int64_t dim) {
    LCX_TRY(check("rmsnorm_bwd", n_rows, dim));
    LCX_CPU_NEED(dy, n_rows, "rmsnorm_bwd");
    LCX_CPU_NEED(x, n_rows, "rmsnorm_bwd");
    LCX_CPU_NEED(w, n_rows, "rmsnorm_bwd");
    LCX_CPU_NEED(rstd, n_rows, "rmsnorm_bwd");
    LCX_CPU_NEED(dx, n_rows, "rmsnorm_bwd");
    LCX_CPU_NEED(dw, n_rows, "rmsnorm_bwd");
    /* dw first: dx may alias dy. */
    int64_t n_blocks = (dim + NORM_COLS - 1) / NORM_COLS;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n_blocks; b++) {
        int64_t d0 = b * NORM_COLS, d1 = d0 + NORM_COLS < dim ? d0 + NORM_COLS : dim;
        double acc[NORM_COLS] = {0};
        for (int64_t r = 0; r < n_rows; r++) {
            const float *xr = x + r * dim, *gr = dy + r * dim;
            double rs = rstd[r];
            for (int64_t d = d0; d < d1; d++) acc[d - d0] += (double)gr[d] * xr[d] * rs;
        }
        for (int64_t d = d0; d < d1; d++) dw[d] += (float)acc[d - d0];
    }
    /* dx = rstd * (w dy) - rstd^3 / dim * x * sum_k(w_k dy_k x_k) */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim, *gr = dy + r * dim;
        float *dxr = dx + r * dim;
        double dot = 0.0;
        for (int64_t d = 0; d < dim; d++) dot += (double)w[d] * gr[d] * xr[d];
        float rs = rstd[r];
        float c = (float)(dot / (double)dim) * rs * rs * rs;
        for (int64_t d = 0; d < dim; d++) dxr[d] = rs * (w[d] * gr[d]) - c * xr[d];
    }
    return LCX_OK;
}
