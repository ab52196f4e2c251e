/* model_offload: the offload and recompute+offload policies. The stored tensors of an offloaded layer live in a
 * slot of a small device pool while the layer runs, are copied to the layer's host buffer right after its
 * forward, and are fetched back `depth` layers ahead of its backward (docs/model.md "Activation policy (per
 * layer)"). Copies run on a copy queue ordered against the compute queue by events only, in the order a GPU copy
 * stream needs; on the CPU backend the queues are synchronous, so the schedule, the ordering and the memory
 * accounting run as they would, with nothing to overlap. */
#include <stdlib.h>
#include <string.h>

#include "src/model/model_internal.h"

/* Lay out layer l's stored tensors from base (NULL: sizing only); returns their bytes. Offload: the layer input
 * and every tensor keep stores; recompute+offload: the layer input, attention output and LSE (the rest stays in
 * the shared recompute scratch layout_acts pointed it at), of the input only this TP rank's rows when the layer
 * is distributed (it then runs on the shared x_full). */
static size_t bind(lcx_model *m, int l, char *base) {
    lcx_cursor c = {base, 0, 0};
    lcx_layer_acts *a = &m->layer[l];
    const int64_t T = m->max_tokens;
    const size_t as = lcx_act_size(m->adt);
    if (lcx_m_distributes(m, l)) {
        a->x_part = lcx_cursor_take(&c, lcx_m_part_rows(m, T) * m->H, as);
        a->x_in = m->x_full;
    } else {
        a->x_in = lcx_cursor_take(&c, lcx_m_rows(m, T) * m->H, as);
    }
    if (m->policy[l] == LCX_ACT_OFFLOAD) lcx_layer_take_full(m, &c, a, T, T);
    a->o = lcx_cursor_take(&c, T * m->Q, as);
    a->lse = (float *)lcx_cursor_take(&c, T * m->nh, sizeof(float));
    m->resid[l] = a->x_in;
    return c.overflow ? 0 : c.used;
}

lcx_status lcx_offload_init(lcx_model *m, int depth) {
    lcx_offload *o = &m->offl;
    LCX_FAIL_IF(depth < 0, LCX_ERR_INVALID, "model: offload prefetch depth %d < 0", depth);
    o->depth = depth ? depth : 1;
    for (int l = 0; l < m->L; l++) o->n += lcx_act_offloads(m->policy[l]);
    if (!o->n || !m->training) {
        o->n = 0;
        return LCX_OK;
    }
    LCX_FAIL_IF(o->depth > m->L, LCX_ERR_INVALID, "model: offload prefetch depth %d exceeds the %lld layers",
                o->depth, (long long)m->L);
    o->n_slots = o->depth + 2;
    o->bytes = calloc((size_t)m->L, sizeof *o->bytes);
    o->host = calloc((size_t)m->L, sizeof *o->host);
    o->slot_of = malloc((size_t)m->L * sizeof *o->slot_of);
    o->holder = malloc((size_t)o->n_slots * sizeof *o->holder);
    o->freed_at = calloc((size_t)o->n_slots, sizeof *o->freed_at);
    o->ready_ev = calloc((size_t)o->n_slots, sizeof *o->ready_ev);
    o->free_ev = calloc((size_t)o->n_slots, sizeof *o->free_ev);
    LCX_FAIL_IF(!o->bytes || !o->host || !o->slot_of || !o->holder || !o->freed_at || !o->ready_ev || !o->free_ev,
                LCX_ERR_OOM, "model: out of memory");
    for (int l = 0; l < m->L; l++) {
        if (!lcx_act_offloads(m->policy[l])) continue;
        o->bytes[l] = bind(m, l, NULL);
        LCX_FAIL_IF(!o->bytes[l], LCX_ERR_OOM, "model: layer %d's offloaded activations are too large", l);
        if (o->bytes[l] > o->slot_bytes) o->slot_bytes = o->bytes[l];
        LCX_FAIL_IF(!lcx_add_size(o->host_bytes, o->bytes[l], &o->host_bytes), LCX_ERR_OOM,
                    "model: the offload host pool is too large");
    }
    size_t dev_bytes;
    LCX_FAIL_IF(!lcx_mul_size(o->slot_bytes, (size_t)o->n_slots, &dev_bytes), LCX_ERR_OOM,
                "model: the offload device pool is too large");
    lcx_status st = m->be->alloc(dev_bytes, &o->dev);
    if (st != LCX_OK) return lcx_fail_context(st, "model offload device pool: ");
    /* the host pool: pinned host memory on a GPU backend (its copies then overlap compute); on the CPU an ordinary
     * allocation, accounted apart */
    st = m->be->host_alloc(o->host_bytes, (void **)&o->host_mem);
    if (st != LCX_OK) return lcx_fail_context(st, "model offload host pool: ");
    size_t at = 0;
    for (int l = 0; l < m->L; l++)
        if (o->bytes[l]) o->host[l] = o->host_mem + at, at += o->bytes[l];
    LCX_TRY(lcx_exec_create(m->be, &o->xc));
    for (int s = 0; s < o->n_slots; s++) {
        LCX_TRY(m->be->event_create(&o->ready_ev[s], 0));
        LCX_TRY(m->be->event_create(&o->free_ev[s], 0));
    }
    return lcx_offload_begin(m);
}

