/* model_ring: context parallelism inside the model. Each layer's attention runs the ring of src/core/cp_ring.h
 * over the CP group (opts.cp_comm) for real: rank c holds chunks c and 2CP-1-c of every row (local rows [0, n) and
 * [n, 2n)), its K/V block travels as one packed message K | V with the model's KV heads (never repeated to the
 * query heads), partial outputs merge by their log-sum-exp in float32 (attention_merge), and the backward runs
 * the ring the other way carrying K | V | dK | dV (dK, dV float32) so that each rank ends with the gradient of
 * its own K/V. Spec: docs/parallel.md "Context parallelism", docs/model.md "Context parallelism".
 *
 * Double buffer: forward, the send of the held block and the receive of the next one are posted before the held
 * block's tasks are computed, and waited for after them. Backward, the receive is posted before the compute and
 * the send after it (the message carries the accumulator the compute has just updated). */
#include <string.h>

#include "src/core/clock.h"
#include "src/core/cp_ring.h"
#include "src/core/layout.h"
#include "src/model/model_internal.h"

enum { RING_TAG_FWD = 1301, RING_TAG_BWD = 1302 };

/* Bytes of one of K, V (act) and of one of dK, dV (f32) for a row of S local tokens. */
static size_t kv_bytes(const lcx_model *m, int64_t S) { return (size_t)(S * m->KV) * lcx_act_size(m->adt); }
static size_t dkv_bytes(const lcx_model *m, int64_t S) { return (size_t)(S * m->KV) * sizeof(float); }

lcx_status lcx_ring_init(lcx_model *m, lcx_comm *cp) {
    if (!cp) return LCX_OK;
    LCX_FAIL_IF(cp->size < 1 || cp->rank < 0 || cp->rank >= cp->size, LCX_ERR_INVALID,
                "model: CP communicator rank %d of %d", cp->rank, cp->size);
    m->cp = cp, m->cp_size = cp->size, m->cp_rank = cp->rank;
    const int64_t T = m->max_tokens;
    lcx_cursor c = {0};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 2; i++)
            m->ring_buf[i] = lcx_cursor_take(&c, 1, 2 * kv_bytes(m, T) + (m->training ? 2 * dkv_bytes(m, T) : 0));
        m->ring_o = lcx_cursor_take(&c, T * m->Q, lcx_act_size(m->adt));
        m->ring_lse = lcx_cursor_take(&c, T * m->nh, sizeof(float));
        if (pass) break;
        LCX_FAIL_IF(c.overflow, LCX_ERR_OOM, "model: ring buffers overflow for %lld tokens", (long long)T);
        m->ring_bytes = c.used;
        LCX_TRY(m->be->alloc(c.used, &m->ring_mem));
        c.base = m->ring_mem, c.used = 0;
    }
    return LCX_OK;
}

void lcx_ring_free(lcx_model *m) {
    if (m->be) m->be->free(m->ring_mem);
    m->ring_mem = NULL;
}

int64_t lcx_ring_row_base(const lcx_model *m, const lcx_batch *b, int64_t s) {
    int64_t n = b->seq_len / 2; /* chunk length; local row 0 is at global offset c * n of its row */
    return b->positions ? (int64_t)b->positions[s * b->seq_len] - (int64_t)m->cp_rank * n : 0;
}

/* A packed message of `bytes` bytes (always even): sent as 16-bit words, the dtype only sizes the transfer. */
static lcx_status post(lcx_model *m, int send, void *buf, size_t bytes, int peer, int tag, lcx_comm_request **rq) {
    int64_t words = (int64_t)(bytes / 2);
    return send ? lcx_comm_isend(m->cp, m->x, buf, words, LCX_BF16, peer, tag, rq)
                : lcx_comm_irecv(m->cp, m->x, buf, words, LCX_BF16, peer, tag, rq);
}

/* Wait for the n posted requests (all of them, also after a failure: each is waited exactly once). The time
 * blocked here is the transfer the compute did not hide (m->ring_wait_s, reported per step). */
static lcx_status wait_all(lcx_model *m, lcx_comm_request **rq, int n) {
    if (!n) return LCX_OK;
    double t0 = lcx_clock_s();
    lcx_status st = lcx_comm_waitall(m->cp, n, rq);
    m->ring_wait_s += lcx_clock_s() - t0;
    return st;
}

