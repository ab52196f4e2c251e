/* cuda_order: blocks of one launch that add into the same sums in global memory in a fixed order, so that the
 * result does not depend on how the GPU schedules them (deterministic without float atomics). Each sum has a
 * counter in global memory, zeroed before the launch; a block waits until the counter equals its rank among the
 * sum's contributors, adds, and posts (counter + 1). Included by .cu files only; tests/cuda_emu emulates both calls.
 *
 * Deadlock-free only if every block waits for blocks earlier in launch order (lower linear block index), which a
 * GPU starts no later than the waiting one (the assumption of FlashAttention 3's deterministic backward too).
 * tests/cuda_emu runs the blocks in launch order and stops at any wait that is not met already, i.e. a wait for a
 * later block. The sums themselves are read and written through L2 (__ldcg, __stcg): L1 is not coherent across
 * SMs. */
#ifndef LCX_KERNELS_CUDA_ORDER_H
#define LCX_KERNELS_CUDA_ORDER_H

#include <cuda_runtime.h>

#ifndef LCX_CUDA_EMU
/* Every thread of the block calls it; returns when `counter` equals rank (the block's earlier-ranked contributors
 * have posted), their writes visible to every thread of this block. */
static __device__ __forceinline__ void lcx_order_wait(const int *counter, int rank) {
    if (threadIdx.x == 0)
        while (*(const volatile int *)counter != rank) __nanosleep(32);
    __threadfence();
    __syncthreads();
}

/* Every thread of the block calls it after its writes to the sum: each makes its own writes visible device-wide,
 * then one thread posts. */
static __device__ __forceinline__ void lcx_order_post(int *counter) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(counter, 1);
}
#endif

#endif /* LCX_KERNELS_CUDA_ORDER_H */
