/* bench_attention: our attention_fwd and attention_bwd on the CUDA backend, on the shapes bench/bench_attention.py
 * times PyTorch SDPA on (one sequence, causal, bf16 activations, q = k = v length):
 *
 *   bench_attention SEQ HEADS KV_HEADS HEAD_DIM [REPS=10] [DOC=0]
 *
 * DOC > 0: a document mask with documents of DOC tokens (the last one shorter); the TFLOP/s then count the
 * visible work (each document's causal triangle).
 * Inputs uniform in [-1, 1); o and lse for the backward come from the forward. The first repetition is warm-up;
 * prints the median over the others, in milliseconds, and the TFLOP/s of the usual count (causal forward
 * 2 seq^2 heads head_dim, backward 2.5 times that):
 *   attention SEQ HEADS KV_HEADS HEAD_DIM fwd_ms F bwd_ms B fwd_tflops X bwd_tflops Y
 * Exit 77 where there is no CUDA backend or no device (like the CUDA tests). Not a test: bench_attention.py runs
 * it on a GPU machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_runtime_info.h"
#include "src/core/clock.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A device buffer of n bf16 values uniform in [-1, 1) (n float32 zeros when f32z). */
static lcx_status device_buffer(const lcx_backend *be, lcx_exec *x, int64_t n, int f32z, void **out) {
    size_t bytes = (size_t)n * (f32z ? 4 : 2);
    LCX_TRY(be->alloc(bytes, out));
    if (f32z) return be->zero(x, *out, bytes);
    uint16_t *h = malloc(bytes ? bytes : 2);
    LCX_FAIL_IF(h == NULL, LCX_ERR_OOM, "bench_attention: %zu bytes of host memory", bytes);
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = lcx_f32_to_bf16((float)((double)(s >> 11) * 0x1p-52 - 1.0));
    }
    lcx_status st = be->copy_h2d(x, *out, h, bytes);
    free(h);
    return st;
}

/* Median milliseconds of reps - 1 timed calls of fwd (bwd = 0) or bwd (bwd = 1), after one warm-up. */
static lcx_status timed(const lcx_backend *be, lcx_exec *x, const lcx_attn_args *a, int bwd, int reps, double *ms) {
    double *t = calloc((size_t)reps, sizeof(double));
    LCX_FAIL_IF(t == NULL, LCX_ERR_OOM, "bench_attention: timings");
    lcx_status st = LCX_OK;
    for (int r = 0; r < reps && st == LCX_OK; r++) {
        double t0 = lcx_clock_s();
        st = bwd ? be->attention_bwd(x, a) : be->attention_fwd(x, a);
        if (st == LCX_OK) st = be->sync(x);
        t[r] = (lcx_clock_s() - t0) * 1e3;
    }
    if (st == LCX_OK) {
        qsort(t + 1, (size_t)(reps - 1), sizeof(double), cmp_double);
        *ms = t[1 + (reps - 1) / 2];
    }
    free(t);
    return st;
}

