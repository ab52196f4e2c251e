/* Model invariants that need no reference data beyond the fixtures:
 * - activation policy: recompute (all layers, or mixed per layer) and offload give gradients bit-identical to
 *   keep, and recompute needs fewer activation bytes;
 * - chunked loss: loss chunk sizes 1, 3, 7 and seq give the same loss and gradients (float tolerance: chunks
 *   change the GEMM shapes, so OpenBLAS may sum in another order: loss 1e-7 relative, logits 1e-6 of the
 *   largest, gradients 1e-6 in norm);
 * - gradient accumulation: two micro-batches (one with ignored labels) == one packed batch of both rows, so the
 *   loss is normalised by the global counted tokens and packed rows do not attend to each other;
 * - a Mistral sliding window smaller than the sequence is a clear error;
 * - a few AdamW steps on one sequence lower its loss;
 * - models on a caller's exec (opts.exec) match models with their own. */
#include <string.h>

#include "model_fixture.h"
#include "test_util.h"

static lcx_model *open_fx(const char *name, int64_t max_tokens, int64_t chunk, lcx_act_policy pol,
                          const lcx_act_policy *layer_pol) {
    return fx_open(name, (lcx_model_opts){.max_tokens = max_tokens, .loss_chunk = chunk, .training = 1,
                                          .policy = pol, .layer_policy = layer_pol});
}

static void test_policies(const char *name) {
    int32_t ids[16];
    int64_t T = fx_inputs(name, ids, 16);
    CHECK(T == 16);
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    lcx_model *keep = open_fx(name, 16, 16, LCX_ACT_KEEP, NULL);
    lcx_model *rec = open_fx(name, 16, 16, LCX_ACT_RECOMPUTE, NULL);
    lcx_model *off = open_fx(name, 16, 16, LCX_ACT_OFFLOAD, NULL);
    const lcx_act_policy mixed_pol[2] = {LCX_ACT_RECOMPUTE, LCX_ACT_KEEP};
    lcx_model *mixed = open_fx(name, 16, 16, LCX_ACT_KEEP, mixed_pol);
    if (!keep || !rec || !off || !mixed) goto done;
    size_t n1, n2, n3, n4;
    double l1, l2, l3, l4;
    float *g1 = fx_grads(keep, &b, 1, &n1, &l1), *g2 = fx_grads(rec, &b, 1, &n2, &l2);
    float *g3 = fx_grads(off, &b, 1, &n3, &l3), *g4 = fx_grads(mixed, &b, 1, &n4, &l4);
    CHECK(n1 == n2 && n1 == n3 && n1 == n4);
    CHECK_MSG(memcmp(g1, g2, n1 * 4) == 0, "%s: recompute gradients differ from keep", name);
    CHECK_MSG(memcmp(g1, g3, n1 * 4) == 0, "%s: offload gradients differ from keep", name);
    CHECK_MSG(memcmp(g1, g4, n1 * 4) == 0, "%s: mixed recompute/keep gradients differ from keep", name);
    CHECK(l1 == l2 && l1 == l3 && l1 == l4);
    double nz = 0;
    for (size_t i = 0; i < n1; i++) nz += fabs(g1[i]);
    CHECK(nz > 0); /* the comparison is not over zeros */
    lcx_model_memory mk = lcx_model_memory_of(keep), mr = lcx_model_memory_of(rec), mm = lcx_model_memory_of(mixed);
    CHECK_MSG(mr.acts < mk.acts && mm.acts <= mk.acts, "%s: activation bytes keep %zu recompute %zu mixed %zu", name,
              mk.acts, mr.acts, mm.acts);
    printf("%s: keep == recompute == offload == mixed bit for bit; activation bytes keep %zu, recompute %zu\n", name,
           mk.acts, mr.acts);
    free(g1), free(g2), free(g3), free(g4);
done:
    lcx_model_free(keep), lcx_model_free(rec), lcx_model_free(off), lcx_model_free(mixed);
}

