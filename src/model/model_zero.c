/* model_zero: ZeRO-1, the AdamW moments sharded over the gradient group (docs/parallel.md "Data parallelism").
 *
 * Rank r of D holds the moments of rows [r R / D, (r+1) R / D) of every parameter's local buffer (R = dim 0 of
 * its tensor-parallel slice, lcx_model_param_slice; the rows of a 1-D buffer are its elements), so optimizer
 * state pieces are boxes of the global tensor (docs/lcx-format.md "Who writes what"). A step:
 *   1. reduce-scatter: every rank sends each peer that peer's rows of its gradients; each rank adds the D
 *      contributions to its rows in rank order ((g_0 + g_1) + g_2) + ... with the backend's add, exactly the
 *      element-wise additions of lcx_dp_sum_f32, so its rows hold the same bits as the unsharded sum;
 *   2. the squared norm of the summed gradients: each rank's rows (parameter order), then the ranks' sums in rank
 *      order (lcx_dp_sum_f64): the same double on every rank;
 *   3. AdamW on this rank's rows only (model_train.c apply_adamw, through lcx_zero_range). With bf16 parameters the
 *      fp32 master is sharded too: a rank holds only its rows of it (laid out as the moments), as Megatron's
 *      distributed optimizer does, and AdamW writes the bf16 rounding of its rows into the stored parameters;
 *   4. all-gather: every rank sends its updated rows of the stored parameters to every peer (bf16: 2 bytes an
 *      element; f32: the master itself); the norm weights' float32 copies are then refreshed on every rank.
 * The exchanges run over batches of about LCX_ZERO_CHUNK elements: consecutive whole parameters, or a window of
 * a larger parameter's rows (the j-th of n equal parts of every rank's rows), so the scratch, the batch's
 * gradients packed per destination plus D x this rank's rows of it, stays about 2 x LCX_ZERO_CHUNK floats
 * whatever the largest parameter (a vocabulary-sized embedding would otherwise need two copies of itself).
 * Point-to-point messages (isend/irecv) carry the variable row counts; every rank derives every size from the
 * same partition, so no size travels. */
#include <stdlib.h>

#include "src/model/model_dp.h"
#include "src/model/model_internal.h"

static uint64_t zero_chunk = LCX_ZERO_CHUNK; /* lcx_zero_set_chunk: tests split small parameters too */
#define ZERO_TAG_RS 4101
#define ZERO_TAG_AG 4102

static uint64_t rows_of(const lcx_model *m, size_t i) {
    return m->slice[i].ndim >= 1 ? m->slice[i].local[0] : 1;
}
static uint64_t row_len(const lcx_model *m, size_t i) {
    uint64_t r = rows_of(m, i);
    return r ? lcx_m_numel(m, i) / r : 0;
}
/* Rows [*r0, *r1) of parameter i held by rank q of D. */
static void part_of(const lcx_model *m, size_t i, int q, int D, uint64_t *r0, uint64_t *r1) {
    uint64_t R = rows_of(m, i);
    *r0 = R * (uint64_t)q / (uint64_t)D;
    *r1 = R * (uint64_t)(q + 1) / (uint64_t)D;
}
static void part(const lcx_model *m, size_t i, int q, uint64_t *r0, uint64_t *r1) {
    part_of(m, i, q, m->zero_size, r0, r1);
}
static lcx_status scratch_alloc(lcx_model *m);

lcx_status lcx_zero_init(lcx_model *m, lcx_comm *g) {
    m->zrow0 = calloc(m->tab.n, sizeof *m->zrow0);
    m->zrows = calloc(m->tab.n, sizeof *m->zrows);
    m->moff = calloc(m->tab.n, sizeof *m->moff);
    LCX_FAIL_IF(!m->zrow0 || !m->zrows || !m->moff, LCX_ERR_OOM, "model: out of memory");
    if (g && g->size > 1 && m->training) {
        m->zero = g;
        m->zero_size = g->size;
        m->zero_rank = g->rank;
        m->zbuf_chunk = zero_chunk; /* the batches, and so the scratch's size, are fixed at init */
    }
    uint64_t n = 0;
    for (size_t i = 0; i < m->tab.n; i++) {
        if (!m->zero) {
            m->zrow0[i] = 0;
            m->zrows[i] = rows_of(m, i);
            m->moff[i] = m->off[i];
            continue;
        }
        uint64_t r0, r1;
        part(m, i, m->zero_rank, &r0, &r1);
        m->zrow0[i] = r0;
        m->zrows[i] = r1 - r0;
        m->moff[i] = (size_t)n;
        n += ((r1 - r0) * row_len(m, i) + 31) & ~(uint64_t)31; /* 64-byte aligned, as the other families */
    }
    m->n_moment_elems = m->zero ? n : m->n_elems;
    return m->zero ? scratch_alloc(m) : LCX_OK;
}

