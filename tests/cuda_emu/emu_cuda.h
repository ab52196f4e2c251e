/* emu_cuda.h: the CUDA subset the kernels of kernels/cuda use, emulated on the CPU for tests/cuda_emu (stands in for
 * <cuda_runtime.h> in the kernels' translation units). One std::thread per CUDA thread (blocks of up to three
 * dimensions, x fastest), the blocks of a launch one after another: __syncthreads and __syncwarp are real
 * barriers, a kernel's `__shared__` arrays are function statics (one copy, which the block's threads share and
 * the next block reuses), warp shuffles go through a per-warp slot array between two barriers (so a
 * shuffle that not every lane of the warp reaches hangs instead of passing), dynamic shared memory is a fresh
 * buffer of exactly the launch's size filled with NaN (AddressSanitizer catches a read or write past it, a read
 * of an unwritten float shows as NaN in the results). A kernel asking for more than sm_80's 163 KiB fails like
 * cudaFuncSetAttribute would. The tensor-core kernels' mma.sync, ldmatrix and cp.async are emulated from their
 * register layouts and group semantics, the ordered sums' wait and post from launch order (below). Float
 * intrinsics are the host's IEEE operations; expf/logf are glibc's. */
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <barrier>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "emu_runtime.h" /* the runtime API (host side: emu_runtime.cpp) */

#define LCX_CUDA_EMU 1 /* cuda_mma.h, cuda_cp_async.h, cuda_order.h: mma.sync, ldmatrix, cp.async and the ordered
                        * sums come from here */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(x)

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct emu_idx {
    unsigned x, y, z;
};
inline thread_local emu_idx threadIdx, blockIdx;
inline dim3 gridDim, blockDim;
inline std::unique_ptr<std::barrier<>> emu_block_bar;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bar;
inline double emu_shfl[32][32];
inline float *emu_smem;                  /* the kernels' `extern __shared__ float sm[]` (run.sh rewrites it) */
inline size_t emu_smem_bytes;            /* its size */
inline size_t emu_smem_limit = 48 * 1024; /* raised by cudaFuncSetAttribute for the next launch */
inline size_t emu_max_smem = 0;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp() { emu_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
template <class T> T __shfl_xor_sync(unsigned, T v, int off) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    T *slot = (T *)emu_shfl[w];
    slot[l] = v;
    emu_warp_bar[w]->arrive_and_wait();
    T r = slot[l ^ (unsigned)off];
    emu_warp_bar[w]->arrive_and_wait();
    return r;
}
/* mma.sync m16n8k16 bf16 -> f32 (kernels/cuda/cuda_mma.h has the fragment layouts): every lane parks its A and
 * B fragment registers, then computes its four accumulators from the warp's fragments, each as a float32 fmaf
 * chain over k in order (the tensor core's own summation order and internal precision are not emulated). */
inline uint32_t emu_mma_frag[32][32][6];
inline float emu_bf16_half(uint32_t reg, int hi) { return __builtin_bit_cast(float, ((reg >> (16 * hi)) & 0xffffu) << 16); }
inline void lcx_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    uint32_t *mine = emu_mma_frag[w][l];
    mine[0] = a[0], mine[1] = a[1], mine[2] = a[2], mine[3] = a[3], mine[4] = b0, mine[5] = b1;
    emu_warp_bar[w]->arrive_and_wait();
    auto A = [&](int r, int k) { return emu_bf16_half(emu_mma_frag[w][(r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)], k & 1); };
    auto B = [&](int k, int n) { return emu_bf16_half(emu_mma_frag[w][n * 4 + (k % 8) / 2][4 + (k >= 8)], k & 1); };
    const int g = (int)l / 4, t = (int)l % 4;
    for (int c = 0; c < 4; c++) {
        const int r = g + 8 * (c >= 2), n = 2 * t + (c & 1);
        float acc = d[c];
        for (int k = 0; k < 16; k++) acc = fmaf(A(r, k), B(k, n), acc);
        d[c] = acc;
    }
    emu_warp_bar[w]->arrive_and_wait();
}
/* ldmatrix.x4 (kernels/cuda/cuda_mma.h): every lane parks its row address (which must lie in the launch's shared
 * memory, 16-byte aligned), then reads its four registers from the rows the warp gave. */
