/* cuda_cross_entropy: loss and dlogits for a chunk of rows, whole rows and the vocab-parallel STATS/FINISH phases
 * (kernels/cpu/cpu_cross_entropy.c). One block per row: the row max (a fixed tree), the sum of exp(x - max) in
 * double (per-thread strided sums, then a fixed tree), the log-sum-exp in double; dlogits with the CPU's formulas
 * (the target's entry at full precision). Each row's loss goes to the arena; then one thread adds the row losses
 * in row order to *loss_sum and the counted rows to *count, on the device (the CPU's order: the same bits for the
 * same row losses; the results never leave the device). dlogits may alias logits: every read of a row that is
 * not the thread's own element (max, sums, the target logit) is complete before the first write, and each
 * element is read and then written by the thread that owns it. */
#include "kernels/cuda/cuda_device.h"

/* Row max and sum of exp(x - max) over columns [0, n) of a row (n > 0), every thread gets both. */
static __device__ void row_max_sumexp(const void *row, int bf, int64_t n, float *mx_out, double *se_out,
                                      float *shf, double *shd) {
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += LCX_CUDA_THREADS) {
        float v = lcx_dev_load(row, j, bf);
        mx = v > mx ? v : mx;
    }
    mx = lcx_dev_block_max(mx, shf);
    double se = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += LCX_CUDA_THREADS)
        se = __dadd_rn(se, (double)expf(__fsub_rn(lcx_dev_load(row, j, bf), mx)));
    *se_out = lcx_dev_block_sum(se, shd);
    *mx_out = mx;
}

/* Whole rows: a target outside [0, vocab) counts as ignored (loss 0, dlogits 0). */
static __global__ void xent_whole(int bf, int64_t vocab, float dscale, const void *logits, const int32_t *targets,
                                  void *dlogits, double *row_loss) {
    __shared__ double shd[LCX_CUDA_THREADS];
    __shared__ float shf[LCX_CUDA_THREADS];
    const int64_t r = blockIdx.x, off = r * vocab, t = targets[r];
    if (t < 0 || t >= vocab) {
        if (dlogits)
            for (int64_t j = threadIdx.x; j < vocab; j += LCX_CUDA_THREADS) lcx_dev_store(dlogits, off + j, 0.0f, bf);
        if (threadIdx.x == 0) row_loss[r] = 0.0;
        return;
    }
    const float xt = lcx_dev_load(logits, off + t, bf); /* read before any write (the sums below sync) */
    float mx;
    double se;
    row_max_sumexp((const char *)logits + off * (bf ? 2 : 4), bf, vocab, &mx, &se, shf, shd);
    const double lse = (double)mx + log(se);
    if (threadIdx.x == 0) row_loss[r] = lse - (double)xt;
    if (!dlogits) return;
    const float w = (float)((double)dscale / se);
    for (int64_t j = threadIdx.x; j < vocab; j += LCX_CUDA_THREADS) {
        float d = j == t ? (float)((double)dscale * (exp((double)xt - lse) - 1.0))
                         : __fmul_rn(w, expf(__fsub_rn(lcx_dev_load(logits, off + j, bf), mx)));
        lcx_dev_store(dlogits, off + j, d, bf);
    }
}

/* STATS (f32): {max, sum exp(x - max), x[target] or 0} over the shard's n_valid columns; ignored rows all 0. */
static __global__ void xent_stats(int64_t vocab, int64_t n_valid, int64_t vocab_start, const float *logits,
                                  const int32_t *targets, double *stats) {
    __shared__ double shd[LCX_CUDA_THREADS];
    __shared__ float shf[LCX_CUDA_THREADS];
    const int64_t r = blockIdx.x, tg = targets[r], t = tg - vocab_start;
    double *st = stats + r * 3;
    if (tg < 0) {
        if (threadIdx.x == 0) st[0] = st[1] = st[2] = 0.0;
        return;
    }
    float mx = -INFINITY;
    double se = 0.0;
    if (n_valid > 0) row_max_sumexp(logits + r * vocab, 0, n_valid, &mx, &se, shf, shd);
    if (threadIdx.x == 0) {
        st[0] = mx;
        st[1] = se;
        st[2] = t >= 0 && t < n_valid ? (double)logits[r * vocab + t] : 0.0;
    }
}

