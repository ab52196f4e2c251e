/* The CUDA backend's parts that test_backend_ops_cuda does not reach (label cuda, exit 77 without a device):
 *  - contexts, memory and events: alloc(0) gives a freeable pointer; h2d, zero, d2d, d2h round trips; an event
 *    recorded on one queue orders a copy on another (event_wait), event_sync; pinned host memory (host_alloc)
 *    through the asynchronous copies, read after an event; timed events, and a queue's stall measured by them;
 *    mem_stats following alloc and free; device_used (cudaMemGetInfo) growing with an allocation;
 *  - attention refuses the shapes its kernels do not cover (head_dim > 256) with LCX_ERR_UNSUPPORTED and one line;
 *  - matmul's paths against the CPU: bf16 operands at an odd element offset (2-byte aligned: cuBLASLt's heuristic
 *    is asked with that alignment, or the tiled kernel runs), the same shape aligned twice (a cached plan: the
 *    same bits), beta 0 over a NaN-filled C, a C shared by a batch of 3 (the tiled kernel, one entry after the
 *    other), and an arena one byte short of the declared cuBLASLt workspace;
 *  - the vocab-parallel cross-entropy (STATS per shard, stats gathered in rank order, FINISH per shard) against
 *    the CPU backend on the same inputs: stats, loss, count and dlogits;
 *  - determinism: sqnorm, the whole-row cross-entropy and attention forward and backward (causal GQA, several
 *    tiles, f32 and bf16) give the same bits on a second run.
 * Written without a GPU at hand (docs/cuda.md): the first GPU session runs it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_runtime_info.h"
#include "test_util.h"
#include "timed_events.h"
#include "worst_of.h"

static const lcx_backend *BE;
static lcx_exec *X;

static uint64_t rng = 0x1234567ull;
static double uni(double lo, double hi) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng >> 11) * 0x1p-53;
}

/* A device copy of n bytes of host memory (NULL host: uninitialised). */
static void *up(const void *host, size_t n) {
    void *d = NULL;
    CHECK_OK(BE->alloc(n, &d));
    if (d && host) CHECK_OK(BE->copy_h2d(X, d, host, n));
    return d;
}
static void down(void *host, const void *dev, size_t n) { CHECK_OK(BE->copy_d2h(X, host, dev, n)); }

/* Call op on the CUDA table with an arena of its workspace. */
static lcx_status run_op(lcx_op op, const void *args, lcx_status (*fn)(lcx_exec *, const void *)) {
    size_t ws = lcx_exec_workspace(X, op, args);
    if (ws) CHECK_OK(lcx_exec_reserve(X, ws));
    lcx_status st = fn(X, args);
    if (st == LCX_OK) st = BE->sync(X);
    return st;
}
static lcx_status xent_fn(lcx_exec *x, const void *a) { return BE->cross_entropy(x, a); }
static lcx_status sqnorm_fn(lcx_exec *x, const void *a) { return BE->sqnorm(x, a); }
static lcx_status matmul_fn(lcx_exec *x, const void *a) { return BE->matmul(x, a); }