inline const uint16_t *emu_ldm_row[32][32];
inline void emu_check_shared(const void *p, size_t n, const char *what) {
    const char *b = (const char *)emu_smem, *q = (const char *)p;
    if (((uintptr_t)p & 15) || q < b || q + n > b + emu_smem_bytes) {
        fprintf(stderr, "%s: %p is not a 16-byte aligned place of %zu bytes in shared memory\n", what, p, n);
        abort();
    }
}
inline void emu_ldmatrix(uint32_t (&r)[4], const uint16_t *row, bool trans) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    emu_check_shared(row, 16, "ldmatrix");
    emu_ldm_row[w][l] = row;
    emu_warp_bar[w]->arrive_and_wait();
    for (unsigned i = 0; i < 4; i++) {
        const uint16_t *const *m = emu_ldm_row[w] + 8 * i; /* matrix i's eight rows */
        r[i] = trans ? (uint32_t)m[2 * t][g] | (uint32_t)m[2 * t + 1][g] << 16
                     : (uint32_t)m[g][2 * t] | (uint32_t)m[g][2 * t + 1] << 16;
    }
    emu_warp_bar[w]->arrive_and_wait();
}
inline void lcx_ldmatrix_x4(uint32_t (&r)[4], const uint16_t *row) { emu_ldmatrix(r, row, false); }
inline void lcx_ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t *row) { emu_ldmatrix(r, row, true); }

/* cp.async (kernels/cuda/cuda_cp_async.h): each copy waits in its thread's groups and is done by the first wait
 * that must cover it, the latest moment a GPU may do it, so a read before the wait (or before the barrier after
 * it) sees the NaN the launch filled shared memory with. */
struct emu_cp {
    void *dst;
    const void *src;
};
inline thread_local std::vector<emu_cp> emu_cp_open;
inline thread_local std::deque<std::vector<emu_cp>> emu_cp_groups;
inline void lcx_cp_async16(void *dst, const void *src) {
    emu_check_shared(dst, 16, "cp.async");
    if ((uintptr_t)src & 15) {
        fprintf(stderr, "cp.async: global source %p is not 16-byte aligned\n", src);
        abort();
    }
    emu_cp_open.push_back({dst, src});
}
inline void lcx_cp_async_commit() {
    emu_cp_groups.push_back(std::move(emu_cp_open));
    emu_cp_open.clear();
}
template <int N> void lcx_cp_async_wait() {
    while (emu_cp_groups.size() > (size_t)N) {
        for (const emu_cp &c : emu_cp_groups.front()) memcpy(c.dst, c.src, 16);
        emu_cp_groups.pop_front();
    }
}

/* Ordered sums across blocks (kernels/cuda/cuda_order.h). The blocks run in launch order, so a wait that is not
 * met at once waits for a later block: a GPU may deadlock on it (that block need not be resident), so stop. */
inline void lcx_order_wait(const int *counter, int rank) {
    if (threadIdx.x == 0 && *counter != rank) {
        fprintf(stderr, "lcx_order_wait: block (%u, %u, %u) waits for counter %d to reach %d: only a later block can "
                "post it\n", blockIdx.x, blockIdx.y, blockIdx.z, *counter, rank);
        abort();
    }
    __syncthreads();
}
inline void lcx_order_post(int *counter) {
    __syncthreads();
    if (threadIdx.x == 0) ++*counter;
}
template <class T> T __ldcg(const T *p) { return *p; }
template <class T> void __stcg(T *p, T v) { *p = v; }

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
template <class K> cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int v) {
    if (v > 163 * 1024) return cudaErrorInvalidValue;
    emu_smem_limit = (size_t)v;
    return cudaSuccess;
}

/* kernel<<<grid, block, smem, stream>>>(args...), rewritten by run.sh into this call. */
template <class K, class... A> void emu_launch(K kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t, A... args) {
    if (smem > emu_smem_limit) {
        fprintf(stderr, "emu_launch: %zu bytes of shared memory without the opt-in (limit %zu)\n", smem,
                emu_smem_limit);
        abort();
    }
    emu_max_smem = smem > emu_max_smem ? smem : emu_max_smem;
    emu_smem_limit = 48 * 1024;
    gridDim = grid;
    blockDim = block;
    /* one host thread per CUDA thread of a block, for the whole launch: the threads walk the blocks in order,
     * meeting at the block barrier before each (so a block's shared arrays are not rewritten while an earlier
     * block still reads them) */
    const unsigned nt = block.x * block.y * block.z;
    emu_block_bar = std::make_unique<std::barrier<>>(nt);
    emu_warp_bar.clear();
    for (unsigned w = 0; w < (nt + 31) / 32; w++)
        emu_warp_bar.push_back(std::make_unique<std::barrier<>>(nt - 32 * w < 32 ? nt - 32 * w : 32));
    float *sb = (float *)malloc(smem ? smem : 4);
    emu_smem = sb;
    emu_smem_bytes = smem;
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; t++)
        th.emplace_back([=] {
            threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            for (unsigned bz = 0; bz < grid.z; bz++)
                for (unsigned by = 0; by < grid.y; by++)
                    for (unsigned bx = 0; bx < grid.x; bx++) {
                        blockIdx = {bx, by, bz};
                        emu_block_bar->arrive_and_wait();
                        if (t == 0)
                            for (size_t i = 0; i < smem / 4; i++) sb[i] = NAN;
                        emu_block_bar->arrive_and_wait();
                        emu_cp_open.clear(), emu_cp_groups.clear(); /* nothing in flight into the new block */
                        kernel(args...);
                    }
        });
    for (auto &x : th) x.join();
    free(sb);
}
