/* model_backward: one decoder layer backward, and forward + backward of a micro-batch with the activation policy
 * (recompute layers rerun their forward, minus attention, right before their backward). */
#include <string.h>

#include "src/model/model_internal.h"

/* dW[out, in] += dy^T x; db[out] += column sums of dy; dx[T, in] (= or +=, by dx_beta) dy W. */
static lcx_status linear_bwd(lcx_model *m, const void *dy, const void *x, int64_t T, int64_t in, int64_t out,
                             int64_t wi, int64_t bi, void *dx, float dx_beta) {
    const lcx_backend *be = m->be;
    lcx_matmul_args a;
    memset(&a, 0, sizeof a);
    a.trans_a = 1, a.m = out, a.n = in, a.k = T, a.batch = 1, a.alpha = 1.0f, a.beta = 1.0f;
    a.a_dtype = m->adt, a.a = dy;
    a.b_dtype = m->adt, a.b = x;
    a.c_dtype = LCX_F32, a.c = lcx_m_grad(m, wi);
    LCX_TRY(be->matmul(m->x, &a));
    if (bi >= 0) {
        memset(&a, 0, sizeof a);
        a.trans_a = 1, a.m = 1, a.n = out, a.k = T, a.batch = 1, a.alpha = 1.0f, a.beta = 1.0f;
        a.a_dtype = LCX_F32, a.a = m->ones;
        a.b_dtype = m->adt, a.b = dy;
        a.c_dtype = LCX_F32, a.c = lcx_m_grad(m, bi);
        LCX_TRY(be->matmul(m->x, &a));
    }
    memset(&a, 0, sizeof a);
    a.m = T, a.n = in, a.k = out, a.batch = 1, a.alpha = 1.0f, a.beta = dx_beta;
    a.a_dtype = m->adt, a.a = dy;
    a.b_dtype = m->pdt, a.b = lcx_m_param(m, wi);
    a.c_dtype = m->adt, a.c = dx;
    return be->matmul(m->x, &a);
}

/* *out = an f32 gradient g of n elements as an act tensor: g itself with f32 activations, else g cast into
 * dout (round to nearest even). */
static lcx_status act_of(lcx_model *m, float *g, int64_t n, void **out) {
    *out = g;
    if (m->adt == LCX_F32) return LCX_OK;
    *out = m->dout;
    return lcx_m_cast(m, g, LCX_F32, m->dout, m->adt, n);
}