void lcx_zero_free(lcx_model *m) {
    free(m->zrow0);
    free(m->zrows);
    free(m->moff);
    free(m->zreq);
    if (m->zbuf_a) m->be->free(m->zbuf_a);
    if (m->zbuf_b) m->be->free(m->zbuf_b);
    if (m->gsum) m->be->free(m->gsum);
}

void lcx_zero_range(const lcx_model *m, size_t i, uint64_t *e0, uint64_t *e1, size_t *moff) {
    uint64_t rl = row_len(m, i);
    *e0 = m->zrow0[i] * rl;
    *e1 = (m->zrow0[i] + m->zrows[i]) * rl;
    *moff = m->moff[i];
}

float *lcx_zero_master(const lcx_model *m, size_t i, uint64_t *e0, uint64_t *e1) {
    uint64_t a, b;
    size_t mo;
    lcx_zero_range(m, i, &a, &b, &mo);
    if (e0) *e0 = a;
    if (e1) *e1 = b;
    return m->master_sharded ? m->master + mo : m->master + m->off[i] + a;
}

lcx_status lcx_model_moment_rows(const lcx_model *m, size_t i, uint64_t *row0, uint64_t *rows) {
    LCX_FAIL_IF(i >= m->tab.n, LCX_ERR_INVALID, "model: parameter %zu out of range", i);
    *row0 = m->zrow0[i];
    *rows = m->zrows[i];
    return LCX_OK;
}

int lcx_model_moment_shards(const lcx_model *m) { return m->zero ? m->zero_size : 1; }

void lcx_zero_set_chunk(uint64_t elems) { zero_chunk = elems ? elems : LCX_ZERO_CHUNK; }

/* A batch: parameters [i0, i1), or (n > 1) window j of n of parameter i0's rows, i1 = i0 + 1. */
typedef struct zero_batch {
    size_t i0, i1;
    uint64_t j, n;
} zero_batch;

/* The batch after b (b->i1 = 0: the first): whole parameters while they add up to at most the model's chunk
 * (zero_chunk when it was built) of elements; a larger one alone, in n = ceil(numel / chunk) windows. Returns 0
 * past the last parameter. */
static int batch_next(const lcx_model *m, zero_batch *b) {
    if (b->n > 1 && b->j + 1 < b->n) {
        b->j++;
        return 1;
    }
    size_t i = b->i1, i0 = i;
    if (i >= m->tab.n) return 0;
    uint64_t n = 0, big = lcx_m_numel(m, i);
    const uint64_t chunk = m->zbuf_chunk;
    if (big > chunk) {
        *b = (zero_batch){i, i + 1, 0, (big + chunk - 1) / chunk};
        return 1;
    }
    while (i < m->tab.n && (i == i0 || n + lcx_m_numel(m, i) <= chunk)) n += lcx_m_numel(m, i++);
    *b = (zero_batch){i0, i, 0, 1};
    return 1;
}
/* Rows [*r0, *r1) of parameter i that rank q holds within batch b. */
static void batch_rows(const lcx_model *m, const zero_batch *b, size_t i, int q, uint64_t *r0, uint64_t *r1) {
    uint64_t a, c;
    part(m, i, q, &a, &c);
    *r0 = a + (c - a) * b->j / b->n;
    *r1 = a + (c - a) * (b->j + 1) / b->n;
}
/* Elements rank q holds of batch b. */
static uint64_t batch_elems(const lcx_model *m, const zero_batch *b, int q) {
    uint64_t n = 0;
    for (size_t i = b->i0; i < b->i1; i++) {
        uint64_t r0, r1;
        batch_rows(m, b, i, q, &r0, &r1);
        n += (r1 - r0) * row_len(m, i);
    }
    return n;
}
/* Copy rank q's rows of batch b between buf (each parameter at m->off, esz bytes an element) and packed (back to
 * back). */
static lcx_status pack(lcx_model *m, void *buf, size_t esz, const zero_batch *b, int q, void *packed, int to_packed) {
    uint64_t at = 0;
    for (size_t i = b->i0; i < b->i1; i++) {
        uint64_t r0, r1, rl = row_len(m, i);
        batch_rows(m, b, i, q, &r0, &r1);
        size_t bytes = (size_t)((r1 - r0) * rl) * esz;
        char *p = (char *)buf + (m->off[i] + r0 * rl) * esz, *k = (char *)packed + at * esz;
        if (bytes) LCX_TRY(to_packed ? m->be->copy_d2d(m->x, k, p, bytes) : m->be->copy_d2d(m->x, p, k, bytes));
        at += (r1 - r0) * rl;
    }
    return LCX_OK;
}

