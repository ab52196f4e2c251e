/* KV cache and cached forward (src/model/model_kv.c) against the uncached forward-only pass (itself bit-identical to the
 * training forward, test_model_infer) on HF fixture models:
 * - a prefill into an empty cache gives the uncached logits bit for bit;
 * - decoding token by token after a prefill (truncated from a longer one) and scoring uncommitted candidate
 *   continuations against one prefilled prompt match the uncached rows within TOL (max |difference| over the
 *   largest |logit| of the row set; the attention runs with other query tile shapes, so the last bits may
 *   differ), with the same argmax; the cache length moves only by the committed tokens;
 * - greedy decoding with the cache (argmax fed back token by token) equals the uncached teacher-forced argmax of
 *   the sequence it produced;
 * - errors: capacity, a training model, a cache of another model, bad commit counts, and a dynamic rope whose
 *   frequencies change with the length (the cache refuses, a prefill from scratch matches the uncached pass). */
#include <string.h>

#include "model_fixture.h"
#include "src/checkpoint/catalog.h"
#include "src/eval/eval_model.h"
#include "test_util.h"
#include "worst_of.h"

enum { T = 16 };
static const double TOL = 1e-5;

static lcx_model *open_model(const char *name, lcx_dtype dt, int training) {
    char *dir = fx_path(name, "models", "");
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = dt;
    o.max_tokens = T;
    o.loss_chunk = 5;
    o.mlp_chunk = 3;
    o.training = training;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    free(dir);
    return m;
}

/* Uncached logits of seq[0..n) (forward-only model). */
static void uncached(lcx_model *m, const int32_t *seq, int64_t n, float *out) {
    lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = seq};
    CHECK_OK(lcx_model_forward(m, &b, out, NULL, NULL));
}

/* rows [r0, r1) of a vs b: relative max error, and argmax agreement */
static double compare_rows(const float *a, const float *b, int64_t r0, int64_t r1, int64_t V, int *argmax_ok) {
    double e = rel_max_err(a + r0 * V, b + r0 * V, (size_t)((r1 - r0) * V));
    *argmax_ok = 1;
    for (int64_t r = r0; r < r1; r++) *argmax_ok &= fx_argmax(a + r * V, V) == fx_argmax(b + r * V, V);
    return e;
}

