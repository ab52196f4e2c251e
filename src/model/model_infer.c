/* model_infer: forward-only passes in bounded memory. A model built with training == 0 keeps no per-layer
 * activations: the decoder layers run one after another over one working set (lcx_infer_ws: residual stream,
 * one layer's q/k/v/o, the MLP rows) plus the logits chunk, so a pass needs weights + O(tokens x (hidden +
 * intermediate)) bytes whatever the depth, where the training layout needs O(layers x tokens x (hidden +
 * intermediate)).
 *
 * Bit-identical to the training forward (lcx_layer_forward): the same backend calls with the same shapes on the
 * same rows; only the buffers differ (tests/unit/test_model_infer.c). With opts.mlp_chunk the MLP runs in row
 * chunks (every op in it is row-wise) so its F-wide temporaries stop growing with the tokens; the GEMMs then
 * have other shapes, and the CPU backend splits a GEMM between threads by columns when it has fewer rows than
 * columns and by 16-row groups otherwise, while OpenBLAS's result for an element depends on the column extent
 * of the call and on the row's place in its 12-row register block: last-bit differences (docs/model.md).
 * The cached forward (src/model/model_kv.c) runs the same layer with its keys and values in a KV cache; under CP
 * the prefill runs the ring with its keys and values in the cache, and a continuation merges the ranks' partial
 * results over their parts of the prefix (lcx_cp_cached_attn, model_ring.c). */
#include <math.h>
#include <string.h>

#include "src/model/model_internal.h"

#define TAKEF(c, n) ((float *)lcx_cursor_take((c), (n), sizeof(float)))
#define TAKEA(c, n) lcx_cursor_take((c), (n), lcx_act_size(m->adt)) /* act tensor */

void lcx_infer_layout(lcx_model *m, lcx_cursor *c) {
    lcx_infer_ws *w = &m->ws;
    int64_t T = m->max_tokens, C = w->mlp_chunk;
    w->x = TAKEA(c, T * m->H);
    w->y = TAKEA(c, T * m->H);
    w->q = TAKEA(c, T * m->Q);
    w->k = TAKEA(c, T * m->KV);
    w->v = TAKEA(c, T * m->KV);
    w->o = TAKEA(c, T * m->Q);
    w->lse = TAKEF(c, T * m->nh);
    w->xn2 = TAKEA(c, C * m->H);
    w->gate = TAKEA(c, C * m->F);
    w->up = TAKEA(c, C * m->F);
    /* the embedding writes resid[0], the loss and logits read resid[L] and normalise into xf: all the stream */
    for (int64_t l = 0; l <= m->L; l++) m->resid[l] = w->x;
    m->xf = w->y;
    m->rstdf = NULL; /* nothing runs backward */
    m->ones = TAKEF(c, T);
    m->d_ids = (int32_t *)lcx_cursor_take(c, T, sizeof(int32_t));
    m->d_tgt = (int32_t *)lcx_cursor_take(c, T, sizeof(int32_t));
    m->d_pos = (int32_t *)lcx_cursor_take(c, T, sizeof(int32_t));
    m->logit_chunk = TAKEF(c, m->loss_chunk_cap * m->V);
}

/* a x b elements of elem bytes, rounded up to 64 bytes, added to *sum; *ovf set on overflow. */
static void add_piece(size_t *sum, int *ovf, int64_t a, int64_t b, size_t elem) {
    size_t n;
    if (a < 0 || b < 0 || !lcx_mul_size((size_t)a, (size_t)b, &n) || !lcx_mul_size(n, elem, &n) ||
        !lcx_add_size(n, 63, &n) || !lcx_add_size(*sum, n & ~(size_t)63, sum))
        *ovf = 1;
}

size_t lcx_model_forward_bytes(const lcx_model_config *cfg, const lcx_model_opts *opts) {
    return lcx_model_forward_bytes_tp(cfg, opts, opts->tp_comm ? opts->tp_comm->size : 1);
}

