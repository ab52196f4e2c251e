/* Backend registry, exec contexts (arena, workspace check, events, timed events), the shared argument checks (the CUDA table
 * reports bad arguments as the CPU does), memory ops, casts, add/scale/axpy (float32 and bf16) and the squared
 * norm (a device result that accumulates). References: float32 results of a single rounding computed through
 * double (exact for these ops), bf16 widening by a 16-bit shift, and a plain double sum. */
#include <stdint.h>

#include "ops_common.h"
#include "timed_events.h"

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static lcx_exec *X;

static lcx_status ew(lcx_op op, lcx_dtype dt, float alpha, const void *a, const void *b, void *out, int64_t n) {
    lcx_elementwise_args e = {.dt = dt, .n = n, .alpha = alpha, .a = a, .b = b, .out = out};
    return op_exact(X, op, &e);
}
static lcx_status cast(lcx_dtype sd, const void *src, lcx_dtype dd, void *dst, int64_t n) {
    lcx_cast_args c = {.n = n, .src_dt = sd, .dst_dt = dd, .src = src, .dst = dst};
    return op_exact(X, LCX_OP_CAST, &c);
}
static lcx_status sqnorm(const float *x, int64_t n, double *out) {
    lcx_sqnorm_args a = {.n = n, .x = x, .out = out};
    return op_exact(X, LCX_OP_SQNORM, &a);
}

/* Contexts: creation, the arena (grows, never shrinks), the size check, events, sync. */
static void check_exec(const lcx_backend *be) {
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(NULL, &x));
    CHECK(x && x->be == be && x->queue == NULL && x->handles == NULL && x->scratch == NULL && x->scratch_bytes == 0);
    CHECK_OK(lcx_exec_need(x, 0, "op"));
    CHECK_FAILS(lcx_exec_need(x, 100, "some_op"), LCX_ERR_INVALID, "some_op: needs 100 bytes");
    CHECK(strstr(lcx_last_error(), "holds 0") != NULL);
    CHECK_OK(lcx_exec_reserve(x, 1000));
    CHECK(x->scratch != NULL && x->scratch_bytes == 1000 && ((uintptr_t)x->scratch % 64) == 0);
    void *keep = x->scratch;
    CHECK_OK(lcx_exec_reserve(x, 10)); /* never shrinks */
    CHECK(x->scratch == keep && x->scratch_bytes == 1000);
    CHECK_OK(lcx_exec_need(x, 1000, "op"));
    CHECK_FAILS(lcx_exec_need(x, 1001, "op"), LCX_ERR_INVALID, "needs 1001 bytes");
    CHECK(strstr(lcx_last_error(), "holds 1000") != NULL);
    CHECK_OK(lcx_exec_reserve(x, 5000));
    CHECK(x->scratch_bytes == 5000);
    lcx_sqnorm_args sq = {.n = 100000};
    CHECK(lcx_exec_workspace(x, LCX_OP_SQNORM, &sq) == x->be->workspace(x, LCX_OP_SQNORM, &sq));
    CHECK(lcx_exec_workspace(x, LCX_OP_SQNORM, &sq) > 0);
    lcx_elementwise_args ea = {.dt = LCX_F32, .n = 100000};
    CHECK(lcx_exec_workspace(x, LCX_OP_ADD, &ea) == 0);
    lcx_event *e = NULL;
    CHECK_OK(be->event_create(&e, 0));
    CHECK_OK(be->event_record(x, e));
    CHECK_OK(be->event_wait(x, e));
    CHECK_OK(be->event_sync(e));
    CHECK_OK(be->sync(x));
    be->event_free(e);
    check_timed_events(be, x);
    be->event_free(NULL);
    CHECK_FAILS(be->sync(NULL), LCX_ERR_INVALID, "NULL");
    lcx_exec_free(x);
    lcx_exec_free(NULL);
    /* an op without exec or arguments */
    CHECK_FAILS(be->add(NULL, &ea), LCX_ERR_INVALID, "add: NULL exec");
    CHECK_FAILS(be->add(X, NULL), LCX_ERR_INVALID, "add: NULL arguments");
}

/* Bad arguments are caught by the backends' shared check layer (kernels/backend_check.c) in front of each table:
 * the CUDA table, in builds that have one, fails with the CPU's status and the same line, one call per op family.
 * No device is needed: every call fails its checks before any CUDA call, so the CUDA exec has no queue. */
