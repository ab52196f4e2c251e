/* eval_checkpoint: `lcextend eval CKPT` as one call (src/eval/eval_checkpoint.h): config, tokenizer, documents
 * and model of a checkpoint wired into the evaluation of src/eval/eval_run.h, and its files. */
#include "src/eval/eval_checkpoint.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/source.h"
#include "src/comm/comm.h"
#include "src/core/fileio.h"
#include "src/core/outpath.h"
#include "src/eval/eval.h"
#include "src/eval/eval_run.h"
#include "src/model/model.h"
#include "src/tokenizer/tokenizer.h"

enum { MAX_LIST = 64, MAX_COMPARE = 16 };

static const double DEFAULT_DEPTHS[] = {0, 0.25, 0.5, 0.75, 1};

void lcx_eval_options_default(lcx_eval_options *o) {
    memset(o, 0, sizeof *o);
    o->stride = 256;
    o->depths = DEFAULT_DEPTHS;
    o->n_depths = 5;
    o->modes = LCX_PASSKEY_GREEDY;
    o->distractors = 4;
    o->needles = 1;
    o->seed = 1;
    o->dtype = LCX_F32;
    o->chunk = 256;
}

static lcx_status load_text_doc(const char *path, lcx_tokenizer *tok, int64_t vocab, lcx_ppl_doc **docs_out,
                                int64_t *n_out, int32_t **store_out) {
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_file(path, (size_t)1 << 32, &buf, &len));
    lcx_tok_ids v;
    memset(&v, 0, sizeof v);
    lcx_status st = lcx_tokenizer_encode(tok, buf, len, 0, &v);
    free(buf);
    if (st != LCX_OK) return lcx_fail_context(st, "%s: ", path);
    int32_t *store = malloc((v.n + 1) * sizeof *store);
    lcx_ppl_doc *docs = calloc(1, sizeof *docs);
    if (!store || !docs) {
        st = lcx_fail(LCX_ERR_OOM, "%s: no memory for %zu tokens", path, v.n);
    } else {
        for (size_t i = 0; i < v.n && st == LCX_OK; i++) {
            if ((int64_t)v.ids[i] >= vocab)
                st = lcx_fail(LCX_ERR_INVALID, "%s: token id %u is outside the model's vocabulary (%lld)", path,
                              v.ids[i], (long long)vocab);
            else
                store[i] = (int32_t)v.ids[i];
        }
    }
    if (st == LCX_OK) {
        docs[0].tokens = store;
        docs[0].n = (int64_t)v.n;
        *docs_out = docs;
        *n_out = 1;
        *store_out = store;
    } else {
        free(store);
        free(docs);
    }
    lcx_tok_ids_free(&v);
    return st;
}

/* The last path component of path into buf[256]. */
static const char *base_name(const char *path, char *buf) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/') s--;
    size_t k = n - s < 255 ? n - s : 255;
    memcpy(buf, path + s, k);
    buf[k] = 0;
    return buf;
}

/* Rope tables that depend on the length of the pass (HF computes them from the sequence length): then a long
 * pass's first L positions are not an L-token pass. */
static int pass_length_rope(const lcx_model_config *cfg) {
    return strcmp(cfg->rope.type, "dynamic") == 0 || strcmp(cfg->rope.type, "longrope") == 0;
}

/* An --compare file is an eval --json output: a few KB. */
#define COMPARE_MAX_BYTES ((size_t)64 << 20)

