/* extend: lcx_extend_run (src/pipeline/extend.h): the order of the parts, and the parts that are a few lines each
 * (checks before any work, import, where to start, the before/after evaluation, export). */
#include "src/pipeline/extend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/lcx.h"
#include "src/comm/mesh_check.h"
#include "src/convert/convert.h"
#include "src/core/fileio.h"
#include "src/pipeline/extend_eval.h"
#include "src/pipeline/extend_job.h"
#include "src/pipeline/run_common.h"

static const double DEFAULT_DEPTHS[] = {0, 0.25, 0.5, 0.75, 1};

void lcx_extend_options_default(lcx_extend_options *o) {
    memset(o, 0, sizeof *o);
    lcx_plan_opts_default(&o->plan);
    o->plan.weight_bytes = o->plan.act_bytes = 4; /* f32 weights and activations unless asked otherwise */
    o->recipe = "yarn-x2";
    o->passkey_trials = -1;
    o->depths = DEFAULT_DEPTHS;
    o->n_depths = 5;
    o->needles = 1;
    o->param_dtype = LCX_F32;
    o->act_dtype = LCX_F32;
    o->keep = 2;
}

/* RUN: --out, or CKPT's base name + '-' + the target as written. */
static char *run_dir_name(const lcx_extend_options *o) {
    if (o->out) return strdup(o->out);
    char to[32];
    if (o->to_text) snprintf(to, sizeof to, "%.31s", o->to_text);
    else snprintf(to, sizeof to, "%lld", (long long)o->plan.target);
    const char *ckpt = o->ckpt, *b = ckpt + strlen(ckpt);
    while (b > ckpt && b[-1] == '/') b--;
    const char *s = b;
    while (s > ckpt && s[-1] != '/') s--;
    size_t n = (size_t)(b - s) + strlen(to) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%.*s-%s", (int)(b - s), s, to);
    return out;
}

/* --ids read and checked against the vocabulary before anything is written. */
static lcx_status check_ids(const char *ids, int64_t vocab) {
    int32_t *v_ids = NULL;
    int64_t n_ids = 0;
    LCX_TRY(lcx_tool_read_ids(ids, &v_ids, &n_ids));
    int64_t bad = -1;
    for (int64_t k = 0; k < n_ids && bad < 0; k++)
        if (v_ids[k] >= vocab) bad = k;
    int32_t bad_id = bad >= 0 ? v_ids[bad] : 0;
    free(v_ids);
    LCX_FAIL_IF(n_ids < 2, LCX_ERR_INVALID, "%s: %lld token id(s): need at least 2", ids, (long long)n_ids);
    LCX_FAIL_IF(bad >= 0, LCX_ERR_INVALID, "%s: token %lld: id %d is not below the vocabulary size %lld", ids,
                (long long)bad, bad_id, (long long)vocab);
    return LCX_OK;
}

/* The TP x CP x DP mesh against the model and every stage's sequence length (lcx_comm_check_mesh; the
 * recipe parser and the plan already refuse explicit stage lengths that 2 x CP does not divide). */
static lcx_status check_mesh(const extend_job *job) {
    lcx_mesh mesh;
    LCX_TRY(lcx_mesh_init(&mesh, job->grp.tp, job->grp.cp, job->grp.dp_size));
    const lcx_model_config *c = &job->cfg;
    lcx_tp_dims dims = {.nh = c->num_attention_heads, .ng = c->num_key_value_heads, .d = c->head_dim,
                        .H = c->hidden_size, .F = c->intermediate_size, .V = c->vocab_size};
    for (int i = 0; i < job->plan->n_stages; i++) {
        const lcx_plan_stage *ps = &job->plan->stages[i];
        lcx_status st = lcx_comm_check_mesh(&mesh, &dims, ps->seq_len);
        if (st != LCX_OK)
            return job->grp.tp > 1 ? lcx_fail_context(st, "stage %d/%d (seq %lld, tp %d, cp %d): ", i + 1,
                                                  job->plan->n_stages, (long long)ps->seq_len, job->grp.tp, job->grp.cp)
                               : lcx_fail_context(st, "stage %d/%d (seq %lld, cp %d): ", i + 1, job->plan->n_stages,
                                                  (long long)ps->seq_len, job->grp.cp);
    }
    return LCX_OK;
}

