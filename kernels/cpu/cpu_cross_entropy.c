/* cpu_cross_entropy: loss and dlogits for a chunk of rows; per-row log-sum-exp in double. Row losses go to the
 * arena and are summed in row order (identical for any thread count), then added once to the device sum.
 * bf16 logits are widened a row at a time into per-thread scratch, where dlogits are formed before rounding. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

/* Targets are never validated here (the host does it): one outside [0, vocab) counts as ignored. */
static inline int counted(int32_t t, int64_t vocab) { return t >= 0 && t < vocab; }

size_t lcx_cpu_cross_entropy_ws(const lcx_xent_args *a) {
    if (a->n_rows <= 0 || a->vocab <= 0 || a->phase == LCX_XENT_STATS) return 0; /* STATS writes the stats only */
    size_t rows = lcx_cpu_ws_part(a->n_rows, sizeof(double));
    if (a->dt != LCX_BF16) return rows;
    return lcx_cpu_ws_add(rows, lcx_cpu_ws_mul(lcx_cpu_ws_part(a->vocab, sizeof(float)), lcx_cpu_threads()));
}

/* Sum of exp(x[j] - mx) over n columns: float exp, double sum over 8 lanes in a fixed order (as row_xent). */
static inline double sum_exp(const float *x, int64_t n, float mx) {
    double se8[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) se8[l] += (double)lcx_cpu_expf(x[j + l] - mx);
    for (; j < n; j++) se8[j & 7] += (double)lcx_cpu_expf(x[j] - mx);
    return ((se8[0] + se8[1]) + (se8[2] + se8[3])) + ((se8[4] + se8[5]) + (se8[6] + se8[7]));
}

/* One row: returns its loss; writes dx (may alias x, NULL: loss only). */
static inline double row_xent(const float *x, float *dx, int32_t t, int64_t vocab, float dscale) {
    if (!counted(t, vocab)) {
        if (dx)
            for (int64_t j = 0; j < vocab; j++) dx[j] = 0.0f;
        return 0.0;
    }
    float mx = x[0];
    for (int64_t j = 1; j < vocab; j++) mx = x[j] > mx ? x[j] : mx;
    /* exp in float (vectorised, 2 ulp), summed in double over 8 lanes in a fixed order */
    double se = sum_exp(x, vocab, mx);
    double lse = mx + log(se);
    double loss = lse - (double)x[t]; /* read before dlogits (which may alias logits) is written */
    if (dx) {
        float w = (float)((double)dscale / se); /* softmax_j = exp(x_j - mx) / se */
        float xt = x[t];
        for (int64_t jj = 0; jj < vocab; jj++) dx[jj] = w * lcx_cpu_expf(x[jj] - mx);
        dx[t] = (float)((double)dscale * (exp((double)xt - lse) - 1.0)); /* the target, at full precision */
    }
    return loss;
}

/* LCX_XENT_STATS of one row: {max, sum exp(x - max), target logit} over the shard's n_valid columns. */
static inline void row_stats(const float *x, int64_t t, int64_t n_valid, double *st) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_valid; j++) mx = x[j] > mx ? x[j] : mx;
    st[0] = mx;
    st[1] = n_valid > 0 ? sum_exp(x, n_valid, mx) : 0.0;
    st[2] = t >= 0 && t < n_valid ? (double)x[t] : 0.0;
}

/* LCX_XENT_FINISH of one row (t: the target's column here, or outside [0, n_valid) when another rank holds it):
 * the global log-sum-exp from the tp ranks' stats (rank order), dx over this shard; returns the loss. */
static inline double row_finish(const float *x, float *dx, int64_t t, int64_t vocab, int64_t n_valid, float dscale,
                                const double *stats, int tp, int64_t n_rows) {
    double gmx = -INFINITY, xt = 0.0;
    for (int r = 0; r < tp; r++) gmx = stats[(int64_t)r * n_rows * 3] > gmx ? stats[(int64_t)r * n_rows * 3] : gmx;
    double se = 0.0;
    for (int r = 0; r < tp; r++) {
        const double *s = stats + (int64_t)r * n_rows * 3;
        if (s[1] > 0) se += s[1] * exp(s[0] - gmx);
        xt += s[2];
    }
    double lse = gmx + log(se);
    if (dx) {
        const float mx = (float)gmx; /* every rank's max is a float: gmx is one of them */
        float w = (float)((double)dscale / se);
        for (int64_t j = 0; j < n_valid; j++) dx[j] = w * lcx_cpu_expf(x[j] - mx);
        for (int64_t j = n_valid; j < vocab; j++) dx[j] = 0.0f;
        if (t >= 0 && t < n_valid) dx[t] = (float)((double)dscale * (exp(xt - lse) - 1.0));
    }
    return lse - xt;
}

