/* model_init: buffer families (params, master, grads, moments, activations), loading from a catalog, random
 * init, accessors. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/model/model_internal.h"

lcx_adamw_opts lcx_adamw_opts_default(void) {
    lcx_adamw_opts o = {1e-4, 0.9, 0.999, 1e-8, 0.01, 1.0, 0};
    return o;
}

/* ---- activation layout: a byte cursor over one allocation (lcx_cursor, model_internal.h) ----------------- */
typedef lcx_cursor cursor;
#define take lcx_cursor_take
#define TAKEF(c, n) ((float *)take((c), (n), sizeof(float)))
#define TAKEA(c, n) take((c), (n), lcx_act_size(m->adt)) /* act tensor (the model's activation dtype) */

void lcx_layer_take_full(lcx_model *m, cursor *c, lcx_layer_acts *a, int64_t T, int64_t Tf) {
    const int64_t R = lcx_m_rows(m, T); /* the norms' rows (this TP rank's under sequence parallelism) */
    a->xn1 = TAKEA(c, R * m->H);
    a->rstd1 = TAKEF(c, R);
    if (m->cfg.qk_norm) {
        a->qpre = TAKEA(c, T * m->Q);
        a->kpre = TAKEA(c, T * m->KV);
        a->rstdq = TAKEF(c, T * m->nh);
        a->rstdk = TAKEF(c, T * m->nkv);
    }
    a->q = TAKEA(c, T * m->Q);
    a->k = TAKEA(c, T * m->KV);
    a->v = TAKEA(c, T * m->KV);
    a->h = TAKEA(c, R * m->H);
    a->xn2 = TAKEA(c, R * m->H);
    a->rstd2 = TAKEF(c, R);
    a->gate = TAKEA(c, Tf * m->F);
    a->up = TAKEA(c, Tf * m->F);
    a->act = TAKEA(c, Tf * m->F);
}

/* Lay out the activations (c->base NULL: sizing pass only). */
static void layout_acts(lcx_model *m, cursor *c) {
    if (!m->training) { /* forward-only: one layer's working set (model_infer.c) */
        lcx_infer_layout(m, c);
        return;
    }
    int64_t T = m->max_tokens, R = lcx_m_rows(m, T); /* R: the residual stream's rows here */
    lcx_layer_acts scratch;
    memset(&scratch, 0, sizeof scratch);
    int any_recompute = 0;
    for (int l = 0; l < m->L; l++) any_recompute |= lcx_act_recomputes(m->policy[l]);
    /* the recompute scratch: one layer's tensors, of which the MLP's gate/up/act for one tile only */
    if (any_recompute) lcx_layer_take_full(m, c, &scratch, T, m->mlp_tile);
    /* distributed layers run on one shared whole input and keep their rows of it (docs/parallel.md) */
    int any_distributed = 0;
    for (int l = 0; l < m->L; l++) any_distributed |= lcx_m_distributes(m, l);
    m->x_full = any_distributed ? TAKEA(c, m->tp_size * lcx_m_part_rows(m, T) * m->H) : NULL;
    /* sequence parallelism: the whole rows between the norms and the TP blocks (docs/parallel.md) */
    m->sp_full = m->sp ? TAKEA(c, m->tp_size * R * m->H) : NULL;
    m->sp_part = m->sp ? TAKEA(c, m->tp_size * R * m->H) : NULL;
    m->sp_dfull = m->sp ? TAKEA(c, m->tp_size * R * m->H) : NULL;
    /* offloaded layers' stored tensors (their input included) live in the offload pools (model_offload.c) */
    for (int64_t l = 0; l <= m->L; l++)
        m->resid[l] = l < m->L && lcx_m_distributes(m, (int)l)     ? m->x_full
                      : l < m->L && lcx_act_offloads(m->policy[l]) ? NULL
                                                                   : TAKEA(c, R * m->H);
    for (int l = 0; l < m->L; l++) {
        lcx_layer_acts *a = &m->layer[l];
        if (lcx_act_recomputes(m->policy[l])) *a = scratch;
        if (lcx_act_offloads(m->policy[l])) continue;
        if (m->policy[l] != LCX_ACT_RECOMPUTE) lcx_layer_take_full(m, c, a, T, T);
        a->x_in = m->resid[l];
        if (lcx_m_distributes(m, l)) a->x_part = TAKEA(c, lcx_m_part_rows(m, T) * m->H);
        a->o = TAKEA(c, T * m->Q);
        a->lse = TAKEF(c, T * m->nh);
    }
    m->xf = TAKEA(c, R * m->H);
    m->rstdf = TAKEF(c, R);
    m->ones = TAKEF(c, T);
    m->d_ids = (int32_t *)take(c, T, sizeof(int32_t));
    m->d_tgt = (int32_t *)take(c, T, sizeof(int32_t));
    m->d_pos = (int32_t *)take(c, T, sizeof(int32_t));
    m->d_doc = (int32_t *)take(c, T, sizeof(int32_t));
    m->logit_chunk = TAKEF(c, m->loss_chunk_cap * m->Vl);
    if (m->training) {
        m->dres = TAKEA(c, R * m->H);
        m->dxn = TAKEA(c, R * m->H);
        m->dq = TAKEF(c, T * m->Q);
        m->dk = TAKEF(c, T * m->KV);
        m->dv = TAKEF(c, T * m->KV);
        m->dout = TAKEA(c, T * m->Q);
        m->dgate = TAKEA(c, m->mlp_tile * m->F); /* the MLP backward runs tile by tile */
        m->dup = TAKEA(c, m->mlp_tile * m->F);
        m->dact = TAKEA(c, m->mlp_tile * m->F);
    }
}

