/* Helpers shared by the model tests: fixture paths, inputs.json, comparisons. */
#ifndef LCX_TEST_MODEL_FIXTURE_H
#define LCX_TEST_MODEL_FIXTURE_H

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"
#include "src/model/model.h"
#include "test_util.h"
#include "worst_of.h"

/* Logits rows handed out by a forward (lcx_logits_fn): row r is stored at r + base of logits [cap][vocab];
 * seen counts the rows received. */
typedef struct fx_collect {
    float *logits;
    int64_t base, seen, cap;
} fx_collect;

static inline lcx_status fx_on_rows(void *user, int64_t row0, int64_t rows, const float *logits, int64_t vocab) {
    fx_collect *c = user;
    if (row0 + c->base < 0 || row0 + c->base + rows > c->cap) return lcx_fail(LCX_ERR_INVALID, "row out of range");
    memcpy(c->logits + (row0 + c->base) * vocab, logits, (size_t)(rows * vocab) * sizeof(float));
    c->seen += rows;
    return LCX_OK;
}

/* Index of the largest of x[0..V) (ties: the smallest index, as greedy decoding). */
static inline int64_t fx_argmax(const float *x, int64_t V) {
    int64_t b = 0;
    for (int64_t v = 1; v < V; v++)
        if (x[v] > x[b]) b = v;
    return b;
}

static inline char *fx_path(const char *model, const char *sub, const char *file) {
    size_t n = strlen(LCX_SOURCE_DIR) + strlen(model) + strlen(file) + 64;
    char *p = malloc(n);
    snprintf(p, n, "%s/tests/fixtures/%s/%s/%s", LCX_SOURCE_DIR, sub, model, file);
    return p;
}

/* A text file of whitespace-separated token ids (a fixture's ids.txt) into ids; returns the count, 0 on any
 * problem (unreadable, a negative id, more than cap). */
static inline int64_t fx_read_ids(const char *path, int32_t *ids, int64_t cap) {
    char *buf = NULL;
    size_t len = 0;
    if (lcx_read_file(path, 1 << 20, &buf, &len) != LCX_OK) return 0;
    int64_t n = 0;
    char *s = buf, *e;
    for (;;) {
        long v = strtol(s, &e, 10);
        if (e == s) break;
        if (n >= cap || v < 0) {
            n = 0;
            break;
        }
        ids[n++] = (int32_t)v;
        s = e;
    }
    free(buf);
    return n;
}

/* input_ids [1, T] of models/<model>/inputs.json; returns T (0 on failure). */
static inline int64_t fx_inputs(const char *model, int32_t *ids, int64_t cap) {
    char *p = fx_path(model, "models", "inputs.json");
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    free(p);
    if (!j) return 0;
    json_t *row = json_array_get(json_object_get(j, "input_ids"), 0);
    int64_t n = (int64_t)json_array_size(row);
    if (n > cap) n = 0;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(row, (size_t)i));
    json_decref(j);
    return n;
}

/* A number from a JSON file (dotted path of one or two keys). NAN when absent. */
static inline double fx_number(const char *model, const char *sub, const char *file, const char *key,
                               const char *key2) {
    char *p = fx_path(model, sub, file);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    free(p);
    if (!j) return NAN;
    json_t *v = json_object_get(j, key);
    if (key2) v = json_object_get(v, key2);
    double r = json_is_number(v) ? json_number_value(v) : NAN;
    json_decref(j);
    return r;
}

/* All of m's gradients (grads 1) or parameters (grads 0: the stored dtype read back as float32), concatenated in
 * parameter order (malloc'd); *n_out their count. */
static inline float *fx_all_of(lcx_model *m, int grads, size_t *n_out) {
    const lcx_param_table *t = lcx_model_params(m);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) n += (size_t)t->params[i].numel;
    float *g = malloc(n * sizeof(float)), *p = g;
    for (size_t i = 0; i < t->n; i++) {
        CHECK_OK(grads ? lcx_model_get_grad(m, i, p) : lcx_model_get_param(m, i, p));
        p += t->params[i].numel;
    }
    *n_out = n;
    return g;
}
static inline float *fx_all_grads(lcx_model *m, size_t *n_out) { return fx_all_of(m, 1, n_out); }
static inline float *fx_all_params(lcx_model *m, size_t *n_out) { return fx_all_of(m, 0, n_out); }

/* ||a - b|| / ||b|| in double. */
static inline double rel_norm_err(const float *a, const float *b, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* max |a - b| / max |b|: the error relative to the largest reference value. */
static inline double rel_max_err(const float *a, const float *b, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        d = worst_of(d, e);
        if (fabs(b[i]) > r) r = fabs(b[i]);
    }
    return r > 0 ? d / r : d;
}

/* A fixture model (tests/fixtures/models/NAME) opened with options o. */
static inline lcx_model *fx_open(const char *model, lcx_model_opts o) {
    char *dir = fx_path(model, "models", "");
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    free(dir);
    return m;
}

/* Every gradient of the nb batches b (concatenated in parameter order, malloc'd), the loss normalised by their
 * total token count; *loss their mean loss. */
static inline float *fx_grads(lcx_model *m, const lcx_batch *b, int nb, size_t *n_out, double *loss) {
    CHECK_OK(lcx_model_zero_grads(m));
    int64_t total = 0;
    for (int i = 0; i < nb; i++) total += lcx_batch_count(&b[i]);
    double sum = 0;
    for (int i = 0; i < nb; i++) {
        double l = 0;
        CHECK_OK(lcx_model_forward_backward(m, &b[i], (float)(1.0 / (double)total), &l, NULL));
        sum += l;
    }
    *loss = sum / (double)total;
    return fx_all_grads(m, n_out);
}

#endif
