/* rope: spec hand-derived vectors, Hugging Face parity (tests/fixtures/rope/cases.json from gen_rope.py),
 * validation errors and warnings, export form, extension planner, reference rotation fwd/bwd. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/rope/rope.h"
#include "test_util.h"
#include "worst_of.h"

/* ---- warning capture ------------------------------------------------------------------------------------- */
typedef struct warnings {
    int n;
    char msg[8][512];
} warnings;

static void on_warn(void *user, const char *msg) {
    warnings *w = user;
    if (w->n < 8) snprintf(w->msg[w->n], sizeof w->msg[0], "%s", msg);
    w->n++;
}

static int has_warning(const warnings *w, const char *needle) {
    for (int i = 0; i < w->n && i < 8; i++)
        if (strstr(w->msg[i], needle)) return 1;
    return 0;
}

/* ---- minimal config.json -> lcx_rope_params (the real parser is formats/hf_config.c) ---------------------- */
static int jnum(json_t *o, const char *key, double *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) return 0;
    *out = json_number_value(v);
    return 1;
}

static int jlist(json_t *o, const char *key, double *out) {
    json_t *a = json_object_get(o, key);
    if (!json_is_array(a)) return 0;
    for (size_t i = 0; i < json_array_size(a); i++) out[i] = json_number_value(json_array_get(a, i));
    return (int)json_array_size(a);
}

/* Fill p from a dict holding rope keys (a rope_scaling object, or the fixture's "params"). */
static void rope_keys(json_t *o, lcx_rope_params *p) {
    json_t *t = json_object_get(o, "rope_type");
    if (!t) t = json_object_get(o, "type");
    if (json_is_string(t)) snprintf(p->type, sizeof p->type, "%s", json_string_value(t));
    jnum(o, "theta", &p->theta);
    jnum(o, "rope_theta", &p->theta); /* inside a rope dict it beats the top-level one */
    jnum(o, "partial_rotary_factor", &p->partial_rotary_factor);
    p->has_factor = jnum(o, "factor", &p->factor);
    double L;
    if ((p->has_original_max = jnum(o, "original_max_position_embeddings", &L)))
        p->original_max_position_embeddings = (int64_t)L;
    p->has_attention_factor = jnum(o, "attention_factor", &p->attention_factor);
    p->has_beta_fast = jnum(o, "beta_fast", &p->beta_fast);
    p->has_beta_slow = jnum(o, "beta_slow", &p->beta_slow);
    p->has_mscale = jnum(o, "mscale", &p->mscale);
    p->has_mscale_all_dim = jnum(o, "mscale_all_dim", &p->mscale_all_dim);
    json_t *tr = json_object_get(o, "truncate");
    if ((p->has_truncate = json_is_boolean(tr))) p->truncate = json_is_true(tr);
    p->has_low_freq_factor = jnum(o, "low_freq_factor", &p->low_freq_factor);
    p->has_high_freq_factor = jnum(o, "high_freq_factor", &p->high_freq_factor);
    p->n_short_factor = jlist(o, "short_factor", p->short_factor);
    p->n_long_factor = jlist(o, "long_factor", p->long_factor);
}

static void params_from_config(json_t *cfg, lcx_rope_params *p, int64_t *head_dim, int64_t *M) {
    lcx_rope_params_default(p);
    jnum(cfg, "rope_theta", &p->theta);
    jnum(cfg, "partial_rotary_factor", &p->partial_rotary_factor);
    /* transformers 5.23: a non-null rope_scaling wins over rope_parameters. */
    json_t *rs = json_object_get(cfg, "rope_scaling");
    if (!json_is_object(rs)) rs = json_object_get(cfg, "rope_parameters");
    if (json_is_object(rs)) rope_keys(rs, p);
    double v;
    *M = jnum(cfg, "max_position_embeddings", &v) ? (int64_t)v : 0;
    if (jnum(cfg, "head_dim", &v)) {
        *head_dim = (int64_t)v;
    } else {
        double hs = 0, nh = 1;
        jnum(cfg, "hidden_size", &hs);
        jnum(cfg, "num_attention_heads", &nh);
        *head_dim = (int64_t)hs / (int64_t)nh;
    }
    /* transformers: a top-level original_max_position_embeddings overrides the rope dict's for these types. */
    if ((!strcmp(p->type, "yarn") || !strcmp(p->type, "longrope") || !strcmp(p->type, "llama3")) &&
        jnum(cfg, "original_max_position_embeddings", &v))
        p->has_original_max = 1, p->original_max_position_embeddings = (int64_t)v;
}

static lcx_rope_params *mk(const char *type, double theta) {
    static lcx_rope_params p;
    lcx_rope_params_default(&p);
    snprintf(p.type, sizeof p.type, "%s", type);
    p.theta = theta;
    return &p;
}

static float inv[LCX_ROPE_MAX_PAIRS];

