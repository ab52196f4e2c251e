/* The cached eval adapter (lcx_eval_lm with a KV cache, src/eval/eval_model.h) against the uncached one
 * (lcx_eval_model_score / _argmax, one full forward per call) on the llama_gqa fixture model (vocab 256) with a
 * byte tokenizer: lcx_passkey_eval (log-likelihood with distractors and greedy, several lengths and depths) gives
 * the same accuracies; every call's NLLs agree within TOL relative and every argmax is identical; the cache
 * really served the prompts (tokens computed far fewer than uncached); a window longer than the cache runs
 * uncached; sliding-window perplexity through the cache-less lcx_eval_lm equals lcx_eval_model_score. */
#include <string.h>

#include "model_fixture.h"
#include "src/eval/eval.h"
#include "src/eval/eval_model.h"
#include "test_util.h"
#include "worst_of.h"

static const double TOL = 1e-5;
enum { MAX_CALLS = 512, MAX_ANS = 16 };

/* bytes are tokens (vocab 256); BOS 1 never occurs in the text */
static lcx_status byte_encode(void *ctx, const char *text, size_t len, int32_t *ids, int64_t cap, int64_t *n) {
    (void)ctx;
    for (size_t i = 0; i < len && (int64_t)i < cap; i++) ids[i] = (unsigned char)text[i];
    *n = (int64_t)len;
    return LCX_OK;
}

/* Records what each call returned (NLLs / argmax of the scored tokens) around one of the two adapters. */
typedef struct recorder {
    lcx_eval_score_fn score;
    lcx_eval_argmax_fn argmax;
    void *model;
    int calls;
    int64_t n[MAX_CALLS], tokens;
    double nll[MAX_CALLS][MAX_ANS];
    int32_t next[MAX_CALLS][MAX_ANS];
} recorder;

static lcx_status rec_score(void *u, const int32_t *t, int64_t n, int64_t first, double *nll) {
    recorder *r = u;
    LCX_TRY(r->score(r->model, t, n, first, nll));
    if (r->calls < MAX_CALLS && n - first <= MAX_ANS) {
        r->n[r->calls] = n - first;
        memcpy(r->nll[r->calls], nll, (size_t)(n - first) * sizeof *nll);
    }
    r->calls++;
    r->tokens += n;
    return LCX_OK;
}

static lcx_status rec_argmax(void *u, const int32_t *t, int64_t n, int64_t first, int32_t *next) {
    recorder *r = u;
    LCX_TRY(r->argmax(r->model, t, n, first, next));
    if (r->calls < MAX_CALLS && n - first <= MAX_ANS) {
        r->n[r->calls] = n - first;
        memcpy(r->next[r->calls], next, (size_t)(n - first) * sizeof *next);
    }
    r->calls++;
    r->tokens += n;
    return LCX_OK;
}

