/* model_dp: fixed-order reductions over the gradient group (src/model/model_dp.h). */
#include "src/model/model_dp.h"

#include <stdlib.h>

lcx_status lcx_group_sum(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, void *buf, int64_t n,
                         uint64_t members, void *scratch) {
    const size_t bytes = (size_t)n * (dt == LCX_F32 ? 4 : 2);
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

lcx_status lcx_dp_sum_f32(lcx_comm *g, const lcx_backend *be, lcx_exec *x, float *buf, int64_t n, int64_t chunk) {
    LCX_FAIL_IF(!g || n < 0 || chunk < 1, LCX_ERR_INVALID, "dp sum: bad arguments (n %lld, chunk %lld)",
                (long long)n, (long long)chunk);
    if (g->size == 1 || n == 0) return LCX_OK;
    int64_t c = n < chunk ? n : chunk, D = g->size;
    float *all = NULL;
    LCX_TRY(be->alloc((size_t)(D * c) * sizeof(float), (void **)&all));
    lcx_status st = LCX_OK;
    for (int64_t o = 0; o < n && st == LCX_OK; o += c) {
        int64_t k = n - o < c ? n - o : c;
        st = lcx_group_sum(g, be, x, LCX_F32, buf + o, k, ~(uint64_t)0, all);
    }
    lcx_status s2 = be->sync(x); /* the scratch is freed below: the queue must have passed it */
    if (st == LCX_OK) st = s2;
    be->free(all);
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
