/* extend_stage: one training stage of an extension run and its evaluation (src/pipeline/extend_job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/core/cp_perm.h"
#include "src/core/fileio.h"
#include "src/pipeline/extend_job.h"
#include "src/pipeline/run_common.h"
#include "src/rope/rope.h"

/* stage config: the input config.json with the stage's rope written in (a fresh parse keeps both in sync) */
lcx_status extend_stage_config(const lcx_model_config *in, const lcx_plan_stage *ps, lcx_model_config *out) {
    json_t *j = json_deep_copy(in->json);
    LCX_FAIL_IF(!j, LCX_ERR_OOM, "out of memory");
    lcx_status st = lcx_rope_export(&ps->rope, in->head_dim, ps->max_pos, j, NULL, NULL);
    char *text = st == LCX_OK ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (st != LCX_OK) return st;
    LCX_FAIL_IF(!text, LCX_ERR_OOM, "out of memory");
    char label[64];
    snprintf(label, sizeof label, "stage %d config", ps->index);
    st = lcx_config_parse(label, text, strlen(text), out);
    free(text);
    if (st == LCX_OK) st = lcx_config_sync_json(out);
    return st;
}

/* RUN/eval/ppl.svg from RUN/eval/before.json and every RUN/eval/stageN.json present (a resumed run keeps the
 * earlier stages' lines). */
static lcx_status plot_stages(const char *eval_dir, int n_stages) {
    lcx_plot_series ser[64];
    double *xs[64], *ys[64];
    char *names[64];
    lcx_ppl_result *res[64];
    int ns = 0;
    lcx_status st = LCX_OK;
    char path[4096];
    for (int i = -1; i < n_stages && ns < 64; i++) { /* -1: before.json (lcextend eval --json format) */
        if (i < 0) snprintf(path, sizeof path, "%s/before.json", eval_dir);
        else snprintf(path, sizeof path, "%s/stage%d.json", eval_dir, i + 1);
        json_t *j = json_load_file(path, 0, NULL);
        if (!j) continue;
        const json_t *pj = i < 0 ? json_object_get(j, "perplexity") : j;
        if (!pj) {
            json_decref(j);
            continue;
        }
        int n = 0;
        char *name = NULL;
        lcx_ppl_result *r = NULL;
        st = lcx_ppl_from_json(pj, path, &r, &n, &name);
        json_decref(j);
        if (st != LCX_OK) break;
        xs[ns] = malloc(sizeof(double) * (size_t)(n + 1));
        ys[ns] = malloc(sizeof(double) * (size_t)(n + 1));
        for (int k = 0; k < n && xs[ns] && ys[ns]; k++) xs[ns][k] = (double)r[k].length, ys[ns][k] = r[k].ppl;
        ser[ns].name = name ? name : "";
        ser[ns].x = xs[ns];
        ser[ns].y = ys[ns];
        ser[ns].n = xs[ns] && ys[ns] ? n : 0;
        names[ns] = name;
        res[ns] = r;
        ns++;
    }
    char *svg = NULL;
    if (st == LCX_OK && ns > 0) st = lcx_svg_ppl_plot(ser, ns, "perplexity by context length after each stage", &svg);
    if (st == LCX_OK && svg) {
        snprintf(path, sizeof path, "%s/ppl.svg", eval_dir);
        st = lcx_svg_write(path, svg);
    }
    free(svg);
    for (int i = 0; i < ns; i++) free(xs[i]), free(ys[i]), free(names[i]), free(res[i]);
    return st;
}

