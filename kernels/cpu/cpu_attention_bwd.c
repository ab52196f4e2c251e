/* cpu_attention_bwd: flash-attention-2 backward for one (query block, key block) pair, recomputing the
 * probabilities from the saved LSE. A work item is one query head: it walks key tiles, and for each the query
 * tiles that see it, with five products per tile pair (S = Q K^T, dP = dO V^T, dV += P^T dO, dK += dS^T Q,
 * dQ += dS K): AVX2 + FMA register kernels where the forward has them (cpu_attention_avx2.c; the key and value
 * tiles transposed once per key tile), else OpenBLAS sgemm. dQ of the head is owned by the item; dK and dV go to
 * a per-head scratch that is summed into the caller's kv head in head order afterwards, so no atomics are needed
 * and the result does not depend on the thread count. Row sums, per-head scratch and tiles come from the exec's
 * arena. */
#include <math.h>

#include "kernels/cpu/cpu_attention_common.h"

/* Per-thread tiles: p [ATT_BQ][ATT_BK] scores, then probabilities; ds [ATT_BQ][ATT_BK] dO V^T, then dS; kt, vt
 * [hd][ATT_BK] the key and value tiles transposed (AVX2 products); bf16 only: float32 copies of the current q
 * and dO tiles [ATT_BQ][hd] and k and v tiles [ATT_BK][hd]. */
typedef struct bwd_scratch {
    float *p, *ds, *kt, *vt, *q, *g, *k, *v;
} bwd_scratch;

static size_t bwd_thread_bytes(const lcx_attn_args *a) {
    size_t b = lcx_cpu_ws_add(lcx_cpu_ws_mul(lcx_cpu_ws_part(ATT_BQ * ATT_BK, sizeof(float)), 2),
                              lcx_cpu_ws_mul(lcx_cpu_ws_part(ATT_BK * a->head_dim, sizeof(float)), 2));
    if (a->dt == LCX_BF16)
        b = lcx_cpu_ws_add(lcx_cpu_ws_add(b, lcx_cpu_ws_mul(lcx_cpu_ws_part(ATT_BQ * a->head_dim, sizeof(float)), 2)),
                           lcx_cpu_ws_mul(lcx_cpu_ws_part(ATT_BK * a->head_dim, sizeof(float)), 2));
    return b;
}

static int bwd_has_work(const lcx_attn_args *a) { return a->n_q > 0 && a->n_k > 0 && a->mask != LCX_MASK_NONE; }

/* D [n_q * H], per-head dK and dV [H][n_k][hd], then the per-thread tiles. */
size_t lcx_cpu_attention_bwd_ws(const lcx_attn_args *a) {
    if (a->n_heads <= 0 || a->head_dim <= 0 || !bwd_has_work(a)) return 0;
    size_t kv = lcx_cpu_ws_part(a->n_heads * a->n_k * a->head_dim, sizeof(float));
    if (a->n_k > INT64_MAX / a->n_heads / a->head_dim) kv = SIZE_MAX;
    size_t b = lcx_cpu_ws_add(lcx_cpu_ws_part(a->n_q * a->n_heads, sizeof(float)), lcx_cpu_ws_mul(kv, 2));
    return lcx_cpu_ws_add(b, lcx_cpu_ws_mul(bwd_thread_bytes(a), lcx_cpu_threads()));
}

static bwd_scratch bwd_slot(const lcx_attn_args *a, char *base) {
    lcx_cpu_carve c = {base};
    bwd_scratch w = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    w.p = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BQ * ATT_BK, sizeof(float)));
    w.ds = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BQ * ATT_BK, sizeof(float)));
    w.kt = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BK * a->head_dim, sizeof(float)));
    w.vt = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BK * a->head_dim, sizeof(float)));
    if (a->dt == LCX_BF16) {
        w.q = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BQ * a->head_dim, sizeof(float)));
        w.g = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BQ * a->head_dim, sizeof(float)));
        w.k = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BK * a->head_dim, sizeof(float)));
        w.v = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_BK * a->head_dim, sizeof(float)));
    }
    return w;
}

/* Everything one head contributes. dkh, dvh: this head's [n_k][hd] gradient scratch (zeroed here). Operands are
 * read in place (float32, row strides H * hd and G * hd) or widened tile by tile into w (bf16, row stride hd). */
