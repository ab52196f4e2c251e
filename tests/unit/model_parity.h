/* model_parity: the model on a backend under test against the same model on the CPU backend, shared by
 * test_model_cuda.c (the CUDA table, within the tolerances below) and test_model_device.c (a guarded CPU table,
 * exactly). The fixture models (tests/fixtures/models) are trained 3 AdamW steps under the activation policies
 * keep, recompute (with MLP tiles), offload and recompute+offload, with f32 and bf16 activations and bf16
 * parameters, then run forward (chunked logits) and through a KV-cache prefill + decode. Every measured error is
 * printed beside its bound. */
#ifndef LCX_TEST_MODEL_PARITY_H
#define LCX_TEST_MODEL_PARITY_H

#include <stdint.h>
#include <string.h>

#include "model_fixture.h"
#include "test_util.h"
#include "worst_of.h"

/* ---- tolerances -------------------------------------------------------------------------------------------------
 * Relative errors against the CPU run: loss and gradient norm |gpu - cpu| / |cpu| per step; weights, logits
 * rel_max_err (max |gpu - cpu| / max |cpu| over the whole tensor set, tests/unit/model_fixture.h).
 * The learning rate is 1e-3: AdamW moves a weight by about lr per step whatever the gradient's size, so a
 * gradient element near zero whose sign the two backends' roundings disagree on moves by up to 2 lr apart; lr
 * 1e-3 keeps that below the bounds (with float32 activations such an element is below AdamW's eps = 1e-8, whose
 * division shrinks the step to about lr |g| / eps). */
#define LR 1e-3
#define TOL_STEP_F32 1e-5   /* loss, grad norm: float32 sums in another order differ by ~1e-7 relative */
#define TOL_W_F32 1e-4      /* weights after a step, float32 activations and parameters */
/* bf16 activations (or parameters): an element whose float32 value lies within the two backends' difference of a
 * bf16 rounding midpoint is stored one bf16 ulp apart, 2^-8 = 3.9e-3 relative. Such flips feed the backward, so
 * single gradient elements differ by up to that, and a near-zero one may change sign: by the argument above up to
 * 2 lr = 2e-3 per step and weight, 6e-3 over the 3 steps, against a largest weight of 1.7-2.4 in these fixtures
 * (printed), plus one bf16 ulp of a stored weight (3.9e-3 relative, bf16 parameters). 2e-2 is about twice the sum.
 * The loss and the norm see every flipped activation and, with bf16 parameters, every weight the AdamW refresh
 * rounded the other way (one ulp, 3.9e-3 relative, feeding the next step). The stand-in below (cpu-perturbed:
 * matmul results 2 float32 ulps apart, nothing else) already moves them by up to 8e-4 relative with bf16
 * parameters (1.8e-5 at step 1, before any weight differs); a GPU differs in more places (expf, the reductions),
 * so 1e-2, a bit over 2 bf16 ulps, per step. */
#define TOL_W_BF16 2e-2
#define TOL_STEP_BF16 1e-2
#define TOL_LOGITS_F32 1e-5 /* forward logits and KV-cache decode, float32 */

static const lcx_backend *BE; /* under test */
static int EXACT;             /* the backend under test runs the CPU's kernels unchanged: every error is 0 */
static double WORST[3];       /* the largest error / bound seen: step results, weights, logits */

static void note_ratio(int what, double err, double tol) {
    double r = tol > 0 ? err / tol : err;
    WORST[what] = worst_of(WORST[what], r);
}

/* ---- the checks ---------------------------------------------------------------------------------------------- */

typedef struct variant {
    const char *what;
    lcx_model_opts o;
} variant;

static double rel_diff(double a, double b) {
    double d = fabs(a - b), r = fabs(b);
    return r > 0 ? d / r : d;
}

static double max_abs(const float *x, size_t n) {
    double r = 0;
    for (size_t i = 0; i < n; i++) r = fmax(r, fabs((double)x[i]));
    return r;
}

/* Three AdamW steps of the batches b[0..1] on both models (mc on the CPU, mg on BE, the same weights): step
 * results and weights after each within the variant's bounds. */
