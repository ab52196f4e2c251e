/* recipe: YAML recipes through libyaml's document API (nodes carry their start marks for FILE:LINE errors). */
#include "src/plan/recipe.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "src/core/strbuf.h" /* lcx_printable */
#include "src/core/fileio.h"
#include "src/core/units.h"

#define RECIPE_MAX_BYTES (1u << 20)
#define MAX_LENGTH (INT64_C(1) << 34) /* = LCX_CONFIG_MAX_POSITIONS */


/* Key names of a stage / defaults block, indexed like lcx_recipe_field where they map 1:1 (lr.* are nested). */
static const char *const stage_keys[] = {"seq_len", "method", "factor", "theta", "low_freq_factor",
    "high_freq_factor", "short_factor", "long_factor", "steps", "tokens", "lr", "tokens_per_batch", "grad_accum",
    "eval_lengths", "eval_stride", "save_interval", "activation", "clip_norm", "weight_decay", "seed",
    "attention_mask", "min_doc_tokens", "long_doc_tokens", "long_doc_repeat", NULL};
static const char *const lr_keys[] = {"peak", "warmup_steps", "schedule", "min_lr", "decay_fraction", "decay_type",
    NULL};
static const char *const top_keys[] = {"name", "description", "defaults", "stages", NULL};
static const char *const field_names[LCX_RF_COUNT] = {"seq_len", "method", "factor", "theta", "low_freq_factor",
    "high_freq_factor", "short_factor", "long_factor", "steps", "tokens", "lr.peak", "lr.warmup_steps",
    "lr.schedule", "lr.min_lr", "tokens_per_batch", "grad_accum", "eval_lengths", "eval_stride", "save_interval",
    "activation", "clip_norm", "weight_decay", "seed", "attention_mask", "min_doc_tokens", "long_doc_tokens",
    "long_doc_repeat", "lr.decay_fraction", "lr.decay_type"};

const char *lcx_recipe_field_name(lcx_recipe_field f) {
    return (f >= 0 && f < LCX_RF_COUNT) ? field_names[f] : "?";
}

typedef struct pctx {
    const char *label;
    yaml_document_t *doc;
    int64_t divisor;
} pctx;

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

/* "FILE:LINE: key 'k': <message>" */
static lcx_status kfail(const pctx *c, const yaml_node_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lcx_status kfail(const pctx *c, const yaml_node_t *n, const char *key, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (key) return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key '%s': %s", c->label, n ? line_of(n) : 0, key, msg);
    return lcx_fail(LCX_ERR_FORMAT, "%s:%d: %s", c->label, n ? line_of(n) : 0, msg);
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static const char *node_kind(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "nothing";
    }
}

/* YAML's null spellings for a plain scalar. */
static int is_null(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static lcx_status want_scalar(const pctx *c, const yaml_node_t *n, const char *key, const char *what) {
    if (n->type != YAML_SCALAR_NODE)
        return kfail(c, n, key, "expected %s, got %s", what, node_kind(n));
    if (is_null(n)) return kfail(c, n, key, "expected %s, got no value", what);
    return LCX_OK;
}

/* Damerau-free Levenshtein distance, small strings only (suggestions). */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    int d[41][41];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

static lcx_status unknown_key(const pctx *c, const yaml_node_t *kn, const char *where, const char *const *keys) {
    char shown[64];
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; keys[i]; i++) {
        int dd = edit_distance(scalar(kn), keys[i]);
        if (dd < bd) bd = dd, best = keys[i];
    }
    lcx_printable(scalar(kn), shown, sizeof shown);
    if (best) return kfail(c, kn, shown, "unknown key in %s (did you mean '%s'?)", where, best);
    return kfail(c, kn, shown, "unknown key in %s", where);
}

/* Walk a mapping: every key a plain string, no duplicates. */
static lcx_status check_mapping(const pctx *c, const yaml_node_t *m, const char *key, const char *what) {
    if (m->type != YAML_MAPPING_NODE) return kfail(c, m, key, "expected %s (a mapping), got %s", what, node_kind(m));
    ptrdiff_t n = m->data.mapping.pairs.top - m->data.mapping.pairs.start;
    if (n > LCX_RECIPE_MAX_KEYS) /* the duplicate check below is quadratic */
        return kfail(c, m, key, "%s has %td keys, more than the limit of %d", what, n, LCX_RECIPE_MAX_KEYS);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return kfail(c, k, key, "%s keys must be plain names, got %s", what, node_kind(k));
        for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *k2 = yaml_document_get_node(c->doc, q->key);
            if (k2->type == YAML_SCALAR_NODE && !strcmp(scalar(k2), scalar(k))) {
                char shown[64];
                return kfail(c, k, lcx_printable(scalar(k), shown, sizeof shown), "duplicate key (first at line %d)",
                             line_of(k2));
            }
        }
    }
    return LCX_OK;
}

