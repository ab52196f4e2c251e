/* model_forward: batch upload, RoPE tables, embedding, one decoder layer forward, the forward API. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/layout.h"
#include "src/model/model_internal.h"

int64_t lcx_batch_count(const lcx_batch *b) {
    int64_t T = b->n_seq * b->seq_len, n = 0;
    if (!b->targets) return b->n_seq * (b->seq_len > 0 ? b->seq_len - 1 : 0);
    for (int64_t t = 0; t < T; t++) n += b->targets[t] != LCX_IGNORE_INDEX;
    return n;
}

/* cos/sin for positions [0, len) of a forward whose frequencies are those of a sequence of freq_len tokens (only
 * dynamic and longrope change them with the length). The tables are kept while they hold len positions and were
 * built from these frequencies: an entry depends on its position and the frequencies only, so the kept tables
 * give the same bits, and decoding token by token does not rebuild them for every token. */
static lcx_status rope_tables(lcx_model *m, int64_t freq_len, int64_t len) {
    int64_t np = m->rope.n_pairs;
    float inv[LCX_ROPE_MAX_PAIRS];
    double attn = 1.0;
    LCX_TRY(lcx_rope_inv_freq(&m->rope, freq_len, inv, &attn));
    if (len <= m->rope_len && attn == m->rope_attn && memcmp(inv, m->inv_freq, (size_t)np * sizeof(float)) == 0)
        return LCX_OK;
    const lcx_backend *be = m->be;
    size_t bytes;
    LCX_FAIL_IF(!lcx_mul_size((size_t)len, (size_t)np * sizeof(float), &bytes), LCX_ERR_OOM,
                "model: rope table for %lld positions too large", (long long)len);
    memcpy(m->inv_freq, inv, (size_t)np * sizeof(float));
    m->rope_attn = attn;
    float *hc = malloc(bytes + 1), *hs = malloc(bytes + 1);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!hc || !hs, LCX_ERR_OOM, done, "model: out of memory for rope tables (%lld positions)",
                  (long long)len);
    lcx_rope_table(m->inv_freq, np, attn, 0, len, hc, hs);
    LCX_TRY_GOTO(be->sync(m->x), done); /* queued ops may still read the old tables */
    be->free(m->rope_cos);
    be->free(m->rope_sin);
    m->rope_cos = m->rope_sin = NULL;
    m->rope_len = 0;
    LCX_TRY_GOTO(be->alloc(bytes, (void **)&m->rope_cos), done);
    LCX_TRY_GOTO(be->alloc(bytes, (void **)&m->rope_sin), done);
    LCX_TRY_GOTO(be->copy_h2d(m->x, m->rope_cos, hc, bytes), done);
    LCX_TRY_GOTO(be->copy_h2d(m->x, m->rope_sin, hs, bytes), done);
    m->rope_len = len;
done:
    free(hc);
    free(hs);
    return st;
}

lcx_status lcx_model_prepare(lcx_model *m, const lcx_batch *b, int64_t *count) {
    return lcx_model_prepare_rows(m, b, count, m->cp != NULL);
}

