/* cpu_adamw: one decoupled-weight-decay Adam step in float32, with torch.optim.AdamW's order of operations
 * (scalar bias corrections in double, as PyTorch computes them in Python). */
#include <math.h>

#include "cpu_internal.h"

lcx_status lcx_cpu_adamw(const lcx_adamw_args *a, float *param, const float *grad, float *m, float *v,
                         uint16_t *param_bf16, int64_t n) {
    LCX_FAIL_IF(a == NULL, LCX_ERR_INVALID, "adamw: NULL arguments");
    LCX_FAIL_IF(n < 0 || a->step < 1, LCX_ERR_INVALID, "adamw: bad size %lld or step %lld (steps count from 1)",
                (long long)n, (long long)a->step);
    LCX_FAIL_IF(!(a->beta1 >= 0.0f && a->beta1 < 1.0f && a->beta2 >= 0.0f && a->beta2 < 1.0f && a->eps >= 0.0f),
                LCX_ERR_INVALID, "adamw: betas must be in [0, 1) and eps >= 0 (beta1=%g beta2=%g eps=%g)",
                (double)a->beta1, (double)a->beta2, (double)a->eps);
    LCX_CPU_NEED(param, n, "adamw");
    LCX_CPU_NEED(grad, n, "adamw");
    LCX_CPU_NEED(m, n, "adamw");
    LCX_CPU_NEED(v, n, "adamw");
    double bc1 = 1.0 - pow((double)a->beta1, (double)a->step);
    double bc2 = 1.0 - pow((double)a->beta2, (double)a->step);
    float decay = (float)(1.0 - (double)a->lr * (double)a->weight_decay);
    float step_size = (float)((double)a->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float b1 = a->beta1, b2 = a->beta2, eps = a->eps, gs = a->grad_scale;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        float p = param[i] * decay;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        p -= step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
        m[i] = mi;
        v[i] = vi;
        param[i] = p;
        if (param_bf16) param_bf16[i] = lcx_f32_to_bf16(p);
    }
    return LCX_OK;
}
