/* model_train: one optimizer step = gradient accumulation over micro-batches, global-norm clipping, AdamW on the
 * fp32 master weights, refresh of the stored (f32 or bf16) parameters. */
#include <math.h>
#include <stdlib.h>

#include "src/core/clock.h"
#include "src/model/model_dp.h"
#include "src/model/model_internal.h"

/* The unsharded gradient sum's scratch for group g, the model's own (allocated at its first group step, or again
 * for a larger group) so that the steps do not allocate. */
static lcx_status grad_sum_scratch(lcx_model *m, const lcx_comm *g, float **out) {
    const int64_t n = (int64_t)m->n_elems, c = n < LCX_DP_CHUNK ? n : LCX_DP_CHUNK;
    const uint64_t need = (uint64_t)lcx_group_sum_all_scratch(g->size, c);
    if (need > m->gsum_elems) {
        if (m->gsum) m->be->free(m->gsum);
        m->gsum = NULL, m->gsum_elems = 0;
        LCX_TRY(m->be->alloc((size_t)need * sizeof(float), (void **)&m->gsum));
        m->gsum_elems = need;
    }
    *out = m->gsum;
    return LCX_OK;
}

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

/* AdamW over every parameter with the clipping factor from the squared gradient norm sq (read from the device by
 * the caller), then the bf16 refresh of the norm weights' float32 copies. */
static lcx_status apply_adamw(lcx_model *m, const lcx_adamw_opts *o, double sq, lcx_step_result *res) {
    const lcx_backend *be = m->be;
    double norm = sqrt(sq), scale = 1.0;
    LCX_FAIL_IF(!isfinite(norm), LCX_ERR_INVALID, "train step %lld: gradient norm is %g", (long long)m->step + 1,
                norm);
    if (o->max_grad_norm > 0) {
        /* torch.nn.utils.clip_grad_norm_: coef = max / (norm + 1e-6), clamped to 1 */
        double coef = o->max_grad_norm / (norm + 1e-6);
        if (coef < 1.0) scale = coef;
    }
    m->step++;
    lcx_adamw_args args = {o->lr, o->beta1, o->beta2, o->eps, 0.0, m->step, scale, 0, NULL, NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < m->tab.n; i++) {
        const lcx_param_spec *s = &m->tab.params[i];
        size_t off = m->off[i];
        /* the elements whose moments this rank holds: all of them, or its rows under ZeRO-1 (model_zero.c) */
        uint64_t e0, e1;
        size_t mo;
        lcx_zero_range(m, i, &e0, &e1, &mo);
        args.weight_decay = decays(s, o) ? o->weight_decay : 0.0;
        args.n = (int64_t)(e1 - e0);
        args.param = lcx_zero_master(m, i, NULL, NULL), args.grad = m->grads + off + e0; /* the same rows */
        args.m = m->adam_m + mo, args.v = m->adam_v + mo;
        args.param_bf16 = m->pdt == LCX_BF16 ? (uint16_t *)lcx_m_param(m, (int64_t)i) + e0 : NULL;
        if (args.n) LCX_TRY(be->adamw(m->x, &args));
        if (args.param_bf16 && s->role == LCX_ROLE_NORM && !m->zero) /* ZeRO-1: after the all-gather */
            LCX_TRY(lcx_m_cast(m, args.param_bf16, LCX_BF16, m->normw + m->norm_off[i], LCX_F32, args.n));
    }
    LCX_TRY(be->sync(m->x));
    if (res) {
        res->grad_norm = norm;
        res->clip_scale = scale;
        res->step = m->step;
    }
    return LCX_OK;
}

/* The gradients' squared norm into d_res->grad_sq (zeroed first): one sqnorm over the whole grads buffer. With
 * tensor parallelism the gradients that are partial on each rank are summed over their sharers first, and
 * d_res->grad_sq gets this rank's share only (lcx_tp_sum_host makes it global once read). */
static lcx_status grad_sqnorm(lcx_model *m) {
    LCX_TRY(m->be->zero(m->x, &m->d_res->grad_sq, sizeof(double)));
    if (m->tp_size > 1) {
        LCX_TRY(lcx_tp_reduce_grads(m));
        return lcx_rows_sqnorm_queue(m, 0, 1); /* whole parameters, each replicated box once */
    }
    lcx_sqnorm_args a = {(int64_t)m->n_elems, m->grads, &m->d_res->grad_sq};
    return m->be->sqnorm(m->x, &a);
}

