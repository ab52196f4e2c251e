/* bf16 activations (opts.act_dtype = LCX_BF16, docs/model.md "bf16 activations") on the HF fixture models.
 *
 * bf16 keeps 8 significant bits: one rounding is a relative error of at most 2^-8 (~3.9e-3), half an ulp. Every act tensor of a layer is rounded once per op that writes it, and the errors of a few tens of
 * roundings (layers x ops) partly add up, so the bounds are a few ulps. Measured (all 10 fixtures, printed on
 * every run) and the bounds, 2-2.5x over the largest measured value (float32 math everywhere: the errors are
 * rounding only):
 *   forward, bf16 vs HF float32 and vs our float32 run (the two agree to ~1e-6):
 *     logits max |diff| / max |ref|                   <= BF_LOGITS = 8 * 2^-8 = 3.1e-2  (measured 1.5e-2, mistral)
 *     loss relative                                   <= BF_LOSS   = 2^-8     = 3.9e-3  (measured 1.6e-3)
 *   gradients of one forward+backward, bf16 vs float32:
 *     ||diff|| / ||f32|| per parameter                <= BF_GRAD   = 16 * 2^-8 = 6.3e-2 (measured 2.4e-2, qwen3
 *                                                                                         k_norm)
 *   training: 6 AdamW steps (lr 1e-3) from the same weights, each step's loss, relative
 *                                                     <= BF_TRAIN  = 2 * 2^-8 = 7.8e-3  (measured 3.1e-3,
 *                                                                                         llama_tied)
 *   KV cache (bf16 K/V) against the uncached bf16 forward: prefill bit for bit; decoding token by token
 *     max |diff| / max |logit| <= BF_KV = 2^-8 (measured 2.5e-7: the cached attention has other tile shapes,
 *     so an f32 result may round to the neighbouring bf16 value; one ulp bounds such a flip) with the same argmax.
 * Exact: the forward-only model's bf16 forward equals the training model's bit for bit; keep and recompute give
 * bit-identical bf16 gradients; bf16 activations take half the bytes of the f32 ones. */
#include <string.h>

#include "model_fixture.h"
#include "formats/npy.h"
#include "src/checkpoint/catalog.h"
#include "test_util.h"
#include "worst_of.h"

#define BF_ULP (1.0 / 256.0)
static const double BF_LOGITS = 8 * BF_ULP, BF_LOSS = BF_ULP, BF_GRAD = 16 * BF_ULP, BF_TRAIN = 2 * BF_ULP,
                    BF_KV = BF_ULP;

static const char *const MODELS[] = {"llama_gqa",   "llama_tied",    "mistral",       "qwen2",
                                     "qwen3",       "llama_bf16",    "llama_sharded", "llama_rope_v5",
                                     "llama_rope_legacy", "llama_rope_llama3"};
enum { T = 16 };

static lcx_model_opts opts_of(lcx_dtype pdt, lcx_dtype adt, int training, lcx_act_policy policy) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = pdt;
    o.act_dtype = adt;
    o.max_tokens = T;
    o.loss_chunk = 5; /* 16 rows = 3 full chunks + 1 */
    o.training = training;
    o.policy = policy;
    return o;
}

static lcx_model *open_model(const char *name, lcx_dtype pdt, lcx_dtype adt, int training, lcx_act_policy policy) {
    char *dir = fx_path(name, "models", "");
    lcx_model_opts o = opts_of(pdt, adt, training, policy);
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    free(dir);
    return m;
}

static double worst_logits, worst_loss, worst_grad, worst_train, worst_kv;
static void note(double *worst, double e) {
    *worst = worst_of(*worst, e);
}

