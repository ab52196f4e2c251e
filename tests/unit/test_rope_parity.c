/* Model parity beyond the pretraining length: tests/fixtures/rope_models/<type>/ (gen_rope_models.py) holds a tiny
 * llama per rope type with max_position_embeddings 64 (or L*s where the type needs it) and transformers' float32
 * logits over 256 tokens. Here: our forward over ids.txt matches logits.npy to 1e-4 (per row, max |ours - HF|
 * over max |HF|), our inv_freq / attention factor at 256 match what HF's rotary module used (rope.json), and
 * extension plans from the plain-rope fixture to 256 give the rope of the matching fixture.
 *
 * Also a helper for tests/cli/rope_parity.sh (which drives the CLI):
 *   test_rope_parity --compare OURS.npy REF.npy TOL      logits files, same metric; exit 1 above TOL
 *   test_rope_parity --compare-rope SHOW.json ROPE.json   `lcextend rope --show --json` vs rope.json */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "formats/npy.h"
#include "src/core/fileio.h"
#include "src/model/model.h"
#include "src/rope/rope.h"
#include "model_fixture.h"
#include "test_util.h"
#include "worst_of.h"

#define SEQ 256

static const char *TYPES[] = {"default", "linear", "dynamic", "yarn", "yarn_mscale", "longrope", "llama3"};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static char *fx(const char *type, const char *file) {
    size_t n = strlen(LCX_SOURCE_DIR) + strlen(type) + strlen(file) + 64;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/tests/fixtures/rope_models/%s%s%s", LCX_SOURCE_DIR, type, *file ? "/" : "", file);
    return p;
}

/* Max over rows of max|a - b| / max|b| (rows of `cols`), or INFINITY when sizes differ / a file is unreadable. */
static double logits_error(const char *ours, const char *ref, int64_t *rows_out) {
    float *a = NULL, *b = NULL;
    lcx_shape sa, sb;
    double worst = INFINITY;
    if (lcx_npy_read_f32(ours, &a, &sa) != LCX_OK || lcx_npy_read_f32(ref, &b, &sb) != LCX_OK) {
        fprintf(stderr, "%s\n", lcx_last_error());
        goto done;
    }
    uint64_t na = 1, nb = 1;
    for (int i = 0; i < sa.ndim; i++) na *= sa.dims[i];
    for (int i = 0; i < sb.ndim; i++) nb *= sb.dims[i];
    uint64_t cols = sb.dims[sb.ndim - 1];
    if (na != nb || sa.dims[sa.ndim - 1] != cols || cols == 0) goto done;
    worst = 0;
    for (uint64_t r = 0; r < nb / cols; r++) {
        double num = 0, den = 0;
        for (uint64_t c = 0; c < cols; c++) {
            double d = fabs((double)a[r * cols + c] - (double)b[r * cols + c]);
            num = worst_of(num, d);
            den = fmax(den, fabs((double)b[r * cols + c]));
        }
        double e = num / fmax(den, 1e-30);
        worst = worst_of(worst, e);
    }
    if (rows_out) *rows_out = (int64_t)(nb / cols);
done:
    free(a);
    free(b);
    return worst;
}

static void check_logits(const char *type) {
    char *dir = fx(type, ""), *ids_path = fx(type, "ids.txt"), *ref = fx(type, "logits.npy");
    char ours[256];
    snprintf(ours, sizeof ours, "%s/rope_parity_%s.npy", LCX_BINARY_DIR, type);
    static int32_t ids[SEQ + 1];
    int64_t n = fx_read_ids(ids_path, ids, SEQ + 1);
    CHECK_MSG(n == SEQ, "%s: %lld ids", ids_path, (long long)n);
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_F32;
    o.max_tokens = SEQ;
    lcx_model *m = NULL;
    float *logits = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    if (m && n == SEQ) {
        int64_t V = lcx_model_config_of(m)->vocab_size;
        logits = malloc((size_t)(SEQ * V) * sizeof *logits);
        lcx_batch b = {.n_seq = 1, .seq_len = SEQ, .ids = ids};
        double loss = 0;
        int64_t cnt = 0;
        CHECK_OK(lcx_model_forward(m, &b, logits, &loss, &cnt));
        lcx_shape sh = {2, {SEQ, (uint64_t)V}};
        CHECK_OK(lcx_npy_write_f32(ours, logits, &sh));
        int64_t rows = 0;
        double err = logits_error(ours, ref, &rows);
        printf("  %-12s logits [%lld x %lld]: max row-relative error %.3g\n", type, (long long)rows, (long long)V, err);
        CHECK_MSG(rows == SEQ && err <= 1e-4, "%s: error %g over %lld rows", type, err, (long long)rows);
        remove(ours);
    }
    free(logits);
    lcx_model_free(m);
    free(dir);
    free(ids_path);
    free(ref);
}

/* inv_freq[] + attention_scaling of rope.json; returns the pair count (0 on failure). */
static int read_rope_json(const char *path, const char *inv_key, const char *attn_key, double *inv, int cap,
                          double *attn) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) return 0;
    json_t *a = json_object_get(j, inv_key);
    int n = 0;
    *attn = json_number_value(json_object_get(j, attn_key));
    for (size_t i = 0; i < json_array_size(a) && n < cap; i++) {
        json_t *x = json_array_get(a, i);
        if (json_is_object(x)) x = json_object_get(x, "inv_freq");
        inv[n++] = json_number_value(x);
    }
    json_decref(j);
    return n;
}

