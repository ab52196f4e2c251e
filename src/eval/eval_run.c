/* eval_run: the evaluation body of `lcextend eval`, also run by `lcextend CKPT --to N` before and after
 * training (src/eval/eval_run.h). */
#include "src/eval/eval_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokdata.h"
#include "src/comm/comm.h"
#include "src/core/clock.h"
#include "src/core/cp_perm.h"
#include "src/core/fileio.h"
#include "src/core/strbuf.h"
#include "src/eval/eval_model.h"
#include "src/eval/eval_progress.h"

lcx_status lcx_eval_load_docs(const char *prefix, int32_t bos, int64_t vocab, lcx_ppl_doc **docs_out,
                                  int64_t *n_out, int32_t **store_out) {
    lcx_tokdata td;
    memset(&td, 0, sizeof td);
    LCX_TRY(lcx_tokdata_open(prefix, &td));
    lcx_status st = LCX_OK;
    int32_t *store = NULL;
    uint32_t *tmp = NULL;
    lcx_ppl_doc *docs = NULL;
    if (td.n_tokens > ((uint64_t)1 << 40)) {
        st = lcx_fail(LCX_ERR_INVALID, "%s: %llu tokens: too many to evaluate", prefix, (unsigned long long)td.n_tokens);
        goto done;
    }
    store = malloc(((size_t)td.n_tokens + 1) * sizeof *store);
    tmp = malloc(((size_t)td.n_tokens + 1) * sizeof *tmp);
    docs = calloc((size_t)td.n_docs + 1, sizeof *docs);
    if (!store || !tmp || !docs) {
        st = lcx_fail(LCX_ERR_OOM, "%s: no memory for %llu tokens", prefix, (unsigned long long)td.n_tokens);
        goto done;
    }
    size_t at = 0;
    for (uint64_t d = 0; d < td.n_docs && st == LCX_OK; d++) {
        uint64_t s0, s1;
        lcx_tokdata_doc_seqs(&td, d, &s0, &s1);
        size_t start = at;
        for (uint64_t s = s0; s < s1; s++) {
            uint64_t len = lcx_tokdata_seq_len(&td, s);
            if (len > td.n_tokens - at) {
                st = lcx_fail(LCX_ERR_INVALID, "%s: sequences hold more tokens than the index says", prefix);
                break;
            }
            st = lcx_tokdata_read(&td, s, 0, len, tmp);
            if (st != LCX_OK) break;
            for (uint64_t k = 0; k < len; k++) {
                if ((int64_t)tmp[k] >= vocab) {
                    st = lcx_fail(LCX_ERR_INVALID, "%s: document %llu: token id %u is outside the model's vocabulary "
                                  "(%lld): wrong tokenizer?", prefix, (unsigned long long)d, tmp[k], (long long)vocab);
                    break;
                }
                store[at++] = (int32_t)tmp[k];
            }
            if (st != LCX_OK) break;
        }
        if (bos >= 0 && at > start && store[start] == bos) start++;
        docs[d].tokens = store + start;
        docs[d].n = (int64_t)(at - start);
    }
done:
    *n_out = (int64_t)td.n_docs;
    lcx_tokdata_close(&td);
    free(tmp);
    if (st != LCX_OK) {
        free(store);
        free(docs);
        return st;
    }
    *docs_out = docs;
    *store_out = store;
    return LCX_OK;
}

int32_t lcx_eval_bos(const lcx_tokenizer *tok, const lcx_model_config *cfg) {
    int64_t b = tok ? lcx_tokenizer_bos_id(tok) : cfg->bos_token_id;
    return b >= 0 && b < cfg->vocab_size ? (int32_t)b : -1;
}

lcx_status lcx_eval_read_haystack(const char *path, char **text, size_t *len) {
    lcx_status st = lcx_read_input(path, 0, (size_t)256 << 20, text, len);
    return st == LCX_OK ? LCX_OK : lcx_fail_context(st, "--haystack: ");
}

