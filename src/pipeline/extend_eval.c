/* extend_eval: before/after evaluation of lcextend CKPT --to N (src/pipeline/extend_eval.h). */
#include "src/pipeline/extend_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/train/train.h"

lcx_status lcx_extend_eval_ckpt(const char *ckpt, const lcx_model_config *cfg, const lcx_backend *be, lcx_comm *tp,
                                lcx_comm *cp, lcx_comm *replicas, const lcx_eval_spec *spec, lcx_tokenizer *tok,
                                const char *json_path, const char *pk_svg, lcx_ppl_result *res,
                                const lcx_reporter *r) {
    tp = tp && tp->size > 1 ? tp : NULL;
    cp = cp && cp->size > 1 ? cp : NULL;
    replicas = replicas && replicas->size > 1 ? replicas : NULL;
    lcx_eval_spec sharded = *spec;
    sharded.tp = tp, sharded.cp = cp, sharded.replicas = replicas;
    lcx_model_opts mo;
    lcx_eval_model_opts(&sharded, &mo); /* as lcextend eval (lcx_train_load then skips the moments) */
    mo.param_dtype = LCX_F32;
    mo.backend = be;
    lcx_model *m = NULL;
    lcx_passkey_result pk;
    memset(&pk, 0, sizeof pk);
    json_t *root = NULL;
    char *svg = NULL;
    lcx_status st = lcx_model_init(&m, cfg, &mo);
    if (st == LCX_OK) st = lcx_train_load(ckpt, m, NULL);
    st = lcx_eval_agree(&sharded, st); /* the evaluation's collectives need every rank */
    if (st != LCX_OK) goto done;
    st = lcx_eval_run(&sharded, m, tok, res, &pk, &root, r);
    if (st != LCX_OK || !lcx_eval_writes(&sharded)) goto done; /* the same results on every rank: one writes */
    st = lcx_eval_json_write(json_path, root);
    if (st == LCX_OK && pk_svg && spec->pk.trials > 0) {
        int md = (spec->pk.modes & LCX_PASSKEY_GREEDY) ? LCX_PASSKEY_GREEDY : LCX_PASSKEY_LOGLIK;
        char title[300];
        snprintf(title, sizeof title, "passkey retrieval (%s): %s", md == LCX_PASSKEY_GREEDY ? "greedy" : "loglik",
                 spec->series);
        st = lcx_svg_passkey_heatmap(&pk, md, title, &svg);
        if (st == LCX_OK) st = lcx_svg_write(pk_svg, svg);
    }
done:
    free(svg);
    json_decref(root);
    lcx_passkey_result_free(&pk);
    lcx_model_free(m);
    return st;
}

enum { MAX_ROWS = 64 };

typedef struct side {
    int n;                  /* lengths with a perplexity */
    int64_t len[MAX_ROWS];
    double ppl[MAX_ROWS];
    int n_pk;               /* lengths with a passkey accuracy */
    int64_t pk_len[MAX_ROWS];
    double pk_acc[MAX_ROWS];
    const char *mode;       /* "greedy" / "loglik" */
} side;