/* --resume: where RUN/checkpoints/latest stands (job->resume_*), checked against the plan. */
static lcx_status read_resume_point(extend_job *job) {
    job->resume_stage = -1, job->resume_done = 0, job->resume_step = 0;
    if (!job->latest) return LCX_OK;
    const lcx_plan *p = job->plan;
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(job->latest, &ck));
    const json_t *ts = lcx_ckpt_training_state(ck);
    const json_t *ri = json_object_get(ts, "run");
    json_int_t tgt = json_integer_value(json_object_get(ri, "target"));
    json_int_t sidx = json_integer_value(json_object_get(ts, "stage")) - 1; /* stored 1-based */
    job->resume_done = json_is_true(json_object_get(ts, "stage_done"));
    job->resume_step = json_integer_value(json_object_get(ts, "step"));
    lcx_ckpt_free(ck);
    LCX_FAIL_IF(tgt != p->target, LCX_ERR_INVALID, "--resume: %s was saved by a run to %lld tokens, not --to %lld",
                job->latest, (long long)tgt, (long long)p->target);
    LCX_FAIL_IF(sidx < 0 || sidx >= p->n_stages, LCX_ERR_INVALID,
                "--resume: %s is at stage %lld, the plan has %d stages", job->latest, (long long)sidx + 1, p->n_stages);
    job->resume_stage = (int)sidx;
    return LCX_OK;
}

/* What RUN/import.lcx will take: 0 for an .lcx input or an import already there, and where the input's tensors
 * cannot be matched (a dry run over a config alone). */
static double import_bytes(const extend_job *job) {
    if (job->input->form == LCX_SOURCE_LCX) return 0;
    char *imp = lcx_path_join(job->out, "import.lcx");
    const int done = !imp || lcx_tool_is_lcx(imp);
    free(imp);
    if (done) return 0;
    if (job->input->matched) return (double)lcx_source_native_bytes(job->input);
    lcx_source *s = NULL; /* a dry run opened the config only */
    if (lcx_source_open(job->o->ckpt, 0, &s) != LCX_OK) {
        lcx_clear_error();
        return 0;
    }
    const double n = (double)lcx_source_native_bytes(s);
    lcx_source_close(s);
    return n;
}

/* The run directory's filesystem against the plan's disk bound (docs/plan.md "Disk"), and the import. On
 * --resume, the saves after its point, beside the checkpoints already there. */
static void check_disk(const extend_job *job) {
    if (!job->grp.lead) return;
    const lcx_plan *p = job->plan;
    const lcx_plan_disk *d = &p->disk;
    int64_t saves = d->saves;
    if (job->resume_stage >= 0) {
        saves = 0;
        for (int i = job->resume_stage; i < p->n_stages; i++)
            saves += lcx_train_saves(i == job->resume_stage ? job->resume_step : 0, p->stages[i].steps,
                                     p->stages[i].save_interval);
    }
    lcx_disk_need need = {.ckpt = d->checkpoint, .export_bytes = d->export_hf};
    need.held = lcx_ckpt_held_new(job->o->resume ? lcx_tool_run_checkpoints(job->out) : 0, saves,
                                  (int)p->opts.keep_checkpoints);
    need.import_bytes = import_bytes(job);
    lcx_tool_warn_disk(job->r, job->out, &need);
}