lcx_status lcx_eval_check_passkey(const lcx_passkey_config *pk, lcx_tokenizer *tok, int32_t bos) {
    lcx_eval_tokenizer et = {lcx_eval_tok_encode, tok, bos};
    /* the longest names and keys a prompt can have do not matter: the fit fails only below the bare prompt */
    const int n = pk->needles > 1 ? pk->needles : 1;
    uint32_t keys[LCX_NEEDLE_NAMES];
    int names[LCX_NEEDLE_NAMES];
    lcx_passkey_keys(pk->seed, 0, n, keys);
    lcx_needle_names(pk->seed, 0, n, names);
    const lcx_passkey_prompt_spec ps = {0.0, keys, names, n, pk->haystack, pk->haystack_len};
    for (int i = 0; i < pk->n_lengths; i++) {
        lcx_passkey_prompt pr = {0};
        lcx_status st = lcx_passkey_prompt_build_spec(&et, pk->lengths[i], &ps, &pr);
        lcx_passkey_prompt_free(&pr);
        if (st != LCX_OK) return lcx_fail_context(st, "passkey length %lld: ", (long long)pk->lengths[i]);
    }
    return LCX_OK;
}

int64_t lcx_eval_max_tokens(const lcx_eval_spec *s) {
    int64_t mx = 2;
    if (s->docs)
        for (int i = 0; i < s->ppl.n_lengths; i++) mx = s->ppl.lengths[i] > mx ? s->ppl.lengths[i] : mx;
    /* The passkey scores prompt + answer: room for the answer's tokens (" 12345" is at most 6 byte tokens). */
    if (s->pk.trials > 0)
        for (int i = 0; i < s->pk.n_lengths; i++) mx = s->pk.lengths[i] + 16 > mx ? s->pk.lengths[i] + 16 : mx;
    return mx;
}