static void test_memory_and_events(void) {
    void *z = NULL;
    size_t h0 = 0, h1 = 0, pk = 0;
    BE->mem_stats(&h0, NULL);
    CHECK_OK(BE->alloc(0, &z));
    CHECK(z != NULL);
    BE->free(z);
    BE->free(NULL);
    /* mem_stats: the ledger follows alloc and free (cudaMalloc's sizes as asked), not host_alloc */
    void *m1 = NULL, *hp = NULL;
    BE->mem_reset_peak();
    CHECK_OK(BE->alloc(1000, &m1));
    CHECK_OK(BE->host_alloc(4096, &hp));
    BE->mem_stats(&h1, &pk);
    CHECK(h1 == h0 + 1000 && pk == h1);
    BE->free(m1);
    BE->host_free(hp);
    BE->mem_stats(&h1, &pk);
    CHECK(h1 == h0 && pk == h0 + 1000);
    /* device_used: everything on the device, so 64 MiB more while 64 MiB are allocated (cudaMalloc rounds to its
     * pages: at least that much), and not below the ledger's bytes */
    {
        const size_t mib64 = (size_t)64 << 20, u0 = BE->device_used();
        void *big = NULL;
        CHECK_OK(BE->alloc(mib64, &big));
        const size_t u1 = BE->device_used();
        BE->mem_stats(&h1, NULL);
        CHECK_MSG(u1 >= u0 + mib64 && u1 >= h1, "device in use %zu then %zu bytes, ledger %zu", u0, u1, h1);
        BE->free(big);
    }

    enum { N = 1000 };
    float h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)i - 0.5f;
    float *a = up(h, sizeof h), *b = up(NULL, sizeof h), *c = up(NULL, sizeof h);
    CHECK_OK(BE->zero(X, b, sizeof h));
    down(back, b, sizeof back);
    int zeros = 0;
    for (int i = 0; i < N; i++) zeros += back[i] == 0.0f;
    CHECK(zeros == N);

    /* a -> b on X, event; Y waits for it and copies b -> c */
    lcx_exec *Y = NULL;
    CHECK_OK(lcx_exec_create(BE, &Y));
    lcx_event *e = NULL;
    CHECK_OK(BE->event_create(&e, 0));
    if (Y && e) {
        CHECK_OK(BE->copy_d2d(X, b, a, sizeof h));
        CHECK_OK(BE->event_record(X, e));
        CHECK_OK(BE->event_wait(Y, e));
        CHECK_OK(BE->copy_d2d(Y, c, b, sizeof h));
        CHECK_OK(BE->event_sync(e));
        CHECK_OK(BE->sync(Y));
        down(back, c, sizeof back);
        CHECK(memcmp(back, h, sizeof h) == 0);
    }
    /* pinned host memory and the asynchronous copies (the offload pool's): h -> pinned -> c on Y, c -> pinned2 on
     * Y, read after an event (4 MiB, long enough that a missing wait would read zeros) */
    enum { M = 1 << 20 };
    float *pin = NULL, *pin2 = NULL, *big = NULL;
    CHECK_OK(BE->host_alloc(M * sizeof(float), (void **)&pin));
    CHECK_OK(BE->host_alloc(M * sizeof(float), (void **)&pin2));
    CHECK_OK(BE->alloc(M * sizeof(float), (void **)&big));
    if (Y && e && pin && pin2 && big) {
        for (int i = 0; i < M; i++) pin[i] = (float)(i % 977) + 0.25f, pin2[i] = 0.0f;
        CHECK_OK(BE->copy_h2d_async(Y, big, pin, M * sizeof(float)));
        CHECK_OK(BE->copy_d2h_async(Y, pin2, big, M * sizeof(float)));
        CHECK_OK(BE->event_record(Y, e));
        CHECK_OK(BE->event_sync(e));
        CHECK(memcmp(pin, pin2, M * sizeof(float)) == 0);
    }
    BE->free(big);
    BE->host_free(pin);
    BE->host_free(pin2);
    BE->host_free(NULL);
    BE->event_free(e);
    BE->event_free(NULL);
    lcx_exec_free(Y);
    BE->free(a);
    BE->free(b);
    BE->free(c);
}

/* Timed events (tests/unit/timed_events.h), and a stall measured on the queue where it happens (the offload's
 * wait timing): Y's marks around its wait for X's long work (16 device copies of 256 MiB) are that work apart, less
 * the host's time to queue it, by X's own marks around the work. */
