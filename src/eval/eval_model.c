/* eval_model: lcx_model and lcx_tokenizer behind src/eval's callbacks. */
#include "src/eval/eval_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model.h"
#include "src/tokenizer/tokenizer.h"

typedef struct score_ctx {
    const int32_t *tokens;
    int64_t n, first;
    int64_t row_base; /* added to the row numbers handed out (a cached forward counts from its first new token) */
    double *nll;    /* score: [n - first] */
    int32_t *next;  /* argmax: [n - first] */
} score_ctx;

/* Row r predicts tokens[r + 1]; rows first-1 .. n-2 are wanted. Log-softmax in double, the rows of a chunk
 * spread over the OpenMP team (each row alone: the same results for any thread count); the targets are checked
 * first, so the parallel loop cannot fail. */
static lcx_status on_logits(void *user, int64_t row0, int64_t rows, const float *logits, int64_t V) {
    score_ctx *c = user;
    const int64_t lo = c->first - 1 - c->row_base - row0, hi = c->n - 2 - c->row_base - row0; /* wanted k */
    const int64_t k0 = lo > 0 ? lo : 0, k1 = hi < rows - 1 ? hi : rows - 1;
    if (!c->next)
        for (int64_t k = k0; k <= k1; k++) {
            int64_t r = c->row_base + row0 + k;
            int32_t t = c->tokens[r + 1];
            LCX_FAIL_IF(t < 0 || t >= V, LCX_ERR_INVALID, "token %lld is id %d, outside the vocabulary [0, %lld)",
                        (long long)(r + 1), (int)t, (long long)V);
        }
#pragma omp parallel for schedule(static)
    for (int64_t k = k0; k <= k1; k++) {
        int64_t r = c->row_base + row0 + k;
        const float *x = logits + k * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (x[v] > x[best]) best = v; /* strict: ties keep the smallest id */
        if (c->next) {
            c->next[r + 1 - c->first] = (int32_t)best;
            continue;
        }
        double mx = x[best], s = 0;
        for (int64_t v = 0; v < V; v++) s += exp((double)x[v] - mx);
        c->nll[r + 1 - c->first] = log(s) + mx - (double)x[c->tokens[r + 1]];
    }
    return LCX_OK;
}

static lcx_status run(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll, int32_t *next) {
    LCX_FAIL_IF(!model || !tokens || n < 2 || first < 1 || first >= n, LCX_ERR_INVALID,
                "eval scorer: bad window (n %lld, first %lld)", (long long)n, (long long)first);
    score_ctx c = {tokens, n, first, 0, nll, next};
    lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = tokens};
    return lcx_model_forward_logits(model, &b, first - 1, on_logits, &c);
}

lcx_status lcx_eval_model_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    return run(model, tokens, n, first, nll, NULL);
}

lcx_status lcx_eval_model_argmax(void *model, const int32_t *tokens, int64_t n, int64_t first, int32_t *next) {
    return run(model, tokens, n, first, NULL, next);
}

lcx_status lcx_eval_lm_init(lcx_eval_lm *lm, lcx_model *m, int64_t cache_tokens) {
    LCX_FAIL_IF(!lm || !m || cache_tokens < 0, LCX_ERR_INVALID, "eval model: bad arguments");
    memset(lm, 0, sizeof *lm);
    lm->model = m;
    if (cache_tokens == 0) return LCX_OK;
    LCX_TRY(lcx_kv_cache_init(&lm->cache, m, cache_tokens));
    lm->ids = malloc((size_t)cache_tokens * sizeof *lm->ids);
    if (!lm->ids) {
        lcx_eval_lm_free(lm);
        return lcx_fail(LCX_ERR_OOM, "eval model: out of memory for %lld cached ids", (long long)cache_tokens);
    }
    return LCX_OK;
}

void lcx_eval_lm_free(lcx_eval_lm *lm) {
    if (!lm) return;
    lcx_kv_cache_free(lm->cache);
    free(lm->ids);
    lm->cache = NULL;
    lm->ids = NULL;
}

/* Rows first-1 .. n-2 wanted: reuse the cached prefix (at most first-1 tokens: row first-1 must be computed),
 * run the rest, leave tokens[0..first-1) cached. */
static lcx_status run_lm(lcx_eval_lm *lm, const int32_t *tokens, int64_t n, int64_t first, double *nll,
                         int32_t *next) {
    LCX_FAIL_IF(!lm || !lm->model || !tokens || n < 2 || first < 1 || first >= n, LCX_ERR_INVALID,
                "eval scorer: bad window (n %lld, first %lld)", (long long)n, (long long)first);
    if (!lm->cache || n > lcx_kv_cache_capacity(lm->cache)) {
        lm->tokens_run += n;
        return run(lm->model, tokens, n, first, nll, next);
    }
    lcx_kv_cache *kc = lm->cache;
    int64_t keep = first - 1, p = 0, len = lcx_kv_cache_usable(lm->model, kc, n);
    while (p < len && p < keep && lm->ids[p] == tokens[p]) p++;
    LCX_TRY(lcx_kv_cache_truncate(kc, p));
    score_ctx c = {tokens, n, first, p, nll, next};
    LCX_TRY(lcx_model_forward_cached(lm->model, kc, tokens + p, n - p, keep - p, keep - p, on_logits, &c));
    memcpy(lm->ids + p, tokens + p, (size_t)(keep - p) * sizeof *tokens);
    lm->tokens_run += n - p;
    lm->tokens_reused += p;
    return LCX_OK;
}

lcx_status lcx_eval_lm_score(void *lm, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    return run_lm(lm, tokens, n, first, nll, NULL);
}

lcx_status lcx_eval_lm_argmax(void *lm, const int32_t *tokens, int64_t n, int64_t first, int32_t *next) {
    return run_lm(lm, tokens, n, first, NULL, next);
}

lcx_status lcx_eval_tok_encode(void *tokenizer, const char *text, size_t len, int32_t *ids, int64_t cap,
                               int64_t *n_out) {
    lcx_tok_ids v;
    memset(&v, 0, sizeof v);
    lcx_status st = lcx_tokenizer_encode(tokenizer, text, len, 0, &v);
    if (st == LCX_OK) {
        for (size_t i = 0; i < v.n && (int64_t)i < cap; i++) {
            if (v.ids[i] > INT32_MAX) {
                st = lcx_fail(LCX_ERR_INVALID, "token id %u does not fit int32", (unsigned)v.ids[i]);
                break;
            }
            ids[i] = (int32_t)v.ids[i];
        }
        *n_out = (int64_t)v.n;
    }
    lcx_tok_ids_free(&v);
    return st;
}