size_t lcx_model_forward_bytes_tp(const lcx_model_config *cfg, const lcx_model_opts *opts, int tp) {
    if (tp < 1) return 0;
    /* a TP rank's widths: its query heads, its KV heads (one shared head when TP exceeds them), its part of F */
    int64_t T = opts->max_tokens, H = cfg->hidden_size, nh = cfg->num_attention_heads / tp, hd = cfg->head_dim;
    int64_t nkv = cfg->num_key_value_heads >= tp ? cfg->num_key_value_heads / tp : 1;
    int64_t F = cfg->intermediate_size / tp, V = cfg->vocab_size;
    int64_t C = opts->mlp_chunk > 0 && opts->mlp_chunk < T ? opts->mlp_chunk : T;
    int64_t R = opts->loss_chunk > 0 ? opts->loss_chunk : 256;
    if (R > T) R = T;
    const size_t f = sizeof(float), i = sizeof(int32_t), a = lcx_act_size(opts->act_dtype ? opts->act_dtype : LCX_F32);
    if (T < 1 || a == 0 || nh < 0 || nkv < 0 || hd < 0 || nh > INT32_MAX || nkv > INT32_MAX || hd > INT32_MAX) return 0;
    size_t sum = 0;
    int ovf = 0;
    add_piece(&sum, &ovf, T, H, a), add_piece(&sum, &ovf, T, H, a);             /* x, y */
    add_piece(&sum, &ovf, T, nh * hd, a), add_piece(&sum, &ovf, T, nh * hd, a);   /* q, o */
    add_piece(&sum, &ovf, T, nkv * hd, a), add_piece(&sum, &ovf, T, nkv * hd, a); /* k, v */
    add_piece(&sum, &ovf, T, nh, f);                                            /* lse (f32) */
    add_piece(&sum, &ovf, C, H, a);                                             /* MLP rows: norm output */
    add_piece(&sum, &ovf, C, F, a), add_piece(&sum, &ovf, C, F, a);             /* gate (then SwiGLU), up */
    add_piece(&sum, &ovf, T, 1, f);                                             /* ones */
    for (int k = 0; k < 3; k++) add_piece(&sum, &ovf, T, 1, i);                 /* ids, targets, positions */
    add_piece(&sum, &ovf, R, V, f);                                             /* logits chunk (f32) */
    return ovf ? 0 : sum;
}

/* One decoder layer over the working set: x (the layer input) becomes the layer output.
 * kv_k/kv_v NULL: batch rows of b, keys and values in the working set, attention inside each row (as
 * lcx_layer_forward). Else (one row, the cached forward): this layer's cache [capacity, KV]; the new keys and
 * values go to rows n_past .. n_past+T-1 and the queries attend to cache rows 0 .. n_past+T-1. */
static lcx_status infer_layer(lcx_model *m, int l, const lcx_batch *b, void *kv_k, void *kv_v, int64_t n_past,
                              const lcx_cp_cached *cc) {
    const lcx_infer_ws *w = &m->ws;
    int64_t T = b->n_seq * b->seq_len, S = b->seq_len, H = m->H, F = m->F;
    void *k = kv_k ? lcx_m_at(m, kv_k, n_past * m->KV) : w->k, *v = kv_v ? lcx_m_at(m, kv_v, n_past * m->KV) : w->v;
#define IDX(kind) lcx_m_idx(m, l, (kind))
    LCX_TRY(lcx_m_rmsnorm_fwd(m, w->x, lcx_m_normw(m, IDX(LCX_PARAM_ATTN_NORM)), w->y, NULL, T, H));
    LCX_TRY(lcx_linear_fwd(m, w->y, T, H, m->Q, IDX(LCX_PARAM_Q), IDX(LCX_PARAM_Q_BIAS), w->q));
    LCX_TRY(lcx_linear_fwd(m, w->y, T, H, m->KV, IDX(LCX_PARAM_K), IDX(LCX_PARAM_K_BIAS), k));
    LCX_TRY(lcx_linear_fwd(m, w->y, T, H, m->KV, IDX(LCX_PARAM_V), IDX(LCX_PARAM_V_BIAS), v));
    if (m->cfg.qk_norm) { /* Qwen3: per-head RMSNorm of q and k before RoPE (in place: the op is row-wise) */
        LCX_TRY(lcx_m_rmsnorm_fwd(m, w->q, lcx_m_normw(m, IDX(LCX_PARAM_Q_NORM)), w->q, NULL, T * m->nh, m->hd));
        LCX_TRY(lcx_m_rmsnorm_fwd(m, k, lcx_m_normw(m, IDX(LCX_PARAM_K_NORM)), k, NULL, T * m->nkv, m->hd));
    }
    LCX_TRY(lcx_m_rope(m, 0, w->q, w->q, T, m->nh));
    LCX_TRY(lcx_m_rope(m, 0, k, k, T, m->nkv));
    if (kv_k && cc) { /* CP continuation: the ranks' prefix partials and the new rows' causal block, merged */
        LCX_TRY(lcx_cp_cached_attn(m, T, w->q, kv_k, kv_v, cc, w->o, w->lse));
    } else if (kv_k && !m->cp) {
        lcx_attn_args aa = lcx_m_attn_args(m, T, n_past);
        aa.n_k = n_past + T, aa.k_offset = 0;
        aa.q = w->q, aa.k = kv_k, aa.v = kv_v, aa.o = w->o, aa.lse = w->lse;
        LCX_TRY(m->be->attention_fwd(m->x, &aa));
    } else if (m->cp) { /* uncached, or a CP cache's prefill (k, v: the cache's rows) */
        LCX_TRY(lcx_ring_attn_fwd(m, b, w->q, k, v, w->o, w->lse));
    } else {
        for (int64_t s = 0; s < b->n_seq; s++) {
            int64_t p0 = b->positions ? b->positions[s * S] : 0;
            lcx_attn_args aa = lcx_m_attn_args(m, S, p0);
            aa.q = lcx_m_at(m, w->q, s * S * m->Q), aa.k = lcx_m_at(m, k, s * S * m->KV);
            aa.v = lcx_m_at(m, v, s * S * m->KV);
            aa.o = lcx_m_at(m, w->o, s * S * m->Q), aa.lse = w->lse + s * S * m->nh;
            LCX_TRY(m->be->attention_fwd(m->x, &aa));
        }
    }
    /* h = x + o_proj(o) into y (the attention norm output is dead); x is then free for the layer output */
    LCX_TRY(lcx_row_parallel_fwd(m, w->o, T, m->Q, H, IDX(LCX_PARAM_O), IDX(LCX_PARAM_O_BIAS), w->y));
    LCX_TRY(lcx_m_add(m, w->x, w->y, w->y, T * H));
    for (int64_t r0 = 0; r0 < T; r0 += w->mlp_chunk) {
        int64_t c = T - r0 < w->mlp_chunk ? T - r0 : w->mlp_chunk;
        void *h = lcx_m_at(m, w->y, r0 * H), *out = lcx_m_at(m, w->x, r0 * H);
        LCX_TRY(lcx_m_rmsnorm_fwd(m, h, lcx_m_normw(m, IDX(LCX_PARAM_MLP_NORM)), w->xn2, NULL, c, H));
        LCX_TRY(lcx_linear_fwd(m, w->xn2, c, H, F, IDX(LCX_PARAM_GATE), IDX(LCX_PARAM_GATE_BIAS), w->gate));
        LCX_TRY(lcx_linear_fwd(m, w->xn2, c, H, F, IDX(LCX_PARAM_UP), IDX(LCX_PARAM_UP_BIAS), w->up));
        LCX_TRY(lcx_m_swiglu_fwd(m, w->gate, w->up, w->gate, c * F));
        LCX_TRY(lcx_row_parallel_fwd(m, w->gate, c, F, H, IDX(LCX_PARAM_DOWN), IDX(LCX_PARAM_DOWN_BIAS), out));
        LCX_TRY(lcx_m_add(m, h, out, out, c * H));
    }
#undef IDX
    return LCX_OK;
}