static void test_timed_events(void) {
    check_timed_events(BE, X);
    enum { BIG = 256 << 20, ROUNDS = 16 };
    lcx_exec *Y = NULL;
    void *p = NULL, *q = NULL;
    lcx_event *done = NULL, *x0 = NULL, *x1 = NULL, *y0 = NULL, *y1 = NULL;
    CHECK_OK(lcx_exec_create(BE, &Y));
    CHECK_OK(BE->alloc(BIG, &p));
    CHECK_OK(BE->alloc(BIG, &q));
    CHECK_OK(BE->event_create(&done, 0));
    CHECK_OK(BE->event_create(&x0, LCX_EVENT_TIMED));
    CHECK_OK(BE->event_create(&x1, LCX_EVENT_TIMED));
    CHECK_OK(BE->event_create(&y0, LCX_EVENT_TIMED));
    CHECK_OK(BE->event_create(&y1, LCX_EVENT_TIMED));
    if (getenv("LCX_CUDA_EMU")) /* tests/cuda_emu/backend_run.sh: every queue runs its work as it is queued */
        printf("timed events: the stall needs queues that run apart (not under tests/cuda_emu): not checked\n");
    else if (Y && p && q && done && x0 && x1 && y0 && y1) {
        CHECK_OK(BE->zero(X, p, BIG));
        CHECK_OK(BE->sync(X));
        CHECK_OK(BE->event_record(X, x0));
        for (int i = 0; i < ROUNDS; i++) CHECK_OK(BE->copy_d2d(X, i % 2 ? p : q, i % 2 ? q : p, BIG));
        CHECK_OK(BE->event_record(X, x1));
        CHECK_OK(BE->event_record(X, done));
        CHECK_OK(BE->event_record(Y, y0));
        CHECK_OK(BE->event_wait(Y, done));
        CHECK_OK(BE->event_record(Y, y1));
        CHECK_OK(BE->event_sync(y1));
        CHECK_OK(BE->event_sync(x1));
        double work = 0, stall = 0;
        CHECK_OK(BE->event_elapsed(x0, x1, &work));
        CHECK_OK(BE->event_elapsed(y0, y1, &stall));
        CHECK_MSG(work > 0 && stall >= 0.5 * work && stall <= work + 1e-3, "work %.6f s, stall %.6f s", work, stall);
        printf("timed events: X's work %.3f ms, Y's stall %.3f ms\n", work * 1e3, stall * 1e3);
    }
    BE->event_free(done), BE->event_free(x0), BE->event_free(x1), BE->event_free(y0), BE->event_free(y1);
    BE->free(p), BE->free(q);
    lcx_exec_free(Y);
}

/* Valid (empty) arguments pass the shared checks and reach the kernels' own limits. */
static void test_limits(void) {
    lcx_attn_args at = {.dt = LCX_F32, .n_q = 0, .n_k = 0, .n_heads = 1, .n_kv_heads = 1, .head_dim = 257, .scale = 1};
    CHECK_FAILS(BE->attention_fwd(X, &at), LCX_ERR_UNSUPPORTED, "attention_fwd: head_dim 257");
    CHECK_FAILS(BE->attention_bwd(X, &at), LCX_ERR_UNSUPPORTED, "attention_bwd: head_dim 257");
}

/* ---- matmul ---------------------------------------------------------------------------------------------------- */

/* Elements of a dense operand of `rows` x `cols` per batch entry, `stride` apart. */
static int64_t operand_elems(int64_t rows, int64_t cols, int64_t batch, int64_t stride) {
    return rows * cols + (batch - 1) * stride;
}

/* n values in [-1, 1) (or `fill` everywhere when fill is not 2), stored as dt, `off` elements into a buffer. */
static void *host_operand(lcx_dtype dt, int64_t n, int64_t off, float fill) {
    const size_t es = lcx_act_size(dt);
    char *h = calloc((size_t)(n + off), es);
    for (int64_t i = 0; i < n; i++) {
        float v = fill == 2.0f ? (float)uni(-1, 1) : fill;
        if (dt == LCX_BF16) ((uint16_t *)h)[off + i] = lcx_f32_to_bf16(v);
        else ((float *)h)[off + i] = v;
    }
    return h;
}

/* g (dense: ld 0; pointers unset) on the CUDA table and on the CPU from the same data, A and B `off` elements
 * into their buffers, C first filled with c_fill (2: random). Checks the CUDA result against the CPU's with a
 * float32 tolerance for k-long dot products and returns it (f32 C; the caller frees), or NULL. */
