/* cuda_sqnorm: *out += sum of x^2 in double, in a fixed order (kernels/cpu/cpu_sqnorm.c): one CUDA block per
 * LCX_CUDA_NORM_BLOCK elements forms its partial in double (per-thread strided sums, then a fixed tree), the
 * partials go to the arena, and one thread adds them in block order and adds the total to *out. The same bits on
 * every run; against the CPU (which sums each block serially) only the order inside a block differs. */
#include "kernels/cuda/cuda_device.h"

static __global__ void sqnorm_partials(const float *x, int64_t n, double *part) {
    __shared__ double sh[LCX_CUDA_THREADS];
    const int64_t i0 = (int64_t)blockIdx.x * LCX_CUDA_NORM_BLOCK;
    const int64_t i1 = i0 + LCX_CUDA_NORM_BLOCK < n ? i0 + LCX_CUDA_NORM_BLOCK : n;
    double acc = 0.0;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += LCX_CUDA_THREADS) {
        double v = (double)x[i];
        acc = __dadd_rn(acc, __dmul_rn(v, v));
    }
    double total = lcx_dev_block_sum(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = total;
}

static __global__ void sqnorm_finish(const double *part, int64_t nb, double *out) {
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s = __dadd_rn(s, part[b]);
    *out = __dadd_rn(*out, s);
}

extern "C" cudaError_t lcx_cuda_sqnorm_launch(cudaStream_t s, const lcx_sqnorm_args *a, void *scratch) {
    const int64_t n = a->n, nb = (n + LCX_CUDA_NORM_BLOCK - 1) / LCX_CUDA_NORM_BLOCK;
    if (n <= 0) return cudaSuccess;
    double *part = (double *)scratch;
    sqnorm_partials<<<(unsigned)nb, LCX_CUDA_THREADS, 0, s>>>(a->x, n, part);
    sqnorm_finish<<<1, 1, 0, s>>>(part, nb, a->out);
    return cudaGetLastError();
}
