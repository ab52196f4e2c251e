/* eval_model: lcx_model and lcx_tokenizer behind src/eval's callbacks. */
#include "src/eval_model.h"

#include <math.h>
#include <string.h>

#include "src/model.h"
#include "src/tokenizer.h"

typedef struct score_ctx {
    const int32_t *tokens;
    int64_t n, first;
    double *nll;    /* score: [n - first] */
    int32_t *next;  /* argmax: [n - first] */
} score_ctx;

/* Row r predicts tokens[r + 1]; rows first-1 .. n-2 are wanted. Log-softmax in double. */
static lcx_status on_logits(void *user, int64_t row0, int64_t rows, const float *logits, int64_t V) {
    score_ctx *c = user;
    for (int64_t k = 0; k < rows; k++) {
        int64_t r = row0 + k;
        if (r < c->first - 1 || r > c->n - 2) continue;
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
        int32_t t = c->tokens[r + 1];
        LCX_FAIL_IF(t < 0 || t >= V, LCX_ERR_INVALID, "token %lld is id %d, outside the vocabulary [0, %lld)",
                    (long long)(r + 1), (int)t, (long long)V);
        c->nll[r + 1 - c->first] = log(s) + mx - (double)x[t];
    }
    return LCX_OK;
}

static lcx_status run(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll, int32_t *next) {
    LCX_FAIL_IF(!model || !tokens || n < 2 || first < 1 || first >= n, LCX_ERR_INVALID,
                "eval scorer: bad window (n %lld, first %lld)", (long long)n, (long long)first);
    score_ctx c = {tokens, n, first, nll, next};
    lcx_batch b = {1, n, tokens, NULL, NULL};
    return lcx_model_forward_logits(model, &b, first - 1, on_logits, &c);
}

lcx_status lcx_eval_model_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    return run(model, tokens, n, first, nll, NULL);
}

lcx_status lcx_eval_model_argmax(void *model, const int32_t *tokens, int64_t n, int64_t first, int32_t *next) {
    return run(model, tokens, n, first, NULL, next);
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
