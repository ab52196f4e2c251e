/* cpu_rope: rotary embedding in the HF rotate_half layout (pairs i, i + rot_dim/2), partial rotary. A token whose
 * position is outside the table is passed through (positions are validated on the host, never read here to
 * fail). */
#include "kernels/cpu/cpu_internal.h"

/* One token's heads, float32. */
static inline void rope_f32(const float *xt, float *ot, const float *c, const float *s, int64_t n_heads,
                            int64_t head_dim, int64_t half, int64_t rot_dim, float sign) {
    for (int64_t h = 0; h < n_heads; h++) {
        const float *xr = xt + h * head_dim;
        float *o = ot + h * head_dim;
        for (int64_t i = 0; i < half; i++) {
            float a = xr[i], b = xr[i + half], si = sign * s[i];
            o[i] = a * c[i] - b * si;
            o[i + half] = b * c[i] + a * si;
        }
        if (o != xr)
            for (int64_t i = rot_dim; i < head_dim; i++) o[i] = xr[i];
    }
}

/* The same for bf16 storage: widened reads, rounded stores, pass-through dims copied as they are. */
static inline void rope_bf16(const uint16_t *xt, uint16_t *ot, const float *c, const float *s, int64_t n_heads,
                             int64_t head_dim, int64_t half, int64_t rot_dim, float sign) {
    for (int64_t h = 0; h < n_heads; h++) {
        const uint16_t *xr = xt + h * head_dim;
        uint16_t *o = ot + h * head_dim;
        for (int64_t i = 0; i < half; i++) {
            float a = lcx_bf16_to_f32(xr[i]), b = lcx_bf16_to_f32(xr[i + half]), si = sign * s[i];
            o[i] = lcx_f32_to_bf16(a * c[i] - b * si);
            o[i + half] = lcx_f32_to_bf16(b * c[i] + a * si);
        }
        if (o != xr)
            for (int64_t i = rot_dim; i < head_dim; i++) o[i] = xr[i];
    }
}

/* sign = +1: rotate by +angle (forward); -1: by -angle (backward, the transpose). */
static lcx_status rope(const lcx_rope_args *a, float sign) {
    const int64_t n_tokens = a->n_tokens, n_heads = a->n_heads, head_dim = a->head_dim, rot_dim = a->rot_dim;
    const int64_t n_pos = a->n_pos;
    const int32_t *pos = a->pos;
    const float *cos = a->cos, *sin = a->sin;
    const int64_t half = rot_dim / 2, row = n_heads * head_dim;
    const int bf = a->dt == LCX_BF16;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n_tokens; t++) {
        const int64_t p = pos[t];
        const float *c = cos, *s = sin;
        int64_t hf = 0, r = 0; /* an invalid position (or no rotary dims): everything passes through */
        if (p >= 0 && p < n_pos && half > 0) {
            c += p * half;
            s += p * half;
            hf = half;
            r = rot_dim;
        }
        if (bf)
            rope_bf16((const uint16_t *)a->x + t * row, (uint16_t *)a->out + t * row, c, s, n_heads, head_dim, hf, r,
                      sign);
        else
            rope_f32((const float *)a->x + t * row, (float *)a->out + t * row, c, s, n_heads, head_dim, hf, r, sign);
    }
    return LCX_OK;
}

lcx_status lcx_cpu_rope_fwd(lcx_exec *x, const lcx_rope_args *a) {
    (void)x;
    return rope(a, 1.0f);
}
lcx_status lcx_cpu_rope_bwd(lcx_exec *x, const lcx_rope_args *a) {
    (void)x;
    return rope(a, -1.0f);
}
