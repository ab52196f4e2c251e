/* model_loss: final RMSNorm + lm_head + cross-entropy in row chunks. Only [chunk, vocab] logits ever exist; with
 * backward each chunk's dlogits (in place) feed dX and dW_lm_head right away, so there is no second pass. The
 * chunk is float32 whatever the activation dtype (lm_head writes f32, cross-entropy runs with dt = F32, dX is
 * written in the act dtype), as Megatron and HF compute the loss in float32. */
#include <string.h>

#include "src/model/model_internal.h"

lcx_status lcx_model_loss(lcx_model *m, int64_t T, int backward, float dscale, float *logits, lcx_loss_slot *acc) {
    const lcx_backend *be = m->be;
    int64_t H = m->H, V = m->Vl, C = m->loss_chunk; /* V: the vocabulary rows here (all without TP) */
    LCX_FAIL_IF(logits && m->tp_size > 1, LCX_ERR_UNSUPPORTED,
                "model: whole logits rows do not exist with tensor parallelism (each rank holds %lld of %lld)",
                (long long)m->Vl, (long long)m->V);
    /* sequence parallelism: the norm on this rank's rows, the logits of every row from the all-gathered output,
     * dX's partial sums reduce-scattered back to this rank's rows */
    const int64_t R = lcx_m_rows(m, T);
    LCX_TRY(lcx_m_rmsnorm_fwd(m, m->resid[m->L], lcx_m_normw(m, m->final_norm_i), m->xf, m->rstdf, R, H));
    const void *xf = m->sp ? m->sp_full : m->xf;
    if (m->sp) LCX_TRY(lcx_sp_gather(m, m->xf, m->sp_full, T));
    const void *w = lcx_m_param(m, m->lm_head_i);
    void *dxf = m->sp ? m->sp_part : m->dxn; /* act [T, H] */
    for (int64_t r0 = 0; r0 < T; r0 += C) {
        int64_t c = T - r0 < C ? T - r0 : C;
        lcx_matmul_args a;
        memset(&a, 0, sizeof a);
        a.trans_b = 1, a.m = c, a.n = V, a.k = H, a.batch = 1, a.alpha = 1.0f;
        a.a_dtype = m->adt, a.a = lcx_m_at(m, xf, r0 * H);
        a.b_dtype = m->pdt, a.b = w;
        a.c_dtype = LCX_F32, a.c = m->logit_chunk; /* f32 logits: the loss is not computed from rounded ones */
        LCX_TRY(be->matmul(m->x, &a));
        if (logits) LCX_TRY(be->copy_d2h(m->x, logits + r0 * V, m->logit_chunk, (size_t)(c * V) * sizeof(float)));
        /* the chunk's loss sum and count add up on the device: nothing is read back here */
        if (m->tp_size > 1) { /* vocab-parallel: row statistics combined over TP */
            LCX_TRY(lcx_tp_loss_chunk(m, c, dscale, backward, acc, r0));
        } else {
            lcx_xent_args xa = {.dt = LCX_F32, .n_rows = c, .vocab = V, .dscale = dscale, .logits = m->logit_chunk,
                                .targets = m->d_tgt + r0, .dlogits = backward ? m->logit_chunk : NULL,
                                .loss_sum = &acc->loss_sum, .count = &acc->count};
            LCX_TRY(be->cross_entropy(m->x, &xa));
        }
        if (!backward) continue;
        /* dX[r0:r0+c] = dlogits W */
        memset(&a, 0, sizeof a);
        a.m = c, a.n = H, a.k = V, a.batch = 1, a.alpha = 1.0f;
        a.a_dtype = LCX_F32, a.a = m->logit_chunk;
        a.b_dtype = m->pdt, a.b = w;
        a.c_dtype = m->adt, a.c = lcx_m_at(m, dxf, r0 * H);
        LCX_TRY(be->matmul(m->x, &a));
        /* dW[V, H] += dlogits^T X */
        memset(&a, 0, sizeof a);
        a.trans_a = 1, a.m = V, a.n = H, a.k = c, a.batch = 1, a.alpha = 1.0f, a.beta = 1.0f;
        a.a_dtype = LCX_F32, a.a = m->logit_chunk;
        a.b_dtype = m->adt, a.b = lcx_m_at(m, xf, r0 * H);
        a.c_dtype = LCX_F32, a.c = lcx_m_grad(m, m->lm_head_i);
        LCX_TRY(be->matmul(m->x, &a));
    }
    if (!backward) return LCX_OK;
    /* each TP rank's dX is over its vocabulary rows */
    LCX_TRY(m->sp ? lcx_sp_scatter_sum(m, dxf, m->dxn, T) : lcx_tp_sum(m, dxf, T * H));
    LCX_TRY(lcx_m_rmsnorm_bwd(m, m->dxn, m->resid[m->L], lcx_m_normw(m, m->final_norm_i), m->rstdf, m->dres,
                              lcx_m_grad(m, m->final_norm_i), R, H));
    return LCX_OK;
}