static float *matmul_vs_cpu(const char *what, lcx_matmul_args g, int64_t off, float c_fill) {
    const int64_t na = operand_elems(g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.batch, g.stride_a);
    const int64_t nb = operand_elems(g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.batch, g.stride_b);
    const int64_t nc = operand_elems(g.m, g.n, g.batch, g.stride_c);
    const size_t ea = lcx_act_size(g.a_dtype), eb = lcx_act_size(g.b_dtype);
    char *ha = host_operand(g.a_dtype, na, off, 2.0f), *hb = host_operand(g.b_dtype, nb, off, 2.0f);
    float *hc = host_operand(LCX_F32, nc, 0, c_fill), *back = malloc(sizeof(float) * (size_t)nc);
    char *da = up(ha, (size_t)(na + off) * ea), *db = up(hb, (size_t)(nb + off) * eb);
    float *dc = up(hc, sizeof(float) * (size_t)nc);
    lcx_exec *cpu = NULL;
    CHECK_OK(lcx_exec_create(lcx_backend_cpu(), &cpu));
    float *result = NULL;
    if (da && db && dc && cpu) {
        lcx_matmul_args h = g;
        h.a = ha + off * (int64_t)ea, h.b = hb + off * (int64_t)eb, h.c = hc;
        CHECK_OK(lcx_exec_reserve(cpu, lcx_exec_workspace(cpu, LCX_OP_MATMUL, &h) + 64));
        CHECK_OK(lcx_backend_cpu()->matmul(cpu, &h));
        g.a = da + off * (int64_t)ea, g.b = db + off * (int64_t)eb, g.c = dc;
        CHECK_OK(run_op(LCX_OP_MATMUL, &g, matmul_fn));
        down(back, dc, sizeof(float) * (size_t)nc);
        const double tol = 2e-6 * (double)(g.k + 8) * (fabs(g.alpha) + fabs(g.beta) * (double)g.batch);
        double worst = 0;
        for (int64_t i = 0; i < nc; i++) {
            double e = fabs((double)back[i] - hc[i]);
            worst = worst_of(worst, e);
        }
        CHECK_MSG(worst <= tol, "matmul %s: differs from the CPU by %.3g (allowed %.3g)", what, worst, tol);
        result = back;
        back = NULL;
    }
    lcx_exec_free(cpu);
    BE->free(da), BE->free(db), BE->free(dc);
    free(ha), free(hb), free(hc), free(back);
    return result;
}

static void test_matmul(void) {
    const lcx_matmul_args nt16 = {.trans_b = 1, .m = 24, .n = 40, .k = 32, .batch = 1, .alpha = 1.0f,
                                  .a_dtype = LCX_BF16, .b_dtype = LCX_BF16, .c_dtype = LCX_F32};
    free(matmul_vs_cpu("bf16 nt, operands at an odd element offset", nt16, 1, 2.0f));
    const uint64_t seed = rng; /* the same data twice: the second call runs the cached plan, to the same bits */
    float *r1 = matmul_vs_cpu("bf16 nt, aligned", nt16, 0, 2.0f);
    rng = seed;
    float *r2 = matmul_vs_cpu("bf16 nt, aligned, again", nt16, 0, 2.0f);
    if (r1 && r2) CHECK_MSG(memcmp(r1, r2, sizeof(float) * 24 * 40) == 0, "matmul: a second run gave other bits");
    free(r1);
    free(r2);
    free(matmul_vs_cpu("f32 nn beta 0 over NaN",
                       (lcx_matmul_args){.m = 33, .n = 65, .k = 17, .batch = 1, .alpha = 0.5f,
                                         .a_dtype = LCX_F32, .b_dtype = LCX_F32},
                       0, NAN));
    free(matmul_vs_cpu("f32 tn, A, B and C shared by a batch of 3, beta 1",
                       (lcx_matmul_args){.trans_a = 1, .m = 9, .n = 12, .k = 20, .batch = 3, .alpha = 1.0f,
                                         .beta = 1.0f, .a_dtype = LCX_F32, .b_dtype = LCX_F32},
                       0, 2.0f));

    /* the declared workspace is required: an arena one byte short fails naming both sizes */
    lcx_exec *y = NULL;
    CHECK_OK(lcx_exec_create(BE, &y));
    lcx_matmul_args g = nt16;
    const size_t ws = lcx_exec_workspace(X, LCX_OP_MATMUL, &g);
    CHECK_MSG(ws > 0, "bf16 matmul declares no cuBLASLt workspace");
    void *a = up(NULL, 64 * 64 * 4), *b = up(NULL, 64 * 64 * 4), *c = up(NULL, 64 * 64 * 4);
    if (y && ws > 0 && a && b && c) {
        g.a = a, g.b = b, g.c = c;
        CHECK_OK(lcx_exec_reserve(y, ws - 1));
        char want[64];
        snprintf(want, sizeof want, "needs %zu bytes", ws);
        CHECK_FAILS(BE->matmul(y, &g), LCX_ERR_INVALID, want);
    }
    lcx_exec_free(y);
    BE->free(a), BE->free(b), BE->free(c);
}

