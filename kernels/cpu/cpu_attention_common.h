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

#endif
