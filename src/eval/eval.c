/* eval: perplexity by context length with the sliding-window protocol of Hugging Face's "Perplexity of
 * fixed-length models" guide as used by the YaRN eval script (docs/evaluation-protocol.md). */
#include "src/eval/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether work item k (a window, or a document's one pass) is this shard's (lcx_ppl_config.shard). */
static int mine(const lcx_ppl_config *cfg, int64_t k) { return cfg->n_shards <= 1 || k % cfg->n_shards == cfg->shard; }

void lcx_ppl_result_finish(lcx_ppl_result *r) {
    r->mean_nll = r->tokens ? r->nll_sum / (double)r->tokens : NAN;
    r->ppl = exp(r->mean_nll);
    r->window_mean_nll = r->windows ? r->window_nll_sum / (double)r->windows : NAN;
    r->ppl_window_mean = exp(r->window_mean_nll);
}

/* Score one document at one length; accumulates into r. buf holds Lw tokens, nll Lw doubles. *item counts the
 * windows of the whole evaluation (the shards' index). */
static lcx_status ppl_doc(const lcx_ppl_config *cfg, const lcx_ppl_doc *doc, int64_t doc_idx, int64_t lw,
                          int64_t text_len, int64_t stride, lcx_eval_score_fn score, void *model, int32_t *buf,
                          double *nll, lcx_ppl_result *r, int64_t *item) {
    const int bos = cfg->bos_id >= 0;
    const int64_t n = cfg->truncate && doc->n > text_len ? text_len : doc->n;
    int64_t prev_end = 0; /* document tokens [0, prev_end) are scored (or unscorable) already */
    for (int64_t begin = 0; begin < n; begin += stride) {
        int64_t end = begin + text_len < n ? begin + text_len : n;
        int64_t wn = end - begin + bos; /* window length in model positions */
        LCX_ASSERT(wn <= lw && prev_end >= begin);
        if (bos) buf[0] = cfg->bos_id;
        memcpy(buf + bos, doc->tokens + begin, (size_t)(end - begin) * sizeof(int32_t));
        /* Targets are document tokens [prev_end, end), i.e. window positions from prev_end - begin + bos; position
         * 0 has no context, so without BOS the first token of a window that starts at prev_end is unscored. */
        int64_t first = prev_end - begin + bos;
        if (first < 1) first = 1;
        if (first < wn && mine(cfg, (*item)++)) {
            lcx_status st = score(model, buf, wn, first, nll);
            if (st != LCX_OK)
                return lcx_fail_context(st, "ppl length %lld, document %lld, window at token %lld: ",
                                        (long long)lw, (long long)doc_idx, (long long)begin);
            double s = 0.0;
            for (int64_t i = 0; i < wn - first; i++) s += nll[i];
            r->nll_sum += s;
            r->tokens += wn - first;
            r->windows++;
            r->window_nll_sum += s / (double)(wn - first);
        }
        prev_end = end;
        if (end == n) break;
    }
    return LCX_OK;
}

/* truncate + one_pass: one pass over the first min(n, longest) tokens of each document, and each length's first
 * window read from it: positions [1, min(n, T) + BOS) of that pass are the window's scores. */
static lcx_status ppl_one_pass(const lcx_ppl_config *cfg, const lcx_ppl_doc *docs, int64_t n_docs, int64_t max_lw,
                               lcx_eval_score_fn score, void *model, int32_t *buf, double *nll,
                               lcx_ppl_result *results) {
    const int bos = cfg->bos_id >= 0;
    for (int64_t d = 0; d < n_docs; d++) {
        const lcx_ppl_doc *doc = &docs[d];
        int64_t pass = 0; /* positions the longest scored window of this document needs */
        for (int li = 0; li < cfg->n_lengths; li++) {
            int64_t text_len = cfg->lengths[li] - bos;
            if (doc->n < (bos ? 1 : 2) || (doc->n < text_len && cfg->short_docs == LCX_PPL_SHORT_SKIP)) continue;
            int64_t wn = (doc->n < text_len ? doc->n : text_len) + bos;
            if (wn > pass) pass = wn;
        }
        const int own = mine(cfg, d); /* sharded by document: one pass is one document's work */
        if (pass > 1 && own) {
            if (bos) buf[0] = cfg->bos_id;
            memcpy(buf + bos, doc->tokens, (size_t)(pass - bos) * sizeof(int32_t));
            lcx_status st = score(model, buf, pass, 1, nll);
            if (st != LCX_OK)
                return lcx_fail_context(st, "ppl length %lld (one pass), document %lld: ", (long long)max_lw,
                                        (long long)d);
        }
        for (int li = 0; li < cfg->n_lengths; li++) {
            lcx_ppl_result *r = &results[li];
            int64_t text_len = cfg->lengths[li] - bos;
            if (doc->n < (bos ? 1 : 2) || (doc->n < text_len && cfg->short_docs == LCX_PPL_SHORT_SKIP)) {
                r->docs_skipped++;
                continue;
            }
            r->docs++;
            if (!own) continue;
            int64_t wn = (doc->n < text_len ? doc->n : text_len) + bos;
            double s = 0.0;
            for (int64_t i = 0; i < wn - 1; i++) s += nll[i];
            r->nll_sum += s;
            r->tokens += wn - 1;
            r->windows++;
            r->window_nll_sum += s / (double)(wn - 1);
        }
    }
    return LCX_OK;
}

