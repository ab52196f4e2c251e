/* bench_matmul_cuda: our matmul (the CUDA table: cuBLASLt, kernels/cuda/cuda_matmul.c) on the GEMMs of a
 * Llama-3.2-1B training step in bf16 (hidden 2048, 8 KV heads of 64, intermediate 8192, vocab 128256) over T
 * tokens. bench/matmul_cuda.sh runs it and torch.matmul on the same shapes and prints the ratio.
 *
 *   bench_matmul_cuda [TOKENS=8192] [REPS=20]
 *
 * Per GEMM: 3 warm-up calls, then REPS calls queued back to back and one sync, timed on the host clock (as the
 * torch peer: launch overhead included, negligible at these sizes). One line per GEMM:
 *   gemm NAME ta tb M N K a_dtype c_dtype beta ms TFLOPS
 * B is bf16 throughout; A is bf16 except in lm_head.dx_f32, the model's loss-chunk backward (float32 dlogits times
 * the bf16 embedding), a dtype mix that runs on the tiled fallback (docs/cuda.md): its line measures that path.
 * Exits 77 (skipped) without a CUDA table or device, like the CUDA tests. Operands hold random values in
 * [-1, 1); C is zeroed before a beta = 1 GEMM. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_runtime_info.h"
#include "src/core/clock.h"

typedef struct gemm {
    const char *name;
    int ta, tb;
    int64_t m, n, k; /* in tokens: m/n/k < 0 mean "T" */
    lcx_dtype c_dtype;
    float beta;
    lcx_dtype a_dtype;
} gemm;

enum { H = 2048, KV = 512, F = 8192, V = 128256 };

/* Forward y = x W^T (nt), the backward's dx = dy W (nn) and dW += dy^T x (tn, f32 gradients accumulated). */
static const gemm gemms[] = {
    {"q_proj.fwd", 0, 1, -1, H, H, LCX_BF16, 0.0f, LCX_BF16},
    {"k_proj.fwd", 0, 1, -1, KV, H, LCX_BF16, 0.0f, LCX_BF16},
    {"gate_proj.fwd", 0, 1, -1, F, H, LCX_BF16, 0.0f, LCX_BF16},
    {"down_proj.fwd", 0, 1, -1, H, F, LCX_BF16, 0.0f, LCX_BF16},
    {"lm_head.fwd", 0, 1, -1, V, H, LCX_BF16, 0.0f, LCX_BF16},
    {"gate_proj.dx", 0, 0, -1, H, F, LCX_BF16, 0.0f, LCX_BF16},
    {"down_proj.dx", 0, 0, -1, F, H, LCX_BF16, 0.0f, LCX_BF16},
    {"gate_proj.dW", 1, 0, F, H, -1, LCX_F32, 1.0f, LCX_BF16},
    {"lm_head.dW", 1, 0, V, H, -1, LCX_F32, 1.0f, LCX_BF16},
    {"lm_head.dx_f32", 0, 0, -1, H, V, LCX_BF16, 0.0f, LCX_F32},
};

static int64_t dim(int64_t d, int64_t t) { return d < 0 ? t : d; }

static int fail(const char *what) {
    fprintf(stderr, "bench_matmul_cuda: %s: %s\n", what, lcx_last_error());
    return 1;
}