lcx_status extend_record_stage_eval(extend_job *job, int stage, int64_t seq_len, const lcx_ppl_config *pc,
                                    const lcx_ppl_result *res) {
    FILE *mf = fopen(job->mpath, "a");
    LCX_FAIL_IF(!mf, LCX_ERR_IO, "%s: cannot open for appending", job->mpath);
    for (int e = 0; e < pc->n_lengths; e++) {
        lcx_report(job->r, LCX_REPORT_RESULT,
                   "  eval length %lld: loss %.4f, perplexity %.3f (%lld tokens, %lld windows)",
                   (long long)pc->lengths[e], res[e].mean_nll, res[e].ppl, (long long)res[e].tokens,
                   (long long)res[e].windows);
        lcx_run_event(job->r, "eval",
                      json_pack("{s:i, s:I, s:o, s:o, s:I, s:I}", "stage", stage, "eval_len",
                                (json_int_t)pc->lengths[e], "loss", lcx_run_json_number(res[e].mean_nll), "ppl",
                                lcx_run_json_number(res[e].ppl), "tokens", (json_int_t)res[e].tokens, "windows",
                                (json_int_t)res[e].windows));
        fprintf(mf, "{\"stage\": %d, \"eval_len\": %lld, \"loss\": %.9g, \"ppl\": %.9g, \"tokens\": %lld}\n", stage,
                (long long)pc->lengths[e], res[e].mean_nll, res[e].ppl, (long long)res[e].tokens);
    }
    LCX_FAIL_IF(fclose(mf) != 0, LCX_ERR_IO, "%s: write failed", job->mpath);
    char series[64], jp[64];
    snprintf(series, sizeof series, "stage %d (%lld)", stage, (long long)seq_len);
    snprintf(jp, sizeof jp, "stage%d.json", stage);
    mkdir(job->eval_dir, 0777);
    json_t *ej = lcx_ppl_to_json(pc, res, series);
    char *jpath = lcx_path_join(job->eval_dir, jp);
    lcx_status st = ej && jpath ? lcx_eval_json_write(jpath, ej) : lcx_fail(LCX_ERR_OOM, "out of memory");
    json_decref(ej);
    free(jpath);
    LCX_TRY(st);
    return plot_stages(job->eval_dir, job->plan->n_stages);
}

/* The stage's model: weights from the previous stage (or the input), plus optimizer and position when the run
 * resumes inside this very stage. */
static lcx_status stage_model(extend_job *job, int i, int first) {
    const lcx_plan_stage *ps = &job->plan->stages[i];
    lcx_model_opts mo;
    memset(&mo, 0, sizeof mo);
    mo.param_dtype = job->o->param_dtype;
    mo.act_dtype = job->o->act_dtype;
    mo.max_tokens = ps->micro_seqs * ps->seq_len / job->grp.cp; /* the rank's local tokens */
    for (int e = 0; e < ps->n_eval; e++) { /* the stage evaluation's windows (padded, split over CP) */
        int64_t w = lcx_cp_local_len(ps->eval_lengths[e], job->grp.cp);
        if (w > mo.max_tokens && job->o->eval_data) mo.max_tokens = w;
    }
    mo.cp_comm = job->grp.cpc;
    mo.tp_comm = job->grp.tpc;
    mo.training = 1;
    mo.policy = LCX_ACT_KEEP;
    mo.layer_policy = ps->activation;
    mo.loss_chunk = job->plan->opts.loss_chunk; /* the plan's memory figures assume its chunk and tile */
    mo.mlp_chunk = job->plan->opts.mlp_tile;
    mo.distribute_saved = job->plan->distributes; /* the plan's (chosen, or --distribute-saved-activations) */
    mo.sequence_parallel = job->plan->seq_parallel; /* the plan's (chosen, or --sequence-parallel) */
    mo.zero_comm = job->plan->zero1 ? job->grp.g : NULL; /* ZeRO-1 (the plan's): this rank's rows of the moments */
    mo.backend = job->o->backend;
    LCX_TRY(lcx_model_init(&job->m, &job->scfg, &mo));
    lcx_train_state ls;
    lcx_train_state_init(&ls);
    lcx_status st = lcx_train_load(job->load_from, job->m, &ls);
    if (st == LCX_OK && job->latest && ls.stage == i && !ls.stage_done) {
        lcx_train_state_free(&job->state);
        job->state = ls;
    } else {
        int64_t tokens = job->latest || i > first ? ls.tokens : 0;
        lcx_train_state_free(&job->state);
        if (st == LCX_OK && i > 0 && ls.stage == i - 1 && ls.stage_done) {
            job->state = ls; /* the previous stage's end: its data cursor goes on (lcx_train_stage_run) */
        } else {
            lcx_train_state_free(&ls);
            lcx_train_state_init(&job->state);
            job->state.stage = i;
        }
        job->state.tokens = tokens;
    }
    return st;
}

