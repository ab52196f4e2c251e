/* cuda_attention: the merge of a partial attention result into an accumulator (kernels/cpu/cpu_attention.c,
 * lcx_cpu_attention_merge). One thread per (row, head): it reads both LSEs, updates lse_acc and rescales the
 * head's output row (nothing is shared between threads). The flash-style forward and backward kernels are the
 * next step of issue 14; until then the backend's attention_fwd/bwd report LCX_ERR_UNSUPPORTED. */
#include "kernels/cuda/cuda_device.h"

static __global__ void attention_merge(int bf, int64_t n, int64_t head_dim, void *o_acc, float *lse_acc,
                                       const void *o_part, const float *lse_part) {
    LCX_CUDA_FOR(r, n) {
        const float a = lse_acc[r], b = lse_part[r], mx = a > b ? a : b;
        const int64_t off = r * head_dim;
        if (mx == -INFINITY) { /* neither side saw a key */
            lse_acc[r] = -INFINITY;
            for (int64_t d = 0; d < head_dim; d++) lcx_dev_store(o_acc, off + d, 0.0f, bf);
            continue;
        }
        const float ea = expf(__fsub_rn(a, mx)), eb = expf(__fsub_rn(b, mx)), sum = __fadd_rn(ea, eb);
        const float wa = __fdiv_rn(ea, sum), wb = __fdiv_rn(eb, sum);
        lse_acc[r] = __fadd_rn(mx, logf(sum));
        for (int64_t d = 0; d < head_dim; d++) {
            const float oa = lcx_dev_load(o_acc, off + d, bf), ob = lcx_dev_load(o_part, off + d, bf);
            lcx_dev_store(o_acc, off + d, __fadd_rn(__fmul_rn(wa, oa), __fmul_rn(wb, ob)), bf);
        }
    }
}

extern "C" cudaError_t lcx_cuda_attention_merge_launch(cudaStream_t s, const lcx_attn_merge_args *a) {
    const int64_t n = a->n_rows * a->n_heads;
    if (n <= 0) return cudaSuccess;
    attention_merge<<<lcx_cuda_blocks(n, 128), 128, 0, s>>>(a->dt == LCX_BF16, n, a->head_dim, a->o_acc, a->lse_acc,
                                                            a->o_part, a->lse_part);
    return cudaGetLastError();
}
