/* cuda_elementwise: the cast between float32 and bf16, and add/scale/axpy on activations; one thread per element
 * (grid-stride), the CPU's float32 expression with the same roundings (kernels/cpu/cpu_elementwise.c). */
#include "kernels/cuda/cuda_device.h"

static __global__ void cast_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) {
    LCX_CUDA_FOR(i, n) dst[i] = lcx_dev_f32_to_bf16(src[i]);
}

static __global__ void cast_bf16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    LCX_CUDA_FOR(i, n) dst[i] = lcx_dev_bf16_to_f32(src[i]);
}

extern "C" cudaError_t lcx_cuda_cast_launch(cudaStream_t s, const lcx_cast_args *a) {
    const int64_t n = a->n;
    if (n <= 0) return cudaSuccess;
    if (a->src_dt == a->dst_dt)
        return cudaMemcpyAsync(a->dst, a->src, (size_t)n * lcx_act_size(a->src_dt), cudaMemcpyDeviceToDevice, s);
    const unsigned blocks = lcx_cuda_blocks(n, LCX_CUDA_THREADS);
    if (a->src_dt == LCX_F32)
        cast_f32_to_bf16<<<blocks, LCX_CUDA_THREADS, 0, s>>>((const float *)a->src, (uint16_t *)a->dst, n);
    else
        cast_bf16_to_f32<<<blocks, LCX_CUDA_THREADS, 0, s>>>((const uint16_t *)a->src, (float *)a->dst, n);
    return cudaGetLastError();
}

/* kind 0: out = a + b; 1: out = alpha * a; 2: out += alpha * a (out may alias a or b: each element is read and
 * written by one thread). */
static __global__ void elementwise(int kind, int bf, int64_t n, float alpha, const void *pa, const void *pb,
                                   void *out) {
    LCX_CUDA_FOR(i, n) {
        float x = lcx_dev_load(pa, i, bf), r;
        if (kind == 0) r = __fadd_rn(x, lcx_dev_load(pb, i, bf));
        else if (kind == 1) r = __fmul_rn(x, alpha);
        else r = __fadd_rn(lcx_dev_load(out, i, bf), __fmul_rn(alpha, x));
        lcx_dev_store(out, i, r, bf);
    }
}

extern "C" cudaError_t lcx_cuda_elementwise_launch(cudaStream_t s, int kind, const lcx_elementwise_args *a) {
    const int64_t n = a->n;
    if (n <= 0) return cudaSuccess;
    elementwise<<<lcx_cuda_blocks(n, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(kind, a->dt == LCX_BF16, n, a->alpha,
                                                                                 a->a, a->b, a->out);
    return cudaGetLastError();
}
