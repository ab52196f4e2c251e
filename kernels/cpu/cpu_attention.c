/* cpu_attention: flash-style forward (online softmax over key tiles, O(n) memory) and the merge of partial
 * results. Work items are (query tile, head) pairs, each computed by one thread in a fixed order with serial
 * sgemm calls, so results do not depend on the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_attention_common.h"

/* Per-thread tiles: s [ATT_FWD_BQ][ATT_FWD_BK] scores, then probabilities; kt [hd][ATT_FWD_BK] the key tile
 * transposed (AVX2 products); bf16 only: the work item's q and o tiles [ATT_FWD_BQ][hd] and the current key
 * tile's k and v [ATT_FWD_BK][hd] in float32. */
typedef struct fwd_scratch {
    float *s, *kt, *q, *o, *k, *v;
} fwd_scratch;

static size_t fwd_thread_bytes(const lcx_attn_args *a) {
    size_t b = lcx_cpu_ws_add(lcx_cpu_ws_part(ATT_FWD_BQ * ATT_FWD_BK, sizeof(float)),
                              lcx_cpu_ws_part(ATT_FWD_BK * a->head_dim, sizeof(float)));
    if (a->dt == LCX_BF16)
        b = lcx_cpu_ws_add(
            lcx_cpu_ws_add(b, lcx_cpu_ws_mul(lcx_cpu_ws_part(ATT_FWD_BQ * a->head_dim, sizeof(float)), 2)),
            lcx_cpu_ws_mul(lcx_cpu_ws_part(ATT_FWD_BK * a->head_dim, sizeof(float)), 2));
    return b;
}

size_t lcx_cpu_attention_fwd_ws(const lcx_attn_args *a) {
    if (a->n_q <= 0 || a->n_heads <= 0 || a->head_dim <= 0) return 0;
    return lcx_cpu_ws_mul(fwd_thread_bytes(a), lcx_cpu_threads());
}

static fwd_scratch fwd_slot(const lcx_attn_args *a, char *base) {
    lcx_cpu_carve c = {base};
    fwd_scratch w = {lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_FWD_BQ * ATT_FWD_BK, sizeof(float))),
                     lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_FWD_BK * a->head_dim, sizeof(float))), NULL, NULL, NULL,
                     NULL};
    if (a->dt == LCX_BF16) {
        w.q = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_FWD_BQ * a->head_dim, sizeof(float)));
        w.o = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_FWD_BQ * a->head_dim, sizeof(float)));
        w.k = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_FWD_BK * a->head_dim, sizeof(float)));
        w.v = lcx_cpu_take(&c, lcx_cpu_ws_part(ATT_FWD_BK * a->head_dim, sizeof(float)));
    }
    return w;
}

/* One (head, query tile) work item: online softmax over key tiles, scores and P V as sgemm products. The
 * unnormalised output accumulates in place in o (float32: the output itself, row stride H * hd; bf16: the
 * thread's o tile, rounded into the output at the end). */
LCX_CPU_HOT static void fwd_tile(const lcx_attn_args *a, int64_t h, int64_t i0, int64_t i1, const fwd_scratch *w) {
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, g = h / (H / G), nr = i1 - i0;
    const int bf = a->dt == LCX_BF16, avx2 = lcx_cpu_att_avx2_usable(hd);
    const int64_t ldq = bf ? hd : H * hd, ldk = bf ? hd : G * hd; /* o has q's layout */
    const float *qb;
    float *ob, *lse = a->lse, *s = w->s;
    if (bf) {
        lcx_cpu_act_load(a->dt, a->q, (i0 * H + h) * hd, H * hd, nr, hd, w->q);
        qb = w->q;
        ob = w->o;
    } else {
        qb = (const float *)a->q + (i0 * H + h) * hd;
        ob = (float *)a->o + (i0 * H + h) * hd;
    }
    float m[ATT_FWD_BQ], l[ATT_FWD_BQ];
    for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int64_t d = 0; d < hd; d++) ob[r * ldq + d] = 0.0f;
    }
    const int64_t kend_tile = att_key_end(a, i1 - 1); /* the last row sees the most keys */
    int64_t kbeg_tile = a->n_k; /* key tiles before every row's document hold nothing visible */
    for (int64_t i = i0; i < i1; i++) {
        int64_t b = att_key_begin(a, i);
        kbeg_tile = b < kbeg_tile ? b : kbeg_tile;
    }
    for (int64_t j0 = kbeg_tile / ATT_FWD_BK * ATT_FWD_BK; j0 < kend_tile; j0 += ATT_FWD_BK) {
        int64_t nk = kend_tile - j0 < ATT_FWD_BK ? kend_tile - j0 : ATT_FWD_BK;
        const float *kb, *vb;
        if (bf) {
            lcx_cpu_act_load(a->dt, a->k, (j0 * G + g) * hd, G * hd, nk, hd, w->k);
            lcx_cpu_act_load(a->dt, a->v, (j0 * G + g) * hd, G * hd, nk, hd, w->v);
            kb = w->k;
            vb = w->v;
        } else {
            kb = (const float *)a->k + (j0 * G + g) * hd;
            vb = (const float *)a->v + (j0 * G + g) * hd;
        }
        if (avx2) {
            lcx_cpu_att_transpose_keys(kb, ldk, nk, hd, w->kt, ATT_FWD_BK);
            lcx_cpu_att_scores(qb, ldq, nr, w->kt, ATT_FWD_BK, nk, hd, a->scale, s, ATT_FWD_BK);
        } else {
            att_gemm(0, 1, nr, nk, hd, a->scale, qb, ldq, kb, ldk, 0.0f, s, ATT_FWD_BK);
        }
        for (int64_t r = 0; r < nr; r++) {
            float *sr = s + r * ATT_FWD_BK;
            int64_t lo, hi;
            att_tile_range(a, i0 + r, j0, nk, &lo, &hi);
            if (hi <= lo) { /* nothing visible in this tile: the row keeps its state */
                for (int64_t jj = 0; jj < nk; jj++) sr[jj] = 0.0f;
                continue;
            }
            float mt = att_row_max(sr + lo, hi - lo);
            float mnew = m[r] > mt ? m[r] : mt;
            float corr = m[r] == -INFINITY ? 0.0f : lcx_cpu_expf(m[r] - mnew); /* 0 when nothing seen yet */
            l[r] = l[r] * corr + att_row_exp_sum(sr + lo, hi - lo, mnew); /* the backward's exp: P matches the LSE */
            for (int64_t jj = 0; jj < lo; jj++) sr[jj] = 0.0f; /* masked keys: other documents */
            for (int64_t jj = hi; jj < nk; jj++) sr[jj] = 0.0f; /* masked keys: the future */
            m[r] = mnew;
            if (corr != 1.0f) {
                float *orow = ob + r * ldq;
                for (int64_t d = 0; d < hd; d++) orow[d] *= corr;
            }
        }
        if (avx2)
            lcx_cpu_att_pv(s, ATT_FWD_BK, nr, vb, ldk, nk, hd, ob, ldq);
        else
            att_gemm(0, 0, nr, hd, nk, 1.0f, s, ATT_FWD_BK, vb, ldk, 1.0f, ob, ldq);
    }
    for (int64_t r = 0; r < nr; r++) {
        float *orow = ob + r * ldq;
        int64_t x = (i0 + r) * H + h;
        if (l[r] == 0.0f) { /* fully masked row */
            for (int64_t d = 0; d < hd; d++) orow[d] = 0.0f;
            lse[x] = -INFINITY;
        } else {
            float inv = 1.0f / l[r];
            for (int64_t d = 0; d < hd; d++) orow[d] *= inv;
            lse[x] = m[r] + logf(l[r]);
        }
    }
    if (bf) lcx_cpu_act_store(a->dt, a->o, (i0 * H + h) * hd, H * hd, nr, hd, ob);
}

