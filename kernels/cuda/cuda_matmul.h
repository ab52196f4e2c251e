/* cuda_matmul: the CUDA backend's matmul (cuBLASLt, with cuda_gemm_tiled.cu for what cuBLASLt cannot run) and
 * the exec's library handles it keeps: one cublasLt handle and a small cache of per-shape plans (descriptors and
 * the heuristic's algorithm). Called by cuda_backend.c; C11 host code. */
#ifndef LCX_KERNELS_CUDA_MATMUL_H
#define LCX_KERNELS_CUDA_MATMUL_H

#include "kernels/backend.h"

/* The cuBLASLt workspace every cuBLASLt matmul takes from the front of the exec's arena (NVIDIA's recommendation
 * for Hopper; enough for Ampere). */
#define LCX_CUDA_MATMUL_WS ((size_t)32 << 20)
/* The most a bf16 C's float32 staging takes (a bf16 C with beta != 0, or any f32 x bf16 call with a bf16 C):
 * cuBLASLt writes alpha op(A) op(B) there in row blocks and a kernel adds beta C with one rounding (cuBLASLt itself
 * rounds the product to bf16 before adding beta C: measured on an H200, docs/cuda.md). */
#define LCX_CUDA_MATMUL_STAGE ((size_t)16 << 20)
/* The most the three bf16 terms of a split float32 operand take (an f32 x bf16 call, cuda_matmul.c). */
#define LCX_CUDA_MATMUL_SPLIT ((size_t)32 << 20)
/* The most any matmul's workspace query returns: the cuBLASLt workspace, its alignment, the split terms and the
 * staging, each rounded up to 256 bytes. The planner's memory model counts it (src/plan/plan.c) without a CUDA
 * build; test_cuda_matmul_ws checks the bound against the query. */
#define LCX_CUDA_MATMUL_WS_MAX (LCX_CUDA_MATMUL_WS + LCX_CUDA_MATMUL_SPLIT + LCX_CUDA_MATMUL_STAGE + (size_t)1024)

/* x->handles = a new cublasLt handle and an empty plan cache (LCX_ERR_CUDA naming cuBLASLt's status). */
lcx_status lcx_cuda_handles_create(lcx_exec *x);
/* Destroys the plans and the handle; NULL handles ok. */
void lcx_cuda_handles_destroy(lcx_exec *x);

/* The matmul's workspace for these sizes and dtypes when cuBLASLt runs it, else 0: LCX_CUDA_MATMUL_WS plus its
 * alignment, and for the blocked cases (cuda_matmul.c) the split f32 operand's terms (up to 32 MiB) and the
 * float32 staging of a bf16 C (up to LCX_CUDA_MATMUL_STAGE). */
size_t lcx_cuda_matmul_ws(const lcx_matmul_args *a);
/* The op (arguments already checked by kernels/backend_check.c). */
lcx_status lcx_cuda_matmul(lcx_exec *x, const lcx_matmul_args *a);

#endif /* LCX_KERNELS_CUDA_MATMUL_H */