static void inv_for(const lcx_rope_params *p, int64_t head_dim, int64_t M, int64_t n, double *attn) {
    lcx_rope_plan plan;
    CHECK_OK(lcx_rope_plan_init(&plan, p, head_dim, M, NULL, NULL));
    CHECK_OK(lcx_rope_inv_freq(&plan, n, inv, attn));
}

/* ---- 1. spec table (hand-derived in double; re-derived independently before writing them here) ---------- */
static void test_spec_vectors(void) {
    double attn;
    lcx_rope_params *p = mk("default", 1e4);
    inv_for(p, 8, 2048, 16, &attn);
    const double def[4] = {1, 0.1, 0.01, 0.001};
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], def[k], 1e-6);
    CHECK(attn == 1.0);

    p = mk("linear", 1e4);
    p->has_factor = 1, p->factor = 4;
    inv_for(p, 8, 2048, 16, &attn);
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], def[k] / 4, 1e-6);

    p = mk("dynamic", 1e4);
    p->has_factor = 1, p->factor = 2;
    inv_for(p, 8, 2048, 4096, &attn);
    const double dyn[4] = {1, 0.0693361274, 0.0048074986, 0.000333333333};
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], dyn[k], 1e-6);
    /* b' = 43267.487109: inv[1] = b'^(-1/4) */
    CHECK_REL(inv[1], pow(43267.487109, -0.25), 1e-6);
    inv_for(p, 8, 2048, 2048, &attn); /* n <= M: unchanged */
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], def[k], 1e-7);

    p = mk("yarn", 1e4);
    p->has_factor = 1, p->factor = 4;
    p->has_original_max = 1, p->original_max_position_embeddings = 2048;
    lcx_rope_plan plan;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 8, 8192, NULL, NULL));
    CHECK(plan.yarn_lo == 1 && plan.yarn_hi == 3);
    CHECK_OK(lcx_rope_inv_freq(&plan, 16, inv, &attn));
    const double yarn8[4] = {1, 0.1, 0.00625, 0.00025};
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], yarn8[k], 1e-6);
    CHECK_REL(attn, 1.1386294361, 1e-9);

    p = mk("yarn", 1e4);
    p->has_factor = 1, p->factor = 16;
    p->has_original_max = 1, p->original_max_position_embeddings = 4096;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 128, 65536, NULL, NULL));
    CHECK(plan.yarn_lo == 20 && plan.yarn_hi == 46);
    CHECK_OK(lcx_rope_inv_freq(&plan, 16, inv, &attn));
    CHECK_REL(attn, 1.2772588722, 1e-9);
    CHECK_REL(inv[21], 0.0469408600, 1e-6);
    p->has_truncate = 1, p->truncate = 0;
    inv_for(p, 128, 65536, 16, &attn);
    CHECK_REL(inv[21], 0.0485915059, 1e-6);

    const double g[5] = {1.0693147, 1.1386294, 1.2079442, 1.2772589, 1.3465736};
    for (int i = 0; i < 5; i++) {
        p = mk("yarn", 1e4);
        p->has_factor = 1, p->factor = (double)(2 << i);
        inv_for(p, 8, 2048, 16, &attn);
        CHECK_NEAR(attn, g[i], 1e-7);
    }

    p = mk("llama3", 1e4);
    p->has_factor = 1, p->factor = 4;
    p->has_low_freq_factor = 1, p->low_freq_factor = 1;
    p->has_high_freq_factor = 1, p->high_freq_factor = 4;
    p->has_original_max = 1, p->original_max_position_embeddings = 2048;
    inv_for(p, 8, 8192, 16, &attn);
    const double l3[4] = {1, 0.1, 0.0081487331, 0.00025};
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], l3[k], 1e-6);
    CHECK(attn == 1.0);

    p = mk("longrope", 1e4);
    p->n_short_factor = p->n_long_factor = 4;
    for (int k = 0; k < 4; k++) p->short_factor[k] = 1, p->long_factor[k] = (double)(1 << k);
    p->has_original_max = 1, p->original_max_position_embeddings = 2048;
    p->has_factor = 1, p->factor = 4;
    inv_for(p, 8, 8192, 4096, &attn);
    const double lr[4] = {1, 0.05, 0.0025, 0.000125};
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], lr[k], 1e-6);
    CHECK_REL(attn, sqrt(1 + log(4.0) / log(2048.0)), 1e-12);
    inv_for(p, 8, 8192, 2048, &attn); /* not longer than L: short factors */
    for (int k = 0; k < 4; k++) CHECK_REL(inv[k], def[k], 1e-6);

    /* HF rotation d=4 inv=[1,0.01] p=1 q=[1,2,3,4] */
    float fi[2] = {1.0f, 0.01f}, c[2], s[2], q[4] = {1, 2, 3, 4};
    lcx_rope_table(fi, 2, 1.0, 1, 1, c, s);
    lcx_rope_apply_fwd(q, 1, 1, 4, 4, c, s);
    const double want[4] = {-1.9841106486, 1.9599006675, 2.4623779024, 4.0197996683};
    for (int i = 0; i < 4; i++) CHECK_REL(q[i], want[i], 1e-6);
}