/* Ends every rank's job over a failure this rank may not share ("stage N<part>: rank R: status: error"). */
__attribute__((noreturn)) static void abort_job(extend_job *job, int i, const char *part, lcx_status st) {
    char msg[600];
    snprintf(msg, sizeof msg, "stage %d%s: rank %d: %s: %s", i + 1, part, job->grp.all->rank, lcx_status_name(st),
             lcx_last_error());
    lcx_comm_abort(job->grp.all, job->all_r, 1, msg);
}

/* The stage's own evaluation at its eval lengths (the last stage's is part of the after-evaluation): the
 * perplexities on every rank: each DP rank's CP ranks (every window over the ring; one rank without CP) and
 * every TP rank of those (the training model's forward over TP) score the windows of their shard (DP rank d of
 * D: the windows whose index is d modulo D), the shards' sums are added up over the gradient group, and the
 * lead records them. */
static lcx_status stage_eval(extend_job *job, int i) {
    const lcx_plan_stage *ps = &job->plan->stages[i];
    int64_t lens[LCX_RECIPE_MAX_EVAL];
    lcx_ppl_result res[LCX_RECIPE_MAX_EVAL];
    int nl = 0;
    for (int e = 0; e < ps->n_eval; e++) lens[nl++] = ps->eval_lengths[e];
    lcx_ppl_config pc;
    memset(&pc, 0, sizeof pc);
    pc.lengths = lens;
    pc.n_lengths = nl;
    pc.stride = ps->eval_stride;
    pc.bos_id = job->bos;
    pc.short_docs = LCX_PPL_SHORT_SKIP;
    lcx_status st = lcx_tool_ppl(&pc, job->docs, job->n_docs, job->m, job->grp.cp_rank, job->grp.cp, job->grp.g,
                                 job->grp.dp_rank, job->grp.dp_size, res);
    if ((job->grp.cpc || job->grp.tpc || job->grp.dp_size > 1) && st != LCX_OK) {
        /* the other ranks may be waiting in this window's ring or collectives: the job ends here */
        abort_job(job, i, " evaluation", st);
    }
    LCX_TRY(st);
    if (!job->grp.lead) return LCX_OK;
    return extend_record_stage_eval(job, i + 1, ps->seq_len, &pc, res);
}

