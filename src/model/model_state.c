/* model_state: save/restore of master weights, AdamW moments and step (see model_state.h). */
#include "src/model/model_state.h"

#include <stdlib.h>

#include "src/model/model_internal.h"

lcx_status lcx_model_get_moments(const lcx_model *m, size_t i, float *adam_m, float *adam_v) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    LCX_FAIL_IF(!m->adam_m || !m->adam_v, LCX_ERR_INVALID, "model: not built for training (no AdamW moments)");
    uint64_t e0, e1;
    size_t mo;
    lcx_zero_range(m, i, &e0, &e1, &mo); /* this rank's rows (all of them without ZeRO-1) */
    size_t bytes = (size_t)(e1 - e0) * 4;
    LCX_TRY(m->be->copy_d2h(m->x, adam_m, m->adam_m + mo, bytes));
    return m->be->copy_d2h(m->x, adam_v, m->adam_v + mo, bytes);
}

lcx_status lcx_model_master_rows(const lcx_model *m, size_t i, uint64_t *row0, uint64_t *rows) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    if (m->master_sharded) return lcx_model_moment_rows(m, i, row0, rows);
    *row0 = 0;
    *rows = m->slice[i].ndim >= 1 ? m->slice[i].local[0] : 1;
    return LCX_OK;
}

int lcx_model_master_sharded(const lcx_model *m) { return m->master_sharded; }

lcx_status lcx_model_get_master_rows(const lcx_model *m, size_t i, float *dst) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    if (!m->master_sharded) return lcx_model_get_master(m, i, dst);
    uint64_t e0, e1;
    const float *mine = lcx_zero_master(m, i, &e0, &e1);
    return e1 > e0 ? m->be->copy_d2h(m->x, dst, mine, (size_t)(e1 - e0) * 4) : LCX_OK;
}

lcx_status lcx_model_set_state(lcx_model *m, size_t i, const float *master, const float *adam_m,
                               const float *adam_v) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    uint16_t *tmp = malloc(lcx_m_numel(m, i) * 2 + 1);
    LCX_FAIL_IF(!tmp, LCX_ERR_OOM, "model: out of memory");
    lcx_status st = lcx_m_set_from_f32(m, i, master, tmp);
    free(tmp);
    LCX_TRY(st);
    if (adam_m || adam_v) {
        LCX_FAIL_IF(!m->adam_m || !m->adam_v, LCX_ERR_INVALID, "model: not built for training (no AdamW moments)");
        uint64_t e0, e1;
        size_t mo;
        lcx_zero_range(m, i, &e0, &e1, &mo);
        size_t nb = (size_t)(e1 - e0) * 4;
        if (adam_m && nb) LCX_TRY(m->be->copy_h2d(m->x, m->adam_m + mo, adam_m, nb));
        if (adam_v && nb) LCX_TRY(m->be->copy_h2d(m->x, m->adam_v + mo, adam_v, nb));
    }
    return LCX_OK;
}

int64_t lcx_model_step_count(const lcx_model *m) { return m->step; }
void lcx_model_set_step_count(lcx_model *m, int64_t step) { m->step = step; }