/* ---- 2. HF parity --------------------------------------------------------------------------------------- */
static int n_inv_total, n_inv_exact;
static double max_inv_rel, max_cos_abs;

static void compare_hf_run(const char *name, const lcx_rope_params *p, int64_t head_dim, int64_t M, json_t *run) {
    int64_t n = json_integer_value(json_object_get(run, "seq_len"));
    json_t *hinv = json_object_get(run, "inv_freq");
    double hattn = json_number_value(json_object_get(run, "attention_scaling"));
    lcx_rope_plan plan;
    lcx_status st = lcx_rope_plan_init(&plan, p, head_dim, M, NULL, NULL);
    CHECK_MSG(st == LCX_OK, "%s: %s", name, lcx_last_error());
    if (st != LCX_OK) return;
    double attn;
    CHECK_OK(lcx_rope_inv_freq(&plan, n, inv, &attn));
    CHECK_MSG((size_t)plan.n_pairs == json_array_size(hinv), "%s: %lld pairs vs HF %zu", name,
              (long long)plan.n_pairs, json_array_size(hinv));
    if ((size_t)plan.n_pairs != json_array_size(hinv)) return;
    float hf[LCX_ROPE_MAX_PAIRS];
    for (int64_t k = 0; k < plan.n_pairs; k++) {
        hf[k] = (float)json_number_value(json_array_get(hinv, (size_t)k));
        double rel = fabs((double)inv[k] - hf[k]) / fabs((double)hf[k]);
        n_inv_total++;
        n_inv_exact += inv[k] == hf[k];
        max_inv_rel = worst_of(max_inv_rel, rel);
        CHECK_MSG(rel <= 1e-6, "%s n=%lld: inv_freq[%lld] = %.9g, HF %.9g", name, (long long)n, (long long)k,
                  inv[k], hf[k]);
    }
    CHECK_MSG(fabs(attn - hattn) <= 1e-12 * fabs(hattn), "%s n=%lld: attention %.17g vs HF %.17g", name,
              (long long)n, attn, hattn);
    /* Tables from HF's own inv_freq isolate the table code from inv_freq's last-ulp differences (which move
     * the angle at position 100k by ~1e-2). */
    json_t *pos = json_object_get(run, "positions");
    json_t *hc = json_object_get(run, "cos"), *hs = json_object_get(run, "sin");
    float c[LCX_ROPE_MAX_PAIRS], s[LCX_ROPE_MAX_PAIRS];
    for (size_t i = 0; i < json_array_size(pos); i++) {
        int64_t pp = json_integer_value(json_array_get(pos, i));
        lcx_rope_table(hf, plan.n_pairs, attn, pp, 1, c, s);
        for (int64_t k = 0; k < plan.n_pairs; k++) {
            double ec = fabs(c[k] - json_number_value(json_array_get(json_array_get(hc, i), (size_t)k)));
            double es = fabs(s[k] - json_number_value(json_array_get(json_array_get(hs, i), (size_t)k)));
            double e = worst_of(ec, es);
            max_cos_abs = worst_of(max_cos_abs, e);
            CHECK_MSG(e <= 1e-6 * fmax(1.0, attn), "%s pos %lld pair %lld: cos/sin off by %g", name,
                      (long long)pp, (long long)k, e);
        }
    }
}

static json_t *load_cases(void) {
    json_error_t err;
    json_t *doc = json_load_file(LCX_SOURCE_DIR "/tests/fixtures/rope/cases.json", JSON_REJECT_DUPLICATES, &err);
    CHECK_MSG(doc != NULL, "cases.json:%d:%d: %s", err.line, err.column, err.text);
    return doc;
}

static void test_hf_cases(json_t *doc) {
    json_t *cases = json_object_get(doc, "cases");
    CHECK(json_array_size(cases) >= 20);
    size_t i;
    json_t *c;
    static lcx_rope_params p;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        int64_t head_dim, M;
        params_from_config(json_object_get(c, "config"), &p, &head_dim, &M);
        size_t j;
        json_t *run;
        json_array_foreach(json_object_get(c, "hf"), j, run) {
            CHECK_MSG(!strcmp(p.type, json_string_value(json_object_get(run, "rope_type"))), "%s: type %s", name,
                      p.type);
            compare_hf_run(name, &p, head_dim, M, run);
        }
    }
}

