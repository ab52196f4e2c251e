/* cuda_gemm_tiled: the matmul's simple, always-correct path (cuda_matmul.c uses cuBLASLt wherever it can):
 * operand dtype mixes cuBLASLt has no kernel for (f32 with bf16; bf16 C from f32 operands), k = 0, a C shared by
 * every batch entry, and shapes or pointer alignments for which cuBLASLt's heuristic offers no algorithm.
 *
 * One 16 x 16 tile of C per block, one element per thread; op(A) and op(B) pass through shared memory 16 columns
 * of the reduction at a time, widened to float32, and each thread accumulates its dot product in float32 (fmaf,
 * in k order). The epilogue is the CPU's: alpha * acc + beta * C, with C not read when beta is 0 (NaN there is
 * ignored) and k = 0 giving beta * C. Not tuned: it exists so that no argument the contract allows fails. */
#include "kernels/cuda/cuda_device.h"

enum { TILE = 16 };

/* Blocks for `tiles` tiles along one grid dimension (the kernel's loops take the rest). */
static unsigned grid_dim(int64_t tiles, int64_t cap) { return (unsigned)(tiles < 1 ? 1 : tiles < cap ? tiles : cap); }

static __global__ void gemm_tiled(lcx_matmul_args g, int a_bf, int b_bf, int c_bf) {
    __shared__ float sa[TILE][TILE + 1], sb[TILE][TILE + 1];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const int64_t tiles_m = (g.m + TILE - 1) / TILE, tiles_n = (g.n + TILE - 1) / TILE;
    /* every loop bound is the same for all threads of a block, so the __syncthreads below are reached by all */
    for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z)
        for (int64_t bm = blockIdx.y; bm < tiles_m; bm += gridDim.y)
            for (int64_t bn = blockIdx.x; bn < tiles_n; bn += gridDim.x) {
                const int64_t a0 = bz * g.stride_a, b0 = bz * g.stride_b;
                const int64_t row = bm * TILE + ty, col = bn * TILE + tx; /* this thread's C element */
                float acc = 0.0f;
                for (int64_t k0 = 0; k0 < g.k; k0 += TILE) {
                    /* sa[ty][tx] = op(A)[bm*16 + ty, k0 + tx]; sb[ty][tx] = op(B)[k0 + ty, bn*16 + tx]; 0 outside */
                    const int64_t ak = k0 + tx, bk = k0 + ty;
                    sa[ty][tx] = row < g.m && ak < g.k
                                     ? lcx_dev_load(g.a, a0 + (g.trans_a ? ak * g.lda + row : row * g.lda + ak), a_bf)
                                     : 0.0f;
                    sb[ty][tx] = bk < g.k && col < g.n
                                     ? lcx_dev_load(g.b, b0 + (g.trans_b ? col * g.ldb + bk : bk * g.ldb + col), b_bf)
                                     : 0.0f;
                    __syncthreads();
                    for (int kk = 0; kk < TILE; kk++) acc = fmaf(sa[ty][kk], sb[kk][tx], acc);
                    __syncthreads();
                }
                if (row < g.m && col < g.n) {
                    const int64_t ci = bz * g.stride_c + row * g.ldc + col;
                    float r;
                    if (g.k == 0) r = g.beta == 0.0f ? 0.0f : __fmul_rn(g.beta, lcx_dev_load(g.c, ci, c_bf));
                    else if (g.beta == 0.0f) r = __fmul_rn(g.alpha, acc);
                    else r = __fadd_rn(__fmul_rn(g.alpha, acc), __fmul_rn(g.beta, lcx_dev_load(g.c, ci, c_bf)));
                    lcx_dev_store(g.c, ci, r, c_bf);
                }
            }
}

/* g: checked arguments with the defaults resolved (lcx_matmul_resolved), m, n > 0. A C shared by the batch
 * (stride_c 0, batch > 1) is updated one entry after the other, as on the CPU: one launch per entry. */