static void check_fixture(const char *name, lcx_dtype dt) {
    int32_t ids[T];
    CHECK(fx_inputs(name, ids, T) == T);
    lcx_model *m = open_model(name, dt, 0);
    if (!m) return;
    const int64_t V = lcx_model_config_of(m)->vocab_size;
    const size_t bytes = (size_t)(T * V) * sizeof(float);
    float *want = malloc(bytes), *got = malloc(bytes);
    uncached(m, ids, T, want);
    lcx_kv_cache *kc = NULL;
    CHECK_OK(lcx_kv_cache_init(&kc, m, T));
    if (!kc) goto done;
    const lcx_model_config *cfg = lcx_model_config_of(m);
    CHECK(lcx_kv_cache_bytes(kc) ==
          (size_t)(2 * cfg->num_hidden_layers * T * cfg->num_key_value_heads * cfg->head_dim) * sizeof(float));

    /* prefill of everything: bit for bit */
    fx_collect c = {got, 0, 0, T};
    memset(got, 0, bytes);
    CHECK_OK(lcx_model_forward_cached(m, kc, ids, T, T, 0, fx_on_rows, &c));
    CHECK(c.seen == T && lcx_kv_cache_len(kc) == T);
    CHECK_MSG(memcmp(got, want, bytes) == 0, "%s: prefill logits differ from the uncached forward", name);

    /* keep 6, decode the other 10 one by one */
    CHECK_OK(lcx_kv_cache_truncate(kc, 6));
    memset(got, 0, bytes);
    for (int64_t i = 6; i < T; i++) {
        fx_collect d = {got, i, 0, T};
        CHECK_OK(lcx_model_forward_cached(m, kc, ids + i, 1, 1, 0, fx_on_rows, &d));
        CHECK(d.seen == 1 && lcx_kv_cache_len(kc) == i + 1);
    }
    int am = 0;
    double e_dec = compare_rows(got, want, 6, T, V, &am);
    CHECK_MSG(e_dec <= TOL && am, "%s: decode rel err %.3g, argmax %s", name, e_dec, am ? "same" : "differs");

    /* prompt of 8 cached; three candidate continuations of 5 tokens, none committed */
    CHECK_OK(lcx_kv_cache_truncate(kc, 8));
    double e_cand = 0;
    int am_cand = 1;
    for (int j = 0; j < 3; j++) {
        int32_t seq[13];
        memcpy(seq, ids, 8 * sizeof *seq);
        for (int i = 0; i < 5; i++) seq[8 + i] = (int32_t)((ids[8 + i] + 37 * j + i) % V);
        float *ref = malloc((size_t)(13 * V) * sizeof(float)), *out = calloc((size_t)(13 * V), sizeof(float));
        uncached(m, seq, 13, ref);
        fx_collect d = {out, 8, 0, 13};
        CHECK_OK(lcx_model_forward_cached(m, kc, seq + 8, 5, 0, 1, fx_on_rows, &d)); /* rows 1..4 only */
        CHECK(d.seen == 4 && lcx_kv_cache_len(kc) == 8);
        int a = 0;
        double e = compare_rows(out, ref, 9, 13, V, &a);
        e_cand = worst_of(e_cand, e);
        am_cand &= a;
        free(ref), free(out);
    }
    CHECK_MSG(e_cand <= TOL && am_cand, "%s: candidates rel err %.3g, argmax %s", name, e_cand,
              am_cand ? "same" : "differs");
    /* commit part of a call: the cache then holds ids[0..10) and continues from there */
    CHECK_OK(lcx_model_forward_cached(m, kc, ids + 8, 4, 2, 0, NULL, NULL));
    CHECK(lcx_kv_cache_len(kc) == 10);
    memset(got, 0, bytes);
    fx_collect d = {got, 10, 0, T};
    CHECK_OK(lcx_model_forward_cached(m, kc, ids + 10, 6, 0, 0, fx_on_rows, &d));
    double e_part = compare_rows(got, want, 10, T, V, &am);
    CHECK_MSG(e_part <= TOL && am, "%s: after a partial commit rel err %.3g", name, e_part);

    /* errors */
    CHECK_FAILS(lcx_model_forward_cached(m, kc, ids, 7, 0, 0, NULL, NULL), LCX_ERR_INVALID, "capacity of 16");
    CHECK_FAILS(lcx_model_forward_cached(m, kc, ids, 2, 3, 0, NULL, NULL), LCX_ERR_INVALID, "commit 3 of 2");
    CHECK_FAILS(lcx_kv_cache_truncate(kc, 11), LCX_ERR_INVALID, "truncate");
    printf("%s (%s): prefill bit-identical; decode rel err %.2e, candidates %.2e, partial commit %.2e\n", name,
           lcx_dtype_name(dt), e_dec, e_cand, e_part);
done:
    lcx_kv_cache_free(kc);
    free(want), free(got);
    lcx_model_free(m);
}

/* Greedy decoding with the cache == teacher-forced argmax of the uncached model on what it produced. */
static void check_greedy(const char *name) {
    int32_t ids[T];
    CHECK(fx_inputs(name, ids, T) == T);
    lcx_model *m = open_model(name, LCX_F32, 0);
    if (!m) return;
    const int64_t V = lcx_model_config_of(m)->vocab_size, P = 4;
    float *row = malloc((size_t)(T * V) * sizeof(float));
    lcx_kv_cache *kc = NULL;
    CHECK_OK(lcx_kv_cache_init(&kc, m, T));
    int32_t seq[T];
    memcpy(seq, ids, (size_t)P * sizeof *seq);
    fx_collect c = {row, 0, 0, T};
    CHECK_OK(lcx_model_forward_cached(m, kc, seq, P, P, P - 1, fx_on_rows, &c)); /* prefill, last row's logits */
    for (int64_t i = P; i < T; i++) {
        seq[i] = (int32_t)fx_argmax(row + (i - 1) * V, V);
        if (i + 1 == T) break;
        fx_collect d = {row, i, 0, T};
        CHECK_OK(lcx_model_forward_cached(m, kc, seq + i, 1, 1, 0, fx_on_rows, &d));
    }
    int32_t next[T];
    CHECK_OK(lcx_eval_model_argmax(m, seq, T, P, next));
    CHECK_MSG(memcmp(next, seq + P, (size_t)(T - P) * sizeof *seq) == 0, "%s: greedy decode differs from the "
              "teacher-forced argmax", name);
    int distinct = 0; /* the model does not just repeat one token: the comparison means something */
    for (int64_t i = P + 1; i < T; i++) distinct += seq[i] != seq[i - 1];
    printf("%s: greedy decode of %lld tokens == teacher-forced argmax (%d changes of token)\n", name,
           (long long)(T - P), distinct);
    lcx_kv_cache_free(kc);
    free(row);
    lcx_model_free(m);
}