static lcx_status alloc_f32(const lcx_backend *be, uint64_t n, float **out, const char *what) {
    size_t bytes;
    LCX_FAIL_IF(!lcx_mul_size((size_t)n, sizeof(float), &bytes), LCX_ERR_OOM, "model: %s too large", what);
    lcx_status st = be->alloc(bytes, (void **)out);
    if (st != LCX_OK) return lcx_fail_context(st, "model %s: ", what);
    return LCX_OK;
}

/* The tensor-parallel rule of each parameter kind (src/core/layout.h). */
static lcx_weight_kind weight_kind(lcx_param_kind k) {
    switch (k) {
    case LCX_PARAM_EMBED: return LCX_W_EMBED;
    case LCX_PARAM_ATTN_NORM: case LCX_PARAM_MLP_NORM: case LCX_PARAM_FINAL_NORM: return LCX_W_NORM;
    case LCX_PARAM_Q: return LCX_W_Q_PROJ;
    case LCX_PARAM_K: return LCX_W_K_PROJ;
    case LCX_PARAM_V: return LCX_W_V_PROJ;
    case LCX_PARAM_O: return LCX_W_O_PROJ;
    case LCX_PARAM_Q_BIAS: return LCX_W_Q_BIAS;
    case LCX_PARAM_K_BIAS: return LCX_W_K_BIAS;
    case LCX_PARAM_V_BIAS: return LCX_W_V_BIAS;
    case LCX_PARAM_O_BIAS: return LCX_W_O_BIAS;
    case LCX_PARAM_Q_NORM: return LCX_W_Q_NORM;
    case LCX_PARAM_K_NORM: return LCX_W_K_NORM;
    case LCX_PARAM_GATE: return LCX_W_GATE_PROJ;
    case LCX_PARAM_UP: return LCX_W_UP_PROJ;
    case LCX_PARAM_DOWN: return LCX_W_DOWN_PROJ;
    case LCX_PARAM_GATE_BIAS: return LCX_W_GATE_BIAS;
    case LCX_PARAM_UP_BIAS: return LCX_W_UP_BIAS;
    case LCX_PARAM_DOWN_BIAS: return LCX_W_DOWN_BIAS;
    case LCX_PARAM_LM_HEAD: return LCX_W_LM_HEAD;
    default: return LCX_W_UNKNOWN;
    }
}

/* What TP rank r of T holds of every parameter, and its buffer's element count. */
static lcx_status init_slices(lcx_model *m, int T, int r) {
    m->slice = calloc(m->tab.n, sizeof *m->slice);
    m->numel = calloc(m->tab.n, sizeof *m->numel);
    LCX_FAIL_IF(!m->slice || !m->numel, LCX_ERR_OOM, "model: out of memory");
    lcx_tp_dims d = {m->nh, m->nkv, m->hd, m->H, m->F, m->V};
    for (size_t i = 0; i < m->tab.n; i++) {
        const lcx_param_spec *s = &m->tab.params[i];
        LCX_TRY(lcx_tp_slice_of(weight_kind(s->kind), &d, T, r, &m->slice[i]));
        uint64_t n = 1;
        for (int k = 0; k < m->slice[i].ndim; k++)
            LCX_FAIL_IF(__builtin_mul_overflow(n, m->slice[i].local[k], &n), LCX_ERR_INVALID,
                        "model: parameter %s too large", s->name);
        m->numel[i] = n;
    }
    return LCX_OK;
}