lcx_status extend_stage_run(extend_job *job, int i, int first) {
    const lcx_plan *p = job->plan;
    const lcx_plan_stage *ps = &p->stages[i];
    lcx_config_free(&job->scfg);
    memset(&job->scfg, 0, sizeof job->scfg);
    LCX_TRY(extend_stage_config(&job->cfg, ps, &job->scfg));
    lcx_model_free(job->m);
    job->m = NULL;
    LCX_TRY(stage_model(job, i, first));
    char cp_text[192];
    lcx_tool_layout_text(job->m, &job->grp, ps->seq_len, cp_text, sizeof cp_text);
    lcx_report(job->r, LCX_REPORT_NOTE,
               "stage %d/%d: seq %lld%s, rope %s (max_position_embeddings %lld), %lld steps x %lld tokens", i + 1,
               p->n_stages, (long long)ps->seq_len, cp_text, lcx_rope_method_name(ps->method),
               (long long)ps->max_pos, (long long)ps->steps, (long long)ps->tokens_per_step);
    lcx_run_event(job->r, "stage_start",
                 json_pack("{s:i, s:i, s:I, s:s, s:I, s:I, s:I}", "stage", i + 1, "stages", p->n_stages, "seq_len",
                           (json_int_t)ps->seq_len, "method", lcx_rope_method_name(ps->method),
                           "max_position_embeddings", (json_int_t)ps->max_pos, "steps", (json_int_t)ps->steps,
                           "tokens_per_step", (json_int_t)ps->tokens_per_step));
    lcx_train_stage sg;
    memset(&sg, 0, sizeof sg);
    sg.index = i;
    sg.n_stages = p->n_stages;
    sg.seq_len = ps->seq_len;
    sg.steps = ps->steps;
    sg.micro_seqs = ps->micro_seqs;
    sg.grad_accum = ps->grad_accum;
    sg.lr = ps->lr;
    sg.clip_norm = ps->clip_norm;
    sg.weight_decay = ps->weight_decay;
    sg.seed = ps->seed; /* the same as the stage before: the data stream goes on (lcx_train_stage_run) */
    sg.save_interval = ps->save_interval;
    sg.doc_mask = ps->doc_mask;
    sg.min_doc_tokens = ps->min_doc_tokens;
    sg.long_doc_tokens = ps->long_doc_tokens;
    sg.long_doc_repeat = ps->long_doc_repeat;
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = job->out;
    ctx.model_config = job->scfg.json;
    ctx.tokenizer_paths = (const char *const *)job->tok;
    ctx.n_tokenizer = job->n_tok;
    ctx.keep_last = job->o->keep;
    ctx.report = &job->train_r;
    ctx.run_info = job->run_info;
    ctx.run_tokens = (int64_t)p->total_tokens;
    ctx.grad = job->grp.g;
    ctx.dp_rank = job->grp.dp_rank;
    ctx.dp_size = job->grp.dp_size;
    ctx.cp_rank = job->grp.cp_rank;
    ctx.cp_size = job->grp.cp;
    ctx.world = job->grp.all;
    ctx.tp_size = job->grp.tp;
    ctx.override_lr = job->o->override_lr;
    ctx.flops_per_token = lcx_config_flops_per_token(&job->scfg, ps->seq_len);
    ctx.peak_flops = job->o->peak_tflops * 1e12;
    /* mid-stage validation at the stage's length: every rank, as the stage evaluation (stage_eval) */
    lcx_tool_validation val = {.docs = job->docs, .n_docs = job->n_docs, .seq_len = ps->seq_len, .bos = job->bos,
                               .cp_rank = job->grp.cp_rank, .cp_size = job->grp.cp,
                               .grad = job->grp.g, .dp_rank = job->grp.dp_rank, .dp_size = job->grp.dp_size};
    if (job->ed_open && job->o->eval_every > 0) {
        ctx.eval = lcx_tool_validate;
        ctx.eval_user = &val;
        ctx.eval_every = job->o->eval_every;
    }
    lcx_train_summary sum = {0}; /* read below also when the stage failed before filling it */
    const lcx_mix_data mix = lcx_tool_mix(job->td, job->td_open, job->td_open > 1 ? job->o->data_weights : NULL);
    lcx_status st = lcx_train_stage_run(job->m, &mix, &sg, &ctx, &job->state, &sum);
    if (job->grp.all && st != LCX_OK && st != LCX_ERR_INTERRUPTED && !sum.agreed) {
        /* a failure some ranks may not share (one not returned by all of them together, sum.agreed): the others
         * could be waiting in the next step's collectives, so the job ends here */
        abort_job(job, i, "", st);
    }
    LCX_TRY(st);
    char mfu_text[48];
    lcx_report(job->r, LCX_REPORT_NOTE,
               "stage %d/%d done: loss %.6f, %.1f tokens/s (%.3g model TFLOP/s per device%s), peak RSS %.1f MiB, "
               "saved %s",
               i + 1, p->n_stages, job->state.loss, sum.mean_tokens_per_s, sum.mean_tflops,
               lcx_tool_mfu_text(sum.mean_tflops, job->o->peak_tflops, mfu_text, sizeof mfu_text),
               sum.peak_rss / 1048576.0,
               job->state.saved);
    lcx_run_event(job->r, "stage_done",
                  json_pack("{s:i, s:i, s:o, s:o, s:I, s:s?}", "stage", i + 1, "stages", p->n_stages, "loss",
                            lcx_run_json_number(job->state.loss), "tokens_per_s",
                            lcx_run_json_number(sum.mean_tokens_per_s), "peak_rss", (json_int_t)sum.peak_rss, "saved",
                            job->state.saved));
    /* every rank: the DP ranks' shards, the CP ranks' ring, the TP ranks' slices */
    if (job->ed_open && !(job->full_eval && i == p->n_stages - 1)) LCX_TRY(stage_eval(job, i));
    return extend_stage_passkey(job, i);
}
