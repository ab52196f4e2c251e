/* cpu_cross_entropy: loss and dlogits for a chunk of rows; per-row log-sum-exp in double. */
#include <math.h>
#include <stdlib.h>

#include "cpu_internal.h"

lcx_status lcx_cpu_cross_entropy(const float *logits, const int32_t *targets, float *dlogits, int64_t n_rows,
                                 int64_t vocab, float dscale, double *loss_sum, int64_t *count) {
    LCX_FAIL_IF(n_rows < 0 || vocab <= 0, LCX_ERR_INVALID, "cross_entropy: bad sizes rows=%lld vocab=%lld",
                (long long)n_rows, (long long)vocab);
    LCX_FAIL_IF(loss_sum == NULL || count == NULL, LCX_ERR_INVALID, "cross_entropy: NULL loss_sum or count");
    LCX_CPU_NEED(logits, n_rows, "cross_entropy");
    LCX_CPU_NEED(targets, n_rows, "cross_entropy");
    int64_t cnt = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        int32_t t = targets[r];
        if (t == LCX_IGNORE_INDEX) continue;
        LCX_FAIL_IF(t < 0 || t >= vocab, LCX_ERR_INVALID,
                    "cross_entropy: row %lld has target %d outside [0, %lld) (ignore index is %d)", (long long)r, t,
                    (long long)vocab, LCX_IGNORE_INDEX);
        cnt++;
    }
    double *row_loss = malloc(sizeof(double) * (size_t)(n_rows > 0 ? n_rows : 1));
    LCX_FAIL_IF(row_loss == NULL, LCX_ERR_OOM, "cross_entropy: no memory for %lld row losses", (long long)n_rows);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = logits + r * vocab;
        float *dx = dlogits ? dlogits + r * vocab : NULL;
        int32_t t = targets[r];
        if (t == LCX_IGNORE_INDEX) {
            row_loss[r] = 0.0;
            if (dx)
                for (int64_t j = 0; j < vocab; j++) dx[j] = 0.0f;
            continue;
        }
        float mx = x[0];
        for (int64_t j = 1; j < vocab; j++) mx = x[j] > mx ? x[j] : mx;
        /* exp in float (vectorised, 2 ulp), summed in double over 8 lanes in a fixed order */
        double se8[8] = {0};
        int64_t j = 0;
        for (; j + 8 <= vocab; j += 8)
            for (int l = 0; l < 8; l++) se8[l] += (double)lcx_cpu_expf(x[j + l] - mx);
        for (; j < vocab; j++) se8[j & 7] += (double)lcx_cpu_expf(x[j] - mx);
        double se = ((se8[0] + se8[1]) + (se8[2] + se8[3])) + ((se8[4] + se8[5]) + (se8[6] + se8[7]));
        double lse = mx + log(se);
        row_loss[r] = lse - (double)x[t]; /* read before dlogits (which may alias logits) is written */
        if (dx) {
            float w = (float)((double)dscale / se); /* softmax_j = exp(x_j - mx) / se */
            float xt = x[t];
            for (int64_t jj = 0; jj < vocab; jj++) dx[jj] = w * lcx_cpu_expf(x[jj] - mx);
            dx[t] = (float)((double)dscale * (exp((double)xt - lse) - 1.0)); /* the target, at full precision */
        }
    }
    double sum = 0.0; /* fixed row order: identical for any thread count */
    for (int64_t r = 0; r < n_rows; r++) sum += row_loss[r];
    free(row_loss);
    *loss_sum = sum;
    *count = cnt;
    return LCX_OK;
}