/* (a) forward loss and logits, bf16 vs HF and vs our float32; (c) forward-only bf16 == training bf16. */
static void check_forward(const char *name, lcx_dtype pdt, const int32_t *ids) {
    lcx_model *m32 = open_model(name, pdt, LCX_F32, 1, LCX_ACT_KEEP);
    lcx_model *m16 = open_model(name, pdt, LCX_BF16, 1, LCX_ACT_KEEP);
    lcx_model *mi = open_model(name, pdt, LCX_BF16, 0, LCX_ACT_KEEP);
    if (!m32 || !m16 || !mi) goto done;
    int64_t V = lcx_model_config_of(m32)->vocab_size;
    float *l32 = malloc((size_t)(T * V) * sizeof(float)), *l16 = malloc((size_t)(T * V) * sizeof(float));
    float *li = malloc((size_t)(T * V) * sizeof(float)), *ref = NULL;
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    double s32 = 0, s16 = 0, si = 0;
    int64_t n32 = 0, n16 = 0, ni = 0;
    CHECK_OK(lcx_model_forward(m32, &b, l32, &s32, &n32));
    CHECK_OK(lcx_model_forward(m16, &b, l16, &s16, &n16));
    CHECK_OK(lcx_model_forward(mi, &b, li, &si, &ni));
    CHECK(n32 == n16 && n16 == ni && n16 > 0);
    CHECK_MSG(memcmp(l16, li, (size_t)(T * V) * sizeof(float)) == 0 && si == s16,
              "%s: forward-only bf16 differs from the training model's bf16 forward", name);
    char *p = fx_path(name, "models", "logits.npy");
    lcx_shape sh;
    CHECK_OK(lcx_npy_read_f32(p, &ref, &sh));
    free(p);
    double hf = fx_number(name, "models", "reference.json", "loss", NULL);
    if (ref) {
        double e_hf = rel_max_err(l16, ref, (size_t)(T * V)), e_32 = rel_max_err(l16, l32, (size_t)(T * V));
        double lh = fabs(s16 / n16 - hf) / fabs(hf), l3 = fabs(s16 / n16 - s32 / n32) / fabs(s32 / n32);
        CHECK_MSG(e_hf <= BF_LOGITS && e_32 <= BF_LOGITS, "%s: bf16 logits max rel err %.3g (HF), %.3g (f32)", name,
                  e_hf, e_32);
        CHECK_MSG(lh <= BF_LOSS && l3 <= BF_LOSS, "%s: bf16 loss rel err %.3g (HF), %.3g (f32)", name, lh, l3);
        note(&worst_logits, worst_of(e_hf, e_32));
        note(&worst_loss, worst_of(lh, l3));
        printf("%-18s bf16 acts: logits max rel err %.2e vs HF, %.2e vs f32; loss %.6f (HF %.6f, f32 %.6f) rel "
               "%.2e / %.2e\n",
               name, e_hf, e_32, s16 / n16, hf, s32 / n32, lh, l3);
    }
    free(ref);
    free(l32);
    free(l16);
    free(li);
done:
    lcx_model_free(m32);
    lcx_model_free(m16);
    lcx_model_free(mi);
}

/* (b) gradients of one forward+backward, bf16 vs f32; (d) keep vs recompute in bf16 bit for bit. */
static void check_grads(const char *name, lcx_dtype pdt, const int32_t *ids) {
    lcx_model *m32 = open_model(name, pdt, LCX_F32, 1, LCX_ACT_KEEP);
    lcx_model *mk = open_model(name, pdt, LCX_BF16, 1, LCX_ACT_KEEP);
    lcx_model *mr = open_model(name, pdt, LCX_BF16, 1, LCX_ACT_RECOMPUTE);
    if (!m32 || !mk || !mr) goto done;
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    float dscale = 1.0f / (float)lcx_batch_count(&b);
    CHECK_OK(lcx_model_forward_backward(m32, &b, dscale, NULL, NULL));
    CHECK_OK(lcx_model_forward_backward(mk, &b, dscale, NULL, NULL));
    CHECK_OK(lcx_model_forward_backward(mr, &b, dscale, NULL, NULL));
    const lcx_param_table *tab = lcx_model_params(m32);
    double worst = 0;
    size_t worst_i = 0, same = 0;
    for (size_t i = 0; i < tab->n; i++) {
        size_t n = (size_t)tab->params[i].numel;
        float *g32 = malloc(n * sizeof(float)), *gk = malloc(n * sizeof(float)), *gr = malloc(n * sizeof(float));
        CHECK_OK(lcx_model_get_grad(m32, i, g32));
        CHECK_OK(lcx_model_get_grad(mk, i, gk));
        CHECK_OK(lcx_model_get_grad(mr, i, gr));
        same += memcmp(gk, gr, n * sizeof(float)) == 0;
        double e = rel_norm_err(gk, g32, n);
        CHECK_MSG(e <= BF_GRAD, "%s: %s: bf16 gradient rel err %.3g > %.3g", name, tab->params[i].name, e, BF_GRAD);
        if (e > worst || e != e) worst = e, worst_i = i;
        free(g32);
        free(gk);
        free(gr);
    }
    CHECK_MSG(same == tab->n, "%s: keep and recompute bf16 gradients differ in %zu of %zu parameters", name,
              tab->n - same, tab->n);
    note(&worst_grad, worst);
    printf("%-18s bf16 acts: gradients max rel err %.2e (%s); keep == recompute: %zu/%zu\n", name, worst,
           tab->params[worst_i].name, same, tab->n);
done:
    lcx_model_free(m32);
    lcx_model_free(mk);
    lcx_model_free(mr);
}

