/* cpu_attention_bwd: flash-attention-2 backward for one (query block, key block) pair, recomputing the
 * probabilities from the saved LSE. A work item is one query head: it walks key tiles, and for each the query
 * tiles that see it, with five sgemm products per tile pair (S = Q K^T, dP = dO V^T, dV += P^T dO,
 * dK += dS^T Q, dQ += dS K). dQ of the head is owned by the item; dK and dV go to a per-head scratch that is
 * summed into the caller's kv head in head order afterwards, so no atomics are needed and the result does not
 * depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "cpu_attention_common.h"

/* Per-thread tiles. */
typedef struct bwd_scratch {
    float *p;  /* [ATT_BQ][ATT_BK] scores, then probabilities */
    float *ds; /* [ATT_BQ][ATT_BK] dO V^T, then dS */
} bwd_scratch;

/* Everything one head contributes. dkh, dvh: this head's [n_k][hd] gradient scratch (zeroed here). */
LCX_CPU_HOT static void bwd_head(const lcx_attn_args *a, const float *q, const float *k, const float *v, const float *lse,
                     const float *D, const float *dout, float *dq, float *dkh, float *dvh, int64_t h,
                     const bwd_scratch *w) {
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, g = h / (H / G);
    const int64_t ldq = H * hd, ldk = G * hd;
    for (int64_t e = 0; e < a->n_k * hd; e++) dkh[e] = dvh[e] = 0.0f;
    for (int64_t j0 = 0; j0 < a->n_k; j0 += ATT_BK) {
        const int64_t nkt = a->n_k - j0 < ATT_BK ? a->n_k - j0 : ATT_BK;
        const float *kj = k + (j0 * G + g) * hd, *vj = v + (j0 * G + g) * hd;
        /* query tiles from the one holding the first row that sees key j0 */
        for (int64_t i0 = att_row_begin(a, j0) / ATT_BQ * ATT_BQ; i0 < a->n_q; i0 += ATT_BQ) {
            const int64_t i1 = i0 + ATT_BQ < a->n_q ? i0 + ATT_BQ : a->n_q, nr = i1 - i0;
            int64_t nk = att_key_end(a, i1 - 1) - j0; /* keys of the tile the last (widest) row sees */
            if (nk <= 0) continue;
            if (nk > nkt) nk = nkt;
            const float *qi = q + (i0 * H + h) * hd, *gi = dout + (i0 * H + h) * hd;
            att_gemm(0, 1, nr, nk, hd, a->scale, qi, ldq, kj, ldk, 0.0f, w->p, ATT_BK);
            att_gemm(0, 1, nr, nk, hd, 1.0f, gi, ldq, vj, ldk, 0.0f, w->ds, ATT_BK);
            for (int64_t r = 0; r < nr; r++) {
                const int64_t x = (i0 + r) * H + h;
                int64_t cnt = att_key_end(a, i0 + r) - j0;
                cnt = cnt < 0 ? 0 : cnt > nk ? nk : cnt;
                const float L = lse[x], Dx = D[x];
                float *pr = w->p + r * ATT_BK, *dsr = w->ds + r * ATT_BK;
                if (L == -INFINITY) cnt = 0; /* no visible key at all: no gradient */
                for (int64_t jj = 0; jj < cnt; jj++) {
                    float pj = lcx_cpu_expf(pr[jj] - L);
                    pr[jj] = pj;
                    dsr[jj] = pj * (dsr[jj] - Dx);
                }
                for (int64_t jj = cnt; jj < nk; jj++) pr[jj] = dsr[jj] = 0.0f; /* masked keys */
            }
            att_gemm(1, 0, nk, hd, nr, 1.0f, w->p, ATT_BK, gi, ldq, 1.0f, dvh + j0 * hd, hd);
            att_gemm(1, 0, nk, hd, nr, a->scale, w->ds, ATT_BK, qi, ldq, 1.0f, dkh + j0 * hd, hd);
            att_gemm(0, 0, nr, hd, nk, a->scale, w->ds, ATT_BK, kj, ldk, 1.0f, dq + (i0 * H + h) * hd, ldq);
        }
    }
}

lcx_status lcx_cpu_attention_bwd(const lcx_attn_args *a, const float *q, const float *k, const float *v,
                                 const float *o, const float *lse, const float *dout, float *dq, float *dk,
                                 float *dv) {
    LCX_TRY(lcx_cpu_attn_check(a));
    const char *op = "attention_bwd";
    LCX_CPU_NEED(q, a->n_q, op);
    LCX_CPU_NEED(o, a->n_q, op);
    LCX_CPU_NEED(lse, a->n_q, op);
    LCX_CPU_NEED(dout, a->n_q, op);
    LCX_CPU_NEED(dq, a->n_q, op);
    LCX_CPU_NEED(k, a->n_k, op);
    LCX_CPU_NEED(v, a->n_k, op);
    LCX_CPU_NEED(dk, a->n_k, op);
    LCX_CPU_NEED(dv, a->n_k, op);
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, rep = H / G;
    if (a->n_q == 0 || a->n_k == 0 || a->mask == LCX_MASK_NONE) return LCX_OK;

    /* D[i, h] = rowsum(dO * O); per-head dK and dV scratch [H][n_k][hd] */
    float *D = malloc(sizeof(float) * (size_t)(a->n_q * H));
    float *dks = malloc(sizeof(float) * (size_t)(H * a->n_k * hd));
    float *dvs = malloc(sizeof(float) * (size_t)(H * a->n_k * hd));
    if (!D || !dks || !dvs) {
        free(D);
        free(dks);
        free(dvs);
        return lcx_fail(LCX_ERR_OOM, "%s: no memory for row sums and per-head key gradients (%lld x %lld floats)", op,
                        (long long)(2 * H), (long long)(a->n_k * hd));
    }
#pragma omp parallel for schedule(static)
    for (int64_t x = 0; x < a->n_q * H; x++) {
        double s = 0.0;
        for (int64_t d = 0; d < hd; d++) s += (double)dout[x * hd + d] * o[x * hd + d];
        D[x] = (float)s;
    }

    int oom = 0;
    lcx_cpu_blas_serial(); /* one single-threaded sgemm per tile, from each OpenMP thread */
#pragma omp parallel
    {
        bwd_scratch w = {malloc(sizeof(float) * ATT_BQ * ATT_BK), malloc(sizeof(float) * ATT_BQ * ATT_BK)};
        if (!w.p || !w.ds) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t h = 0; h < H; h++)
            if (w.p && w.ds)
                bwd_head(a, q, k, v, lse, D, dout, dq, dks + h * a->n_k * hd, dvs + h * a->n_k * hd, h, &w);
        free(w.p);
        free(w.ds);
    }
    if (!oom) {
        /* dK[j, g] += sum over the group's heads in head order */
#pragma omp parallel for schedule(static)
        for (int64_t x = 0; x < a->n_k * G; x++) {
            int64_t j = x / G, g = x % G;
            float *dkj = dk + x * hd, *dvj = dv + x * hd;
            for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
                const float *sk = dks + (h * a->n_k + j) * hd, *sv = dvs + (h * a->n_k + j) * hd;
                for (int64_t d = 0; d < hd; d++) {
                    dkj[d] += sk[d];
                    dvj[d] += sv[d];
                }
            }
        }
    }
    free(D);
    free(dks);
    free(dvs);
    LCX_FAIL_IF(oom, LCX_ERR_OOM, "%s: no memory for per-thread tiles", op);
    return LCX_OK;
}