static void train_compare(const char *name, const variant *v, lcx_model *mc, lcx_model *mg, const lcx_batch *b) {
    const int bf16 = v->o.act_dtype == LCX_BF16 || v->o.param_dtype == LCX_BF16;
    const double tol_step = EXACT ? 0 : bf16 ? TOL_STEP_BF16 : TOL_STEP_F32;
    const double tol_w = EXACT ? 0 : bf16 ? TOL_W_BF16 : TOL_W_F32;
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    ao.lr = LR;
    for (int step = 0; step < 3; step++) {
        lcx_step_result rc, rg;
        CHECK_OK(lcx_model_train_step(mc, b, 2, &ao, &rc));
        CHECK_OK(lcx_model_train_step(mg, b, 2, &ao, &rg));
        size_t nc, ng;
        float *wc = fx_all_params(mc, &nc), *wg = fx_all_params(mg, &ng);
        CHECK(nc == ng && rc.n_tokens == rg.n_tokens);
        const double el = rel_diff(rg.loss, rc.loss), en = rel_diff(rg.grad_norm, rc.grad_norm);
        const double ew = nc == ng ? rel_max_err(wg, wc, nc) : INFINITY;
        printf("%s, %s: step %d: loss %.9g rel err %.3g, grad norm %.6g rel err %.3g (bound %g); weights "
               "rel_max_err %.3g (bound %g, max |w| %.3g)\n",
               name, v->what, step + 1, rc.loss, el, rc.grad_norm, en, tol_step, ew, tol_w, max_abs(wc, nc));
        CHECK_MSG(el <= tol_step && en <= tol_step, "%s %s step %d: loss %.9g / %.9g, norm %.9g / %.9g", name,
                  v->what, step + 1, rg.loss, rc.loss, rg.grad_norm, rc.grad_norm);
        CHECK_MSG(ew <= tol_w, "%s %s step %d: weights rel_max_err %.3g > %g", name, v->what, step + 1, ew, tol_w);
        note_ratio(0, worst_of(el, en), tol_step);
        note_ratio(1, ew, tol_w);
        free(wc), free(wg);
    }
    size_t nc, ng;
    float *gc = fx_all_grads(mc, &nc), *gg = fx_all_grads(mg, &ng);
    if (nc == ng) /* for the record: the last step's gradients (what the weights above integrate) */
        printf("%s, %s: last gradients rel_norm_err %.3g, rel_max_err %.3g\n", name, v->what,
               rel_norm_err(gg, gc, nc), rel_max_err(gg, gc, nc));
    free(gc), free(gg);
}

/* A fixture model: its 16 input ids as two batches of 8. */
static void test_train(const char *name, const variant *v) {
    int32_t ids[16];
    int64_t T = fx_inputs(name, ids, 16);
    CHECK(T == 16);
    lcx_batch b[2] = {{.n_seq = 1, .seq_len = 8, .ids = ids}, {.n_seq = 1, .seq_len = 8, .ids = ids + 8}};
    lcx_model_opts oc = v->o, og = v->o;
    oc.training = og.training = 1;
    oc.max_tokens = og.max_tokens = 8;
    og.backend = BE;
    lcx_model *mc = fx_open(name, oc), *mg = fx_open(name, og);
    if (mc && mg) train_compare(name, v, mc, mg, b);
    lcx_model_free(mc), lcx_model_free(mg);
}

/* A Llama shape whose attention the CUDA backend runs on its tensor-core kernels (bf16 storage, head_dim 64), which
 * the fixtures' head dims (8, 16) never reach: random weights (std 0.05: a softmax far from uniform; at std 0.1 a
 * larger version of this shape trained so fast that cpu-perturbed's 2-ulp matmul nudges alone moved the third
 * step's gradient norm by 0.95 of its bound), one layer, GQA 2, two sequences of 80 tokens (two key blocks of 64, three
 * query tiles of 32 in the backward), three AdamW steps. Small, as tests/cuda_emu runs it too. */