extern "C" cudaError_t lcx_cuda_gemm_tiled_launch(cudaStream_t s, const lcx_matmul_args *g) {
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) return cudaSuccess;
    const int a_bf = g->a_dtype == LCX_BF16, b_bf = g->b_dtype == LCX_BF16, c_bf = g->c_dtype == LCX_BF16;
    const dim3 threads(TILE, TILE);
    const int serial = g->stride_c == 0 && g->batch > 1;
    const int64_t launches = serial ? g->batch : 1;
    for (int64_t bi = 0; bi < launches; bi++) {
        lcx_matmul_args one = *g;
        if (serial) {
            one.batch = 1;
            if (g->a) one.a = (const char *)g->a + (size_t)(bi * g->stride_a) * (a_bf ? 2 : 4);
            if (g->b) one.b = (const char *)g->b + (size_t)(bi * g->stride_b) * (b_bf ? 2 : 4);
        }
        const dim3 grid(grid_dim((one.n + TILE - 1) / TILE, 1 << 20), grid_dim((one.m + TILE - 1) / TILE, 65535),
                        grid_dim(one.batch, 65535));
        gemm_tiled<<<grid, threads, 0, s>>>(one, a_bf, b_bf, c_bf);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* The bf16-C epilogue of cuda_matmul.c's blocked path: C[r, j] = bf16(t[r, j] + beta * C[r, j]) over rows x n
 * (beta 0: C not read), t = alpha * op(A) op(B) in float32 (dense, row stride n), C with row stride ldc; one
 * rounding, as on the CPU. */
static __global__ void gemm_beta_bf16(const float *t, int64_t rows, int64_t n, uint16_t *c, int64_t ldc, float beta) {
    LCX_CUDA_FOR(i, rows * n) {
        const int64_t r = i / n, j = i % n;
        const float v = beta == 0.0f ? t[i] : __fadd_rn(t[i], __fmul_rn(beta, lcx_dev_bf16_to_f32(c[r * ldc + j])));
        c[r * ldc + j] = lcx_dev_f32_to_bf16(v);
    }
}

extern "C" cudaError_t lcx_cuda_gemm_beta_bf16_launch(cudaStream_t s, const float *t, int64_t rows, int64_t n,
                                                      void *c, int64_t ldc, float beta) {
    const int64_t total = rows * n;
    if (total <= 0) return cudaSuccess;
    gemm_beta_bf16<<<lcx_cuda_blocks(total, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(t, rows, n, (uint16_t *)c,
                                                                                          ldc, beta);
    return cudaGetLastError();
}

/* cuda_matmul.c's f32 x bf16 path: op(src) rows x cols (op = transpose when trans; src row stride ld) as three
 * row-major bf16 arrays of rows x cols each, `stride` elements apart in t: t0 = bf16(x), t1 = bf16(x - t0),
 * t2 = bf16(x - t0 - t1), so t0 + t1 + t2 = x to 2^-24 relative (float32's own rounding). */
static __global__ void split_bf16(const float *src, int64_t ld, int trans, int64_t rows, int64_t cols, uint16_t *t,
                                  int64_t stride) {
    LCX_CUDA_FOR(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        float x = trans ? src[c * ld + r] : src[r * ld + c];
        for (int term = 0; term < 3; term++) {
            const uint16_t h = lcx_dev_f32_to_bf16(x);
            t[term * stride + i] = h;
            x = __fsub_rn(x, lcx_dev_bf16_to_f32(h));
        }
    }
}

extern "C" cudaError_t lcx_cuda_split_bf16_launch(cudaStream_t s, const float *src, int64_t ld, int trans,
                                                  int64_t rows, int64_t cols, void *terms, int64_t stride) {
    const int64_t total = rows * cols;
    if (total <= 0) return cudaSuccess;
    split_bf16<<<lcx_cuda_blocks(total, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(src, ld, trans, rows, cols,
                                                                                      (uint16_t *)terms, stride);
    return cudaGetLastError();
}
