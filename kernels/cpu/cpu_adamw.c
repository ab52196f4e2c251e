/* cpu_adamw: one decoupled-weight-decay Adam step in float32, following torch.optim.AdamW's single-tensor code
 * path operation by operation (scalars formed in double as Python does, then rounded to float once), so the
 * result tracks PyTorch to float32 rounding. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

typedef struct adamw_consts {
    float gs, decay, w1, b2, w2, neg_step, bc2_sqrt, eps;
    int lerp_small; /* torch's lerp picks its formula by the weight */
} adamw_consts;

LCX_CPU_HOT_FMA static void adamw_range(const adamw_consts *k, float *restrict param, const float *restrict grad,
                                        float *restrict m, float *restrict v, uint16_t *restrict param_bf16,
                                        int64_t lo, int64_t hi) {
    const float gs = k->gs, decay = k->decay, w1 = k->w1, b2 = k->b2, w2 = k->w2, neg_step = k->neg_step;
    const float bc2_sqrt = k->bc2_sqrt, eps = k->eps;
    for (int64_t i = lo; i < hi; i++) {
        float g = grad[i] * gs;
        float p = param[i] * decay;
        float mi = m[i];
        /* PyTorch's vectorised lerp and addcmul are fused multiply-adds; fmaf rounds once, as they do */
        mi = k->lerp_small ? fmaf(w1, g - mi, mi) : fmaf(w1 - 1.0f, g - mi, g);
        float vi = fmaf(w2 * g, g, v[i] * b2);
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p = p + (neg_step * mi) / denom;
        m[i] = mi;
        v[i] = vi;
        param[i] = p;
    }
    if (param_bf16)
        for (int64_t i = lo; i < hi; i++) param_bf16[i] = lcx_f32_to_bf16(param[i]);
}

lcx_status lcx_cpu_adamw(lcx_exec *x, const lcx_adamw_args *a) {
    (void)x;
    const int64_t n = a->n;
    float *param = a->param, *m = a->m, *v = a->v;
    const float *grad = a->grad;
    uint16_t *param_bf16 = a->param_bf16;
    double bc1 = 1.0 - pow(a->beta1, (double)a->step);
    double bc2 = 1.0 - pow(a->beta2, (double)a->step);
    const float decay = (float)(1.0 - a->lr * a->weight_decay);
    const float w1 = (float)(1.0 - a->beta1), b2 = (float)a->beta2, w2 = (float)(1.0 - a->beta2);
    const float neg_step = (float)(-(a->lr / bc1)), bc2_sqrt = (float)sqrt(bc2), eps = (float)a->eps;
    const float gs = (float)a->grad_scale;
    const adamw_consts k = {gs, decay, w1, b2, w2, neg_step, bc2_sqrt, eps, fabsf(w1) < 0.5f};
    const int64_t chunk = 1 << 14;
#pragma omp parallel for schedule(static)
    for (int64_t lo = 0; lo < n; lo += chunk)
        adamw_range(&k, param, grad, m, v, param_bf16, lo, lo + chunk < n ? lo + chunk : n);
    return LCX_OK;
}
