/* cuda_mma: the tensor-core matrix multiply-accumulate the tensor-core attention kernels use (sm_80 and later):
 * mma.sync m16n8k16, bf16 inputs, float32 accumulators, and the register layouts of its fragments. Included by .cu
 * files only. tests/cuda_emu emulates lcx_mma_bf16 for the CPU (LCX_CUDA_EMU), so the kernels' fragment
 * indexing is tested without a GPU.
 *
 * Fragments of one warp, lane = 4 g + t (g = lane / 4 in 0..7, t = lane % 4 in 0..3); a uint32_t holds two bf16,
 * the lower column (or k) in its low half:
 *   A (16 x 16, row-major): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
 *                           a[3] = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, k x n):      b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
 *   C, D (16 x 8, float):   c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][2t, 2t+1] */
#ifndef LCX_KERNELS_CUDA_MMA_H
#define LCX_KERNELS_CUDA_MMA_H

#include <stdint.h>

/* Two floats as the bf16 pair of a fragment register (round to nearest even, lo in the low half). */
static __device__ __forceinline__ uint32_t lcx_mma_pack(float lo, float hi) {
    return (uint32_t)lcx_dev_f32_to_bf16(lo) | (uint32_t)lcx_dev_f32_to_bf16(hi) << 16;
}

/* Two bf16 at p (4-byte aligned) as one fragment register. */
static __device__ __forceinline__ uint32_t lcx_mma_ld32(const uint16_t *p) { return *(const uint32_t *)p; }

/* The A fragment of the 16 x 16 tile at rows r0.., columns c0.. of a row-major bf16 tile in shared memory (row
 * stride ld elements). */
static __device__ __forceinline__ void lcx_mma_frag_a(uint32_t (&f)[4], const uint16_t *base, int ld, int r0, int c0) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const uint16_t *p = base + (r0 + g) * ld + c0 + 2 * t;
    f[0] = lcx_mma_ld32(p), f[1] = lcx_mma_ld32(p + 8 * ld), f[2] = lcx_mma_ld32(p + 8),
    f[3] = lcx_mma_ld32(p + 8 * ld + 8);
}

#ifndef LCX_CUDA_EMU
/* d += A B for one 16 x 8 x 16 tile (the whole warp calls it with its fragments). */
static __device__ __forceinline__ void lcx_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

#endif /* LCX_KERNELS_CUDA_MMA_H */
