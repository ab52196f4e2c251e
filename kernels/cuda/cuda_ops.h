/* cuda_ops: the launchers of the CUDA backend's kernels (one .cu per op family, as kernels/cpu has one .c), called
 * by the backend table in cuda_backend.c (C11). The table checks every argument, the workspace and the dtypes
 * first (with the CPU backend's messages); a launcher only queues its kernels on `s` and returns
 * cudaGetLastError() (cudaSuccess when there was nothing to do). Launchers never print, never synchronise and
 * never read device data on the host. The contract of each op is kernels/backend.h; the reference is the CPU
 * file of the same family (kernels/cpu/cpu_<family>.c). */
#ifndef LCX_KERNELS_CUDA_OPS_H
#define LCX_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend.h"

/* Workspace parts are rounded up to 64 bytes, as on the CPU (the arena's alignment). */
static inline size_t lcx_cuda_ws_part(int64_t count, size_t elem) {
    if (count <= 0) return 0;
    if ((uint64_t)count > (SIZE_MAX - 63) / elem) return SIZE_MAX;
    return ((size_t)count * elem + 63) & ~(size_t)63;
}

/* sqnorm: one partial sum (double) per block of LCX_CUDA_NORM_BLOCK elements, in the arena. */
enum { LCX_CUDA_NORM_BLOCK = 8192 };

/* Attention: the kernels keep a lane's head dims lane + 32 c (c < 8) in registers; larger heads are refused. */
enum { LCX_CUDA_ATTN_MAX_HEAD_DIM = 256 };

/* attention_bwd, when the call has work (queries, keys and a mask that shows some key): D = rowsum(dO * O), one
 * float per (query row, head), then one int per (head, query tile of LCX_CUDA_ATTN_BWD_QTILE rows): the fused
 * tensor-core backward's counters (cuda_order.h). */
enum { LCX_CUDA_ATTN_BWD_QTILE = 32 };
static inline int64_t lcx_cuda_attention_bwd_counters(const lcx_attn_args *a) {
    return (a->n_q + LCX_CUDA_ATTN_BWD_QTILE - 1) / LCX_CUDA_ATTN_BWD_QTILE * a->n_heads;
}
static inline size_t lcx_cuda_attention_bwd_ws(const lcx_attn_args *a) {
    if (a->n_q <= 0 || a->n_k <= 0 || a->n_heads <= 0 || a->head_dim <= 0 || a->mask == LCX_MASK_NONE) return 0;
    if (a->n_q > INT64_MAX / a->n_heads) return SIZE_MAX;
    const size_t d = lcx_cuda_ws_part(a->n_q * a->n_heads, sizeof(float));
    const size_t c = lcx_cuda_ws_part(lcx_cuda_attention_bwd_counters(a), sizeof(int));
    return d == SIZE_MAX || c == SIZE_MAX ? SIZE_MAX : d + c;
}

/* AdamW's per-step constants, formed on the host in double exactly as kernels/cpu/cpu_adamw.c forms them. */
typedef struct lcx_cuda_adamw_consts {
    float gs, decay, w1, b2, w2, neg_step, bc2_sqrt, eps;
    int lerp_small;
} lcx_cuda_adamw_consts;