/* Everything checkable before any work: config, recipe, plan, data, run directory. *stop: the dry run is over. */
static lcx_status prepare(extend_job *job, int *stop) {
    const lcx_extend_options *o = job->o;
    *stop = 0;
    job->out = run_dir_name(o);
    LCX_FAIL_IF(!job->out, LCX_ERR_OOM, "out of memory");
    LCX_FAIL_IF(!lcx_is_dir(o->ckpt) && !lcx_is_file(o->ckpt), LCX_ERR_NOT_FOUND, "%s: no such checkpoint", o->ckpt);
    /* any form; a GGUF's config from its metadata (no import needed to plan); tensors checked unless a dry run */
    LCX_TRY(lcx_source_open(o->ckpt, o->dry_run ? LCX_SOURCE_CONFIG_ONLY : 0, &job->input));
    LCX_FAIL_IF(!job->input->has_config, LCX_ERR_NOT_FOUND, "%s: no model config (no config.json beside it)", o->ckpt);
    job->cfg = job->input->cfg;
    LCX_TRY(lcx_recipe_open(o->recipe, 2 * o->plan.cp, &job->recipe));
    LCX_TRY(extend_plan(job, 1));
    job->resume_stage = -1;
    if (o->dry_run) {
        if (o->resume) { /* where the run stands: refused as the run would be, and the disk bound from there */
            LCX_TRY(lcx_tool_run_dir_check(job->out, 1, &job->latest));
            LCX_TRY(read_resume_point(job));
        }
        check_disk(job);
        *stop = 1;
        return LCX_OK;
    }
    LCX_TRY(check_mesh(job));
    if (o->data) {
        LCX_TRY(lcx_tool_data_open(o->data, o->more_data, o->n_more_data, o->data_weights, job->td, &job->td_open));
    }
    LCX_FAIL_IF(o->ids && !lcx_is_file(o->ids), LCX_ERR_NOT_FOUND, "--ids %s: no such file, or not a regular one",
                o->ids);
    if (o->ids) LCX_TRY(check_ids(o->ids, job->cfg.vocab_size));
    if (o->eval_data) {
        LCX_TRY(lcx_tokdata_open(o->eval_data, &job->ed));
        job->ed_open = 1;
    }
    if (job->full_eval) {
        lcx_status st = lcx_tokenizer_open(job->input->tokenizer_path, &job->etok); /* a GGUF's own, an .lcx's */
        if (st != LCX_OK && job->pk_trials > 0) return lcx_fail_context(st, "--passkey needs the input's tokenizer: ");
        if (job->pk_trials < 0) job->pk_trials = job->etok ? 2 : 0;
    }
    if (o->haystack && job->pk_trials > 0) LCX_TRY(lcx_eval_read_haystack(o->haystack, &job->hay, &job->hay_len));
    LCX_TRY(extend_check_passkey_fit(job));
    LCX_TRY(lcx_tool_run_dir_check(job->out, o->resume, &job->latest));
    LCX_TRY(read_resume_point(job));
    check_disk(job);
    LCX_FAIL_IF(job->grp.lead && !lcx_is_dir(job->out) && mkdir(job->out, 0777) != 0, LCX_ERR_IO,
                "%s: cannot create the run directory", job->out);
    return LCX_OK;
}

/* The input as RUN/import.lcx (or itself when it is an .lcx). */
static lcx_status import(extend_job *job) {
    const lcx_extend_options *o = job->o;
    LCX_TRY(lcx_tool_source_lcx(o->ckpt, job->out, &job->src));
    LCX_TRY(lcx_tool_ckpt_tokenizer_files(job->src, &job->tok, &job->n_tok));
    if (o->ids && job->grp.lead) {
        LCX_TRY(lcx_tool_ids_open(o->ids, job->out, job->cfg.vocab_size, &job->td[0]));
        job->td_open = 1;
    } else if (o->ids) { /* the lead converted it */
        char *prefix = lcx_path_join(job->out, "ids");
        LCX_FAIL_IF(!prefix, LCX_ERR_OOM, "out of memory");
        lcx_status st = lcx_tokdata_open(prefix, &job->td[0]);
        free(prefix);
        LCX_TRY(st);
        job->td_open = 1;
    }
    const lcx_plan *p = job->plan;
    job->run_info = json_pack("{s:s, s:I, s:s, s:i, s:s}", "source", o->ckpt, "target", (json_int_t)p->target,
                              "recipe", p->recipe_name ? p->recipe_name : o->recipe, "stages", p->n_stages, "backend",
                              o->backend ? o->backend->name : "cpu");
    LCX_FAIL_IF(!job->run_info, LCX_ERR_OOM, "out of memory");
    if (job->td_open > 1)
        json_object_set_new(job->run_info, "data_mix", lcx_tool_mix_info(job->td, job->td_open, o->data_weights));
    return LCX_OK;
}