static void plan_of(const char *type, lcx_model_config *cfg, lcx_rope_plan *plan) {
    char *cp = fx(type, "config.json");
    memset(cfg, 0, sizeof *cfg);
    CHECK_OK(lcx_config_load(cp, cfg));
    CHECK_OK(lcx_rope_plan_init(plan, &cfg->rope, cfg->head_dim, cfg->max_position_embeddings, NULL, NULL));
    free(cp);
}

static void check_rope_against(const lcx_rope_plan *plan, const char *ref_type, const char *what) {
    char *rp = fx(ref_type, "rope.json");
    double ref[LCX_ROPE_MAX_PAIRS], attn_ref = 0, attn = 0;
    float inv[LCX_ROPE_MAX_PAIRS];
    int n = read_rope_json(rp, "inv_freq", "attention_scaling", ref, LCX_ROPE_MAX_PAIRS, &attn_ref);
    CHECK_MSG(n == plan->n_pairs && n > 0, "%s: %d pairs in rope.json", rp, n);
    CHECK_OK(lcx_rope_inv_freq(plan, SEQ, inv, &attn));
    double worst = 0;
    for (int k = 0; k < n && k < plan->n_pairs; k++) worst = worst_of(worst, fabs(inv[k] - ref[k]) / ref[k]);
    CHECK_MSG(worst <= 1e-6, "%s: inv_freq off by %g relative", what, worst);
    CHECK_REL(attn, attn_ref, 1e-12);
    free(rp);
}

static void check_rope(const char *type) {
    lcx_model_config cfg;
    lcx_rope_plan plan;
    plan_of(type, &cfg, &plan);
    check_rope_against(&plan, type, type);
    lcx_config_free(&cfg);
}

/* Zero-shot extension of the plain fixture (M = L = 64) to 256 must give the fixture of that type (same L). */
static void check_extension(lcx_rope_method method, const char *ref_type) {
    lcx_model_config cfg;
    lcx_rope_plan plan;
    plan_of("default", &cfg, &plan);
    lcx_rope_extend req;
    memset(&req, 0, sizeof req);
    req.method = method;
    req.target = SEQ;
    lcx_rope_params np;
    int64_t M = 0;
    CHECK_OK(lcx_rope_plan_extension(&cfg.rope, cfg.head_dim, cfg.max_position_embeddings, &req, &np, &M, NULL, NULL));
    CHECK(M == SEQ);
    CHECK_OK(lcx_rope_plan_init(&plan, &np, cfg.head_dim, M, NULL, NULL));
    check_rope_against(&plan, ref_type, lcx_rope_method_name(method));
    lcx_config_free(&cfg);
}

static int compare_main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--compare")) {
        int64_t rows = 0;
        double tol = atof(argv[4]);
        double err = logits_error(argv[2], argv[3], &rows);
        printf("%s: %lld rows, max row-relative error %.3g (tol %g)\n", argv[2], (long long)rows, err, tol);
        return err <= tol ? 0 : 1;
    }
    if (argc == 4 && !strcmp(argv[1], "--compare-rope")) {
        double a[LCX_ROPE_MAX_PAIRS], b[LCX_ROPE_MAX_PAIRS], attn_a = 0, attn_b = 0;
        int na = read_rope_json(argv[2], "pairs", "attention_factor", a, LCX_ROPE_MAX_PAIRS, &attn_a);
        int nb = read_rope_json(argv[3], "inv_freq", "attention_scaling", b, LCX_ROPE_MAX_PAIRS, &attn_b);
        double worst = na == nb && na > 0 ? fabs(attn_a - attn_b) / attn_b : INFINITY;
        for (int k = 0; k < na && k < nb; k++) worst = worst_of(worst, fabs(a[k] - b[k]) / b[k]);
        printf("%s: %d pairs, max relative difference %.3g\n", argv[2], na, worst);
        return worst <= 1e-6 ? 0 : 1;
    }
    fprintf(stderr, "usage: test_rope_parity [--compare OURS.npy REF.npy TOL | --compare-rope SHOW.json ROPE.json]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1) return compare_main(argc, argv);
    for (size_t i = 0; i < N_TYPES; i++) {
        check_rope(TYPES[i]);
        check_logits(TYPES[i]);
    }
    check_extension(LCX_EXTEND_YARN, "yarn");
    check_extension(LCX_EXTEND_PI, "linear");
    check_extension(LCX_EXTEND_LLAMA3, "llama3");
    /* The metric must see a difference: yarn's logits against the plain model's differ well above 1e-4. */
    char *y = fx("yarn", "logits.npy"), *d = fx("default", "logits.npy");
    double e = logits_error(y, d, NULL);
    CHECK_MSG(e > 1e-2 && isfinite(e), "yarn vs default logits differ by only %g", e);
    free(y);
    free(d);
    return test_summary("test_rope_parity");
}