/* Counted targets (labels other than LCX_IGNORE_INDEX) over a step's micro-batches. */
static int64_t counted_targets(const lcx_batch *micro, int n_micro) {
    int64_t total = 0;
    for (int i = 0; i < n_micro; i++) total += lcx_batch_count(&micro[i]);
    return total;
}

/* A step's state zeroed: the gradients and the results (norm + one loss slot per micro-batch), whose size goes
 * to *res_bytes for the step's one read, and the ring's wait time. */
static lcx_status zero_step_state(lcx_model *m, int n_micro, size_t *res_bytes) {
    LCX_TRY(lcx_model_reserve_results(m, n_micro));
    m->ring_wait_s = 0; /* the ring's waits are counted per step (res->ring_wait_s) */
    m->tp_comm_s = 0;   /* and the TP group's collectives (res->tp_comm_s) */
    m->offl.wait_s = 0; /* and the waits for offloaded activations (res->offload_wait_s) */
    m->offl.n_marks = 0; /* marks a step without results left are dropped */
    *res_bytes = sizeof(lcx_dev_results) + (size_t)n_micro * sizeof(lcx_loss_slot);
    LCX_TRY(lcx_model_zero_grads(m));
    return m->be->zero(m->x, m->d_res, *res_bytes);
}

/* The step of one rank (grad NULL): what it was before data parallelism, bit for bit. */
static lcx_status train_step_local(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                   lcx_step_result *res) {
    lcx_peak_rss_reset();
    int64_t total = counted_targets(micro, n_micro);
    LCX_FAIL_IF(total == 0, LCX_ERR_INVALID, "train step: no counted target in the batch (all labels are %d)",
                LCX_IGNORE_INDEX);
    size_t res_bytes;
    LCX_TRY(zero_step_state(m, n_micro, &res_bytes));
    /* loss normalised by the global count: micro-batch gradients add up to the gradient of the mean */
    float dscale = (float)(1.0 / (double)total);
    for (int i = 0; i < n_micro; i++) {
        lcx_status st = lcx_model_fwd_bwd(m, &micro[i], dscale, &m->d_res->loss[i]);
        if (st != LCX_OK) return lcx_fail_context(st, "micro-batch %d: ", i);
    }
    LCX_TRY(grad_sqnorm(m));
    /* the step's one read: the norm and every micro-batch's loss */
    lcx_dev_results *h = malloc(res_bytes);
    LCX_FAIL_IF(!h, LCX_ERR_OOM, "train step: out of memory");
    lcx_status st = m->be->copy_d2h(m->x, h, m->d_res, res_bytes);
    double loss = 0;
    int64_t counted = 0;
    for (int i = 0; i < n_micro; i++) { /* micro-batch order, as their sums were formed */
        loss += h->loss[i].loss_sum;
        counted += h->loss[i].count;
    }
    double sq = h->grad_sq;
    free(h);
    LCX_TRY(st);
    LCX_TRY(lcx_tp_sum_host(m, &sq));
    LCX_TRY(apply_adamw(m, o, sq, res));
    if (res) {
        res->loss = loss / (double)counted;
        res->n_tokens = counted;
        res->peak_rss = lcx_peak_rss();
        res->comm_s = m->tp_comm_s; /* one gradient rank: only the TP group communicates */
        res->tp_comm_s = m->tp_comm_s;
        res->ring_wait_s = m->ring_wait_s;
        LCX_TRY(lcx_offload_wait_collect(m));
        res->offload_wait_s = m->offl.wait_s;
    }
    return LCX_OK;
}

/* The ZeRO-1 half of a group step after the micro-batches (model_zero.c): reduce-scatter of the gradients to each
 * rank's rows, the global norm from the ranks' rows, AdamW on this rank's rows, all-gather of the updated rows.
 * Bit-identical weights to the unsharded step (the same additions and the same AdamW per element); the norm's
 * double may differ in its last bits (its partial sums are grouped by rank), which reaches the weights only
 * through the float32 clipping coefficient. t0: when the collectives started (comm_s). */
