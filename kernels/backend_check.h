/* backend_check: every op's argument checks, written once for all backends (kernels/backend_check.c). A backend's
 * table entries are LCX_CHECKED wrappers: the shared checks (NULL exec or arguments, sizes, dtypes, NULL
 * pointers of non-empty tensors, then the arena against the backend's own workspace query), then the backend's
 * op. So an op implementation starts from valid arguments and adds only its own limits (the CPU's 32-bit BLAS
 * dimensions, CUDA's grid sizes), and every backend reports bad input with the same line and LCX_ERR code. */
#ifndef LCX_KERNELS_BACKEND_CHECK_H
#define LCX_KERNELS_BACKEND_CHECK_H

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LCX_OK when `args` are valid for `op` on x (and x's arena holds the op's workspace), else the failure. */
lcx_status lcx_op_check(lcx_exec *x, lcx_op op, const void *args);

/* The matmul arguments with the defaults resolved: c_dtype 0 -> LCX_F32, leading dimensions 0 -> dense (at
 * least 1, as BLAS wants even for empty matrices). */
lcx_matmul_args lcx_matmul_resolved(const lcx_matmul_args *a);

/* Defines `entry`, a table entry that runs the shared checks of `op` and then `impl`. */
#define LCX_CHECKED(entry, op, type, impl)                                                                      \
    static lcx_status entry(lcx_exec *x, const type *a) {                                                       \
        LCX_TRY(lcx_op_check(x, op, a));                                                                        \
        return impl(x, a);                                                                                      \
    }

/* A backend's checked entries, checked_<op> for every op, calling prefix<op> (lcx_cpu_matmul, cu_matmul, ...),
 * and the table's op fields set to them:
 *   LCX_CHECKED_OPS(lcx_cpu_)
 *   const lcx_backend table = {.name = "cpu", ..., .workspace = cpu_workspace, LCX_CHECKED_ENTRIES};  */
#define LCX_CHECKED_OPS(prefix)                                                                                     \
    LCX_CHECKED(checked_matmul, LCX_OP_MATMUL, lcx_matmul_args, prefix##matmul)                                     \
    LCX_CHECKED(checked_embedding_fwd, LCX_OP_EMBEDDING_FWD, lcx_embedding_args, prefix##embedding_fwd)             \
    LCX_CHECKED(checked_embedding_bwd, LCX_OP_EMBEDDING_BWD, lcx_embedding_args, prefix##embedding_bwd)             \
    LCX_CHECKED(checked_rmsnorm_fwd, LCX_OP_RMSNORM_FWD, lcx_rmsnorm_args, prefix##rmsnorm_fwd)                     \
    LCX_CHECKED(checked_rmsnorm_bwd, LCX_OP_RMSNORM_BWD, lcx_rmsnorm_args, prefix##rmsnorm_bwd)                     \
    LCX_CHECKED(checked_rope_fwd, LCX_OP_ROPE_FWD, lcx_rope_args, prefix##rope_fwd)                                 \
    LCX_CHECKED(checked_rope_bwd, LCX_OP_ROPE_BWD, lcx_rope_args, prefix##rope_bwd)                                 \
    LCX_CHECKED(checked_attention_fwd, LCX_OP_ATTENTION_FWD, lcx_attn_args, prefix##attention_fwd)                  \
    LCX_CHECKED(checked_attention_bwd, LCX_OP_ATTENTION_BWD, lcx_attn_args, prefix##attention_bwd)                  \
    LCX_CHECKED(checked_attention_merge, LCX_OP_ATTENTION_MERGE, lcx_attn_merge_args, prefix##attention_merge)      \
    LCX_CHECKED(checked_swiglu_fwd, LCX_OP_SWIGLU_FWD, lcx_swiglu_args, prefix##swiglu_fwd)                         \
    LCX_CHECKED(checked_swiglu_bwd, LCX_OP_SWIGLU_BWD, lcx_swiglu_args, prefix##swiglu_bwd)                         \
    LCX_CHECKED(checked_cross_entropy, LCX_OP_CROSS_ENTROPY, lcx_xent_args, prefix##cross_entropy)                  \
    LCX_CHECKED(checked_adamw, LCX_OP_ADAMW, lcx_adamw_args, prefix##adamw)                                         \
    LCX_CHECKED(checked_sqnorm, LCX_OP_SQNORM, lcx_sqnorm_args, prefix##sqnorm)                                     \
    LCX_CHECKED(checked_cast, LCX_OP_CAST, lcx_cast_args, prefix##cast)                                             \
    LCX_CHECKED(checked_add, LCX_OP_ADD, lcx_elementwise_args, prefix##add)                                         \
    LCX_CHECKED(checked_scale, LCX_OP_SCALE, lcx_elementwise_args, prefix##scale)                                   \
    LCX_CHECKED(checked_axpy, LCX_OP_AXPY, lcx_elementwise_args, prefix##axpy)

#define LCX_CHECKED_ENTRIES                                                                                         \
    .matmul = checked_matmul,                                                                                       \
    .embedding_fwd = checked_embedding_fwd,                                                                         \
    .embedding_bwd = checked_embedding_bwd,                                                                         \
    .rmsnorm_fwd = checked_rmsnorm_fwd,                                                                             \
    .rmsnorm_bwd = checked_rmsnorm_bwd,                                                                             \
    .rope_fwd = checked_rope_fwd,                                                                                   \
    .rope_bwd = checked_rope_bwd,                                                                                   \
    .attention_fwd = checked_attention_fwd,                                                                         \
    .attention_bwd = checked_attention_bwd,                                                                         \
    .attention_merge = checked_attention_merge,                                                                     \
    .swiglu_fwd = checked_swiglu_fwd,                                                                               \
    .swiglu_bwd = checked_swiglu_bwd,                                                                               \
    .cross_entropy = checked_cross_entropy,                                                                         \
    .adamw = checked_adamw,                                                                                         \
    .sqnorm = checked_sqnorm,                                                                                       \
    .cast = checked_cast,                                                                                           \
    .add = checked_add,                                                                                             \
    .scale = checked_scale,                                                                                         \
    .axpy = checked_axpy

#ifdef __cplusplus
}
#endif

#endif /* LCX_KERNELS_BACKEND_CHECK_H */
