/* cpu_backend: the CPU implementation's function table (host memory is device memory). */
#include "cpu_internal.h"

static const lcx_backend cpu_backend = {
    .name = "cpu",
    .alloc = lcx_cpu_alloc,
    .free = lcx_cpu_free,
    .copy_h2d = lcx_cpu_copy,
    .copy_d2h = lcx_cpu_copy,
    .copy_d2d = lcx_cpu_copy,
    .zero = lcx_cpu_zero,
    .sync = lcx_cpu_sync,
    .matmul = lcx_cpu_matmul,
    .embedding_fwd = lcx_cpu_embedding_fwd,
    .embedding_bwd = lcx_cpu_embedding_bwd,
    .rmsnorm_fwd = lcx_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = lcx_cpu_rmsnorm_bwd,
    .rope_fwd = lcx_cpu_rope_fwd,
    .rope_bwd = lcx_cpu_rope_bwd,
    .attention_fwd = lcx_cpu_attention_fwd,
    .attention_bwd = lcx_cpu_attention_bwd,
    .attention_merge = lcx_cpu_attention_merge,
    .swiglu_fwd = lcx_cpu_swiglu_fwd,
    .swiglu_bwd = lcx_cpu_swiglu_bwd,
    .cross_entropy = lcx_cpu_cross_entropy,
    .adamw = lcx_cpu_adamw,
    .sqnorm = lcx_cpu_sqnorm,
    .cast_f32_to_bf16 = lcx_cpu_cast_f32_to_bf16,
    .cast_bf16_to_f32 = lcx_cpu_cast_bf16_to_f32,
    .add = lcx_cpu_add,
    .scale = lcx_cpu_scale,
    .axpy = lcx_cpu_axpy,
};

const lcx_backend *lcx_backend_cpu(void) { return &cpu_backend; }
