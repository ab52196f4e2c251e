/* The extended demo against transformers: tests/fixtures/extended/ (gen_extended.py) holds transformers' float32
 * logits of the bundled tiny model (recipes/tiny/model, context 256) extended zero-shot to 2048 with yarn (config
 * written by the generator from the spec), over the first 2048 held-out tokens: full rows at a few positions
 * (logits_rows.npy) and the next-token log-probability at every position (logprob_next.npy).
 * Here: our extension plan of the bundled model to 2048 gives the rope of the fixture, and our model built with it
 * matches transformers at 1e-4 on both metrics:
 *   rows:     max over the sampled rows of max|ours - HF| / max|HF|   (tests/unit/test_rope_parity.c's metric)
 *   logprob:  max over the 2047 positions of |ours - HF| in nats
 * and the metrics are not blind (a PI extension of the same model is rejected).
 *
 * Helper modes for tests/cli/extended_export.sh (which drives the CLI: rope -> import -> export hf/gguf -> score):
 *   test_extended_export --compare LOGITS.npy FIXDIR TOL   `lcextend score --logits` output ([1,n,V] or [n,V])
 *   test_extended_export --compare-config CONFIG.json FIXDIR   rope fields of an exported config vs reference.json
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "formats/npy.h"
#include "src/checkpoint/catalog.h"
#include "src/core/fileio.h"
#include "src/model/model.h"
#include "src/rope/rope.h"
#include "model_fixture.h"
#include "test_util.h"
#include "worst_of.h"

#define SEQ 2048
#define MAX_ROWS 64
#define TOL 1e-4

typedef struct fixture {
    int32_t ids[SEQ];
    int64_t n_ids;
    int64_t positions[MAX_ROWS];
    int n_rows;
    int64_t vocab;
    float *rows;    /* [n_rows, vocab] */
    float *logprob; /* [SEQ - 1] */
    json_t *ref;    /* reference.json */
} fixture;

static void path_of(char *buf, size_t cap, const char *dir, const char *file) { snprintf(buf, cap, "%s/%s", dir, file); }

static void fixture_free(fixture *f) {
    free(f->rows);
    free(f->logprob);
    json_decref(f->ref);
    memset(f, 0, sizeof *f);
}

/* 1 on success; prints what is wrong otherwise. fixture_free(f) either way. */
static int fixture_load(const char *dir, fixture *f) {
    char p[1024];
    memset(f, 0, sizeof *f);
    path_of(p, sizeof p, dir, "ids.txt");
    f->n_ids = fx_read_ids(p, f->ids, SEQ);
    json_error_t je;
    path_of(p, sizeof p, dir, "reference.json");
    f->ref = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
    if (f->n_ids != SEQ || !f->ref) {
        fprintf(stderr, "%s: unreadable fixture (%lld ids; %s)\n", dir, (long long)f->n_ids, f->ref ? "" : je.text);
        return 0;
    }
    json_t *pos = json_object_get(f->ref, "positions");
    f->n_rows = (int)json_array_size(pos);
    for (int i = 0; i < f->n_rows && f->n_rows <= MAX_ROWS; i++) {
        json_t *v = json_array_get(pos, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= SEQ) f->n_rows = -1;
        else f->positions[i] = json_integer_value(v);
    }
    if (f->n_rows < 1 || f->n_rows > MAX_ROWS) {
        fprintf(stderr, "%s: reference.json 'positions': expected 1..%d integers in [0, %d)\n", dir, MAX_ROWS, SEQ);
        return 0;
    }
    lcx_shape sr, sl;
    path_of(p, sizeof p, dir, "logits_rows.npy");
    if (lcx_npy_read_f32(p, &f->rows, &sr) != LCX_OK) goto bad;
    path_of(p, sizeof p, dir, "logprob_next.npy");
    if (lcx_npy_read_f32(p, &f->logprob, &sl) != LCX_OK) goto bad;
    if (sr.ndim != 2 || sr.dims[0] != (uint64_t)f->n_rows || sl.ndim != 1 || sl.dims[0] != SEQ - 1) {
        fprintf(stderr, "%s: unexpected fixture shapes\n", dir);
        return 0;
    }
    f->vocab = (int64_t)sr.dims[1];
    return 1;
bad:
    fprintf(stderr, "%s\n", lcx_last_error());
    return 0;
}