LCX_CPU_HOT static void bwd_head(const lcx_attn_args *a, const float *D, float *dkh, float *dvh, int64_t h,
                                 const bwd_scratch *w) {
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, g = h / (H / G);
    const int bf = a->dt == LCX_BF16, avx2 = lcx_cpu_att_avx2_usable(hd);
    const int64_t ldq = bf ? hd : H * hd, ldk = bf ? hd : G * hd, lddq = H * hd;
    const float ds_scale = avx2 ? a->scale : 1.0f; /* the AVX2 products have no alpha: dS carries the scale */
    const float *lse = a->lse;
    float *dq = a->dq;
    for (int64_t e = 0; e < a->n_k * hd; e++) dkh[e] = dvh[e] = 0.0f;
    for (int64_t j0 = 0; j0 < a->n_k; j0 += ATT_BK) {
        const int64_t nkt = a->n_k - j0 < ATT_BK ? a->n_k - j0 : ATT_BK;
        const float *kj, *vj;
        if (bf) {
            lcx_cpu_act_load(a->dt, a->k, (j0 * G + g) * hd, G * hd, nkt, hd, w->k);
            lcx_cpu_act_load(a->dt, a->v, (j0 * G + g) * hd, G * hd, nkt, hd, w->v);
            kj = w->k;
            vj = w->v;
        } else {
            kj = (const float *)a->k + (j0 * G + g) * hd;
            vj = (const float *)a->v + (j0 * G + g) * hd;
        }
        if (avx2) {
            lcx_cpu_att_transpose_keys(kj, ldk, nkt, hd, w->kt, ATT_BK);
            lcx_cpu_att_transpose_keys(vj, ldk, nkt, hd, w->vt, ATT_BK);
        }
        /* query tiles from the one holding the first row that sees key j0 */
        for (int64_t i0 = att_row_begin(a, j0) / ATT_BQ * ATT_BQ; i0 < a->n_q; i0 += ATT_BQ) {
            const int64_t i1 = i0 + ATT_BQ < a->n_q ? i0 + ATT_BQ : a->n_q, nr = i1 - i0;
            int64_t nk = att_key_end(a, i1 - 1) - j0; /* keys of the tile the last (widest) row sees */
            if (nk <= 0) continue;
            if (nk > nkt) nk = nkt;
            if (a->q_doc_start) { /* document mask: skip the pair when no row of the tile sees its keys */
                int64_t any = 0, lo, hi;
                for (int64_t i = i0; i < i1 && !any; i++) {
                    att_tile_range(a, i, j0, nk, &lo, &hi);
                    any = hi > lo;
                }
                if (!any) continue;
            }
            const float *qi, *gi;
            if (bf) {
                lcx_cpu_act_load(a->dt, a->q, (i0 * H + h) * hd, H * hd, nr, hd, w->q);
                lcx_cpu_act_load(a->dt, a->dout, (i0 * H + h) * hd, H * hd, nr, hd, w->g);
                qi = w->q;
                gi = w->g;
            } else {
                qi = (const float *)a->q + (i0 * H + h) * hd;
                gi = (const float *)a->dout + (i0 * H + h) * hd;
            }
            if (avx2) {
                lcx_cpu_att_scores(qi, ldq, nr, w->kt, ATT_BK, nk, hd, a->scale, w->p, ATT_BK);
                lcx_cpu_att_scores(gi, ldq, nr, w->vt, ATT_BK, nk, hd, 1.0f, w->ds, ATT_BK);
            } else {
                att_gemm(0, 1, nr, nk, hd, a->scale, qi, ldq, kj, ldk, 0.0f, w->p, ATT_BK);
                att_gemm(0, 1, nr, nk, hd, 1.0f, gi, ldq, vj, ldk, 0.0f, w->ds, ATT_BK);
            }
            for (int64_t r = 0; r < nr; r++) {
                const int64_t x = (i0 + r) * H + h;
                int64_t lo, hi;
                att_tile_range(a, i0 + r, j0, nk, &lo, &hi);
                const float L = lse[x], Dx = D[x];
                float *pr = w->p + r * ATT_BK, *dsr = w->ds + r * ATT_BK;
                if (L == -INFINITY || hi < lo) lo = hi = 0; /* no visible key at all: no gradient */
                for (int64_t jj = 0; jj < lo; jj++) pr[jj] = dsr[jj] = 0.0f; /* masked keys: other documents */
                for (int64_t jj = lo; jj < hi; jj++) {
                    float pj = lcx_cpu_expf(pr[jj] - L);
                    pr[jj] = pj;
                    dsr[jj] = pj * (dsr[jj] - Dx) * ds_scale;
                }
                for (int64_t jj = hi; jj < nk; jj++) pr[jj] = dsr[jj] = 0.0f; /* masked keys: the future */
            }
            if (avx2) {
                lcx_cpu_att_ptv(w->p, ATT_BK, nr, nk, gi, ldq, hd, dvh + j0 * hd, hd);
                lcx_cpu_att_ptv(w->ds, ATT_BK, nr, nk, qi, ldq, hd, dkh + j0 * hd, hd);
                lcx_cpu_att_pv(w->ds, ATT_BK, nr, kj, ldk, nk, hd, dq + (i0 * H + h) * hd, lddq);
            } else {
                att_gemm(1, 0, nk, hd, nr, 1.0f, w->p, ATT_BK, gi, ldq, 1.0f, dvh + j0 * hd, hd);
                att_gemm(1, 0, nk, hd, nr, a->scale, w->ds, ATT_BK, qi, ldq, 1.0f, dkh + j0 * hd, hd);
                att_gemm(0, 0, nr, hd, nk, a->scale, w->ds, ATT_BK, kj, ldk, 1.0f, dq + (i0 * H + h) * hd, lddq);
            }
        }
    }
}