lcx_status lcx_layer_backward(lcx_model *m, int l, const lcx_layer_acts *a, const lcx_batch *b) {
    const lcx_backend *be = m->be;
    int64_t T = b->n_seq * b->seq_len, S = b->seq_len, H = m->H, F = m->F, R = lcx_m_rows(m, T);
    void *dres = m->dres, *dxn = m->dxn;
    /* The whole rows the TP blocks read and write: the residual's gradient dy, the norm output x and the input
     * gradient's partial sums dx; under sequence parallelism all-gathered (dy, x) or reduce-scattered (dx) from
     * this rank's R rows, else the same buffers. */
    void *dy_all = m->sp ? m->sp_dfull : dres, *dx_all = m->sp ? m->sp_part : dxn;
    const void *xn2 = a->xn2, *xn1 = a->xn1;
    if (m->sp) {
        LCX_TRY(lcx_sp_gather(m, dres, dy_all, T));
        LCX_TRY(lcx_sp_gather(m, a->xn2, m->sp_full, T)); /* lcx_mlp_tile reads it there */
        xn2 = m->sp_full;
    }
#define IDX(k) lcx_m_idx(m, l, (k))
    /* MLP: x_out = h + down(swiglu(gate(xn2), up(xn2))), in row tiles of mlp_tile (one tile of T rows without
     * opts.mlp_chunk): a recompute layer's tile intermediates are recomputed here, the weight gradients accumulate
     * over the tiles, each tile writes its rows of dx_all */
    for (int64_t r0 = 0; r0 < T; r0 += m->mlp_tile) {
        int64_t c = T - r0 < m->mlp_tile ? T - r0 : m->mlp_tile;
        void *gate = NULL, *up = NULL, *act = NULL, *dy = lcx_m_at(m, dy_all, r0 * H);
        void *dx = lcx_m_at(m, dx_all, r0 * H);
        const void *x = lcx_m_at(m, xn2, r0 * H);
        LCX_TRY(lcx_mlp_tile(m, l, a, r0, c, lcx_act_recomputes(m->policy[l]), &gate, &up, &act));
        LCX_TRY(linear_bwd(m, dy, act, c, F, H, IDX(LCX_PARAM_DOWN), IDX(LCX_PARAM_DOWN_BIAS), m->dact, 0.0f));
        LCX_TRY(lcx_m_swiglu_bwd(m, m->dact, gate, up, m->dgate, m->dup, c * F));
        LCX_TRY(linear_bwd(m, m->dgate, x, c, H, F, IDX(LCX_PARAM_GATE), IDX(LCX_PARAM_GATE_BIAS), dx, 0.0f));
        LCX_TRY(linear_bwd(m, m->dup, x, c, H, F, IDX(LCX_PARAM_UP), IDX(LCX_PARAM_UP_BIAS), dx, 1.0f));
    }
    /* column-parallel: each TP rank's input gradient is partial (summed once, after every tile: the same calls on
     * every rank) */
    LCX_TRY(m->sp ? lcx_sp_scatter_sum(m, dx_all, dxn, T) : lcx_tp_sum(m, dxn, T * H));
    LCX_TRY(lcx_m_rmsnorm_bwd(m, dxn, a->h, lcx_m_normw(m, IDX(LCX_PARAM_MLP_NORM)), a->rstd2, dxn,
                              lcx_m_grad(m, IDX(LCX_PARAM_MLP_NORM)), R, H));
    LCX_TRY(lcx_m_add(m, dres, dxn, dres, R * H)); /* dres = d h */

    /* attention: h = x_in + o_proj(attn(rope(q), rope(k), v)) */
    if (m->sp) LCX_TRY(lcx_sp_gather(m, dres, dy_all, T));
    LCX_TRY(linear_bwd(m, dy_all, a->o, T, m->Q, H, IDX(LCX_PARAM_O), IDX(LCX_PARAM_O_BIAS), m->dout, 0.0f));
    LCX_TRY(be->zero(m->x, m->dq, (size_t)(T * m->Q) * sizeof(float)));
    LCX_TRY(be->zero(m->x, m->dk, (size_t)(T * m->KV) * sizeof(float)));
    LCX_TRY(be->zero(m->x, m->dv, (size_t)(T * m->KV) * sizeof(float)));
    if (m->cp)
        LCX_TRY(lcx_ring_attn_bwd(m, b, a->q, a->k, a->v, a->o, a->lse, m->dout, m->dq, m->dk, m->dv));
    for (int64_t s = 0; s < b->n_seq && !m->cp; s++) {
        int64_t p0 = b->positions ? b->positions[s * S] : 0;
        lcx_attn_args aa = lcx_m_attn_args(m, S, p0);
        int64_t oq = s * S * m->Q, okv = s * S * m->KV;
        aa.q = lcx_m_at(m, a->q, oq), aa.k = lcx_m_at(m, a->k, okv), aa.v = lcx_m_at(m, a->v, okv);
        aa.o = lcx_m_at(m, a->o, oq), aa.lse = a->lse + s * S * m->nh;
        aa.dout = lcx_m_at(m, m->dout, oq), aa.dq = m->dq + oq, aa.dk = m->dk + okv, aa.dv = m->dv + okv;
        aa.q_doc_start = lcx_m_doc(m, s * S);
        LCX_TRY(be->attention_bwd(m->x, &aa));
    }
    /* dq/dk/dv are attention's f32 accumulators: RoPE's transpose runs on them with dt = F32 (every tensor of
     * that call is f32), then each is cast to the act dtype in dout (free now; KV <= Q) for the ops that also
     * read act tensors (qk-norm's rmsnorm_bwd with qpre/kpre, the projections' backward with xn1), one after
     * the other. With f32 activations the f32 buffers are used directly: no cast, the same calls as before. */
    LCX_TRY(lcx_m_rope_dt(m, LCX_F32, 1, m->dq, m->dq, T, m->nh));
    LCX_TRY(lcx_m_rope_dt(m, LCX_F32, 1, m->dk, m->dk, T, m->nkv));
    if (m->sp) {
        LCX_TRY(lcx_sp_gather(m, a->xn1, m->sp_full, T));
        xn1 = m->sp_full;
    }
    void *d = NULL;
    LCX_TRY(act_of(m, m->dq, T * m->Q, &d));
    if (m->cfg.qk_norm)
        LCX_TRY(lcx_m_rmsnorm_bwd(m, d, a->qpre, lcx_m_normw(m, IDX(LCX_PARAM_Q_NORM)), a->rstdq, d,
                                  lcx_m_grad(m, IDX(LCX_PARAM_Q_NORM)), T * m->nh, m->hd));
    LCX_TRY(linear_bwd(m, d, xn1, T, H, m->Q, IDX(LCX_PARAM_Q), IDX(LCX_PARAM_Q_BIAS), dx_all, 0.0f));
    LCX_TRY(act_of(m, m->dk, T * m->KV, &d));
    if (m->cfg.qk_norm)
        LCX_TRY(lcx_m_rmsnorm_bwd(m, d, a->kpre, lcx_m_normw(m, IDX(LCX_PARAM_K_NORM)), a->rstdk, d,
                                  lcx_m_grad(m, IDX(LCX_PARAM_K_NORM)), T * m->nkv, m->hd));
    LCX_TRY(linear_bwd(m, d, xn1, T, H, m->KV, IDX(LCX_PARAM_K), IDX(LCX_PARAM_K_BIAS), dx_all, 1.0f));
    LCX_TRY(act_of(m, m->dv, T * m->KV, &d));
    LCX_TRY(linear_bwd(m, d, xn1, T, H, m->KV, IDX(LCX_PARAM_V), IDX(LCX_PARAM_V_BIAS), dx_all, 1.0f));
    LCX_TRY(m->sp ? lcx_sp_scatter_sum(m, dx_all, dxn, T) : lcx_tp_sum(m, dxn, T * H));
    LCX_TRY(lcx_m_rmsnorm_bwd(m, dxn, a->x_in, lcx_m_normw(m, IDX(LCX_PARAM_ATTN_NORM)), a->rstd1, dxn,
                              lcx_m_grad(m, IDX(LCX_PARAM_ATTN_NORM)), R, H));
    LCX_TRY(lcx_m_add(m, dres, dxn, dres, R * H)); /* dres = d x_in */
#undef IDX
    return LCX_OK;
}

