/* eval_model: lcx_model and lcx_tokenizer behind src/eval's callbacks. */
#include "src/eval/eval_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/core/cp_perm.h"
#include "src/model/model.h"
#include "src/tokenizer/tokenizer.h"

typedef struct score_ctx {
    const int32_t *tokens;
    int64_t n, first;
    int64_t row_base; /* added to the row numbers handed out (a cached forward counts from its first new token) */
    const int32_t *pos; /* under CP: the window row of each local row (their global positions); NULL: row_base + row */
    double *nll;    /* score: [n - first] */
    int32_t *next;  /* argmax: [n - first] */
    int argmax;     /* under CP: argmax (else score) into local */
    double *local;  /* under CP: each local row's result by local row (the NLL, or the argmax id), NaN where none */
} score_ctx;

static int64_t window_row(const score_ctx *c, int64_t local_row) {
    return c->pos ? (int64_t)c->pos[local_row] : c->row_base + local_row;
}

/* Row r predicts tokens[r + 1]; rows first-1 .. n-2 are wanted. Log-softmax in double, the rows of a chunk
 * spread over the OpenMP team (each row alone: the same results for any thread count); the targets are checked
 * first, so the parallel loop cannot fail. */
static lcx_status on_logits(void *user, int64_t row0, int64_t rows, const float *logits, int64_t V) {
    score_ctx *c = user;
    const int argmax = c->local ? c->argmax : c->next != NULL;
    for (int64_t k = 0; k < rows && !argmax; k++) {
        int64_t r = window_row(c, row0 + k);
        if (r < c->first - 1 || r > c->n - 2) continue;
        int32_t t = c->tokens[r + 1];
        LCX_FAIL_IF(t < 0 || t >= V, LCX_ERR_INVALID, "token %lld is id %d, outside the vocabulary [0, %lld)",
                    (long long)(r + 1), (int)t, (long long)V);
    }
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < rows; k++) {
        int64_t r = window_row(c, row0 + k);
        if (r < c->first - 1 || r > c->n - 2) continue;
        const float *x = logits + k * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (x[v] > x[best]) best = v; /* strict: ties keep the smallest id */
        double val = (double)best;
        if (!argmax) {
            double mx = x[best], s = 0;
            for (int64_t v = 0; v < V; v++) s += exp((double)x[v] - mx);
            val = log(s) + mx - (double)x[c->tokens[r + 1]];
        }
        if (c->local) c->local[row0 + k] = val;
        else if (argmax) c->next[r + 1 - c->first] = (int32_t)best;
        else c->nll[r + 1 - c->first] = val;
    }
    return LCX_OK;
}

/* A window over the model's CP group of C ranks: padded to a multiple of 2 C (the pad after every scored row: under
 * the causal mask it changes nothing before it), rank c runs its two chunks (lcx_cp_local_batch) through the ring
 * and scores the rows it holds (a suffix of its local rows: both chunks are in ascending order), then the ranks'
 * row results are all-gathered and put back in window order. Each row is scored by one rank: every rank returns
 * the same bits. */