/* The attention call of task tk of a row (q, o, lse and the document starts doc (NULL: none) at the row's first
 * local token; the held block at blk). Document starts are global positions, so they hold for any rank's block. */
static lcx_attn_args task_args(const lcx_model *m, const lcx_cp_task *tk, int64_t base, const void *q,
                               const int32_t *doc, const char *blk, size_t kvb) {
    lcx_attn_args a = lcx_m_attn_args(m, tk->n_q, base + tk->q_offset);
    a.q_doc_start = doc ? doc + tk->q_row : NULL;
    a.n_k = tk->n_k, a.k_offset = base + tk->k_offset, a.mask = (lcx_attn_mask)tk->mask;
    a.q = lcx_m_at(m, q, tk->q_row * m->Q);
    a.k = lcx_m_at(m, blk, tk->k_row * m->KV);
    a.v = lcx_m_at(m, blk + kvb, tk->k_row * m->KV);
    return a;
}

/* A document mask needs every key's true global position, k_offset + j, but a full-mask task may span both
 * chunks of the held block, which are not adjacent in the row: then it runs as two pieces split at the chunk
 * boundary n (row n of the block is chunk 2cp-1-src's first token). Returns the number of pieces. */
static int task_pieces(const lcx_model *m, const lcx_cp_step *st, const lcx_cp_task *tk, int64_t n,
                       lcx_cp_task piece[2]) {
    piece[0] = *tk;
    if (!m->doc_on || tk->k_row >= n || tk->k_row + tk->n_k <= n) return 1;
    piece[1] = *tk;
    piece[0].n_k = n - tk->k_row;
    piece[1].k_row = n, piece[1].n_k = tk->k_row + tk->n_k - n;
    piece[1].k_offset = (int64_t)(2 * m->cp_size - 1 - st->src) * n;
    return 2;
}

lcx_status lcx_ring_attn_fwd(lcx_model *m, const lcx_batch *b, const void *q, const void *k, const void *v, void *o,
                             float *lse) {
    const lcx_backend *be = m->be;
    const int cp = m->cp_size, c = m->cp_rank;
    const int64_t S = b->seq_len, n = S / 2, L = S * cp;
    const size_t kvb = kv_bytes(m, S);
    for (int64_t r = 0; r < b->n_seq; r++) {
        const int64_t base = lcx_ring_row_base(m, b, r);
        const void *qr = lcx_m_at(m, q, r * S * m->Q);
        void *orow = lcx_m_at(m, o, r * S * m->Q);
        float *lrow = lse + r * S * m->nh;
        char *cur = m->ring_buf[0], *nxt = m->ring_buf[1];
        LCX_TRY(be->copy_d2d(m->x, cur, lcx_m_at(m, k, r * S * m->KV), kvb)); /* the own block: K | V */
        LCX_TRY(be->copy_d2d(m->x, cur + kvb, lcx_m_at(m, v, r * S * m->KV), kvb));
        int written[2] = {0, 0}; /* local halves [0, n), [n, 2n) that hold a result (the first one is written
                                    directly, later ones merge into it) */
        for (int s = 0; s < cp; s++) {
            lcx_cp_step st;
            LCX_TRY(lcx_cp_ring_step(L, cp, c, s, LCX_CP_FORWARD, &st));
            lcx_comm_request *rq[2];
            int nr = 0;
            lcx_status st_ = LCX_OK;
            if (st.send == LCX_CP_SEND_KV) { /* the next block is on its way while this one is computed */
                st_ = post(m, 0, nxt, 2 * kvb, st.recv_from, RING_TAG_FWD, &rq[nr]);
                if (st_ == LCX_OK) nr++;
                if (st_ == LCX_OK) st_ = post(m, 1, cur, 2 * kvb, st.send_to, RING_TAG_FWD, &rq[nr]);
                if (st_ == LCX_OK) nr++;
            }
            lcx_cp_task pc[2 * LCX_CP_MAX_TASKS];
            int npc = 0;
            for (int t = 0; t < st.n_tasks; t++) npc += task_pieces(m, &st, &st.task[t], n, pc + npc);
            for (int t = 0; t < npc && st_ == LCX_OK; t++) {
                const lcx_cp_task *tk = &pc[t];
                int h0 = (int)(tk->q_row / n), h1 = (int)((tk->q_row + tk->n_q - 1) / n);
                lcx_attn_args a = task_args(m, tk, base, qr, lcx_m_doc(m, r * S), cur, kvb);
                void *od = lcx_m_at(m, orow, tk->q_row * m->Q);
                float *ld = lrow + tk->q_row * m->nh;
                if (!written[h0] && !written[h1]) { /* first result of these rows: straight into o, lse */
                    a.o = od, a.lse = ld;
                    st_ = be->attention_fwd(m->x, &a);
                    written[h0] = written[h1] = 1;
                    continue;
                }
                if (!written[h0] || !written[h1]) { /* the schedule never splits a task this way */
                    st_ = lcx_fail(LCX_ERR_INVALID, "model: ring task rows %lld+%lld cover a half without a result",
                                   (long long)tk->q_row, (long long)tk->n_q);
                    break;
                }
                a.o = m->ring_o, a.lse = m->ring_lse;
                st_ = be->attention_fwd(m->x, &a);
                if (st_ != LCX_OK) break;
                lcx_attn_merge_args mg = {.dt = m->adt, .n_rows = tk->n_q, .n_heads = m->nh, .head_dim = m->hd,
                                          .o_acc = od, .lse_acc = ld, .o_part = m->ring_o, .lse_part = m->ring_lse};
                st_ = be->attention_merge(m->x, &mg);
            }
            lcx_status sw = wait_all(m, rq, nr);
            LCX_TRY(st_);
            LCX_TRY(sw);
            if (nr) {
                char *t = cur;
                cur = nxt, nxt = t;
            }
        }
    }
    return LCX_OK;
}