/* The first stage to run: 0, or where RUN/checkpoints/latest stands on resume. */
static int start_stage(const extend_job *job) {
    if (job->resume_stage < 0) return 0;
    lcx_report(job->r, LCX_REPORT_NOTE, "resuming from %s (stage %d%s)", job->latest, job->resume_stage + 1,
               job->resume_done ? " finished" : "");
    lcx_run_event(job->r, "resume", json_pack("{s:s, s:i, s:b}", "from", job->latest, "stage", job->resume_stage + 1,
                                             "stage_done", job->resume_done));
    return job->resume_stage + job->resume_done;
}

/* The held-out documents, the RUN/eval paths and the before/after evaluation's spec: the last stage's eval
 * lengths and stride, passkey at the same lengths. */
static lcx_status eval_setup(extend_job *job) {
    const lcx_extend_options *o = job->o;
    job->bos = lcx_eval_bos(job->etok, &job->cfg);
    if (job->ed_open)
        LCX_TRY(lcx_eval_load_docs(o->eval_data, job->bos, job->cfg.vocab_size, &job->docs, &job->n_docs,
                                   &job->doc_store));
    job->eval_dir = lcx_path_join(job->out, "eval");
    job->before_json = lcx_path_join(job->eval_dir, "before.json");
    job->after_json = lcx_path_join(job->eval_dir, "after.json");
    job->pk_before = lcx_path_join(job->eval_dir, "passkey-before.svg");
    job->pk_after = lcx_path_join(job->eval_dir, "passkey-after.svg");
    job->fres = calloc(LCX_RECIPE_MAX_EVAL, sizeof *job->fres);
    job->mpath = lcx_path_join(job->out, "metrics.jsonl");
    LCX_FAIL_IF(!job->eval_dir || !job->before_json || !job->after_json || !job->pk_before || !job->pk_after ||
                    !job->fres || !job->mpath,
                LCX_ERR_OOM, "out of memory");
    const lcx_plan_stage *last = &job->plan->stages[job->plan->n_stages - 1];
    job->es = (lcx_eval_spec){
        .data_name = o->eval_data, .docs = job->ed_open ? job->docs : NULL, .n_docs = job->n_docs,
        .ppl = {last->eval_lengths, last->n_eval, last->eval_stride, job->bos, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0},
        .pk = {last->eval_lengths, last->n_eval, o->depths, o->n_depths, job->pk_trials > 0 ? job->pk_trials : 0, 4,
               LCX_PASSKEY_GREEDY, 1, o->needles, job->hay, job->hay_len, 0, 0},
        .haystack_name = job->hay ? o->haystack : NULL,
        .quiet = o->quiet};
    return LCX_OK;
}

/* Whether the lead finds path (an evaluation of an earlier run kept in RUN/eval): its answer on every rank, so
 * that they all run it or all skip it. */
static lcx_status lead_has(const extend_job *job, const char *path, int *has) {
    int64_t v = job->grp.lead && lcx_is_file(path);
    if (job->grp.all) LCX_TRY(lcx_comm_broadcast(job->grp.all, NULL, &v, 1, LCX_I64, 0));
    *has = (int)v;
    return LCX_OK;
}

/* One side of the before/after evaluation: ckpt (shown as label) under cfg -> json (and the passkey heat map), on
 * every rank, in the training's layout: each TP x CP group a forward-only copy of the model with its slices of the
 * weights and its parts of every window (no rank holds the whole model or a whole window), the copies (one per DP
 * rank, over the gradient group) sharing out the windows and trials.
 * A failure with more than one rank ends the job (another may be waiting in a collective). */