static void test_chunks(const char *name) {
    int32_t ids[16];
    int64_t T = fx_inputs(name, ids, 16);
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    lcx_model *m = open_fx(name, 16, 16, LCX_ACT_KEEP, NULL);
    if (!m) return;
    int64_t V = lcx_model_config_of(m)->vocab_size;
    size_t n0;
    double l0, lf0;
    float *g0 = fx_grads(m, &b, 1, &n0, &l0);
    float *logit0 = malloc((size_t)(T * V) * 4), *logit = malloc((size_t)(T * V) * 4);
    CHECK_OK(lcx_model_forward(m, &b, logit0, &lf0, NULL));
    CHECK(lf0 / 15 == l0);
    const int64_t sizes[] = {1, 3, 7, 16};
    for (size_t k = 0; k < 4; k++) {
        CHECK_OK(lcx_model_set_loss_chunk(m, sizes[k]));
        size_t n;
        double l, lf;
        float *g = fx_grads(m, &b, 1, &n, &l);
        CHECK_REL(l, l0, 1e-7);
        double e = rel_norm_err(g, g0, n);
        CHECK_MSG(e <= 1e-6, "%s chunk %lld: gradients rel error %.3g", name, (long long)sizes[k], e);
        CHECK_OK(lcx_model_forward(m, &b, logit, &lf, NULL));
        double el = rel_max_err(logit, logit0, (size_t)(T * V));
        CHECK_MSG(el <= 1e-6, "chunk %lld: logits rel error %.3g", (long long)sizes[k], el);
        CHECK_REL(lf, lf0, 1e-7);
        printf("%s loss chunk %2lld: loss %.10f (unchunked %.10f), grads rel err %.2e\n", name, (long long)sizes[k],
               l, l0, e);
        free(g);
    }
    CHECK_FAILS(lcx_model_set_loss_chunk(m, 17), LCX_ERR_INVALID, "loss chunk 17");
    free(g0), free(logit0), free(logit);
    lcx_model_free(m);
}

static void test_accumulation(const char *name) {
    int32_t ids[32], tgt[32];
    int64_t T = fx_inputs(name, ids, 16);
    /* second row: the first row reversed, with explicit targets, some ignored */
    for (int64_t i = 0; i < T; i++) ids[T + i] = ids[T - 1 - i];
    for (int64_t i = 0; i < T; i++) {
        tgt[i] = i + 1 < T ? ids[i + 1] : LCX_IGNORE_INDEX;
        tgt[T + i] = (i % 3 == 0 || i + 1 == T) ? LCX_IGNORE_INDEX : ids[T + i + 1];
    }
    lcx_batch micro[2] = {{.n_seq = 1, .seq_len = T, .ids = ids, .targets = tgt},
                          {.n_seq = 1, .seq_len = T, .ids = ids + T, .targets = tgt + T}};
    lcx_batch packed = {.n_seq = 2, .seq_len = T, .ids = ids, .targets = tgt};
    CHECK(lcx_batch_count(&packed) == 15 + 10);
    lcx_model *m = open_fx(name, 32, 7, LCX_ACT_KEEP, NULL);
    if (!m) return;
    size_t na, nb;
    double la, lb;
    float *ga = fx_grads(m, micro, 2, &na, &la);
    float *gb = fx_grads(m, &packed, 1, &nb, &lb);
    CHECK(na == nb);
    CHECK_REL(la, lb, 1e-6);
    double e = rel_norm_err(ga, gb, na);
    CHECK_MSG(e <= 1e-5, "%s: 2 micro-batches vs packed batch: grads rel error %.3g", name, e);
    /* the train step uses the same normalisation */
    lcx_adamw_opts o = lcx_adamw_opts_default();
    lcx_step_result r;
    CHECK_OK(lcx_model_train_step(m, micro, 2, &o, &r));
    CHECK(r.n_tokens == 25);
    CHECK_REL(r.loss, la, 1e-12);
    printf("%s: accumulation over 2 micro-batches loss %.8f vs packed %.8f, grads rel err %.2e\n", name, la, lb, e);
    free(ga), free(gb);
    lcx_model_free(m);
}

