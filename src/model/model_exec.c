/* model_exec: the model's execution context. Its exec (created here, or the caller's), the scratch arena sized
 * once for every op call the model makes at its capacity, and the small device buffer where loss sums, counts
 * and the gradient norm accumulate until they are read (once per call or step). */
#include <string.h>

#include "src/model/model_internal.h"

lcx_status lcx_model_exec_init(lcx_model *m, const lcx_model_opts *opts) {
    m->adt = opts->act_dtype ? opts->act_dtype : LCX_F32; /* validated by lcx_model_init */
    if (opts->exec) {
        LCX_FAIL_IF(opts->backend && opts->backend != opts->exec->be, LCX_ERR_INVALID,
                    "model: opts.exec runs on backend '%s', opts.backend is '%s'", opts->exec->be->name,
                    opts->backend->name);
        m->x = opts->exec;
        m->be = m->x->be;
        return LCX_OK;
    }
    LCX_TRY(lcx_exec_create(m->be, &m->x));
    m->own_x = 1;
    return LCX_OK;
}

/* ---- the arena: the largest workspace over the model's op calls ------------------------------------------ */

typedef struct sizing {
    const lcx_exec *x;
    size_t max;
} sizing;

static void need(sizing *z, lcx_op op, const void *args) {
    size_t b = lcx_exec_workspace(z->x, op, args);
    if (b > z->max) z->max = b;
}

static void need_matmul(sizing *z, int ta, int tb, int64_t m, int64_t n, int64_t k, lcx_dtype at, lcx_dtype bt,
                        lcx_dtype ct) {
    lcx_matmul_args a = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .batch = 1, .alpha = 1.0f,
                         .a_dtype = at, .b_dtype = bt, .c_dtype = ct};
    need(z, LCX_OP_MATMUL, &a);
}

/* Every call shape of model_forward.c, model_logits.c, model_loss.c, model_backward.c and model_train.c at
 * max_tokens tokens (attention: one row of max_tokens) and loss_chunk rows; backward shapes only for training.
 * A call missing here fails with the arena-size message, which the model tests would show. */
