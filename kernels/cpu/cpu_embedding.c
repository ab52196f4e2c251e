/* cpu_embedding: row lookup and its scatter-add backward, restricted to one vocabulary shard. Ids are never
 * validated here (the host does it before upload): an id outside the shard, valid or not, reads and writes
 * nothing (forward: a zero row). */
#include "kernels/cpu/cpu_internal.h"

lcx_status lcx_cpu_embedding_fwd(lcx_exec *x, const lcx_embedding_args *a) {
    (void)x;
    const lcx_dtype w_dtype = a->w_dtype;
    const int64_t n_tokens = a->n_tokens, n_rows = a->n_rows, dim = a->dim, vocab_start = a->vocab_start;
    const int32_t *ids = a->ids;
    const void *weight = a->weight;
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
    (void)x;
    const int64_t n_tokens = a->n_tokens, n_rows = a->n_rows, dim = a->dim, vocab_start = a->vocab_start;
    const int32_t *ids = a->ids;
    float *dweight = a->dweight;
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
