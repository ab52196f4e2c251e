/* cuda_cp_async: asynchronous copies from global to shared memory (sm_80 and later), so a kernel loads its next
 * tile while it computes on the current one. Included by .cu files only; tests/cuda_emu emulates them for the CPU
 * (LCX_CUDA_EMU) with each copy deferred to the wait that must cover it, so a missing wait reads stale data there.
 *
 * Use: lcx_cp_async16 (any number), lcx_cp_async_commit closes them into a group; lcx_cp_async_wait<N> returns
 * when at most the N newest groups of this thread are still in flight. Other threads see the data only after
 * their own wait and a __syncthreads. */
#ifndef LCX_KERNELS_CUDA_CP_ASYNC_H
#define LCX_KERNELS_CUDA_CP_ASYNC_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifndef LCX_CUDA_EMU
/* 16 bytes from global src to shared dst, both 16-byte aligned; bypasses L1 (.cg), as tiles are read once. */
static __device__ __forceinline__ void lcx_cp_async16(void *dst, const void *src) {
    const uint32_t at = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at), "l"(src));
}
static __device__ __forceinline__ void lcx_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> static __device__ __forceinline__ void lcx_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

#endif /* LCX_KERNELS_CUDA_CP_ASYNC_H */
