/* model_train: one optimizer step = gradient accumulation over micro-batches, global-norm clipping, AdamW on the
 * fp32 master weights, refresh of the stored (f32 or bf16) parameters. */
#include <math.h>

#include "src/model_internal.h"

/* Default exclusion rule (as the usual PyTorch param groups): decay 2-D weights (linear, embedding, lm_head);
 * norms and biases (1-D) get none. */
static int decays(const lcx_param_spec *s, const lcx_adamw_opts *o) {
    if (o->decay_norms_biases) return 1;
    return s->role == LCX_ROLE_LINEAR || s->role == LCX_ROLE_EMBEDDING || s->role == LCX_ROLE_LM_HEAD;
}

static lcx_status check_hp(const lcx_adamw_opts *o) {
    LCX_FAIL_IF(!(o->lr >= 0) || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) ||
                    !(o->eps >= 0) || !(o->weight_decay >= 0),
                LCX_ERR_INVALID, "train step: bad AdamW hyper-parameters (lr %g, betas %g %g, eps %g, wd %g)", o->lr,
                o->beta1, o->beta2, o->eps, o->weight_decay);
    return LCX_OK;
}

lcx_status lcx_model_train_step(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                lcx_step_result *res) {
    LCX_FAIL_IF(!m->training, LCX_ERR_INVALID, "model: not built for training (opts.training = 0)");
    LCX_FAIL_IF(n_micro < 1 || !micro, LCX_ERR_INVALID, "train step: no micro-batches");
    LCX_TRY(check_hp(o));
    lcx_peak_rss_reset();
    int64_t total = 0;
    for (int i = 0; i < n_micro; i++) total += lcx_batch_count(&micro[i]);
    LCX_FAIL_IF(total == 0, LCX_ERR_INVALID, "train step: no counted target in the batch (all labels are %d)",
                LCX_IGNORE_INDEX);
    LCX_TRY(lcx_model_zero_grads(m));
    /* loss normalised by the global count: micro-batch gradients add up to the gradient of the mean */
    float dscale = (float)(1.0 / (double)total);
    double loss = 0;
    int64_t counted = 0;
    for (int i = 0; i < n_micro; i++) {
        double ls = 0;
        int64_t c = 0;
        lcx_status st = lcx_model_forward_backward(m, &micro[i], dscale, &ls, &c);
        if (st != LCX_OK) return lcx_fail_context(st, "micro-batch %d: ", i);
        loss += ls;
        counted += c;
    }
    LCX_TRY(lcx_model_optimizer_step(m, o, res));
    if (res) {
        res->loss = loss / (double)counted;
        res->n_tokens = counted;
        res->peak_rss = lcx_peak_rss();
    }
    return LCX_OK;
}

lcx_status lcx_model_optimizer_step(lcx_model *m, const lcx_adamw_opts *o, lcx_step_result *res) {
    LCX_FAIL_IF(!m->training, LCX_ERR_INVALID, "model: not built for training (opts.training = 0)");
    LCX_TRY(check_hp(o));
    const lcx_backend *be = m->be;
    double sq = 0;
    LCX_TRY(be->sqnorm(m->grads, (int64_t)m->n_elems, &sq));
    double norm = sqrt(sq), scale = 1.0;
    LCX_FAIL_IF(!isfinite(norm), LCX_ERR_INVALID, "train step %lld: gradient norm is %g", (long long)m->step + 1,
                norm);
    if (o->max_grad_norm > 0) {
        /* torch.nn.utils.clip_grad_norm_: coef = max / (norm + 1e-6), clamped to 1 */
        double coef = o->max_grad_norm / (norm + 1e-6);
        if (coef < 1.0) scale = coef;
    }
    m->step++;
    lcx_adamw_args args = {o->lr, o->beta1, o->beta2, o->eps, 0.0, m->step, scale};
    for (size_t i = 0; i < m->tab.n; i++) {
        const lcx_param_spec *s = &m->tab.params[i];
        args.weight_decay = decays(s, o) ? o->weight_decay : 0.0;
        size_t off = m->off[i];
        uint16_t *p16 = m->pdt == LCX_BF16 ? (uint16_t *)lcx_m_param(m, (int64_t)i) : NULL;
        LCX_TRY(be->adamw(&args, m->master + off, m->grads + off, m->adam_m + off, m->adam_v + off, p16,
                          (int64_t)s->numel));
        if (p16 && s->role == LCX_ROLE_NORM)
            LCX_TRY(be->cast_bf16_to_f32(p16, m->normw + m->norm_off[i], (int64_t)s->numel));
    }
    LCX_TRY(be->sync());
    if (res) {
        res->grad_norm = norm;
        res->clip_scale = scale;
        res->step = m->step;
    }
    return LCX_OK;
}
