/* The CUDA matmul's workspace query against the bound the planner counts (LCX_CUDA_MATMUL_WS_MAX, src/plan
 * lcx_mem_set_op_ws): the query is host arithmetic, so this runs in every CUDA build, with or without a device
 * (exit 77 in builds without CUDA). Over the shapes of a Llama step (every linear, the loss chunk's f32 x bf16
 * GEMMs with f32 and bf16 C, beta 0 and 1, batched attention-like products) and a sweep of odd sizes, the query
 * never exceeds the bound, and the largest cases come within 2 MiB of it (a bound far above the query would
 * overstate every plan). */
#include <stdio.h>

#include "kernels/backend.h"
#include "test_util.h"
#ifdef LCX_HAVE_CUDA
#include "kernels/cuda/cuda_matmul.h"

static size_t worst;
static int n_cases;

static void one(int64_t m, int64_t n, int64_t k, lcx_dtype a, lcx_dtype b, lcx_dtype c, float beta, int ta, int tb) {
    lcx_matmul_args g = {.m = m, .n = n, .k = k, .batch = 1, .alpha = 1.0f, .beta = beta, .trans_a = ta,
                         .trans_b = tb, .a_dtype = a, .b_dtype = b, .c_dtype = c};
    const size_t ws = lcx_cuda_matmul_ws(&g);
    n_cases++;
    if (ws > worst) worst = ws;
    CHECK_MSG(ws <= LCX_CUDA_MATMUL_WS_MAX, "m %lld n %lld k %lld dtypes %d %d %d beta %g: %zu bytes > bound %zu",
              (long long)m, (long long)n, (long long)k, (int)a, (int)b, (int)c, beta, ws,
              (size_t)LCX_CUDA_MATMUL_WS_MAX);
}

int main(void) {
    const lcx_dtype F = LCX_F32, B = LCX_BF16;
    /* Llama-3.2-1B and 8B linears at 8k tokens a rank, bf16, forward (beta 0) and dW accumulated (f32 C, beta 1) */
    const int64_t dims[][2] = {{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048}, {4096, 14336}, {14336, 4096}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        one(8192, dims[i][0], dims[i][1], B, B, B, 0.0f, 0, 1);
        one(dims[i][0], dims[i][1], 8192, B, B, F, 1.0f, 1, 0);
        one(8192, dims[i][1], dims[i][0], B, B, B, 1.0f, 0, 0); /* dX accumulated into a bf16 C: staged */
    }
    /* the loss chunk: f32 dlogits [chunk, V] x bf16 W [V, H] (dX, bf16 and f32 C) and dlogits^T x x (dW, f32 C) */
    const int64_t vocab[] = {49152, 128256, 152064}, hidden[] = {576, 2048, 4096, 8192}, chunk[] = {256, 4096, 8192};
    for (int v = 0; v < 3; v++)
        for (int h = 0; h < 4; h++)
            for (int c = 0; c < 3; c++) {
                one(chunk[c], hidden[h], vocab[v], F, B, B, 0.0f, 0, 0);
                one(chunk[c], hidden[h], vocab[v], F, B, B, 1.0f, 0, 0);
                one(chunk[c], hidden[h], vocab[v], F, B, F, 1.0f, 0, 0);
                one(vocab[v], hidden[h], chunk[c], F, B, F, 1.0f, 1, 0);
                one(chunk[c], vocab[v], hidden[h], B, F, B, 1.0f, 0, 1);
            }
    /* odd sizes around the block edges */
    for (int64_t m = 1; m <= 70000; m = m * 3 + 1)
        for (int64_t n = 1; n <= 70000; n = n * 5 + 3)
            for (int64_t k = 1; k <= 70000; k = k * 7 + 5) {
                one(m, n, k, F, B, B, 1.0f, 0, 0);
                one(m, n, k, B, F, F, 0.0f, 1, 1);
                one(m, n, k, B, B, B, 1.0f, 0, 1);
            }
    CHECK_MSG(worst + ((size_t)2 << 20) >= LCX_CUDA_MATMUL_WS_MAX, "the largest query, %zu bytes, is far below the "
              "bound %zu: the planner overstates the arena", worst, (size_t)LCX_CUDA_MATMUL_WS_MAX);
    printf("test_cuda_matmul_ws: %d cases, largest query %zu bytes, bound %zu\n", n_cases, worst,
           (size_t)LCX_CUDA_MATMUL_WS_MAX);
    return test_summary("test_cuda_matmul_ws");
}
#else
int main(void) {
    printf("test_cuda_matmul_ws: skipped (a build without CUDA)\n");
    return 77;
}
#endif