static void check_shared_checks(void) {
    const lcx_backend *cu = lcx_backend_get("cuda");
    if (!cu) return; /* a build without CUDA */
    lcx_exec cx = {.be = cu};
    float f[4] = {0};
    const lcx_matmul_args mm_size = {.m = -1, .n = 2, .k = 2, .batch = 1};
    const lcx_matmul_args mm_dt = {.m = 2, .n = 2, .k = 2, .batch = 1, .a_dtype = LCX_F16, .b_dtype = LCX_F32};
    const lcx_matmul_args mm_ld = {.m = 2, .n = 3, .k = 4, .batch = 1, .lda = 3, .a_dtype = LCX_F32,
                                   .b_dtype = LCX_F32};
    const lcx_embedding_args emb = {.dt = LCX_F32, .n_tokens = 2, .n_rows = 2, .dim = 2, .n_vocab = 2,
                                    .w_dtype = LCX_F32, .weight = f, .out = f};
    const lcx_rmsnorm_args rms = {.dt = LCX_F32, .n_rows = 1, .dim = 0};
    const lcx_rope_args rope = {.dt = LCX_BF16, .n_tokens = 1, .n_heads = 1, .head_dim = 4, .rot_dim = 3};
    const lcx_attn_args attn = {.dt = LCX_F32, .n_heads = 2, .n_kv_heads = 2, .head_dim = 4, .mask = 7};
    const lcx_attn_merge_args merge = {.dt = LCX_F32, .n_rows = 1, .n_heads = 0, .head_dim = 4};
    const lcx_swiglu_args sw = {.dt = LCX_F32, .n = 4, .gate = f, .up = f};
    const lcx_xent_args xent = {.dt = LCX_F32, .n_rows = 1, .vocab = 4, .logits = f, .targets = (const int32_t *)f,
                                .phase = LCX_XENT_FINISH, .tp = 1, .n_valid = 4, .stats = (double *)f};
    const lcx_adamw_args adamw = {.beta1 = 1.0, .beta2 = 0.9, .step = 1, .n = 1};
    const lcx_sqnorm_args sq = {.n = 4, .x = f};
    const lcx_cast_args cast = {.n = 4, .src_dt = LCX_F16, .dst_dt = LCX_F32, .src = f, .dst = f};
    const lcx_elementwise_args ew_dt = {.dt = LCX_F64, .n = 4, .a = f, .b = f, .out = f};
    const lcx_elementwise_args ew_out = {.dt = LCX_F32, .n = 4, .a = f};
    const struct {
        lcx_op op;
        const void *args;
    } bad[] = {
        {LCX_OP_MATMUL, &mm_size},      {LCX_OP_MATMUL, &mm_dt},           {LCX_OP_MATMUL, &mm_ld},
        {LCX_OP_EMBEDDING_FWD, &emb},   {LCX_OP_RMSNORM_BWD, &rms},        {LCX_OP_ROPE_FWD, &rope},
        {LCX_OP_ATTENTION_FWD, &attn},  {LCX_OP_ATTENTION_MERGE, &merge},  {LCX_OP_SWIGLU_FWD, &sw},
        {LCX_OP_CROSS_ENTROPY, &xent},  {LCX_OP_ADAMW, &adamw},            {LCX_OP_SQNORM, &sq},
        {LCX_OP_CAST, &cast},           {LCX_OP_ADD, &ew_dt},              {LCX_OP_AXPY, &ew_out},
        {LCX_OP_SCALE, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lcx_clear_error();
        const lcx_status want = op_call(X, bad[i].op, bad[i].args);
        char line[512];
        snprintf(line, sizeof line, "%s", lcx_last_error());
        lcx_clear_error();
        const lcx_status got = op_call(&cx, bad[i].op, bad[i].args);
        CHECK_MSG(want != LCX_OK && got == want && strcmp(line, lcx_last_error()) == 0,
                  "case %zu: cpu %s '%s', cuda %s '%s'", i, lcx_status_name(want), line, lcx_status_name(got),
                  lcx_last_error());
    }
}

int main(void) {
    const lcx_backend *be = cpu();
    X = cpu_exec();
    rng_seed(41);
    CHECK(strcmp(be->name, "cpu") == 0 && be == lcx_backend_cpu() && be->available());
    /* the registry: the CPU first, then CUDA in builds that have it (listed with or without a device) */
#ifdef LCX_HAVE_CUDA
    const char *want_list = "(available: cpu, cuda)";
    const int want_n = 2;
#else
    const char *want_list = "(available: cpu)";
    const int want_n = 1;
#endif
    lcx_clear_error();
    CHECK(lcx_backend_get("tpu") == NULL && strstr(lcx_last_error(), "unknown backend 'tpu' ") != NULL);
    CHECK_MSG(strstr(lcx_last_error(), want_list) != NULL, "'%s' does not list %s", lcx_last_error(), want_list);
    CHECK(lcx_backend_get(NULL) == NULL);
    int nb_list = 0;
    const lcx_backend *const *list = lcx_backend_list(&nb_list);
    CHECK(nb_list == want_n && list[0] == be);
    for (int i = 0; i < nb_list; i++) CHECK(lcx_backend_get(list[i]->name) == list[i]);
    const lcx_backend *cu = lcx_backend_get("cuda");
#ifdef LCX_HAVE_CUDA
    CHECK(cu != NULL && list[1] == cu && strcmp(cu->name, "cuda") == 0);
#else
    CHECK(cu == NULL && strstr(lcx_last_error(), "unknown backend 'cuda' (available: cpu)") != NULL);
#endif
    check_exec(be);
    check_shared_checks();

    /* every slot of every registered table is filled */
    for (int b = 0; b < nb_list; b++) {
        void (*const *slot)(void) = (void (*const *)(void))((const char *)list[b] + offsetof(lcx_backend, available));
        size_t n_slots = (sizeof(lcx_backend) - offsetof(lcx_backend, available)) / sizeof(void (*)(void));
        int empty = 0;
        for (size_t i = 0; i < n_slots; i++) empty += slot[i] == NULL;
        CHECK_MSG(empty == 0, "%d empty slots in the %s table", empty, list[b]->name);
    }

    /* memory */
    const size_t nb = 1000;
    unsigned char host[1000], back[1000];
    for (size_t i = 0; i < nb; i++) host[i] = (unsigned char)rng_u64();
    void *d1 = NULL, *d2 = NULL, *d0 = NULL;
    CHECK_OK(be->alloc(nb, &d1));
    CHECK_OK(be->alloc(nb, &d2));
    CHECK_OK(be->alloc(0, &d0));
    CHECK(d0 != NULL && ((uintptr_t)d1 % 64) == 0 && ((uintptr_t)d2 % 64) == 0);
    CHECK_OK(be->copy_h2d(X, d1, host, nb));
    CHECK_OK(be->copy_d2d(X, d2, d1, nb));
    CHECK_OK(be->copy_d2h(X, back, d2, nb));
    CHECK(memcmp(host, back, nb) == 0);
    CHECK_OK(be->zero(X, d2, nb));
    CHECK_OK(be->copy_d2h(X, back, d2, nb));
    int nz = 0;
    for (size_t i = 0; i < nb; i++) nz += back[i] != 0;
    CHECK(nz == 0);
    void *hp = NULL, *hp0 = NULL; /* host_alloc and the asynchronous copies: done on return on the CPU */
    CHECK_OK(be->host_alloc(nb, &hp));
    CHECK_OK(be->host_alloc(0, &hp0));
    CHECK(hp0 != NULL && ((uintptr_t)hp % 64) == 0);
    if (hp) {
        CHECK_OK(be->copy_h2d_async(X, d1, host, nb));
        CHECK_OK(be->copy_d2h_async(X, hp, d1, nb));
        CHECK(memcmp(hp, host, nb) == 0);
    }
    be->host_free(hp);
    be->host_free(hp0);
    be->host_free(NULL);
    CHECK_OK(be->sync(X));
    be->free(d0);
    be->free(d1);
    be->free(d2);
    be->free(NULL);
    void *huge = (void *)1;
    CHECK_FAILS(be->alloc(SIZE_MAX - 8, &huge), LCX_ERR_OOM, "too large");
    CHECK(huge == NULL);

    /* casts */
    const int64_t n = 100003; /* several sqnorm blocks, not a multiple of any */
    float *x = rand_f32(n, -3, 3), *y = rand_f32(n, -3, 3), *out = zeros_f32(n);
    x[0] = NAN; x[1] = INFINITY; x[2] = -0.0f; x[3] = 1e-40f; /* subnormal */
    x[4] = 1.0f + 0x1p-8f;      /* halfway between two bf16 values: even neighbour 1.0 (0x3f80) */
    x[5] = 1.0f + 3 * 0x1p-8f;  /* halfway: rounds up to the even 0x3f82 */
    x[6] = 3.4e38f;             /* rounds up to +Inf */
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    CHECK_OK(cast(LCX_F32, x, LCX_BF16, h, n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += h[i] != lcx_f32_to_bf16(x[i]);
    CHECK(bad == 0);
    CHECK(h[4] == 0x3f80 && h[5] == 0x3f82 && h[6] == 0x7f80 && h[2] == 0x8000 && (h[0] & 0x7fff) > 0x7f80);
    uint16_t all[65536];
    float *wide = zeros_f32(65536);
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    CHECK_OK(cast(LCX_BF16, all, LCX_F32, wide, 65536));
    bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t b = bits(wide[i]), want = i << 16;
        if ((want & 0x7fffffffu) > 0x7f800000u) bad += (b & 0x7fffffffu) <= 0x7f800000u || (b >> 31) != (i >> 15);
        else bad += b != want;
    }
    CHECK_MSG(bad == 0, "%d bf16 patterns widened wrongly", bad);
    uint16_t *h2 = malloc(sizeof(uint16_t) * (size_t)n);
    CHECK_OK(cast(LCX_BF16, h, LCX_BF16, h2, n)); /* the same dtype copies */
    CHECK(memcmp(h, h2, sizeof(uint16_t) * (size_t)n) == 0);
    CHECK_FAILS(cast(LCX_F32, x, LCX_F16, h2, n), LCX_ERR_UNSUPPORTED, "F32 to F16");

    /* add / scale / axpy: one float rounding of the exact double result */
    x[0] = 0.5f; x[1] = -2.0f; x[3] = 1.0f;
    CHECK_OK(ew(LCX_OP_ADD, LCX_F32, 0, x, y, out, n));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)x[i] + y[i]);
    CHECK(bad == 0);
    CHECK_OK(ew(LCX_OP_SCALE, LCX_F32, 0.3f, x, NULL, out, n));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)x[i] * 0.3f);
    CHECK(bad == 0);
    memcpy(out, x, sizeof(float) * (size_t)n);
    CHECK_OK(ew(LCX_OP_SCALE, LCX_F32, 0.3f, out, NULL, out, n)); /* in place */
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)x[i] * 0.3f);
    CHECK(bad == 0);
    memcpy(out, y, sizeof(float) * (size_t)n);
    CHECK_OK(ew(LCX_OP_AXPY, LCX_F32, -1.7f, x, NULL, out, n));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)y[i] + (double)(float)(-1.7f * (double)x[i]));
    CHECK(bad == 0);
    /* bf16: the rounding of the float32 result on the same values */
    {
        uint16_t *xh = to_bf16(x, n), *yh = to_bf16(y, n), *oh = malloc(2 * (size_t)n);
        float *xw = widen_bf16(xh, n), *yw = widen_bf16(yh, n), *o32 = zeros_f32(n);
        CHECK_OK(ew(LCX_OP_ADD, LCX_F32, 0, xw, yw, o32, n));
        CHECK_OK(ew(LCX_OP_ADD, LCX_BF16, 0, xh, yh, oh, n));
        CHECK(bf16_mismatch(oh, o32, n) == 0);
        CHECK_OK(ew(LCX_OP_SCALE, LCX_F32, 0.3f, xw, NULL, o32, n));
        CHECK_OK(ew(LCX_OP_SCALE, LCX_BF16, 0.3f, xh, NULL, oh, n));
        CHECK(bf16_mismatch(oh, o32, n) == 0);
        memcpy(o32, yw, sizeof(float) * (size_t)n);
        memcpy(oh, yh, 2 * (size_t)n);
        CHECK_OK(ew(LCX_OP_AXPY, LCX_F32, -1.7f, xw, NULL, o32, n));
        CHECK_OK(ew(LCX_OP_AXPY, LCX_BF16, -1.7f, xh, NULL, oh, n));
        CHECK(bf16_mismatch(oh, o32, n) == 0);
        free(xh); free(yh); free(oh); free(xw); free(yw); free(o32);
    }
    CHECK_OK(ew(LCX_OP_ADD, LCX_F32, 0, x, y, out, n));
    CHECK_OK(ew(LCX_OP_ADD, LCX_F32, 0, x, y, x, n)); /* out aliasing a */
    CHECK(memcmp(x, out, sizeof(float) * (size_t)n) == 0);
    CHECK_FAILS(ew(LCX_OP_ADD, LCX_F64, 0, x, y, x, n), LCX_ERR_UNSUPPORTED, "activation dtype F64");

    /* squared norm: a device result, accumulated */
    double s = 0, got = 0;
    for (int64_t i = 0; i < n; i++) s += (double)y[i] * y[i];
    CHECK_OK(sqnorm(y, n, &got));
    CHECK_ERR("sqnorm vs double sum (rel)", fabs(got - s) / s, 1e-12);
    double once = got;
    CHECK_OK(sqnorm(y, n, &got));
    CHECK(got == 2 * once);
    got = 0;
    CHECK_OK(sqnorm(y, 0, &got));
    CHECK(got == 0.0);
    lcx_sqnorm_args sa = {.n = n, .x = y, .out = &got};
    int short_checked = 0;
    check_arena_short(X, LCX_OP_SQNORM, &sa, &short_checked);
    CHECK(short_checked == 1);
    CHECK_FAILS(sqnorm(y, -1, &got), LCX_ERR_INVALID, "negative");
    CHECK_FAILS(sqnorm(y, n, NULL), LCX_ERR_INVALID, "NULL output");
    free(x); free(y); free(out); free(h); free(h2); free(wide);
    return test_summary("test_ops_misc");
}
