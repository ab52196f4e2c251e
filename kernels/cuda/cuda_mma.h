/* cuda_mma: the tensor-core matrix multiply-accumulate the tensor-core attention kernels use (sm_80 and later):
 * mma.sync m16n8k16, bf16 inputs, float32 accumulators, and the register layouts of its fragments. Included by .cu
 * files only. tests/cuda_emu emulates lcx_mma_bf16 and the ldmatrix loads for the CPU (LCX_CUDA_EMU), so the
 * kernels' fragment indexing is tested without a GPU.
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

#ifndef LCX_CUDA_EMU
/* Four 8 x 8 bf16 matrices from shared memory, one register each (ldmatrix.x4, the whole warp calls it): lane l
 * gives the address of row l % 8 of matrix l / 8 (16-byte aligned); register i of lane 4 g + t holds row g,
 * columns 2t, 2t+1 of matrix i, which is a B fragment register when the matrix's rows are B's columns (K for
 * Q K^T). */
static __device__ __forceinline__ void lcx_ldmatrix_x4(uint32_t (&r)[4], const uint16_t *row) {
    const uint32_t at = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
}
/* The same, transposed: register i of lane 4 g + t holds rows 2t, 2t+1 of column g of matrix i, which is a B
 * fragment register when the matrix's rows are B's rows (V for P V, read in its row-major layout). */
static __device__ __forceinline__ void lcx_ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t *row) {
    const uint32_t at = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
}

/* d += A B for one 16 x 8 x 16 tile (the whole warp calls it with its fragments). */
static __device__ __forceinline__ void lcx_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

/* The A fragment of the 16 x 16 tile at rows r0.., columns c0.. of a row-major bf16 tile in shared memory (row
 * stride ld elements, rows 16-byte aligned), by one ldmatrix: matrix i = lane / 8 is rows r0 + 8 (i % 2)..,
 * columns c0 + 8 (i / 2)... The whole warp calls it. */
static __device__ __forceinline__ void lcx_mma_frag_a(uint32_t (&f)[4], const uint16_t *base, int ld, int r0, int c0) {
    const int lane = threadIdx.x % 32;
    lcx_ldmatrix_x4(f, base + (r0 + lane / 8 % 2 * 8 + lane % 8) * ld + c0 + lane / 16 * 8);
}

#endif /* LCX_KERNELS_CUDA_MMA_H */