lcx_status lcx_model_prepare_rows(lcx_model *m, const lcx_batch *b, int64_t *count, int split) {
    LCX_FAIL_IF(!b || !b->ids, LCX_ERR_INVALID, "model: no batch");
    LCX_FAIL_IF(b->n_seq < 1 || b->seq_len < 1, LCX_ERR_INVALID, "model: batch of %lld x %lld tokens is empty",
                (long long)b->n_seq, (long long)b->seq_len);
    LCX_FAIL_IF(b->seq_len > m->max_tokens || b->n_seq > m->max_tokens / b->seq_len, LCX_ERR_INVALID,
                "model: batch of %lld x %lld tokens exceeds the capacity of %lld tokens", (long long)b->n_seq,
                (long long)b->seq_len, (long long)m->max_tokens);
    /* CP: a row is this rank's 2 chunks of a global row cp times as long (model_ring.c) */
    const int64_t cp = split ? m->cp_size : 1, row_len = b->seq_len * cp;
    if (split) {
        LCX_FAIL_IF(b->seq_len % 2, LCX_ERR_INVALID,
                    "model: with context parallelism a local row is 2 chunks, so its length must be even, not %lld",
                    (long long)b->seq_len);
        LCX_FAIL_IF(!b->targets, LCX_ERR_INVALID,
                    "model: with context parallelism the batch must carry its targets (formed in global order "
                    "before the split: lcx_cp_local_batch)");
    }
    /* Sliding-window attention is not implemented: fine as long as no row is longer than the window. */
    LCX_FAIL_IF(m->cfg.sliding_window > 0 && row_len > m->cfg.sliding_window, LCX_ERR_UNSUPPORTED,
                "model: %s sliding_window %lld is smaller than the sequence length %lld (sliding-window attention "
                "is not implemented; train at <= %lld tokens or lift the window)",
                lcx_arch_name(m->cfg.arch), (long long)m->cfg.sliding_window, (long long)row_len,
                (long long)m->cfg.sliding_window);
    int64_t T = b->n_seq * b->seq_len, S = b->seq_len;
    const lcx_backend *be = m->be;
    lcx_status st = LCX_OK;
    for (int64_t t = 0; t < T; t++)
        LCX_FAIL_IF(b->ids[t] < 0 || b->ids[t] >= m->V, LCX_ERR_INVALID,
                    "model: token %lld: id %d outside the vocabulary [0, %lld)", (long long)t, b->ids[t],
                    (long long)m->V);
    LCX_FAIL_IF(b->doc_start && !m->d_doc, LCX_ERR_INVALID,
                "model: document masking (a batch with document starts) needs a model built for training");
    int32_t *pos = malloc((size_t)T * sizeof(int32_t)), *tgt = malloc((size_t)T * sizeof(int32_t));
    int64_t *gpos = split ? malloc((size_t)S * sizeof(int64_t)) : NULL; /* CP: local row -> global offset */
    LCX_FAIL_GOTO(!pos || !tgt || (split && !gpos), LCX_ERR_OOM, done, "model: out of memory");
    if (gpos) LCX_TRY_GOTO(lcx_cp_positions(row_len, (int)cp, m->cp_rank, gpos), done);
    int64_t max_pos = 0, n = 0;
    for (int64_t s = 0; s < b->n_seq; s++) {
        const int64_t base = gpos ? lcx_ring_row_base(m, b, s) : 0;
        LCX_FAIL_GOTO(base < 0, LCX_ERR_INVALID, done,
                      "model: row %lld: position %d of CP rank %d's first token would put the row's start at %lld < 0",
                      (long long)s, b->positions[s * S], m->cp_rank, (long long)base);
        /* the rope tables cover the whole global row, whichever chunks this rank holds */
        if (gpos && base + row_len - 1 > max_pos) max_pos = base + row_len - 1;
        for (int64_t i = 0; i < S; i++) {
            int64_t t = s * S + i;
            int64_t p = gpos ? base + gpos[i] : b->positions ? b->positions[t] : i;
            if (gpos && b->positions) {
                LCX_FAIL_GOTO(b->positions[t] != p, LCX_ERR_INVALID, done,
                              "model: token %lld: position %d, but CP rank %d of %lld holds position %lld there "
                              "(chunks %d and %lld of a row of %lld tokens from position %lld: lcx_cp_local_batch)",
                              (long long)t, b->positions[t], m->cp_rank, (long long)cp, (long long)p, m->cp_rank,
                              (long long)(2 * cp - 1 - m->cp_rank), (long long)row_len, (long long)base);
            } else if (b->positions) {
                LCX_FAIL_GOTO(p < 0, LCX_ERR_INVALID, done, "model: token %lld: position %lld < 0", (long long)t,
                              (long long)p);
                LCX_FAIL_GOTO(i > 0 && p != (int64_t)b->positions[t - 1] + 1, LCX_ERR_INVALID, done,
                              "model: row %lld: positions must be consecutive inside a row (token %lld has %lld "
                              "after %d)", (long long)s, (long long)t, (long long)p, b->positions[t - 1]);
            }
            pos[t] = (int32_t)p;
            if (p > max_pos) max_pos = p;
            LCX_FAIL_GOTO(b->doc_start && (b->doc_start[t] < 0 || b->doc_start[t] > p), LCX_ERR_INVALID, done,
                          "model: token %lld: document start %d outside [0, its position %lld]", (long long)t,
                          b->doc_start[t], (long long)p);
            int32_t y = b->targets ? b->targets[t] : (i + 1 < S ? b->ids[t + 1] : LCX_IGNORE_INDEX);
            LCX_FAIL_GOTO(y != LCX_IGNORE_INDEX && (y < 0 || y >= m->V), LCX_ERR_INVALID, done,
                          "model: token %lld: target %d outside the vocabulary [0, %lld) (ignore index is %d)",
                          (long long)t, y, (long long)m->V, LCX_IGNORE_INDEX);
            tgt[t] = y;
            n += y != LCX_IGNORE_INDEX;
        }
    }
    LCX_TRY_GOTO(be->copy_h2d(m->x, m->d_ids, b->ids, (size_t)T * sizeof(int32_t)), done);
    LCX_TRY_GOTO(be->copy_h2d(m->x, m->d_pos, pos, (size_t)T * sizeof(int32_t)), done);
    LCX_TRY_GOTO(be->copy_h2d(m->x, m->d_tgt, tgt, (size_t)T * sizeof(int32_t)), done);
    m->doc_on = b->doc_start != NULL;
    if (m->doc_on) LCX_TRY_GOTO(be->copy_h2d(m->x, m->d_doc, b->doc_start, (size_t)T * sizeof(int32_t)), done);
    LCX_FAIL_GOTO(b->rope_len < 0, LCX_ERR_INVALID, done, "model: rope length %lld < 0", (long long)b->rope_len);
    LCX_TRY_GOTO(rope_tables(m, b->rope_len > 0 ? b->rope_len : max_pos + 1, max_pos + 1), done);
    if (count) *count = n;
done:
    free(pos);
    free(tgt);
    free(gpos);
    return st;
}