size_t lcx_model_workspace(const lcx_model *m) {
    sizing z = {m->x, 0};
    const int64_t T = m->max_tokens, C = m->loss_chunk_cap, H = m->H, V = m->Vl;
    const lcx_dtype adt = m->adt, pdt = m->pdt, f32 = LCX_F32;
    const int64_t norms[][2] = {{T, H}, {T * m->nh, m->hd}, {T * m->nkv, m->hd}};
    for (int i = 0; i < 3; i++) {
        lcx_rmsnorm_args a = {.dt = adt, .n_rows = norms[i][0], .dim = norms[i][1]};
        need(&z, LCX_OP_RMSNORM_FWD, &a);
        if (m->training) need(&z, LCX_OP_RMSNORM_BWD, &a);
    }
    /* linear layers (in, out): y = x W^T, the bias through ones; dW += dy^T x, db += ones^T dy, dx = dy W */
    const int64_t lin[][2] = {{H, m->Q}, {H, m->KV}, {m->Q, H}, {H, m->F}, {m->F, H}};
    for (int i = 0; i < 5; i++) {
        int64_t in = lin[i][0], out = lin[i][1];
        need_matmul(&z, 0, 1, T, out, in, adt, pdt, adt);
        need_matmul(&z, 0, 0, T, out, 1, f32, pdt, adt);
        if (!m->training) continue;
        need_matmul(&z, 1, 0, out, in, T, adt, adt, f32);
        need_matmul(&z, 1, 0, 1, out, T, f32, adt, f32);
        need_matmul(&z, 0, 0, T, in, out, adt, pdt, adt);
    }
    /* loss chunk, float32 whatever adt is: logits = X W^T (f32 out), cross-entropy in f32, dX = dlogits W (act
     * out), dW += dlogits^T X */
    need_matmul(&z, 0, 1, C, V, H, adt, pdt, f32);
    lcx_xent_args xe = {.dt = f32, .n_rows = C, .vocab = V};
    need(&z, LCX_OP_CROSS_ENTROPY, &xe);
    xe.phase = LCX_XENT_FINISH, xe.tp = m->tp_size, xe.n_valid = V;
    if (m->tp_size > 1) need(&z, LCX_OP_CROSS_ENTROPY, &xe);
    if (m->training) {
        need_matmul(&z, 0, 0, C, H, V, f32, pdt, adt);
        need_matmul(&z, 1, 0, V, H, C, f32, adt, f32);
    }
    /* the other ops: elementwise on act tensors; in backward RoPE's transpose on the f32 dq/dk (dt = F32) and
     * their cast to adt (model_backward.c) */
    const int64_t heads[2] = {m->nh, m->nkv};
    for (int i = 0; i < 2; i++) {
        lcx_rope_args r = {.dt = adt, .n_tokens = T, .n_heads = heads[i], .head_dim = m->hd,
                           .rot_dim = m->rope.rot_dim};
        need(&z, LCX_OP_ROPE_FWD, &r);
        if (!m->training) continue;
        r.dt = f32;
        need(&z, LCX_OP_ROPE_BWD, &r);
        lcx_cast_args ca = {.n = T * heads[i] * m->hd, .src_dt = f32, .dst_dt = adt};
        need(&z, LCX_OP_CAST, &ca);
    }
    lcx_embedding_args em = {.dt = adt, .n_tokens = T, .n_rows = V, .dim = H, .n_vocab = V * m->tp_size,
                             .w_dtype = pdt};
    need(&z, LCX_OP_EMBEDDING_FWD, &em);
    lcx_swiglu_args sw = {.dt = adt, .n = T * m->F};
    need(&z, LCX_OP_SWIGLU_FWD, &sw);
    lcx_elementwise_args el = {.dt = adt, .n = T * H};
    need(&z, LCX_OP_ADD, &el);
    if (m->training) {
        need(&z, LCX_OP_EMBEDDING_BWD, &em);
        need(&z, LCX_OP_SWIGLU_BWD, &sw);
    }
    lcx_attn_args at = lcx_m_attn_args(m, T, 0);
    need(&z, LCX_OP_ATTENTION_FWD, &at);
    if (m->training) {
        need(&z, LCX_OP_ATTENTION_BWD, &at);
        lcx_sqnorm_args sq = {.n = (int64_t)m->n_elems};
        need(&z, LCX_OP_SQNORM, &sq);
    }
    if (m->cp) { /* the ring (model_ring.c): full-mask tasks up to a whole local row, and the LSE merge */
        at.mask = LCX_MASK_FULL;
        need(&z, LCX_OP_ATTENTION_FWD, &at);
        if (m->training) need(&z, LCX_OP_ATTENTION_BWD, &at);
        lcx_attn_merge_args mg = {.dt = adt, .n_rows = T, .n_heads = m->nh, .head_dim = m->hd};
        need(&z, LCX_OP_ATTENTION_MERGE, &mg);
    }
    return z.max;
}

lcx_status lcx_model_exec_reserve(lcx_model *m) {
    LCX_TRY(lcx_exec_reserve(m->x, lcx_model_workspace(m)));
    return lcx_model_reserve_results(m, 1);
}

lcx_status lcx_model_reserve_results(lcx_model *m, int64_t n) {
    if (m->d_res && n <= m->res_cap) return LCX_OK;
    LCX_TRY(m->be->sync(m->x)); /* queued ops may still add into the old slots */
    m->be->free(m->d_res);
    m->d_res = NULL;
    m->res_cap = 0;
    LCX_TRY(m->be->alloc(sizeof(lcx_dev_results) + (size_t)n * sizeof(lcx_loss_slot), (void **)&m->d_res));
    m->res_cap = n;
    return LCX_OK;
}

void lcx_model_exec_free(lcx_model *m) {
    if (!m->x) return;
    (void)m->be->sync(m->x);
    m->be->free(m->d_res);
    if (m->own_x) lcx_exec_free(m->x);
    m->x = NULL;
}
