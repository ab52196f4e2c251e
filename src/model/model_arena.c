/* model_arena: the largest op workspace over every call shape of the model (model_arena.h). */
#include "src/model/model_arena.h"

#include <math.h>

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
 * s->tokens tokens (attention: one row of s->tokens) and loss_chunk rows; backward shapes only for training.
 * A call missing here fails with the arena-size message, which the model tests would show. */
size_t lcx_model_arena(const lcx_exec *x, const lcx_arena_shape *s) {
    sizing z = {x, 0};
    const int64_t T = s->tokens, C = s->loss_chunk, H = s->hidden, V = s->vocab, F = s->ffn, hd = s->head_dim;
    const int64_t Q = s->heads * hd, KV = s->kv_heads * hd;
    const lcx_dtype adt = s->adt, pdt = s->pdt, f32 = LCX_F32;
    const int64_t norms[][2] = {{T, H}, {T * s->heads, hd}, {T * s->kv_heads, hd}};
    for (int i = 0; i < 3; i++) {
        lcx_rmsnorm_args a = {.dt = adt, .n_rows = norms[i][0], .dim = norms[i][1]};
        need(&z, LCX_OP_RMSNORM_FWD, &a);
        if (s->training) need(&z, LCX_OP_RMSNORM_BWD, &a);
    }
    /* linear layers (in, out): y = x W^T, the bias through ones; dW += dy^T x, db += ones^T dy, dx = dy W */
    const int64_t lin[][2] = {{H, Q}, {H, KV}, {Q, H}, {H, F}, {F, H}};
    for (int i = 0; i < 5; i++) {
        int64_t in = lin[i][0], out = lin[i][1];
        need_matmul(&z, 0, 1, T, out, in, adt, pdt, adt);
        need_matmul(&z, 0, 0, T, out, 1, f32, pdt, adt);
        if (!s->training) continue;
        need_matmul(&z, 1, 0, out, in, T, adt, adt, f32);
        need_matmul(&z, 1, 0, 1, out, T, f32, adt, f32);
        need_matmul(&z, 0, 0, T, in, out, adt, pdt, adt);
    }
    /* loss chunk, float32 whatever adt is: logits = X W^T (f32 out), cross-entropy in f32, dX = dlogits W (act
     * out), dW += dlogits^T X */
    need_matmul(&z, 0, 1, C, V, H, adt, pdt, f32);
    lcx_xent_args xe = {.dt = f32, .n_rows = C, .vocab = V};
    need(&z, LCX_OP_CROSS_ENTROPY, &xe);
    xe.phase = LCX_XENT_FINISH, xe.tp = (int)s->tp, xe.n_valid = V;
    if (s->tp > 1) need(&z, LCX_OP_CROSS_ENTROPY, &xe);
    if (s->training) {
        need_matmul(&z, 0, 0, C, H, V, f32, pdt, adt);
        need_matmul(&z, 1, 0, V, H, C, f32, adt, f32);
    }
    /* the other ops: elementwise on act tensors; in backward RoPE's transpose on the f32 dq/dk (dt = F32) and
     * their cast to adt (model_backward.c) */
    const int64_t heads[2] = {s->heads, s->kv_heads};
    for (int i = 0; i < 2; i++) {
        lcx_rope_args r = {.dt = adt, .n_tokens = T, .n_heads = heads[i], .head_dim = hd, .rot_dim = s->rot_dim};
        need(&z, LCX_OP_ROPE_FWD, &r);
        if (!s->training) continue;
        r.dt = f32;
        need(&z, LCX_OP_ROPE_BWD, &r);
        lcx_cast_args ca = {.n = T * heads[i] * hd, .src_dt = f32, .dst_dt = adt};
        need(&z, LCX_OP_CAST, &ca);
    }
    lcx_embedding_args em = {.dt = adt, .n_tokens = T, .n_rows = V, .dim = H, .n_vocab = V * s->tp, .w_dtype = pdt};
    need(&z, LCX_OP_EMBEDDING_FWD, &em);
    lcx_swiglu_args sw = {.dt = adt, .n = T * F};
    need(&z, LCX_OP_SWIGLU_FWD, &sw);
    lcx_elementwise_args el = {.dt = adt, .n = T * H};
    need(&z, LCX_OP_ADD, &el);
    if (s->training) {
        need(&z, LCX_OP_EMBEDDING_BWD, &em);
        need(&z, LCX_OP_SWIGLU_BWD, &sw);
    }
    /* causal attention over one row of T tokens (model_ops.h lcx_m_attn_args) */
    lcx_attn_args at = {.dt = adt, .n_q = T, .n_k = T, .n_heads = s->heads, .n_kv_heads = s->kv_heads,
                        .head_dim = hd, .mask = LCX_MASK_CAUSAL, .scale = (float)(1.0 / sqrt((double)hd))};
    need(&z, LCX_OP_ATTENTION_FWD, &at);
    if (s->training) {
        need(&z, LCX_OP_ATTENTION_BWD, &at);
        lcx_sqnorm_args sq = {.n = s->n_elems};
        need(&z, LCX_OP_SQNORM, &sq);
    }
    if (s->ring) { /* the ring (model_ring.c): full-mask tasks up to a whole local row, and the LSE merge */
        at.mask = LCX_MASK_FULL;
        need(&z, LCX_OP_ATTENTION_FWD, &at);
        if (s->training) need(&z, LCX_OP_ATTENTION_BWD, &at);
        lcx_attn_merge_args mg = {.dt = adt, .n_rows = T, .n_heads = s->heads, .head_dim = hd};
        need(&z, LCX_OP_ATTENTION_MERGE, &mg);
    }
    return z.max;
}