/* Both metrics of our logits [SEQ, vocab] against the fixture. NaN anywhere -> INFINITY. */
static void errors(const fixture *f, const float *logits, double *rows_err, double *lp_err) {
    double worst = 0;
    for (int r = 0; r < f->n_rows; r++) {
        const float *a = logits + f->positions[r] * f->vocab, *b = f->rows + (int64_t)r * f->vocab;
        double num = 0, den = 0;
        for (int64_t c = 0; c < f->vocab; c++) {
            double d = fabs((double)a[c] - (double)b[c]);
            num = worst_of(num, d);
            den = fmax(den, fabs((double)b[c]));
        }
        double e = num / fmax(den, 1e-30);
        worst = worst_of(worst, e);
    }
    *rows_err = isnan(worst) ? INFINITY : worst;
    worst = 0;
    for (int64_t t = 0; t + 1 < SEQ; t++) {
        const float *x = logits + t * f->vocab;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < f->vocab; c++) m = fmax(m, (double)x[c]);
        for (int64_t c = 0; c < f->vocab; c++) s += exp((double)x[c] - m);
        double lp = (double)x[f->ids[t + 1]] - m - log(s);
        double e = fabs(lp - (double)f->logprob[t]);
        worst = worst_of(worst, e);
    }
    *lp_err = isnan(worst) ? INFINITY : worst;
}

static double ref_num(const fixture *f, const char *key) {
    return json_number_value(json_object_get(json_object_get(f->ref, "export_rope"), key));
}

/* Rope fields of cfg against reference.json's export_rope; prints the first mismatch. */
static int rope_matches(const fixture *f, const lcx_model_config *cfg, const char *what) {
    const lcx_rope_params *r = &cfg->rope;
    const char *type = json_string_value(json_object_get(json_object_get(f->ref, "export_rope"), "rope_type"));
    if (!type || strcmp(r->type, type)) {
        fprintf(stderr, "%s: rope type '%s', expected '%s'\n", what, r->type, type ? type : "?");
        return 0;
    }
    struct {
        const char *key;
        double ours;
        int present;
    } k[] = {{"factor", r->factor, r->has_factor},
             {"original_max_position_embeddings", (double)r->original_max_position_embeddings, r->has_original_max},
             {"rope_theta", r->theta, 1},
             {"max_position_embeddings", (double)cfg->max_position_embeddings, 1}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        double want = ref_num(f, k[i].key);
        if (!k[i].present || k[i].ours != want) {
            fprintf(stderr, "%s: %s %s%g, expected %g\n", what, k[i].key, k[i].present ? "" : "absent, ", k[i].ours,
                    want);
            return 0;
        }
    }
    /* Only the fields that change the model: any attention_factor / mscale / beta other than the defaults would
     * make a different model than the fixture's (which states none). */
    if (r->has_attention_factor || r->has_mscale || r->has_mscale_all_dim || (r->has_truncate && !r->truncate) ||
        (r->has_beta_fast && r->beta_fast != 32) || (r->has_beta_slow && r->beta_slow != 1)) {
        fprintf(stderr, "%s: non-default yarn parameters\n", what);
        return 0;
    }
    return 1;
}

/* Build the bundled model with its rope extended to SEQ by method; forward the fixture ids; both errors. */
static void run_extension(const fixture *f, lcx_rope_method method, double *rows_err, double *lp_err, int check_cfg) {
    *rows_err = *lp_err = INFINITY;
    const char *dir = LCX_SOURCE_DIR "/recipes/tiny/model";
    lcx_catalog *c = NULL;
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_model *m = NULL;
    float *logits = NULL;
    CHECK_OK(lcx_catalog_open(dir, &c));
    CHECK_OK(lcx_config_load(LCX_SOURCE_DIR "/recipes/tiny/model/config.json", &cfg));
    if (!c || !cfg.json) goto done;
    lcx_rope_extend req;
    memset(&req, 0, sizeof req);
    req.method = method;
    req.target = SEQ;
    lcx_rope_params np;
    int64_t M = 0;
    CHECK_OK(lcx_rope_plan_extension(&cfg.rope, cfg.head_dim, cfg.max_position_embeddings, &req, &np, &M, NULL, NULL));
    cfg.rope = np;
    cfg.max_position_embeddings = M;
    if (check_cfg) CHECK_MSG(rope_matches(f, &cfg, "yarn extension plan"), "extension plan differs from the fixture's");
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_F32;
    o.max_tokens = SEQ;
    CHECK_OK(lcx_model_init(&m, &cfg, &o));
    if (!m) goto done;
    CHECK_OK(lcx_model_load(m, c));
    CHECK(lcx_model_config_of(m)->vocab_size == f->vocab);
    logits = malloc((size_t)SEQ * (size_t)f->vocab * sizeof *logits);
    if (!logits) goto done;
    lcx_batch b = {.n_seq = 1, .seq_len = SEQ, .ids = (int32_t *)f->ids};
    double loss = 0;
    int64_t cnt = 0;
    CHECK_OK(lcx_model_forward(m, &b, logits, &loss, &cnt));
    CHECK(cnt == SEQ - 1);
    errors(f, logits, rows_err, lp_err);
    if (check_cfg) /* the loss is the mean of the same log-probs: transformers' value to the same tolerance */
        CHECK_NEAR(loss / (double)cnt, json_number_value(json_object_get(f->ref, "loss")), 1e-5);
done:
    free(logits);
    lcx_model_free(m);
    lcx_config_free(&cfg);
    lcx_catalog_close(c);
}