/* The layer sizes this rank computes with: its q heads, kv heads (one shared head when TP exceeds them), part of
 * the intermediate size and vocabulary rows, as the slices of q_proj, k_proj, gate_proj and the embedding say. */
static void local_sizes(lcx_model *m) {
    m->Vl = m->V, m->v0 = 0;
    if (m->tp_size == 1) return;
    const lcx_tp_slice *q = &m->slice[lcx_m_idx(m, 0, LCX_PARAM_Q)], *k = &m->slice[lcx_m_idx(m, 0, LCX_PARAM_K)];
    const lcx_tp_slice *g = &m->slice[lcx_m_idx(m, 0, LCX_PARAM_GATE)], *e = &m->slice[m->embed_i];
    m->nh = (int64_t)q->local[0] / m->hd;
    m->nkv = (int64_t)k->local[0] / m->hd;
    m->Q = m->nh * m->hd, m->KV = m->nkv * m->hd;
    m->F = (int64_t)g->local[0];
    m->Vl = (int64_t)e->local[0];
    m->v0 = m->tp_rank * m->Vl; /* not box.start: a shard of padding rows only stores nothing */
}

lcx_status lcx_model_param_slice(const lcx_model *m, size_t i, lcx_tp_slice *out) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    *out = m->slice[i];
    return LCX_OK;
}

