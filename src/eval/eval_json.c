/* eval_json: evaluation results as JSON (jansson). Non-finite numbers become null (JSON has no NaN). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/eval/eval.h"
#include "src/core/fileio.h"

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* json_object_set_new that remembers a failure instead of leaking or crashing. */
static void put(json_t *obj, const char *key, json_t *v, int *ok) {
    if (!v || json_object_set_new(obj, key, v) != 0) *ok = 0;
}

json_t *lcx_ppl_to_json(const lcx_ppl_config *cfg, const lcx_ppl_result *results, const char *series) {
    if (!cfg || !results) return NULL;
    int ok = 1;
    json_t *root = json_object(), *proto = json_object(), *arr = json_array();
    if (!root || !proto || !arr) {
        json_decref(root);
        json_decref(proto);
        json_decref(arr);
        return NULL;
    }
    if (series) put(root, "series", json_string(series), &ok);
    put(proto, "window", json_string("Lw model positions including BOS; stride in document tokens; each token "
                                     "scored once, by the first window that ends after it"),
        &ok);
    put(proto, "bos_id", cfg->bos_id >= 0 ? json_integer(cfg->bos_id) : json_null(), &ok);
    put(proto, "stride", json_integer(cfg->stride), &ok);
    put(proto, "short_docs", json_string(cfg->short_docs == LCX_PPL_SHORT_SCORE ? "score" : "skip"), &ok);
    put(proto, "truncate", json_boolean(cfg->truncate), &ok);
    put(proto, "one_pass", json_boolean(cfg->truncate && cfg->one_pass), &ok);
    put(proto, "ppl", json_string("exp(total NLL / tokens scored), token-weighted"), &ok);
    put(proto, "ppl_window_mean", json_string("exp(mean over windows of the window's mean NLL), YaRN scripts"),
        &ok);
    put(root, "protocol", proto, &ok);
    for (int i = 0; i < cfg->n_lengths && ok; i++) {
        const lcx_ppl_result *r = &results[i];
        json_t *o = json_object();
        if (!o || json_array_append_new(arr, o) != 0) {
            ok = 0;
            break;
        }
        put(o, "length", json_integer(r->length), &ok);
        put(o, "stride", json_integer(r->stride), &ok);
        put(o, "docs", json_integer(r->docs), &ok);
        put(o, "docs_skipped", json_integer(r->docs_skipped), &ok);
        put(o, "windows", json_integer(r->windows), &ok);
        put(o, "tokens", json_integer(r->tokens), &ok);
        put(o, "mean_nll", num(r->mean_nll), &ok);
        put(o, "ppl", num(r->ppl), &ok);
        put(o, "window_mean_nll", num(r->window_mean_nll), &ok);
        put(o, "ppl_window_mean", num(r->ppl_window_mean), &ok);
    }
    put(root, "results", arr, &ok);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static lcx_status get_int(const json_t *o, const char *key, int64_t min, int64_t *out, const char *what, int i) {
    const json_t *v = json_object_get(o, key);
    LCX_FAIL_IF(!json_is_integer(v) || json_integer_value(v) < min, LCX_ERR_FORMAT,
                "%s: results[%d]: '%s' is missing or not an integer >= %lld", what, i, key, (long long)min);
    *out = json_integer_value(v);
    return LCX_OK;
}

static lcx_status get_num(const json_t *o, const char *key, double *out, const char *what, int i) {
    const json_t *v = json_object_get(o, key);
    LCX_FAIL_IF(!json_is_number(v) && !json_is_null(v), LCX_ERR_FORMAT,
                "%s: results[%d]: '%s' is missing or not a number or null", what, i, key);
    *out = json_is_null(v) ? NAN : json_number_value(v);
    return LCX_OK;
}

lcx_status lcx_ppl_from_json(const json_t *root, const char *what, lcx_ppl_result **results, int *n,
                             char **series) {
    LCX_FAIL_IF(!results || !n || !series, LCX_ERR_INVALID, "ppl json: no output");
    if (!what) what = "ppl json";
    *results = NULL;
    *n = 0;
    *series = NULL;
    LCX_FAIL_IF(!json_is_object(root), LCX_ERR_FORMAT, "%s: not a JSON object", what);
    const json_t *arr = json_object_get(root, "results");
    LCX_FAIL_IF(!json_is_array(arr), LCX_ERR_FORMAT, "%s: 'results' is missing or not an array", what);
    const json_t *name = json_object_get(root, "series");
    LCX_FAIL_IF(name && !json_is_string(name), LCX_ERR_FORMAT, "%s: 'series' is not a string", what);
    size_t count = json_array_size(arr);
    LCX_FAIL_IF(count > 4096, LCX_ERR_FORMAT, "%s: %zu results (at most 4096)", what, count);
    lcx_ppl_result *r = calloc(count ? count : 1, sizeof(*r));
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "%s: out of memory", what);
    lcx_status st = LCX_OK;
    for (size_t k = 0; k < count; k++) {
        const json_t *o = json_array_get(arr, k);
        const int i = (int)k;
        LCX_FAIL_GOTO(!json_is_object(o), LCX_ERR_FORMAT, fail, "%s: results[%d] is not an object", what, i);
        LCX_TRY_GOTO(get_int(o, "length", 2, &r[k].length, what, i), fail);
        LCX_TRY_GOTO(get_int(o, "stride", 0, &r[k].stride, what, i), fail);
        LCX_TRY_GOTO(get_int(o, "docs", 0, &r[k].docs, what, i), fail);
        LCX_TRY_GOTO(get_int(o, "docs_skipped", 0, &r[k].docs_skipped, what, i), fail);
        LCX_TRY_GOTO(get_int(o, "windows", 0, &r[k].windows, what, i), fail);
        LCX_TRY_GOTO(get_int(o, "tokens", 0, &r[k].tokens, what, i), fail);
        LCX_TRY_GOTO(get_num(o, "mean_nll", &r[k].mean_nll, what, i), fail);
        LCX_TRY_GOTO(get_num(o, "ppl", &r[k].ppl, what, i), fail);
        LCX_TRY_GOTO(get_num(o, "window_mean_nll", &r[k].window_mean_nll, what, i), fail);
        LCX_TRY_GOTO(get_num(o, "ppl_window_mean", &r[k].ppl_window_mean, what, i), fail);
        r[k].nll_sum = r[k].tokens ? r[k].mean_nll * (double)r[k].tokens : 0.0;
    }
    if (name) {
        *series = strdup(json_string_value(name));
        LCX_FAIL_GOTO(!*series, LCX_ERR_OOM, fail, "%s: out of memory", what);
    }
    *results = r;
    *n = (int)count;
    return LCX_OK;
fail:
    free(r);
    return st;
}

