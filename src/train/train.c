/* train: the stage loop (src/train/train.h): batches from the sampler, LR schedule, AdamW steps, metrics, progress,
 * periodic saves, signal handling, and the perplexity evaluation. */
#include "src/train/train.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/core/cp_perm.h"

static volatile sig_atomic_t g_stop;

int lcx_train_save_due(int64_t step, int64_t steps, int64_t save_interval) {
    return step == steps || (save_interval > 0 && step % save_interval == 0);
}

int64_t lcx_train_saves(int64_t done, int64_t steps, int64_t save_interval) {
    if (done < 0) done = 0;
    if (steps <= done) return 0;
    /* lcx_train_save_due over (done, steps] (a recipe's steps may be many): the interval's multiples, and the last
     * step unless it is one of them */
    const int64_t multiples = save_interval > 0 ? steps / save_interval - done / save_interval : 0;
    return multiples + (save_interval <= 0 || steps % save_interval != 0);
}

/* First signal: finish the step and save. A second one: the default action (abort; a save in progress leaves
 * only a NAME.tmp-* directory, `latest` still names the previous checkpoint). */
static void on_signal(int sig) {
    if (g_stop) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stop = 1;
    static const char msg[] = "\nlcextend: stopping after this step and saving (again to abort without saving)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

void lcx_train_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void lcx_train_release_signals(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

int lcx_train_interrupted(void) { return g_stop != 0; }
void lcx_train_clear_interrupt(void) { g_stop = 0; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An agreement point of the gradient group g after work that only some ranks do (rank 0's metrics file and
 * saves): every rank passes its outcome; when any failed, every rank returns the lowest failing rank's status
 * and message, prefixed "rank R: " (R its world rank), and sets *agreed: the ranks stop together, so the caller
 * need not abort the job, and the rank that prints the run's error line prints the cause. */
static lcx_status agree(lcx_comm *g, lcx_status st, int *agreed) {
    if (!g || g->size <= 1) return st;
    int64_t info[3] = {st != LCX_OK ? (int64_t)(g->size - g->rank) : 0, 0, 0}; /* max: the lowest failing rank */
    LCX_TRY(lcx_comm_all_reduce(g, NULL, info, info, 1, LCX_I64, LCX_COMM_MAX));
    if (!info[0]) return LCX_OK;
    const int origin = g->size - (int)info[0];
    char msg[512] = "";
    if (g->rank == origin) {
        info[1] = (int64_t)st, info[2] = g->world_rank;
        snprintf(msg, sizeof msg, "%s", lcx_last_error());
    }
    LCX_TRY(lcx_comm_broadcast(g, NULL, &info[1], 2, LCX_I64, origin));
    LCX_TRY(lcx_comm_broadcast(g, NULL, msg, sizeof msg / 8, LCX_I64, origin));
    msg[sizeof msg - 1] = 0;
    *agreed = 1;
    return lcx_fail((lcx_status)info[1], "rank %lld: %s", (long long)info[2], msg);
}

static lcx_status check_stage(const lcx_train_stage *sg, const lcx_model *m) {
    LCX_FAIL_IF(sg->seq_len < 2 || sg->steps < 1 || sg->micro_seqs < 1 || sg->grad_accum < 1 ||
                    sg->save_interval < 0,
                LCX_ERR_INVALID, "train: stage %d: bad seq_len %lld / steps %lld / micro_seqs %lld / grad_accum %lld",
                sg->index + 1, (long long)sg->seq_len, (long long)sg->steps, (long long)sg->micro_seqs,
                (long long)sg->grad_accum);
    (void)m;
    return LCX_OK;
}

/* Whether the state was saved with these sampler settings (min_doc_tokens, long_doc_tokens, long_doc_repeat) ... */
static int same_sampling(const lcx_train_state *s, const int64_t sampling[3]) {
    return s->min_doc_tokens == sampling[0] && s->long_doc_tokens == sampling[1] && s->long_doc_repeat == sampling[2];
}

/* ... and from this data mix: as many sources, the same normalised weights. */
static int same_mix(const lcx_train_state *s, const lcx_mix *smp, int n) {
    int same = s->cursor.n == n;
    for (int i = 0; same && i < n; i++) same = fabs(s->mix_weight[i] - lcx_mix_weight(smp, i)) <= 1e-12;
    return same;
}

lcx_status lcx_train_stage_run(lcx_model *m, const lcx_mix_data *data, const lcx_train_stage *sg,
                               const lcx_train_ctx *ctx, lcx_train_state *state, lcx_train_summary *sum) {
    LCX_TRY(check_stage(sg, m));
    memset(sum, 0, sizeof *sum);
    sum->last_loss = NAN;
    const int64_t L = sg->seq_len, rows = sg->micro_seqs, A = sg->grad_accum;
    LCX_FAIL_IF(rows > INT32_MAX / L || rows * L * A > INT32_MAX, LCX_ERR_INVALID,
                "train: stage %d: %lld x %lld x %lld tokens per step is too many", sg->index + 1, (long long)A,
                (long long)rows, (long long)L);
    const int64_t D = ctx->dp_size > 1 ? ctx->dp_size : 1, d = D > 1 ? ctx->dp_rank : 0;
    LCX_FAIL_IF(d < 0 || d >= D || (D > 1 && !ctx->grad), LCX_ERR_INVALID,
                "train: DP rank %lld of %lld (and a gradient group: %s)", (long long)d, (long long)D,
                ctx->grad ? "given" : "none");
    /* CP: this rank's rows are Ll = L / C tokens of every sequence (lcx_cp_local_batch) */
    const int64_t C = ctx->cp_size > 1 ? ctx->cp_size : 1, c = C > 1 ? ctx->cp_rank : 0, Ll = L / C;
    LCX_FAIL_IF(c < 0 || c >= C || (C > 1 && (!ctx->grad || ctx->grad->size != C * D)) || L % (2 * C) != 0,
                LCX_ERR_INVALID,
                "train: CP rank %lld of %lld with %lld DP ranks needs a gradient group of %lld ranks (%s) and a "
                "sequence length that is a multiple of %lld (%lld)",
                (long long)c, (long long)C, (long long)D, (long long)(C * D),
                ctx->grad ? "given one of another size" : "none given", (long long)(2 * C), (long long)L);
    /* every rank of the job: the world when given (with TP the GRAD group is one TP rank's share of it) */
    lcx_comm *everyone = ctx->world && ctx->world->size > 1 ? ctx->world : ctx->grad;
    const int writer = !everyone || everyone->rank == 0; /* writes metrics, reports saves */
    /* a group: every rank of the world takes part in each save (lcx_train_save) */
    const int collective = (ctx->grad && ctx->grad->size > 1) || (ctx->world && ctx->world->size > 1);
    /* per_step: this rank's tokens; the step trains on D times as many */
    const int64_t per_micro = rows * L, per_step = per_micro * A, global_step = per_step * D;
    lcx_sampler_config sc;
    memset(&sc, 0, sizeof sc);
    sc.seq_len = (uint64_t)L;
    sc.seed = sg->seed;
    sc.min_doc_tokens = (uint64_t)(sg->min_doc_tokens > 0 ? sg->min_doc_tokens : 0);
    sc.long_doc_tokens = (uint64_t)(sg->long_doc_tokens > 0 ? sg->long_doc_tokens : 0);
    sc.long_doc_repeat = (uint32_t)(sg->long_doc_repeat > 1 && sg->long_doc_tokens > 0 ? sg->long_doc_repeat : 1);
    const int64_t sampling[3] = {(int64_t)sc.min_doc_tokens, (int64_t)sc.long_doc_tokens, sc.long_doc_repeat};
    sc.eos_id = -1;
    lcx_mix *smp = NULL;
    LCX_TRY(lcx_mix_init(data, &sc, &smp));
    lcx_status st = LCX_OK;
    uint32_t *sample = malloc((size_t)(L + 1) * 4);
    int32_t *ids = malloc((size_t)per_step * 4), *tgt = malloc((size_t)per_step * 4);
    /* CP: one whole row before its split, and the local positions */
    int32_t *row = C > 1 ? malloc((size_t)L * 2 * 4) : NULL;
    int32_t *pos = C > 1 ? malloc((size_t)(per_step / C) * 4) : NULL;
    /* document masking: a sample's document starts (indices into the sample = global positions), this rank's */
    int32_t *sdoc = sg->doc_mask ? malloc((size_t)L * 4) : NULL;
    int32_t *docs = sg->doc_mask ? malloc((size_t)(per_step / C) * 4) : NULL;
    lcx_batch *mb = calloc((size_t)A, sizeof *mb);
    FILE *mf = NULL;
    char *mpath = NULL;
    LCX_FAIL_GOTO(!sample || !ids || !tgt || !mb || (C > 1 && (!row || !pos)) || (sg->doc_mask && (!sdoc || !docs)),
                  LCX_ERR_OOM, done,
                  "train: out of memory for %lld tokens", (long long)per_step);
    if (state->stage == sg->index && state->step > 0) {
        LCX_FAIL_GOTO(state->seq_len && (state->seq_len != sg->seq_len || state->stage_steps != sg->steps ||
                                         state->seed != sg->seed),
                      LCX_ERR_INVALID, done,
                      "resume: %s was saved by stage %d with seq_len %lld, %lld steps, seed %llu; this run has seq_len "
                      "%lld, %lld steps, seed %llu (use the same settings)",
                      state->saved ? state->saved : "the checkpoint", sg->index + 1, (long long)state->seq_len,
                      (long long)state->stage_steps, (unsigned long long)state->seed, (long long)sg->seq_len,
                      (long long)sg->steps, (unsigned long long)sg->seed);
        LCX_FAIL_GOTO(!same_sampling(state, sampling), LCX_ERR_INVALID, done,
                      "resume: %s was saved by stage %d sampling documents of %lld+ tokens, those of %lld+ tokens %lld "
                      "times; this run has %lld+, %lld+ %lld times (use the same --min-doc-tokens, --long-doc-tokens, "
                      "--long-doc-repeat or recipe keys)", state->saved ? state->saved : "the checkpoint",
                      sg->index + 1,
                      (long long)state->min_doc_tokens, (long long)state->long_doc_tokens,
                      (long long)state->long_doc_repeat, (long long)sampling[0], (long long)sampling[1],
                      (long long)sampling[2]);
        LCX_FAIL_GOTO(state->doc_mask >= 0 && state->doc_mask != sg->doc_mask, LCX_ERR_INVALID, done,
                      "resume: %s was saved by stage %d with attention_mask %s; this run has %s (use the same "
                      "settings: %s)", state->saved ? state->saved : "the checkpoint", sg->index + 1,
                      state->doc_mask ? "document" : "causal", sg->doc_mask ? "document" : "causal",
                      sg->doc_mask ? "leave out --doc-mask" : "--doc-mask, or the recipe's attention_mask");
        LCX_FAIL_GOTO(!same_mix(state, smp, data->n), LCX_ERR_INVALID, done,
                      "resume: %s was saved by stage %d from a data mix of %d source%s; this run has %d (use the "
                      "same --data and --data-weights)", state->saved ? state->saved : "the checkpoint",
                      sg->index + 1, state->cursor.n, state->cursor.n == 1 ? "" : "s", data->n);
        if (state->lr.peak > 0 && !lcx_lr_same(&state->lr, &sg->lr)) {
            char was[160], now[160];
            lcx_lr_describe(&state->lr, was, sizeof was), lcx_lr_describe(&sg->lr, now, sizeof now);
            LCX_FAIL_GOTO(!ctx->override_lr, LCX_ERR_INVALID, done,
                          "resume: %s was saved by stage %d with %s; this run has %s (use the same lr settings, or "
                          "--override-lr to go on with this run's)", state->saved ? state->saved : "the checkpoint",
                          sg->index + 1, was, now);
            if (writer)
                lcx_report(ctx->report, LCX_REPORT_NOTE, "resume: --override-lr: from step %lld on %s (was %s)",
                           (long long)state->step + 1, now, was);
        }
        LCX_TRY_GOTO(lcx_mix_seek(smp, &state->cursor), done);
    } else {
        /* A new stage right after the run's previous one, on the same data and seed: the data stream goes on from
         * where that stage left it (each source's cursor, its sample count restarting), so no document comes
         * back before the data runs out. Otherwise (a first stage, other data or seed) from the start. */
        if (sg->index > 0 && state->stage == sg->index - 1 && state->stage_done && state->seed == sg->seed &&
            same_sampling(state, sampling) && same_mix(state, smp, data->n)) {
            lcx_mix_cursor c = state->cursor;
            for (int i = 0; i < c.n; i++) c.src[i].samples = 0;
            LCX_TRY_GOTO(lcx_mix_seek(smp, &c), done);
        }
        state->stage = sg->index;
        state->step = 0;
        state->stage_done = 0;
        state->cursor = lcx_mix_tell(smp);
    }
    state->seq_len = sg->seq_len, state->stage_steps = sg->steps, state->seed = sg->seed; /* this stage's, saved */
    state->min_doc_tokens = sampling[0], state->long_doc_tokens = sampling[1], state->long_doc_repeat = sampling[2];
    for (int i = 0; i < data->n; i++) state->mix_weight[i] = lcx_mix_weight(smp, i);
    state->lr = sg->lr;
    if (state->stage_done || state->step >= sg->steps) { /* nothing left: the stage finished before */
        state->stage_done = 1;
        goto done;
    }
    size_t mn = strlen(ctx->run_dir) + 16;
    mpath = malloc(mn);
    LCX_FAIL_GOTO(!mpath, LCX_ERR_OOM, done, "out of memory");
    snprintf(mpath, mn, "%s/metrics.jsonl", ctx->run_dir);
    if (writer) {
        mf = fopen(mpath, "a");
        if (!mf) st = lcx_fail(LCX_ERR_IO, "%s: cannot open for appending", mpath);
    }
    LCX_TRY_GOTO(agree(everyone, st, &sum->agreed), done);
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    ao.max_grad_norm = sg->clip_norm;
    ao.weight_decay = sg->weight_decay;
    if (sg->beta1 > 0) ao.beta1 = sg->beta1;
    if (sg->beta2 > 0) ao.beta2 = sg->beta2;
    if (sg->eps > 0) ao.eps = sg->eps;
    const int64_t V = lcx_model_config_of(m)->vocab_size;
    double t_start = now_s(), tps_sum = 0, tflops_sum = 0;
    const double devices = everyone ? everyone->size : 1; /* the job's ranks: one device each */
    int64_t n_tps = 0, first = state->step;
    while (state->step < sg->steps) {
        /* the step's D x A x rows sequences in sample order; this rank keeps the d-th A x rows of them */
        for (int64_t j = 0; j < D * A * rows; j++) {
            int src = 0;
            LCX_TRY_GOTO(lcx_mix_next(smp, sample, sdoc, &src), done);
            int64_t k = j - d * A * rows; /* a row of this rank's batch when 0 <= k < A * rows */
            const int mine = k >= 0 && k < A * rows;
            int32_t *ri = C > 1 ? row : mine ? ids + k * L : NULL;
            int32_t *rt = C > 1 ? row + L : mine ? tgt + k * L : NULL;
            for (int64_t t = 0; t < L; t++) { /* every rank checks every sample: all of them fail together */
                LCX_FAIL_GOTO(sample[t] >= (uint64_t)V || sample[t + 1] >= (uint64_t)V, LCX_ERR_INVALID, done,
                              "%s: token id %u is outside the model's vocabulary (%lld)", data->td[src]->prefix,
                              sample[t] >= (uint64_t)V ? sample[t] : sample[t + 1], (long long)V);
                if (!mine) continue;
                ri[t] = (int32_t)sample[t];
                rt[t] = (int32_t)sample[t + 1];
            }
            if (C > 1 && mine) /* targets formed in global order, then this rank's chunks */
                LCX_TRY_GOTO(lcx_cp_local_batch(L, (int)C, (int)c, ri, rt, NULL, ids + k * Ll, tgt + k * Ll,
                                                pos + k * Ll),
                             done);
            if (docs && mine && C > 1) /* permuted like every per-token tensor (global positions need no change) */
                LCX_TRY_GOTO(lcx_cp_scatter_rows(L, (int)C, (int)c, sdoc, docs + k * Ll, sizeof(int32_t)), done);
            else if (docs && mine)
                memcpy(docs + k * L, sdoc, (size_t)L * sizeof(int32_t));
        }
        for (int64_t k = 0; k < A; k++) {
            mb[k].n_seq = rows;
            mb[k].seq_len = Ll;
            mb[k].ids = ids + k * rows * Ll;
            mb[k].targets = tgt + k * rows * Ll;
            mb[k].positions = C > 1 ? pos + k * rows * Ll : NULL;
            mb[k].doc_start = docs ? docs + k * rows * Ll : NULL;
        }
        ao.lr = lcx_lr_at(&sg->lr, state->step);
        lcx_step_result r;
        double t0 = now_s();
        LCX_TRY_GOTO(lcx_model_train_step_group(m, mb, (int)A, &ao, ctx->grad, &r), done);
        double dt = now_s() - t0, tps = (double)global_step / (dt > 0 ? dt : 1e-9);
        state->step++;
        state->tokens += global_step;
        state->loss = r.loss;
        state->cursor = lcx_mix_tell(smp);
        tps_sum += tps;
        /* model FLOP/s per device: the whole job's tokens of the step over its devices */
        const double tflops = ctx->flops_per_token * (double)global_step / (dt > 0 ? dt : 1e-9) / devices / 1e12;
        tflops_sum += tflops;
        char mfu[48] = "", dev[48] = "";
        if (ctx->peak_flops > 0 && ctx->flops_per_token > 0)
            snprintf(mfu, sizeof mfu, ", \"mfu\": %.4g", tflops * 1e12 / ctx->peak_flops);
        const lcx_backend *be = lcx_model_backend(m);
        size_t alloc_hwm = 0, device_used = be->device_used(); /* device_used: 0 on the CPU */
        be->mem_stats(NULL, &alloc_hwm); /* the allocator's mark: what the plan predicts */
        if (device_used) snprintf(dev, sizeof dev, ", \"device_used\": %zu", device_used);
        n_tps++;
        if (r.peak_rss > sum->peak_rss) sum->peak_rss = r.peak_rss;
        sum->steps_run++;
        sum->last_loss = r.loss;
        char rec[768];
        snprintf(rec, sizeof rec,
                 "{\"stage\": %d, \"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"clip\": %.6g, "
                 "\"tokens\": %lld, \"tokens_per_s\": %.1f, \"peak_rss\": %llu, \"time\": %.4f, "
                 "\"comm_s\": %.4f, \"compute_s\": %.4f, \"ring_wait_s\": %.4f, \"tp_comm_s\": %.4f, "
                 "\"offload_wait_s\": %.4f, \"tflops\": %.4g%s, \"alloc_hwm\": %zu%s}",
                 sg->index + 1, (long long)state->step, r.loss, ao.lr, r.grad_norm, r.clip_scale,
                 (long long)state->tokens, tps, (unsigned long long)r.peak_rss, dt, r.comm_s,
                 dt > r.comm_s ? dt - r.comm_s : 0.0, r.ring_wait_s, r.tp_comm_s, r.offload_wait_s, tflops, mfu,
                 alloc_hwm, dev);
        if (mf) {
            fprintf(mf, "%s\n", rec);
            fflush(mf);
        }
        lcx_report_event(ctx->report, "step", "%s", rec);
        double mean_dt = (now_s() - t_start) / (double)(state->step - first);
        char eta[32], reta[48] = "";
        lcx_report_format_eta(mean_dt * (double)(sg->steps - state->step), eta, sizeof eta);
        if (ctx->run_tokens > state->tokens) { /* the rest of the run at this stage's speed (later stages are slower) */
            char r2[32];
            lcx_report_format_eta(mean_dt / (double)global_step * (double)(ctx->run_tokens - state->tokens), r2,
                                  sizeof r2);
            snprintf(reta, sizeof reta, " (run %s+)", r2);
        }
        char what[48], detail[96];
        snprintf(what, sizeof what, "stage %d/%d  step", sg->index + 1, sg->n_stages);
        snprintf(detail, sizeof detail, "loss %.4f  lr %.3g  RSS %.0f MiB%s", r.loss, ao.lr, r.peak_rss / 1048576.0, reta);
        lcx_report_progress(ctx->report, &(lcx_progress){.what = what, .done = state->step, .total = sg->steps,
                                                          .rate = tps, .unit = "tok/s",
                                                          .eta_s = mean_dt * (double)(sg->steps - state->step),
                                                          .detail = detail});
        lcx_report(ctx->report, LCX_REPORT_STEP,
                   "stage %d/%d step %lld/%lld loss %.6f lr %.4g grad_norm %.4f tokens/s %.1f ETA %s%s peak_rss %.1f MiB",
                   sg->index + 1, sg->n_stages, (long long)state->step, (long long)sg->steps, r.loss, ao.lr,
                   r.grad_norm, tps, eta, reta, r.peak_rss / 1048576.0);
        if (ctx->eval && ctx->eval_every > 0 && (state->step % ctx->eval_every == 0 || state->step == sg->steps)) {
            double vl = NAN, te = now_s();
            int64_t vt = 0;
            LCX_TRY_GOTO(ctx->eval(ctx->eval_user, m, &vl, &vt), done);
            snprintf(rec, sizeof rec,
                     "{\"stage\": %d, \"step\": %lld, \"val_loss\": %.9g, \"val_ppl\": %.9g, \"val_tokens\": %lld, "
                     "\"val_time\": %.4f}",
                     sg->index + 1, (long long)state->step, vl, exp(vl), (long long)vt, now_s() - te);
            if (mf) {
                fprintf(mf, "%s\n", rec);
                fflush(mf);
            }
            lcx_report_event(ctx->report, "validation", "%s", rec);
            lcx_report(ctx->report, LCX_REPORT_NOTE, "stage %d/%d step %lld: validation loss %.6f, perplexity %.4f "
                       "(%lld tokens, %.1f s)", sg->index + 1, sg->n_stages, (long long)state->step, vl, exp(vl),
                       (long long)vt, now_s() - te);
        }
        int64_t stop = lcx_train_interrupted();
        if (everyone && everyone->size > 1) /* a signal seen by any rank stops all of them after this step */
            LCX_TRY_GOTO(lcx_comm_all_reduce(everyone, NULL, &stop, &stop, 1, LCX_I64, LCX_COMM_MAX), done);
        if (state->step == sg->steps) state->stage_done = 1;
        /* every rank saves its own pieces when there is a group (docs/lcx-format.md "Who writes what"); the save
         * is an agreement point: every rank returns the lowest failing rank's cause */
        const int save_now = stop || lcx_train_save_due(state->step, sg->steps, sg->save_interval);
        if (save_now && (writer || collective)) {
            double ts = now_s();
            LCX_TRY_GOTO(agree(everyone, lcx_train_save(m, ctx, state, sg), &sum->agreed), done);
            if (writer) {
                lcx_report(ctx->report, LCX_REPORT_NOTE, "saved %s (%.2f s)", state->saved, now_s() - ts);
                json_t *ev = json_pack("{s:s, s:I}", "path", state->saved, "step", (json_int_t)state->step);
                char *evs = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
                if (evs) lcx_report_event(ctx->report, "saved", "%s", evs);
                free(evs);
                json_decref(ev);
            }
        }
        if (stop && !state->stage_done) {
            lcx_report_progress_end(ctx->report);
            st = lcx_fail(LCX_ERR_INTERRUPTED, "interrupted at stage %d step %lld; saved %s (continue with --resume)",
                         sg->index + 1, (long long)state->step, state->saved ? state->saved : "?");
            goto done;
        }
    }
    lcx_report_progress_end(ctx->report);
    sum->seconds = now_s() - t_start;
    sum->mean_tokens_per_s = n_tps ? tps_sum / (double)n_tps : 0;
    sum->mean_tflops = n_tps ? tflops_sum / (double)n_tps : 0;
done:
    if (mf && fclose(mf) != 0 && st == LCX_OK) st = lcx_fail(LCX_ERR_IO, "%s: write failed", mpath);
    free(mpath);
    free(sample);
    free(ids);
    free(tgt);
    free(row);
    free(pos);
    free(sdoc);
    free(docs);
    free(mb);
    lcx_mix_free(smp);
    return st;
}

lcx_status lcx_train_window_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    lcx_model *m = model;
    LCX_FAIL_IF(n < 2 || first < 1 || first >= n, LCX_ERR_INVALID, "score: bad window (n %lld, first %lld)",
                (long long)n, (long long)first);
    int32_t *tgt = malloc((size_t)n * sizeof *tgt);
    LCX_FAIL_IF(!tgt, LCX_ERR_OOM, "score: out of memory");
    for (int64_t j = 0; j < n; j++) tgt[j] = j + 1 >= first && j + 1 < n ? tokens[j + 1] : LCX_IGNORE_INDEX;
    lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = tokens, .targets = tgt};
    double sum = 0;
    int64_t count = 0;
    lcx_status st = lcx_model_forward(m, &b, NULL, &sum, &count);
    free(tgt);
    LCX_TRY(st);
    LCX_FAIL_IF(count != n - first, LCX_ERR_INVALID, "score: %lld targets counted, expected %lld", (long long)count,
                (long long)(n - first));
    for (int64_t i = 0; i < n - first; i++) nll[i] = sum / (double)count;
    return LCX_OK;
}

lcx_status lcx_train_window_score_cp(void *scorer, const int32_t *tokens, int64_t n, int64_t first, double *nll) {
    const lcx_train_cp_scorer *s = scorer;
    const int cp = s->cp_size > 1 ? s->cp_size : 1;
    if (cp == 1) return lcx_train_window_score(s->model, tokens, n, first, nll);
    LCX_FAIL_IF(n < 2 || first < 1 || first >= n, LCX_ERR_INVALID, "score: bad window (n %lld, first %lld)",
                (long long)n, (long long)first);
    const int64_t loc = lcx_cp_local_len(n, cp);
    int32_t *buf = malloc((size_t)(3 * loc) * sizeof *buf);
    LCX_FAIL_IF(!buf, LCX_ERR_OOM, "score: out of memory");
    int32_t *ids_l = buf, *tgt_l = ids_l + loc, *pos_l = tgt_l + loc;
    double sum = 0;
    int64_t count = 0;
    lcx_status st = lcx_cp_local_window(n, cp, s->cp_rank, tokens, ids_l, pos_l); /* the pad is never a target */
    for (int64_t k = 0; st == LCX_OK && k < loc; k++) {
        const int64_t p = pos_l[k]; /* position p predicts token p + 1: the scored ones, first .. n-1 */
        tgt_l[k] = p + 1 >= first && p + 1 < n ? tokens[p + 1] : LCX_IGNORE_INDEX;
    }
    lcx_batch b = {.n_seq = 1, .seq_len = loc, .ids = ids_l, .targets = tgt_l, .positions = pos_l, .rope_len = n};
    if (st == LCX_OK) st = lcx_model_forward(s->model, &b, NULL, &sum, &count); /* summed over CP */
    free(buf);
    LCX_TRY(st);
    LCX_FAIL_IF(count != n - first, LCX_ERR_INVALID, "score: %lld targets counted over CP, expected %lld",
                (long long)count, (long long)(n - first));
    for (int64_t i = 0; i < n - first; i++) nll[i] = sum / (double)count;
    return LCX_OK;
}