/* ---- typed scalars ---------------------------------------------------------------------------------------- */
static lcx_status get_number(const pctx *c, const yaml_node_t *n, const char *key, double *out) {
    LCX_TRY(want_scalar(c, n, key, "a number"));
    char shown[48];
    const char *s = scalar(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return kfail(c, n, key, "expected a number, got the quoted string \"%s\"", lcx_printable(s, shown, sizeof shown));
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* strtod also takes hex, inf and nan: refuse them, numbers are decimal here. */
    int odd = strpbrk(s, "xXiInN") != NULL || *s == ' ' || *s == '\t';
    if (end == s || *end || odd || errno == ERANGE || !isfinite(v))
        return kfail(c, n, key, "expected a number, got '%s'", lcx_printable(s, shown, sizeof shown));
    *out = v;
    return LCX_OK;
}

/* An integer: decimal digits with an optional sign (so "-5" gets a range error, not a type error); with
 * allow_exp also 8e8 / 1.5e9 when the value is a whole number. */
static lcx_status get_int(const pctx *c, const yaml_node_t *n, const char *key, int allow_exp, int64_t *out) {
    LCX_TRY(want_scalar(c, n, key, "an integer"));
    char shown[48];
    const char *s = scalar(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return kfail(c, n, key, "expected an integer, got the quoted string \"%s\"",
                     lcx_printable(s, shown, sizeof shown));
    const char *p = s;
    if (*p == '-' || *p == '+') p++;
    int digits = 1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') digits = 0;
    if (digits && *p) { /* the syntax is fine: lcx_parse_int can only find it out of range */
        if (lcx_parse_int(s + (*s == '+'), INT64_MIN, INT64_MAX, out) != LCX_OK)
            return kfail(c, n, key, "integer '%s' is out of range", lcx_printable(s, shown, sizeof shown));
        return LCX_OK;
    }
    if (allow_exp) {
        double v;
        lcx_status st = get_number(c, n, key, &v);
        if (st == LCX_OK && v == floor(v) && fabs(v) < 9.0e18) {
            *out = (int64_t)v;
            return LCX_OK;
        }
        lcx_clear_error();
    }
    return kfail(c, n, key, "expected an integer, got '%s'", lcx_printable(s, shown, sizeof shown));
}

static lcx_status get_length(const pctx *c, const yaml_node_t *n, const char *key, int64_t *out) {
    LCX_TRY(want_scalar(c, n, key, "a length (e.g. 32768, 32k, 1m)"));
    lcx_status st = lcx_parse_length(scalar(n), MAX_LENGTH, out);
    if (st != LCX_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", lcx_last_error());
        return kfail(c, n, key, "%s", msg);
    }
    return LCX_OK;
}

static int is_word(const yaml_node_t *n, const char *w) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !strcmp(scalar(n), w);
}

static lcx_status get_string(const pctx *c, const yaml_node_t *n, const char *key, char **out) {
    LCX_TRY(want_scalar(c, n, key, "a string"));
    char *s = strdup(scalar(n));
    LCX_FAIL_IF(!s, LCX_ERR_OOM, "out of memory");
    free(*out);
    *out = s;
    return LCX_OK;
}

static lcx_status get_number_list(const pctx *c, const yaml_node_t *n, const char *key, double **out, int *count) {
    if (n->type != YAML_SEQUENCE_NODE) return kfail(c, n, key, "expected a list of numbers, got %s", node_kind(n));
    ptrdiff_t cnt = n->data.sequence.items.top - n->data.sequence.items.start;
    if (cnt < 1 || cnt > LCX_ROPE_MAX_PAIRS)
        return kfail(c, n, key, "expected 1 to %d numbers, got %td", LCX_ROPE_MAX_PAIRS, cnt);
    double *v = malloc((size_t)cnt * sizeof *v);
    LCX_FAIL_IF(!v, LCX_ERR_OOM, "out of memory");
    for (ptrdiff_t i = 0; i < cnt; i++) {
        yaml_node_t *it = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        lcx_status st = get_number(c, it, key, &v[i]);
        if (st == LCX_OK && !(v[i] > 0)) st = kfail(c, it, key, "list entries must be > 0, got %g", v[i]);
        if (st != LCX_OK) {
            free(v);
            return st;
        }
    }
    free(*out);
    *out = v;
    *count = (int)cnt;
    return LCX_OK;
}

/* ---- one stage / the defaults block ------------------------------------------------------------------------ */
#define SET(f, n) (st_->set |= 1u << (f), st_->line[f] = line_of(n))

static lcx_status parse_lr(const pctx *c, const yaml_node_t *v, lcx_recipe_stage *st_) {
    if (v->type == YAML_SCALAR_NODE) { /* lr: 2e-5 is short for lr: {peak: 2e-5} */
        LCX_TRY(get_number(c, v, "lr", &st_->lr_peak));
        if (!(st_->lr_peak > 0)) return kfail(c, v, "lr", "must be > 0, got %g", st_->lr_peak);
        SET(LCX_RF_LR_PEAK, v);
        return LCX_OK;
    }
    LCX_TRY(check_mapping(c, v, "lr", "lr"));
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key), *x = yaml_document_get_node(c->doc, p->value);
        const char *key = scalar(k);
        if (!strcmp(key, "peak")) {
            LCX_TRY(get_number(c, x, "lr.peak", &st_->lr_peak));
            if (!(st_->lr_peak > 0)) return kfail(c, x, "lr.peak", "must be > 0, got %g", st_->lr_peak);
            SET(LCX_RF_LR_PEAK, x);
        } else if (!strcmp(key, "min_lr")) {
            LCX_TRY(get_number(c, x, "lr.min_lr", &st_->lr_min));
            if (st_->lr_min < 0) return kfail(c, x, "lr.min_lr", "must be >= 0, got %g", st_->lr_min);
            SET(LCX_RF_LR_MIN, x);
        } else if (!strcmp(key, "warmup_steps")) {
            LCX_TRY(get_int(c, x, "lr.warmup_steps", 0, &st_->lr_warmup));
            if (st_->lr_warmup < 0)
                return kfail(c, x, "lr.warmup_steps", "must be >= 0, got %lld", (long long)st_->lr_warmup);
            SET(LCX_RF_LR_WARMUP, x);
        } else if (!strcmp(key, "schedule")) {
            LCX_TRY(want_scalar(c, x, "lr.schedule", "cosine, constant or wsd"));
            if (lcx_lr_kind_parse(scalar(x), &st_->lr_schedule) != 0) {
                char shown[48];
                return kfail(c, x, "lr.schedule", "unknown schedule '%s' (expected cosine, constant or wsd)",
                             lcx_printable(scalar(x), shown, sizeof shown));
            }
            SET(LCX_RF_LR_SCHEDULE, x);
        } else if (!strcmp(key, "decay_fraction")) {
            LCX_TRY(get_number(c, x, "lr.decay_fraction", &st_->lr_decay_fraction));
            if (!(st_->lr_decay_fraction > 0 && st_->lr_decay_fraction <= 1))
                return kfail(c, x, "lr.decay_fraction", "must be in (0, 1], got %g", st_->lr_decay_fraction);
            SET(LCX_RF_LR_DECAY_FRACTION, x);
        } else if (!strcmp(key, "decay_type")) {
            LCX_TRY(want_scalar(c, x, "lr.decay_type", "cosine, linear or 1-sqrt"));
            if (lcx_lr_decay_parse(scalar(x), &st_->lr_decay_type) != 0) {
                char shown[48];
                return kfail(c, x, "lr.decay_type", "unknown decay '%s' (expected cosine, linear or 1-sqrt)",
                             lcx_printable(scalar(x), shown, sizeof shown));
            }
            SET(LCX_RF_LR_DECAY_TYPE, x);
        } else {
            return unknown_key(c, k, "lr", lr_keys);
        }
    }
    if ((st_->set & (1u << LCX_RF_LR_PEAK)) && (st_->set & (1u << LCX_RF_LR_MIN)) && st_->lr_min > st_->lr_peak)
        return kfail(c, v, "lr.min_lr", "min_lr %g is above peak %g", st_->lr_min, st_->lr_peak);
    return LCX_OK;
}