static void test_errors(void) {
    int32_t ids[16];
    int64_t T = fx_inputs("mistral", ids, 16);
    char *dir = fx_path("mistral", "models", "");
    lcx_catalog *c = NULL;
    CHECK_OK(lcx_catalog_open(dir, &c));
    free(dir);
    if (!c) return;
    lcx_model_config cfg = c->cfg;
    cfg.sliding_window = 8; /* as if the config had a window of 8 (the parser refuses < max_pos) */
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = 16;
    o.training = 1;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &cfg, &o));
    if (m) {
        CHECK_OK(lcx_model_load(m, c));
        lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
        CHECK_FAILS(lcx_model_forward(m, &b, NULL, NULL, NULL), LCX_ERR_UNSUPPORTED, "sliding_window 8");
        lcx_batch b8 = {.n_seq = 1, .seq_len = 8, .ids = ids};
        double ls;
        CHECK_OK(lcx_model_forward(m, &b8, NULL, &ls, NULL));
        lcx_batch big = {.n_seq = 2, .seq_len = 16, .ids = ids};
        CHECK_FAILS(lcx_model_forward(m, &big, NULL, NULL, NULL), LCX_ERR_INVALID, "capacity");
        int32_t bad[8] = {1, 2, 3, 400, 5, 6, 7, 8};
        lcx_batch bb = {.n_seq = 1, .seq_len = 8, .ids = bad};
        CHECK_FAILS(lcx_model_forward(m, &bb, NULL, NULL, NULL), LCX_ERR_INVALID, "outside the vocabulary");
        int32_t pos[8] = {0, 1, 2, 4, 5, 6, 7, 8};
        lcx_batch bp = {.n_seq = 1, .seq_len = 8, .ids = ids, .positions = pos};
        CHECK_FAILS(lcx_model_forward(m, &bp, NULL, NULL, NULL), LCX_ERR_INVALID, "consecutive");
        int32_t allign[8];
        for (int i = 0; i < 8; i++) allign[i] = LCX_IGNORE_INDEX;
        lcx_batch bi = {.n_seq = 1, .seq_len = 8, .ids = ids, .targets = allign};
        lcx_adamw_opts ao = lcx_adamw_opts_default();
        CHECK_FAILS(lcx_model_train_step(m, &bi, 1, &ao, NULL), LCX_ERR_INVALID, "no counted target");
        ao.beta1 = 1.0;
        CHECK_FAILS(lcx_model_train_step(m, &b8, 1, &ao, NULL), LCX_ERR_INVALID, "hyper-parameters");
    }
    lcx_model_free(m);
    lcx_act_policy p;
    CHECK_OK(lcx_act_policy_parse("recompute", &p));
    CHECK(p == LCX_ACT_RECOMPUTE);
    CHECK_FAILS(lcx_act_policy_parse("swap", &p), LCX_ERR_INVALID, "'swap'");
    /* auto is the planner's to resolve: a model refuses it */
    lcx_model_opts ao2;
    memset(&ao2, 0, sizeof ao2);
    ao2.max_tokens = 8;
    ao2.policy = LCX_ACT_AUTO;
    lcx_model *ma = NULL;
    CHECK_FAILS(lcx_model_init(&ma, &cfg, &ao2), LCX_ERR_INVALID, "auto");
    CHECK(ma == NULL);
    lcx_catalog_close(c);
}

/* Global positions: a row at positions 100.. equals HF-free self-consistency: shifting positions changes the
 * logits (rope is applied) but a consecutive run from an offset is accepted. Then a few steps lower the loss. */
static void test_training(void) {
    int32_t ids[16];
    int64_t T = fx_inputs("llama_gqa", ids, 16);
    lcx_model *m = open_fx("llama_gqa", 16, 4, LCX_ACT_RECOMPUTE, NULL);
    if (!m) return;
    int32_t pos[16];
    for (int i = 0; i < 16; i++) pos[i] = 20 + i;
    lcx_batch bp = {.n_seq = 1, .seq_len = T, .ids = ids, .positions = pos}, b = {.n_seq = 1, .seq_len = T, .ids = ids};
    double l0, l1;
    CHECK_OK(lcx_model_forward(m, &b, NULL, &l0, NULL));
    CHECK_OK(lcx_model_forward(m, &bp, NULL, &l1, NULL));
    CHECK(l0 != l1);
    lcx_adamw_opts o = lcx_adamw_opts_default();
    o.lr = 1e-2;
    double first = 0, last = 0;
    for (int s = 0; s < 6; s++) {
        lcx_step_result r;
        CHECK_OK(lcx_model_train_step(m, &b, 1, &o, &r));
        if (s == 0) first = r.loss;
        last = r.loss;
        CHECK(r.step == s + 1);
    }
    CHECK_MSG(last < first - 0.5, "loss %.4f -> %.4f after 6 steps", first, last);
    lcx_model_free(m);
}