lcx_status lcx_model_embed(lcx_model *m, int64_t T) {
    LCX_TRY(lcx_offload_begin(m)); /* a new pass: resid[0] is layer 0's slot when it is offloaded */
    /* vocab-parallel: each TP rank looks up the ids in its rows (zero elsewhere) and the ranks' rows are summed */
    /* (sequence parallelism: the rows summed are scattered, each rank keeps its own) */
    lcx_embedding_args a = {.dt = m->adt, .n_tokens = T, .n_rows = m->Vl, .dim = m->H, .vocab_start = m->v0,
                            .n_vocab = m->Vl * m->tp_size, .ids = m->d_ids, .w_dtype = m->pdt,
                            .weight = lcx_m_param(m, m->embed_i), .out = m->sp ? m->sp_part : m->resid[0]};
    LCX_TRY(m->be->embedding_fwd(m->x, &a));
    if (m->sp) return lcx_sp_scatter_sum(m, m->sp_part, m->resid[0], T);
    return lcx_tp_sum(m, m->resid[0], T * m->H);
}

/* y[T, out] += ones[T, 1] bias[1, out] for bias parameter bi: one exact add per element, through the backend's
 * matmul. */
static lcx_status bias_add(lcx_model *m, int64_t T, int64_t out, int64_t bi, void *y) {
    lcx_matmul_args a;
    memset(&a, 0, sizeof a);
    a.m = T, a.n = out, a.k = 1, a.batch = 1, a.alpha = 1.0f, a.beta = 1.0f;
    a.a_dtype = LCX_F32, a.a = m->ones;
    a.b_dtype = m->pdt, a.b = lcx_m_param(m, bi);
    a.c_dtype = m->adt, a.c = y;
    return m->be->matmul(m->x, &a);
}

lcx_status lcx_linear_fwd(lcx_model *m, const void *x, int64_t T, int64_t in, int64_t out, int64_t wi, int64_t bi,
                          void *y) {
    lcx_matmul_args a;
    memset(&a, 0, sizeof a);
    a.trans_b = 1;
    a.m = T, a.n = out, a.k = in, a.batch = 1, a.alpha = 1.0f, a.beta = 0.0f;
    a.a_dtype = m->adt, a.a = x;
    a.b_dtype = m->pdt, a.b = lcx_m_param(m, wi);
    a.c_dtype = m->adt, a.c = y;
    LCX_TRY(m->be->matmul(m->x, &a));
    return bi < 0 ? LCX_OK : bias_add(m, T, out, bi, y);
}

lcx_status lcx_sp_row_parallel_finish(lcx_model *m, int64_t T, int64_t bi, void *y) {
    LCX_TRY(lcx_sp_scatter_sum(m, m->sp_part, y, T));
    return bi < 0 ? LCX_OK : bias_add(m, lcx_m_rows(m, T), m->H, bi, y);
}