/* ZeRO-1's scratch, allocated once (lcx_zero_init) so that the steps do not allocate: zbuf_a holds the batch
 * packed per destination (reduce-scatter) / this rank's rows (gather); zbuf_b D x this rank's rows (reduce-scatter)
 * / the batch packed per source (gather); each the largest of those over the batches. */
static lcx_status scratch_alloc(lcx_model *m) {
    uint64_t mx = 0;
    for (zero_batch b = {0, 0, 0, 1}; batch_next(m, &b);) {
        uint64_t all = 0, mine = batch_elems(m, &b, m->zero_rank);
        for (int q = 0; q < m->zero_size; q++) all += batch_elems(m, &b, q);
        if (all > mx) mx = all;
        if (mine * (uint64_t)m->zero_size > mx) mx = mine * (uint64_t)m->zero_size;
    }
    m->zbuf_elems = mx + 1;
    m->zreq = calloc((size_t)m->zero_size * 2, sizeof *m->zreq);
    LCX_FAIL_IF(!m->zreq, LCX_ERR_OOM, "ZeRO-1: out of memory");
    LCX_TRY(m->be->alloc((size_t)m->zbuf_elems * sizeof(float), (void **)&m->zbuf_a));
    return m->be->alloc((size_t)m->zbuf_elems * sizeof(float), (void **)&m->zbuf_b);
}

/* The end of an exchange: the queue has passed the scratch before the next one refills it. */
static lcx_status exchange_end(lcx_model *m, lcx_status st) {
    lcx_status s2 = m->be->sync(m->x);
    return st == LCX_OK ? s2 : st;
}

static lcx_status rs_batch(lcx_model *m, const zero_batch *bt) {
    const int D = m->zero_size, me = m->zero_rank;
    float *const a = m->zbuf_a, *const b = m->zbuf_b;
    lcx_comm *g = m->zero;
    const uint64_t mine = batch_elems(m, bt, me);
    uint64_t at = 0, my_at = 0;
    for (int q = 0; q < D; q++) { /* a = the gradients' rows of rank 0, then rank 1, ... */
        if (q == me) my_at = at;
        LCX_TRY(pack(m, m->grads, sizeof(float), bt, q, a + at, 1));
        at += batch_elems(m, bt, q);
    }
    LCX_TRY(m->be->sync(m->x));
    int nr = 0;
    lcx_status st = LCX_OK;
    at = 0;
    for (int q = 0; q < D && st == LCX_OK; q++) {
        uint64_t nq = batch_elems(m, bt, q);
        if (q != me && mine)
            st = lcx_comm_irecv(g, m->x, b + (uint64_t)q * mine, (int64_t)mine, LCX_F32, q, ZERO_TAG_RS,
                                &m->zreq[nr++]);
        if (st == LCX_OK && q != me && nq)
            st = lcx_comm_isend(g, m->x, a + at, (int64_t)nq, LCX_F32, q, ZERO_TAG_RS, &m->zreq[nr++]);
        at += nq;
    }
    lcx_status sw = lcx_comm_waitall(g, nr, m->zreq);
    if (st == LCX_OK) st = sw;
    LCX_TRY(st);
    if (!mine) return LCX_OK;
    /* b[q] = rank q's contribution to this rank's rows; sum in rank order into b[0], as lcx_dp_sum_f32 does */
    if (me == 0) LCX_TRY(m->be->copy_d2d(m->x, b, a + my_at, (size_t)mine * sizeof(float)));
    for (int q = 1; q < D; q++) {
        const float *src = q == me ? a + my_at : b + (uint64_t)q * mine;
        lcx_elementwise_args e = {LCX_F32, (int64_t)mine, 1.0f, b, src, b};
        LCX_TRY(m->be->add(m->x, &e));
    }
    return pack(m, m->grads, sizeof(float), bt, me, b, 0);
}

lcx_status lcx_zero_reduce_scatter(lcx_model *m) {
    LCX_FAIL_IF(!m->zero, LCX_ERR_INVALID, "ZeRO-1: the model was built without opts.zero_comm");
    lcx_status st = LCX_OK;
    for (zero_batch b = {0, 0, 0, 1}; st == LCX_OK && batch_next(m, &b);) st = rs_batch(m, &b);
    if (st != LCX_OK) st = lcx_fail_context(st, "ZeRO-1 reduce-scatter (rank %d of %d): ", m->zero_rank, m->zero_size);
    return exchange_end(m, st);
}

