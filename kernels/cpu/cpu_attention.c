/* cpu_attention: flash-style forward (online softmax over key tiles, O(n) memory) and the merge of partial
 * results. Work items are (query tile, head) pairs, each computed by one thread in a fixed order with serial
 * sgemm calls, so results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "cpu_attention_common.h"

lcx_status lcx_cpu_attn_check(const lcx_attn_args *a) {
    LCX_FAIL_IF(a == NULL, LCX_ERR_INVALID, "attention: NULL arguments");
    LCX_FAIL_IF(a->n_q < 0 || a->n_k < 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->head_dim <= 0 ||
                    a->n_heads % a->n_kv_heads != 0,
                LCX_ERR_INVALID, "attention: bad sizes q=%lld k=%lld heads=%lld kv_heads=%lld head_dim=%lld",
                (long long)a->n_q, (long long)a->n_k, (long long)a->n_heads, (long long)a->n_kv_heads,
                (long long)a->head_dim);
    LCX_FAIL_IF(a->mask != LCX_MASK_CAUSAL && a->mask != LCX_MASK_FULL && a->mask != LCX_MASK_NONE,
                LCX_ERR_INVALID, "attention: unknown mask mode %d", (int)a->mask);
    LCX_FAIL_IF(!isfinite(a->scale), LCX_ERR_INVALID, "attention: scale is not finite");
    return LCX_OK;
}

/* One (head, query tile) work item: online softmax over key tiles, scores and P V as sgemm products. The
 * unnormalised output accumulates in place in o (row stride H * hd). s: [ATT_BQ][ATT_BK] scratch. */
LCX_CPU_HOT static void fwd_tile(const lcx_attn_args *a, const float *q, const float *k, const float *v, float *o, float *lse,
                     int64_t h, int64_t i0, int64_t i1, float *s) {
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, g = h / (H / G), nr = i1 - i0;
    const int64_t ldq = H * hd, ldk = G * hd;
    float m[ATT_BQ], l[ATT_BQ];
    float *ob = o + (i0 * H + h) * hd;
    for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int64_t d = 0; d < hd; d++) ob[r * ldq + d] = 0.0f;
    }
    const int64_t kend_tile = att_key_end(a, i1 - 1); /* the last row sees the most keys */
    for (int64_t j0 = 0; j0 < kend_tile; j0 += ATT_BK) {
        int64_t nk = kend_tile - j0 < ATT_BK ? kend_tile - j0 : ATT_BK;
        att_gemm(0, 1, nr, nk, hd, a->scale, q + (i0 * H + h) * hd, ldq, k + (j0 * G + g) * hd, ldk, 0.0f, s,
                 ATT_BK);
        for (int64_t r = 0; r < nr; r++) {
            float *sr = s + r * ATT_BK;
            int64_t cnt = att_key_end(a, i0 + r) - j0;
            cnt = cnt < 0 ? 0 : cnt > nk ? nk : cnt;
            if (cnt == 0) { /* nothing visible in this tile: the row keeps its state */
                for (int64_t jj = 0; jj < nk; jj++) sr[jj] = 0.0f;
                continue;
            }
            float mt = att_row_max(sr, cnt);
            float mnew = m[r] > mt ? m[r] : mt;
            float corr = m[r] == -INFINITY ? 0.0f : lcx_cpu_expf(m[r] - mnew); /* 0 when nothing seen yet */
            l[r] = l[r] * corr + att_row_exp_sum(sr, cnt, mnew);
            for (int64_t jj = cnt; jj < nk; jj++) sr[jj] = 0.0f; /* masked keys */
            m[r] = mnew;
            if (corr != 1.0f) {
                float *orow = ob + r * ldq;
                for (int64_t d = 0; d < hd; d++) orow[d] *= corr;
            }
        }
        att_gemm(0, 0, nr, hd, nk, 1.0f, s, ATT_BK, v + (j0 * G + g) * hd, ldk, 1.0f, ob, ldq);
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
}

lcx_status lcx_cpu_attention_fwd(const lcx_attn_args *a, const float *q, const float *k, const float *v,
                                 float *o, float *lse) {
    LCX_TRY(lcx_cpu_attn_check(a));
    LCX_CPU_NEED(q, a->n_q, "attention_fwd");
    LCX_CPU_NEED(o, a->n_q, "attention_fwd");
    LCX_CPU_NEED(lse, a->n_q, "attention_fwd");
    LCX_CPU_NEED(k, a->n_k, "attention_fwd");
    LCX_CPU_NEED(v, a->n_k, "attention_fwd");
    const int64_t H = a->n_heads, n_qt = (a->n_q + ATT_BQ - 1) / ATT_BQ;
    int oom = 0;
    lcx_cpu_blas_serial(); /* one single-threaded sgemm per tile, from each OpenMP thread */
#pragma omp parallel
    {
        float *s = malloc(sizeof(float) * ATT_BQ * ATT_BK); /* scores, then probabilities */
        if (!s) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t qt = 0; qt < n_qt; qt++)
            for (int64_t h = 0; h < H; h++) {
                if (!s) continue;
                int64_t i0 = qt * ATT_BQ, i1 = i0 + ATT_BQ < a->n_q ? i0 + ATT_BQ : a->n_q;
                fwd_tile(a, q, k, v, o, lse, h, i0, i1, s);
            }
        free(s);
    }
    LCX_FAIL_IF(oom, LCX_ERR_OOM, "attention_fwd: no memory for per-thread tiles");
    return LCX_OK;
}

lcx_status lcx_cpu_attention_merge(float *o_acc, float *lse_acc, const float *o_part, const float *lse_part,
                                   int64_t n_rows, int64_t n_heads, int64_t head_dim) {
    LCX_FAIL_IF(n_rows < 0 || n_heads <= 0 || head_dim <= 0, LCX_ERR_INVALID,
                "attention_merge: bad sizes rows=%lld heads=%lld head_dim=%lld", (long long)n_rows,
                (long long)n_heads, (long long)head_dim);
    LCX_CPU_NEED(o_acc, n_rows, "attention_merge");
    LCX_CPU_NEED(lse_acc, n_rows, "attention_merge");
    LCX_CPU_NEED(o_part, n_rows, "attention_merge");
    LCX_CPU_NEED(lse_part, n_rows, "attention_merge");
#pragma omp parallel for schedule(static)
    for (int64_t x = 0; x < n_rows * n_heads; x++) {
        float a = lse_acc[x], b = lse_part[x], mx = a > b ? a : b;
        float *oa = o_acc + x * head_dim;
        const float *ob = o_part + x * head_dim;
        if (mx == -INFINITY) { /* neither side saw a key */
            for (int64_t d = 0; d < head_dim; d++) oa[d] = 0.0f;
            lse_acc[x] = -INFINITY;
            continue;
        }
        float ea = expf(a - mx), eb = expf(b - mx), sum = ea + eb; /* arguments <= 0: no overflow */
        float wa = ea / sum, wb = eb / sum;
        for (int64_t d = 0; d < head_dim; d++) oa[d] = wa * oa[d] + wb * ob[d];
        lse_acc[x] = mx + logf(sum);
    }
    return LCX_OK;
}