static lcx_status parse_activation(const pctx *c, const yaml_node_t *v, lcx_recipe_stage *st_) {
    const char *key = "activation";
    if (v->type == YAML_SEQUENCE_NODE) {
        ptrdiff_t cnt = v->data.sequence.items.top - v->data.sequence.items.start;
        if (cnt < 1 || cnt > LCX_RECIPE_MAX_LAYERS)
            return kfail(c, v, key, "expected one policy per layer (1 to %d), got %td", LCX_RECIPE_MAX_LAYERS, cnt);
        lcx_act_policy *a = malloc((size_t)cnt * sizeof *a);
        LCX_FAIL_IF(!a, LCX_ERR_OOM, "out of memory");
        for (ptrdiff_t i = 0; i < cnt; i++) {
            yaml_node_t *it = yaml_document_get_node(c->doc, v->data.sequence.items.start[i]);
            lcx_act_policy found = LCX_ACT_COUNT; /* a per-layer list names concrete policies */
            if (it->type == YAML_SCALAR_NODE && lcx_act_policy_parse(scalar(it), &found) != LCX_OK) {
                lcx_clear_error();
                found = LCX_ACT_COUNT;
            }
            if (found == LCX_ACT_COUNT) {
                char shown[48];
                free(a);
                return kfail(c, it, key, "layer %td: expected keep, recompute, offload or recompute+offload, got '%s'", i,
                             it->type == YAML_SCALAR_NODE ? lcx_printable(scalar(it), shown, sizeof shown)
                                                          : node_kind(it));
            }
            a[i] = found;
        }
        free(st_->activation_list);
        st_->activation_list = a;
        st_->n_activation = (int)cnt;
        SET(LCX_RF_ACTIVATION, v);
        return LCX_OK;
    }
    LCX_TRY(want_scalar(c, v, key, "keep, recompute, offload, recompute+offload, auto or a per-layer list"));
    lcx_act_policy p = LCX_ACT_AUTO;
    if (strcmp(scalar(v), "auto") != 0 && lcx_act_policy_parse(scalar(v), &p) != LCX_OK) {
        lcx_clear_error();
        p = LCX_ACT_COUNT;
    }
    if (p != LCX_ACT_COUNT) {
        st_->activation = p;
        st_->n_activation = 0;
        SET(LCX_RF_ACTIVATION, v);
        return LCX_OK;
    }
    char shown[48];
    return kfail(c, v, key,
                 "unknown policy '%s' (expected keep, recompute, offload, recompute+offload, auto or a per-layer list)",
                 lcx_printable(scalar(v), shown, sizeof shown));
}

static lcx_status parse_theta(const pctx *c, const yaml_node_t *v, lcx_recipe_stage *st_) {
    if (v->type == YAML_MAPPING_NODE) {
        LCX_TRY(check_mapping(c, v, "theta", "theta"));
        static const char *const theta_keys[] = {"per_doubling", NULL};
        int got = 0;
        for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key), *x = yaml_document_get_node(c->doc, p->value);
            if (strcmp(scalar(k), "per_doubling") != 0) return unknown_key(c, k, "theta", theta_keys);
            LCX_TRY(get_number(c, x, "theta.per_doubling", &st_->theta));
            if (!(st_->theta > 1))
                return kfail(c, x, "theta.per_doubling", "must be > 1 (theta grows with the context), got %g",
                             st_->theta);
            got = 1;
        }
        if (!got) return kfail(c, v, "theta", "a schedule needs per_doubling");
        st_->theta_kind = LCX_THETA_PER_DOUBLING;
    } else if (is_word(v, "auto")) {
        st_->theta_kind = LCX_THETA_AUTO;
    } else {
        LCX_TRY(get_number(c, v, "theta", &st_->theta));
        if (!(st_->theta > 0)) return kfail(c, v, "theta", "must be > 0, got %g", st_->theta);
        st_->theta_kind = LCX_THETA_VALUE;
    }
    SET(LCX_RF_THETA, v);
    return LCX_OK;
}

static int has(const lcx_recipe_stage *s, lcx_recipe_field f) { return (s->set >> f) & 1u; }