/* Perplexity and passkey accuracy by length from an `lcextend eval --json` file. */
static lcx_status read_side(const char *path, side *s) {
    memset(s, 0, sizeof *s);
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    LCX_FAIL_IF(!j, LCX_ERR_FORMAT, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
    lcx_status st = LCX_OK;
    json_t *pj = json_object_get(j, "perplexity");
    if (pj) {
        lcx_ppl_result *r = NULL;
        int n = 0;
        char *series = NULL;
        st = lcx_ppl_from_json(pj, path, &r, &n, &series);
        for (int i = 0; st == LCX_OK && i < n && s->n < MAX_ROWS; i++, s->n++) {
            s->len[s->n] = r[i].length;
            s->ppl[s->n] = r[i].ppl;
        }
        free(r);
        free(series);
    }
    json_t *kj = json_object_get(j, "passkey");
    if (st == LCX_OK && kj) {
        json_t *cells = json_object_get(kj, "cells"), *trials = json_object_get(kj, "trials");
        int greedy = 0;
        json_t *modes = json_object_get(kj, "modes"), *mv;
        size_t k;
        json_array_foreach(modes, k, mv) greedy |= json_is_string(mv) && !strcmp(json_string_value(mv), "greedy");
        s->mode = greedy ? "greedy" : "loglik";
        const char *key = greedy ? "greedy_correct" : "loglik_correct";
        LCX_FAIL_GOTO(!json_is_array(cells) || !json_is_integer(trials) || json_integer_value(trials) < 1,
                      LCX_ERR_FORMAT, done, "%s: 'passkey' needs 'cells' (array) and 'trials' (>= 1)", path);
        double tot[MAX_ROWS] = {0}, ok[MAX_ROWS] = {0};
        json_t *c;
        json_array_foreach(cells, k, c) {
            json_t *l = json_object_get(c, "length"), *v = json_object_get(c, key);
            LCX_FAIL_GOTO(!json_is_integer(l) || !json_is_integer(v), LCX_ERR_FORMAT, done,
                          "%s: passkey cells[%zu]: 'length' or '%s' is missing or not an integer", path, k, key);
            int r = 0;
            while (r < s->n_pk && s->pk_len[r] != json_integer_value(l)) r++;
            if (r == s->n_pk) {
                if (r == MAX_ROWS) continue;
                s->pk_len[s->n_pk++] = json_integer_value(l);
            }
            tot[r] += (double)json_integer_value(trials);
            ok[r] += (double)json_integer_value(v);
        }
        for (int r = 0; r < s->n_pk; r++) s->pk_acc[r] = ok[r] / tot[r];
    }
done:
    json_decref(j);
    return st;
}

/* A cell of the table: the value at len, "-" when the side has none. */
static void ppl_cell(const side *s, int64_t len, char *buf, size_t cap) {
    snprintf(buf, cap, "-");
    for (int i = 0; i < s->n; i++)
        if (s->len[i] == len && isfinite(s->ppl[i])) {
            snprintf(buf, cap, "%.3f", s->ppl[i]);
            return;
        }
}

static void pk_cell(const side *s, int64_t len, char *buf, size_t cap) {
    snprintf(buf, cap, "-");
    for (int i = 0; i < s->n_pk; i++)
        if (s->pk_len[i] == len) {
            snprintf(buf, cap, "%.0f%%", 100 * s->pk_acc[i]);
            return;
        }
}

enum { COLS = 5, CELL = 32 };

lcx_status lcx_extend_eval_table(const char *before_json, const char *after_json, const lcx_reporter *r) {
    side *b = malloc(sizeof *b), *a = malloc(sizeof *a);
    char(*text)[CELL] = NULL;
    const char **cells = NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!a || !b, LCX_ERR_OOM, done, "out of memory");
    LCX_TRY_GOTO(read_side(before_json, b), done);
    LCX_TRY_GOTO(read_side(after_json, a), done);
    int64_t lens[4 * MAX_ROWS];
    int n = 0;
    const side *sd[2] = {b, a};
    for (int k = 0; k < 2; k++) /* every length of either side, ascending */
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < (pass ? sd[k]->n_pk : sd[k]->n); i++) {
                int64_t l = pass ? sd[k]->pk_len[i] : sd[k]->len[i];
                int j = 0;
                while (j < n && lens[j] != l) j++;
                if (j == n) lens[n++] = l;
            }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && lens[j - 1] > lens[j]; j--) {
            int64_t t = lens[j];
            lens[j] = lens[j - 1];
            lens[j - 1] = t;
        }
    text = calloc((size_t)(n > 0 ? n : 1) * COLS, sizeof *text);
    cells = calloc((size_t)(n > 0 ? n : 1) * COLS, sizeof *cells);
    LCX_FAIL_GOTO(!text || !cells, LCX_ERR_OOM, done, "out of memory");
    for (int i = 0; i < n; i++) {
        char(*row)[CELL] = text + (size_t)i * COLS;
        snprintf(row[0], CELL, "%lld", (long long)lens[i]);
        ppl_cell(b, lens[i], row[1], CELL);
        ppl_cell(a, lens[i], row[2], CELL);
        pk_cell(b, lens[i], row[3], CELL);
        pk_cell(a, lens[i], row[4], CELL);
        for (int c = 0; c < COLS; c++) cells[(size_t)i * COLS + (size_t)c] = row[c];
    }
    const char *mode = a->mode ? a->mode : b->mode ? b->mode : "greedy";
    char title[160];
    snprintf(title, sizeof title,
             "before / after (perplexity: token-weighted; passkey: %s accuracy over depths and trials)", mode);
    static const char *const header[COLS] = {"length", "ppl before", "ppl after", "passkey before", "passkey after"};
    /* the first column's extra space comes from the table's leading one: "  %8s %12s ..." as always printed */
    static const int widths[COLS] = {8, 12, 12, 14, 14};
    lcx_report_table(r, &(lcx_table){.title = title, .n_cols = COLS, .n_rows = n, .header = header,
                                     .cells = cells, .widths = widths});
done:
    free(cells);
    free(text);
    free(a);
    free(b);
    return st;
}
