/* attn_ps_bounds.h: how far the attention backward's gradients may move when P and dS enter their products as one
 * bf16 term each (the CUDA tensor-core backward under LCX_CUDA_ATTN_BWD_BF16=1, FlashAttention 2's precision)
 * instead of float32. Rounding to bf16 (round to nearest, 8 significant bits) moves x by at most 2^-8 |x|, so
 * elementwise, from the exact P and dS (computed here in double):
 *   dV_j moves by at most 2^-8 sum_i |P_ij| |dO_i|,
 *   dK_j by 2^-8 sum_i |scale dS_ij| |Q_i|,
 *   dQ_i by 2^-8 sum_j |scale dS_ij| |K_j|.
 * A test adds these to its float32 tolerance. Shared by tests/unit/test_backend_ops.c (on a GPU) and
 * tests/cuda_emu/attention_emu.cpp (on the CPU); header-only so that both the C and the C++ test include it. */
#ifndef LCX_TESTS_ATTN_PS_BOUNDS_H
#define LCX_TESTS_ATTN_PS_BOUNDS_H

#include <math.h>

#include "kernels/backend.h"

/* a: the backward's shape, offsets, mask, scale and document starts (q_doc_start, host; its other pointers unused);
 * q [n_q][H][hd], k, v [n_k][G][hd], o and dout like q, lse [n_q][H] final over the context; bdq like q, bdk and
 * bdv like k, overwritten. */
static inline void attn_ps_bounds(const lcx_attn_args *a, const float *q, const float *k, const float *v,
                                  const float *o, const float *lse, const float *dout, double *bdq, double *bdk,
                                  double *bdv) {
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim;
    for (int64_t e = 0; e < a->n_q * H * hd; e++) bdq[e] = 0;
    for (int64_t e = 0; e < a->n_k * G * hd; e++) bdk[e] = bdv[e] = 0;
    if (a->mask == LCX_MASK_NONE) return;
    for (int64_t i = 0; i < a->n_q; i++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kvh = h / (H / G), qi = (i * H + h) * hd;
            const double L = lse[i * H + h];
            if (isinf(L)) continue;
            double D = 0;
            for (int64_t d = 0; d < hd; d++) D += (double)dout[qi + d] * o[qi + d];
            for (int64_t j = 0; j < a->n_k; j++) {
                if (a->mask == LCX_MASK_CAUSAL && a->k_offset + j > a->q_offset + i) break;
                if (a->q_doc_start && a->k_offset + j < a->q_doc_start[i]) continue; /* an earlier document */
                const int64_t kj = (j * G + kvh) * hd;
                double s = 0, dp = 0;
                for (int64_t d = 0; d < hd; d++) {
                    s += (double)q[qi + d] * k[kj + d];
                    dp += (double)dout[qi + d] * v[kj + d];
                }
                const double p = exp(a->scale * s - L), ds = fabs(a->scale * p * (dp - D));
                for (int64_t d = 0; d < hd; d++) {
                    bdv[kj + d] += 0x1p-8 * p * fabs(dout[qi + d]);
                    bdk[kj + d] += 0x1p-8 * ds * fabs(q[qi + d]);
                    bdq[qi + d] += 0x1p-8 * ds * fabs(k[kj + d]);
                }
            }
        }
}

#endif /* LCX_TESTS_ATTN_PS_BOUNDS_H */