static lcx_status eval_side(extend_job *job, const char *which, const char *label, const char *ckpt,
                            const lcx_model_config *cfg, const char *json, const char *pk_svg) {
    if (job->grp.lead) mkdir(job->eval_dir, 0777);
    job->es.label = label;
    job->es.series = which;
    lcx_status st = lcx_extend_eval_ckpt(ckpt, cfg, job->o->backend, job->grp.tpc, job->grp.cpc, job->grp.g, &job->es,
                                         job->etok, json, pk_svg, job->fres, job->r);
    if (st != LCX_OK && job->grp.all) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s evaluation: rank %d: %s: %s", which, job->grp.all->rank, lcx_status_name(st),
                 lcx_last_error());
        lcx_comm_abort(job->grp.all, job->all_r, 1, msg);
    }
    LCX_TRY(st);
    if (!job->grp.lead) return LCX_OK;
    lcx_run_event(job->r, "evaluated", json_pack("{s:s, s:s, s:s}", "which", which, "checkpoint", label, "json", json));
    return LCX_OK;
}

lcx_status extend_stage_passkey(extend_job *job, int i) {
    const lcx_plan_stage *ps = &job->plan->stages[i];
    if (!job->o->stage_passkey || job->pk_trials <= 0 || i == job->plan->n_stages - 1) return LCX_OK;
    char name[64], label[32];
    snprintf(name, sizeof name, "passkey-stage%d.json", i + 1);
    char *json = lcx_path_join(job->eval_dir, name);
    snprintf(name, sizeof name, "passkey-stage%d.svg", i + 1);
    char *svg = lcx_path_join(job->eval_dir, name);
    int kept = 0;
    lcx_status st = !json || !svg ? lcx_fail(LCX_ERR_OOM, "out of memory") : lead_has(job, json, &kept);
    if (st == LCX_OK && !kept) {
        lcx_report(job->r, LCX_REPORT_NOTE, "stage %d/%d: the passkey test of %s", i + 1, job->plan->n_stages,
                   job->state.saved);
        lcx_model_free(job->m); /* the stage's training model: the next stage builds its own */
        job->m = NULL;
        const lcx_eval_spec whole = job->es;
        job->es.docs = NULL, job->es.n_docs = 0; /* the passkey alone, at the stage's eval lengths */
        job->es.pk.lengths = ps->eval_lengths, job->es.pk.n_lengths = ps->n_eval;
        snprintf(label, sizeof label, "stage%d", i + 1);
        st = eval_side(job, label, job->state.saved, job->state.saved, &job->scfg, json, svg);
        job->es = whole;
    }
    free(json);
    free(svg);
    return st;
}

/* After: the result at the last stage's config; its perplexities are also the last stage's evaluation. */
static lcx_status eval_after(extend_job *job) {
    const lcx_plan *p = job->plan;
    const lcx_plan_stage *last = &p->stages[p->n_stages - 1];
    const char *fin = job->state.saved ? job->state.saved : job->load_from;
    char sj[64];
    snprintf(sj, sizeof sj, "stage%d.json", p->n_stages);
    char *stage_json = lcx_path_join(job->eval_dir, sj);
    int redo = !lcx_is_file(job->after_json) || (job->ed_open && stage_json && !lcx_is_file(stage_json));
    free(stage_json);
    int64_t v = redo;
    if (job->grp.all) LCX_TRY(lcx_comm_broadcast(job->grp.all, NULL, &v, 1, LCX_I64, 0)); /* the lead's files */
    if (v) {
        lcx_report(job->r, LCX_REPORT_NOTE, "evaluating the result %s", fin);
        lcx_model_free(job->m); /* the training model is done with: one model in memory at a time */
        job->m = NULL;
        lcx_config_free(&job->scfg);
        memset(&job->scfg, 0, sizeof job->scfg);
        LCX_TRY(extend_stage_config(&job->cfg, last, &job->scfg));
        LCX_TRY(eval_side(job, "after", fin, fin, &job->scfg, job->after_json, job->pk_after));
        if (job->ed_open && job->grp.lead)
            LCX_TRY(extend_record_stage_eval(job, p->n_stages, last->seq_len, &job->es.ppl, job->fres));
    }
    if (job->grp.lead && lcx_is_file(job->before_json))
        LCX_TRY(lcx_extend_eval_table(job->before_json, job->after_json, job->r));
    return LCX_OK;
}