lcx_status lcx_eval_checkpoint(const lcx_eval_options *o, const lcx_reporter *r) {
    lcx_status st = LCX_OK;
    lcx_comm *tp = o->tp_comm && o->tp_comm->size > 1 ? o->tp_comm : NULL;
    lcx_comm *cp = o->cp_comm && o->cp_comm->size > 1 ? o->cp_comm : NULL;
    lcx_comm *rep = o->replicas && o->replicas->size > 1 ? o->replicas : NULL;
    lcx_eval_spec es = {.tp = tp, .cp = cp, .replicas = rep};
    const int writer = lcx_eval_writes(&es); /* every rank ends with the same results: one writes them */
    char *hay = NULL;
    size_t hay_len = 0;
    int64_t lengths[MAX_LIST], pk_lengths[MAX_LIST];
    int n_lengths = o->n_lengths, n_pk_lengths = o->n_pk_lengths;
    char series_buf[256], cmp_names[MAX_COMPARE][256];
    const char *series = o->series ? o->series : base_name(o->ckpt, series_buf);
    lcx_model_config cfg;
    lcx_source *src = NULL;
    lcx_tokenizer *tok = NULL;
    lcx_model *m = NULL;
    lcx_ppl_doc *docs = NULL;
    int32_t *store = NULL;
    int64_t n_docs = 0;
    lcx_ppl_result *res = NULL, *cmp_res[MAX_COMPARE] = {0};
    int cmp_n[MAX_COMPARE] = {0};
    char *cmp_series[MAX_COMPARE] = {0};
    lcx_passkey_result pk;
    memset(&pk, 0, sizeof pk);
    json_t *root = NULL;
    char *svg = NULL;
    double *xs = NULL, *ys = NULL;
    int modes = o->modes;

    /* Until the model is loaded a rank may fail alone (a file, memory): every failure goes to the agreement point
     * below (lcx_comm_agree), so no TP rank waits in the evaluation's collectives for one that stopped. */
    if (o->n_compare > MAX_COMPARE) {
        st = lcx_fail(LCX_ERR_INVALID, "more than %d --compare files", MAX_COMPARE);
        goto agree;
    }
    /* the user's outputs are never replaced (docs/reliability.md "Outputs"): refused before any work, and written
     * with a claim that fails if something appeared meanwhile */
    const char *outs[3] = {o->json_out, o->svg_out, o->pk_svg};
    for (int i = 0; i < 3 && st == LCX_OK && writer; i++)
        if (outs[i]) st = lcx_out_absent(outs[i]);
    for (int c = 0; c < o->n_compare && st == LCX_OK && writer; c++) /* a missing one, or a FIFO, before any work */
        st = lcx_check_input(o->compare[c], 0, NULL);
    if (st == LCX_OK && o->haystack) st = lcx_eval_read_haystack(o->haystack, &hay, &hay_len);
    if (st == LCX_OK && (o->n_lengths > MAX_LIST || o->n_pk_lengths > MAX_LIST))
        st = lcx_fail(LCX_ERR_INVALID, "more than %d lengths", MAX_LIST);
    if (st != LCX_OK) goto agree;
    if (n_lengths > 0) memcpy(lengths, o->lengths, (size_t)n_lengths * sizeof *lengths);
    if (n_pk_lengths > 0) memcpy(pk_lengths, o->pk_lengths, (size_t)n_pk_lengths * sizeof *pk_lengths);

    st = lcx_source_open(o->ckpt, 0, &src); /* any form; kept open until the model is built from it */
    if (st == LCX_OK && !src->has_config)
        st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no config.json: evaluation needs a model directory", o->ckpt);
    if (st != LCX_OK) goto agree;
    cfg = src->cfg;
    int64_t orig = cfg.rope.has_original_max ? cfg.rope.original_max_position_embeddings : cfg.max_position_embeddings;
    if (n_lengths == 0) {
        st = lcx_eval_default_lengths(orig, o->to > orig ? o->to : orig, lengths, MAX_LIST, &n_lengths);
        if (st != LCX_OK) goto agree;
    }
    if (n_pk_lengths == 0) {
        memcpy(pk_lengths, lengths, sizeof lengths);
        n_pk_lengths = n_lengths;
    }

    /* The tokenizer: needed for text, passkey and BOS; optional with --data (BOS then from config.json). */
    {
        const char *tp = o->tokenizer ? o->tokenizer : src->tokenizer_path; /* a GGUF's own, an .lcx's file */
        st = lcx_tokenizer_open(tp, &tok);
        if (st != LCX_OK) {
            if (o->tokenizer || o->text || o->trials > 0) {
                lcx_fail_context(st, "tokenizer (give --tokenizer PATH): ");
                goto agree;
            }
            tok = NULL;
            st = LCX_OK;
        }
    }
    int32_t bos = lcx_eval_bos(tok, &cfg);
    es = (lcx_eval_spec){
        .label = o->ckpt, .series = series, .data_name = o->data ? o->data : o->text,
        .ppl = {lengths, n_lengths, o->stride, bos, o->short_score ? LCX_PPL_SHORT_SCORE : LCX_PPL_SHORT_SKIP,
                o->truncate, o->truncate && !pass_length_rope(&cfg), 0, 0},
        .pk = {pk_lengths, n_pk_lengths, o->depths, o->n_depths, o->trials, o->distractors, modes, o->seed,
               o->needles, hay, hay_len, 0, 0},
        .haystack_name = o->haystack,
        .quiet = o->quiet, .progress_s = o->progress_s, .tp = tp, .cp = cp, .replicas = rep};

    if (o->data) st = lcx_eval_load_docs(o->data, bos, cfg.vocab_size, &docs, &n_docs, &store);
    else if (o->text) st = load_text_doc(o->text, tok, cfg.vocab_size, &docs, &n_docs, &store);
    if (st != LCX_OK) goto agree;
    es.docs = docs;
    es.n_docs = n_docs;

    lcx_model_opts mo;
    lcx_eval_model_opts(&es, &mo);
    mo.param_dtype = o->dtype;
    mo.loss_chunk = o->chunk;
    mo.backend = o->backend;
    st = lcx_model_from_source(src, &mo, &m);
    if (st == LCX_OK) {
        res = calloc((size_t)n_lengths + 1, sizeof *res);
        if (!res) st = lcx_fail(LCX_ERR_OOM, "no memory");
    }
agree:
    st = lcx_eval_agree(&es, st);
    if (st != LCX_OK) goto done;
    st = lcx_eval_run(&es, m, tok, res, &pk, &root, r);
    if (st != LCX_OK && (tp || cp || rep)) {
        /* the other ranks may be waiting in this pass's collectives or the copies' gathers: the job ends here */
        char msg[600];
        snprintf(msg, sizeof msg, "eval: TP rank %d, CP rank %d of replica rank %d: %s: %s", tp ? tp->rank : 0,
                 cp ? cp->rank : 0, rep ? rep->rank : 0, lcx_status_name(st), lcx_last_error());
        lcx_comm_abort(tp ? tp : cp ? cp : rep, r, 1, msg);
    }
    if (st != LCX_OK || !writer) goto done;
    if (o->trials > 0 && o->pk_svg) {
        int md = (modes & LCX_PASSKEY_GREEDY) ? LCX_PASSKEY_GREEDY : LCX_PASSKEY_LOGLIK;
        char title[300];
        char keys[32] = "";
        if (pk.needles > 1) snprintf(keys, sizeof keys, ", %d keys", pk.needles);
        snprintf(title, sizeof title, "passkey retrieval (%s%s): %s", md == LCX_PASSKEY_GREEDY ? "greedy" : "loglik",
                 keys, series);
        st = lcx_svg_passkey_heatmap(&pk, md, title, &svg);
        if (st == LCX_OK) st = lcx_write_file_new(o->pk_svg, svg, strlen(svg));
        free(svg);
        svg = NULL;
        if (st != LCX_OK) goto done;
    }
    if (o->svg_out) {
        lcx_plot_series ser[MAX_COMPARE + 1];
        int ns = 0;
        for (int c = 0; c < o->n_compare; c++) {
            json_error_t je;
            char *text = NULL;
            size_t len = 0;
            st = lcx_read_input(o->compare[c], 0, COMPARE_MAX_BYTES, &text, &len);
            if (st != LCX_OK) goto done;
            json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
            free(text);
            if (!j) {
                st = lcx_fail(LCX_ERR_FORMAT, "%s: line %d column %d: %s", o->compare[c], je.line, je.column, je.text);
                goto done;
            }
            json_t *pj = json_object_get(j, "perplexity");
            if (!pj) {
                json_decref(j);
                st = lcx_fail(LCX_ERR_FORMAT, "%s: no 'perplexity' object (not an lcextend eval --json output)", o->compare[c]);
                goto done;
            }
            st = lcx_ppl_from_json(pj, o->compare[c], &cmp_res[c], &cmp_n[c], &cmp_series[c]);
            json_decref(j);
            if (st != LCX_OK) goto done;
        }
        size_t total = (size_t)n_lengths;
        for (int c = 0; c < o->n_compare; c++) total += (size_t)cmp_n[c];
        xs = malloc(total * sizeof *xs);
        ys = malloc(total * sizeof *ys);
        if (!xs || !ys) {
            st = lcx_fail(LCX_ERR_OOM, "no memory");
            goto done;
        }
        size_t at = 0;
        for (int c = 0; c <= o->n_compare; c++) {
            const lcx_ppl_result *pr = c < o->n_compare ? cmp_res[c] : res;
            int n = c < o->n_compare ? cmp_n[c] : n_lengths;
            ser[ns].name = c < o->n_compare ? (cmp_series[c] ? cmp_series[c] : base_name(o->compare[c], cmp_names[c])) : series;
            ser[ns].x = xs + at;
            ser[ns].y = ys + at;
            ser[ns].n = n;
            for (int k = 0; k < n; k++, at++) {
                xs[at] = (double)pr[k].length;
                ys[at] = pr[k].ppl;
            }
            ns++;
        }
        st = lcx_svg_ppl_plot(ser, ns, "perplexity vs context length", &svg);
        if (st == LCX_OK) st = lcx_write_file_new(o->svg_out, svg, strlen(svg));
        if (st != LCX_OK) goto done;
    }
    if (o->json_out) {
        st = lcx_eval_json_write_new(o->json_out, root);
        if (st != LCX_OK) goto done;
    }
done:
    free(svg);
    free(xs);
    free(ys);
    json_decref(root);
    for (int c = 0; c < MAX_COMPARE; c++) {
        free(cmp_res[c]);
        free(cmp_series[c]);
    }
    lcx_passkey_result_free(&pk);
    free(res);
    free(docs);
    free(store);
    free(hay);
    lcx_model_free(m);
    lcx_source_close(src);
    lcx_tokenizer_free(tok);
    return st;
}
