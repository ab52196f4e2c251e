/* cuda_swiglu: h = silu(gate) * up and its backward, one thread per element (kernels/cpu/cpu_swiglu.c). The
 * sigmoid uses CUDA's expf (within 2 ulp; the CPU uses libm's); the rest is the CPU's float32 expression. Aliased
 * outputs are fine: each element is read, then written, by one thread. */
#include "kernels/cuda/cuda_device.h"

static __device__ __forceinline__ float sigmoid(float g) { return 1.0f / __fadd_rn(1.0f, expf(-g)); }

static __global__ void swiglu_fwd(int bf, int64_t n, const void *gate, const void *up, void *h) {
    LCX_CUDA_FOR(i, n) {
        const float g = lcx_dev_load(gate, i, bf), u = lcx_dev_load(up, i, bf);
        lcx_dev_store(h, i, __fmul_rn(__fmul_rn(g, sigmoid(g)), u), bf);
    }
}

/* d/dg silu(g) = s (1 + g (1 - s)), s = sigmoid(g). */
static __global__ void swiglu_bwd(int bf, int64_t n, const void *dh, const void *gate, const void *up, void *dgate,
                                  void *dup) {
    LCX_CUDA_FOR(i, n) {
        const float g = lcx_dev_load(gate, i, bf), u = lcx_dev_load(up, i, bf), d = lcx_dev_load(dh, i, bf);
        const float s = sigmoid(g);
        const float dg = __fmul_rn(__fmul_rn(__fmul_rn(d, u), s), __fadd_rn(1.0f, __fmul_rn(g, __fsub_rn(1.0f, s))));
        const float du = __fmul_rn(__fmul_rn(d, g), s);
        lcx_dev_store(dgate, i, dg, bf);
        lcx_dev_store(dup, i, du, bf);
    }
}

extern "C" cudaError_t lcx_cuda_swiglu_fwd_launch(cudaStream_t s, const lcx_swiglu_args *a) {
    if (a->n <= 0) return cudaSuccess;
    swiglu_fwd<<<lcx_cuda_blocks(a->n, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(a->dt == LCX_BF16, a->n, a->gate,
                                                                                   a->up, a->h);
    return cudaGetLastError();
}

extern "C" cudaError_t lcx_cuda_swiglu_bwd_launch(cudaStream_t s, const lcx_swiglu_args *a) {
    if (a->n <= 0) return cudaSuccess;
    swiglu_bwd<<<lcx_cuda_blocks(a->n, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(
        a->dt == LCX_BF16, a->n, a->dh, a->gate, a->up, a->dgate, a->dup);
    return cudaGetLastError();
}