static lcx_status zero_update(lcx_model *m, const lcx_adamw_opts *o, lcx_step_result *res, double *comm, double t0) {
    LCX_TRY(lcx_zero_reduce_scatter(m)); /* ends with a sync */
    LCX_TRY(lcx_tp_reduce_grads(m)); /* TP: sums whole buffers; only this rank's rows are read from here on */
    double sq = 0, t1 = lcx_clock_s();
    *comm += t1 - t0;
    LCX_TRY(lcx_zero_sqnorm(m, &sq));
    LCX_TRY(lcx_tp_sum_host(m, &sq));
    *comm += lcx_clock_s() - t1;
    LCX_TRY(apply_adamw(m, o, sq, res));
    t1 = lcx_clock_s();
    LCX_TRY(lcx_zero_all_gather(m));
    *comm += lcx_clock_s() - t1;
    return LCX_OK;
}

/* Over a gradient group g (docs/parallel.md "Data parallelism"): the global count first (an exact int64 sum), so
 * every rank scales its loss gradient by 1 / the group's counted targets; then each rank's micro-batches; then
 * the loss sums, counts and failure flags gathered and added in rank order; the gradients summed in rank order
 * (lcx_dp_sum_f32); the norm of the summed gradients (the global norm, the same bits on every rank) and AdamW.
 * Every rank ends with the same weights. A rank whose micro-batch failed still joins the collectives, so the
 * others return an error naming it instead of waiting for it. */
static lcx_status train_step_group(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                   lcx_comm *g, lcx_step_result *res) {
    lcx_peak_rss_reset();
    int64_t total = counted_targets(micro, n_micro);
    double t0 = lcx_clock_s(), comm = 0; /* the collectives' time (res->comm_s) */
    LCX_TRY(lcx_comm_all_reduce(g, NULL, &total, &total, 1, LCX_I64, LCX_COMM_SUM));
    comm += lcx_clock_s() - t0;
    LCX_FAIL_IF(total == 0, LCX_ERR_INVALID,
                "train step: no counted target in the batch of any of the %d ranks (all labels are %d)", g->size,
                LCX_IGNORE_INDEX);
    size_t res_bytes;
    LCX_TRY(zero_step_state(m, n_micro, &res_bytes));
    float dscale = (float)(1.0 / (double)total);
    lcx_status st = LCX_OK;
    for (int i = 0; i < n_micro && st == LCX_OK; i++) {
        st = lcx_model_fwd_bwd(m, &micro[i], dscale, &m->d_res->loss[i]);
        if (st != LCX_OK) st = lcx_fail_context(st, "micro-batch %d: ", i);
    }
    double mine[2] = {0, 0}, sum[2];
    lcx_dev_results *h = NULL;
    if (st == LCX_OK) {
        h = malloc(res_bytes);
        st = h ? m->be->copy_d2h(m->x, h, m->d_res, res_bytes) : lcx_fail(LCX_ERR_OOM, "train step: out of memory");
    }
    if (st == LCX_OK)
        for (int i = 0; i < n_micro; i++) { /* micro-batch order, as their sums were formed */
            mine[0] += h->loss[i].loss_sum;
            mine[1] += (double)h->loss[i].count;
        }
    free(h);
    int failed = -1;
    const double tp_layers = m->tp_comm_s; /* the TP collectives inside the micro-batches (outside comm's windows) */
    t0 = lcx_clock_s();
    LCX_TRY(lcx_dp_sum_f64(g, mine, 2, st != LCX_OK, sum, &failed));
    LCX_TRY(st);
    LCX_FAIL_IF(failed >= 0, LCX_ERR_COMM, "train step: rank %d of the gradient group failed its micro-batches",
                failed);
    if (m->zero) { /* ZeRO-1 (model_zero.c): each rank sums, clips and updates its rows only */
        LCX_TRY(zero_update(m, o, res, &comm, t0));
    } else {
        float *scratch = NULL;
        LCX_TRY(grad_sum_scratch(m, g, &scratch));
        LCX_TRY(lcx_dp_sum_f32(g, m->be, m->x, m->grads, (int64_t)m->n_elems, LCX_DP_CHUNK, scratch)); /* syncs */
        LCX_TRY(lcx_tp_reduce_grads(m)); /* TP: the gradients partial on each TP rank, summed over their sharers */
        comm += lcx_clock_s() - t0;
        double sq = 0; /* grouped by the ZeRO-1 rows of each rank: the same double with ZeRO-1 on or off */
        LCX_TRY(lcx_zero_group_sqnorm(m, g->size, &sq));
        LCX_TRY(lcx_tp_sum_host(m, &sq)); /* TP: the ranks' shares of the norm */
        LCX_TRY(apply_adamw(m, o, sq, res));
    }
    if (res) {
        res->loss = sum[0] / sum[1];
        res->n_tokens = (int64_t)sum[1];
        res->peak_rss = lcx_peak_rss();
        res->comm_s = comm + tp_layers; /* comm's windows hold the step's later TP collectives */
        res->tp_comm_s = m->tp_comm_s;
        res->ring_wait_s = m->ring_wait_s;
        LCX_TRY(lcx_offload_wait_collect(m));
        res->offload_wait_s = m->offl.wait_s;
    }
    return LCX_OK;
}