/* FINISH (f32): the global log-sum-exp from the tp ranks' stats in rank order, dlogits of this shard. */
static __global__ void xent_finish(int64_t n_rows, int64_t vocab, int64_t n_valid, int64_t vocab_start, int tp,
                                   float dscale, const float *logits, const int32_t *targets, const double *stats,
                                   float *dlogits, double *row_loss) {
    const int64_t r = blockIdx.x, off = r * vocab, tg = targets[r], t = tg - vocab_start;
    if (tg < 0) { /* ignored */
        if (dlogits)
            for (int64_t j = threadIdx.x; j < vocab; j += LCX_CUDA_THREADS) dlogits[off + j] = 0.0f;
        if (threadIdx.x == 0) row_loss[r] = 0.0;
        return;
    }
    double gmx = -INFINITY, xt = 0.0, se = 0.0;
    for (int k = 0; k < tp; k++) {
        const double m = stats[((int64_t)k * n_rows + r) * 3];
        gmx = m > gmx ? m : gmx;
    }
    for (int k = 0; k < tp; k++) {
        const double *s = stats + ((int64_t)k * n_rows + r) * 3;
        if (s[1] > 0) se = __dadd_rn(se, __dmul_rn(s[1], exp(s[0] - gmx)));
        xt = __dadd_rn(xt, s[2]);
    }
    const double lse = gmx + log(se);
    if (threadIdx.x == 0) row_loss[r] = lse - xt;
    if (!dlogits) return;
    /* dlogits may alias logits: each element is read and written by its own thread, and nothing else of the row
     * is read here */
    const float mx = (float)gmx, w = (float)((double)dscale / se);
    for (int64_t j = threadIdx.x; j < vocab; j += LCX_CUDA_THREADS) {
        float d = 0.0f;
        if (j == t) d = (float)((double)dscale * (exp(xt - lse) - 1.0));
        else if (j < n_valid) d = __fmul_rn(w, expf(__fsub_rn(logits[off + j], mx)));
        dlogits[off + j] = d;
    }
}

/* One thread: the row losses in row order, and the counted rows, added to the device results. whole: a row
 * counts when its target is in [0, vocab); FINISH: when it is not negative (as the CPU counts them). */
static __global__ void xent_total(int64_t n_rows, int64_t vocab, int whole, const int32_t *targets,
                                  const double *row_loss, double *loss_sum, int64_t *count) {
    double sum = 0.0;
    int64_t cnt = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        sum = __dadd_rn(sum, row_loss[r]);
        cnt += whole ? targets[r] >= 0 && targets[r] < vocab : targets[r] >= 0;
    }
    *loss_sum = __dadd_rn(*loss_sum, sum);
    *count += cnt;
}

extern "C" cudaError_t lcx_cuda_cross_entropy_launch(cudaStream_t s, const lcx_xent_args *a, void *scratch) {
    const int64_t n_rows = a->n_rows, vocab = a->vocab;
    if (n_rows <= 0) return cudaSuccess;
    const unsigned rows = (unsigned)n_rows;
    double *row_loss = (double *)scratch;
    if (a->phase == LCX_XENT_STATS) {
        xent_stats<<<rows, LCX_CUDA_THREADS, 0, s>>>(vocab, a->n_valid, a->vocab_start, (const float *)a->logits,
                                                     a->targets, a->stats);
        return cudaGetLastError();
    }
    if (a->phase == LCX_XENT_FINISH)
        xent_finish<<<rows, LCX_CUDA_THREADS, 0, s>>>(n_rows, vocab, a->n_valid, a->vocab_start, a->tp, a->dscale,
                                                      (const float *)a->logits, a->targets, a->stats,
                                                      (float *)a->dlogits, row_loss);
    else
        xent_whole<<<rows, LCX_CUDA_THREADS, 0, s>>>(a->dt == LCX_BF16, vocab, a->dscale, a->logits, a->targets,
                                                     a->dlogits, row_loss);
    xent_total<<<1, 1, 0, s>>>(n_rows, vocab, a->phase == LCX_XENT_WHOLE, a->targets, row_loss, a->loss_sum,
                               a->count);
    return cudaGetLastError();
}