static lcx_status parse_stage(const pctx *c, const yaml_node_t *m, int is_stage, const char *what,
                              lcx_recipe_stage *st_) {
    LCX_TRY(check_mapping(c, m, is_stage ? "stages" : "defaults", what));
    st_->line_start = line_of(m);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key), *v = yaml_document_get_node(c->doc, p->value);
        const char *key = scalar(k);
        char shown[48];
        if (!strcmp(key, "seq_len")) {
            if (!is_stage) return kfail(c, k, key, "belongs in a stage, not in defaults");
            if (is_word(v, "auto")) st_->seq_kind = LCX_SEQ_AUTO;
            else if (is_word(v, "target")) st_->seq_kind = LCX_SEQ_TARGET;
            else {
                LCX_TRY(get_length(c, v, key, &st_->seq_len));
                if (st_->seq_len % c->divisor != 0)
                    return kfail(c, v, key, "%lld is not a multiple of %lld (%s: the parallel layout needs every "
                                 "stage length to be a multiple of 2 x CP)", (long long)st_->seq_len,
                                 (long long)c->divisor, what);
                st_->seq_kind = LCX_SEQ_VALUE;
            }
            SET(LCX_RF_SEQ_LEN, v);
        } else if (!strcmp(key, "method")) {
            LCX_TRY(want_scalar(c, v, key, "a method name"));
            if (lcx_rope_method_parse(scalar(v), &st_->method) != LCX_OK) {
                lcx_clear_error();
                return kfail(c, v, key, "unknown method '%s' (expected yarn, pi, abf, ntk, llama3 or longrope)",
                             lcx_printable(scalar(v), shown, sizeof shown));
            }
            if (st_->method == LCX_EXTEND_DYNAMIC)
                return kfail(c, v, key, "method 'dynamic' is for evaluation only, not for training stages");
            SET(LCX_RF_METHOD, v);
        } else if (!strcmp(key, "factor")) {
            if (is_word(v, "auto")) st_->factor_auto = 1;
            else {
                LCX_TRY(get_number(c, v, key, &st_->factor));
                if (!(st_->factor >= 1)) return kfail(c, v, key, "must be >= 1 (or auto), got %g", st_->factor);
                st_->factor_auto = 0;
            }
            SET(LCX_RF_FACTOR, v);
        } else if (!strcmp(key, "theta")) {
            LCX_TRY(parse_theta(c, v, st_));
        } else if (!strcmp(key, "low_freq_factor") || !strcmp(key, "high_freq_factor")) {
            int low = key[0] == 'l';
            double x;
            LCX_TRY(get_number(c, v, key, &x));
            if (!(x > 0)) return kfail(c, v, key, "must be > 0, got %g", x);
            if (low) st_->low_freq_factor = x, SET(LCX_RF_LOW_FREQ, v);
            else st_->high_freq_factor = x, SET(LCX_RF_HIGH_FREQ, v);
        } else if (!strcmp(key, "short_factor")) {
            LCX_TRY(get_number_list(c, v, key, &st_->short_factor, &st_->n_short_factor));
            SET(LCX_RF_SHORT_FACTOR, v);
        } else if (!strcmp(key, "long_factor")) {
            LCX_TRY(get_number_list(c, v, key, &st_->long_factor, &st_->n_long_factor));
            SET(LCX_RF_LONG_FACTOR, v);
        } else if (!strcmp(key, "steps") || !strcmp(key, "tokens")) {
            int steps = key[0] == 's';
            int64_t x;
            LCX_TRY(get_int(c, v, key, !steps, &x));
            if (x < 1) return kfail(c, v, key, "must be >= 1, got %lld", (long long)x);
            if (steps) st_->steps = x, SET(LCX_RF_STEPS, v);
            else st_->tokens = x, SET(LCX_RF_TOKENS, v);
        } else if (!strcmp(key, "lr")) {
            LCX_TRY(parse_lr(c, v, st_));
        } else if (!strcmp(key, "tokens_per_batch")) {
            LCX_TRY(get_length(c, v, key, &st_->tokens_per_batch));
            SET(LCX_RF_TOKENS_PER_BATCH, v);
        } else if (!strcmp(key, "grad_accum")) {
            if (is_word(v, "auto")) st_->grad_accum = 0;
            else LCX_TRY(get_int(c, v, key, 0, &st_->grad_accum));
            if (st_->grad_accum == 0) {
                SET(LCX_RF_GRAD_ACCUM, v);
                continue;
            }
            if (st_->grad_accum < 1 || st_->grad_accum > 65536)
                return kfail(c, v, key, "must be 1 to 65536, got %lld", (long long)st_->grad_accum);
            SET(LCX_RF_GRAD_ACCUM, v);
        } else if (!strcmp(key, "eval_lengths")) {
            if (is_word(v, "auto")) {
                st_->eval_auto = 1, st_->n_eval = 0;
            } else if (v->type == YAML_SEQUENCE_NODE) {
                ptrdiff_t cnt = v->data.sequence.items.top - v->data.sequence.items.start;
                if (cnt < 1 || cnt > LCX_RECIPE_MAX_EVAL)
                    return kfail(c, v, key, "expected 1 to %d lengths, got %td", LCX_RECIPE_MAX_EVAL, cnt);
                for (ptrdiff_t i = 0; i < cnt; i++)
                    LCX_TRY(get_length(c, yaml_document_get_node(c->doc, v->data.sequence.items.start[i]), key,
                                       &st_->eval_lengths[i]));
                st_->eval_auto = 0, st_->n_eval = (int)cnt;
            } else {
                return kfail(c, v, key, "expected auto or a list of lengths, got %s", node_kind(v));
            }
            SET(LCX_RF_EVAL_LENGTHS, v);
        } else if (!strcmp(key, "eval_stride")) {
            if (is_word(v, "window")) st_->eval_stride = 0;
            else LCX_TRY(get_length(c, v, key, &st_->eval_stride));
            SET(LCX_RF_EVAL_STRIDE, v);
        } else if (!strcmp(key, "save_interval")) {
            LCX_TRY(get_int(c, v, key, 0, &st_->save_interval));
            if (st_->save_interval < 0)
                return kfail(c, v, key, "must be >= 0 (0 = only at the end of the stage), got %lld",
                             (long long)st_->save_interval);
            SET(LCX_RF_SAVE_INTERVAL, v);
        } else if (!strcmp(key, "activation")) {
            LCX_TRY(parse_activation(c, v, st_));
        } else if (!strcmp(key, "clip_norm") || !strcmp(key, "weight_decay")) {
            int clip = key[0] == 'c';
            double x;
            LCX_TRY(get_number(c, v, key, &x));
            if (x < 0) return kfail(c, v, key, "must be >= 0, got %g", x);
            if (clip) st_->clip_norm = x, SET(LCX_RF_CLIP_NORM, v);
            else st_->weight_decay = x, SET(LCX_RF_WEIGHT_DECAY, v);
        } else if (!strcmp(key, "seed")) {
            int64_t x;
            LCX_TRY(get_int(c, v, key, 0, &x));
            if (x < 0) return kfail(c, v, key, "must be >= 0, got %lld", (long long)x);
            st_->seed = (uint64_t)x;
            SET(LCX_RF_SEED, v);
        } else if (!strcmp(key, "attention_mask")) {
            LCX_TRY(want_scalar(c, v, key, "causal or document"));
            char shown[48];
            if (is_word(v, "causal")) st_->doc_mask = 0;
            else if (is_word(v, "document")) st_->doc_mask = 1;
            else return kfail(c, v, key, "expected causal or document, got '%s'",
                              lcx_printable(scalar(v), shown, sizeof shown));
            SET(LCX_RF_ATTENTION_MASK, v);
        } else if (!strcmp(key, "min_doc_tokens")) {
            LCX_TRY(get_length(c, v, key, &st_->min_doc_tokens));
            SET(LCX_RF_MIN_DOC_TOKENS, v);
        } else if (!strcmp(key, "long_doc_tokens")) {
            LCX_TRY(get_length(c, v, key, &st_->long_doc_tokens));
            SET(LCX_RF_LONG_DOC_TOKENS, v);
        } else if (!strcmp(key, "long_doc_repeat")) {
            LCX_TRY(get_int(c, v, key, 0, &st_->long_doc_repeat));
            if (st_->long_doc_repeat < 1 || st_->long_doc_repeat > 1000)
                return kfail(c, v, key, "must be in [1, 1000] (times a long document is drawn per epoch), got %lld",
                             (long long)st_->long_doc_repeat);
            SET(LCX_RF_LONG_DOC_REPEAT, v);
        } else {
            return unknown_key(c, k, what, stage_keys);
        }
    }
    /* Combinations that contradict each other inside one block (reported at the second key's line). */
    if (has(st_, LCX_RF_STEPS) && has(st_, LCX_RF_TOKENS))
        return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key 'tokens': give steps or tokens, not both (steps at line %d)",
                        c->label, st_->line[LCX_RF_TOKENS], st_->line[LCX_RF_STEPS]);
    if (has(st_, LCX_RF_METHOD)) {
        lcx_rope_method me = st_->method;
        const char *mn = lcx_rope_method_name(me);
        lcx_recipe_field bad = LCX_RF_COUNT;
        const char *why = "";
        if (has(st_, LCX_RF_FACTOR) && (me == LCX_EXTEND_ABF || me == LCX_EXTEND_NTK))
            bad = LCX_RF_FACTOR, why = "has no factor (abf takes theta, ntk derives it)";
        else if (has(st_, LCX_RF_THETA) && me != LCX_EXTEND_ABF)
            bad = LCX_RF_THETA, why = "takes no theta (theta applies to method abf only)";
        else if (has(st_, LCX_RF_LOW_FREQ) && me != LCX_EXTEND_LLAMA3)
            bad = LCX_RF_LOW_FREQ, why = "takes no low_freq_factor (llama3 only)";
        else if (has(st_, LCX_RF_HIGH_FREQ) && me != LCX_EXTEND_LLAMA3)
            bad = LCX_RF_HIGH_FREQ, why = "takes no high_freq_factor (llama3 only)";
        else if (has(st_, LCX_RF_SHORT_FACTOR) && me != LCX_EXTEND_LONGROPE)
            bad = LCX_RF_SHORT_FACTOR, why = "takes no short_factor (longrope only)";
        else if (has(st_, LCX_RF_LONG_FACTOR) && me != LCX_EXTEND_LONGROPE)
            bad = LCX_RF_LONG_FACTOR, why = "takes no long_factor (longrope only)";
        if (bad != LCX_RF_COUNT)
            return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key '%s': method %s (line %d) %s", c->label, st_->line[bad],
                            field_names[bad], mn, st_->line[LCX_RF_METHOD], why);
    }
    return LCX_OK;
}