/* STATS on tp shards of a padded vocabulary, then FINISH, on the CUDA table and on the CPU (host pointers). */
static void test_vocab_parallel(int tp) {
    const int64_t R = 37, V = 101, per = (V + tp - 1) / tp;
    const float dscale = 1.0f / 123.0f;
    int32_t tg[37];
    for (int64_t r = 0; r < R; r++) tg[r] = r % 5 == 4 ? LCX_IGNORE_INDEX : (int32_t)(uni(0, 1) * (double)V);
    float *sx = malloc(sizeof(float) * (size_t)(R * per * tp));
    for (int s = 0; s < tp; s++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < per; j++)
                sx[(s * R + i) * per + j] = s * per + j < V ? (float)uni(-8, 8) : 1e30f; /* padding: masked */
    const size_t nstats = (size_t)(3 * R * tp), nshard = (size_t)(R * per);
    double *st_cpu = calloc(nstats, sizeof(double)), *st_gpu = calloc(nstats, sizeof(double));
    float *dx_cpu = malloc(sizeof(float) * nshard), *dx_gpu = malloc(sizeof(float) * nshard);
    float *d_x = up(sx, sizeof(float) * (size_t)(R * per * tp));
    float *d_dx = up(NULL, sizeof(float) * nshard);
    int32_t *d_tg = up(tg, sizeof tg);
    double *d_st = up(NULL, sizeof(double) * nstats), *d_loss = up(NULL, sizeof(double));
    int64_t *d_count = up(NULL, sizeof(int64_t));
    lcx_exec *cpu = NULL;
    CHECK_OK(lcx_exec_create(lcx_backend_cpu(), &cpu));
    if (!d_x || !d_dx || !d_tg || !d_st || !d_loss || !d_count || !cpu) return;
    for (int s = 0; s < tp; s++) {
        int64_t nv = V - s * per < 0 ? 0 : V - s * per > per ? per : V - s * per;
        lcx_xent_args a = {.dt = LCX_F32, .n_rows = R, .vocab = per, .targets = tg, .phase = LCX_XENT_STATS,
                           .tp = tp, .vocab_start = s * per, .n_valid = nv};
        a.logits = sx + s * R * per;
        a.stats = st_cpu + s * R * 3;
        CHECK_OK(lcx_exec_reserve(cpu, lcx_exec_workspace(cpu, LCX_OP_CROSS_ENTROPY, &a) + 64));
        CHECK_OK(lcx_backend_cpu()->cross_entropy(cpu, &a));
        a.logits = d_x + s * R * per;
        a.targets = d_tg;
        a.stats = d_st + s * R * 3;
        CHECK_OK(run_op(LCX_OP_CROSS_ENTROPY, &a, xent_fn));
    }
    down(st_gpu, d_st, sizeof(double) * nstats);
    double worst = 0;
    for (size_t i = 0; i < nstats; i++) {
        double e = st_cpu[i] == st_gpu[i] ? 0 : fabs(st_cpu[i] - st_gpu[i]) / (fabs(st_cpu[i]) + 1e-300);
        worst = worst_of(worst, e);
    }
    CHECK_MSG(worst <= 1e-5, "tp %d: stats differ from the CPU's by %.3g (relative)", tp, worst);
    for (int s = 0; s < tp; s++) { /* FINISH with the gathered stats (the CPU's: the same input for both) */
        int64_t nv = V - s * per < 0 ? 0 : V - s * per > per ? per : V - s * per;
        double loss_cpu = 0.5, loss_gpu = 0.5;
        int64_t count_cpu = 3, count_gpu = 3;
        lcx_xent_args a = {.dt = LCX_F32, .n_rows = R, .vocab = per, .dscale = dscale, .targets = tg,
                           .phase = LCX_XENT_FINISH, .tp = tp, .vocab_start = s * per, .n_valid = nv};
        a.logits = sx + s * R * per;
        a.dlogits = dx_cpu;
        a.stats = st_cpu;
        a.loss_sum = &loss_cpu;
        a.count = &count_cpu;
        CHECK_OK(lcx_exec_reserve(cpu, lcx_exec_workspace(cpu, LCX_OP_CROSS_ENTROPY, &a) + 64));
        CHECK_OK(lcx_backend_cpu()->cross_entropy(cpu, &a));
        CHECK_OK(BE->copy_h2d(X, d_st, st_cpu, sizeof(double) * nstats));
        CHECK_OK(BE->copy_h2d(X, d_loss, &loss_gpu, sizeof loss_gpu));
        CHECK_OK(BE->copy_h2d(X, d_count, &count_gpu, sizeof count_gpu));
        a.logits = d_x + s * R * per;
        a.dlogits = d_dx;
        a.targets = d_tg;
        a.stats = d_st;
        a.loss_sum = d_loss;
        a.count = d_count;
        CHECK_OK(run_op(LCX_OP_CROSS_ENTROPY, &a, xent_fn));
        down(&loss_gpu, d_loss, sizeof loss_gpu);
        down(&count_gpu, d_count, sizeof count_gpu);
        down(dx_gpu, d_dx, sizeof(float) * nshard);
        CHECK_MSG(count_gpu == count_cpu, "tp %d shard %d: count %lld, CPU %lld", tp, s, (long long)count_gpu,
                  (long long)count_cpu);
        CHECK_MSG(fabs(loss_gpu - loss_cpu) <= 1e-9 * fabs(loss_cpu), "tp %d shard %d: loss %.17g, CPU %.17g", tp, s,
                  loss_gpu, loss_cpu);
        double wd = 0;
        for (size_t i = 0; i < nshard; i++) {
            double e = fabs((double)dx_gpu[i] - dx_cpu[i]);
            wd = worst_of(wd, e);
        }
        CHECK_MSG(wd <= 1e-6 * dscale, "tp %d shard %d: dlogits differ from the CPU's by %.3g", tp, s, wd);
    }
    lcx_exec_free(cpu);
    BE->free(d_x); BE->free(d_dx); BE->free(d_tg); BE->free(d_st); BE->free(d_loss); BE->free(d_count);
    free(sx); free(st_cpu); free(st_gpu); free(dx_cpu); free(dx_gpu);
}

