/* Activation policies per layer on 6-layer models (llama GQA and qwen3 shapes of the fixtures, random weights), f32
 * and bf16 activations:
 * - recompute, offload and recompute+offload on every layer, and two mixed per-layer assignments, give the loss
 *   and every gradient of keep bit for bit (and a forward's logits, and a training step's loss and norm);
 * - the offload pools' high-water marks equal what the schedule implies from the model's shapes, computed here:
 *   a layer's stored bytes (its input plus what its policy stores, each tensor rounded up to 64 bytes), 2 layers
 *   in flight in the forward, the running layer plus `depth` prefetched in the backward, every offloaded layer on
 *   the host at the turn; the device pool is (depth + 2) slots; both pools are empty after a step. */
#include <string.h>

#include "model_fixture.h"
#include "src/checkpoint/catalog.h"
#include "test_util.h"

enum { L = 6, NSEQ = 2, SEQ = 8, TOK = NSEQ * SEQ };

static size_t r64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Stored bytes of one layer under an offloading policy, from the config alone. */
static size_t stored_bytes(const lcx_model_config *c, lcx_act_policy p, size_t a) {
    const size_t T = TOK, H = (size_t)c->hidden_size, Q = (size_t)(c->num_attention_heads * c->head_dim);
    const size_t KV = (size_t)(c->num_key_value_heads * c->head_dim), F = (size_t)c->intermediate_size;
    const size_t nh = (size_t)c->num_attention_heads, nkv = (size_t)c->num_key_value_heads;
    size_t b = r64(T * H * a) + r64(T * Q * a) + r64(T * nh * 4); /* input, attention output, LSE */
    if (p == LCX_ACT_RECOMPUTE_OFFLOAD) return b;
    b += r64(T * H * a) + r64(T * 4);                               /* xn1, rstd1 */
    if (c->qk_norm) b += r64(T * Q * a) + r64(T * KV * a) + r64(T * nh * 4) + r64(T * nkv * 4);
    b += r64(T * Q * a) + 2 * r64(T * KV * a);                      /* q, k, v */
    b += 2 * r64(T * H * a) + r64(T * 4);                           /* h, xn2, rstd2 */
    b += 3 * r64(T * F * a);                                        /* gate, up, act */
    return b;
}

static lcx_model *make(const lcx_model_config *cfg, lcx_dtype adt, const lcx_act_policy *pol, int depth) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = TOK;
    o.loss_chunk = 5;
    o.training = 1;
    o.act_dtype = adt;
    o.layer_policy = pol;
    o.offload_prefetch = depth;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 1234, 0.05));
    return m;
}

/* The schedule's high-water marks for policies pol at prefetch depth d (bytes[l] = 0: not offloaded). */
static void expected_hwm(const size_t *bytes, int d, size_t *dev, size_t *host) {
    *dev = *host = 0;
    for (int l = 0; l < L; l++) {
        *host += bytes[l];
        size_t fwd = bytes[l] + (l + 1 < L ? bytes[l + 1] : 0), bwd = 0;
        for (int j = l; j >= 0 && j >= l - d; j--) bwd += bytes[j];
        if (fwd > *dev) *dev = fwd;
        if (bwd > *dev) *dev = bwd;
    }
}