/* (b) the check: training losses over several AdamW steps, bf16 activations vs float32. */
static void check_training(const char *name, lcx_dtype pdt, const int32_t *ids) {
    enum { STEPS = 6 };
    lcx_model *m32 = open_model(name, pdt, LCX_F32, 1, LCX_ACT_KEEP);
    lcx_model *m16 = open_model(name, pdt, LCX_BF16, 1, LCX_ACT_KEEP);
    if (!m32 || !m16) goto done;
    lcx_adamw_opts o = lcx_adamw_opts_default();
    o.lr = 1e-3;
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    double worst = 0, first = 0, last32 = 0, last16 = 0;
    for (int s = 0; s < STEPS; s++) {
        lcx_step_result r32, r16;
        CHECK_OK(lcx_model_train_step(m32, &b, 1, &o, &r32));
        CHECK_OK(lcx_model_train_step(m16, &b, 1, &o, &r16));
        double e = fabs(r16.loss - r32.loss) / fabs(r32.loss);
        CHECK_MSG(e <= BF_TRAIN, "%s: step %d: bf16 loss %.8f vs f32 %.8f (rel %.3g)", name, s + 1, r16.loss,
                  r32.loss, e);
        worst = worst_of(worst, e);
        if (s == 0) first = r32.loss;
        last32 = r32.loss, last16 = r16.loss;
    }
    note(&worst_train, worst);
    printf("%-18s bf16 acts: %d AdamW steps, loss %.5f -> %.5f (f32) / %.5f (bf16), max rel diff %.2e\n", name,
           STEPS, first, last32, last16, worst);
done:
    lcx_model_free(m32);
    lcx_model_free(m16);
}

/* (c) the KV cache in bf16 against the uncached bf16 forward; the cache takes half the f32 bytes. */
static void check_kv(const char *name, lcx_dtype pdt, const int32_t *ids) {
    lcx_model *m = open_model(name, pdt, LCX_BF16, 0, LCX_ACT_KEEP);
    lcx_model *m32 = open_model(name, pdt, LCX_F32, 0, LCX_ACT_KEEP);
    lcx_kv_cache *kc = NULL, *k32 = NULL;
    if (!m || !m32) goto done;
    int64_t V = lcx_model_config_of(m)->vocab_size;
    float *want = malloc((size_t)(T * V) * sizeof(float)), *got = malloc((size_t)(T * V) * sizeof(float));
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    CHECK_OK(lcx_model_forward(m, &b, want, NULL, NULL));
    CHECK_OK(lcx_kv_cache_init(&kc, m, T));
    CHECK_OK(lcx_kv_cache_init(&k32, m32, T));
    if (!kc || !k32) goto free_bufs;
    CHECK(2 * lcx_kv_cache_bytes(kc) == lcx_kv_cache_bytes(k32));
    CHECK_FAILS(lcx_model_forward_cached(m32, kc, ids, 1, 0, 0, NULL, NULL), LCX_ERR_INVALID, "in BF16");
    /* prefill of 10 tokens: the uncached calls on the same rows, bit for bit */
    fx_collect c = {got, 0, 0, T};
    CHECK_OK(lcx_model_forward_cached(m, kc, ids, 10, 10, 0, fx_on_rows, &c));
    lcx_model *mp = open_model(name, pdt, LCX_BF16, 0, LCX_ACT_KEEP);
    float *pre = malloc((size_t)(10 * V) * sizeof(float));
    lcx_batch bp = {.n_seq = 1, .seq_len = 10, .ids = ids};
    if (mp) CHECK_OK(lcx_model_forward(mp, &bp, pre, NULL, NULL));
    CHECK_MSG(memcmp(got, pre, (size_t)(10 * V) * sizeof(float)) == 0, "%s: bf16 prefill differs from uncached",
              name);
    free(pre);
    lcx_model_free(mp);
    /* decode the rest token by token against the uncached rows of the full sequence */
    for (int64_t i = 10; i < T; i++) {
        c.base = i;
        CHECK_OK(lcx_model_forward_cached(m, kc, ids + i, 1, 1, 0, fx_on_rows, &c));
    }
    double e = rel_max_err(got + 10 * V, want + 10 * V, (size_t)((T - 10) * V));
    int am = 1;
    for (int64_t r = 10; r < T; r++) am &= fx_argmax(got + r * V, V) == fx_argmax(want + r * V, V);
    CHECK_MSG(e <= BF_KV && am, "%s: bf16 cached decode: max rel err %.3g, argmax %s", name, e,
              am ? "same" : "differs");
    note(&worst_kv, e);
    printf("%-18s bf16 KV cache: decode vs uncached max rel err %.2e, argmax %s\n", name, e, am ? "same" : "differs");
free_bufs:
    free(want);
    free(got);
done:
    lcx_kv_cache_free(kc);
    lcx_kv_cache_free(k32);
    lcx_model_free(m);
    lcx_model_free(m32);
}