json_t *lcx_passkey_to_json(const lcx_passkey_result *r) {
    if (!r) return NULL;
    int ok = 1;
    json_t *root = json_object(), *lens = json_array(), *deps = json_array(), *cells = json_array();
    if (!root || !lens || !deps || !cells) {
        json_decref(root);
        json_decref(lens);
        json_decref(deps);
        json_decref(cells);
        return NULL;
    }
    for (int l = 0; l < r->n_lengths; l++)
        if (json_array_append_new(lens, json_integer(r->lengths[l])) != 0) ok = 0;
    for (int d = 0; d < r->n_depths; d++)
        if (json_array_append_new(deps, json_real(r->depths[d])) != 0) ok = 0;
    put(root, "lengths", lens, &ok);
    put(root, "depths", deps, &ok);
    put(root, "trials", json_integer(r->trials), &ok);
    put(root, "distractors", json_integer(r->distractors), &ok);
    put(root, "needles", json_integer(r->needles > 1 ? r->needles : 1), &ok);
    json_t *modes = json_array();
    if (modes && (r->modes & LCX_PASSKEY_LOGLIK)) json_array_append_new(modes, json_string("loglik"));
    if (modes && (r->modes & LCX_PASSKEY_GREEDY)) json_array_append_new(modes, json_string("greedy"));
    put(root, "modes", modes, &ok);
    for (int l = 0; l < r->n_lengths && ok; l++) {
        for (int d = 0; d < r->n_depths && ok; d++) {
            const int c = l * r->n_depths + d;
            json_t *o = json_object();
            if (!o || json_array_append_new(cells, o) != 0) {
                ok = 0;
                break;
            }
            put(o, "length", json_integer(r->lengths[l]), &ok);
            put(o, "depth", json_real(r->depths[d]), &ok);
            put(o, "prompt_tokens", json_integer(r->prompt_tokens[c]), &ok);
            if (r->modes & LCX_PASSKEY_LOGLIK) {
                put(o, "loglik_correct", json_integer(r->loglik_correct[c]), &ok);
                if (r->needles > 1 && r->loglik_confused)
                    put(o, "loglik_confused", json_integer(r->loglik_confused[c]), &ok);
                put(o, "loglik_accuracy", num(lcx_passkey_accuracy(r, LCX_PASSKEY_LOGLIK, l, d)), &ok);
            }
            if (r->modes & LCX_PASSKEY_GREEDY) {
                put(o, "greedy_correct", json_integer(r->greedy_correct[c]), &ok);
                put(o, "greedy_accuracy", num(lcx_passkey_accuracy(r, LCX_PASSKEY_GREEDY, l, d)), &ok);
            }
        }
    }
    put(root, "cells", cells, &ok);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static lcx_status json_write(const char *path, const json_t *value, int replace) {
    LCX_FAIL_IF(!path || !value, LCX_ERR_INVALID, "eval: no path or no JSON value to write");
    char *text = json_dumps(value, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    LCX_FAIL_IF(!text, LCX_ERR_OOM, "%s: could not serialize the results", path);
    size_t n = strlen(text);
    char *buf = realloc(text, n + 2);
    if (!buf) {
        free(text);
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
    }
    buf[n] = '\n';
    buf[n + 1] = '\0';
    lcx_status st = replace ? lcx_write_file_atomic(path, buf, n + 1) : lcx_write_file_new(path, buf, n + 1);
    free(buf);
    return st;
}

lcx_status lcx_eval_json_write(const char *path, const json_t *value) { return json_write(path, value, 1); }
lcx_status lcx_eval_json_write_new(const char *path, const json_t *value) { return json_write(path, value, 0); }