/* Two runs of the same reductions give the same bits. */
static void test_determinism(void) {
    const int64_t n = 3 * 1000 * 1000 + 17;
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = (float)uni(-1, 1);
    float *d = up(h, sizeof(float) * (size_t)n);
    double *out = up(NULL, sizeof(double));
    double r[2] = {0, 0};
    for (int k = 0; k < 2 && d && out; k++) {
        CHECK_OK(BE->zero(X, out, sizeof(double)));
        lcx_sqnorm_args a = {.n = n, .x = d, .out = out};
        CHECK_OK(run_op(LCX_OP_SQNORM, &a, sqnorm_fn));
        down(&r[k], out, sizeof(double));
    }
    CHECK_MSG(memcmp(&r[0], &r[1], sizeof(double)) == 0, "sqnorm: %.17g then %.17g", r[0], r[1]);
    double want = 0;
    for (int64_t i = 0; i < n; i++) want += (double)h[i] * h[i];
    CHECK_MSG(fabs(r[0] - want) <= 1e-12 * want, "sqnorm %.17g, host %.17g", r[0], want);

    /* whole-row cross-entropy, 300 rows of 5000 logits: loss sums bit-identical */
    const int64_t R = 300, V = 5000;
    int32_t tg[300];
    for (int64_t i = 0; i < R; i++) tg[i] = (int32_t)(i * 7919 % V);
    int32_t *d_tg = up(tg, sizeof tg);
    double *d_loss = up(NULL, sizeof(double));
    int64_t *d_count = up(NULL, sizeof(int64_t));
    double loss[2] = {0, 0};
    for (int k = 0; k < 2 && d && d_tg && d_loss && d_count; k++) {
        CHECK_OK(BE->zero(X, d_loss, sizeof(double)));
        CHECK_OK(BE->zero(X, d_count, sizeof(int64_t)));
        lcx_xent_args a = {.dt = LCX_F32, .n_rows = R, .vocab = V, .dscale = 1.0f, .logits = d, .targets = d_tg,
                           .loss_sum = d_loss, .count = d_count};
        CHECK_OK(run_op(LCX_OP_CROSS_ENTROPY, &a, xent_fn));
        down(&loss[k], d_loss, sizeof(double));
    }
    CHECK_MSG(memcmp(&loss[0], &loss[1], sizeof(double)) == 0, "cross_entropy: %.17g then %.17g", loss[0], loss[1]);
    BE->free(d); BE->free(out); BE->free(d_tg); BE->free(d_loss); BE->free(d_count);
    free(h);
}