/* ---- 3. export form ------------------------------------------------------------------------------------- */
static void test_exports(json_t *doc) {
    json_t *ex = json_object_get(doc, "exports");
    CHECK(json_array_size(ex) >= 8);
    size_t i;
    json_t *e;
    static lcx_rope_params p, back;
    json_array_foreach(ex, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        lcx_rope_params_default(&p);
        rope_keys(json_object_get(e, "params"), &p);
        int64_t head_dim = json_integer_value(json_object_get(e, "head_dim"));
        int64_t M = json_integer_value(json_object_get(e, "max_position_embeddings"));
        json_t *cfg = json_deep_copy(json_object_get(e, "base"));
        warnings w = {0};
        CHECK_OK(lcx_rope_export(&p, head_dim, M, cfg, on_warn, &w));
        json_t *want = json_object_get(e, "expected_config");
        if (!json_equal(cfg, want)) {
            char *a = json_dumps(cfg, JSON_SORT_KEYS | JSON_COMPACT);
            char *b = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
            CHECK_MSG(0, "%s: exported\n  %s\nexpected\n  %s", name, a, b);
            free(a);
            free(b);
        }
        CHECK(json_object_get(cfg, "rope_parameters") == NULL);
        CHECK_MSG(json_array_size(json_object_get(e, "hf_warnings")) == 0, "%s: transformers warned on load", name);
        /* Reading our export back gives what transformers computed from the spec-form config. */
        int64_t hd2, M2;
        params_from_config(cfg, &back, &hd2, &M2);
        size_t j;
        json_t *run;
        json_array_foreach(json_object_get(e, "hf"), j, run) compare_hf_run(name, &back, head_dim, M2, run);
        json_decref(cfg);
    }
}

static void test_export_details(void) {
    static lcx_rope_params p;
    lcx_rope_params_default(&p);
    snprintf(p.type, sizeof p.type, "llama3");
    p.theta = 5e5;
    p.has_factor = 1, p.factor = 8;
    p.has_low_freq_factor = 1, p.low_freq_factor = 1;
    p.has_high_freq_factor = 1, p.high_freq_factor = 4;
    p.has_original_max = 1, p.original_max_position_embeddings = 8192;
    json_t *cfg = json_object();
    CHECK_FAILS(lcx_rope_export(&p, 128, 8192, cfg, NULL, NULL), LCX_ERR_INVALID, "must be < max_position_embeddings");
    CHECK_OK(lcx_rope_export(&p, 128, 131072, cfg, NULL, NULL));
    json_t *rs = json_object_get(cfg, "rope_scaling");
    CHECK(json_is_real(json_object_get(rs, "factor")) && json_is_real(json_object_get(cfg, "rope_theta")));
    CHECK(json_is_integer(json_object_get(rs, "original_max_position_embeddings")));
    CHECK(json_integer_value(json_object_get(cfg, "original_max_position_embeddings")) == 8192);
    CHECK(json_integer_value(json_object_get(cfg, "max_position_embeddings")) == 131072);
    CHECK(!strcmp(json_string_value(json_object_get(rs, "type")), "llama3"));
    CHECK(json_object_size(rs) == 6);

    /* dynamic warns about portability; export into a non-object fails. */
    lcx_rope_params_default(&p);
    snprintf(p.type, sizeof p.type, "dynamic");
    p.has_factor = 1, p.factor = 2;
    warnings w = {0};
    CHECK_OK(lcx_rope_export(&p, 64, 4096, cfg, on_warn, &w));
    CHECK(has_warning(&w, "llama.cpp"));
    CHECK(json_integer_value(json_object_get(cfg, "max_position_embeddings")) == 4096);
    json_t *arr = json_array();
    CHECK_FAILS(lcx_rope_export(&p, 64, 4096, arr, NULL, NULL), LCX_ERR_INVALID, "object");
    /* invalid params are refused before anything is written */
    snprintf(p.type, sizeof p.type, "su");
    json_t *empty = json_object();
    CHECK_FAILS(lcx_rope_export(&p, 64, 4096, empty, NULL, NULL), LCX_ERR_UNSUPPORTED, "'su'");
    CHECK(json_object_size(empty) == 0);
    json_decref(empty);
    json_decref(arr);
    json_decref(cfg);
}

