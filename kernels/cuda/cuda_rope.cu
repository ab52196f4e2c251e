/* cuda_rope: rotary embedding, HF rotate_half layout, partial rotary (kernels/cpu/cpu_rope.c). One thread per
 * element slot e of a head: e < rot_dim/2 rotates the pair (e, e + rot_dim/2), reading both before writing both
 * (out may alias x); e in [rot_dim/2, rot_dim) is done by its partner; e >= rot_dim passes through (copied when
 * out is not x; bf16 bits as they are). A token whose position is outside [0, n_pos) passes through whole. */
#include "kernels/cuda/cuda_device.h"

static __global__ void rope(int bf, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
                            int64_t n_pos, const void *x, void *out, const int32_t *pos, const float *cos,
                            const float *sin, float sign) {
    const int64_t half = rot_dim / 2;
    LCX_CUDA_FOR(i, n_tokens * n_heads * head_dim) {
        const int64_t e = i % head_dim, t = i / (n_heads * head_dim), base = i - e;
        const int64_t p = pos[t];
        const int rotated = p >= 0 && p < n_pos && half > 0;
        if (rotated && e < half) {
            const float c = cos[p * half + e], si = __fmul_rn(sign, sin[p * half + e]);
            const float a = lcx_dev_load(x, base + e, bf), b = lcx_dev_load(x, base + e + half, bf);
            lcx_dev_store(out, base + e, __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, si)), bf);
            lcx_dev_store(out, base + e + half, __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, si)), bf);
        } else if (rotated && e < rot_dim) {
            /* written by the thread of e - half */
        } else if (out != x) {
            if (bf) ((uint16_t *)out)[i] = ((const uint16_t *)x)[i];
            else ((float *)out)[i] = ((const float *)x)[i];
        }
    }
}

extern "C" cudaError_t lcx_cuda_rope_launch(cudaStream_t s, const lcx_rope_args *a, float sign) {
    const int64_t n = a->n_tokens * a->n_heads * a->head_dim;
    if (n <= 0) return cudaSuccess;
    rope<<<lcx_cuda_blocks(n, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(
        a->dt == LCX_BF16, a->n_tokens, a->n_heads, a->head_dim, a->rot_dim, a->n_pos, a->x, a->out, a->pos, a->cos,
        a->sin, sign);
    return cudaGetLastError();
}