static void check_errors(void) {
    lcx_model *tr = open_model("llama_gqa", LCX_F32, 1), *m = open_model("llama_gqa", LCX_F32, 0);
    lcx_model *other = open_model("qwen3", LCX_F32, 0);
    lcx_kv_cache *kc = NULL, *ko = NULL;
    int32_t ids[T];
    CHECK(fx_inputs("llama_gqa", ids, T) == T);
    if (tr) CHECK_FAILS(lcx_kv_cache_init(&kc, tr, 8), LCX_ERR_INVALID, "built for training");
    if (m) CHECK_FAILS(lcx_kv_cache_init(&kc, m, 0), LCX_ERR_INVALID, "capacity 0");
    if (m && other) {
        CHECK_OK(lcx_kv_cache_init(&kc, m, 32));
        CHECK_OK(lcx_kv_cache_init(&ko, other, 8));
        if (kc && ko) {
            CHECK_FAILS(lcx_model_forward_cached(m, ko, ids, 2, 2, 0, NULL, NULL), LCX_ERR_INVALID, "another model");
            CHECK_FAILS(lcx_model_forward_cached(tr, kc, ids, 2, 2, 0, NULL, NULL), LCX_ERR_INVALID,
                        "built for training");
            /* more new tokens than the model's working set holds, though the cache would take them */
            int32_t big[T + 1] = {0};
            CHECK_FAILS(lcx_model_forward_cached(m, kc, big, T + 1, 0, 0, NULL, NULL), LCX_ERR_INVALID, "capacity");
            ids[3] = 100000;
            CHECK_FAILS(lcx_model_forward_cached(m, kc, ids, 4, 4, 0, NULL, NULL), LCX_ERR_INVALID, "vocabulary");
            CHECK(lcx_kv_cache_len(kc) == 0);
        }
    }
    lcx_kv_cache_free(kc), lcx_kv_cache_free(ko);
    lcx_model_free(tr), lcx_model_free(m), lcx_model_free(other);
}

/* Dynamic NTK with max_position_embeddings 8: the frequencies change past 8 tokens, so keys cached at length 6
 * cannot serve a forward ending at 12. */
static void check_dynamic_rope(void) {
    char *dir = fx_path("llama_gqa", "models", "");
    lcx_catalog *cat = NULL;
    CHECK_OK(lcx_catalog_open(dir, &cat));
    free(dir);
    if (!cat) return;
    lcx_model_config cfg = cat->cfg;
    snprintf(cfg.rope.type, sizeof cfg.rope.type, "dynamic");
    cfg.rope.has_factor = 1;
    cfg.rope.factor = 2.0;
    cfg.max_position_embeddings = 8;
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = T;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &cfg, &o));
    lcx_catalog_close(cat);
    if (!m) return;
    CHECK_OK(lcx_model_init_random(m, 7, 0.5));
    int32_t ids[T];
    CHECK(fx_inputs("llama_gqa", ids, T) == T);
    lcx_kv_cache *kc = NULL;
    CHECK_OK(lcx_kv_cache_init(&kc, m, T));
    if (kc) {
        CHECK_OK(lcx_model_forward_cached(m, kc, ids, 6, 6, 0, NULL, NULL));
        CHECK(lcx_kv_cache_usable(m, kc, 8) == 6);  /* max(len, 8): same frequencies */
        CHECK(lcx_kv_cache_usable(m, kc, 12) == 0); /* other frequencies */
        CHECK_FAILS(lcx_model_forward_cached(m, kc, ids + 6, 6, 6, 0, NULL, NULL), LCX_ERR_INVALID,
                    "dynamic rope frequencies at 12 tokens");
        CHECK(lcx_kv_cache_len(kc) == 6);
        CHECK_OK(lcx_kv_cache_truncate(kc, 0));
        const int64_t V = cfg.vocab_size;
        float *want = malloc((size_t)(12 * V) * sizeof(float)), *got = malloc((size_t)(12 * V) * sizeof(float));
        uncached(m, ids, 12, want);
        fx_collect c = {got, 0, 0, 12};
        CHECK_OK(lcx_model_forward_cached(m, kc, ids, 12, 12, 0, fx_on_rows, &c));
        CHECK(memcmp(got, want, (size_t)(12 * V) * sizeof(float)) == 0);
        CHECK(lcx_kv_cache_usable(m, kc, 12) == 12 && lcx_kv_cache_usable(m, kc, 14) == 0);
        free(want), free(got);
    }
    lcx_kv_cache_free(kc);
    lcx_model_free(m);
}

int main(void) {
    const char *names[] = {"llama_gqa", "llama_tied", "llama_rope_llama3", "llama_rope_v5", "mistral", "qwen2",
                           "qwen3"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) check_fixture(names[i], LCX_F32);
    check_fixture("llama_bf16", LCX_BF16);
    check_greedy("llama_gqa");
    check_greedy("qwen3");
    check_errors();
    check_dynamic_rope();
    return test_summary("test_model_kv");
}