/* ---- 4. validation -------------------------------------------------------------------------------------- */
static void test_validation(void) {
    lcx_rope_plan plan;
    warnings w;
    lcx_rope_params *p = mk("ntk-by-parts", 1e4);
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_UNSUPPORTED, "'ntk-by-parts'");
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_UNSUPPORTED,
                "supported: default, linear, dynamic, yarn, longrope, llama3");
    const char *need_factor[] = {"linear", "dynamic", "yarn", "llama3"};
    for (int i = 0; i < 4; i++) {
        p = mk(need_factor[i], 1e4);
        CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "requires key 'factor'");
    }
    p = mk("llama3", 1e4);
    p->has_factor = 1, p->factor = 8;
    p->has_high_freq_factor = 1, p->high_freq_factor = 4;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "'low_freq_factor'");
    p->has_low_freq_factor = 1, p->low_freq_factor = 1;
    p->has_high_freq_factor = 0;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "'high_freq_factor'");
    /* llama3: HF 5.23 only warns for high <= low and L >= M */
    p->has_high_freq_factor = 1, p->high_freq_factor = 1;
    p->has_original_max = 1, p->original_max_position_embeddings = 4096;
    w.n = 0;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 64, 4096, on_warn, &w));
    CHECK(w.n == 2 && has_warning(&w, "high_freq_factor (1) should be greater") &&
          has_warning(&w, "should be less than max_position_embeddings"));

    p = mk("longrope", 1e4);
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 8, 4096, NULL, NULL), LCX_ERR_INVALID, "'short_factor'");
    p->n_short_factor = 4;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 8, 4096, NULL, NULL), LCX_ERR_INVALID, "'long_factor'");
    p->n_long_factor = 3;
    for (int k = 0; k < 4; k++) p->short_factor[k] = p->long_factor[k] = 1;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 8, 4096, NULL, NULL), LCX_ERR_INVALID,
                "long_factor has 3 entries, expected rotary dim / 2 = 4");
    p->n_long_factor = 4;
    w.n = 0;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 8, 4096, on_warn, &w)); /* no factor, no L: factor = M/M = 1 */
    CHECK(has_warning(&w, "without 'factor'") && plan.factor == 1.0 && plan.attn == 1.0);

    p = mk("linear", 1e4);
    p->has_factor = 1, p->factor = 0.5;
    w.n = 0;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 64, 4096, on_warn, &w));
    CHECK(w.n == 1 && has_warning(&w, "factor should be >= 1, got 0.5"));
    p->factor = 0;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "factor 0 must be a positive");
    p->factor = 2;
    p->theta = -1;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "rope_theta -1");
    p->theta = 1e4;
    p->partial_rotary_factor = 1.5;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "partial_rotary_factor 1.5");
    p->partial_rotary_factor = 1;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 7, 4096, NULL, NULL), LCX_ERR_INVALID, "must be even");
    p->partial_rotary_factor = 0.3; /* int(64 * 0.3) = 19 */
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL), LCX_ERR_INVALID, "rotary dim 19");
    p->partial_rotary_factor = 0.25;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 64, 4096, NULL, NULL));
    CHECK(plan.rot_dim == 16 && plan.n_pairs == 8);
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 0, NULL, NULL), LCX_ERR_INVALID, "max_position_embeddings 0");

    p = mk("yarn", 1e4);
    p->has_factor = 1, p->factor = 4;
    p->has_original_max = 1, p->original_max_position_embeddings = 2048;
    w.n = 0;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 64, 8192, on_warn, &w));
    CHECK(w.n == 0);
    p->has_beta_fast = 1, p->beta_fast = 1;
    p->has_beta_slow = 1, p->beta_slow = 2;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 64, 16384, on_warn, &w));
    CHECK(w.n == 2 && has_warning(&w, "beta_fast (1) should be greater than beta_slow (2)") &&
          has_warning(&w, "differs from max_position_embeddings"));
    /* lo == hi after clamping gets HF's +0.001 (theta 100, L 1e6, d 8: lo = floor(7.39) = 7 = d-1) */
    lcx_rope_params *q = mk("yarn", 100);
    q->has_factor = 1, q->factor = 2;
    q->has_original_max = 1, q->original_max_position_embeddings = 1000000;
    CHECK_OK(lcx_rope_plan_init(&plan, q, 8, 2000000, NULL, NULL));
    CHECK(plan.yarn_lo == 7 && plan.yarn_hi == 7.001);
    p = mk("yarn", 1e4);
    p->has_factor = 1, p->factor = 4;
    p->has_original_max = 1, p->original_max_position_embeddings = 2048;
    p->has_beta_fast = 1, p->has_beta_slow = 1, p->beta_slow = 2;
    p->beta_fast = -3;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 64, 8192, NULL, NULL), LCX_ERR_INVALID, "must be positive");
    p->beta_fast = 0; /* zero = unset (HF's `or 32`) */
    p->beta_slow = 0;
    CHECK_OK(lcx_rope_plan_init(&plan, p, 64, 8192, NULL, NULL));
    CHECK(plan.beta_fast == 32 && plan.beta_slow == 1);

    p = mk("dynamic", 1e4);
    p->has_factor = 1, p->factor = 2;
    CHECK_FAILS(lcx_rope_plan_init(&plan, p, 2, 4096, NULL, NULL), LCX_ERR_INVALID, "rotary dim > 2");
    CHECK_OK(lcx_rope_plan_init(&plan, p, 8, 4096, NULL, NULL));
    CHECK_FAILS(lcx_rope_inv_freq(&plan, -1, inv, NULL), LCX_ERR_INVALID, "negative");
    lcx_rope_type t;
    CHECK_OK(lcx_rope_type_parse("longrope", &t));
    CHECK(t == LCX_ROPE_LONGROPE && !strcmp(lcx_rope_type_name(t), "longrope"));
}

