/* cpu_attention: flash-style forward (online softmax over key tiles, O(n) memory) and the merge of partial
 * results. Work items are (query tile, head) pairs, each computed by one thread in a fixed order, so results do
 * not depend on the thread count. */
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

lcx_status lcx_cpu_attention_fwd(const lcx_attn_args *a, const float *q, const float *k, const float *v,
                                 float *o, float *lse) {
    LCX_TRY(lcx_cpu_attn_check(a));
    LCX_CPU_NEED(q, a->n_q, "attention_fwd");
    LCX_CPU_NEED(o, a->n_q, "attention_fwd");
    LCX_CPU_NEED(lse, a->n_q, "attention_fwd");
    LCX_CPU_NEED(k, a->n_k, "attention_fwd");
    LCX_CPU_NEED(v, a->n_k, "attention_fwd");
    const int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, rep = H / G;
    const int64_t n_qt = (a->n_q + ATT_BQ - 1) / ATT_BQ;
    int oom = 0;
#pragma omp parallel
    {
        float *acc = malloc(sizeof(float) * (size_t)(ATT_BQ * hd)); /* unnormalised output rows */
        float *kt = malloc(sizeof(float) * (size_t)(ATT_BK * hd));  /* key tile, transposed */
        float s[ATT_BK], p[ATT_BK];
        float m[ATT_BQ], l[ATT_BQ]; /* running max and sum of exp per row */
        if (!acc || !kt) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t qt = 0; qt < n_qt; qt++)
            for (int64_t h = 0; h < H; h++) {
                if (!acc || !kt) continue;
                int64_t i0 = qt * ATT_BQ, i1 = i0 + ATT_BQ < a->n_q ? i0 + ATT_BQ : a->n_q, g = h / rep;
                for (int64_t r = 0; r < i1 - i0; r++) {
                    m[r] = -INFINITY;
                    l[r] = 0.0f;
                    for (int64_t d = 0; d < hd; d++) acc[r * hd + d] = 0.0f;
                }
                int64_t kend_tile = att_key_end(a, i1 - 1); /* the last row sees the most keys */
                for (int64_t j0 = 0; j0 < kend_tile; j0 += ATT_BK) {
                    att_transpose_tile(k, j0, a->n_k, G, g, hd, kt);
                    for (int64_t r = 0; r < i1 - i0; r++) {
                        int64_t i = i0 + r, cnt = att_key_end(a, i) - j0;
                        if (cnt <= 0) continue;
                        if (cnt > ATT_BK) cnt = ATT_BK;
                        att_row_tile(q + (i * H + h) * hd, kt, hd, s);
                        /* max and sum over 8 lanes combined in a fixed order: no serial dependency chain */
                        float mx8[8];
                        for (int l8 = 0; l8 < 8; l8++) mx8[l8] = -INFINITY;
                        for (int64_t jj = 0; jj < ATT_BK; jj++) {
                            s[jj] = jj < cnt ? a->scale * s[jj] : -INFINITY;
                            mx8[jj & 7] = s[jj] > mx8[jj & 7] ? s[jj] : mx8[jj & 7];
                        }
                        float mt = mx8[0];
                        for (int l8 = 1; l8 < 8; l8++) mt = mx8[l8] > mt ? mx8[l8] : mt;
                        float mnew = m[r] > mt ? m[r] : mt;
                        float corr = m[r] == -INFINITY ? 0.0f : att_exp(m[r] - mnew); /* 0 when nothing seen */
                        for (int64_t jj = 0; jj < ATT_BK; jj++) p[jj] = jj < cnt ? att_exp(s[jj] - mnew) : 0.0f;
                        float *ar = acc + r * hd, ls8[8] = {0};
                        for (int64_t jj = 0; jj < ATT_BK; jj++) ls8[jj & 7] += p[jj]; /* p = 0 past cnt */
                        float lsum = ((ls8[0] + ls8[1]) + (ls8[2] + ls8[3])) + ((ls8[4] + ls8[5]) + (ls8[6] + ls8[7]));
                        l[r] = l[r] * corr + lsum;
#pragma omp simd
                        for (int64_t d = 0; d < hd; d++) ar[d] *= corr;
                        for (int64_t jj = 0; jj < cnt; jj++) {
                            const float *vj = v + ((j0 + jj) * G + g) * hd;
                            float pj = p[jj];
#pragma omp simd
                            for (int64_t d = 0; d < hd; d++) ar[d] += pj * vj[d];
                        }
                        m[r] = mnew;
                    }
                }
                for (int64_t r = 0; r < i1 - i0; r++) {
                    int64_t i = i0 + r;
                    float *oi = o + (i * H + h) * hd;
                    if (l[r] == 0.0f) { /* fully masked row */
                        for (int64_t d = 0; d < hd; d++) oi[d] = 0.0f;
                        lse[i * H + h] = -INFINITY;
                    } else {
                        float inv = 1.0f / l[r];
                        for (int64_t d = 0; d < hd; d++) oi[d] = acc[r * hd + d] * inv;
                        lse[i * H + h] = m[r] + logf(l[r]);
                    }
                }
            }
        free(acc);
        free(kt);
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