lcx_status lcx_model_init(lcx_model **out, const lcx_model_config *cfg, const lcx_model_opts *opts) {
    LCX_FAIL_IF(!out || !cfg || !opts, LCX_ERR_INVALID, "model_init: NULL argument");
    *out = NULL;
    lcx_dtype pdt = opts->param_dtype ? opts->param_dtype : LCX_F32;
    LCX_FAIL_IF(pdt != LCX_F32 && pdt != LCX_BF16, LCX_ERR_UNSUPPORTED,
                "model: parameters can be stored as F32 or BF16, not %s", lcx_dtype_name(pdt));
    LCX_FAIL_IF(opts->max_tokens < 1 || opts->max_tokens > INT32_MAX, LCX_ERR_INVALID,
                "model: max_tokens %lld out of range [1, 2^31)", (long long)opts->max_tokens);
    LCX_FAIL_IF(opts->loss_chunk < 0, LCX_ERR_INVALID, "model: loss chunk %lld < 0", (long long)opts->loss_chunk);
    LCX_FAIL_IF(opts->mlp_chunk < 0, LCX_ERR_INVALID, "model: MLP chunk %lld < 0", (long long)opts->mlp_chunk);
    LCX_FAIL_IF(opts->act_dtype && opts->act_dtype != LCX_F32 && opts->act_dtype != LCX_BF16, LCX_ERR_UNSUPPORTED,
                "model: activations can be stored as F32 or BF16, not %s", lcx_dtype_name(opts->act_dtype));
    lcx_status st = LCX_OK;
    lcx_model *m = calloc(1, sizeof *m);
    LCX_FAIL_IF(!m, LCX_ERR_OOM, "model: out of memory");
    m->be = opts->backend ? opts->backend : lcx_backend_cpu();
    LCX_TRY_GOTO(lcx_model_exec_init(m, opts), fail);
    m->cfg = *cfg;
    m->cfg.json = NULL;
    m->pdt = pdt;
    m->training = opts->training;
    m->L = cfg->num_hidden_layers;
    m->H = cfg->hidden_size;
    m->nh = cfg->num_attention_heads;
    m->nkv = cfg->num_key_value_heads;
    m->hd = cfg->head_dim;
    m->Q = m->nh * m->hd;
    m->KV = m->nkv * m->hd;
    m->F = cfg->intermediate_size;
    m->V = cfg->vocab_size;
    m->max_tokens = opts->max_tokens;
    m->loss_chunk = opts->loss_chunk ? opts->loss_chunk : 256;
    if (m->loss_chunk > m->max_tokens) m->loss_chunk = m->max_tokens;
    m->loss_chunk_cap = m->loss_chunk;
    m->ws.mlp_chunk = opts->mlp_chunk && opts->mlp_chunk < m->max_tokens ? opts->mlp_chunk : m->max_tokens;
    m->mlp_tile = m->ws.mlp_chunk;
    LCX_TRY_GOTO(lcx_param_table_init(&m->tab, cfg), fail);
    LCX_TRY_GOTO(lcx_tp_init(m, opts->tp_comm), fail);
    m->distribute = opts->distribute_saved && m->tp_size > 1;
    m->sp = opts->sequence_parallel && m->tp_size > 1 && opts->training;
    LCX_FAIL_GOTO(m->sp && m->distribute, LCX_ERR_INVALID, fail,
                  "model: sequence parallelism already keeps only this TP rank's rows of every layer's input: "
                  "distributed saved activations are for TP without it");
    LCX_TRY_GOTO(init_slices(m, m->tp_size, m->tp_rank), fail);
    LCX_TRY_GOTO(lcx_rope_plan_init(&m->rope, &cfg->rope, cfg->head_dim, cfg->max_position_embeddings, NULL, NULL),
                 fail);

    m->policy = calloc((size_t)m->L, sizeof *m->policy);
    m->off = calloc(m->tab.n, sizeof *m->off);
    m->norm_off = calloc(m->tab.n, sizeof *m->norm_off);
    m->idx = malloc((size_t)m->L * LCX_PARAM_KIND_COUNT * sizeof *m->idx);
    m->layer = calloc((size_t)m->L, sizeof *m->layer);
    m->resid = calloc((size_t)m->L + 1, sizeof *m->resid);
    m->inv_freq = calloc((size_t)m->rope.n_pairs, sizeof(float));
    LCX_FAIL_GOTO(!m->policy || !m->off || !m->norm_off || !m->idx || !m->layer || !m->resid || !m->inv_freq, LCX_ERR_OOM, fail,
                  "model: out of memory");
    for (int l = 0; l < m->L; l++) {
        lcx_act_policy p = opts->layer_policy ? opts->layer_policy[l] : opts->policy;
        LCX_FAIL_GOTO((unsigned)p >= LCX_ACT_POLICY_COUNT, LCX_ERR_INVALID, fail,
                      "model: layer %d: activation policy %s (the planner resolves auto before building a model)", l,
                      lcx_act_policy_name(p));
        m->policy[l] = p;
    }

    /* parameter offsets and (layer, kind) index */
    for (size_t i = 0; i < (size_t)m->L * LCX_PARAM_KIND_COUNT; i++) m->idx[i] = -1;
    m->embed_i = m->final_norm_i = m->lm_head_i = -1;
    uint64_t n = 0;
    for (size_t i = 0; i < m->tab.n; i++) {
        const lcx_param_spec *s = &m->tab.params[i];
        m->off[i] = (size_t)n;
        /* keep each tensor 64-byte aligned in both dtypes (32 elements) */
        LCX_FAIL_GOTO(__builtin_add_overflow(n, (m->numel[i] + 31) & ~(uint64_t)31, &n), LCX_ERR_INVALID, fail,
                      "model: parameter count overflows");
        if (s->role == LCX_ROLE_NORM) {
            m->norm_off[i] = (size_t)m->n_norm_elems;
            m->n_norm_elems += (m->numel[i] + 15) & ~(uint64_t)15;
        }
        if (s->layer >= 0) m->idx[(size_t)s->layer * LCX_PARAM_KIND_COUNT + s->kind] = (int64_t)i;
        else if (s->kind == LCX_PARAM_EMBED) m->embed_i = (int64_t)i;
        else if (s->kind == LCX_PARAM_FINAL_NORM) m->final_norm_i = (int64_t)i;
        else if (s->kind == LCX_PARAM_LM_HEAD) m->lm_head_i = (int64_t)i;
    }
    LCX_ASSERT(m->embed_i >= 0 && m->final_norm_i >= 0);
    if (m->tab.tied) m->lm_head_i = m->embed_i;
    LCX_ASSERT(m->lm_head_i >= 0);
    m->n_elems = n;
    local_sizes(m);

    size_t pbytes;
    LCX_FAIL_GOTO(!lcx_mul_size((size_t)n, pdt == LCX_BF16 ? 2 : 4, &pbytes), LCX_ERR_OOM, fail, "model: too large");
    LCX_TRY_GOTO(m->be->alloc(pbytes, &m->params), fail);
    LCX_TRY_GOTO(m->be->zero(m->x, m->params, pbytes), fail);
    LCX_TRY_GOTO(lcx_zero_init(m, opts->zero_comm), fail); /* the moments' rows (all of them without ZeRO-1) */
    if (pdt == LCX_BF16) {
        /* inference with bf16 weights needs no fp32 master copy; under ZeRO-1 a rank holds its moment rows of it */
        m->master_sharded = m->training && m->zero;
        if (m->training)
            LCX_TRY_GOTO(alloc_f32(m->be, m->master_sharded ? m->n_moment_elems : n, &m->master, "master weights"),
                         fail);
        LCX_TRY_GOTO(alloc_f32(m->be, m->n_norm_elems, &m->normw, "norm weights"), fail);
    } else {
        m->master = (float *)m->params;
    }
    if (m->training) {
        uint64_t nm = m->n_moment_elems;
        LCX_TRY_GOTO(alloc_f32(m->be, n, &m->grads, "gradients"), fail);
        LCX_TRY_GOTO(alloc_f32(m->be, nm, &m->adam_m, "AdamW m"), fail);
        LCX_TRY_GOTO(alloc_f32(m->be, nm, &m->adam_v, "AdamW v"), fail);
        LCX_TRY_GOTO(m->be->zero(m->x, m->grads, (size_t)n * 4), fail);
        LCX_TRY_GOTO(m->be->zero(m->x, m->adam_m, (size_t)nm * 4), fail);
        LCX_TRY_GOTO(m->be->zero(m->x, m->adam_v, (size_t)nm * 4), fail);
    }

    cursor c = {NULL, 0, 0};
    layout_acts(m, &c);
    LCX_FAIL_GOTO(c.overflow, LCX_ERR_OOM, fail, "model: activation size overflows for %lld tokens",
                  (long long)m->max_tokens);
    LCX_TRY_GOTO(m->be->alloc(c.used, &m->acts_buf), fail);
    m->acts_bytes = c.used;
    c.base = m->acts_buf;
    c.used = 0;
    layout_acts(m, &c);
    LCX_TRY_GOTO(lcx_offload_init(m, opts->offload_prefetch), fail);
    LCX_TRY_GOTO(lcx_ring_init(m, opts->cp_comm), fail);
    LCX_TRY_GOTO(lcx_tp_alloc(m), fail);
    LCX_TRY_GOTO(lcx_model_exec_reserve(m), fail);
    {
        /* the ones vector is constant */
        float *ones = malloc((size_t)m->max_tokens * sizeof(float));
        LCX_FAIL_GOTO(!ones, LCX_ERR_OOM, fail, "model: out of memory");
        for (int64_t t = 0; t < m->max_tokens; t++) ones[t] = 1.0f;
        st = m->be->copy_h2d(m->x, m->ones, ones, (size_t)m->max_tokens * sizeof(float));
        free(ones);
        LCX_TRY_GOTO(st, fail);
    }
    *out = m;
    return LCX_OK;
fail:
    lcx_model_free(m);
    return st;
}

