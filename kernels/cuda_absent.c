/* CPU-only builds: the CUDA entry points exist and report that no device is available (the registry,
 * kernels/backend.c, lists no CUDA table). */
#ifndef LCX_HAVE_CUDA
#include "kernels/cuda/cuda_runtime_info.h"

int lcx_cuda_device_count(void) { return 0; }

int lcx_cuda_cast_f32_to_bf16_host(const float *src, uint16_t *dst, size_t n) {
    (void)src; (void)dst; (void)n;
    return -1;
}

int lcx_cuda_cast_f32_to_f16_host(const float *src, uint16_t *dst, size_t n) {
    (void)src; (void)dst; (void)n;
    return -1;
}
#else
typedef int lcx_cuda_absent_unused; /* ISO C forbids an empty translation unit */
#endif