static void check_opts(void) {
    char *dir = fx_path("llama_gqa", "models", "");
    lcx_model_opts o = opts_of(LCX_F32, LCX_F16, 1, LCX_ACT_KEEP);
    lcx_model *m = NULL;
    CHECK_FAILS(lcx_model_from_checkpoint(dir, &o, &m), LCX_ERR_UNSUPPORTED, "activations can be stored as F32 or BF16");
    CHECK(m == NULL);
    free(dir);
    /* forward-only bytes: the act tensors halve, the f32 ones (lse, ones, logits chunk) do not */
    lcx_catalog *cat = NULL;
    char *d2 = fx_path("llama_gqa", "models", "");
    CHECK_OK(lcx_catalog_open(d2, &cat));
    free(d2);
    if (!cat) return;
    lcx_model_opts a = opts_of(LCX_F32, LCX_BF16, 0, LCX_ACT_KEEP), f = opts_of(LCX_F32, LCX_F32, 0, LCX_ACT_KEEP);
    size_t b16 = lcx_model_forward_bytes(&cat->cfg, &a), b32 = lcx_model_forward_bytes(&cat->cfg, &f);
    CHECK(b16 > b32 / 2 && b16 < b32);
    lcx_model *mi = NULL;
    CHECK_OK(lcx_model_init(&mi, &cat->cfg, &a));
    if (mi) CHECK(lcx_model_memory_of(mi).acts == b16);
    lcx_model_free(mi);
    printf("llama_gqa forward-only working set at %d tokens: %zu bytes (bf16) vs %zu (f32)\n", T, b16, b32);
    lcx_catalog_close(cat);
}

int main(void) {
    int32_t ids[64];
    check_opts();
    for (size_t k = 0; k < sizeof MODELS / sizeof MODELS[0]; k++) {
        const char *name = MODELS[k];
        CHECK_MSG(fx_inputs(name, ids, 64) == T, "%s: inputs.json", name);
        lcx_dtype pdt = strcmp(name, "llama_bf16") == 0 ? LCX_BF16 : LCX_F32;
        check_forward(name, pdt, ids);
        check_grads(name, pdt, ids);
        check_training(name, pdt, ids);
        check_kv(name, pdt, ids);
    }
    printf("worst: logits %.2e (bound %.2e), loss %.2e (bound %.2e), gradients %.2e (bound %.2e), training loss "
           "%.2e (bound %.2e), KV decode %.2e (bound %.2e)\n",
           worst_logits, BF_LOGITS, worst_loss, BF_LOSS, worst_grad, BF_GRAD, worst_train, BF_TRAIN, worst_kv,
           BF_KV);
    return test_summary("test_model_bf16");
}