static lcx_status bench(int64_t seq, int64_t H, int64_t G, int64_t hd, int reps, int64_t doc_len) {
    const lcx_backend *be = lcx_backend_get("cuda");
    lcx_exec *x = NULL;
    LCX_TRY(lcx_exec_create(be, &x));
    void *q = NULL, *k = NULL, *v = NULL, *o = NULL, *g = NULL, *lse = NULL, *dq = NULL, *dk = NULL, *dv = NULL;
    lcx_status st = device_buffer(be, x, seq * H * hd, 0, &q);
    if (st == LCX_OK) st = device_buffer(be, x, seq * G * hd, 0, &k);
    if (st == LCX_OK) st = device_buffer(be, x, seq * G * hd, 0, &v);
    if (st == LCX_OK) st = device_buffer(be, x, seq * H * hd, 0, &g);
    if (st == LCX_OK) st = device_buffer(be, x, seq * H * hd, 0, &o);
    if (st == LCX_OK) st = device_buffer(be, x, seq * H, 1, &lse);
    if (st == LCX_OK) st = device_buffer(be, x, seq * H * hd, 1, &dq);
    if (st == LCX_OK) st = device_buffer(be, x, seq * G * hd, 1, &dk);
    if (st == LCX_OK) st = device_buffer(be, x, seq * G * hd, 1, &dv);
    int32_t *doc = NULL, *hdoc = doc_len > 0 ? malloc((size_t)seq * sizeof(int32_t)) : NULL;
    double pairs = 0; /* visible (query, key) pairs */
    if (doc_len > 0 && !hdoc) st = lcx_fail(LCX_ERR_OOM, "bench_attention: document starts");
    for (int64_t i = 0; hdoc && i < seq; i++) hdoc[i] = (int32_t)(i / doc_len * doc_len);
    for (int64_t i = 0; i < seq; i++) pairs += (double)(i - (hdoc ? hdoc[i] : 0) + 1);
    if (st == LCX_OK && hdoc) st = be->alloc((size_t)seq * sizeof(int32_t), (void **)&doc);
    if (st == LCX_OK && hdoc) st = be->copy_h2d(x, doc, hdoc, (size_t)seq * sizeof(int32_t));
    free(hdoc);
    lcx_attn_args a = {.dt = LCX_BF16, .n_q = seq, .n_k = seq, .n_heads = H, .n_kv_heads = G, .head_dim = hd,
                       .mask = LCX_MASK_CAUSAL, .scale = 1.0f / sqrtf((float)hd), .q = q, .k = k, .v = v, .o = o,
                       .lse = lse, .dout = g, .dq = dq, .dk = dk, .dv = dv, .q_doc_start = doc};
    size_t ws = lcx_exec_workspace(x, LCX_OP_ATTENTION_BWD, &a);
    if (st == LCX_OK) st = lcx_exec_reserve(x, ws);
    double fwd_ms = 0, bwd_ms = 0;
    if (st == LCX_OK) st = timed(be, x, &a, 0, reps, &fwd_ms);
    if (st == LCX_OK) st = timed(be, x, &a, 1, reps, &bwd_ms); /* dq/dk/dv keep accumulating: the time is the same */
    if (st == LCX_OK) {
        /* causal: half of 4 s^2 h d (the usual count); a document mask: 4 h d per visible pair */
        double flops = (doc ? 4.0 * pairs : 2.0 * (double)seq * (double)seq) * (double)H * (double)hd;
        printf("attention %lld %lld %lld %lld%s fwd_ms %.3f bwd_ms %.3f fwd_tflops %.2f bwd_tflops %.2f\n",
               (long long)seq, (long long)H, (long long)G, (long long)hd, doc ? " docs" : "", fwd_ms, bwd_ms,
               flops / fwd_ms * 1e-9, 2.5 * flops / bwd_ms * 1e-9);
    }
    void *bufs[] = {q, k, v, o, g, lse, dq, dk, dv, doc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(bufs[i]);
    lcx_exec_free(x);
    return st;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: bench_attention SEQ HEADS KV_HEADS HEAD_DIM [REPS=10] [DOC=0]\n");
        return 2;
    }
    int64_t seq = atoll(argv[1]), H = atoll(argv[2]), G = atoll(argv[3]), hd = atoll(argv[4]);
    int reps = argc > 5 ? atoi(argv[5]) : 10;
    int64_t doc_len = argc > 6 ? atoll(argv[6]) : 0;
    if (seq <= 0 || seq > INT32_MAX || H <= 0 || G <= 0 || H % G != 0 || hd <= 0 || reps < 2 || doc_len < 0) {
        fprintf(stderr, "bench_attention: bad shape seq=%lld heads=%lld kv_heads=%lld head_dim=%lld reps=%d doc=%lld\n",
                (long long)seq, (long long)H, (long long)G, (long long)hd, reps, (long long)doc_len);
        return 2;
    }
    const lcx_backend *be = lcx_backend_get("cuda");
    if (!be || !be->available() || lcx_cuda_device_count() == 0) {
        printf("bench_attention: no CUDA backend or no device, skipped\n");
        return 77;
    }
    lcx_status st = bench(seq, H, G, hd, reps, doc_len);
    if (st != LCX_OK) {
        fprintf(stderr, "bench_attention: %s\n", lcx_last_error());
        return 1;
    }
    return 0;
}