/* model_internal.h */
lcx_status lcx_rows_sqnorm_queue(lcx_model *m, int q, int D) {
    LCX_TRY(m->be->zero(m->x, &m->d_res->grad_sq, sizeof(double)));
    for (size_t i = 0; i < m->tab.n; i++) {
        uint64_t r0, r1, rl = row_len(m, i);
        part_of(m, i, q, D, &r0, &r1);
        /* TP: a box held by several TP ranks counts once, by its first replica (lcx_tp_sum_host adds the shares) */
        if (r1 == r0 || (m->tp_size > 1 && m->slice[i].replica_index != 0)) continue;
        lcx_sqnorm_args a = {(int64_t)((r1 - r0) * rl), m->grads + m->off[i] + r0 * rl, &m->d_res->grad_sq};
        LCX_TRY(m->be->sqnorm(m->x, &a));
    }
    return LCX_OK;
}

/* The squared norm of rank q of D's rows of every gradient, read back. */
static lcx_status rows_sqnorm(lcx_model *m, int q, int D, double *out) {
    LCX_TRY(lcx_rows_sqnorm_queue(m, q, D));
    return m->be->copy_d2h(m->x, out, &m->d_res->grad_sq, sizeof *out);
}

lcx_status lcx_zero_group_sqnorm(lcx_model *m, int D, double *sq) {
    for (int q = 0; q < D; q++) {
        double s = 0;
        LCX_TRY(rows_sqnorm(m, q, D, &s));
        *sq = q == 0 ? s : *sq + s;
    }
    return LCX_OK;
}

lcx_status lcx_zero_sqnorm(lcx_model *m, double *sq) {
    double mine = 0;
    LCX_TRY(rows_sqnorm(m, m->zero_rank, m->zero_size, &mine));
    int failed = -1; /* every rank reached here: no failure flag to carry */
    return lcx_dp_sum_f64(m->zero, &mine, 1, 0, sq, &failed); /* rank order: the same double on every rank */
}

/* The stored parameters' rows of batch bt from every rank to every rank (bf16: 2 bytes an element). */
static lcx_status ag_batch(lcx_model *m, const zero_batch *bt) {
    const int D = m->zero_size, me = m->zero_rank;
    const size_t esz = m->pdt == LCX_BF16 ? 2 : 4;
    lcx_comm *g = m->zero;
    const uint64_t mine = batch_elems(m, bt, me);
    float *const a = m->zbuf_a;
    char *const b = (char *)m->zbuf_b;
    LCX_TRY(pack(m, m->params, esz, bt, me, a, 1));
    LCX_TRY(m->be->sync(m->x));
    int nr = 0;
    lcx_status st = LCX_OK;
    uint64_t at = 0;
    for (int q = 0; q < D && st == LCX_OK; q++) {
        uint64_t nq = batch_elems(m, bt, q);
        if (q != me && nq)
            st = lcx_comm_irecv(g, m->x, b + at * esz, (int64_t)nq, m->pdt, q, ZERO_TAG_AG, &m->zreq[nr++]);
        if (st == LCX_OK && q != me && mine)
            st = lcx_comm_isend(g, m->x, a, (int64_t)mine, m->pdt, q, ZERO_TAG_AG, &m->zreq[nr++]);
        at += nq;
    }
    lcx_status sw = lcx_comm_waitall(g, nr, m->zreq);
    if (st == LCX_OK) st = sw;
    LCX_TRY(st);
    at = 0;
    for (int q = 0; q < D; q++) {
        if (q != me) LCX_TRY(pack(m, m->params, esz, bt, q, b + at * esz, 0));
        at += batch_elems(m, bt, q);
    }
    return LCX_OK;
}

lcx_status lcx_zero_all_gather(lcx_model *m) {
    LCX_FAIL_IF(!m->zero, LCX_ERR_INVALID, "ZeRO-1: the model was built without opts.zero_comm");
    lcx_status st = LCX_OK;
    for (zero_batch b = {0, 0, 0, 1}; st == LCX_OK && batch_next(m, &b);) st = ag_batch(m, &b);
    if (st != LCX_OK) st = lcx_fail_context(st, "ZeRO-1 all-gather (rank %d of %d): ", m->zero_rank, m->zero_size);
    LCX_TRY(exchange_end(m, st));
    if (m->pdt != LCX_BF16) return LCX_OK; /* f32: the master is the stored parameter */
    /* bf16: every rank's rows hold what its AdamW rounded from its master rows; the norms' float32 copies */
    for (size_t i = 0; i < m->tab.n; i++)
        if (m->tab.params[i].role == LCX_ROLE_NORM)
            LCX_TRY(lcx_m_cast(m, lcx_m_param(m, (int64_t)i), LCX_BF16, m->normw + m->norm_off[i], LCX_F32,
                               (int64_t)lcx_m_numel(m, i)));
    return m->be->sync(m->x);
}