/* The final export: RUN/hf (kept when there from an earlier run), RUN/model.gguf on request. */
static lcx_status export_result(extend_job *job) {
    const char *final = job->state.saved ? job->state.saved : job->load_from;
    LCX_FAIL_IF(!final, LCX_ERR_INVALID, "no checkpoint to export");
    lcx_status st = LCX_OK;
    char *hf = lcx_path_join(job->out, "hf");
    char *gg = job->o->gguf ? lcx_path_join(job->out, "model.gguf") : NULL;
    LCX_FAIL_GOTO(!hf || (job->o->gguf && !gg), LCX_ERR_OOM, done, "out of memory");
    lcx_convert_opts co;
    lcx_convert_opts_default(&co);
    co.threads = 1;
    json_int_t context = (json_int_t)job->plan->target;
    int skipped = lcx_is_dir(hf);
    if (skipped) {
        lcx_report(job->r, LCX_REPORT_NOTE, "%s exists: not exported again", hf);
    } else {
        LCX_TRY_GOTO(lcx_export_hf(final, hf, &co), done);
        lcx_report(job->r, LCX_REPORT_RESULT, "exported %s (Hugging Face, context %lld)", hf, (long long)context);
    }
    lcx_run_event(job->r, "export", json_pack("{s:s, s:s, s:I, s:b}", "format", "hf", "path", hf, "context", context,
                                             "skipped", skipped));
    if (gg) {
        skipped = lcx_is_file(gg);
        if (!skipped) {
            LCX_TRY_GOTO(lcx_export_gguf(final, gg, &co), done);
            lcx_report(job->r, LCX_REPORT_RESULT, "exported %s", gg);
        }
        lcx_run_event(job->r, "export", json_pack("{s:s, s:s, s:I, s:b}", "format", "gguf", "path", gg, "context",
                                                 context, "skipped", skipped));
    }
done:
    free(hf);
    free(gg);
    return st;
}

lcx_status extend_sync(extend_job *job, lcx_status st) {
    if (!job->grp.all || job->synced) return st;
    st = lcx_comm_agree(job->grp.all, st);
    if (st != LCX_OK) job->synced = 1;
    return st;
}

/* With data parallelism the ranks pass the same agreement points (extend_sync) on the way: the lead's import,
 * the before-evaluation, each stage (its save and evaluation), the end (after-evaluation, export). A rank that
 * fails between two points joins the next one with its failure (lcx_extend_run), so no rank waits for it. */
static lcx_status run(extend_job *job) {
    int stop = 0, first = 0;
    LCX_TRY(prepare(job, &stop));
    if (stop) return LCX_OK;
    if (!job->grp.lead) LCX_TRY(extend_sync(job, LCX_OK)); /* RUN, the import and the ids are the lead's */
    LCX_TRY(import(job));
    if (job->grp.lead) LCX_TRY(extend_sync(job, LCX_OK));
    first = start_stage(job);
    LCX_TRY(eval_setup(job));
    int before_kept = 1;
    if (job->full_eval) LCX_TRY(lead_has(job, job->before_json, &before_kept));
    if (!before_kept) {
        lcx_report(job->r, LCX_REPORT_NOTE, "evaluating the input %s (rope unchanged) before training", job->o->ckpt);
        LCX_TRY(eval_side(job, "before", job->o->ckpt, job->src, &job->cfg, job->before_json, job->pk_before));
    }
    LCX_TRY(extend_sync(job, LCX_OK));
    lcx_train_catch_signals();
    const lcx_plan *p = job->plan;
    job->load_from = job->latest ? job->latest : job->src;
    for (int i = first; i < p->n_stages; i++) {
        LCX_TRY(extend_stage_run(job, i, first));
        LCX_TRY(extend_sync(job, LCX_OK)); /* the lead saved and evaluated the stage */
        job->load_from = job->state.saved;
        if (!job->grp.lead) { /* the lead's checkpoint */
            free(job->peer_saved);
            job->peer_saved = NULL;
            LCX_TRY(lcx_train_latest(job->out, &job->peer_saved));
            job->load_from = job->peer_saved;
        }
        int64_t intr = lcx_train_interrupted();
        if (job->grp.all) LCX_TRY(lcx_comm_all_reduce(job->grp.all, NULL, &intr, &intr, 1, LCX_I64, LCX_COMM_MAX));
        if (intr && i + 1 < p->n_stages) /* Ctrl-C during the evaluation: stop here */
            return lcx_fail(LCX_ERR_INTERRUPTED, "interrupted after stage %d; saved %s (continue with --resume)", i + 1,
                            job->state.saved);
        if (job->latest && i == first) { /* later stages load the stage's own final checkpoint */
            free(job->latest);
            job->latest = NULL;
        }
    }
    if (job->full_eval) LCX_TRY(eval_after(job));
    if (job->grp.lead) LCX_TRY(export_result(job));
    return extend_sync(job, LCX_OK);
}