void lcx_offload_free(lcx_model *m) {
    lcx_offload *o = &m->offl;
    if (o->xc) {
        (void)o->xc->be->sync(o->xc);
        lcx_exec_free(o->xc);
    }
    for (int s = 0; s < o->n_slots; s++) {
        if (o->ready_ev) m->be->event_free(o->ready_ev[s]);
        if (o->free_ev) m->be->event_free(o->free_ev[s]);
    }
    for (int k = 0; k < o->cap_marks; k++) {
        m->be->event_free(o->wait_beg[k]);
        m->be->event_free(o->wait_end[k]);
    }
    if (o->dev) m->be->free(o->dev);
    m->be->host_free(o->host_mem); /* the copy queue was synchronised above */
    free(o->bytes), free(o->host), free(o->slot_of), free(o->holder), free(o->freed_at);
    free(o->ready_ev), free(o->free_ev), free(o->wait_beg), free(o->wait_end);
    memset(o, 0, sizeof *o);
}

/* Take the least recently released free slot for layer l, for work on queue q (which first waits until the
 * slot's last user is done), and point the layer's tensors into it. */
static lcx_status take_slot(lcx_model *m, int l, lcx_exec *q) {
    lcx_offload *o = &m->offl;
    int best = -1;
    for (int s = 0; s < o->n_slots; s++)
        if (o->holder[s] < 0 && (best < 0 || o->freed_at[s] < o->freed_at[best])) best = s;
    LCX_FAIL_IF(best < 0, LCX_ERR_INVALID, "model offload: no free device slot for layer %d (%d slots)", l,
                o->n_slots);
    LCX_TRY(m->be->event_wait(q, o->free_ev[best]));
    o->holder[best] = l, o->slot_of[l] = best;
    bind(m, l, (char *)o->dev + (size_t)best * o->slot_bytes);
    o->dev_used += o->bytes[l];
    if (o->dev_used > o->dev_hwm) o->dev_hwm = o->dev_used;
    return LCX_OK;
}

/* Give layer l's slot back; free_ev must have been recorded by its last user. */
static void give_slot(lcx_model *m, int l) {
    lcx_offload *o = &m->offl;
    int s = o->slot_of[l];
    o->holder[s] = -1, o->slot_of[l] = -1;
    o->freed_at[s] = ++o->tick;
    o->dev_used -= o->bytes[l];
}

lcx_status lcx_offload_begin(lcx_model *m) {
    lcx_offload *o = &m->offl;
    if (!o->n) return LCX_OK;
    for (int s = 0; s < o->n_slots; s++) o->holder[s] = -1;
    for (int l = 0; l < m->L; l++) o->slot_of[l] = -1;
    o->dev_used = o->host_used = 0;
    return o->bytes[0] ? take_slot(m, 0, m->x) : LCX_OK;
}

lcx_status lcx_offload_fwd_pre(lcx_model *m, int l) {
    lcx_offload *o = &m->offl;
    if (!o->n || l + 1 >= m->L || !o->bytes[l + 1]) return LCX_OK;
    return take_slot(m, l + 1, m->x);
}

