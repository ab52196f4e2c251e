/* cpu_attention_common: mask geometry shared by the attention forward and backward. Every mask mode makes the
 * visible keys of query row i a range [key_begin(i), key_end(i)) of the key block (a prefix without a document
 * mask), so tiles can start late and stop early. */
#ifndef LCX_CPU_ATTENTION_COMMON_H
#define LCX_CPU_ATTENTION_COMMON_H

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

/* Query rows and keys per tile. Tile products are OpenBLAS sgemm calls (a BQ x BK score tile, BQ x head_dim
 * outputs): big enough that the GEMM runs near peak, small enough that a thread's score, probability and
 * gradient tiles (3 x 64 KiB) stay in L2. */
enum { ATT_BQ = 128, ATT_BK = 128 };
/* The forward keeps one score tile a thread (no gradient tiles), so its tiles are larger: OpenBLAS packs a
 * tile's q rows once per key tile and each key tile once per query tile, and zeroes every score tile, so
 * larger tiles pack and zero less per flop (256 x 512: 1.3x the 128 x 128 forward at 8k tokens, head_dim 64,
 * 2 threads; the 512 KiB score tile still runs from L2). */
enum { ATT_FWD_BQ = 256, ATT_FWD_BK = 512 };

/* Number of visible keys of query row i (a prefix of the block). */
static inline int64_t att_key_end(const lcx_attn_args *a, int64_t i) {
    if (a->mask == LCX_MASK_NONE) return 0;
    if (a->mask == LCX_MASK_FULL) return a->n_k;
    int64_t e = a->q_offset + i - a->k_offset + 1; /* keys at positions <= the query's position */
    return e < 0 ? 0 : e > a->n_k ? a->n_k : e;
}

/* First visible key of query row i: 0, or with a document mask the first key of the query's document. */
static inline int64_t att_key_begin(const lcx_attn_args *a, int64_t i) {
    if (!a->q_doc_start) return 0;
    int64_t b = (int64_t)a->q_doc_start[i] - a->k_offset;
    return b < 0 ? 0 : b > a->n_k ? a->n_k : b;
}

/* Visible keys of row i inside the key tile [j0, j0 + nk): [*lo, *hi) relative to j0, empty when *hi <= *lo. */
static inline void att_tile_range(const lcx_attn_args *a, int64_t i, int64_t j0, int64_t nk, int64_t *lo,
                                  int64_t *hi) {
    int64_t b = att_key_begin(a, i) - j0, e = att_key_end(a, i) - j0;
    *lo = b < 0 ? 0 : b > nk ? nk : b;
    *hi = e < 0 ? 0 : e > nk ? nk : e;
}

/* First query row that may see key j (n_q if none; without a document mask exactly the first). */
static inline int64_t att_row_begin(const lcx_attn_args *a, int64_t j) {
    if (a->mask == LCX_MASK_NONE) return a->n_q;
    if (a->mask == LCX_MASK_FULL) return 0;
    int64_t b = a->k_offset + j - a->q_offset;
    return b < 0 ? 0 : b > a->n_q ? a->n_q : b;
}

/* Max of x[0..n) (-inf for n = 0), in 8 lanes combined in a fixed order so that the loop vectorises. */
static inline LCX_CPU_INLINE float att_row_max(const float *restrict x, int64_t n) {
    float acc[8];
    for (int l = 0; l < 8; l++) acc[l] = -INFINITY;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (; j < n; j++) acc[j & 7] = x[j] > acc[j & 7] ? x[j] : acc[j & 7];
    float m = acc[0];
    for (int l = 1; l < 8; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}

/* x[j] = exp(x[j] - shift) for j < n; returns their sum (8 lanes, fixed order). */
static inline LCX_CPU_INLINE float att_row_exp_sum(float *restrict x, int64_t n, float shift) {
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) {
            float e = lcx_cpu_expf(x[j + l] - shift);
            x[j + l] = e;
            acc[l] += e;
        }
    for (; j < n; j++) {
        float e = lcx_cpu_expf(x[j] - shift);
        x[j] = e;
        acc[j & 7] += e;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* cpu_attention_avx2.c: the forward's tile products in AVX2 + FMA registers (see there). Usable when the CPU
 * has AVX2 and FMA and head_dim % 8 == 0; otherwise the forward calls OpenBLAS. kt is [hd][ldkt] with the key
 * count rounded up to 16 (padding zeroed); the score tile s gets that many columns too. */
int lcx_cpu_att_avx2_usable(int64_t head_dim);
/* The same products in AVX-512 registers, bit for bit the AVX2 results: on by default where the CPU has AVX-512
 * F. set: 1 = AVX-512 when the CPU has it, 0 = AVX2 (tests compare the two); returns what is now in use. */
int lcx_cpu_att_set_avx512(int on);
void lcx_cpu_att_transpose_keys(const float *k, int64_t ldk, int64_t nk, int64_t hd, float *kt, int64_t ldkt);
void lcx_cpu_att_scores(const float *q, int64_t ldq, int64_t nr, const float *kt, int64_t ldkt, int64_t nk,
                        int64_t hd, float scale, float *s, int64_t lds);
void lcx_cpu_att_pv(const float *p, int64_t ldp, int64_t nr, const float *v, int64_t ldv, int64_t nk, int64_t hd,
                    float *o, int64_t ldo);
/* o[j] += sum_{r < nr} p[r][j] v[r] for j < nk: P^T V (the backward's dV = P^T dO and dK = dS^T Q) */
void lcx_cpu_att_ptv(const float *p, int64_t ldp, int64_t nr, int64_t nk, const float *v, int64_t ldv, int64_t hd,
                     float *o, int64_t ldo);

/* C = alpha op(A) op(B) + beta C, row-major, single precision (OpenBLAS). */
static inline void att_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

#endif