static void test_train_tc_shape(const variant *v) {
    static const char cfg_text[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 256, "
        "\"hidden_size\": 128, \"intermediate_size\": 256, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
        "\"num_key_value_heads\": 1, \"head_dim\": 64, \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-5, "
        "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false}";
    enum { T = 80 };
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    CHECK_OK(lcx_config_parse("tc shape", cfg_text, sizeof cfg_text - 1, &cfg));
    int32_t ids[2 * T];
    uint64_t z = 0x7c5eed;
    for (int i = 0; i < 2 * T; i++) z = z * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (int32_t)(z >> 56);
    lcx_batch b[2] = {{.n_seq = 1, .seq_len = T, .ids = ids}, {.n_seq = 1, .seq_len = T, .ids = ids + T}};
    lcx_model_opts oc = v->o, og = v->o;
    oc.training = og.training = 1;
    oc.max_tokens = og.max_tokens = T;
    og.backend = BE;
    lcx_model *mc = NULL, *mg = NULL;
    CHECK_OK(lcx_model_init(&mc, &cfg, &oc));
    CHECK_OK(lcx_model_init(&mg, &cfg, &og));
    if (mc && mg) {
        CHECK_OK(lcx_model_init_random(mc, 7, 0.05));
        CHECK_OK(lcx_model_init_random(mg, 7, 0.05));
        train_compare("llama head_dim 64", v, mc, mg, b);
    }
    lcx_model_free(mc), lcx_model_free(mg);
    lcx_config_free(&cfg);
}

/* Forward-only, float32: chunked logits, then a KV-cache prefill and three decode steps. */
static void test_infer(const char *name) {
    int32_t ids[16];
    int64_t T = fx_inputs(name, ids, 16);
    lcx_model_opts oc = {.max_tokens = 16, .loss_chunk = 5}, og = oc;
    og.backend = BE;
    lcx_model *mc = fx_open(name, oc), *mg = fx_open(name, og);
    if (!mc || !mg) goto done;
    const double tol = EXACT ? 0 : TOL_LOGITS_F32;
    int64_t V = lcx_model_config_of(mc)->vocab_size;
    float *lc = calloc((size_t)(T * V), sizeof(float)), *lg = calloc((size_t)(T * V), sizeof(float));
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    double sc = 0, sg = 0;
    CHECK_OK(lcx_model_forward(mc, &b, lc, &sc, NULL));
    CHECK_OK(lcx_model_forward(mg, &b, lg, &sg, NULL));
    double e_fwd = rel_max_err(lg, lc, (size_t)(T * V)), e_loss = rel_diff(sg, sc);
    printf("%s: forward logits rel_max_err %.3g, loss sum rel err %.3g (bound %g)\n", name, e_fwd, e_loss, tol);
    CHECK_MSG(sc > 0 && e_fwd <= tol && e_loss <= tol, "%s: forward: logits %.3g, loss %.3g", name, e_fwd, e_loss);
    note_ratio(2, worst_of(e_fwd, e_loss), tol);
    lcx_kv_cache *kc = NULL, *kg = NULL;
    CHECK_OK(lcx_kv_cache_init(&kc, mc, T));
    CHECK_OK(lcx_kv_cache_init(&kg, mg, T));
    if (kc && kg) {
        memset(lc, 0, (size_t)(T * V) * sizeof(float));
        memset(lg, 0, (size_t)(T * V) * sizeof(float));
        fx_collect cc = {lc, 0, 0, T}, cg = {lg, 0, 0, T};
        CHECK_OK(lcx_model_forward_cached(mc, kc, ids, T - 3, T - 3, 0, fx_on_rows, &cc));
        CHECK_OK(lcx_model_forward_cached(mg, kg, ids, T - 3, T - 3, 0, fx_on_rows, &cg));
        for (int64_t i = T - 3; i < T; i++) {
            cc.base = cg.base = i;
            CHECK_OK(lcx_model_forward_cached(mc, kc, ids + i, 1, 1, 0, fx_on_rows, &cc));
            CHECK_OK(lcx_model_forward_cached(mg, kg, ids + i, 1, 1, 0, fx_on_rows, &cg));
        }
        double e_kv = rel_max_err(lg, lc, (size_t)(T * V));
        printf("%s: KV-cache prefill + 3 decode steps: logits rel_max_err %.3g (bound %g)\n", name, e_kv, tol);
        CHECK(cc.seen == T && cg.seen == T);
        CHECK_MSG(e_kv <= tol, "%s: KV-cache logits rel_max_err %.3g > %g", name, e_kv, tol);
        note_ratio(2, e_kv, tol);
    }
    lcx_kv_cache_free(kc), lcx_kv_cache_free(kg);
    free(lc), free(lg);
done:
    lcx_model_free(mc), lcx_model_free(mg);
}

/* Every variant and fixture on backend be against the CPU; exact: be runs the CPU's kernels (every error 0). */
static void model_parity_run(const lcx_backend *be, int exact) {
    BE = be;
    EXACT = exact;
    static const lcx_act_policy mixed[2] = {LCX_ACT_RECOMPUTE_OFFLOAD, LCX_ACT_OFFLOAD};
    const variant vs[] = {
        {"keep", {.loss_chunk = 3}},
        {"recompute, MLP tile 3", {.loss_chunk = 8, .policy = LCX_ACT_RECOMPUTE, .mlp_chunk = 3}},
        {"offload", {.policy = LCX_ACT_OFFLOAD}},
        {"recompute+offload / offload, bf16 activations",
         {.act_dtype = LCX_BF16, .policy = LCX_ACT_KEEP, .layer_policy = mixed}},
        {"bf16 activations, recompute", {.act_dtype = LCX_BF16, .policy = LCX_ACT_RECOMPUTE}},
        {"bf16 parameters and activations", {.param_dtype = LCX_BF16, .act_dtype = LCX_BF16, .loss_chunk = 5}},
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) test_train("llama_gqa", &vs[i]);
    test_train_tc_shape(&vs[4]); /* bf16 activations, recompute */
    test_train("qwen3", &vs[0]);
    test_train("llama_tied", &vs[3]);
    test_infer("llama_gqa");
    test_infer("qwen2");
}

#endif
