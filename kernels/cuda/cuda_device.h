/* cuda_device: device helpers shared by the CUDA kernels (included by .cu files only).
 *
 * Activations are LCX_F32 or LCX_BF16 (kernels/backend.h): loads widen bf16 exactly, stores round to nearest
 * even with the same bit arithmetic as lcx_f32_to_bf16 (src/core/tensor.h), NaN kept quiet with its sign, so a
 * float32 result rounds to the same bf16 bits as on the CPU.
 *
 * Float arithmetic that the CPU reference does as separate operations is written with the _rn intrinsics
 * (__fmul_rn, __fadd_rn, ...): nvcc would otherwise contract a * b + c into one fma, which rounds differently
 * from the CPU build (no FMA contraction there). Where the CPU uses fmaf, so do the kernels. */
#ifndef LCX_KERNELS_CUDA_DEVICE_H
#define LCX_KERNELS_CUDA_DEVICE_H

#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"

/* Threads per block of the row kernels (a power of two: the tree reductions below need one). */
#define LCX_CUDA_THREADS 256

static __device__ __forceinline__ float lcx_dev_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

static __device__ __forceinline__ uint16_t lcx_dev_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep sign, quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Element i of an activation tensor of dtype bf (1: bf16, 0: f32), widened; and set to v. */
static __device__ __forceinline__ float lcx_dev_load(const void *p, int64_t i, int bf) {
    return bf ? lcx_dev_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static __device__ __forceinline__ void lcx_dev_store(void *p, int64_t i, float v, int bf) {
    if (bf) ((uint16_t *)p)[i] = lcx_dev_f32_to_bf16(v);
    else ((float *)p)[i] = v;
}

/* Sum of one double per thread over the block (blockDim.x == LCX_CUDA_THREADS), as a fixed tree: the same
 * result for the same inputs on every run. Every thread gets the sum. `sh` is LCX_CUDA_THREADS doubles of shared
 * memory, free again when this returns. */
static __device__ __forceinline__ double lcx_dev_block_sum(double v, double *sh) {
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned half = LCX_CUDA_THREADS / 2; half > 0; half /= 2) {
        if (t < half) sh[t] = __dadd_rn(sh[t], sh[t + half]);
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

/* Maximum of one float per thread over the block (NaN-free inputs: fmaxf), every thread gets it. */
static __device__ __forceinline__ float lcx_dev_block_max(float v, float *sh) {
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned half = LCX_CUDA_THREADS / 2; half > 0; half /= 2) {
        if (t < half) sh[t] = sh[t + half] > sh[t] ? sh[t + half] : sh[t];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* Blocks for a grid-stride loop over n elements (at least 1, at most 65535 * 16 blocks: the loop does the rest). */
static inline unsigned lcx_cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535 * 16) b = 65535 * 16;
    return (unsigned)b;
}

/* The grid-stride loop's index and step. */
#define LCX_CUDA_FOR(i, n)                                                                                     \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#endif /* LCX_KERNELS_CUDA_DEVICE_H */