int main(int argc, char **argv) {
    const int64_t T = argc > 1 ? atoll(argv[1]) : 8192;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (T < 1 || reps < 1) {
        fprintf(stderr, "usage: %s [TOKENS=8192] [REPS=20]\n", argv[0]);
        return 2;
    }
    const lcx_backend *be = lcx_backend_get("cuda");
    if (!be || !be->available() || lcx_cuda_device_count() == 0) {
        printf("bench_matmul_cuda: no CUDA backend or no device, skipped\n");
        return 77;
    }
    lcx_exec *x = NULL;
    if (lcx_exec_create(be, &x) != LCX_OK) return fail("exec");

    /* one buffer per operand, sized for the largest GEMM, filled once with random bf16 */
    int64_t max_a = 0, max_b = 0, max_c = 0;
    for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) {
        const gemm *g = &gemms[i];
        const int64_t m = dim(g->m, T), n = dim(g->n, T), k = dim(g->k, T);
        max_a = m * k > max_a ? m * k : max_a;
        max_b = k * n > max_b ? k * n : max_b;
        const int64_t c_bytes = m * n * (int64_t)lcx_act_size(g->c_dtype);
        max_c = c_bytes > max_c ? c_bytes : max_c;
    }
    const int64_t max_ab = max_a > max_b ? max_a : max_b;
    uint16_t *host = malloc(sizeof(uint16_t) * (size_t)max_ab);
    if (!host) return fprintf(stderr, "bench_matmul_cuda: out of host memory\n"), 1;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < max_ab; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        host[i] = lcx_f32_to_bf16((float)((double)(r >> 11) * 0x1p-52 - 1.0));
    }
    void *a = NULL, *b = NULL, *c = NULL, *af = NULL; /* af: a widened to f32, for the f32 A row */
    if (be->alloc((size_t)max_a * 2, &a) != LCX_OK || be->alloc((size_t)max_b * 2, &b) != LCX_OK ||
        be->alloc((size_t)max_c, &c) != LCX_OK || be->alloc((size_t)max_a * 4, &af) != LCX_OK)
        return fail("alloc");
    if (be->copy_h2d(x, a, host, (size_t)max_a * 2) != LCX_OK || be->copy_h2d(x, b, host, (size_t)max_b * 2) != LCX_OK)
        return fail("upload");
    free(host);
    const lcx_cast_args widen = {.n = max_a, .src_dt = LCX_BF16, .dst_dt = LCX_F32, .src = a, .dst = af};
    if (be->cast(x, &widen) != LCX_OK) return fail("cast");

    for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) {
        const gemm *g = &gemms[i];
        const lcx_dtype adt = g->a_dtype;
        lcx_matmul_args mm = {.trans_a = g->ta, .trans_b = g->tb, .m = dim(g->m, T), .n = dim(g->n, T),
                              .k = dim(g->k, T), .batch = 1, .alpha = 1.0f, .beta = g->beta, .a_dtype = adt,
                              .a = adt == LCX_F32 ? af : a, .b_dtype = LCX_BF16, .b = b, .c_dtype = g->c_dtype,
                              .c = c};
        if (lcx_exec_reserve(x, lcx_exec_workspace(x, LCX_OP_MATMUL, &mm)) != LCX_OK) return fail("arena");
        if (g->beta != 0.0f && be->zero(x, c, (size_t)(mm.m * mm.n) * lcx_act_size(g->c_dtype)) != LCX_OK)
            return fail("zero");
        for (int w = 0; w < 3; w++)
            if (be->matmul(x, &mm) != LCX_OK) return fail(g->name);
        if (be->sync(x) != LCX_OK) return fail("sync");
        const double t0 = lcx_clock_s();
        for (int k = 0; k < reps; k++)
            if (be->matmul(x, &mm) != LCX_OK) return fail(g->name);
        if (be->sync(x) != LCX_OK) return fail("sync");
        const double ms = (lcx_clock_s() - t0) * 1e3 / reps;
        const double tflops = 2.0 * (double)mm.m * (double)mm.n * (double)mm.k / (ms * 1e-3) / 1e12;
        printf("gemm %s %d %d %lld %lld %lld %s %s %g %.4f %.2f\n", g->name, g->ta, g->tb, (long long)mm.m,
               (long long)mm.n, (long long)mm.k, lcx_dtype_name(adt), lcx_dtype_name(g->c_dtype), g->beta, ms,
               tflops);
        fflush(stdout);
    }
    be->free(a);
    be->free(b);
    be->free(c);
    be->free(af);
    lcx_exec_free(x);
    return 0;
}
