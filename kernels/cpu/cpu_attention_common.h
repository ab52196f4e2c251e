/* cpu_attention_common: mask geometry shared by the attention forward and backward. Every mask mode makes the
 * visible keys of query row i a prefix [0, key_end(i)) of the key block, so tiles can stop early. */
#ifndef LCX_CPU_ATTENTION_COMMON_H
#define LCX_CPU_ATTENTION_COMMON_H

#include "cpu_internal.h"

/* Query rows per tile and keys per tile: small enough that a key tile stays in L1/L2 while a query tile uses it. */
enum { ATT_BQ = 16, ATT_BK = 64 };

/* Number of visible keys of query row i (a prefix of the block). */
static inline int64_t att_key_end(const lcx_attn_args *a, int64_t i) {
    if (a->mask == LCX_MASK_NONE) return 0;
    if (a->mask == LCX_MASK_FULL) return a->n_k;
    int64_t e = a->q_offset + i - a->k_offset + 1; /* keys at positions <= the query's position */
    return e < 0 ? 0 : e > a->n_k ? a->n_k : e;
}

/* First query row that sees key j (n_q if none). */
static inline int64_t att_row_begin(const lcx_attn_args *a, int64_t j) {
    if (a->mask == LCX_MASK_NONE) return a->n_q;
    if (a->mask == LCX_MASK_FULL) return 0;
    int64_t b = a->k_offset + j - a->q_offset;
    return b < 0 ? 0 : b > a->n_q ? a->n_q : b;
}

/* Dot product with 8 independent partial sums combined in a fixed order: the compiler may vectorise it
 * (the order of every addition is spelled out), and the result never depends on how work is split. */
static inline float att_dot(const float *x, const float *y, int64_t n) {
    float s[8] = {0};
    int64_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++) s[l] += x[d + l] * y[d + l];
    for (; d < n; d++) s[d & 7] += x[d] * y[d];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* exp(x) for x <= 0 in straight-line float code the compiler vectorises (Cephes expf: Cody-Waite reduction by
 * ln 2, degree-6 polynomial, 2^n through the exponent bits), within 2 ulp of expf. Inputs below -87 are clamped
 * (the result, ~1e-38, is negligible against the row sum, which is >= 1), above 88 too (never reached: arguments
 * are score - running max or score - LSE); NaN propagates. Callers zero masked entries themselves. */
static inline float att_exp(float x0) {
    float x = x0 > -87.0f ? x0 : -87.0f; /* NaN too: keeps the float-to-int conversion below defined */
    x = x < 88.0f ? x : 88.0f;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    union { int32_t i; float f; } sc;
    sc.i = ((int32_t)n + 127) << 23;
    float y = p * sc.f;
    return x0 == x0 ? y : x0; /* NaN in, NaN out */
}

/* Tile of ATT_BK keys (or values) of kv head g, transposed to [hd][ATT_BK] so that per-row products over the
 * tile run across keys (contiguous, fixed length: vectorised). Rows past n_k are zero. */
static inline void att_transpose_tile(const float *x, int64_t j0, int64_t n_k, int64_t G, int64_t g, int64_t hd,
                                      float *xt) {
    for (int64_t jj = 0; jj < ATT_BK; jj++) {
        int64_t j = j0 + jj;
        if (j < n_k) {
            const float *row = x + (j * G + g) * hd;
            for (int64_t d = 0; d < hd; d++) xt[d * ATT_BK + jj] = row[d];
        } else {
            for (int64_t d = 0; d < hd; d++) xt[d * ATT_BK + jj] = 0.0f;
        }
    }
}

/* out[jj] = sum_d q[d] xt[d][jj] for the ATT_BK columns of a transposed tile (d in increasing order). */
static inline void att_row_tile(const float *q, const float *xt, int64_t hd, float *out) {
    for (int64_t jj = 0; jj < ATT_BK; jj++) out[jj] = 0.0f;
    for (int64_t d = 0; d < hd; d++) {
        float qd = q[d];
        const float *c = xt + d * ATT_BK;
        for (int64_t jj = 0; jj < ATT_BK; jj++) out[jj] += qd * c[jj];
    }
}

#endif