lcx_status lcx_model_fwd_bwd(lcx_model *m, const lcx_batch *b, float dscale, lcx_loss_slot *acc) {
    LCX_FAIL_IF(!m->training, LCX_ERR_INVALID, "model: not built for training (opts.training = 0)");
    LCX_TRY(lcx_model_prepare(m, b, NULL));
    int64_t T = b->n_seq * b->seq_len;
    LCX_TRY(lcx_model_embed(m, T)); /* with offload: into layer 0's slot */
    for (int l = 0; l < m->L; l++) {
        LCX_TRY(lcx_offload_fwd_pre(m, l));
        LCX_TRY(lcx_tp_keep_input(m, l, T)); /* distributed: this TP rank's rows of the input */
        LCX_TRY(lcx_layer_forward(m, l, &m->layer[l], b, 0));
        LCX_TRY(lcx_offload_fwd_post(m, l, 1));
    }
    LCX_TRY(lcx_model_loss(m, T, 1, dscale, NULL, acc));
    for (int l = (int)m->L - 1; l >= 0; l--) {
        LCX_TRY(lcx_offload_bwd_pre(m, l)); /* offloaded: fetch this layer and the next ones back */
        /* recompute: rebuild everything but the attention output/LSE (kept) up to the MLP norm's output into the
         * shared scratch; the backward recomputes each MLP tile's intermediates, and the layer's output, which
         * nothing reads again, is not written (layer l+1's input slot may be back in the offload pool) */
        LCX_TRY(lcx_tp_gather_input(m, l, T)); /* distributed: the whole input from the TP ranks' rows */
        if (lcx_act_recomputes(m->policy[l])) LCX_TRY(lcx_layer_forward(m, l, &m->layer[l], b, 1));
        LCX_TRY(lcx_layer_backward(m, l, &m->layer[l], b));
        LCX_TRY(lcx_offload_bwd_post(m, l));
    }
    /* vocab-parallel: every token's gradient reaches the rank holding its id (all-gathered under sequence
     * parallelism) */
    if (m->sp) LCX_TRY(lcx_sp_gather(m, m->dres, m->sp_dfull, T));
    lcx_embedding_args e = {.dt = m->adt, .n_tokens = T, .n_rows = m->Vl, .dim = m->H, .vocab_start = m->v0,
                            .n_vocab = m->Vl * m->tp_size, .ids = m->d_ids, .dout = m->sp ? m->sp_dfull : m->dres,
                            .dweight = lcx_m_grad(m, m->embed_i)};
    return m->be->embedding_bwd(m->x, &e);
}

lcx_status lcx_model_forward_backward(lcx_model *m, const lcx_batch *b, float dscale, double *loss_sum,
                                      int64_t *count) {
    LCX_FAIL_IF(!m->training, LCX_ERR_INVALID, "model: not built for training (opts.training = 0)");
    lcx_loss_slot *acc = &m->d_res->loss[0], r;
    LCX_TRY(m->be->zero(m->x, acc, sizeof r));
    LCX_TRY(lcx_model_fwd_bwd(m, b, dscale, acc));
    LCX_TRY(m->be->copy_d2h(m->x, &r, acc, sizeof r)); /* the one read of this call */
    LCX_TRY(lcx_ring_reduce_loss(m, &r)); /* CP: the global sum and count on every rank */
    if (loss_sum) *loss_sum = r.loss_sum;
    if (count) *count = r.count;
    return LCX_OK;
}
