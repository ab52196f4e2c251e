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

lcx_status lcx_model_set_state(lcx_model *m, size_t i, const float *master, const float *adam_m,
                               const float *adam_v) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    const lcx_param_spec *s = &m->tab.params[i];
    size_t n = lcx_m_numel(m, i);
    uint16_t *p16 = (uint16_t *)lcx_m_param(m, (int64_t)i);
    if (m->master) {
        LCX_TRY(m->be->copy_h2d(m->x, m->master + m->off[i], master, n * sizeof(float)));
        if (m->pdt == LCX_BF16) LCX_TRY(lcx_m_cast(m, m->master + m->off[i], LCX_F32, p16, LCX_BF16, (int64_t)n));
    } else {
        uint16_t *tmp = malloc(n * 2 + 1);
        LCX_FAIL_IF(!tmp, LCX_ERR_OOM, "model: out of memory");
        lcx_status st = lcx_convert_from_f32(LCX_BF16, master, tmp, n);
        if (st == LCX_OK) st = m->be->copy_h2d(m->x, p16, tmp, n * 2);
        free(tmp);
        LCX_TRY(st);
    }
    if (m->pdt == LCX_BF16 && s->role == LCX_ROLE_NORM)
        LCX_TRY(lcx_m_cast(m, p16, LCX_BF16, m->normw + m->norm_off[i], LCX_F32, (int64_t)n));
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
