/* cuda_rmsnorm: y = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps), and its backward (kernels/cpu/cpu_rmsnorm.c).
 * Forward: one block per row; the sum of squares in double over a fixed tree (lcx_dev_block_sum), then every
 * element with the CPU's float32 expression. Backward: first dw (each thread owns one column and sums over the
 * rows in row order in double, as the CPU does: the same bits), then dx, one block per row (its dot product in
 * double over the fixed tree). dw goes first because dx may alias dy; within the dx kernel each element of the
 * row is read and then written by the same thread, after the row's dot product is complete. */
#include "kernels/cuda/cuda_device.h"

static __global__ void rmsnorm_fwd(int bf, int64_t dim, float eps, const void *x, const float *w, void *y,
                                   float *rstd) {
    __shared__ double sh[LCX_CUDA_THREADS];
    const int64_t r = blockIdx.x, off = r * dim;
    double ss = 0.0;
    for (int64_t d = threadIdx.x; d < dim; d += LCX_CUDA_THREADS) {
        double v = (double)lcx_dev_load(x, off + d, bf);
        ss = __dadd_rn(ss, __dmul_rn(v, v));
    }
    ss = lcx_dev_block_sum(ss, sh); /* y may alias x: every read of the row is done before the first write */
    const float rs = 1.0f / sqrtf(__fadd_rn((float)(ss / (double)dim), eps));
    for (int64_t d = threadIdx.x; d < dim; d += LCX_CUDA_THREADS)
        lcx_dev_store(y, off + d, __fmul_rn(w[d], __fmul_rn(lcx_dev_load(x, off + d, bf), rs)), bf);
    if (rstd && threadIdx.x == 0) rstd[r] = rs;
}

extern "C" cudaError_t lcx_cuda_rmsnorm_fwd_launch(cudaStream_t s, const lcx_rmsnorm_args *a) {
    if (a->n_rows <= 0) return cudaSuccess;
    rmsnorm_fwd<<<(unsigned)a->n_rows, LCX_CUDA_THREADS, 0, s>>>(a->dt == LCX_BF16, a->dim, a->eps, a->x, a->w, a->y,
                                                                 a->rstd);
    return cudaGetLastError();
}

/* dw[d] += sum over rows of dy[r, d] x[r, d] rstd[r], in double, rows in order. */
static __global__ void rmsnorm_bwd_dw(int bf, int64_t n_rows, int64_t dim, const void *x, const void *dy,
                                      const float *rstd, float *dw) {
    LCX_CUDA_FOR(d, dim) {
        double acc = 0.0;
        for (int64_t r = 0; r < n_rows; r++) {
            double g = (double)lcx_dev_load(dy, r * dim + d, bf), xv = (double)lcx_dev_load(x, r * dim + d, bf);
            acc = __dadd_rn(acc, __dmul_rn(__dmul_rn(g, xv), (double)rstd[r]));
        }
        dw[d] = __fadd_rn(dw[d], (float)acc);
    }
}

/* dx = rstd (w dy) - rstd^3 / dim * x * sum_k(w_k dy_k x_k). */
static __global__ void rmsnorm_bwd_dx(int bf, int64_t dim, const void *x, const float *w, const float *rstd,
                                      const void *dy, void *dx) {
    __shared__ double sh[LCX_CUDA_THREADS];
    const int64_t r = blockIdx.x, off = r * dim;
    double dot = 0.0;
    for (int64_t d = threadIdx.x; d < dim; d += LCX_CUDA_THREADS) {
        double p = __dmul_rn((double)w[d], (double)lcx_dev_load(dy, off + d, bf));
        dot = __dadd_rn(dot, __dmul_rn(p, (double)lcx_dev_load(x, off + d, bf)));
    }
    dot = lcx_dev_block_sum(dot, sh);
    const float rs = rstd[r];
    const float c = __fmul_rn(__fmul_rn(__fmul_rn((float)(dot / (double)dim), rs), rs), rs);
    for (int64_t d = threadIdx.x; d < dim; d += LCX_CUDA_THREADS) {
        float g = lcx_dev_load(dy, off + d, bf), xv = lcx_dev_load(x, off + d, bf);
        lcx_dev_store(dx, off + d, __fsub_rn(__fmul_rn(rs, __fmul_rn(w[d], g)), __fmul_rn(c, xv)), bf);
    }
}

extern "C" cudaError_t lcx_cuda_rmsnorm_bwd_launch(cudaStream_t s, const lcx_rmsnorm_args *a) {
    if (a->n_rows <= 0) return cudaSuccess;
    const int bf = a->dt == LCX_BF16;
    rmsnorm_bwd_dw<<<lcx_cuda_blocks(a->dim, 128), 128, 0, s>>>(bf, a->n_rows, a->dim, a->x, a->dy, a->rstd, a->dw);
    rmsnorm_bwd_dx<<<(unsigned)a->n_rows, LCX_CUDA_THREADS, 0, s>>>(bf, a->dim, a->x, a->w, a->rstd, a->dy, a->dx);
    return cudaGetLastError();
}