/* ---- resolution ----------------------------------------------------------------------------------------- */
void lcx_recipe_builtin_defaults(lcx_recipe_stage *d) {
    memset(d, 0, sizeof *d);
    d->seq_kind = LCX_SEQ_AUTO;
    d->method = LCX_EXTEND_YARN;
    d->factor_auto = 1;
    d->theta_kind = LCX_THETA_AUTO;
    d->lr_schedule = LCX_LR_CONSTANT; /* PI and YaRN: 20 warm-up steps, then constant 2e-5 */
    d->lr_peak = 2e-5;
    d->lr_min = 0;
    d->lr_warmup = 20;
    d->lr_decay_fraction = LCX_LR_WSD_DECAY_FRACTION;
    d->lr_decay_type = LCX_DECAY_COSINE;
    d->tokens_per_batch = 0;
    d->grad_accum = 0; /* auto: one sequence per device per micro-batch */
    d->eval_auto = 1;
    d->eval_stride = 256; /* docs/evaluation-protocol.md: default stride */
    d->save_interval = 0;
    d->activation = LCX_ACT_AUTO;
    d->clip_norm = 1.0;
    d->weight_decay = 0.0;
    d->seed = 0;
}

/* Copy field f (and the values it covers) from src into dst. */
static void take(lcx_recipe_stage *dst, const lcx_recipe_stage *src, lcx_recipe_field f) {
    dst->set |= 1u << f;
    dst->line[f] = src->line[f];
    switch (f) {
    case LCX_RF_SEQ_LEN: dst->seq_kind = src->seq_kind, dst->seq_len = src->seq_len; break;
    case LCX_RF_METHOD: dst->method = src->method; break;
    case LCX_RF_FACTOR: dst->factor_auto = src->factor_auto, dst->factor = src->factor; break;
    case LCX_RF_THETA: dst->theta_kind = src->theta_kind, dst->theta = src->theta; break;
    case LCX_RF_LOW_FREQ: dst->low_freq_factor = src->low_freq_factor; break;
    case LCX_RF_HIGH_FREQ: dst->high_freq_factor = src->high_freq_factor; break;
    case LCX_RF_SHORT_FACTOR: dst->n_short_factor = src->n_short_factor, dst->short_factor = src->short_factor; break;
    case LCX_RF_LONG_FACTOR: dst->n_long_factor = src->n_long_factor, dst->long_factor = src->long_factor; break;
    case LCX_RF_STEPS: dst->steps = src->steps; break;
    case LCX_RF_TOKENS: dst->tokens = src->tokens; break;
    case LCX_RF_LR_PEAK: dst->lr_peak = src->lr_peak; break;
    case LCX_RF_LR_WARMUP: dst->lr_warmup = src->lr_warmup; break;
    case LCX_RF_LR_SCHEDULE: dst->lr_schedule = src->lr_schedule; break;
    case LCX_RF_LR_MIN: dst->lr_min = src->lr_min; break;
    case LCX_RF_TOKENS_PER_BATCH: dst->tokens_per_batch = src->tokens_per_batch; break;
    case LCX_RF_GRAD_ACCUM: dst->grad_accum = src->grad_accum; break;
    case LCX_RF_EVAL_LENGTHS:
        dst->eval_auto = src->eval_auto, dst->n_eval = src->n_eval;
        memcpy(dst->eval_lengths, src->eval_lengths, sizeof dst->eval_lengths);
        break;
    case LCX_RF_EVAL_STRIDE: dst->eval_stride = src->eval_stride; break;
    case LCX_RF_SAVE_INTERVAL: dst->save_interval = src->save_interval; break;
    case LCX_RF_ACTIVATION:
        dst->activation = src->activation, dst->n_activation = src->n_activation;
        dst->activation_list = src->activation_list;
        break;
    case LCX_RF_CLIP_NORM: dst->clip_norm = src->clip_norm; break;
    case LCX_RF_WEIGHT_DECAY: dst->weight_decay = src->weight_decay; break;
    case LCX_RF_SEED: dst->seed = src->seed; break;
    case LCX_RF_ATTENTION_MASK: dst->doc_mask = src->doc_mask; break;
    case LCX_RF_MIN_DOC_TOKENS: dst->min_doc_tokens = src->min_doc_tokens; break;
    case LCX_RF_LONG_DOC_TOKENS: dst->long_doc_tokens = src->long_doc_tokens; break;
    case LCX_RF_LONG_DOC_REPEAT: dst->long_doc_repeat = src->long_doc_repeat; break;
    case LCX_RF_LR_DECAY_FRACTION: dst->lr_decay_fraction = src->lr_decay_fraction; break;
    case LCX_RF_LR_DECAY_TYPE: dst->lr_decay_type = src->lr_decay_type; break;
    default: break;
    }
}