/* ---- 5. extension planner ------------------------------------------------------------------------------- */
static void test_planner(void) {
    static lcx_rope_params cur, out, mid;
    int64_t M;
    lcx_rope_extend req;
    /* yarn s=4 over L=8192, to 128k: s=16 over L=8192 (not s=4 over 32k) */
    lcx_rope_params_default(&cur);
    snprintf(cur.type, sizeof cur.type, "yarn");
    cur.has_factor = 1, cur.factor = 4;
    cur.has_original_max = 1, cur.original_max_position_embeddings = 8192;
    cur.has_beta_fast = 1, cur.beta_fast = 16;
    memset(&req, 0, sizeof req);
    req.method = LCX_EXTEND_YARN, req.target = 131072;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 32768, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "yarn") && out.factor == 16 && out.original_max_position_embeddings == 8192 && M == 131072);
    CHECK(out.has_beta_fast && out.beta_fast == 16); /* shape knobs carried over */
    CHECK(!out.has_attention_factor);

    /* llama3 8k -> 128k model (factor 8, M 131072) to 512k: L stays 8192, factor 64 */
    lcx_rope_params_default(&cur);
    snprintf(cur.type, sizeof cur.type, "llama3");
    cur.theta = 5e5;
    cur.has_factor = 1, cur.factor = 8;
    cur.has_low_freq_factor = 1, cur.low_freq_factor = 1;
    cur.has_high_freq_factor = 1, cur.high_freq_factor = 4;
    cur.has_original_max = 1, cur.original_max_position_embeddings = 8192;
    req.method = LCX_EXTEND_LLAMA3, req.target = 524288;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 131072, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "llama3") && out.factor == 64 && out.original_max_position_embeddings == 8192);
    CHECK(out.low_freq_factor == 1 && out.high_freq_factor == 4 && M == 524288 && out.theta == 5e5);

    /* in place (out == cur) */
    mid = cur;
    CHECK_OK(lcx_rope_plan_extension(&mid, 128, 131072, &req, &mid, &M, NULL, NULL));
    CHECK(mid.factor == 64 && mid.original_max_position_embeddings == 8192 && mid.has_low_freq_factor);

    /* PI over an already-linear model multiplies: linear 2 at M 8192 (L0 4096) to 32k -> 8 */
    lcx_rope_params_default(&cur);
    snprintf(cur.type, sizeof cur.type, "linear");
    cur.has_factor = 1, cur.factor = 2;
    req.method = LCX_EXTEND_PI, req.target = 32768;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 8192, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "linear") && out.factor == 8 && M == 32768);
    /* yarn over that linear model: against L0 = 4096 */
    req.method = LCX_EXTEND_YARN;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 8192, &req, &out, &M, NULL, NULL));
    CHECK(out.factor == 8 && out.original_max_position_embeddings == 4096 && M == 32768);
    /* linear whose M/s is not whole: yarn needs an integer L and refuses; pi only needs the ratio */
    cur.factor = 3;
    CHECK_FAILS(lcx_rope_plan_extension(&cur, 128, 8192, &req, &out, &M, NULL, NULL), LCX_ERR_INVALID,
                "not a whole number");
    req.method = LCX_EXTEND_PI;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 8192, &req, &out, &M, NULL, NULL));
    CHECK_REL(out.factor, 12.0, 1e-15);
    req.target = 2000; /* shorter than M/s = 2730.67 */
    CHECK_FAILS(lcx_rope_plan_extension(&cur, 128, 8192, &req, &out, &M, NULL, NULL), LCX_ERR_INVALID,
                "original pretraining length 2730.67");
    req.target = 32768;

    /* default -> yarn, pi, dynamic, ntk, abf */
    lcx_rope_params_default(&cur);
    req.method = LCX_EXTEND_YARN, req.target = 32768;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 4096, &req, &out, &M, NULL, NULL));
    CHECK(out.factor == 8 && out.original_max_position_embeddings == 4096 && out.beta_fast == 0 && M == 32768);
    req.method = LCX_EXTEND_DYNAMIC, req.target = 16384;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 4096, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "dynamic") && out.factor == 4 && M == 4096); /* dynamic keeps M = pretraining length */
    req.method = LCX_EXTEND_NTK, req.target = 16384;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 4096, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "default") && M == 16384);
    CHECK_REL(out.theta, 1e4 * pow(4.0, 128.0 / 126.0), 1e-12); /* b' = b s^(d/(d-2)) */
    /* two NTK steps compound to the one-step result */
    int64_t M1;
    req.target = 8192;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 4096, &req, &mid, &M1, NULL, NULL));
    req.target = 16384;
    CHECK_OK(lcx_rope_plan_extension(&mid, 128, M1, &req, &out, &M, NULL, NULL));
    CHECK_REL(out.theta, 1e4 * pow(4.0, 128.0 / 126.0), 1e-12);
    req.method = LCX_EXTEND_ABF, req.target = 16384, req.theta = 5e5;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 4096, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "default") && out.theta == 5e5 && M == 16384);
    req.theta = 0;
    CHECK_FAILS(lcx_rope_plan_extension(&cur, 128, 4096, &req, &out, &M, NULL, NULL), LCX_ERR_INVALID,
                "new rope_theta");
    /* abf on top of yarn: refused, pointing at the re-extension */
    lcx_rope_params_default(&cur);
    snprintf(cur.type, sizeof cur.type, "yarn");
    cur.has_factor = 1, cur.factor = 4;
    cur.has_original_max = 1, cur.original_max_position_embeddings = 8192;
    req.theta = 1e6;
    CHECK_FAILS(lcx_rope_plan_extension(&cur, 128, 32768, &req, &out, &M, NULL, NULL), LCX_ERR_UNSUPPORTED,
                "already uses rope_type 'yarn'");
    /* a target not beyond the original length */
    req.method = LCX_EXTEND_YARN, req.target = 8192;
    CHECK_FAILS(lcx_rope_plan_extension(&cur, 128, 32768, &req, &out, &M, NULL, NULL), LCX_ERR_INVALID,
                "must be longer than the original pretraining length 8192");

    /* longrope: lists required with d/2 entries */
    double sf[4] = {1, 1, 1, 1}, lf[4] = {1, 2, 4, 8};
    lcx_rope_params_default(&cur);
    req.method = LCX_EXTEND_LONGROPE, req.target = 8192;
    CHECK_FAILS(lcx_rope_plan_extension(&cur, 8, 2048, &req, &out, &M, NULL, NULL), LCX_ERR_INVALID, "length 4");
    req.short_factor = sf, req.long_factor = lf, req.n_short_factor = 4, req.n_long_factor = 4;
    CHECK_OK(lcx_rope_plan_extension(&cur, 8, 2048, &req, &out, &M, NULL, NULL));
    CHECK(!strcmp(out.type, "longrope") && out.factor == 4 && out.original_max_position_embeddings == 2048);
    CHECK(M == 8192);
    double attn;
    inv_for(&out, 8, M, 8192, &attn);
    CHECK_REL(inv[3], 0.000125, 1e-6);

    lcx_rope_method m;
    CHECK_OK(lcx_rope_method_parse("pi", &m));
    CHECK(m == LCX_EXTEND_PI);
    CHECK_FAILS(lcx_rope_method_parse("rerope", &m), LCX_ERR_INVALID, "'rerope'");

    /* planner output exports with M = L*s for yarn */
    lcx_rope_params_default(&cur);
    req.method = LCX_EXTEND_YARN, req.target = 65536;
    CHECK_OK(lcx_rope_plan_extension(&cur, 128, 8192, &req, &out, &M, NULL, NULL));
    json_t *cfg = json_object();
    CHECK_OK(lcx_rope_export(&out, 128, M, cfg, NULL, NULL));
    CHECK(json_integer_value(json_object_get(cfg, "max_position_embeddings")) == 65536);
    CHECK(json_real_value(json_object_get(json_object_get(cfg, "rope_scaling"), "factor")) == 8.0);
    json_decref(cfg);
}

