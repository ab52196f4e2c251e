/* cpu_embedding: row lookup and its scatter-add backward, restricted to one vocabulary shard. */
#include "cpu_internal.h"

static lcx_status check_ids(const char *op, const int32_t *ids, int64_t n_tokens, int64_t n_vocab) {
    for (int64_t t = 0; t < n_tokens; t++)
        LCX_FAIL_IF(ids[t] < 0 || ids[t] >= n_vocab, LCX_ERR_INVALID,
                    "%s: token %lld has id %d outside the vocabulary [0, %lld)", op, (long long)t, ids[t],
                    (long long)n_vocab);
    return LCX_OK;
}

static lcx_status check_sizes(const char *op, int64_t n_tokens, int64_t n_rows, int64_t dim, int64_t vocab_start,
                              int64_t n_vocab) {
    LCX_FAIL_IF(n_tokens < 0 || n_rows < 0 || dim < 0 || vocab_start < 0 || vocab_start + n_rows > n_vocab,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld rows=%lld dim=%lld vocab_start=%lld vocab=%lld", op,
                (long long)n_tokens, (long long)n_rows, (long long)dim, (long long)vocab_start,
                (long long)n_vocab);
    return LCX_OK;
}

lcx_status lcx_cpu_embedding_fwd(const int32_t *ids, const void *weight, lcx_dtype w_dtype, float *out,
                                 int64_t n_tokens, int64_t n_rows, int64_t dim, int64_t vocab_start,
                                 int64_t n_vocab) {
    LCX_TRY(check_sizes("embedding_fwd", n_tokens, n_rows, dim, vocab_start, n_vocab));
    LCX_FAIL_IF(w_dtype != LCX_F32 && w_dtype != LCX_BF16, LCX_ERR_UNSUPPORTED,
                "embedding_fwd: weight dtype %s (use F32 or BF16)", lcx_dtype_name(w_dtype));
    LCX_CPU_NEED(ids, n_tokens, "embedding_fwd");
    LCX_CPU_NEED(out, n_tokens * dim, "embedding_fwd");
    LCX_CPU_NEED(weight, n_rows * dim, "embedding_fwd");
    LCX_TRY(check_ids("embedding_fwd", ids, n_tokens, n_vocab));
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

/* Column blocks: each thread owns whole columns of dweight and walks the tokens in order, so every element's
 * sum is formed in token order whatever the thread count. */
enum { EMB_COLS = 64 };

lcx_status lcx_cpu_embedding_bwd(const int32_t *ids, const float *dout, float *dweight, int64_t n_tokens,
                                 int64_t n_rows, int64_t dim, int64_t vocab_start, int64_t n_vocab) {
    LCX_TRY(check_sizes("embedding_bwd", n_tokens, n_rows, dim, vocab_start, n_vocab));
    LCX_CPU_NEED(ids, n_tokens, "embedding_bwd");
    LCX_CPU_NEED(dout, n_tokens * dim, "embedding_bwd");
    LCX_CPU_NEED(dweight, n_rows * dim, "embedding_bwd");
    LCX_TRY(check_ids("embedding_bwd", ids, n_tokens, n_vocab));
    int64_t n_blocks = (dim + EMB_COLS - 1) / EMB_COLS;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n_blocks; b++) {
        int64_t d0 = b * EMB_COLS, d1 = d0 + EMB_COLS < dim ? d0 + EMB_COLS : dim;
        for (int64_t t = 0; t < n_tokens; t++) {
            int64_t r = (int64_t)ids[t] - vocab_start;
            if (r < 0 || r >= n_rows) continue;
            float *dw = dweight + r * dim;
            const float *g = dout + t * dim;
            for (int64_t d = d0; d < d1; d++) dw[d] += g[d];
        }
    }
    return LCX_OK;
}