lcx_status lcx_ppl_eval(const lcx_ppl_config *cfg, const lcx_ppl_doc *docs, int64_t n_docs,
                        lcx_eval_score_fn score, void *model, lcx_ppl_result *results) {
    LCX_FAIL_IF(!cfg || !score || !results || (n_docs > 0 && !docs) || n_docs < 0, LCX_ERR_INVALID,
                "ppl: missing config, scorer, documents or results");
    LCX_FAIL_IF(cfg->n_lengths < 1 || !cfg->lengths, LCX_ERR_INVALID, "ppl: no lengths to evaluate");
    LCX_FAIL_IF(cfg->stride < 0, LCX_ERR_INVALID, "ppl: stride %lld is negative", (long long)cfg->stride);
    LCX_FAIL_IF(cfg->short_docs != LCX_PPL_SHORT_SKIP && cfg->short_docs != LCX_PPL_SHORT_SCORE,
                LCX_ERR_INVALID, "ppl: unknown short-document policy %d", cfg->short_docs);
    const int bos = cfg->bos_id >= 0;
    int64_t max_lw = 0;
    for (int i = 0; i < cfg->n_lengths; i++) {
        LCX_FAIL_IF(cfg->lengths[i] < 2 || cfg->lengths[i] > ((int64_t)1 << 40), LCX_ERR_INVALID,
                    "ppl: window length %lld out of range [2, 2^40]", (long long)cfg->lengths[i]);
        if (cfg->lengths[i] > max_lw) max_lw = cfg->lengths[i];
    }
    for (int64_t d = 0; d < n_docs; d++)
        LCX_FAIL_IF(docs[d].n < 0 || docs[d].n > ((int64_t)1 << 48) || (docs[d].n > 0 && !docs[d].tokens),
                    LCX_ERR_INVALID, "ppl: document %lld: no tokens pointer or length %lld out of range [0, 2^48]",
                    (long long)d, (long long)docs[d].n);

    int32_t *buf = malloc((size_t)max_lw * sizeof(int32_t));
    double *nll = malloc((size_t)max_lw * sizeof(double));
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!buf || !nll, LCX_ERR_OOM, done, "ppl: out of memory for a %lld-token window",
                  (long long)max_lw);

    if (cfg->truncate && cfg->one_pass) {
        for (int li = 0; li < cfg->n_lengths; li++) {
            memset(&results[li], 0, sizeof results[li]);
            results[li].length = cfg->lengths[li];
            results[li].stride = cfg->lengths[li] - bos;
        }
        st = ppl_one_pass(cfg, docs, n_docs, max_lw, score, model, buf, nll, results);
        for (int li = 0; st == LCX_OK && li < cfg->n_lengths; li++) lcx_ppl_result_finish(&results[li]);
        goto done;
    }
    int64_t item = 0; /* the windows of the whole evaluation, in order: the shards' index */
    for (int li = 0; li < cfg->n_lengths; li++) {
        const int64_t lw = cfg->lengths[li];
        const int64_t text_len = lw - bos; /* document tokens per window */
        const int64_t stride = cfg->stride == 0 || cfg->stride > text_len ? text_len : cfg->stride;
        lcx_ppl_result *r = &results[li];
        memset(r, 0, sizeof(*r));
        r->length = lw;
        r->stride = cfg->truncate ? text_len : stride;
        for (int64_t d = 0; d < n_docs; d++) {
            const lcx_ppl_doc *doc = &docs[d];
            int unscorable = doc->n < (bos ? 1 : 2);
            int short_doc = doc->n < text_len;
            if (unscorable || (short_doc && cfg->short_docs == LCX_PPL_SHORT_SKIP)) {
                r->docs_skipped++;
                continue;
            }
            st = ppl_doc(cfg, doc, d, lw, text_len, stride, score, model, buf, nll, r, &item);
            if (st != LCX_OK) goto done;
            r->docs++;
        }
        lcx_ppl_result_finish(r);
    }
done:
    free(buf);
    free(nll);
    return st;
}

lcx_status lcx_eval_default_lengths(int64_t orig, int64_t target, int64_t *out, int cap, int *n) {
    LCX_FAIL_IF(!out || !n, LCX_ERR_INVALID, "eval lengths: no output");
    LCX_FAIL_IF(orig < 2 || target < orig || target > ((int64_t)1 << 40), LCX_ERR_INVALID,
                "eval lengths: need 2 <= original context (%lld) <= target (%lld) <= 2^40", (long long)orig,
                (long long)target);
    int k = 0;
    int64_t p = 2;
    while (p <= orig) p *= 2; /* first power of two above orig */
    LCX_FAIL_IF(k >= cap, LCX_ERR_INVALID, "eval lengths: room for %d lengths is not enough", cap);
    out[k++] = orig;
    for (; p <= target; p *= 2) {
        LCX_FAIL_IF(k >= cap, LCX_ERR_INVALID, "eval lengths: room for %d lengths is not enough", cap);
        out[k++] = p;
    }
    if (out[k - 1] != target) {
        LCX_FAIL_IF(k >= cap, LCX_ERR_INVALID, "eval lengths: room for %d lengths is not enough", cap);
        out[k++] = target;
    }
    *n = k;
    return LCX_OK;
}
