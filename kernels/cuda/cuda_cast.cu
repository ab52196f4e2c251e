/* GPU casts f32 -> bf16 / f16 with the hardware's round-to-nearest-even intrinsics. The CPU reference is
 * lcx_f32_to_bf16 / lcx_f32_to_f16 in src/core/tensor.h; tests/unit/test_cast_cuda.c compares the two bit for bit. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_runtime_info.h"

static __global__ void cast_f32_to_bf16_kernel(const float *src, uint16_t *dst, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

static __global__ void cast_f32_to_f16_kernel(const float *src, uint16_t *dst, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __half_as_ushort(__float2half_rn(src[i]));
}

extern "C" int lcx_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

/* Copy in, launch, copy out; every step checked, buffers always freed. */
static int cast_through_device(const float *src, uint16_t *dst, size_t n, int to_bf16) {
    float *d_src = NULL;
    uint16_t *d_dst = NULL;
    int ok = 0;
    if (n == 0) return 0;
    if (cudaMalloc((void **)&d_src, n * sizeof(float)) != cudaSuccess) goto done;
    if (cudaMalloc((void **)&d_dst, n * sizeof(uint16_t)) != cudaSuccess) goto done;
    if (cudaMemcpy(d_src, src, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) goto done;
    {
        unsigned threads = 256;
        unsigned blocks = (unsigned)((n + threads - 1) / threads);
        if (to_bf16) cast_f32_to_bf16_kernel<<<blocks, threads>>>(d_src, d_dst, n);
        else cast_f32_to_f16_kernel<<<blocks, threads>>>(d_src, d_dst, n);
    }
    if (cudaGetLastError() != cudaSuccess) goto done;
    if (cudaMemcpy(dst, d_dst, n * sizeof(uint16_t), cudaMemcpyDeviceToHost) != cudaSuccess) goto done;
    ok = 1;
done:
    cudaFree(d_src);
    cudaFree(d_dst);
    if (!ok) cudaGetLastError();
    return ok ? 0 : -1;
}

extern "C" int lcx_cuda_cast_f32_to_bf16_host(const float *src, uint16_t *dst, size_t n) {
    return cast_through_device(src, dst, n, 1);
}

extern "C" int lcx_cuda_cast_f32_to_f16_host(const float *src, uint16_t *dst, size_t n) {
    return cast_through_device(src, dst, n, 0);
}
