/* cpu_rope: rotary embedding in the HF rotate_half layout (pairs i, i + rot_dim/2), partial rotary. */
#include "cpu_internal.h"

/* sign = +1: rotate by +angle (forward); -1: by -angle (backward, the transpose). */
static lcx_status rope(const char *op, const float *x, float *out, const int32_t *pos, const float *cos,
                       const float *sin, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
                       int64_t n_pos, float sign) {
    LCX_FAIL_IF(n_tokens < 0 || n_heads < 0 || head_dim <= 0 || rot_dim < 0 || rot_dim > head_dim ||
                    rot_dim % 2 != 0 || n_pos < 0,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld heads=%lld head_dim=%lld rot_dim=%lld positions=%lld",
                op, (long long)n_tokens, (long long)n_heads, (long long)head_dim, (long long)rot_dim,
                (long long)n_pos);
    LCX_CPU_NEED(x, n_tokens * n_heads, op);
    LCX_CPU_NEED(out, n_tokens * n_heads, op);
    LCX_CPU_NEED(pos, n_tokens, op);
    LCX_CPU_NEED(cos, rot_dim, op);
    LCX_CPU_NEED(sin, rot_dim, op);
    for (int64_t t = 0; t < n_tokens; t++)
        LCX_FAIL_IF(pos[t] < 0 || pos[t] >= n_pos, LCX_ERR_INVALID,
                    "%s: token %lld has position %d outside the rope table [0, %lld)", op, (long long)t, pos[t],
                    (long long)n_pos);
    int64_t half = rot_dim / 2;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *c = cos + (int64_t)pos[t] * half, *s = sin + (int64_t)pos[t] * half;
        for (int64_t h = 0; h < n_heads; h++) {
            const float *xr = x + (t * n_heads + h) * head_dim;
            float *o = out + (t * n_heads + h) * head_dim;
            for (int64_t i = 0; i < half; i++) {
                float a = xr[i], b = xr[i + half], si = sign * s[i];
                o[i] = a * c[i] - b * si;
                o[i + half] = b * c[i] + a * si;
            }
            if (o != xr)
                for (int64_t i = rot_dim; i < head_dim; i++) o[i] = xr[i];
        }
    }
    return LCX_OK;
}

lcx_status lcx_cpu_rope_fwd(const float *x, float *out, const int32_t *pos, const float *cos, const float *sin,
                            int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t n_pos) {
    return rope("rope_fwd", x, out, pos, cos, sin, n_tokens, n_heads, head_dim, rot_dim, n_pos, 1.0f);
}

lcx_status lcx_cpu_rope_bwd(const float *dout, float *dx, const int32_t *pos, const float *cos,
                            const float *sin, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                            int64_t rot_dim, int64_t n_pos) {
    return rope("rope_bwd", dout, dx, pos, cos, sin, n_tokens, n_heads, head_dim, rot_dim, n_pos, -1.0f);
}