/* The vocab-parallel phases (f32 logits: the model's loss chunk is always float32). */
static lcx_status xent_shard(lcx_exec *x, const lcx_xent_args *a) {
    const int64_t n_rows = a->n_rows, vocab = a->vocab, v0 = a->vocab_start, nv = a->n_valid;
    const float *logits = a->logits;
    const int32_t *tg = a->targets;
    if (a->phase == LCX_XENT_STATS) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) {
            double *st = a->stats + r * 3;
            if (tg[r] < 0) st[0] = st[1] = st[2] = 0.0; /* ignored: never read */
            else row_stats(logits + r * vocab, (int64_t)tg[r] - v0, nv, st);
        }
        return LCX_OK;
    }
    if (n_rows == 0) return LCX_OK;
    lcx_cpu_carve c = {x->scratch};
    double *row_loss = lcx_cpu_take(&c, lcx_cpu_ws_part(n_rows, sizeof(double)));
    float *dlogits = a->dlogits;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows; r++) {
        float *dx = dlogits ? dlogits + r * vocab : NULL;
        row_loss[r] = 0.0;
        if (tg[r] < 0) { /* ignored */
            if (dx)
                for (int64_t j = 0; j < vocab; j++) dx[j] = 0.0f;
            continue;
        }
        row_loss[r] = row_finish(logits + r * vocab, dx, (int64_t)tg[r] - v0, vocab, nv, a->dscale, a->stats + r * 3,
                                 a->tp, n_rows);
    }
    double sum = 0.0; /* fixed row order, as the whole-row op */
    int64_t cnt = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        sum += row_loss[r];
        cnt += tg[r] >= 0;
    }
    *a->loss_sum += sum;
    *a->count += cnt;
    return LCX_OK;
}

lcx_status lcx_cpu_cross_entropy(lcx_exec *x, const lcx_xent_args *a) {
    const int64_t n_rows = a->n_rows, vocab = a->vocab;
    const float dscale = a->dscale;
    const int32_t *targets = a->targets;
    if (a->phase != LCX_XENT_WHOLE) return xent_shard(x, a);
    if (n_rows == 0) return LCX_OK;
    lcx_cpu_carve c = {x->scratch};
    double *row_loss = lcx_cpu_take(&c, lcx_cpu_ws_part(n_rows, sizeof(double)));
    if (a->dt == LCX_F32) {
        const float *logits = a->logits;
        float *dlogits = a->dlogits;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n_rows; r++)
            row_loss[r] = row_xent(logits + r * vocab, dlogits ? dlogits + r * vocab : NULL, targets[r], vocab, dscale);
    } else {
        const int nt = lcx_cpu_threads();
        const size_t row = lcx_cpu_ws_part(vocab, sizeof(float));
        char *rows = lcx_cpu_take(&c, row * (size_t)nt);
#pragma omp parallel num_threads(nt)
        {
            float *s = (float *)(rows + row * (size_t)omp_get_thread_num());
#pragma omp for schedule(static)
            for (int64_t r = 0; r < n_rows; r++) {
                lcx_cpu_act_load(LCX_BF16, a->logits, r * vocab, vocab, 1, vocab, s);
                row_loss[r] = row_xent(s, a->dlogits ? s : NULL, targets[r], vocab, dscale);
                if (a->dlogits) lcx_cpu_act_store(LCX_BF16, a->dlogits, r * vocab, vocab, 1, vocab, s);
            }
        }
    }
    double sum = 0.0; /* fixed row order: identical for any thread count */
    int64_t cnt = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        sum += row_loss[r];
        cnt += counted(targets[r], vocab);
    }
    *a->loss_sum += sum;
    *a->count += cnt;
    return LCX_OK;
}