static void job_free(extend_job *job) {
    lcx_model_free(job->m);
    lcx_source_close(job->input); /* job->cfg is its */
    lcx_config_free(&job->scfg);
    lcx_recipe_free(job->recipe);
    lcx_plan_free(job->plan);
    for (int i = 0; i < job->td_open; i++) lcx_tokdata_close(&job->td[i]);
    if (job->ed_open) lcx_tokdata_close(&job->ed);
    lcx_train_state_free(&job->state);
    lcx_tool_strv_free(job->tok, job->n_tok);
    json_decref(job->run_info);
    free(job->docs);
    free(job->doc_store);
    free(job->hay);
    free(job->mpath);
    lcx_tokenizer_free(job->etok);
    free(job->fres);
    free(job->before_json);
    free(job->after_json);
    free(job->pk_before);
    free(job->pk_after);
    free(job->eval_dir);
    free(job->out);
    free(job->src);
    free(job->latest);
    free(job->peer_saved);
}

lcx_status lcx_extend_run(const lcx_extend_options *o, const lcx_reporter *r) {
    extend_job job;
    memset(&job, 0, sizeof job);
    job.o = o;
    lcx_status st = lcx_run_ranks_resolve(&o->ranks, "extend", &job.grp); /* fills grp also when it fails */
    job.all_r = r;
    job.lead_r = job.grp.lead && r ? *r : (lcx_reporter){0}; /* only the lead says anything */
    r = &job.lead_r;
    job.r = r;
    job.train_r = o->quiet ? lcx_tool_quiet_reporter(r) : (r ? *r : (lcx_reporter){0});
    job.pk_trials = o->passkey_trials;
    job.full_eval = o->eval_data || o->passkey_trials > 0;
    job.bos = -1;
    lcx_train_state_init(&job.state);
    /* the same checks on every rank, before anything is created */
    if (st != LCX_OK) goto done;
    LCX_FAIL_GOTO(!o->dry_run && o->plan.tp != job.grp.tp, LCX_ERR_INVALID, done,
                  "extend: the plan's tp %lld is not the TP group's size %d", (long long)o->plan.tp, job.grp.tp);
    LCX_FAIL_GOTO(!o->dry_run && o->plan.cp != job.grp.cp, LCX_ERR_INVALID, done,
                  "extend: the plan's cp %lld is not the CP group's size %d", (long long)o->plan.cp, job.grp.cp);
    LCX_FAIL_GOTO(job.grp.g && o->plan.dp != job.grp.dp_size, LCX_ERR_INVALID, done,
                  "extend: the plan's dp %lld is not the DP size %d", (long long)o->plan.dp, job.grp.dp_size);
    st = run(&job);
    lcx_train_release_signals(); /* a signal after the run (mpirun ending the job) must not claim a save */
done:
    if (st != LCX_OK) st = extend_sync(&job, st); /* the others learn it at their next agreement point */
    job_free(&job);
    return st;
}