/* ---- 6. rotation: HF apply fwd/bwd, adjointness, partial rotary ------------------------------------------ */
static void test_apply(json_t *doc) {
    size_t i;
    json_t *a;
    static lcx_rope_params p;
    json_array_foreach(json_object_get(doc, "apply"), i, a) {
        const char *name = json_string_value(json_object_get(a, "name"));
        int64_t head_dim, M;
        params_from_config(json_object_get(a, "config"), &p, &head_dim, &M);
        int64_t seq = json_integer_value(json_object_get(a, "seq"));
        int64_t heads = json_integer_value(json_object_get(a, "heads"));
        int64_t p0 = json_integer_value(json_object_get(a, "p0"));
        double attn;
        inv_for(&p, head_dim, M, p0 + seq, &attn);
        float c[64 * 16], s[64 * 16], x[256], g[256];
        int64_t n = seq * heads * head_dim, h = head_dim / 2;
        CHECK(n <= 256 && seq * h <= 64 * 16);
        lcx_rope_table(inv, h, attn, p0, seq, c, s);
        for (int64_t j = 0; j < n; j++) {
            x[j] = (float)json_number_value(json_array_get(json_object_get(a, "x"), (size_t)j));
            g[j] = (float)json_number_value(json_array_get(json_object_get(a, "dy"), (size_t)j));
        }
        lcx_rope_apply_fwd(x, seq, heads, head_dim, head_dim, c, s);
        lcx_rope_apply_bwd(g, seq, heads, head_dim, head_dim, c, s);
        for (int64_t j = 0; j < n; j++) {
            double y = json_number_value(json_array_get(json_object_get(a, "y"), (size_t)j));
            double dx = json_number_value(json_array_get(json_object_get(a, "dx"), (size_t)j));
            CHECK_MSG(fabs(x[j] - y) <= 2e-6 * fmax(1, fabs(y)), "%s y[%lld] %.9g vs HF %.9g", name, (long long)j,
                      x[j], y);
            CHECK_MSG(fabs(g[j] - dx) <= 2e-6 * fmax(1, fabs(dx)), "%s dx[%lld] %.9g vs HF %.9g", name, (long long)j,
                      g[j], dx);
        }
    }

    /* lcx_rope_cos_sin = inv_freq + table (yarn, attn != 1, positions 100..102 of a 4096 forward) */
    {
        static lcx_rope_params q;
        lcx_rope_params_default(&q);
        snprintf(q.type, sizeof q.type, "yarn");
        q.has_factor = 1, q.factor = 4;
        lcx_rope_plan plan;
        CHECK_OK(lcx_rope_plan_init(&plan, &q, 16, 2048, NULL, NULL));
        float c1[24], s1[24], c2[24], s2[24];
        double at;
        CHECK_OK(lcx_rope_inv_freq(&plan, 4096, inv, &at));
        lcx_rope_table(inv, 8, at, 100, 3, c1, s1);
        CHECK_OK(lcx_rope_cos_sin(&plan, 4096, 100, 3, c2, s2));
        CHECK(!memcmp(c1, c2, sizeof c1) && !memcmp(s1, s2, sizeof s1));
        CHECK_REL(c2[0], cos(100.0 * inv[0]) * at, 1e-6);
        CHECK_FAILS(lcx_rope_cos_sin(&plan, 4096, -1, 3, c2, s2), LCX_ERR_INVALID, "out of range");
    }

    /* Partial rotary: dims >= rot_dim untouched; bwd is the adjoint (<R x, y> == <x, R^T y> in double);
     * with attn = 1 the rotation is orthogonal, so bwd(fwd(x)) == x. */
    enum { SEQ = 3, HEADS = 2, HD = 10, ROT = 6 };
    float inv3[3] = {1.0f, 0.1f, 0.01f}, c[SEQ * 3], s[SEQ * 3];
    lcx_rope_table(inv3, 3, 1.0, 5, SEQ, c, s);
    float x[SEQ * HEADS * HD], x0[SEQ * HEADS * HD], y[SEQ * HEADS * HD], y0[SEQ * HEADS * HD];
    for (int j = 0; j < SEQ * HEADS * HD; j++) {
        x0[j] = x[j] = (float)sin(1.7 * j + 0.3);
        y0[j] = y[j] = (float)cos(0.9 * j - 0.2);
    }
    lcx_rope_apply_fwd(x, SEQ, HEADS, HD, ROT, c, s);
    lcx_rope_apply_bwd(y, SEQ, HEADS, HD, ROT, c, s);
    double lhs = 0, rhs = 0;
    int untouched = 1;
    for (int j = 0; j < SEQ * HEADS * HD; j++) {
        lhs += (double)x[j] * y0[j];
        rhs += (double)x0[j] * y[j];
        if (j % HD >= ROT) untouched &= x[j] == x0[j] && y[j] == y0[j];
    }
    CHECK(untouched);
    CHECK_NEAR(lhs, rhs, 1e-5);
    lcx_rope_apply_bwd(x, SEQ, HEADS, HD, ROT, c, s);
    for (int j = 0; j < SEQ * HEADS * HD; j++) CHECK_NEAR(x[j], x0[j], 1e-6);
    /* pair layout: element i pairs with i + rot/2 (not i+1): rotate a unit vector at dim 1 of head 1, pos 5 */
    float e[SEQ * HEADS * HD] = {0};
    e[HD + 1] = 1.0f;
    lcx_rope_apply_fwd(e, SEQ, HEADS, HD, ROT, c, s);
    CHECK_NEAR(e[HD + 1], cos(5 * 0.1), 1e-6);
    CHECK_NEAR(e[HD + 1 + ROT / 2], sin(5 * 0.1), 1e-6);
    CHECK(e[HD + 2] == 0 && e[HD] == 0);
}

int main(void) {
    test_spec_vectors();
    test_validation();
    test_export_details();
    test_planner();
    json_t *doc = load_cases();
    if (doc) {
        test_hf_cases(doc);
        test_exports(doc);
        test_apply(doc);
        json_decref(doc);
    }
    printf("HF parity: inv_freq %d values, %d bit-identical, max rel err %.3g; cos/sin max abs err %.3g\n",
           n_inv_total, n_inv_exact, max_inv_rel, max_cos_abs);
    return test_summary("test_rope");
}
