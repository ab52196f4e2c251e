/* The model on a backend whose memory the host cannot touch (guarded_backend.h: the CPU kernels behind page
 * mappings that are PROT_NONE outside backend calls), against the same model on the CPU backend: training steps
 * (every activation policy, bf16 activations and parameters, MLP tiles, small loss chunks), forward logits and
 * the KV cache give the same losses, norms, logits and weights bit for bit, and no host code reads or writes a
 * backend buffer directly (that would fault: the handler names the buffer and the stack). This is what lets the
 * model run on a GPU table; the GPU itself is checked by the cuda tests. */
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>

#include "guarded_backend.h"
#include "model_fixture.h"
#include "test_util.h"

typedef struct variant {
    const char *what;
    lcx_model_opts o;
} variant;

/* Three AdamW steps on both backends: the same step results and the same weights after each. */
static void test_train(const char *name, const variant *v) {
    int32_t ids[16];
    int64_t T = fx_inputs(name, ids, 16);
    CHECK(T == 16);
    lcx_batch b[2] = {{1, 8, ids, NULL, NULL}, {1, 8, ids + 8, NULL, NULL}};
    lcx_model_opts oc = v->o, og = v->o;
    oc.training = og.training = 1;
    oc.max_tokens = og.max_tokens = 8;
    og.backend = guarded_backend();
    lcx_model *mc = fx_open(name, oc), *mg = fx_open(name, og);
    if (!mc || !mg) goto done;
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    ao.lr = 1e-2;
    size_t calls0 = gb_calls;
    for (int step = 0; step < 3; step++) {
        lcx_step_result rc, rg;
        CHECK_OK(lcx_model_train_step(mc, b, 2, &ao, &rc));
        CHECK_OK(lcx_model_train_step(mg, b, 2, &ao, &rg));
        CHECK_MSG(rc.loss == rg.loss && rc.grad_norm == rg.grad_norm && rc.n_tokens == rg.n_tokens,
                  "%s %s step %d: loss %.9g / %.9g, norm %.9g / %.9g", name, v->what, step, rc.loss, rg.loss,
                  rc.grad_norm, rg.grad_norm);
        size_t nc, ng;
        float *wc = fx_all_params(mc, &nc), *wg = fx_all_params(mg, &ng);
        CHECK(nc == ng && memcmp(wc, wg, nc * sizeof(float)) == 0);
        free(wc), free(wg);
    }
    size_t nc, ng;
    float *gc = fx_all_grads(mc, &nc), *gg = fx_all_grads(mg, &ng);
    double nz = 0;
    for (size_t i = 0; i < nc; i++) nz += fabs(gc[i]);
    CHECK_MSG(nc == ng && memcmp(gc, gg, nc * sizeof(float)) == 0 && nz > 0, "%s %s: gradients differ", name,
              v->what);
    CHECK(gb_calls > calls0 + 100); /* the guarded model ran its ops through the guarded table */
    printf("%s, %s: 3 steps equal bit for bit on the guarded backend (%zu guarded calls)\n", name, v->what,
           gb_calls - calls0);
    free(gc), free(gg);
done:
    lcx_model_free(mc), lcx_model_free(mg);
}

/* Forward-only: chunked logits, then a KV-cache prefill and three decode steps. */
static void test_infer(const char *name) {
    int32_t ids[16];
    int64_t T = fx_inputs(name, ids, 16);
    lcx_model_opts oc = {.max_tokens = 16, .loss_chunk = 5}, og = oc;
    og.backend = guarded_backend();
    lcx_model *mc = fx_open(name, oc), *mg = fx_open(name, og);
    if (!mc || !mg) goto done;
    int64_t V = lcx_model_config_of(mc)->vocab_size;
    float *lc = calloc((size_t)(T * V), sizeof(float)), *lg = calloc((size_t)(T * V), sizeof(float));
    lcx_batch b = {1, T, ids, NULL, NULL};
    double sc = 0, sg = 0;
    CHECK_OK(lcx_model_forward(mc, &b, lc, &sc, NULL));
    CHECK_OK(lcx_model_forward(mg, &b, lg, &sg, NULL));
    CHECK(sc == sg && sc > 0 && memcmp(lc, lg, (size_t)(T * V) * sizeof(float)) == 0);
    lcx_kv_cache *kc = NULL, *kg = NULL;
    CHECK_OK(lcx_kv_cache_init(&kc, mc, T));
    CHECK_OK(lcx_kv_cache_init(&kg, mg, T));
    if (kc && kg) {
        fx_collect cc = {lc, 0, 0, T}, cg = {lg, 0, 0, T};
        CHECK_OK(lcx_model_forward_cached(mc, kc, ids, T - 3, T - 3, 0, fx_on_rows, &cc));
        CHECK_OK(lcx_model_forward_cached(mg, kg, ids, T - 3, T - 3, 0, fx_on_rows, &cg));
        for (int64_t i = T - 3; i < T; i++) {
            cc.base = cg.base = i;
            CHECK_OK(lcx_model_forward_cached(mc, kc, ids + i, 1, 1, 0, fx_on_rows, &cc));
            CHECK_OK(lcx_model_forward_cached(mg, kg, ids + i, 1, 1, 0, fx_on_rows, &cg));
        }
        CHECK(cc.seen == T && cg.seen == T && memcmp(lc, lg, (size_t)(T * V) * sizeof(float)) == 0);
        printf("%s: forward logits and KV-cache decode equal bit for bit on the guarded backend\n", name);
    }
    lcx_kv_cache_free(kc), lcx_kv_cache_free(kg);
    free(lc), free(lg);
done:
    lcx_model_free(mc), lcx_model_free(mg);
}

/* The guard itself: a host write into a guarded buffer ends a child with the handler's exit code 3; the same
 * write through copy_h2d, and a read back through copy_d2h, pass. */
static void test_guard(void) {
    const lcx_backend *be = guarded_backend();
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(be, &x));
    float *d = NULL, one = 1.0f, back = 0.0f;
    CHECK_OK(be->alloc(sizeof(float), (void **)&d));
    if (!x || !d) return;
    CHECK_OK(be->copy_h2d(x, d, &one, sizeof one));
    CHECK_OK(be->copy_d2h(x, &back, d, sizeof back));
    CHECK(back == 1.0f);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2); /* the handler's report is expected */
        *(volatile float *)d = 2.0f;
        _exit(0);
    }
    int ws = 0;
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 3, "a host write into a guarded buffer was not caught (status %d)",
              ws);
    be->free(d);
    lcx_exec_free(x);
}

int main(void) {
    test_guard();
    static const lcx_act_policy mixed[2] = {LCX_ACT_RECOMPUTE_OFFLOAD, LCX_ACT_OFFLOAD};
    const variant vs[] = {
        {"keep", {.loss_chunk = 3}},
        {"recompute, MLP tile 3", {.loss_chunk = 8, .policy = LCX_ACT_RECOMPUTE, .mlp_chunk = 3}},
        {"offload", {.policy = LCX_ACT_OFFLOAD}},
        {"recompute+offload / offload, bf16 activations",
         {.act_dtype = LCX_BF16, .policy = LCX_ACT_KEEP, .layer_policy = mixed}},
        {"bf16 parameters and activations", {.param_dtype = LCX_BF16, .act_dtype = LCX_BF16, .loss_chunk = 5}},
    };
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) test_train("llama_gqa", &vs[i]);
    test_train("qwen3", &vs[0]);
    test_train("llama_tied", &vs[3]);
    test_infer("llama_gqa");
    test_infer("qwen2");
    return test_summary("test_model_device");
}
