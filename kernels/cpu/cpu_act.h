/* cpu_act: activation storage for the CPU ops (LCX_F32 or LCX_BF16, see kernels/backend.h). The float32 paths
 * index float tensors directly; the bf16 paths widen what they read (exact) and round what they store to nearest
 * even (lcx_f32_to_bf16) with these helpers, element by element or a row/tile at a time into float32 scratch,
 * and compute with the same float32 code as the float32 path. */
#ifndef LCX_CPU_ACT_H
#define LCX_CPU_ACT_H

#include <stdint.h>

#include "kernels/backend.h"

/* Element i of a bf16 tensor, widened; element i of a bf16 tensor set to v, rounded. */
static inline float lcx_cpu_bf16_get(const void *p, int64_t i) { return lcx_bf16_to_f32(((const uint16_t *)p)[i]); }
static inline void lcx_cpu_bf16_put(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = lcx_f32_to_bf16(v); }

/* dst[r][c] = src[off + r * ld + c] for a rows x cols tile (dense float32 dst), and back. */
static inline void lcx_cpu_act_load(lcx_dtype dt, const void *src, int64_t off, int64_t ld, int64_t rows,
                                    int64_t cols, float *restrict dst) {
    for (int64_t r = 0; r < rows; r++) {
        float *d = dst + r * cols;
        if (dt == LCX_F32) {
            const float *s = (const float *)src + off + r * ld;
            for (int64_t c = 0; c < cols; c++) d[c] = s[c];
        } else {
            const uint16_t *s = (const uint16_t *)src + off + r * ld;
            for (int64_t c = 0; c < cols; c++) d[c] = lcx_bf16_to_f32(s[c]);
        }
    }
}
static inline void lcx_cpu_act_store(lcx_dtype dt, void *dst, int64_t off, int64_t ld, int64_t rows, int64_t cols,
                                     const float *restrict src) {
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * cols;
        if (dt == LCX_F32) {
            float *d = (float *)dst + off + r * ld;
            for (int64_t c = 0; c < cols; c++) d[c] = s[c];
        } else {
            uint16_t *d = (uint16_t *)dst + off + r * ld;
            for (int64_t c = 0; c < cols; c++) d[c] = lcx_f32_to_bf16(s[c]);
        }
    }
}

#endif
