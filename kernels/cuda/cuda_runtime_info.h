/* CUDA backend entry points that exist in every build: without CUDA they report "no device".
 * Implemented in kernels/cuda/cuda_cast.cu (CUDA builds) or kernels/cuda_absent.c (CPU-only builds). */
#ifndef LCX_KERNELS_CUDA_RUNTIME_INFO_H
#define LCX_KERNELS_CUDA_RUNTIME_INFO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (0 in CPU-only builds or when the driver finds none). */
int lcx_cuda_device_count(void);

/* Convert n floats on the host to bf16 / f16 bits on the host, through the GPU (round to nearest even).
 * Returns 0 on success, -1 on any CUDA error (or in CPU-only builds). Used to compare the GPU casts against the
 * CPU reference (src/core/tensor.h). */
int lcx_cuda_cast_f32_to_bf16_host(const float *src, uint16_t *dst, size_t n);
int lcx_cuda_cast_f32_to_f16_host(const float *src, uint16_t *dst, size_t n);

#ifdef __cplusplus
}
#endif

#endif