lcx_status lcx_cpu_attention_fwd(lcx_exec *x, const lcx_attn_args *a) {
    const int64_t H = a->n_heads, n_qt = (a->n_q + ATT_FWD_BQ - 1) / ATT_FWD_BQ;
    const int nt = lcx_cpu_threads();
    const size_t slot = fwd_thread_bytes(a);
    lcx_cpu_blas_serial(); /* one single-threaded sgemm per tile, from each OpenMP thread */
#pragma omp parallel num_threads(nt)
    {
        const fwd_scratch w = fwd_slot(a, (char *)x->scratch + slot * (size_t)omp_get_thread_num());
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t qt = 0; qt < n_qt; qt++)
            for (int64_t h = 0; h < H; h++) {
                int64_t i0 = qt * ATT_FWD_BQ, i1 = i0 + ATT_FWD_BQ < a->n_q ? i0 + ATT_FWD_BQ : a->n_q;
                fwd_tile(a, h, i0, i1, &w);
            }
    }
    return LCX_OK;
}

/* One row of the merge: weights of the two sides, or 0 when neither saw a key (then lse stays -inf). */
static inline int merge_weights(float *lse_acc, float b, float *wa, float *wb) {
    float a = *lse_acc, mx = a > b ? a : b;
    if (mx == -INFINITY) { /* neither side saw a key */
        *lse_acc = -INFINITY;
        return 0;
    }
    float ea = expf(a - mx), eb = expf(b - mx), sum = ea + eb; /* arguments <= 0: no overflow */
    *wa = ea / sum;
    *wb = eb / sum;
    *lse_acc = mx + logf(sum);
    return 1;
}

lcx_status lcx_cpu_attention_merge(lcx_exec *x, const lcx_attn_merge_args *a) {
    (void)x;
    const int64_t n_rows = a->n_rows, n_heads = a->n_heads, head_dim = a->head_dim;
    float *lse_acc = a->lse_acc;
    const float *lse_part = a->lse_part;
    const int bf = a->dt == LCX_BF16;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_rows * n_heads; r++) {
        float wa = 0.0f, wb = 0.0f;
        int seen = merge_weights(&lse_acc[r], lse_part[r], &wa, &wb);
        if (bf) {
            uint16_t *oa = (uint16_t *)a->o_acc + r * head_dim;
            const uint16_t *ob = (const uint16_t *)a->o_part + r * head_dim;
            for (int64_t d = 0; d < head_dim; d++)
                oa[d] = seen ? lcx_f32_to_bf16(wa * lcx_bf16_to_f32(oa[d]) + wb * lcx_bf16_to_f32(ob[d])) : 0;
        } else {
            float *oa = (float *)a->o_acc + r * head_dim;
            const float *ob = (const float *)a->o_part + r * head_dim;
            if (!seen)
                for (int64_t d = 0; d < head_dim; d++) oa[d] = 0.0f;
            else
                for (int64_t d = 0; d < head_dim; d++) oa[d] = wa * oa[d] + wb * ob[d];
        }
    }
    return LCX_OK;
}