void lcx_recipe_stage_resolve(const lcx_recipe *r, size_t i, lcx_recipe_stage *out) {
    LCX_ASSERT(i < r->n_stages);
    const lcx_recipe_stage *s = &r->stages[i], *d = &r->defaults;
    lcx_recipe_builtin_defaults(out);
    out->line_start = s->line_start;
    for (int f = 0; f < LCX_RF_COUNT; f++) {
        if (has(s, (lcx_recipe_field)f)) take(out, s, (lcx_recipe_field)f);
        else if (has(d, (lcx_recipe_field)f)) take(out, d, (lcx_recipe_field)f);
    }
    /* steps and tokens are one budget: the more specific block decides which one applies. */
    if (has(s, LCX_RF_STEPS) || has(s, LCX_RF_TOKENS)) {
        if (!has(s, LCX_RF_STEPS)) out->steps = 0, out->set &= ~(1u << LCX_RF_STEPS);
        if (!has(s, LCX_RF_TOKENS)) out->tokens = 0, out->set &= ~(1u << LCX_RF_TOKENS);
    }
    out->set |= (1u << LCX_RF_COUNT) - 1;
    if (!out->steps && !out->tokens) out->set &= ~((1u << LCX_RF_STEPS) | (1u << LCX_RF_TOKENS));
    else if (!out->steps) out->set &= ~(1u << LCX_RF_STEPS);
    else if (!out->tokens) out->set &= ~(1u << LCX_RF_TOKENS);
}

