/* eval_progress: the progress of an evaluation's forward passes (src/eval/eval_progress.h). */
#include "src/eval/eval_progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/clock.h"

void lcx_eval_progress_init(lcx_eval_progress *p, lcx_eval_lm *lm, const lcx_model_config *c, int quiet,
                            double every_s, const lcx_reporter *r) {
    const double H = (double)c->hidden_size, hd = (double)c->head_dim, L = (double)c->num_hidden_layers;
    const double nh = (double)c->num_attention_heads, nkv = (double)c->num_key_value_heads;
    const double matmul = L * (2 * H * nh * hd + 2 * H * nkv * hd + 3 * H * (double)c->intermediate_size) +
                          (double)c->vocab_size * H;
    const double now = lcx_clock_s();
    *p = (lcx_eval_progress){.lm = lm, .quiet = quiet, .per_token = 2 * matmul, .per_key = 4 * L * nh * hd,
                             .start = now, .last = now, .every = every_s > 0 ? every_s : 2.0, .r = r};
}

/* FLOPs of t new tokens at the end of a sequence of n: the causal attention sees n - t/2 keys on average. */
static double pass_cost(const lcx_eval_progress *p, int64_t t, int64_t n) {
    return (double)t * (p->per_token + p->per_key * ((double)n - 0.5 * (double)t));
}

static void restart(lcx_eval_progress *p, const char *what, int64_t total_calls, double total_cost) {
    p->what = what, p->total_calls = total_calls, p->total_cost = total_cost;
    p->calls = p->tokens = 0, p->cost = 0;
    p->start = p->last = lcx_clock_s();
}

/* What a perplexity evaluation will run, without running it: the same walk over the windows with a scorer that
 * only counts (its NLLs are zeros). */
typedef struct pass_count {
    const lcx_eval_progress *p;
    int64_t calls;
    double cost;
} pass_count;

static lcx_status count_cb(void *user, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    pass_count *c = user;
    (void)tokens;
    memset(nll, 0, (size_t)(n - first) * sizeof *nll);
    c->calls++, c->cost += pass_cost(c->p, n, n);
    return LCX_OK;
}

lcx_status lcx_eval_progress_ppl(lcx_eval_progress *p, const lcx_ppl_config *pc, const lcx_ppl_doc *docs,
                                 int64_t n_docs) {
    lcx_ppl_result *tmp = calloc((size_t)pc->n_lengths + 1, sizeof *tmp);
    LCX_FAIL_IF(!tmp, LCX_ERR_OOM, "eval: out of memory");
    pass_count c = {p, 0, 0};
    lcx_status st = lcx_ppl_eval(pc, docs, n_docs, count_cb, &c, tmp);
    free(tmp);
    LCX_TRY(st);
    restart(p, "perplexity", c.calls, c.cost);
    return LCX_OK;
}

/* Per trial the loglik answers (the key, the other needles' keys and the distractors) and the greedy check, each
 * a pass of the prompt's length without a cache; with one, the prompt once and about 8 tokens an answer. */
void lcx_eval_progress_passkey(lcx_eval_progress *p, const lcx_passkey_config *kc) {
    const int needles = kc->needles > 1 ? kc->needles : 1;
    const int64_t per_trial = ((kc->modes & LCX_PASSKEY_LOGLIK) ? needles + kc->distractors : 0) +
                              ((kc->modes & LCX_PASSKEY_GREEDY) ? 1 : 0);
    const int64_t cells = (int64_t)kc->n_depths * kc->trials;
    int64_t calls = 0;
    double cost = 0;
    for (int l = 0; l < kc->n_lengths; l++) {
        int64_t trials = 0, n = kc->lengths[l] + 8;
        for (int64_t item = l * cells; item < (l + 1) * cells; item++) /* this shard's, as lcx_passkey_eval */
            trials += kc->n_shards <= 1 || item % kc->n_shards == kc->shard;
        const int cached = p->lm->cache && n <= lcx_kv_cache_capacity(p->lm->cache);
        const double trial = cached ? pass_cost(p, n, n) + (double)(per_trial - 1) * pass_cost(p, 8, n)
                                    : (double)per_trial * pass_cost(p, n, n);
        calls += trials * per_trial, cost += (double)trials * trial;
    }
    const int exact = !(kc->modes & LCX_PASSKEY_LOGLIK) || needles > 1; /* else the most passes */
    restart(p, "passkey", exact ? calls : 0, cost);
}

/* After a call on n tokens that started with `before` tokens run. */
static void tick(lcx_eval_progress *p, int64_t before, int64_t n) {
    const int64_t t = p->lm->tokens_run - before;
    p->calls++, p->tokens += t, p->cost += pass_cost(p, t, n);
    if (p->quiet) return;
    double now = lcx_clock_s(), el = now - p->start;
    if (now - p->last < p->every) return;
    p->last = now;
    double eta = p->total_cost > 0 && p->cost > 0 ? el * (p->total_cost - p->cost) / p->cost : -1;
    if (p->total_calls > 0 && p->calls >= p->total_calls) eta = -1; /* done (the passkey's costs are estimates) */
    char detail[64];
    snprintf(detail, sizeof detail, "passes (last %lld tokens)", (long long)n);
    lcx_report_progress(p->r, &(lcx_progress){.what = p->what, .done = p->calls, .total = p->total_calls,
                                               .rate = el > 0 ? (double)p->tokens / el : 0, .unit = "tok/s",
                                               .eta_s = eta > 0 ? eta : -1, .detail = detail});
}

lcx_status lcx_eval_progress_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    lcx_eval_progress *p = model;
    const int64_t before = p->lm->tokens_run;
    LCX_TRY(lcx_eval_lm_score(p->lm, tokens, n, first, nll));
    tick(p, before, n);
    return LCX_OK;
}

lcx_status lcx_eval_progress_argmax(void *model, const int32_t *tokens, int64_t n, int64_t first, int32_t *next) {
    lcx_eval_progress *p = model;
    const int64_t before = p->lm->tokens_run;
    LCX_TRY(lcx_eval_lm_argmax(p->lm, tokens, n, first, next));
    tick(p, before, n);
    return LCX_OK;
}
