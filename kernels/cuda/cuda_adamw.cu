/* cuda_adamw: one AdamW step, one thread per element, PyTorch's float32 operation order with the constants the
 * host formed in double (kernels/cpu/cpu_adamw.c: the same expression with the same roundings, fmaf where the
 * CPU uses fmaf, so the result is the CPU's bit for bit), then the bf16 copy of the parameter (RNE). */
#include "kernels/cuda/cuda_device.h"

static __global__ void adamw(lcx_cuda_adamw_consts k, int64_t n, float *param, const float *grad, float *m,
                             float *v, uint16_t *param_bf16) {
    LCX_CUDA_FOR(i, n) {
        const float g = __fmul_rn(grad[i], k.gs);
        float p = __fmul_rn(param[i], k.decay);
        float mi = m[i];
        mi = k.lerp_small ? fmaf(k.w1, __fsub_rn(g, mi), mi) : fmaf(__fsub_rn(k.w1, 1.0f), __fsub_rn(g, mi), g);
        const float vi = fmaf(__fmul_rn(k.w2, g), g, __fmul_rn(v[i], k.b2));
        const float denom = __fadd_rn(__fdiv_rn(sqrtf(vi), k.bc2_sqrt), k.eps);
        p = __fadd_rn(p, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
        m[i] = mi;
        v[i] = vi;
        param[i] = p;
        if (param_bf16) param_bf16[i] = lcx_dev_f32_to_bf16(p);
    }
}

extern "C" cudaError_t lcx_cuda_adamw_launch(cudaStream_t s, const lcx_adamw_args *a, const lcx_cuda_adamw_consts *k) {
    if (a->n <= 0) return cudaSuccess;
    adamw<<<lcx_cuda_blocks(a->n, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(*k, a->n, a->param, a->grad, a->m, a->v,
                                                                              a->param_bf16);
    return cudaGetLastError();
}