lcx_status lcx_cpu_attention_bwd(lcx_exec *x, const lcx_attn_args *a) {
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, rep = H / G;
    if (!bwd_has_work(a)) return LCX_OK;

    /* D[i, h] = rowsum(dO * O); per-head dK and dV scratch [H][n_k][hd] */
    lcx_cpu_carve c = {x->scratch};
    float *D = lcx_cpu_take(&c, lcx_cpu_ws_part(a->n_q * H, sizeof(float)));
    float *dks = lcx_cpu_take(&c, lcx_cpu_ws_part(H * a->n_k * hd, sizeof(float)));
    float *dvs = lcx_cpu_take(&c, lcx_cpu_ws_part(H * a->n_k * hd, sizeof(float)));
    char *slots = c.next;
    if (a->dt == LCX_F32) {
        const float *dout = a->dout, *o = a->o;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < a->n_q * H; r++) {
            double s = 0.0;
            for (int64_t d = 0; d < hd; d++) s += (double)dout[r * hd + d] * o[r * hd + d];
            D[r] = (float)s;
        }
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < a->n_q * H; r++) {
            double s = 0.0;
            for (int64_t d = 0; d < hd; d++)
                s += (double)lcx_cpu_bf16_get(a->dout, r * hd + d) * lcx_cpu_bf16_get(a->o, r * hd + d);
            D[r] = (float)s;
        }
    }

    const int nt = lcx_cpu_threads();
    const size_t slot = bwd_thread_bytes(a);
    lcx_cpu_blas_serial(); /* one single-threaded sgemm per tile, from each OpenMP thread */
#pragma omp parallel num_threads(nt)
    {
        const bwd_scratch w = bwd_slot(a, slots + slot * (size_t)omp_get_thread_num());
#pragma omp for schedule(dynamic)
        for (int64_t h = 0; h < H; h++) bwd_head(a, D, dks + h * a->n_k * hd, dvs + h * a->n_k * hd, h, &w);
    }
    /* dK[j, g] += sum over the group's heads in head order */
    float *dk = a->dk, *dv = a->dv;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->n_k * G; r++) {
        int64_t j = r / G, g = r % G;
        float *dkj = dk + r * hd, *dvj = dv + r * hd;
        for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
            const float *sk = dks + (h * a->n_k + j) * hd, *sv = dvs + (h * a->n_k + j) * hd;
            for (int64_t d = 0; d < hd; d++) {
                dkj[d] += sk[d];
                dvj[d] += sv[d];
            }
        }
    }
    return LCX_OK;
}