/* Checks across blocks and stages, after merging. */
static lcx_status check_stages(const pctx *c, const lcx_recipe *r, yaml_node_t *const *stage_nodes) {
    int64_t prev = 0;
    int prev_line = 0;
    for (size_t i = 0; i < r->n_stages; i++) {
        lcx_recipe_stage s;
        lcx_recipe_stage_resolve(r, i, &s);
        const yaml_node_t *n = stage_nodes[i];
        char what[32];
        snprintf(what, sizeof what, "stages[%zu]", i);
        if (!has(&r->stages[i], LCX_RF_SEQ_LEN)) return kfail(c, n, "seq_len", "%s needs a seq_len", what);
        if (s.seq_kind != LCX_SEQ_VALUE && i + 1 != r->n_stages)
            return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key 'seq_len': '%s' must be the last stage (%s is followed by "
                                            "another stage)",
                            c->label, s.line[LCX_RF_SEQ_LEN], s.seq_kind == LCX_SEQ_AUTO ? "auto" : "target", what);
        if (s.seq_kind == LCX_SEQ_VALUE) {
            if (s.seq_len <= prev)
                return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key 'seq_len': stage lengths must increase: %lld after %lld "
                                                "(line %d)",
                                c->label, s.line[LCX_RF_SEQ_LEN], (long long)s.seq_len, (long long)prev, prev_line);
            prev = s.seq_len, prev_line = s.line[LCX_RF_SEQ_LEN];
        }
        if (!s.steps && !s.tokens)
            return kfail(c, n, "steps", "%s has no training budget: give steps or tokens (here or in defaults)", what);
        if (s.lr_min > s.lr_peak)
            return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key 'lr.min_lr': %s: min_lr %g is above peak %g", c->label,
                            s.line[LCX_RF_LR_MIN] ? s.line[LCX_RF_LR_MIN] : line_of(n), what, s.lr_min, s.lr_peak);
        /* the built-in warm-up (20) shrinks to a short stage; only a written one can be wrong */
        if (s.steps && s.lr_warmup > s.steps && s.line[LCX_RF_LR_WARMUP])
            return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key 'lr.warmup_steps': %s: %lld warm-up steps exceed its %lld "
                                            "steps",
                            c->label, s.line[LCX_RF_LR_WARMUP], what, (long long)s.lr_warmup, (long long)s.steps);
        for (lcx_recipe_field f = LCX_RF_LR_DECAY_FRACTION; f <= LCX_RF_LR_DECAY_TYPE; f++)
            if (s.lr_schedule != LCX_LR_WSD && has(&r->stages[i], f))
                return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key '%s': %s: only the wsd schedule has a decay phase (its "
                                                "schedule is %s)",
                                c->label, s.line[f], field_names[f], what, lcx_lr_kind_name(s.lr_schedule));
        if (s.save_interval && s.steps && s.save_interval > s.steps)
            return lcx_fail(LCX_ERR_FORMAT, "%s:%d: key 'save_interval': %s: %lld is above its %lld steps", c->label,
                            s.line[LCX_RF_SAVE_INTERVAL], what, (long long)s.save_interval, (long long)s.steps);
        if (s.method == LCX_EXTEND_LONGROPE && (!s.n_short_factor || !s.n_long_factor))
            return kfail(c, n, "method", "%s: longrope needs short_factor and long_factor lists", what);
        if ((s.method == LCX_EXTEND_ABF || s.method == LCX_EXTEND_NTK) && has(&r->stages[i], LCX_RF_FACTOR))
            return kfail(c, n, "factor", "%s: method %s has no factor", what, lcx_rope_method_name(s.method));
    }
    return LCX_OK;
}

/* ---- document ------------------------------------------------------------------------------------------ */
static lcx_status syntax_error(const char *label, const yaml_parser_t *p) {
    const char *problem = p->problem ? p->problem : "malformed YAML";
    int line = (int)p->problem_mark.line + 1;
    if (p->error == YAML_READER_ERROR)
        return lcx_fail(LCX_ERR_FORMAT, "%s: yaml: %s at byte %zu", label, problem, p->problem_offset);
    if (p->context)
        return lcx_fail(LCX_ERR_FORMAT, "%s:%d: yaml: %s (%s at line %d), column %d", label, line, problem,
                        p->context, (int)p->context_mark.line + 1, (int)p->problem_mark.column + 1);
    return lcx_fail(LCX_ERR_FORMAT, "%s:%d: yaml: %s, column %d", label, line, problem,
                    (int)p->problem_mark.column + 1);
}

/* A first pass over the events, before the document is built: libyaml's scanner checks every open flow level
 * for each token (quadratic in the nesting depth) and the document API has no depth limit, so refuse deep
 * nesting and huge node counts here, after at most a bounded amount of work. */
static lcx_status check_bounds(const char *label, const char *text, size_t len) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return lcx_fail(LCX_ERR_OOM, "out of memory (yaml parser)");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    lcx_status st = LCX_OK;
    long depth = 0, nodes = 0;
    for (int done = 0; !done && st == LCX_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            st = syntax_error(label, &p);
            break;
        }
        int line = (int)ev.start_mark.line + 1;
        switch (ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > LCX_RECIPE_MAX_DEPTH)
                st = lcx_fail(LCX_ERR_FORMAT, "%s:%d: nesting deeper than %d levels (the limit for a recipe)", label,
                              line, LCX_RECIPE_MAX_DEPTH);
            /* fall through */
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT:
            if (st == LCX_OK && ++nodes > LCX_RECIPE_MAX_NODES)
                st = lcx_fail(LCX_ERR_FORMAT, "%s:%d: more than %d YAML nodes (the limit for a recipe)", label, line,
                              LCX_RECIPE_MAX_NODES);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return st;
}

static void free_block(lcx_recipe_stage *s) {
    free(s->short_factor);
    free(s->long_factor);
    free(s->activation_list);
}

void lcx_recipe_free(lcx_recipe *r) {
    if (!r) return;
    free_block(&r->defaults);
    for (size_t i = 0; i < r->n_stages; i++) free_block(&r->stages[i]);
    free(r->stages);
    free(r->label);
    free(r->name);
    free(r->description);
    free(r);
}

static char *stem_of(const char *label) {
    const char *b = strrchr(label, '/');
    b = b ? b + 1 : label;
    if (!strncmp(b, "builtin:", 8)) b += 8;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".yaml")) n -= 5;
    else if (n > 4 && !strcmp(b + n - 4, ".yml")) n -= 4;
    char *s = malloc(n + 1);
    if (s) memcpy(s, b, n), s[n] = 0;
    return s;
}