static void check_passkey(void) {
    char *dir = fx_path("llama_gqa", "models", "");
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = 420 + 16;
    o.loss_chunk = 7;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    free(dir);
    if (!m) return;
    const int64_t lengths[] = {300, 420};
    const double depths[] = {0.0, 0.5, 1.0};
    lcx_passkey_config pc = {lengths, 2, depths, 3, 2, 3, LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY, 5, 1, NULL, 0, 0, 0};
    lcx_eval_tokenizer tok = {byte_encode, NULL, 1};

    recorder *plain = calloc(1, sizeof *plain), *cached = calloc(1, sizeof *cached);
    lcx_eval_lm lm;
    CHECK_OK(lcx_eval_lm_init(&lm, m, 436));
    *plain = (recorder){lcx_eval_model_score, lcx_eval_model_argmax, m, 0, {0}, 0, {{0}}, {{0}}};
    *cached = (recorder){lcx_eval_lm_score, lcx_eval_lm_argmax, &lm, 0, {0}, 0, {{0}}, {{0}}};
    lcx_passkey_result rp, rc;
    memset(&rp, 0, sizeof rp), memset(&rc, 0, sizeof rc);
    CHECK_OK(lcx_passkey_eval(&pc, &tok, rec_score, rec_argmax, plain, &rp));
    CHECK_OK(lcx_passkey_eval(&pc, &tok, rec_score, rec_argmax, cached, &rc));
    /* 12 prompts; the key, distractors until one beats it (1 to 3), the greedy argmax */
    CHECK_MSG(plain->calls == cached->calls && plain->calls >= 12 * 3 && plain->calls <= MAX_CALLS, "calls %d / %d",
              plain->calls, cached->calls);
    double worst = 0;
    int same_argmax = 1;
    for (int i = 0; i < plain->calls && i < MAX_CALLS; i++) {
        CHECK(plain->n[i] == cached->n[i] && plain->n[i] > 0);
        for (int64_t k = 0; k < plain->n[i]; k++) {
            double a = plain->nll[i][k], b = cached->nll[i][k];
            double e = fabs(a - b) / fmax(fabs(a), 1e-30);
            worst = worst_of(worst, e);
            same_argmax &= plain->next[i][k] == cached->next[i][k];
        }
    }
    CHECK_MSG(worst <= TOL, "cached NLLs differ by %.3g relative", worst);
    CHECK(same_argmax);
    for (int c = 0; c < 6; c++) {
        CHECK(rp.loglik_correct[c] == rc.loglik_correct[c]);
        CHECK(rp.greedy_correct[c] == rc.greedy_correct[c]);
    }
    /* each prompt ran once: per prompt the uncached adapter runs 5 full windows, the cached one about 1 */
    CHECK_MSG(lm.tokens_run * 3 < plain->tokens, "tokens computed: cached %lld, uncached %lld",
              (long long)lm.tokens_run, (long long)plain->tokens);
    CHECK(lm.tokens_run + lm.tokens_reused == cached->tokens);
    printf("passkey (2 lengths x 3 depths x 2 trials, 3 distractors, greedy): same accuracies, NLL rel diff %.2e, "
           "argmax identical; tokens computed %lld cached vs %lld uncached\n",
           worst, (long long)lm.tokens_run, (long long)plain->tokens);
    lcx_passkey_result_free(&rp), lcx_passkey_result_free(&rc);

    /* a window longer than the cache runs uncached (same numbers as the plain adapter, bit for bit) */
    lcx_eval_lm small;
    CHECK_OK(lcx_eval_lm_init(&small, m, 64));
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = (int32_t)((i * 37 + 11) % 256);
    double a[100], b[100];
    CHECK_OK(lcx_eval_model_score(m, ids, 100, 90, a));
    CHECK_OK(lcx_eval_lm_score(&small, ids, 100, 90, b));
    CHECK(memcmp(a, b, 10 * sizeof *a) == 0 && small.tokens_reused == 0);
    /* a window through the cache, then one that shares its first 40 tokens: the cache serves those */
    CHECK_OK(lcx_eval_lm_score(&small, ids, 60, 50, b));
    CHECK_OK(lcx_eval_model_score(m, ids, 60, 50, a));
    for (int k = 0; k < 10; k++) CHECK_REL(a[k], b[k], TOL);
    int32_t other[60];
    memcpy(other, ids, sizeof other);
    other[40] = 7;
    CHECK_OK(lcx_eval_lm_score(&small, other, 60, 50, b));
    CHECK(small.tokens_reused == 40);
    CHECK_OK(lcx_eval_model_score(m, other, 60, 50, a));
    for (int k = 0; k < 10; k++) CHECK_REL(a[k], b[k], TOL);
    lcx_eval_lm_free(&small);
    lcx_eval_lm_free(&lm);
    free(plain), free(cached);

    /* perplexity through a cache-less lcx_eval_lm: the plain scorer's numbers exactly */
    lcx_eval_lm none;
    CHECK_OK(lcx_eval_lm_init(&none, m, 0));
    int32_t doc[400];
    for (int i = 0; i < 400; i++) doc[i] = (int32_t)((i * 91 + 3) % 256);
    lcx_ppl_doc d = {doc, 400};
    const int64_t pl[] = {128};
    lcx_ppl_config ppc = {pl, 1, 64, 1, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
    lcx_ppl_result r1, r2;
    CHECK_OK(lcx_ppl_eval(&ppc, &d, 1, lcx_eval_model_score, m, &r1));
    CHECK_OK(lcx_ppl_eval(&ppc, &d, 1, lcx_eval_lm_score, &none, &r2));
    CHECK(r1.ppl == r2.ppl && r1.tokens == r2.tokens && r1.tokens > 0);
    lcx_eval_lm_free(&none);
    lcx_model_free(m);
}

int main(void) {
    check_passkey();
    return test_summary("test_eval_cache");
}