void lcx_model_free(lcx_model *m) {
    if (!m) return;
    if (m->x) (void)m->be->sync(m->x); /* nothing queued may still use the buffers */
    if (m->be) {
        m->be->free(m->params);
        if (m->pdt == LCX_BF16) m->be->free(m->master);
        m->be->free(m->normw);
        m->be->free(m->grads);
        m->be->free(m->adam_m);
        m->be->free(m->adam_v);
        m->be->free(m->acts_buf);
        m->be->free(m->rope_cos);
        m->be->free(m->rope_sin);
        lcx_ring_free(m);
        lcx_tp_free(m);
        lcx_offload_free(m);
    }
    lcx_model_exec_free(m);
    lcx_param_table_free(&m->tab);
    free(m->slice);
    free(m->numel);
    lcx_zero_free(m);
    free(m->policy);
    free(m->off);
    free(m->norm_off);
    free(m->idx);
    free(m->layer);
    free(m->resid);
    free(m->inv_freq);
    free(m);
}

/* ---- filling parameters ------------------------------------------------------------------------------------ */

/* model_internal.h: master = src, stored = src (f32) or RNE(src) (bf16) */
lcx_status lcx_m_set_from_f32(lcx_model *m, size_t i, const float *src, uint16_t *scratch) {
    const lcx_param_spec *s = &m->tab.params[i];
    size_t n = lcx_m_numel(m, i);
    uint16_t *p16 = (uint16_t *)lcx_m_param(m, (int64_t)i);
    if (m->master_sharded) { /* this rank's rows of the master; the stored value rounded here, as without it */
        uint64_t e0, e1;
        float *mine = lcx_zero_master(m, i, &e0, &e1);
        if (e1 > e0) LCX_TRY(m->be->copy_h2d(m->x, mine, src + e0, (size_t)(e1 - e0) * sizeof(float)));
        LCX_TRY(lcx_convert_from_f32(LCX_BF16, src, scratch, n));
        LCX_TRY(m->be->copy_h2d(m->x, p16, scratch, n * sizeof(uint16_t)));
    } else if (m->master) {
        LCX_TRY(m->be->copy_h2d(m->x, m->master + m->off[i], src, n * sizeof(float)));
        if (m->pdt == LCX_BF16) LCX_TRY(lcx_m_cast(m, m->master + m->off[i], LCX_F32, p16, LCX_BF16, (int64_t)n));
    } else {
        LCX_TRY(lcx_convert_from_f32(LCX_BF16, src, scratch, n));
        LCX_TRY(m->be->copy_h2d(m->x, p16, scratch, n * sizeof(uint16_t)));
    }
    if (m->pdt == LCX_BF16 && s->role == LCX_ROLE_NORM)
        LCX_TRY(lcx_m_cast(m, p16, LCX_BF16, m->normw + m->norm_off[i], LCX_F32, (int64_t)n));
    return LCX_OK;
}

