/* cpu_embedding: row lookup and its scatter-add backward, restricted to one vocabulary shard. Ids are never
 * validated here (the host does it before upload): an id outside the shard, valid or not, reads and writes
 * nothing (forward: a zero row). */
#include "kernels/cpu/cpu_internal.h"

static lcx_status check(const char *op, const lcx_embedding_args *a) {
    LCX_FAIL_IF(a->n_tokens < 0 || a->n_rows < 0 || a->dim < 0 || a->vocab_start < 0 ||
                    a->vocab_start + a->n_rows > a->n_vocab,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld rows=%lld dim=%lld vocab_start=%lld vocab=%lld", op,
                (long long)a->n_tokens, (long long)a->n_rows, (long long)a->dim, (long long)a->vocab_start,
                (long long)a->n_vocab);
    return lcx_cpu_act_check(a->dt, op);
}

lcx_status lcx_cpu_embedding_fwd(lcx_exec *x, const lcx_embedding_args *a) {
    LCX_CPU_ARGS(x, a, "embedding_fwd");
    LCX_TRY(check("embedding_fwd", a));
    const lcx_dtype w_dtype = a->w_dtype;
    LCX_FAIL_IF(w_dtype != LCX_F32 && w_dtype != LCX_BF16, LCX_ERR_UNSUPPORTED,
                "embedding_fwd: weight dtype %s (use F32 or BF16)", lcx_dtype_name(w_dtype));
    const int64_t n_tokens = a->n_tokens, n_rows = a->n_rows, dim = a->dim, vocab_start = a->vocab_start;
    const int32_t *ids = a->ids;
    const void *weight = a->weight;
    LCX_CPU_NEED(ids, n_tokens, "embedding_fwd");
    LCX_CPU_NEED(a->out, n_tokens * dim, "embedding_fwd");
    LCX_CPU_NEED(weight, n_rows * dim, "embedding_fwd");
    if (a->dt == LCX_F32) {
        float *out = a->out;
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < n_tokens; t++) {
            int64_t r = (int64_t)ids[t] - vocab_start;
            float *o = out + t * dim;
            if (r < 0 || r >= n_rows) {
                for (int64_t d = 0; d < dim; d++) o[d] = 0.0f;
            } else if (w_dtype == LCX_F32) {
                const float *w = (const float *)weight + r * dim;
                for (int64_t d = 0; d < dim; d++) o[d] = w[d];
            } else {
                const uint16_t *w = (const uint16_t *)weight + r * dim;
                for (int64_t d = 0; d < dim; d++) o[d] = lcx_bf16_to_f32(w[d]);
            }
        }
        return LCX_OK;
    }
    uint16_t *out = a->out;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n_tokens; t++) {
        int64_t r = (int64_t)ids[t] - vocab_start;
        uint16_t *o = out + t * dim;
        if (r < 0 || r >= n_rows) {
            for (int64_t d = 0; d < dim; d++) o[d] = 0; /* +0.0 */
        } else if (w_dtype == LCX_F32) {
            const float *w = (const float *)weight + r * dim;
            for (int64_t d = 0; d < dim; d++) o[d] = lcx_f32_to_bf16(w[d]);
        } else {
            const uint16_t *w = (const uint16_t *)weight + r * dim; /* bf16 to bf16: the bits as they are */
            for (int64_t d = 0; d < dim; d++) o[d] = w[d];
        }
    }
    return LCX_OK;
}

/* Column blocks: each thread owns whole columns of dweight and walks the tokens in order, so every element's
 * sum is formed in token order whatever the thread count. */
enum { EMB_COLS = 64 };

lcx_status lcx_cpu_embedding_bwd(lcx_exec *x, const lcx_embedding_args *a) {
    LCX_CPU_ARGS(x, a, "embedding_bwd");
    LCX_TRY(check("embedding_bwd", a));
    const int64_t n_tokens = a->n_tokens, n_rows = a->n_rows, dim = a->dim, vocab_start = a->vocab_start;
    const int32_t *ids = a->ids;
    float *dweight = a->dweight;
    LCX_CPU_NEED(ids, n_tokens, "embedding_bwd");
    LCX_CPU_NEED(a->dout, n_tokens * dim, "embedding_bwd");
    LCX_CPU_NEED(dweight, n_rows * dim, "embedding_bwd");
    const int bf = a->dt == LCX_BF16;
    int64_t n_blocks = (dim + EMB_COLS - 1) / EMB_COLS;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n_blocks; b++) {
        int64_t d0 = b * EMB_COLS, d1 = d0 + EMB_COLS < dim ? d0 + EMB_COLS : dim;
        for (int64_t t = 0; t < n_tokens; t++) {
            int64_t r = (int64_t)ids[t] - vocab_start;
            if (r < 0 || r >= n_rows) continue;
            float *dw = dweight + r * dim;
            if (bf) {
                const uint16_t *g = (const uint16_t *)a->dout + t * dim;
                for (int64_t d = d0; d < d1; d++) dw[d] += lcx_bf16_to_f32(g[d]);
            } else {
                const float *g = (const float *)a->dout + t * dim;
                for (int64_t d = d0; d < d1; d++) dw[d] += g[d];
            }
        }
    }
    return LCX_OK;
}
