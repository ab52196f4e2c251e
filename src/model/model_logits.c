/* model_logits: forward with the logits handed out chunk by chunk (per-token scoring for evaluation). */
#include <stdlib.h>
#include <string.h>

#include "src/core/clock.h"
#include "src/model/model_internal.h"

/* Under TP the lm_head is vocab-parallel: each rank computes its [c, Vl] slice of a chunk, the slices are
 * all-gathered ([TP][c][Vl], rank r's holding ids r Vl ..) and laid out as whole rows, the padding ids past V
 * dropped. A copy, so every TP rank hands fn the same bits and takes the same decisions from them. */
lcx_status lcx_model_emit_logits(lcx_model *m, int64_t T, int64_t first_row, lcx_logits_fn fn, void *user) {
    const lcx_backend *be = m->be;
    const int tp = m->tp_size;
    int64_t H = m->H, V = m->V, Vl = m->Vl, C = m->loss_chunk;
    LCX_FAIL_IF(tp > 1 && !m->tp_logits, LCX_ERR_UNSUPPORTED,
                "model: whole logits rows need a forward-only model under tensor parallelism (opts.training = 0)");
    LCX_TRY(lcx_m_rmsnorm_fwd(m, m->resid[m->L], lcx_m_normw(m, m->final_norm_i), m->xf, m->rstdf, T, H));
    /* C x V and C x TP x Vl were allocated at init: no overflow */
    float *host = malloc((size_t)C * (size_t)V * sizeof(float));
    float *parts = tp > 1 ? malloc((size_t)C * (size_t)(tp * Vl) * sizeof(float)) : NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!host || (tp > 1 && !parts), LCX_ERR_OOM, done, "no memory for %lld x %lld logits", (long long)C,
                  (long long)V);
    for (int64_t r0 = first_row; r0 < T && st == LCX_OK; r0 += C) {
        int64_t c = T - r0 < C ? T - r0 : C;
        lcx_matmul_args a;
        memset(&a, 0, sizeof a);
        a.trans_b = 1, a.m = c, a.n = Vl, a.k = H, a.batch = 1, a.alpha = 1.0f;
        a.a_dtype = m->adt, a.a = lcx_m_at(m, m->xf, r0 * H);
        a.b_dtype = m->pdt, a.b = lcx_m_param(m, m->lm_head_i);
        a.c_dtype = LCX_F32, a.c = m->logit_chunk; /* f32 logits whatever the act dtype (model_loss.c) */
        st = be->matmul(m->x, &a);
        if (st == LCX_OK && tp == 1) st = be->copy_d2h(m->x, host, m->logit_chunk, (size_t)(c * V) * sizeof(float));
        if (st == LCX_OK && tp > 1) {
            double t0 = lcx_clock_s();
            st = lcx_comm_all_gather(m->tp, m->x, m->logit_chunk, m->tp_logits, c * Vl, LCX_F32);
            m->tp_comm_s += lcx_clock_s() - t0;
            if (st == LCX_OK)
                st = be->copy_d2h(m->x, parts, m->tp_logits, (size_t)(c * tp * Vl) * sizeof(float));
            for (int r = 0; r < tp && st == LCX_OK; r++) {
                int64_t n = V - r * Vl < Vl ? V - r * Vl : Vl; /* the last ranks' padding ids are dropped */
                for (int64_t i = 0; i < c && n > 0; i++)
                    memcpy(host + i * V + r * Vl, parts + ((int64_t)r * c + i) * Vl, (size_t)n * sizeof(float));
            }
        }
        if (st == LCX_OK) st = fn(user, r0, c, host, V);
    }
done:
    free(host);
    free(parts);
    return st;
}

lcx_status lcx_model_forward_logits(lcx_model *m, const lcx_batch *b, int64_t first_row, lcx_logits_fn fn,
                                    void *user) {
    LCX_FAIL_IF(!fn, LCX_ERR_INVALID, "lcx_model_forward_logits: no callback");
    int64_t n = 0;
    LCX_TRY(lcx_model_prepare(m, b, &n));
    int64_t T = b->n_seq * b->seq_len;
    LCX_FAIL_IF(first_row < 0 || first_row > T, LCX_ERR_INVALID,
                "lcx_model_forward_logits: first_row %lld outside [0, %lld]", (long long)first_row, (long long)T);
    LCX_TRY(lcx_model_embed(m, T));
    LCX_TRY(lcx_model_layers_fwd(m, b));
    return lcx_model_emit_logits(m, T, first_row, fn, user);
}