lcx_status lcx_model_train_step_group(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                      lcx_comm *grad, lcx_step_result *res) {
    LCX_FAIL_IF(!m->training, LCX_ERR_INVALID, "model: not built for training (opts.training = 0)");
    LCX_FAIL_IF(n_micro < 1 || !micro, LCX_ERR_INVALID, "train step: no micro-batches");
    LCX_TRY(check_hp(o));
    /* CP (docs/parallel.md "Data parallelism"): a rank's micro-batches are its local tokens and its gradients a
     * partial contribution, so the step reduces over a group that holds the CP group: the GRAD group (CP x DP).
     * The model's own CP reduction of the loss (lcx_model_forward_backward) is not used here: lcx_model_fwd_bwd
     * leaves the local sum and count, and the step's group sums them once. No group: the CP group (GRAD when
     * DP is 1). */
    if (m->cp && m->cp_size > 1) {
        if (!grad || grad->size == 1) grad = m->cp;
        LCX_FAIL_IF(grad->size % m->cp_size != 0, LCX_ERR_INVALID,
                    "train step: the gradient group has %d ranks, not a multiple of the model's CP group (%d): pass "
                    "the mesh's GRAD group (CP x DP)",
                    grad->size, m->cp_size);
    }
    if (m->zero) /* ZeRO-1: the step's group must be the one the moments are sharded over */
        LCX_FAIL_IF(!grad || grad->size != m->zero_size || grad->rank != m->zero_rank, LCX_ERR_INVALID,
                    "train step: the model's AdamW moments are sharded over a group of %d ranks (ZeRO-1, rank %d) "
                    "but the step was given %s of %d ranks",
                    m->zero_size, m->zero_rank, grad ? "a gradient group" : "no group", grad ? grad->size : 1);
    if (!grad || grad->size == 1) return train_step_local(m, micro, n_micro, o, res);
    return train_step_group(m, micro, n_micro, o, grad, res);
}

lcx_status lcx_model_train_step(lcx_model *m, const lcx_batch *micro, int n_micro, const lcx_adamw_opts *o,
                                lcx_step_result *res) {
    return lcx_model_train_step_group(m, micro, n_micro, o, NULL, res);
}

lcx_status lcx_model_optimizer_step(lcx_model *m, const lcx_adamw_opts *o, lcx_step_result *res) {
    LCX_FAIL_IF(!m->training, LCX_ERR_INVALID, "model: not built for training (opts.training = 0)");
    LCX_TRY(check_hp(o));
    LCX_FAIL_IF(m->zero, LCX_ERR_INVALID,
                "optimizer step: the model's AdamW moments are sharded (ZeRO-1): use lcx_model_train_step_group");
    LCX_TRY(grad_sqnorm(m));
    double sq = 0;
    LCX_TRY(m->be->copy_d2h(m->x, &sq, &m->d_res->grad_sq, sizeof sq));
    LCX_TRY(lcx_tp_sum_host(m, &sq));
    return apply_adamw(m, o, sq, res);
}