lcx_status lcx_offload_fwd_post(lcx_model *m, int l, int store) {
    lcx_offload *o = &m->offl;
    if (!o->n || !o->bytes[l]) return LCX_OK;
    const int s = o->slot_of[l];
    if (store) {
        /* the copy queue waits for the layer's forward, copies the slot out, and the slot is free once the copy
         * is (the compute queue's next user of the slot waits for free_ev) */
        LCX_TRY(m->be->event_record(m->x, o->ready_ev[s]));
        LCX_TRY(m->be->event_wait(o->xc, o->ready_ev[s]));
        LCX_TRY(m->be->copy_d2h_async(o->xc, o->host[l], (char *)o->dev + (size_t)s * o->slot_bytes, o->bytes[l]));
        LCX_TRY(m->be->event_record(o->xc, o->free_ev[s]));
        o->host_used += o->bytes[l];
        if (o->host_used > o->host_hwm) o->host_hwm = o->host_used;
    } else {
        LCX_TRY(m->be->event_record(m->x, o->free_ev[s]));
    }
    give_slot(m, l);
    return LCX_OK;
}

/* The next pair of timed marks, grown by one when the step has used them all. */
static lcx_status next_marks(lcx_model *m, lcx_event **beg, lcx_event **end) {
    lcx_offload *o = &m->offl;
    if (o->n_marks == o->cap_marks) {
        const size_t n = (size_t)o->cap_marks + 1;
        lcx_event **b = realloc(o->wait_beg, n * sizeof *b);
        if (b) o->wait_beg = b;
        lcx_event **e = b ? realloc(o->wait_end, n * sizeof *e) : NULL;
        if (e) o->wait_end = e;
        LCX_FAIL_IF(!b || !e, LCX_ERR_OOM, "model offload: out of memory");
        o->wait_beg[o->cap_marks] = o->wait_end[o->cap_marks] = NULL;
        o->cap_marks++; /* counted now: lcx_offload_free frees what was created */
        LCX_TRY(m->be->event_create(&o->wait_beg[o->cap_marks - 1], LCX_EVENT_TIMED));
        LCX_TRY(m->be->event_create(&o->wait_end[o->cap_marks - 1], LCX_EVENT_TIMED));
    }
    *beg = o->wait_beg[o->n_marks], *end = o->wait_end[o->n_marks];
    o->n_marks++;
    return LCX_OK;
}

lcx_status lcx_offload_bwd_pre(lcx_model *m, int l) {
    lcx_offload *o = &m->offl;
    if (!o->n) return LCX_OK;
    for (int j = l; j >= 0 && j >= l - o->depth; j--) {
        if (!o->bytes[j] || o->slot_of[j] >= 0) continue;
        LCX_TRY(take_slot(m, j, o->xc));
        const int s = o->slot_of[j];
        LCX_TRY(m->be->copy_h2d_async(o->xc, (char *)o->dev + (size_t)s * o->slot_bytes, o->host[j], o->bytes[j]));
        LCX_TRY(m->be->event_record(o->xc, o->ready_ev[s]));
        o->host_used -= o->bytes[j];
    }
    if (!o->bytes[l]) return LCX_OK;
    lcx_event *beg = NULL, *end = NULL;
    LCX_TRY(next_marks(m, &beg, &end));
    LCX_TRY(m->be->event_record(m->x, beg));
    LCX_TRY(m->be->event_wait(m->x, o->ready_ev[o->slot_of[l]]));
    return m->be->event_record(m->x, end);
}

lcx_status lcx_offload_wait_collect(lcx_model *m) {
    lcx_offload *o = &m->offl;
    if (!o->n_marks) return LCX_OK;
    /* every mark is on the compute queue: once the last is complete, all are */
    LCX_TRY(m->be->event_sync(o->wait_end[o->n_marks - 1]));
    for (int k = 0; k < o->n_marks; k++) {
        double s = 0;
        LCX_TRY(m->be->event_elapsed(o->wait_beg[k], o->wait_end[k], &s));
        o->wait_s += s;
    }
    o->n_marks = 0;
    return LCX_OK;
}

lcx_status lcx_offload_bwd_post(lcx_model *m, int l) {
    lcx_offload *o = &m->offl;
    if (!o->n || !o->bytes[l]) return LCX_OK;
    LCX_TRY(m->be->event_record(m->x, o->free_ev[o->slot_of[l]]));
    give_slot(m, l);
    return LCX_OK;
}

lcx_offload_stats lcx_model_offload_stats(const lcx_model *m) {
    const lcx_offload *o = &m->offl;
    lcx_offload_stats r = {o->n, o->depth, o->n_slots, o->slot_bytes, o->dev_used, o->dev_hwm, o->host_used,
                           o->host_hwm, o->wait_s};
    return r;
}

void lcx_model_offload_reset(lcx_model *m) {
    lcx_offload *o = &m->offl;
    o->dev_hwm = o->dev_used, o->host_hwm = o->host_used, o->wait_s = 0;
}
