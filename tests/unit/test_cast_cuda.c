/* GPU casts vs the CPU reference, bit for bit, over every bf16/f16 grid point and its rounding neighbours.
 * Exit 77 (skipped) when no GPU is present. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_runtime_info.h"
#include "src/core/tensor.h"
#include "test_util.h"

int main(void) {
    if (lcx_cuda_device_count() == 0) {
        printf("test_cast_cuda: no CUDA device, skipped\n");
        return 77;
    }
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001, 0xffff};
    size_t nl = sizeof lows / sizeof lows[0], n = 65536 * nl;
    float *x = malloc(n * sizeof *x);
    uint16_t *gpu = malloc(n * sizeof *gpu);
    if (!x || !gpu) return 1;
    for (uint32_t p = 0; p < 65536; p++)
        for (size_t k = 0; k < nl; k++) {
            uint32_t u = (p << 16) | lows[k];
            memcpy(&x[p * nl + k], &u, 4);
        }
    int bad = 0;
    CHECK(lcx_cuda_cast_f32_to_bf16_host(x, gpu, n) == 0);
    for (size_t i = 0; i < n; i++) {
        uint16_t cpu = lcx_f32_to_bf16(x[i]);
        int both_nan = (cpu & 0x7fff) > 0x7f80 && (gpu[i] & 0x7fff) > 0x7f80;
        if (cpu != gpu[i] && !both_nan) bad++;
    }
    CHECK_MSG(bad == 0, "%d bf16 mismatches", bad);
    /* f16: halves' neighbourhoods (f16 grid points as f32, +-1..2 ulp) */
    for (uint32_t p = 0; p < 65536 && p < n; p++) {
        float v = lcx_f16_to_f32((uint16_t)p);
        uint32_t u;
        memcpy(&u, &v, 4);
        for (size_t k = 0; k < nl; k++) {
            uint32_t w = u + (uint32_t)k - 4;
            memcpy(&x[p * nl + k], &w, 4);
        }
    }
    bad = 0;
    CHECK(lcx_cuda_cast_f32_to_f16_host(x, gpu, n) == 0);
    for (size_t i = 0; i < n; i++) {
        uint16_t cpu = lcx_f32_to_f16(x[i]);
        int both_nan = (cpu & 0x7fff) > 0x7c00 && (gpu[i] & 0x7fff) > 0x7c00;
        if (cpu != gpu[i] && !both_nan) bad++;
    }
    CHECK_MSG(bad == 0, "%d f16 mismatches", bad);
    free(x);
    free(gpu);
    return test_summary("test_cast_cuda");
}
