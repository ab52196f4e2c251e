/* model_ops: the model's op calls as one-line helpers. Each fills the op's argument struct from the model (its
 * exec, activation dtype, norm epsilon, positions and RoPE tables), so model_*.c read like the math and every
 * call goes through the model's exec. Internal to the model (included by model_internal.h). */
#ifndef LCX_MODEL_OPS_H
#define LCX_MODEL_OPS_H

#include <math.h>

/* included at the end of model_internal.h: struct lcx_model is complete here */

static inline lcx_status lcx_m_rmsnorm_fwd(lcx_model *m, const void *x, const float *w, void *y, float *rstd,
                                           int64_t rows, int64_t dim) {
    lcx_rmsnorm_args a = {.dt = m->adt, .n_rows = rows, .dim = dim, .eps = (float)m->cfg.rms_norm_eps, .x = x,
                          .w = w, .y = y, .rstd = rstd};
    return m->be->rmsnorm_fwd(m->x, &a);
}

static inline lcx_status lcx_m_rmsnorm_bwd(lcx_model *m, const void *dy, const void *x, const float *w,
                                           float *rstd, void *dx, float *dw, int64_t rows, int64_t dim) {
    lcx_rmsnorm_args a = {.dt = m->adt, .n_rows = rows, .dim = dim, .x = x, .w = w, .rstd = rstd, .dy = dy,
                          .dx = dx, .dw = dw};
    return m->be->rmsnorm_bwd(m->x, &a);
}

/* RoPE over the batch's T tokens of `heads` heads at the uploaded positions (bwd: the transpose), with x and
 * out in dtype dt (the backward runs on attention's f32 dq/dk). */
static inline lcx_status lcx_m_rope_dt(lcx_model *m, lcx_dtype dt, int bwd, const void *x, void *out, int64_t T,
                                       int64_t heads) {
    lcx_rope_args a = {.dt = dt, .n_tokens = T, .n_heads = heads, .head_dim = m->hd, .rot_dim = m->rope.rot_dim,
                       .n_pos = m->rope_len, .x = x, .out = out, .pos = m->d_pos, .cos = m->rope_cos,
                       .sin = m->rope_sin};
    return bwd ? m->be->rope_bwd(m->x, &a) : m->be->rope_fwd(m->x, &a);
}
static inline lcx_status lcx_m_rope(lcx_model *m, int bwd, const void *x, void *out, int64_t T, int64_t heads) {
    return lcx_m_rope_dt(m, m->adt, bwd, x, out, T, heads);
}

/* Causal self-attention over one row of S tokens starting at global position p0 (pointers set by the caller). */
static inline lcx_attn_args lcx_m_attn_args(const lcx_model *m, int64_t S, int64_t p0) {
    lcx_attn_args a = {.dt = m->adt, .n_q = S, .n_k = S, .n_heads = m->nh, .n_kv_heads = m->nkv, .head_dim = m->hd,
                       .q_offset = p0, .k_offset = p0, .mask = LCX_MASK_CAUSAL,
                       .scale = (float)(1.0 / sqrt((double)m->hd))};
    return a;
}

/* The document starts of query rows from token t on (NULL without a document mask). */
static inline const int32_t *lcx_m_doc(const lcx_model *m, int64_t t) { return m->doc_on ? m->d_doc + t : NULL; }

static inline lcx_status lcx_m_swiglu_fwd(lcx_model *m, const void *gate, const void *up, void *h, int64_t n) {
    lcx_swiglu_args a = {.dt = m->adt, .n = n, .gate = gate, .up = up, .h = h};
    return m->be->swiglu_fwd(m->x, &a);
}

static inline lcx_status lcx_m_swiglu_bwd(lcx_model *m, const void *dh, const void *gate, const void *up,
                                          void *dgate, void *dup, int64_t n) {
    lcx_swiglu_args a = {.dt = m->adt, .n = n, .gate = gate, .up = up, .dh = dh, .dgate = dgate, .dup = dup};
    return m->be->swiglu_bwd(m->x, &a);
}

/* out = a + b over n activations */
static inline lcx_status lcx_m_add(lcx_model *m, const void *a, const void *b, void *out, int64_t n) {
    lcx_elementwise_args e = {.dt = m->adt, .n = n, .a = a, .b = b, .out = out};
    return m->be->add(m->x, &e);
}

static inline lcx_status lcx_m_cast(lcx_model *m, const void *src, lcx_dtype src_dt, void *dst, lcx_dtype dst_dt,
                                    int64_t n) {
    lcx_cast_args a = {.n = n, .src_dt = src_dt, .dst_dt = dst_dt, .src = src, .dst = dst};
    return m->be->cast(m->x, &a);
}

#endif
