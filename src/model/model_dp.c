/* model_dp: fixed-order reductions over the gradient group (src/model/model_dp.h). */
#include "src/model/model_dp.h"

#include <stdlib.h>

lcx_status lcx_group_sum(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, void *buf, int64_t n,
                         uint64_t members, void *scratch) {
    const size_t bytes = (size_t)n * lcx_act_size(dt);
    char *all = scratch;
    LCX_TRY(lcx_comm_all_gather(g, x, buf, all, n, dt));
    /* all + r * bytes is rank r's buf: buf = the first member's, then += the next ones, in rank order */
    int first = 1;
    for (int r = 0; r < g->size; r++) {
        if (r < 64 && !(members >> r & 1)) continue;
        if (first) {
            LCX_TRY(be->copy_d2d(x, buf, all + (size_t)r * bytes, bytes));
        } else {
            lcx_elementwise_args a = {dt, n, 1.0f, buf, all + (size_t)r * bytes, buf};
            LCX_TRY(be->add(x, &a));
        }
        first = 0;
    }
    return LCX_OK;
}

lcx_status lcx_group_reduce_piece(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, const void *src,
                                  int64_t n, int64_t p, void *recv, void *out, int tag) {
    const int size = g->size, me = g->rank;
    const size_t es = lcx_act_size(dt), pb = (size_t)p * es;
    const int64_t mine = lcx_piece_len(n, p, me);
    lcx_comm_request **rq = calloc((size_t)(2 * size), sizeof *rq);
    LCX_FAIL_IF(!rq, LCX_ERR_OOM, "group sum: out of memory");
    lcx_status st = LCX_OK;
    int k = 0;
    for (int q = 0; q < size && st == LCX_OK; q++)
        if (q != me && mine > 0) st = lcx_comm_irecv(g, x, (char *)recv + (size_t)q * pb, mine, dt, q, tag, &rq[k++]);
    for (int q = 0; q < size && st == LCX_OK; q++)
        if (q != me && lcx_piece_len(n, p, q) > 0)
            st = lcx_comm_isend(g, x, (const char *)src + (size_t)q * pb, lcx_piece_len(n, p, q), dt, q, tag,
                                &rq[k++]);
    lcx_status sw = lcx_comm_waitall(g, k, rq); /* every posted request, also after a failure */
    free(rq);
    LCX_TRY(st);
    LCX_TRY(sw);
    for (int q = 0; q < size && mine > 0; q++) {
        const char *part = q == me ? (const char *)src + (size_t)me * pb : (const char *)recv + (size_t)q * pb;
        if (q == 0) {
            LCX_TRY(be->copy_d2d(x, out, part, (size_t)mine * es));
        } else {
            lcx_elementwise_args a = {dt, mine, 1.0f, out, part, out};
            LCX_TRY(be->add(x, &a));
        }
    }
    if (mine < p) LCX_TRY(be->zero(x, (char *)out + (size_t)mine * es, (size_t)(p - mine) * es));
    return LCX_OK;
}

lcx_status lcx_group_sum_all(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, void *buf, int64_t n,
                             void *scratch, int tag) {
    const int64_t p = (n + g->size - 1) / g->size;
    const size_t es = lcx_act_size(dt);
    char *all = scratch, *mine = all + (size_t)(g->size * p) * es; /* [size][p] received, then gathered; [p] */
    LCX_TRY(lcx_group_reduce_piece(g, be, x, dt, buf, n, p, all, mine, tag));
    LCX_TRY(lcx_comm_all_gather(g, x, mine, all, p, dt));
    return be->copy_d2d(x, buf, all, (size_t)n * es);
}

/* The tag of the gradient sums' pieces on the gradient group (nothing else sends point to point there). */
#define DP_TAG 12

lcx_status lcx_dp_sum_f32(lcx_comm *g, const lcx_backend *be, lcx_exec *x, float *buf, int64_t n, int64_t chunk,
                          float *scratch) {
    LCX_FAIL_IF(!g || n < 0 || chunk < 1, LCX_ERR_INVALID, "dp sum: bad arguments (n %lld, chunk %lld)",
                (long long)n, (long long)chunk);
    if (g->size == 1 || n == 0) return LCX_OK;
    int64_t c = n < chunk ? n : chunk;
    float *all = scratch;
    if (!all) LCX_TRY(be->alloc((size_t)lcx_group_sum_all_scratch(g->size, c) * sizeof(float), (void **)&all));
    lcx_status st = LCX_OK;
    for (int64_t o = 0; o < n && st == LCX_OK; o += c) {
        int64_t k = n - o < c ? n - o : c;
        st = lcx_group_sum_all(g, be, x, LCX_F32, buf + o, k, all, DP_TAG);
    }
    lcx_status s2 = be->sync(x); /* the scratch is freed or reused: the queue must have passed it */
    if (st == LCX_OK) st = s2;
    if (!scratch) be->free(all);
    return st;
}

lcx_status lcx_dp_sum_f64(lcx_comm *g, const double *v, int k, int fail, double *out, int *any_failed) {
    LCX_FAIL_IF(!g || k < 0 || k > 14, LCX_ERR_INVALID, "dp sum: bad arguments (k %d)", k);
    double mine[16], *all = malloc((size_t)g->size * 16 * sizeof(double));
    LCX_FAIL_IF(!all, LCX_ERR_OOM, "dp sum: out of memory");
    for (int i = 0; i < k; i++) mine[i] = v[i];
    mine[k] = fail ? 1.0 : 0.0;
    lcx_status st = lcx_comm_all_gather(g, NULL, mine, all, k + 1, LCX_F64);
    if (st == LCX_OK) {
        *any_failed = -1;
        for (int i = 0; i < k; i++) out[i] = 0;
        for (int r = 0; r < g->size; r++) {
            const double *a = all + (int64_t)r * (k + 1);
            if (a[k] != 0 && *any_failed < 0) *any_failed = r;
            for (int i = 0; i < k; i++) out[i] = r == 0 ? a[i] : out[i] + a[i];
        }
    }
    free(all);
    return st;
}