/* Event `name` with object j (stolen); NaN and infinities (no window scored) are JSON null. */
static void event(const lcx_reporter *r, const char *name, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text) lcx_report_event(r, name, "%s", text);
    free(text);
}
static json_t *number(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* v[n] on every rank of g = the sum of the v[n] of ranks 0, every, 2 every, ..., added in rank order (the same
 * bits everywhere). */
static lcx_status sum_over(lcx_comm *g, int every, double *v, int n) {
    double *all = malloc((size_t)g->size * (size_t)n * sizeof *all);
    LCX_FAIL_IF(!all, LCX_ERR_OOM, "eval: out of memory");
    lcx_status st = lcx_comm_all_gather(g, NULL, v, all, n, LCX_F64);
    for (int i = 0; st == LCX_OK && i < n; i++) {
        v[i] = all[i];
        for (int k = every; k < g->size; k += every) v[i] += all[(size_t)k * (size_t)n + (size_t)i];
    }
    free(all);
    return st;
}

lcx_status lcx_ppl_results_gather(lcx_comm *g, int every, lcx_ppl_result *res, int n) {
    LCX_FAIL_IF(!g || every < 1 || g->size % every != 0, LCX_ERR_INVALID, "eval: bad shard group");
    double *v = malloc((size_t)n * 4 * sizeof *v + 1);
    LCX_FAIL_IF(!v, LCX_ERR_OOM, "eval: out of memory");
    for (int i = 0; i < n; i++)
        v[4 * i] = (double)res[i].tokens, v[4 * i + 1] = (double)res[i].windows, v[4 * i + 2] = res[i].nll_sum,
        v[4 * i + 3] = res[i].window_nll_sum;
    lcx_status st = sum_over(g, every, v, 4 * n);
    for (int i = 0; st == LCX_OK && i < n; i++) {
        res[i].tokens = (int64_t)v[4 * i], res[i].windows = (int64_t)v[4 * i + 1]; /* exact below 2^53 */
        res[i].nll_sum = v[4 * i + 2], res[i].window_nll_sum = v[4 * i + 3];
        lcx_ppl_result_finish(&res[i]);
    }
    free(v);
    return st;
}

/* The copies' passkey shards added up cell by cell (counts, and the last trial's prompt length), one rank of each
 * `every` (a copy's CP ranks hold the same results). */
static lcx_status passkey_gather(lcx_comm *g, int every, lcx_passkey_result *pk) {
    const int cells = pk->n_lengths * pk->n_depths;
    double *v = malloc((size_t)cells * 4 * sizeof *v);
    LCX_FAIL_IF(!v, LCX_ERR_OOM, "eval: out of memory");
    for (int c = 0; c < cells; c++)
        v[4 * c] = pk->loglik_correct[c], v[4 * c + 1] = pk->greedy_correct[c],
        v[4 * c + 2] = pk->loglik_confused[c], v[4 * c + 3] = (double)pk->prompt_tokens[c];
    lcx_status st = sum_over(g, every, v, 4 * cells);
    for (int c = 0; st == LCX_OK && c < cells; c++)
        pk->loglik_correct[c] = (int)v[4 * c], pk->greedy_correct[c] = (int)v[4 * c + 1],
        pk->loglik_confused[c] = (int)v[4 * c + 2], pk->prompt_tokens[c] = (int64_t)v[4 * c + 3];
    free(v);
    return st;
}

static int size_of(const lcx_comm *c) { return c && c->size > 1 ? c->size : 1; }
static int rank_of(const lcx_comm *c) { return c && c->size > 1 ? c->rank : 0; }

void lcx_eval_model_opts(const lcx_eval_spec *s, lcx_model_opts *mo) {
    memset(mo, 0, sizeof *mo);
    mo->max_tokens = lcx_cp_local_len(lcx_eval_max_tokens(s), size_of(s->cp)); /* a CP rank's part */
    mo->mlp_chunk = LCX_EVAL_MLP_CHUNK;
    mo->training = 0; /* forward-only: one layer's working set */
    mo->tp_comm = size_of(s->tp) > 1 ? s->tp : NULL; /* each rank its slice of the weights */
    mo->cp_comm = size_of(s->cp) > 1 ? s->cp : NULL; /* each rank its part of every window */
}

lcx_status lcx_eval_agree(const lcx_eval_spec *s, lcx_status st) {
    st = lcx_comm_agree(size_of(s->tp) > 1 ? s->tp : NULL, st);
    st = lcx_comm_agree(size_of(s->cp) > 1 ? s->cp : NULL, st);
    return lcx_comm_agree(size_of(s->replicas) > 1 ? s->replicas : NULL, st);
}

int lcx_eval_writes(const lcx_eval_spec *s) {
    return rank_of(s->tp) == 0 && rank_of(s->cp) == 0 && rank_of(s->replicas) == 0;
}

lcx_status lcx_eval_run(const lcx_eval_spec *s, lcx_model *m, lcx_tokenizer *tok, lcx_ppl_result *res,
                        lcx_passkey_result *pk, json_t **root_out, const lcx_reporter *r) {
    *root_out = NULL;
    json_t *root = json_object();
    LCX_FAIL_IF(!root, LCX_ERR_OOM, "no memory for JSON");
    lcx_status st = LCX_OK;
    /* perplexity windows share no prefix: one forward-only pass each, no cache */
    lcx_eval_lm lm;
    memset(&lm, 0, sizeof lm);
    if (json_object_set_new(root, "checkpoint", json_string(s->label)) != 0) LCX_FAIL_GOTO(1, LCX_ERR_OOM, fail, "no memory for JSON");
    LCX_TRY_GOTO(lcx_eval_lm_init(&lm, m, 0), fail);
    lcx_eval_progress prog;
    lcx_eval_progress_init(&prog, &lm, lcx_model_config_of(m), s->quiet, s->progress_s, r);
    /* the copies of the model: K = replicas / CP of them, copy k = replicas rank / CP */
    const int cpn = size_of(s->cp), nrep = size_of(s->replicas);
    LCX_FAIL_GOTO(nrep > 1 && nrep % cpn != 0, LCX_ERR_INVALID, fail,
                  "eval: %d replica ranks are not copies of a model on %d CP ranks", nrep, cpn);
    const int copies = nrep > 1 ? nrep / cpn : 1, copy = rank_of(s->replicas) / cpn;
    lcx_comm *rep = copies > 1 ? s->replicas : NULL;
    /* how the numbers were computed: the layout, each part above 1 */
    const char *part[3] = {"tp", "cp", "replicas"};
    const int sizes[3] = {size_of(s->tp), cpn, copies};
    for (int i = 0; i < 3; i++)
        if (sizes[i] > 1 && json_object_set_new(root, part[i], json_integer(sizes[i])) != 0)
            LCX_FAIL_GOTO(1, LCX_ERR_OOM, fail, "no memory for JSON");
    if (s->docs) {
        lcx_ppl_config shard = s->ppl;
        shard.shard = copy, shard.n_shards = copies;
        const lcx_ppl_config *pc = &s->ppl;
        double t0 = lcx_clock_s();
        LCX_TRY_GOTO(lcx_eval_progress_ppl(&prog, &shard, s->docs, s->n_docs), fail);
        LCX_TRY_GOTO(lcx_ppl_eval(&shard, s->docs, s->n_docs, lcx_eval_progress_score, &prog, res), fail);
        if (rep) LCX_TRY_GOTO(lcx_ppl_results_gather(rep, cpn, res, pc->n_lengths), fail);
        if (!s->quiet) lcx_report_progress_end(r);
        lcx_report(r, LCX_REPORT_RESULT,
                   "perplexity of %s on %s (%lld document(s), stride %lld, BOS %s, token-weighted) in %.1f s", s->label,
                   s->data_name, (long long)s->n_docs, (long long)pc->stride, pc->bos_id >= 0 ? "yes" : "no",
                   lcx_clock_s() - t0);
        lcx_report(r, LCX_REPORT_RESULT, "  %8s %10s %8s %6s %12s %14s", "length", "tokens", "windows", "docs",
                   "perplexity", "window-mean");
        for (int i = 0; i < pc->n_lengths; i++)
            lcx_report(r, LCX_REPORT_RESULT, "  %8lld %10lld %8lld %6lld %12.4f %14.4f", (long long)res[i].length,
                       (long long)res[i].tokens, (long long)res[i].windows, (long long)res[i].docs, res[i].ppl,
                       res[i].ppl_window_mean);
        for (int i = 0; i < pc->n_lengths; i++)
            event(r, "ppl", json_pack("{s:s, s:I, s:o, s:o, s:I, s:I, s:I}", "checkpoint", s->label, "length",
                                      (json_int_t)res[i].length, "ppl", number(res[i].ppl), "window_mean",
                                      number(res[i].ppl_window_mean), "tokens", (json_int_t)res[i].tokens, "windows",
                                      (json_int_t)res[i].windows, "docs", (json_int_t)res[i].docs));
        json_t *pj = lcx_ppl_to_json(pc, res, s->series);
        if (!pj || json_object_set_new(root, "perplexity", pj) != 0) LCX_FAIL_GOTO(1, LCX_ERR_OOM, fail, "no memory for JSON");
    }
    if (s->pk.trials > 0) {
        const lcx_passkey_config *kc = &s->pk;
        LCX_FAIL_GOTO(!tok, LCX_ERR_INVALID, fail, "passkey: %s has no tokenizer", s->label);
        lcx_eval_tokenizer et = {lcx_eval_tok_encode, tok, s->ppl.bos_id};
        /* the key and its distractors are answers to one prompt: a KV cache runs the prompt once */
        lcx_eval_spec pks = *s;
        pks.docs = NULL;
        lcx_eval_lm_free(&lm);
        /* under CP a prompt is cached whole or not at all (no shared prefix of two prompts is kept): a help only
         * where several answers share a prompt, in loglik mode */
        const int64_t cache = cpn > 1 && !(kc->modes & LCX_PASSKEY_LOGLIK) ? 0 : lcx_eval_max_tokens(&pks);
        LCX_TRY_GOTO(lcx_eval_lm_init(&lm, m, cache), fail);
        double t0 = lcx_clock_s();
        lcx_passkey_config shard = *kc;
        shard.shard = copy, shard.n_shards = copies;
        lcx_eval_progress_passkey(&prog, &shard);
        LCX_TRY_GOTO(lcx_passkey_eval(&shard, &et, lcx_eval_progress_score, lcx_eval_progress_argmax, &prog, pk),
                     fail);
        if (rep) LCX_TRY_GOTO(passkey_gather(rep, cpn, pk), fail);
        if (!s->quiet) lcx_report_progress_end(r);
        lcx_report(r, LCX_REPORT_RESULT,
                   "passkey retrieval of %s: %d trial(s) per cell, %d key(s) per prompt in %s, accuracy (%%) per "
                   "length x depth, in %.1f s",
                   s->label, kc->trials, pk->needles, s->haystack_name ? s->haystack_name : "the repeated filler",
                   lcx_clock_s() - t0);
        lcx_strbuf row = {0};
        for (int md = LCX_PASSKEY_LOGLIK; md <= LCX_PASSKEY_GREEDY; md++) {
            if (!(kc->modes & md)) continue;
            if (md == LCX_PASSKEY_LOGLIK && pk->needles > 1)
                lcx_report(r, LCX_REPORT_RESULT,
                           "  loglik (key vs the %d other keys in the prompt and %d distractors; chance %.0f%%)",
                           pk->needles - 1, kc->distractors, 100.0 / (kc->distractors + pk->needles));
            else if (md == LCX_PASSKEY_LOGLIK)
                lcx_report(r, LCX_REPORT_RESULT, "  loglik (key vs %d distractors; chance %.0f%%)", kc->distractors,
                           100.0 / (kc->distractors + 1));
            else
                lcx_report(r, LCX_REPORT_RESULT, "  greedy decode");
            row.len = 0;
            lcx_strbuf_printf(&row, "  %8s", "depth");
            for (int l = 0; l < kc->n_lengths; l++) lcx_strbuf_printf(&row, " %7lld", (long long)kc->lengths[l]);
            lcx_report(r, LCX_REPORT_RESULT, "%s", row.s ? row.s : "");
            for (int d = 0; d < kc->n_depths; d++) {
                row.len = 0;
                lcx_strbuf_printf(&row, "  %8.2f", kc->depths[d]);
                for (int l = 0; l < kc->n_lengths; l++)
                    lcx_strbuf_printf(&row, " %7.0f", 100 * lcx_passkey_accuracy(pk, md, l, d));
                lcx_report(r, LCX_REPORT_RESULT, "%s", row.s ? row.s : "");
            }
            if (md == LCX_PASSKEY_LOGLIK && pk->needles > 1) {
                int miss = 0, confused = 0;
                for (int c = 0; c < kc->n_lengths * kc->n_depths; c++)
                    miss += kc->trials - pk->loglik_correct[c], confused += pk->loglik_confused[c];
                lcx_report(r, LCX_REPORT_RESULT, "  misses: %d of %d trials, %d of them another key of the prompt",
                           miss, kc->trials * kc->n_lengths * kc->n_depths, confused);
            }
            for (int l = 0; l < kc->n_lengths; l++)
                for (int d = 0; d < kc->n_depths; d++)
                    event(r, "passkey",
                          json_pack("{s:s, s:s, s:I, s:f, s:o}", "checkpoint", s->label, "mode",
                                    md == LCX_PASSKEY_GREEDY ? "greedy" : "loglik", "length",
                                    (json_int_t)kc->lengths[l], "depth", kc->depths[d], "accuracy",
                                    number(lcx_passkey_accuracy(pk, md, l, d))));
        }
        lcx_strbuf_free(&row);
        json_t *kj = lcx_passkey_to_json(pk);
        if (kj && json_object_set_new(kj, "haystack", s->haystack_name ? json_string(s->haystack_name) : json_null()))
            json_decref(kj), kj = NULL;
        if (!kj || json_object_set_new(root, "passkey", kj) != 0) LCX_FAIL_GOTO(1, LCX_ERR_OOM, fail, "no memory for JSON");
    }
    lcx_eval_lm_free(&lm);
    *root_out = root;
    return LCX_OK;
fail:
    lcx_eval_lm_free(&lm);
    json_decref(root);
    return st;
}
