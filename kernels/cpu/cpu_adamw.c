/* cpu_adamw: one decoupled-weight-decay Adam step in float32, following torch.optim.AdamW's single-tensor code
 * path operation by operation (scalars formed in double as Python does, then rounded to float once), so the
 * result tracks PyTorch to float32 rounding. */
#include <math.h>

#include "cpu_internal.h"

lcx_status lcx_cpu_adamw(const lcx_adamw_args *a, float *param, const float *grad, float *m, float *v,
                         uint16_t *param_bf16, int64_t n) {
    LCX_FAIL_IF(a == NULL, LCX_ERR_INVALID, "adamw: NULL arguments");
    LCX_FAIL_IF(n < 0 || a->step < 1, LCX_ERR_INVALID, "adamw: bad size %lld or step %lld (steps count from 1)",
                (long long)n, (long long)a->step);
    LCX_FAIL_IF(!(a->beta1 >= 0.0 && a->beta1 < 1.0 && a->beta2 >= 0.0 && a->beta2 < 1.0 && a->eps >= 0.0),
                LCX_ERR_INVALID, "adamw: betas must be in [0, 1) and eps >= 0 (beta1=%g beta2=%g eps=%g)", a->beta1,
                a->beta2, a->eps);
    LCX_CPU_NEED(param, n, "adamw");
    LCX_CPU_NEED(grad, n, "adamw");
    LCX_CPU_NEED(m, n, "adamw");
    LCX_CPU_NEED(v, n, "adamw");
    double bc1 = 1.0 - pow(a->beta1, (double)a->step);
    double bc2 = 1.0 - pow(a->beta2, (double)a->step);
    const float decay = (float)(1.0 - a->lr * a->weight_decay);
    const float w1 = (float)(1.0 - a->beta1), b2 = (float)a->beta2, w2 = (float)(1.0 - a->beta2);
    const float neg_step = (float)(-(a->lr / bc1)), bc2_sqrt = (float)sqrt(bc2), eps = (float)a->eps;
    const float gs = (float)a->grad_scale;
    const int lerp_small = fabsf(w1) < 0.5f; /* torch's lerp picks its formula by the weight */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        float p = param[i] * decay;
        float mi = m[i];
        /* PyTorch's vectorised lerp and addcmul are fused multiply-adds; fmaf rounds once, as they do */
        mi = lerp_small ? fmaf(w1, g - mi, mi) : fmaf(w1 - 1.0f, g - mi, g);
        float vi = fmaf(w2 * g, g, v[i] * b2);
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p = p + (neg_step * mi) / denom;
        m[i] = mi;
        v[i] = vi;
        param[i] = p;
        if (param_bf16) param_bf16[i] = lcx_f32_to_bf16(p);
    }
    return LCX_OK;
}