static size_t lcx_max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Floats of the largest parameter, global or local. */
static size_t max_numel(const lcx_model *m) {
    size_t mx = 0;
    for (size_t i = 0; i < m->tab.n; i++)
        mx = lcx_max_size(mx, lcx_max_size((size_t)m->tab.params[i].numel, lcx_m_numel(m, i)));
    return mx;
}

/* Fill every parameter in table order: values(ctx, m, i, buf) writes parameter i's numel float32 values (the
 * whole global tensor) into buf, this rank's slice of them is cut out (padding rows zero) and set_param stores
 * it. Resets the step count. what names the caller in the out-of-memory message. */
typedef lcx_status (*param_values_fn)(void *ctx, const lcx_model *m, size_t i, float *buf);
static lcx_status set_all_params(lcx_model *m, const char *what, param_values_fn values, void *ctx) {
    float *buf = malloc(max_numel(m) * sizeof(float) + 1), *mine = malloc(max_numel(m) * sizeof(float) + 1);
    uint16_t *scratch = malloc(max_numel(m) * sizeof(uint16_t) + 1);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!buf || !mine || !scratch, LCX_ERR_OOM, done, "%s: out of memory", what);
    for (size_t i = 0; i < m->tab.n; i++) {
        LCX_TRY_GOTO(values(ctx, m, i, buf), done);
        const lcx_tp_slice *sl = &m->slice[i];
        const float *src = buf;
        if (lcx_m_numel(m, i) != m->tab.params[i].numel || memcmp(&sl->box, &sl->global, sizeof sl->box) != 0) {
            lcx_box local = sl->box; /* the buffer: the box's rows, then the padding rows */
            for (int k = 0; k < sl->ndim; k++) local.shape[k] = sl->local[k];
            memset(mine, 0, lcx_m_numel(m, i) * sizeof(float));
            LCX_TRY_GOTO(lcx_box_copy(&sl->global, buf, &local, mine, sizeof(float), NULL), done);
            src = mine;
        }
        LCX_TRY_GOTO(lcx_m_set_from_f32(m, i, src, scratch), done);
    }
    m->step = 0;
done:
    free(buf);
    free(mine);
    free(scratch);
    return st;
}

