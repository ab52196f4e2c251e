/* The model on the CUDA backend against the same model on the CPU backend (issue 14's "Checked by"): the fixture
 * models (tests/fixtures/models) trained 3 AdamW steps under the activation policies keep, recompute (with MLP
 * tiles), offload and recompute+offload, with f32 and bf16 activations and bf16 parameters, then forward logits
 * and a KV-cache prefill + decode. test_model_device.c runs the same checks (model_parity.h) bit for bit on a
 * guarded CPU table, which shows that the model touches backend memory only through the contract; this test is the
 * same run on the GPU, where the kernels sum
 * in other orders (blocks, cuBLASLt's GEMM tiles) and use CUDA's expf/logf, so results agree within tolerances
 * (below) instead of bit for bit. Every measured error is printed beside its bound.
 *
 * Usage: test_model_cuda [BACKEND]: the backend under test, "cuda" by default (CTest runs it so; exit 77 when the
 * build has no CUDA table or no device is visible). To check this file's logic without a GPU:
 *   test_model_cuda cpu            the CPU table (lcx_backend_get): every error must be exactly 0
 *   test_model_cuda cpu-guarded    the guarded CPU table of guarded_backend.h: exactly 0, and no host access
 *   test_model_cuda cpu-perturbed  the CPU table with every matmul result nudged by up to 2 float32 ulps before
 *                                  its storage rounding (a stand-in for a GPU's other summation order): within
 *                                  the tolerances of model_parity.h */
#include <string.h>

#include "guarded_backend.h"
#include "model_parity.h"

/* ---- cpu-perturbed: the CPU table with matmul results nudged by -2..2 float32 ulps ------------------------------ */

static uint64_t pert_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* x nudged by -2..2 ulps, the amount depending on its bits and place only, so a recomputed forward gets the same
 * bits (as a GPU's deterministic kernels give). */
static float nudge(float x, int64_t place) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const int k = (int)(pert_mix(((uint64_t)u << 32) ^ (uint64_t)place) % 5) - 2;
    return x * (1.0f + (float)k * 0x1p-23f);
}
/* The CPU's matmul, then every float32 result nudged; a bf16 C is computed in float32 (a host temporary), nudged,
 * then rounded, so bf16 roundings near a midpoint go the other way as they would on another device. */
static lcx_status pert_matmul(lcx_exec *x, const lcx_matmul_args *a) {
    const lcx_backend *cpu = lcx_backend_cpu();
    const int bf16 = a->c_dtype == LCX_BF16;
    if (!bf16 || a->m <= 0 || a->n <= 0 || a->batch <= 0) {
        LCX_TRY(cpu->matmul(x, a));
        if (bf16) return LCX_OK;
    }
    const int64_t m = a->m, n = a->n, ldc = a->ldc ? a->ldc : n, nb = a->stride_c ? a->batch : 1;
    float *tmp = NULL;
    if (bf16) { /* the same product into a dense float32 C (its workspace is not larger than the bf16 C's) */
        tmp = malloc((size_t)(nb * m * n) * sizeof(float));
        LCX_FAIL_IF(!tmp, LCX_ERR_OOM, "cpu-perturbed: out of memory");
        for (int64_t b = 0; b < nb; b++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    tmp[(b * m + i) * n + j] =
                        a->beta != 0 ? lcx_bf16_to_f32(((const uint16_t *)a->c)[b * a->stride_c + i * ldc + j]) : 0;
        lcx_matmul_args f = *a;
        f.c_dtype = LCX_F32, f.c = tmp, f.ldc = n, f.stride_c = a->stride_c ? m * n : 0;
        lcx_status st = cpu->matmul(x, &f);
        if (st != LCX_OK) {
            free(tmp);
            return st;
        }
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const int64_t at = b * a->stride_c + i * ldc + j; /* host memory: the CPU table's */
                if (bf16) ((uint16_t *)a->c)[at] = lcx_f32_to_bf16(nudge(tmp[(b * m + i) * n + j], i * n + j));
                else ((float *)a->c)[at] = nudge(((float *)a->c)[at], i * n + j);
            }
    free(tmp);
    return LCX_OK;
}
static const lcx_backend *perturbed_backend(void) {
    static lcx_backend t;
    if (!t.name) {
        t = *lcx_backend_cpu();
        t.name = "cpu-perturbed";
        t.matmul = pert_matmul;
    }
    return &t;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *name = argc > 1 ? argv[1] : "cuda";
    if (strcmp(name, "cpu-guarded") == 0) BE = guarded_backend();
    else if (strcmp(name, "cpu-perturbed") == 0) BE = perturbed_backend();
    else BE = lcx_backend_get(name);
    if (!BE || !BE->available()) {
        printf("test_model_cuda: backend '%s': %s, skipped\n", name, BE ? "no device is visible" : lcx_last_error());
        return 77;
    }
    const int exact = strcmp(name, "cpu") == 0 || strcmp(name, "cpu-guarded") == 0;
    printf("test_model_cuda: backend '%s' against the CPU backend%s\n", BE->name,
           exact ? " (the CPU's kernels: every error must be 0)" : "");
    model_parity_run(BE, exact);
    if (!EXACT)
        printf("worst error / bound: step results %.3g, weights %.3g, logits %.3g\n", WORST[0], WORST[1], WORST[2]);
    return test_summary("test_model_cuda");
}