lcx_status lcx_ring_attn_bwd(lcx_model *m, const lcx_batch *b, const void *q, const void *k, const void *v,
                             const void *o, const float *lse, const void *dout, float *dq, float *dk, float *dv) {
    const lcx_backend *be = m->be;
    const int cp = m->cp_size, c = m->cp_rank;
    const int64_t S = b->seq_len, L = S * cp;
    const size_t kvb = kv_bytes(m, S), dkb = dkv_bytes(m, S), msg = 2 * kvb + 2 * dkb;
    for (int64_t r = 0; r < b->n_seq; r++) {
        const int64_t base = lcx_ring_row_base(m, b, r);
        const int64_t oq = r * S * m->Q, okv = r * S * m->KV;
        char *cur = m->ring_buf[0], *nxt = m->ring_buf[1];
        LCX_TRY(be->copy_d2d(m->x, cur, lcx_m_at(m, k, okv), kvb)); /* own K | V, its dK | dV start at zero */
        LCX_TRY(be->copy_d2d(m->x, cur + kvb, lcx_m_at(m, v, okv), kvb));
        LCX_TRY(be->zero(m->x, cur + 2 * kvb, 2 * dkb));
        for (int s = 0; s < cp; s++) {
            lcx_cp_step st;
            LCX_TRY(lcx_cp_ring_step(L, cp, c, s, LCX_CP_BACKWARD, &st));
            /* KV_DKV: the whole message; DKV (after the last step): only the accumulator goes home */
            size_t off = st.send == LCX_CP_SEND_DKV ? 2 * kvb : 0, bytes = st.send == LCX_CP_SEND_DKV ? 2 * dkb : msg;
            int sending = st.send == LCX_CP_SEND_KV_DKV || st.send == LCX_CP_SEND_DKV;
            lcx_comm_request *rq[2];
            int nr = 0;
            lcx_status st_ = LCX_OK;
            if (sending) { /* the next block's receive is posted before the compute */
                st_ = post(m, 0, nxt + off, bytes, st.recv_from, RING_TAG_BWD, &rq[nr]);
                if (st_ == LCX_OK) nr++;
            }
            float *dkc = (float *)(void *)(cur + 2 * kvb), *dvc = (float *)(void *)(cur + 2 * kvb + dkb);
            lcx_cp_task pc[2 * LCX_CP_MAX_TASKS];
            int npc = 0;
            for (int t = 0; t < st.n_tasks; t++) npc += task_pieces(m, &st, &st.task[t], S / 2, pc + npc);
            for (int t = 0; t < npc && st_ == LCX_OK; t++) {
                const lcx_cp_task *tk = &pc[t];
                lcx_attn_args a = task_args(m, tk, base, lcx_m_at(m, q, oq), lcx_m_doc(m, r * S), cur, kvb);
                a.o = lcx_m_at(m, o, oq + tk->q_row * m->Q);
                a.lse = (float *)(uintptr_t)(lse + (r * S + tk->q_row) * m->nh);
                a.dout = lcx_m_at(m, dout, oq + tk->q_row * m->Q);
                a.dq = dq + oq + tk->q_row * m->Q;
                a.dk = dkc + tk->k_row * m->KV, a.dv = dvc + tk->k_row * m->KV;
                st_ = be->attention_bwd(m->x, &a);
            }
            if (sending && st_ == LCX_OK) { /* the held block with its updated accumulator moves on */
                st_ = post(m, 1, cur + off, bytes, st.send_to, RING_TAG_BWD, &rq[nr]);
                if (st_ == LCX_OK) nr++;
            }
            lcx_status sw = wait_all(m, rq, nr);
            LCX_TRY(st_);
            LCX_TRY(sw);
            if (sending) {
                char *t = cur;
                cur = nxt, nxt = t;
            }
        }
        /* cur's accumulator is now this rank's own, complete */
        LCX_TRY(be->copy_d2d(m->x, dk + okv, cur + 2 * kvb, dkb));
        LCX_TRY(be->copy_d2d(m->x, dv + okv, cur + 2 * kvb + dkb, dkb));
    }
    return LCX_OK;
}