lcx_status lcx_row_parallel_fwd(lcx_model *m, const void *x, int64_t T, int64_t in, int64_t out, int64_t wi,
                                int64_t bi, void *y) {
    if (m->tp_size == 1) return lcx_linear_fwd(m, x, T, in, out, wi, bi, y);
    if (m->sp) { /* sequence parallelism: y holds this rank's rows of the sum */
        LCX_TRY(lcx_linear_fwd(m, x, T, in, out, wi, -1, m->sp_part));
        return lcx_sp_row_parallel_finish(m, T, bi, y);
    }
    /* each TP rank's partial product over its input columns, summed; the (replicated) bias added once after */
    LCX_TRY(lcx_linear_fwd(m, x, T, in, out, wi, -1, y));
    LCX_TRY(lcx_tp_sum(m, y, T * out));
    return bi < 0 ? LCX_OK : bias_add(m, T, out, bi, y);
}

/* model_internal.h */
lcx_status lcx_mlp_tile(lcx_model *m, int l, const lcx_layer_acts *a, int64_t r0, int64_t c, int compute,
                        void **gate, void **up, void **act) {
    const int64_t H = m->H, F = m->F, off = lcx_act_recomputes(m->policy[l]) ? 0 : r0 * F;
    void *g = lcx_m_at(m, a->gate, off), *u = lcx_m_at(m, a->up, off), *s = lcx_m_at(m, a->act, off);
    if (compute) {
#define IDX(k) lcx_m_idx(m, l, (k))
        /* sequence parallelism: the whole xn2, all-gathered into sp_full by the caller */
        const void *x = lcx_m_at(m, m->sp ? m->sp_full : a->xn2, r0 * H);
        LCX_TRY(lcx_linear_fwd(m, x, c, H, F, IDX(LCX_PARAM_GATE), IDX(LCX_PARAM_GATE_BIAS), g));
        LCX_TRY(lcx_linear_fwd(m, x, c, H, F, IDX(LCX_PARAM_UP), IDX(LCX_PARAM_UP_BIAS), u));
        LCX_TRY(lcx_m_swiglu_fwd(m, g, u, s, c * F));
#undef IDX
    }
    if (gate) *gate = g;
    if (up) *up = u;
    if (act) *act = s;
    return LCX_OK;
}