static int compare_main(int argc, char **argv) {
    fixture f;
    if (argc == 5 && !strcmp(argv[1], "--compare")) {
        if (!fixture_load(argv[3], &f)) {
            fixture_free(&f);
            return 1;
        }
        float *a = NULL;
        lcx_shape s;
        int ok = 0;
        if (lcx_npy_read_f32(argv[2], &a, &s) != LCX_OK) {
            fprintf(stderr, "%s\n", lcx_last_error());
        } else if (s.ndim < 2 || s.dims[s.ndim - 1] != (uint64_t)f.vocab || s.dims[s.ndim - 2] != SEQ ||
                   (s.ndim == 3 && s.dims[0] != 1) || s.ndim > 3) {
            fprintf(stderr, "%s: shape is not [1, %d, %lld]\n", argv[2], SEQ, (long long)f.vocab);
        } else {
            double tol = atof(argv[4]), re, le;
            errors(&f, a, &re, &le);
            ok = re <= tol && le <= tol;
            printf("%s: rows %d, max row-relative error %.3g; %d positions, max |next-token log-prob diff| %.3g "
                   "nats (tol %g)\n",
                   argv[2], f.n_rows, re, SEQ - 1, le, tol);
        }
        free(a);
        fixture_free(&f);
        return ok ? 0 : 1;
    }
    if (argc == 4 && !strcmp(argv[1], "--compare-config")) {
        if (!fixture_load(argv[3], &f)) {
            fixture_free(&f);
            return 1;
        }
        lcx_model_config cfg;
        memset(&cfg, 0, sizeof cfg);
        int ok = 0;
        if (lcx_config_load(argv[2], &cfg) != LCX_OK) fprintf(stderr, "%s\n", lcx_last_error());
        else ok = rope_matches(&f, &cfg, argv[2]);
        if (ok) printf("%s: rope %s factor %g original %lld theta %g max_position_embeddings %lld as expected\n",
                       argv[2], cfg.rope.type, cfg.rope.factor, (long long)cfg.rope.original_max_position_embeddings,
                       cfg.rope.theta, (long long)cfg.max_position_embeddings);
        lcx_config_free(&cfg);
        fixture_free(&f);
        return ok ? 0 : 1;
    }
    fprintf(stderr, "usage: test_extended_export [--compare LOGITS.npy FIXDIR TOL | --compare-config CONFIG.json "
                    "FIXDIR]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1) return compare_main(argc, argv);
    fixture f;
    int loaded = fixture_load(LCX_SOURCE_DIR "/tests/fixtures/extended", &f);
    CHECK_MSG(loaded, "tests/fixtures/extended does not load");
    if (loaded) {
        double re, le;
        run_extension(&f, LCX_EXTEND_YARN, &re, &le, 1);
        printf("  yarn to %d: max row-relative error %.3g over %d rows, max |log-prob diff| %.3g nats\n", SEQ, re,
               f.n_rows, le);
        CHECK_MSG(re <= TOL && le <= TOL, "yarn extension: errors %g / %g above %g", re, le, TOL);
        /* Not blind: PI to the same length is another model, far outside the tolerance on both metrics. */
        run_extension(&f, LCX_EXTEND_PI, &re, &le, 0);
        printf("  pi to %d (must differ): %.3g, %.3g\n", SEQ, re, le);
        CHECK_MSG(re > 1e-2 && le > 1e-2 && isfinite(re) && isfinite(le), "PI vs yarn differ by only %g / %g", re, le);
    }
    fixture_free(&f);
    return test_summary("test_extended_export");
}