/* cuda_elementwise.cu (kind: 0 add, 1 scale, 2 axpy); cast between different dtypes (same dtype: a copy) */
cudaError_t lcx_cuda_elementwise_launch(cudaStream_t s, int kind, const lcx_elementwise_args *a);
cudaError_t lcx_cuda_cast_launch(cudaStream_t s, const lcx_cast_args *a);
/* cuda_sqnorm.cu: partials in `scratch` (lcx_cuda_ws_part(blocks, 8) bytes) */
cudaError_t lcx_cuda_sqnorm_launch(cudaStream_t s, const lcx_sqnorm_args *a, void *scratch);
/* cuda_embedding.cu */
cudaError_t lcx_cuda_embedding_fwd_launch(cudaStream_t s, const lcx_embedding_args *a);
cudaError_t lcx_cuda_embedding_bwd_launch(cudaStream_t s, const lcx_embedding_args *a);
/* cuda_rmsnorm.cu */
cudaError_t lcx_cuda_rmsnorm_fwd_launch(cudaStream_t s, const lcx_rmsnorm_args *a);
cudaError_t lcx_cuda_rmsnorm_bwd_launch(cudaStream_t s, const lcx_rmsnorm_args *a);
/* cuda_rope.cu (sign +1 forward, -1 backward) */
cudaError_t lcx_cuda_rope_launch(cudaStream_t s, const lcx_rope_args *a, float sign);
/* cuda_swiglu.cu */
cudaError_t lcx_cuda_swiglu_fwd_launch(cudaStream_t s, const lcx_swiglu_args *a);
cudaError_t lcx_cuda_swiglu_bwd_launch(cudaStream_t s, const lcx_swiglu_args *a);
/* cuda_cross_entropy.cu: row losses in `scratch` (lcx_cuda_ws_part(n_rows, 8) bytes; STATS uses none) */
cudaError_t lcx_cuda_cross_entropy_launch(cudaStream_t s, const lcx_xent_args *a, void *scratch);
/* cuda_adamw.cu */
cudaError_t lcx_cuda_adamw_launch(cudaStream_t s, const lcx_adamw_args *a, const lcx_cuda_adamw_consts *k);
/* cuda_gemm_tiled.cu: the matmul path for what cuBLASLt cannot run (cuda_matmul.c); g has its defaults resolved */
cudaError_t lcx_cuda_gemm_tiled_launch(cudaStream_t s, const lcx_matmul_args *g);
/* cuda_gemm_tiled.cu: C[r, j] = bf16(t[r, j] + beta C[r, j]) over rows x n (t dense f32, C row stride ldc) */
cudaError_t lcx_cuda_gemm_beta_bf16_launch(cudaStream_t s, const float *t, int64_t rows, int64_t n, void *c,
                                           int64_t ldc, float beta);
/* cuda_gemm_tiled.cu: op(src) [rows][cols] (src f32, row stride ld, transposed when trans) as three row-major
 * bf16 arrays, `stride` elements apart in `terms`, whose sum is x to 2^-24 */
cudaError_t lcx_cuda_split_bf16_launch(cudaStream_t s, const float *src, int64_t ld, int trans, int64_t rows,
                                       int64_t cols, void *terms, int64_t stride);
/* cuda_attention.cu (the merge), cuda_attention_fwd.cu, cuda_attention_bwd.cu (D in `scratch`:
 * lcx_cuda_attention_bwd_ws bytes); head_dim <= LCX_CUDA_ATTN_MAX_HEAD_DIM, n_heads <= 65535 */
cudaError_t lcx_cuda_attention_merge_launch(cudaStream_t s, const lcx_attn_merge_args *a);
cudaError_t lcx_cuda_attention_fwd_launch(cudaStream_t s, const lcx_attn_args *a);
/* cuda_attention_fwd_tc.cu: the tensor-core forward and which calls it takes (the launcher above routes them) */
int lcx_cuda_attention_fwd_tc_takes(const lcx_attn_args *a);
cudaError_t lcx_cuda_attention_fwd_tc_launch(cudaStream_t s, const lcx_attn_args *a);
cudaError_t lcx_cuda_attention_bwd_launch(cudaStream_t s, const lcx_attn_args *a, void *scratch);
/* cuda_attention_bwd_tc.cu: the tensor-core dK/dV and dQ (after D and the zeroed counters, which the launcher
 * above provides) */
int lcx_cuda_attention_bwd_tc_takes(const lcx_attn_args *a);
cudaError_t lcx_cuda_attention_bwd_tc_launch(cudaStream_t s, const lcx_attn_args *a, const float *D, int *order);

#ifdef __cplusplus
}
#endif

#endif /* LCX_KERNELS_CUDA_OPS_H */