static lcx_status run_cp(lcx_model *m, lcx_comm *cp, const int32_t *tokens, int64_t n, int64_t first, double *nll,
                         int32_t *next) {
    const int C = cp->size;
    const int64_t loc = lcx_cp_local_len(n, C), np = loc * C;
    int32_t *ids_l = malloc((size_t)(3 * loc) * sizeof *ids_l);
    double *vals = malloc((size_t)(2 * np) * sizeof *vals), *all = vals + np, *mine = NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!ids_l || !vals, LCX_ERR_OOM, done, "eval scorer: out of memory for a %lld-token window",
                  (long long)n);
    int32_t *pos_l = ids_l + loc, *tgt_l = pos_l + loc;
    for (int64_t k = 0; k < loc; k++) tgt_l[k] = LCX_IGNORE_INDEX; /* no loss: the scores come from the logits */
    LCX_TRY_GOTO(lcx_cp_local_window(n, C, cp->rank, tokens, ids_l, pos_l), done);
    mine = vals; /* this rank's rows, [loc] */
    for (int64_t k = 0; k < loc; k++) mine[k] = NAN;
    int64_t k0 = 0;
    while (k0 < loc && pos_l[k0] < first - 1) k0++;
    score_ctx c = {tokens, n, first, 0, pos_l, NULL, NULL, next != NULL, mine};
    lcx_batch b = {.n_seq = 1, .seq_len = loc, .ids = ids_l, .targets = tgt_l, .positions = pos_l, .rope_len = n};
    LCX_TRY_GOTO(lcx_model_forward_logits(m, &b, k0, on_logits, &c), done);
    LCX_TRY_GOTO(lcx_comm_all_gather(cp, NULL, mine, all, loc, LCX_F64), done);
    for (int r = 0; r < C; r++) /* rank r's rows to their window rows, over this rank's own: vals[np] */
        LCX_TRY_GOTO(lcx_cp_gather_rows(np, C, r, all + (int64_t)r * loc, vals, sizeof *vals), done);
    for (int64_t j = first - 1; j <= n - 2; j++) {
        if (next) next[j + 1 - first] = (int32_t)vals[j];
        else nll[j + 1 - first] = vals[j];
    }
done:
    free(ids_l);
    free(vals);
    return st;
}

static lcx_status run(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll, int32_t *next) {
    LCX_FAIL_IF(!model || !tokens || n < 2 || first < 1 || first >= n, LCX_ERR_INVALID,
                "eval scorer: bad window (n %lld, first %lld)", (long long)n, (long long)first);
    lcx_comm *cp = lcx_model_cp_comm(model);
    if (cp && cp->size > 1) return run_cp(model, cp, tokens, n, first, nll, next);
    score_ctx c = {tokens, n, first, 0, NULL, nll, next, 0, NULL};
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

/* Under CP the cache holds one whole prefix or none: tokens[0..first-1) is that prefix (filled through the ring
 * when the cached one differs), the rest a continuation on every rank alike. Too short a prefix, too long a
 * continuation, or a rope whose frequencies at the prefix's length are not the whole window's (the prefill cannot
 * know the window's length) runs uncached. */
static lcx_status run_lm_cp(lcx_eval_lm *lm, const int32_t *tokens, int64_t n, int64_t first, double *nll,
                            int32_t *next) {
    lcx_kv_cache *kc = lm->cache;
    const int64_t keep = first - 1;
    if (keep < 1 || n - keep > lcx_kv_cache_cp_tail(kc) || !lcx_model_rope_same(lm->model, keep, n)) {
        lm->tokens_run += n;
        return run(lm->model, tokens, n, first, nll, next);
    }
    const int64_t len = lcx_kv_cache_usable(lm->model, kc, n);
    if (len == keep && memcmp(lm->ids, tokens, (size_t)keep * sizeof *tokens) == 0) {
        lm->tokens_reused += keep;
    } else {
        LCX_TRY(lcx_kv_cache_truncate(kc, 0));
        LCX_TRY(lcx_model_forward_cached(lm->model, kc, tokens, keep, keep, keep, NULL, NULL));
        memcpy(lm->ids, tokens, (size_t)keep * sizeof *tokens);
        lm->tokens_run += keep;
    }
    score_ctx c = {tokens, n, first, keep, NULL, nll, next, 0, NULL};
    LCX_TRY(lcx_model_forward_cached(lm->model, kc, tokens + keep, n - keep, 0, 0, on_logits, &c));
    lm->tokens_run += n - keep;
    return LCX_OK;
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
    if (lcx_kv_cache_cp_tail(lm->cache) > 0) return run_lm_cp(lm, tokens, n, first, nll, next);
    lcx_kv_cache *kc = lm->cache;
    int64_t keep = first - 1, p = 0, len = lcx_kv_cache_usable(lm->model, kc, n);
    while (p < len && p < keep && lm->ids[p] == tokens[p]) p++;
    LCX_TRY(lcx_kv_cache_truncate(kc, p));
    score_ctx c = {tokens, n, first, p, NULL, nll, next, 0, NULL};
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