lcx_status lcx_model_layers_fwd(lcx_model *m, const lcx_batch *b) {
    for (int l = 0; l < m->L; l++) {
        if (!m->training) {
            LCX_TRY(infer_layer(m, l, b, NULL, NULL, 0, NULL));
            continue;
        }
        /* offloaded layers run in the offload pool's slots, and nothing is kept for a backward */
        LCX_TRY(lcx_offload_fwd_pre(m, l));
        LCX_TRY(lcx_layer_forward(m, l, &m->layer[l], b, 0));
        LCX_TRY(lcx_offload_fwd_post(m, l, 0));
    }
    return LCX_OK;
}

/* The cached layers (model_kv.c): b is one row of new tokens at positions n_past ..; k/v [L][cap][KV]. */
lcx_status lcx_infer_layers_cached(lcx_model *m, const lcx_batch *b, void *k, void *v, int64_t cap,
                                   int64_t n_past) {
    LCX_FAIL_IF(m->training, LCX_ERR_INVALID, "model: the cached forward needs a forward-only model (training = 0)");
    LCX_FAIL_IF(b->n_seq != 1, LCX_ERR_INVALID, "model: the cached forward takes one row");
    for (int l = 0; l < m->L; l++) {
        int64_t off = (int64_t)l * cap * m->KV;
        LCX_TRY(infer_layer(m, l, b, lcx_m_at(m, k, off), lcx_m_at(m, v, off), n_past, NULL));
    }
    return LCX_OK;
}

lcx_status lcx_infer_layers_cp_cached(lcx_model *m, const lcx_batch *b, void *k, void *v, int64_t cap,
                                      const lcx_cp_cached *cc) {
    LCX_FAIL_IF(m->training || !m->cp || b->n_seq != 1, LCX_ERR_INVALID,
                "model: a CP cache needs a forward-only model on a CP group and one row");
    for (int l = 0; l < m->L; l++) {
        int64_t off = (int64_t)l * cap * m->KV;
        LCX_TRY(infer_layer(m, l, b, lcx_m_at(m, k, off), lcx_m_at(m, v, off), cc ? cc->rows : 0, cc));
    }
    return LCX_OK;
}