/* parameter i from the catalog's tensor of the same name and shape, converted to float32 */
static lcx_status load_values(void *ctx, const lcx_model *m, size_t i, float *buf) {
    const lcx_catalog *c = ctx;
    const lcx_param_spec *s = &m->tab.params[i];
    const lcx_st_tensor *t = c->tensor_of[i];
    LCX_FAIL_IF(!t || strcmp(c->params.params[i].name, s->name) != 0 || !lcx_shape_equal(&t->shape, &s->shape),
                LCX_ERR_INVALID, "%s: tensor '%s' does not match the model", c->path, s->name);
    lcx_status st = lcx_convert_to_f32(t->dtype, t->data, buf, (size_t)s->numel);
    if (st != LCX_OK) lcx_fail_context(st, "%s: tensor '%s': ", c->path, s->name);
    return st;
}

lcx_status lcx_model_load(lcx_model *m, const lcx_catalog *c) {
    LCX_FAIL_IF(!c->has_config, LCX_ERR_INVALID, "%s: no config.json: cannot build a model", c->path);
    LCX_FAIL_IF(c->params.n != m->tab.n, LCX_ERR_INVALID, "%s: checkpoint has %zu parameters, model %zu", c->path,
                c->params.n, m->tab.n);
    return set_all_params(m, "model load", load_values, (void *)c);
}

/* splitmix64 + Box-Muller: a deterministic normal stream */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform01(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

typedef struct random_fill {
    uint64_t s;
    double std;
} random_fill;

/* norms 1, biases 0, the rest normal(0, std) from one stream in parameter order */
static lcx_status random_values(void *ctx, const lcx_model *m, size_t i, float *buf) {
    random_fill *r = ctx;
    uint64_t *s = &r->s;
    const lcx_param_spec *p = &m->tab.params[i];
    for (uint64_t j = 0; j < p->numel; j++) {
        if (p->role == LCX_ROLE_NORM) buf[j] = 1.0f;
        else if (p->role == LCX_ROLE_BIAS) buf[j] = 0.0f;
        else buf[j] = (float)(r->std * sqrt(-2.0 * log(uniform01(s))) * cos(6.283185307179586 * uniform01(s)));
    }
    return LCX_OK;
}

lcx_status lcx_model_init_random(lcx_model *m, uint64_t seed, double std) {
    random_fill r = {seed, std};
    return set_all_params(m, "model init", random_values, &r);
}

/* parameter i read from the source (any form) as float32 */
static lcx_status source_values(void *ctx, const lcx_model *m, size_t i, float *buf) {
    lcx_source *s = ctx;
    const lcx_param_spec *p = &m->tab.params[i];
    LCX_FAIL_IF(strcmp(s->params.params[i].name, p->name) != 0 || !lcx_shape_equal(&s->params.params[i].shape, &p->shape),
                LCX_ERR_INVALID, "%s: tensor '%s' does not match the model", s->path, p->name);
    LCX_TRY(lcx_source_read_f32(s, i, buf));
    lcx_source_release(s); /* an .lcx: one tensor's pages resident at a time */
    return LCX_OK;
}

lcx_status lcx_model_load_source(lcx_model *m, lcx_source *s) {
    LCX_TRY(lcx_source_need_model(s, "building a model"));
    LCX_FAIL_IF(s->params.n != m->tab.n, LCX_ERR_INVALID, "%s: checkpoint has %zu parameters, model %zu", s->path,
                s->params.n, m->tab.n);
    return set_all_params(m, "model load", source_values, s);
}

lcx_status lcx_model_from_source(lcx_source *s, const lcx_model_opts *opts, lcx_model **out) {
    *out = NULL;
    LCX_FAIL_IF(!s->has_config, LCX_ERR_INVALID, "%s: no %s: cannot build a model", s->path,
                s->form == LCX_SOURCE_LCX ? "model config in the manifest" : "config.json beside the tensors");
    LCX_TRY(lcx_model_init(out, &s->cfg, opts));
    lcx_status st = lcx_model_load_source(*out, s);
    if (st != LCX_OK) {
        lcx_model_free(*out);
        *out = NULL;
    }
    return st;
}

lcx_status lcx_model_from_checkpoint(const char *path, const lcx_model_opts *opts, lcx_model **out) {
    lcx_source *s = NULL;
    *out = NULL;
    LCX_TRY(lcx_source_open(path, 0, &s));
    lcx_status st = lcx_model_from_source(s, opts, out);
    lcx_source_close(s);
    return st;
}

/* ---- accessors ----------------------------------------------------------------------------------------------- */
const lcx_param_table *lcx_model_params(const lcx_model *m) { return &m->tab; }
const lcx_model_config *lcx_model_config_of(const lcx_model *m) { return &m->cfg; }
lcx_dtype lcx_model_param_dtype(const lcx_model *m) { return m->pdt; }
lcx_comm *lcx_model_cp_comm(const lcx_model *m) { return m->cp; }

lcx_status lcx_model_get_param(const lcx_model *m, size_t i, float *dst) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    size_t n = lcx_m_numel(m, i);
    if (m->pdt == LCX_F32) return m->be->copy_d2h(m->x, dst, lcx_m_param(m, (int64_t)i), n * 4);
    uint16_t *tmp = malloc(n * 2 + 1);
    LCX_FAIL_IF(!tmp, LCX_ERR_OOM, "model: out of memory");
    lcx_status st = m->be->copy_d2h(m->x, tmp, lcx_m_param(m, (int64_t)i), n * 2);
    if (st == LCX_OK) st = lcx_convert_to_f32(LCX_BF16, tmp, dst, n);
    free(tmp);
    return st;
}