static void run(const char *name) {
    char *dir = fx_path(name, "models", "");
    lcx_catalog *c = NULL;
    CHECK_OK(lcx_catalog_open(dir, &c));
    free(dir);
    if (!c) return;
    lcx_model_config cfg = c->cfg;
    cfg.num_hidden_layers = L;
    int32_t ids[TOK];
    for (int t = 0; t < TOK; t++) ids[t] = (int32_t)((t * 37 + 11) % cfg.vocab_size);
    lcx_batch b = {.n_seq = NSEQ, .seq_len = SEQ, .ids = ids};
    const lcx_act_policy K = LCX_ACT_KEEP, R = LCX_ACT_RECOMPUTE, O = LCX_ACT_OFFLOAD, RO = LCX_ACT_RECOMPUTE_OFFLOAD;
    const lcx_act_policy cases[][L] = {
        {R, R, R, R, R, R},  {O, O, O, O, O, O}, {RO, RO, RO, RO, RO, RO},
        {O, RO, O, R, K, K}, /* offload the first layers, keep the last; recompute before an offloaded layer */
        {R, O, RO, RO, O, K},
    };
    const char *case_names[] = {"recompute", "offload", "recompute+offload", "mixed O RO O R K K", "mixed R O RO RO O K"};
    for (int ad = 0; ad < 2; ad++) {
        lcx_dtype adt = ad ? LCX_BF16 : LCX_F32;
        const lcx_act_policy keep[L] = {K, K, K, K, K, K};
        lcx_model *mk = make(&cfg, adt, keep, 0);
        if (!mk) continue;
        size_t n0;
        double l0;
        float *g0 = fx_grads(mk, &b, 1, &n0, &l0);
        float *lg0 = malloc((size_t)TOK * (size_t)cfg.vocab_size * 4), *lg = malloc((size_t)TOK * (size_t)cfg.vocab_size * 4);
        double lf0, lf;
        CHECK_OK(lcx_model_forward(mk, &b, lg0, &lf0, NULL));
        lcx_adamw_opts ao = lcx_adamw_opts_default();
        lcx_step_result s0, s;
        CHECK_OK(lcx_model_train_step(mk, &b, 1, &ao, &s0));
        double nz = 0;
        for (size_t i = 0; i < n0; i++) nz += fabs(g0[i]);
        CHECK(nz > 0);
        CHECK(lcx_model_offload_stats(mk).n_layers == 0 && lcx_model_memory_of(mk).offload_device == 0);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            for (int depth = 1; depth <= 3; depth++) {
                if (depth > 1 && k != 1 && k != 3) continue; /* depths on all-offload and one mixed case */
                lcx_model *m = make(&cfg, adt, cases[k], depth);
                if (!m) continue;
                size_t n;
                double l;
                float *g = fx_grads(m, &b, 1, &n, &l);
                CHECK(n == n0);
                CHECK_MSG(memcmp(g, g0, n * 4) == 0 && l == l0, "%s %s %s depth %d: gradients or loss differ from keep",
                          name, lcx_dtype_name(adt), case_names[k], depth);
                /* the pools against the schedule */
                size_t bytes[L], slot = 0, host_pool = 0, dev_hwm, host_hwm;
                for (int i = 0; i < L; i++) {
                    bytes[i] = lcx_act_offloads(cases[k][i]) ? stored_bytes(&cfg, cases[k][i], lcx_act_size(adt)) : 0;
                    if (bytes[i] > slot) slot = bytes[i];
                    host_pool += bytes[i];
                }
                expected_hwm(bytes, depth, &dev_hwm, &host_hwm);
                lcx_offload_stats st = lcx_model_offload_stats(m);
                lcx_model_memory mm = lcx_model_memory_of(m);
                CHECK(st.prefetch == depth && st.slots == (slot ? depth + 2 : 0) && st.slot_bytes == slot);
                CHECK(mm.offload_device == (size_t)(depth + 2) * slot && mm.offload_host == host_pool);
                CHECK_MSG(st.device_hwm == dev_hwm && st.host_hwm == host_hwm,
                          "%s %s %s depth %d: device high-water mark %zu (expected %zu), host %zu (expected %zu)",
                          name, lcx_dtype_name(adt), case_names[k], depth, st.device_hwm, dev_hwm, st.host_hwm,
                          host_hwm);
                CHECK(st.device_used == 0 && st.host_used == 0);
                if (k == 1)
                    printf("%s %s all offload, depth %d: device pool high-water %zu = %zu x %zu (stored bytes of one "
                           "layer), pool %zu; host high-water %zu = %d layers; keep's activations %zu, this model's "
                           "%zu\n",
                           name, lcx_dtype_name(adt), depth, st.device_hwm, st.device_hwm / slot, slot,
                           mm.offload_device, st.host_hwm, L, lcx_model_memory_of(mk).acts, mm.acts);
                /* a forward alone (nothing kept for a backward) and a training step */
                CHECK_OK(lcx_model_forward(m, &b, lg, &lf, NULL));
                CHECK(lf == lf0 && memcmp(lg, lg0, (size_t)TOK * (size_t)cfg.vocab_size * 4) == 0);
                CHECK_OK(lcx_model_train_step(m, &b, 1, &ao, &s));
                CHECK(s.loss == s0.loss && s.grad_norm == s0.grad_norm);
                CHECK(s.offload_wait_s >= 0 && s.offload_wait_s < 1);
                CHECK(lcx_model_offload_stats(m).device_used == 0 && lcx_model_offload_stats(m).host_used == 0);
                free(g);
                lcx_model_free(m);
            }
            printf("%s %s %s: loss and gradients == keep bit for bit\n", name, lcx_dtype_name(adt), case_names[k]);
        }
        free(g0), free(lg0), free(lg);
        lcx_model_free(mk);
    }
    lcx_catalog_close(c);
}

static void test_parse(void) {
    lcx_act_policy p = LCX_ACT_KEEP;
    CHECK_OK(lcx_act_policy_parse("recompute+offload", &p));
    CHECK(p == LCX_ACT_RECOMPUTE_OFFLOAD);
    p = LCX_ACT_KEEP;
    CHECK_OK(lcx_act_policy_parse("recompute_offload", &p));
    CHECK(p == LCX_ACT_RECOMPUTE_OFFLOAD);
    CHECK(strcmp(lcx_act_policy_name(LCX_ACT_RECOMPUTE_OFFLOAD), "recompute+offload") == 0);
    CHECK(strcmp(lcx_act_policy_name(LCX_ACT_AUTO), "auto") == 0);
    CHECK_FAILS(lcx_act_policy_parse("auto", &p), LCX_ERR_INVALID, "recompute+offload");
}

int main(void) {
    test_parse();
    run("llama_gqa");
    run("qwen3");
    return test_summary("test_model_offload");
}
