/* cpu_attention_bwd: flash-attention-2 backward for one (query block, key block) pair, recomputing the
 * probabilities from the saved LSE. Two passes keep it deterministic without atomics: pass 1 owns query tiles
 * (dQ), pass 2 owns key tiles of one key/value head (dK, dV) and walks its query heads and rows in order. */
#include <math.h>
#include <stdlib.h>

#include "cpu_attention_common.h"

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

    /* D[i, h] = rowsum(dO * O) */
    float *D = malloc(sizeof(float) * (size_t)(a->n_q * H));
    LCX_FAIL_IF(D == NULL, LCX_ERR_OOM, "%s: no memory for %lld row sums", op, (long long)(a->n_q * H));
#pragma omp parallel for schedule(static)
    for (int64_t x = 0; x < a->n_q * H; x++) {
        double s = 0.0;
        for (int64_t d = 0; d < hd; d++) s += (double)dout[x * hd + d] * o[x * hd + d];
        D[x] = (float)s;
    }

    int oom = 0;
    /* pass 1: dQ[i] += scale * sum_j dS_ij k_j. Per key tile, the scores and dO.v for a row are computed across
     * the tile's keys at once (keys and values transposed), then dS is folded into dQ key by key. */
    const int64_t n_qt = (a->n_q + ATT_BQ - 1) / ATT_BQ;
#pragma omp parallel
    {
        float *gq = malloc(sizeof(float) * (size_t)hd);
        float *kt = malloc(sizeof(float) * (size_t)(ATT_BK * hd)), *vt = malloc(sizeof(float) * (size_t)(ATT_BK * hd));
        float s[ATT_BK], dp[ATT_BK];
        if (!gq || !kt || !vt) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t qt = 0; qt < n_qt; qt++)
            for (int64_t h = 0; h < H; h++) {
                if (!gq || !kt || !vt) continue;
                int64_t i0 = qt * ATT_BQ, i1 = i0 + ATT_BQ < a->n_q ? i0 + ATT_BQ : a->n_q, g = h / rep;
                int64_t kend_tile = att_key_end(a, i1 - 1);
                for (int64_t j0 = 0; j0 < kend_tile; j0 += ATT_BK) {
                    att_transpose_tile(k, j0, a->n_k, G, g, hd, kt);
                    att_transpose_tile(v, j0, a->n_k, G, g, hd, vt);
                    for (int64_t i = i0; i < i1; i++) {
                        int64_t x = i * H + h, cnt = att_key_end(a, i) - j0;
                        float L = lse[x], Dx = D[x];
                        if (cnt <= 0 || L == -INFINITY) continue; /* no visible key here: no gradient */
                        if (cnt > ATT_BK) cnt = ATT_BK;
                        att_row_tile(q + x * hd, kt, hd, s);
                        att_row_tile(dout + x * hd, vt, hd, dp);
                        for (int64_t jj = 0; jj < ATT_BK; jj++) {
                            float pj = jj < cnt ? att_exp(a->scale * s[jj] - L) : 0.0f;
                            s[jj] = pj * (dp[jj] - Dx); /* dS */
                        }
                        for (int64_t d = 0; d < hd; d++) gq[d] = 0.0f;
                        for (int64_t jj = 0; jj < cnt; jj++) {
                            const float *kj = k + ((j0 + jj) * G + g) * hd;
                            float ds = s[jj];
#pragma omp simd
                            for (int64_t d = 0; d < hd; d++) gq[d] += ds * kj[d];
                        }
                        float *dqi = dq + x * hd;
#pragma omp simd
                        for (int64_t d = 0; d < hd; d++) dqi[d] += a->scale * gq[d];
                    }
                }
            }
        free(gq);
        free(kt);
        free(vt);
    }

    /* pass 2: dV[j] += sum_i P_ij dO_i, dK[j] += scale * sum_i dS_ij q_i over the query heads of kv head g; the
     * work item's key and value tiles are transposed once and reused for every query row. */
    const int64_t n_kt = (a->n_k + ATT_BK - 1) / ATT_BK;
#pragma omp parallel
    {
        float *gk = malloc(sizeof(float) * (size_t)(ATT_BK * hd)), *gv = malloc(sizeof(float) * (size_t)(ATT_BK * hd));
        float *kt = malloc(sizeof(float) * (size_t)(ATT_BK * hd)), *vt = malloc(sizeof(float) * (size_t)(ATT_BK * hd));
        float s[ATT_BK], dp[ATT_BK];
        if (!gk || !gv || !kt || !vt) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t kt_i = 0; kt_i < n_kt; kt_i++)
            for (int64_t g = 0; g < G; g++) {
                if (!gk || !gv || !kt || !vt) continue;
                int64_t j0 = kt_i * ATT_BK, j1 = j0 + ATT_BK < a->n_k ? j0 + ATT_BK : a->n_k;
                for (int64_t e = 0; e < (j1 - j0) * hd; e++) gk[e] = gv[e] = 0.0f;
                att_transpose_tile(k, j0, a->n_k, G, g, hd, kt);
                att_transpose_tile(v, j0, a->n_k, G, g, hd, vt);
                for (int64_t h = g * rep; h < (g + 1) * rep; h++)
                    for (int64_t i = att_row_begin(a, j0); i < a->n_q; i++) {
                        int64_t x = i * H + h, je = att_key_end(a, i);
                        float L = lse[x], Dx = D[x];
                        if (L == -INFINITY) continue;
                        if (je > j1) je = j1;
                        int64_t cnt = je - j0;
                        if (cnt <= 0) continue;
                        const float *qi = q + x * hd, *gi = dout + x * hd;
                        att_row_tile(qi, kt, hd, s);
                        att_row_tile(gi, vt, hd, dp);
                        for (int64_t jj = 0; jj < ATT_BK; jj++) {
                            float pj = jj < cnt ? att_exp(a->scale * s[jj] - L) : 0.0f;
                            s[jj] = pj * (dp[jj] - Dx); /* dS */
                            dp[jj] = pj;                /* P */
                        }
                        for (int64_t jj = 0; jj < cnt; jj++) {
                            float pj = dp[jj], ds = s[jj];
                            float *gkj = gk + jj * hd, *gvj = gv + jj * hd;
#pragma omp simd
                            for (int64_t d = 0; d < hd; d++) {
                                gvj[d] += pj * gi[d];
                                gkj[d] += ds * qi[d];
                            }
                        }
                    }
                for (int64_t j = j0; j < j1; j++) {
                    float *dkj = dk + (j * G + g) * hd, *dvj = dv + (j * G + g) * hd;
                    for (int64_t d = 0; d < hd; d++) {
                        dkj[d] += a->scale * gk[(j - j0) * hd + d];
                        dvj[d] += gv[(j - j0) * hd + d];
                    }
                }
            }
        free(gk);
        free(gv);
        free(kt);
        free(vt);
    }
    free(D);
    LCX_FAIL_IF(oom, LCX_ERR_OOM, "%s: no memory for per-thread tiles", op);
    return LCX_OK;
}