lcx_status lcx_layer_forward(lcx_model *m, int l, const lcx_layer_acts *a, const lcx_batch *b, int recompute) {
    /* R: the rows of the residual stream and the norms here (T, or this TP rank's under sequence parallelism) */
    int64_t T = b->n_seq * b->seq_len, S = b->seq_len, H = m->H, R = lcx_m_rows(m, T);
#define IDX(k) lcx_m_idx(m, l, (k))
    LCX_TRY(lcx_m_rmsnorm_fwd(m, a->x_in, lcx_m_normw(m, IDX(LCX_PARAM_ATTN_NORM)), a->xn1, a->rstd1, R, H));
    const void *xn1 = m->sp ? m->sp_full : a->xn1; /* sequence parallelism: every rank's rows */
    if (m->sp) LCX_TRY(lcx_sp_gather(m, a->xn1, m->sp_full, T));
    void *qd = m->cfg.qk_norm ? a->qpre : a->q, *kd = m->cfg.qk_norm ? a->kpre : a->k;
    LCX_TRY(lcx_linear_fwd(m, xn1, T, H, m->Q, IDX(LCX_PARAM_Q), IDX(LCX_PARAM_Q_BIAS), qd));
    LCX_TRY(lcx_linear_fwd(m, xn1, T, H, m->KV, IDX(LCX_PARAM_K), IDX(LCX_PARAM_K_BIAS), kd));
    LCX_TRY(lcx_linear_fwd(m, xn1, T, H, m->KV, IDX(LCX_PARAM_V), IDX(LCX_PARAM_V_BIAS), a->v));
    if (m->cfg.qk_norm) { /* Qwen3: per-head RMSNorm of q and k before RoPE */
        LCX_TRY(lcx_m_rmsnorm_fwd(m, a->qpre, lcx_m_normw(m, IDX(LCX_PARAM_Q_NORM)), a->q, a->rstdq, T * m->nh, m->hd));
        LCX_TRY(lcx_m_rmsnorm_fwd(m, a->kpre, lcx_m_normw(m, IDX(LCX_PARAM_K_NORM)), a->k, a->rstdk, T * m->nkv, m->hd));
    }
    LCX_TRY(lcx_m_rope(m, 0, a->q, a->q, T, m->nh));
    LCX_TRY(lcx_m_rope(m, 0, a->k, a->k, T, m->nkv));
    if (!recompute && m->cp) {
        LCX_TRY(lcx_ring_attn_fwd(m, b, a->q, a->k, a->v, a->o, a->lse));
    } else if (!recompute) {
        for (int64_t s = 0; s < b->n_seq; s++) {
            int64_t p0 = b->positions ? b->positions[s * S] : 0;
            lcx_attn_args aa = lcx_m_attn_args(m, S, p0);
            aa.q = lcx_m_at(m, a->q, s * S * m->Q), aa.k = lcx_m_at(m, a->k, s * S * m->KV);
            aa.v = lcx_m_at(m, a->v, s * S * m->KV);
            aa.o = lcx_m_at(m, a->o, s * S * m->Q), aa.lse = a->lse + s * S * m->nh;
            aa.q_doc_start = lcx_m_doc(m, s * S);
            LCX_TRY(m->be->attention_fwd(m->x, &aa));
        }
    }
    LCX_TRY(lcx_row_parallel_fwd(m, a->o, T, m->Q, H, IDX(LCX_PARAM_O), IDX(LCX_PARAM_O_BIAS), a->h));
    LCX_TRY(lcx_m_add(m, a->x_in, a->h, a->h, R * H));
    LCX_TRY(lcx_m_rmsnorm_fwd(m, a->h, lcx_m_normw(m, IDX(LCX_PARAM_MLP_NORM)), a->xn2, a->rstd2, R, H));
    if (recompute) return LCX_OK; /* the backward recomputes each MLP tile from xn2 */
    if (m->sp) LCX_TRY(lcx_sp_gather(m, a->xn2, m->sp_full, T)); /* lcx_mlp_tile reads the whole xn2 there */
    /* the MLP in row tiles of mlp_tile (one tile of T rows without opts.mlp_chunk): out = h + down(act); under
     * sequence parallelism each tile's rows of down's partial product go to sp_part, one reduce-scatter after the
     * last */
    for (int64_t r0 = 0; r0 < T; r0 += m->mlp_tile) {
        int64_t c = T - r0 < m->mlp_tile ? T - r0 : m->mlp_tile;
        void *act = NULL;
        LCX_TRY(lcx_mlp_tile(m, l, a, r0, c, 1, NULL, NULL, &act));
        if (m->sp) {
            LCX_TRY(lcx_linear_fwd(m, act, c, m->F, H, IDX(LCX_PARAM_DOWN), -1, lcx_m_at(m, m->sp_part, r0 * H)));
            continue;
        }
        void *h = lcx_m_at(m, a->h, r0 * H), *out = lcx_m_at(m, m->resid[l + 1], r0 * H);
        LCX_TRY(lcx_row_parallel_fwd(m, act, c, m->F, H, IDX(LCX_PARAM_DOWN), IDX(LCX_PARAM_DOWN_BIAS), out));
        LCX_TRY(lcx_m_add(m, h, out, out, c * H));
    }
    if (m->sp) {
        LCX_TRY(lcx_sp_row_parallel_finish(m, T, IDX(LCX_PARAM_DOWN_BIAS), m->resid[l + 1]));
        LCX_TRY(lcx_m_add(m, a->h, m->resid[l + 1], m->resid[l + 1], R * H));
    }
#undef IDX
    return LCX_OK;
}

lcx_status lcx_model_forward(lcx_model *m, const lcx_batch *b, float *logits, double *loss_sum, int64_t *count) {
    int64_t n = 0;
    LCX_TRY(lcx_model_prepare(m, b, &n));
    int64_t T = b->n_seq * b->seq_len;
    LCX_TRY(lcx_model_embed(m, T));
    LCX_TRY(lcx_model_layers_fwd(m, b));
    lcx_loss_slot r; /* summed on the device, read once */
    LCX_TRY(m->be->zero(m->x, &m->d_res->loss[0], sizeof r));
    LCX_TRY(lcx_model_loss(m, T, 0, 0.0f, logits, &m->d_res->loss[0]));
    LCX_TRY(m->be->copy_d2h(m->x, &r, &m->d_res->loss[0], sizeof r));
    LCX_ASSERT(r.count == n);
    LCX_TRY(lcx_ring_reduce_loss(m, &r)); /* CP: the global sum and count on every rank */
    if (loss_sum) *loss_sum = r.loss_sum;
    if (count) *count = r.count;
    return LCX_OK;
}
