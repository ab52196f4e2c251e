/* model_exec: the model's execution context. Its exec (created here, or the caller's), the scratch arena sized
 * once for every op call the model makes at its capacity, and the small device buffer where loss sums, counts
 * and the gradient norm accumulate until they are read (once per call or step). */
#include <string.h>

#include "src/model/model_arena.h"
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

/* The arena: the largest workspace over the model's op calls at its capacity (src/model/model_arena.c). */
size_t lcx_model_workspace(const lcx_model *m) {
    lcx_arena_shape s = {.tokens = m->max_tokens, .loss_chunk = m->loss_chunk_cap, .hidden = m->H, .ffn = m->F,
                         .vocab = m->Vl, .heads = m->nh, .kv_heads = m->nkv, .head_dim = m->hd,
                         .rot_dim = m->rope.rot_dim, .n_elems = (int64_t)m->n_elems, .tp = m->tp_size,
                         .training = m->training, .ring = m->cp != NULL, .adt = m->adt, .pdt = m->pdt};
    return lcx_model_arena(m->x, &s);
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