lcx_status lcx_ring_reduce_loss(lcx_model *m, lcx_loss_slot *r) {
    if (!m->cp) return LCX_OK;
    LCX_TRY(lcx_comm_all_reduce(m->cp, NULL, &r->loss_sum, &r->loss_sum, 1, LCX_F64, LCX_COMM_SUM));
    return lcx_comm_all_reduce(m->cp, NULL, &r->count, &r->count, 1, LCX_I64, LCX_COMM_SUM);
}

lcx_status lcx_cp_cached_attn(lcx_model *m, int64_t T, const void *q, const void *k, const void *v,
                              const lcx_cp_cached *cc, void *o, float *lse) {
    const lcx_backend *be = m->be;
    /* this rank's partial: its prefix keys before the pad, every one of them before every new query */
    lcx_attn_args a = lcx_m_attn_args(m, T, cc->len);
    a.n_k = cc->valid, a.k_offset = 0, a.mask = cc->valid > 0 ? LCX_MASK_FULL : LCX_MASK_NONE;
    a.q = q, a.k = k, a.v = v, a.o = m->ring_o, a.lse = m->ring_lse;
    LCX_TRY(be->attention_fwd(m->x, &a));
    double t0 = lcx_clock_s();
    lcx_status st = lcx_comm_all_gather(m->cp, m->x, m->ring_o, cc->o, T * m->Q, m->adt);
    if (st == LCX_OK) st = lcx_comm_all_gather(m->cp, m->x, m->ring_lse, cc->lse, T * m->nh, LCX_F32);
    m->ring_wait_s += lcx_clock_s() - t0;
    LCX_TRY(st);
    /* the new rows among themselves (causal), then every rank's partial in rank order: the same bits everywhere */
    lcx_attn_args s = lcx_m_attn_args(m, T, cc->len);
    s.q = q, s.k = lcx_m_at(m, k, cc->rows * m->KV), s.v = lcx_m_at(m, v, cc->rows * m->KV), s.o = o, s.lse = lse;
    LCX_TRY(be->attention_fwd(m->x, &s));
    for (int r = 0; r < m->cp_size; r++) {
        lcx_attn_merge_args mg = {.dt = m->adt, .n_rows = T, .n_heads = m->nh, .head_dim = m->hd, .o_acc = o,
                                  .lse_acc = lse, .o_part = lcx_m_at(m, cc->o, (int64_t)r * T * m->Q),
                                  .lse_part = cc->lse + (int64_t)r * T * m->nh};
        LCX_TRY(be->attention_merge(m->x, &mg));
    }
    return LCX_OK;
}