static lcx_status parse_root(pctx *c, yaml_node_t *root, lcx_recipe *r) {
    if (root->type != YAML_MAPPING_NODE)
        return kfail(c, root, NULL, "a recipe must be a mapping with name, description, defaults and stages; got %s",
                     node_kind(root));
    LCX_TRY(check_mapping(c, root, NULL, "the recipe"));
    yaml_node_t *stages = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key), *v = yaml_document_get_node(c->doc, p->value);
        const char *key = scalar(k);
        if (!strcmp(key, "name")) LCX_TRY(get_string(c, v, key, &r->name));
        else if (!strcmp(key, "description")) LCX_TRY(get_string(c, v, key, &r->description));
        else if (!strcmp(key, "defaults")) LCX_TRY(parse_stage(c, v, 0, "defaults", &r->defaults));
        else if (!strcmp(key, "stages")) stages = v;
        else return unknown_key(c, k, "the recipe", top_keys);
    }
    if (!stages) return kfail(c, root, "stages", "missing (a recipe needs a list of stages)");
    if (stages->type != YAML_SEQUENCE_NODE)
        return kfail(c, stages, "stages", "expected a list of stages, got %s", node_kind(stages));
    ptrdiff_t n = stages->data.sequence.items.top - stages->data.sequence.items.start;
    if (n < 1 || n > LCX_RECIPE_MAX_STAGES)
        return kfail(c, stages, "stages", "expected 1 to %d stages, got %td", LCX_RECIPE_MAX_STAGES, n);
    r->stages = calloc((size_t)n, sizeof *r->stages);
    yaml_node_t **nodes = calloc((size_t)n, sizeof *nodes);
    if (!r->stages || !nodes) {
        free(nodes);
        return lcx_fail(LCX_ERR_OOM, "out of memory");
    }
    lcx_status st = LCX_OK;
    for (ptrdiff_t i = 0; i < n && st == LCX_OK; i++) {
        nodes[i] = yaml_document_get_node(c->doc, stages->data.sequence.items.start[i]);
        char what[32];
        snprintf(what, sizeof what, "stages[%td]", i);
        r->n_stages = (size_t)i + 1;
        st = parse_stage(c, nodes[i], 1, what, &r->stages[i]);
    }
    if (st == LCX_OK) st = check_stages(c, r, nodes);
    free(nodes);
    if (st != LCX_OK) return st;
    if (!r->name) r->name = stem_of(r->label);
    if (!r->description) r->description = strdup("");
    LCX_FAIL_IF(!r->name || !r->description, LCX_ERR_OOM, "out of memory");
    return LCX_OK;
}

lcx_status lcx_recipe_parse(const char *label, const char *text, size_t len, int64_t divisor, lcx_recipe **out) {
    *out = NULL;
    LCX_FAIL_IF(divisor < 0, LCX_ERR_INVALID, "recipe: divisor %lld must be >= 1", (long long)divisor);
    LCX_FAIL_IF(len > RECIPE_MAX_BYTES, LCX_ERR_FORMAT, "%s: %zu bytes is too large for a recipe (limit %u)", label,
                len, RECIPE_MAX_BYTES);
    lcx_recipe *r = calloc(1, sizeof *r);
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "out of memory");
    r->label = strdup(label);
    r->divisor = divisor ? divisor : 1;
    if (!r->label) {
        lcx_recipe_free(r);
        return lcx_fail(LCX_ERR_OOM, "out of memory");
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    lcx_status st = check_bounds(label, text, len);
    if (st != LCX_OK) {
        lcx_recipe_free(r);
        return st;
    }
    if (!yaml_parser_initialize(&parser)) {
        lcx_recipe_free(r);
        return lcx_fail(LCX_ERR_OOM, "out of memory (yaml parser)");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = syntax_error(label, &parser);
        yaml_parser_delete(&parser);
        lcx_recipe_free(r);
        return st;
    }
    pctx c = {label, &doc, r->divisor};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || is_null(root)) {
        st = lcx_fail(LCX_ERR_FORMAT, "%s:1: empty recipe (expected a mapping with name, description, defaults and "
                                      "stages)",
                      label);
    } else {
        st = parse_root(&c, root, r);
    }
    if (st == LCX_OK) { /* a second document would be silently ignored: refuse it */
        yaml_document_t doc2;
        if (!yaml_parser_load(&parser, &doc2)) {
            st = syntax_error(label, &parser);
        } else {
            yaml_node_t *r2 = yaml_document_get_root_node(&doc2);
            if (r2) st = lcx_fail(LCX_ERR_FORMAT, "%s:%d: more than one YAML document (one recipe per file)", label,
                                  line_of(r2));
            yaml_document_delete(&doc2);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (st != LCX_OK) {
        lcx_recipe_free(r);
        return st;
    }
    *out = r;
    return LCX_OK;
}

lcx_status lcx_recipe_load(const char *path, int64_t divisor, lcx_recipe **out) {
    *out = NULL;
    char *buf = NULL;
    size_t n = 0;
    LCX_TRY(lcx_read_file(path, RECIPE_MAX_BYTES, &buf, &n));
    lcx_status st = lcx_recipe_parse(path, buf, n, divisor, out);
    free(buf);
    return st;
}

lcx_status lcx_recipe_open(const char *spec, int64_t divisor, lcx_recipe **out) {
    *out = NULL;
    size_t n = strlen(spec);
    int file_like = strchr(spec, '/') || (n > 5 && !strcmp(spec + n - 5, ".yaml")) ||
                    (n > 4 && !strcmp(spec + n - 4, ".yml"));
    if (!file_like) {
        for (size_t i = 0; i < lcx_recipe_builtin_count(); i++)
            if (!strcmp(spec, lcx_recipe_builtin_name(i))) {
                size_t len;
                const char *text = lcx_recipe_builtin_text(i, &len);
                char label[160];
                snprintf(label, sizeof label, "builtin:%s", spec);
                return lcx_recipe_parse(label, text, len, divisor, out);
            }
        FILE *f = fopen(spec, "rb");
        if (!f) {
            char names[512] = "", shown[64];
            for (size_t i = 0; i < lcx_recipe_builtin_count(); i++) {
                size_t used = strlen(names);
                snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", lcx_recipe_builtin_name(i));
            }
            return lcx_fail(LCX_ERR_NOT_FOUND, "recipe '%s' is neither built in (%s) nor a file",
                            lcx_printable(spec, shown, sizeof shown), names);
        }
        fclose(f);
    }
    return lcx_recipe_load(spec, divisor, out);
}