lcx_status lcx_model_get_master(const lcx_model *m, size_t i, float *dst) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    if (!m->master) return lcx_model_get_param(m, i, dst); /* bf16 inference: the stored value is all there is */
    LCX_FAIL_IF(m->master_sharded, LCX_ERR_INVALID,
                "model: the master weights are sharded over the ZeRO-1 group: lcx_model_get_master_rows");
    return m->be->copy_d2h(m->x, dst, m->master + m->off[i], lcx_m_numel(m, i) * 4);
}

lcx_status lcx_model_get_grad(const lcx_model *m, size_t i, float *dst) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    LCX_FAIL_IF(!m->grads, LCX_ERR_INVALID, "model: not built for training (no gradients)");
    return m->be->copy_d2h(m->x, dst, m->grads + m->off[i], lcx_m_numel(m, i) * 4);
}

lcx_status lcx_model_set_grad(lcx_model *m, size_t i, const float *src) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    LCX_FAIL_IF(!m->grads, LCX_ERR_INVALID, "model: not built for training (no gradients)");
    return m->be->copy_h2d(m->x, m->grads + m->off[i], src, lcx_m_numel(m, i) * 4);
}

lcx_status lcx_model_set_loss_chunk(lcx_model *m, int64_t rows) {
    LCX_FAIL_IF(rows < 1 || rows > m->loss_chunk_cap, LCX_ERR_INVALID,
                "model: loss chunk %lld outside [1, %lld] (the capacity given at init)", (long long)rows,
                (long long)m->loss_chunk_cap);
    m->loss_chunk = rows;
    return LCX_OK;
}

lcx_model_memory lcx_model_memory_of(const lcx_model *m) {
    lcx_model_memory r;
    r.params = (size_t)m->n_elems * (m->pdt == LCX_BF16 ? 2 : 4);
    r.master = (m->pdt == LCX_BF16 && m->master ? (size_t)(m->master_sharded ? m->n_moment_elems : m->n_elems) * 4
                                                 : 0) +
               (size_t)m->n_norm_elems * 4 * (m->pdt == LCX_BF16); /* master (ZeRO-1: its rows) + f32 norm copies */
    r.grads = m->grads ? (size_t)m->n_elems * 4 : 0;
    r.moments = m->adam_m ? (size_t)m->n_moment_elems * 8 : 0; /* ZeRO-1: this rank's rows */
    r.acts = m->acts_bytes;
    r.offload_device = m->offl.n ? m->offl.slot_bytes * (size_t)m->offl.n_slots : 0;
    r.offload_host = m->offl.host_bytes;
    r.tp_scratch = m->tp_bytes;
    r.cp_ring = m->ring_bytes;
    r.grad_scratch = (m->zbuf_a ? (size_t)m->zbuf_elems * 2 * sizeof(float) : 0) + (size_t)m->gsum_elems * 4;
    return r;
}

const lcx_backend *lcx_model_backend(const lcx_model *m) { return m->be; }

lcx_status lcx_model_zero_grads(lcx_model *m) {
    LCX_FAIL_IF(!m->grads, LCX_ERR_INVALID, "model: not built for training (no gradients)");
    return m->be->zero(m->x, m->grads, (size_t)m->n_elems * 4);
}

/* ---- peak RSS ------------------------------------------------------------------------------------------------ */
uint64_t lcx_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtoull(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

int lcx_peak_rss_reset(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0) return 0;
    int ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}