static lcx_status attn_fwd_fn(lcx_exec *x, const void *a) { return BE->attention_fwd(x, a); }
static lcx_status attn_bwd_fn(lcx_exec *x, const void *a) { return BE->attention_bwd(x, a); }

/* Attention forward and backward twice on the same inputs: the same bits (the backward sums dK/dV over the
 * group's heads and dQ over the key tiles in a fixed order, without atomics). Causal with a key block that
 * starts before the queries (a ring step), 4 query heads per kv head, lengths that are not tile multiples. */
static void test_attention_determinism(lcx_dtype dt) {
    const int64_t nq = 161, nk = 203, H = 8, G = 2, hd = 128, es = (int64_t)lcx_act_size(dt);
    const int64_t nqe = nq * H * hd, nke = nk * G * hd;
    float *hq = malloc(sizeof(float) * (size_t)nqe), *hk = malloc(sizeof(float) * (size_t)nke);
    float *hv = malloc(sizeof(float) * (size_t)nke), *hg = malloc(sizeof(float) * (size_t)nqe);
    for (int64_t i = 0; i < nqe; i++) hq[i] = (float)uni(-2, 2), hg[i] = (float)uni(-1, 1);
    for (int64_t i = 0; i < nke; i++) hk[i] = (float)uni(-2, 2), hv[i] = (float)uni(-1, 1);
    void *act[4] = {hq, hk, hv, hg}; /* bf16: the same values rounded, in place, then packed */
    const int64_t cnt[4] = {nqe, nke, nke, nqe};
    if (dt == LCX_BF16)
        for (int t = 0; t < 4; t++)
            for (int64_t i = 0; i < cnt[t]; i++) ((uint16_t *)act[t])[i] = lcx_f32_to_bf16(((float *)act[t])[i]);
    void *q = up(hq, (size_t)(nqe * es)), *k = up(hk, (size_t)(nke * es)), *v = up(hv, (size_t)(nke * es));
    void *g = up(hg, (size_t)(nqe * es)), *o = up(NULL, (size_t)(nqe * es));
    float *lse = up(NULL, sizeof(float) * (size_t)(nq * H));
    float *dq = up(NULL, sizeof(float) * (size_t)nqe), *dk = up(NULL, sizeof(float) * (size_t)nke);
    float *dv = up(NULL, sizeof(float) * (size_t)nke);
    const size_t ob = (size_t)(nqe * es) + sizeof(float) * (size_t)(nq * H);
    const size_t gb = sizeof(float) * (size_t)(nqe + 2 * nke);
    char *run_o[2] = {malloc(ob), malloc(ob)}, *run_g[2] = {malloc(gb), malloc(gb)};
    lcx_attn_args a = {.dt = dt, .n_q = nq, .n_k = nk, .n_heads = H, .n_kv_heads = G, .head_dim = hd,
                       .q_offset = 300, .k_offset = 250, .mask = LCX_MASK_CAUSAL, .scale = 0.0883883f,
                       .q = q, .k = k, .v = v, .o = o, .lse = lse, .dout = g, .dq = dq, .dk = dk, .dv = dv};
    for (int r = 0; r < 2 && q && k && v && g && o && lse && dq && dk && dv; r++) {
        CHECK_OK(run_op(LCX_OP_ATTENTION_FWD, &a, attn_fwd_fn));
        down(run_o[r], o, (size_t)(nqe * es));
        down(run_o[r] + nqe * es, lse, sizeof(float) * (size_t)(nq * H));
        CHECK_OK(BE->zero(X, dq, sizeof(float) * (size_t)nqe));
        CHECK_OK(BE->zero(X, dk, sizeof(float) * (size_t)nke));
        CHECK_OK(BE->zero(X, dv, sizeof(float) * (size_t)nke));
        CHECK_OK(run_op(LCX_OP_ATTENTION_BWD, &a, attn_bwd_fn));
        down(run_g[r], dq, sizeof(float) * (size_t)nqe);
        down(run_g[r] + sizeof(float) * (size_t)nqe, dk, sizeof(float) * (size_t)nke);
        down(run_g[r] + sizeof(float) * (size_t)(nqe + nke), dv, sizeof(float) * (size_t)nke);
    }
    CHECK_MSG(memcmp(run_o[0], run_o[1], ob) == 0, "attention_fwd %s: two runs differ", lcx_dtype_name(dt));
    CHECK_MSG(memcmp(run_g[0], run_g[1], gb) == 0, "attention_bwd %s: two runs differ", lcx_dtype_name(dt));
    double dk_abs = 0; /* the gradient is there at all (every kv row is seen by some query) */
    for (int64_t i = 0; i < nke; i++) dk_abs += fabs(((float *)(run_g[0] + sizeof(float) * (size_t)nqe))[i]);
    CHECK_MSG(dk_abs > 0, "attention_bwd %s: dK is zero", lcx_dtype_name(dt));
    BE->free(q); BE->free(k); BE->free(v); BE->free(g); BE->free(o); BE->free(lse);
    BE->free(dq); BE->free(dk); BE->free(dv);
    free(hq); free(hk); free(hv); free(hg);
    for (int r = 0; r < 2; r++) free(run_o[r]), free(run_g[r]);
}

int main(void) {
    BE = lcx_backend_get("cuda");
    if (!BE || !BE->available() || lcx_cuda_device_count() == 0) {
        printf("test_exec_cuda: no CUDA backend or no device, skipped\n");
        return 77;
    }
    CHECK_OK(lcx_exec_create(BE, &X));
    if (!X) return test_summary("test_exec_cuda");
    test_memory_and_events();
    test_timed_events();
    test_limits();
    test_matmul();
    for (int tp = 1; tp <= 4; tp++) test_vocab_parallel(tp);
    test_determinism();
    test_attention_determinism(LCX_F32);
    test_attention_determinism(LCX_BF16);
    lcx_exec_free(X);
    return test_summary("test_exec_cuda");
}