/* Inference-only models (no grads, and no fp32 master for bf16 weights) give the training model's logits bit for
 * bit, and the bf16 one is smaller. */
static void test_inference_only(void) {
    int32_t ids[16];
    int64_t T = fx_inputs("qwen3", ids, 16);
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    for (int k = 0; k < 2; k++) {
        lcx_model *mm[2] = {NULL, NULL};
        float *lg[2];
        for (int tr = 0; tr < 2; tr++) {
            char *dir = fx_path("qwen3", "models", "");
            lcx_model_opts o;
            memset(&o, 0, sizeof o);
            o.param_dtype = k ? LCX_BF16 : LCX_F32;
            o.max_tokens = 16;
            o.training = tr;
            CHECK_OK(lcx_model_from_checkpoint(dir, &o, &mm[tr]));
            free(dir);
            lg[tr] = calloc(16 * 128, sizeof(float));
            if (mm[tr]) CHECK_OK(lcx_model_forward(mm[tr], &b, lg[tr], NULL, NULL));
        }
        CHECK(memcmp(lg[0], lg[1], 16 * 128 * sizeof(float)) == 0);
        if (mm[0] && mm[1]) {
            lcx_model_memory a = lcx_model_memory_of(mm[0]), t = lcx_model_memory_of(mm[1]);
            CHECK(a.grads == 0 && a.moments == 0 && t.grads > 0);
            if (k) CHECK(a.master < t.master && a.params * 2 <= t.master);
            float w[48];
            CHECK_FAILS(lcx_model_get_grad(mm[0], 1, w), LCX_ERR_INVALID, "not built for training");
        }
        for (int tr = 0; tr < 2; tr++) lcx_model_free(mm[tr]), free(lg[tr]);
    }
}

/* A caller's exec (opts.exec): two models share it, each gives what a model with its own exec gives bit for bit,
 * the arena grows to the larger need, and the exec outlives the models. */
static void test_shared_exec(void) {
    int32_t ids[16];
    int64_t T = fx_inputs("qwen3", ids, 16);
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(NULL, &x));
    if (!x) return;
    lcx_model *mm[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        char *dir = fx_path("qwen3", "models", "");
        lcx_model_opts o;
        memset(&o, 0, sizeof o);
        o.max_tokens = i == 1 ? 16 : 32;
        o.training = 1;
        o.exec = i < 2 ? x : NULL;
        CHECK_OK(lcx_model_from_checkpoint(dir, &o, &mm[i]));
        free(dir);
    }
    if (mm[0] && mm[1] && mm[2]) {
        lcx_adamw_opts ao = lcx_adamw_opts_default();
        lcx_step_result r[3];
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 3; i++) CHECK_OK(lcx_model_train_step(mm[i], &b, 1, &ao, &r[i]));
        CHECK(r[0].loss == r[2].loss && r[1].loss == r[2].loss && r[0].grad_norm == r[2].grad_norm);
        const lcx_param_table *t = lcx_model_params(mm[0]);
        int differ = 0;
        for (size_t i = 0; i < t->n; i++) {
            size_t n = (size_t)t->params[i].numel;
            float *w0 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
            CHECK_OK(lcx_model_get_master(mm[0], i, w0));
            CHECK_OK(lcx_model_get_master(mm[2], i, w2));
            differ += memcmp(w0, w2, n * sizeof(float)) != 0;
            free(w0);
            free(w2);
        }
        CHECK_MSG(differ == 0, "%d parameters differ between a shared and an own exec", differ);
    }
    size_t held = x->scratch_bytes;
    for (int i = 0; i < 3; i++) lcx_model_free(mm[i]);
    CHECK(x->scratch_bytes == held && held > 0); /* attention backward at 32 tokens needs scratch */
    CHECK_OK(x->be->sync(x));
    lcx_exec_free(x);
}

int main(void) {
    test_shared_exec();
    test_inference_only();
    const char *names[] = {"llama_gqa", "llama_tied", "qwen2", "qwen3"};
    for (int i = 0; i < 4; i++) test_policies(names[i]);
    test_chunks("llama_gqa");
    test_chunks("llama_tied");
    test_accumulation("llama_gqa");
    test_accumulation("qwen3");
    test_errors();
    test_training();
    return test_summary("test_model_policies");
}
