/* train_run: `lcextend train` as one call (src/pipeline/train_run.h): the model (latest checkpoint of the run, a
 * checkpoint, or random init), data, tokenizer files to carry, one training stage, the optional export. */
#include "src/pipeline/train_run.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/hf_config.h"
#include "formats/tokdata.h"
#include "src/checkpoint/source.h"
#include "src/eval/eval_run.h"
#include "src/comm/comm.h"
#include "src/comm/mesh_check.h"
#include "src/convert/convert.h"
#include "src/core/fileio.h"
#include "src/core/outpath.h"
#include "src/model/model.h"
#include "src/pipeline/run_common.h"
#include "src/plan/plan.h"
#include "src/pipeline/run_report.h"
#include "src/train/train.h"

void lcx_train_run_options_default(lcx_train_run_options *o) {
    memset(o, 0, sizeof *o);
    o->batch = 1;
    o->accum = 1;
    o->keep = 2;
    o->seed = 1234;
    o->lr = 3e-4;
    o->clip = 1.0;
    o->weight_decay = 0.01;
    o->init_std = 0.02;
    o->schedule = LCX_LR_COSINE;
    o->policy = LCX_ACT_KEEP;
    o->param_dtype = LCX_F32;
    o->act_dtype = LCX_F32;
}

/* --policy auto: the planner's per-layer split (lcx_plan_step_policies) of the model in `from` (a checkpoint, or
 * o->config) for this run's local tokens, layout, dtypes and budgets; *out [layers] (heap). The estimate counts the
 * arena of the backend the run uses. */
static lcx_status auto_policies(const lcx_train_run_options *o, const char *from, int tp, int cp, int grad_ranks,
                                const lcx_reporter *r, lcx_act_policy **out) {
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_source *in = NULL;
    lcx_param_table t;
    memset(&t, 0, sizeof t);
    lcx_act_policy *pol = NULL;
    char *runs = NULL;
    lcx_status st = from ? lcx_source_open(from, LCX_SOURCE_CONFIG_ONLY, &in) : lcx_config_load(o->config, &cfg);
    if (st == LCX_OK && in && !in->has_config)
        st = lcx_fail(LCX_ERR_INVALID, "%s: no model config: training needs one", in->path);
    const lcx_model_config *c = in ? &in->cfg : &cfg;
    if (st == LCX_OK) st = lcx_param_table_init(&t, c);
    if (st != LCX_OK) goto done;
    lcx_mem_model pm = lcx_mem_model_of(c, t.total_numel);
    pm.tp = tp, pm.cp = cp, pm.weight_bytes = o->param_dtype == LCX_BF16 ? 2 : 4;
    pm.act_bytes = (int)lcx_act_size(o->act_dtype), pm.mlp_tile = o->mlp_tile, pm.distribute = o->distribute_saved;
    pm.sequence_parallel = o->sequence_parallel;
    pm.grad_ranks = grad_ranks, pm.zero_shards = o->ranks.zero1 ? grad_ranks : 1;
    pm.loss_chunk = 256; /* the model's default */
    lcx_mem_set_op_ws(&pm, !o->backend || o->backend == lcx_backend_cpu() ? LCX_MEM_CPU : LCX_MEM_CUDA);
    lcx_plan_opts po;
    lcx_plan_opts_default(&po);
    po.mem_budget = o->mem_budget, po.host_budget = o->host_budget;
    pol = malloc((size_t)pm.n_layers * sizeof *pol);
    LCX_FAIL_GOTO(!pol, LCX_ERR_OOM, done, "out of memory");
    lcx_mem_estimate e;
    st = lcx_plan_step_policies(&pm, &po, o->batch * o->seq_len, pol, &e);
    if (st != LCX_OK) {
        lcx_fail_context(st, "--policy auto: ");
        goto done;
    }
    const size_t len = (size_t)lcx_act_layers_str(pol, pm.n_layers, NULL, 0) + 1;
    runs = malloc(len);
    LCX_FAIL_GOTO(!runs, LCX_ERR_OOM, done, "out of memory");
    lcx_act_layers_str(pol, pm.n_layers, runs, len);
    char host[64] = "";
    if (e.host > 0) snprintf(host, sizeof host, " + %.1f MiB of offload host pool", e.host / 1048576.0);
    lcx_report(r, LCX_REPORT_NOTE, "policy (auto): layers%s; predicted %.1f MiB per device%s (budget %.1f MiB)", runs,
               e.total / 1048576.0, host, o->mem_budget / 1048576.0);
    *out = pol;
    pol = NULL;
done:
    free(runs);
    free(pol);
    lcx_param_table_free(&t);
    lcx_source_close(in);
    lcx_config_free(&cfg);
    return st;
}

/* The TP x CP x DP mesh against the model and the sequence length (lcx_comm_check_mesh). */
static lcx_status check_mesh(const lcx_model_config *cfg, const lcx_train_run_options *o, int tp, int cp, int dp) {
    lcx_mesh mesh;
    LCX_TRY(lcx_mesh_init(&mesh, tp, cp, dp));
    lcx_tp_dims dims = {.nh = cfg->num_attention_heads, .ng = cfg->num_key_value_heads, .d = cfg->head_dim,
                        .H = cfg->hidden_size, .F = cfg->intermediate_size, .V = cfg->vocab_size};
    return lcx_comm_check_mesh(&mesh, &dims, o->seq_len);
}

lcx_status lcx_train_run(const lcx_train_run_options *o, const lcx_reporter *r) {
    lcx_status st = LCX_OK;
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_model *m = NULL;
    lcx_tokdata td[LCX_MIX_MAX]; /* the data mix's sources (one: --data or --ids) */
    memset(td, 0, sizeof td);
    int td_open = 0;             /* how many of them are open */
    char *src = NULL, *latest = NULL, **tok = NULL;
    const char **tok_all = NULL;
    int n_tok = 0;
    lcx_train_state state;
    lcx_train_state_init(&state);
    lcx_act_policy *layer_pol = NULL; /* --policy auto: each layer's */
    const char *be_name = o->backend ? o->backend->name : "cpu";
    json_t *run_info = NULL; /* the training state's "run": what this run is */
    lcx_ppl_doc *val_docs = NULL; /* the held-out documents of --eval-data (point into val_store) */
    int32_t *val_store = NULL;
    int64_t n_val_docs = 0;
    /* Data parallelism: rank 0 of the job (the lead) checks, creates RUN, imports and converts first while the
     * others wait at the first agreement; then every rank builds its replica (second agreement) and trains; the
     * lead reports and exports (third). A rank that fails before an agreement point still joins the rest of them
     * (at done), so no rank waits for it. The job (all): the world when given, else the gradient group (with TP
     * the gradient group is one TP coordinate's share of the world). */
    lcx_run_groups grp; /* filled also when the ranks do not check out: done uses all */
    const lcx_status ranks_st = lcx_run_ranks_resolve(&o->ranks, "train", &grp);
    lcx_comm *const g = grp.g, *const all = grp.all, *const tpc = grp.tpc, *const cpc = grp.cpc;
    const int lead = grp.lead, tp = grp.tp, cp = grp.cp, cp_rank = grp.cp_rank;
    int agreed = 0; /* agreement points passed (of 3) */
    /* the same checks on every rank, before anything is created (the mesh, the seq_len's split over CP) */
    LCX_TRY_GOTO(ranks_st, done);
    lcx_cp_split split;
    LCX_TRY_GOTO(lcx_cp_split_of(o->seq_len, cp, 0, &split), done);
    if (all && !lead) {
        agreed++;
        LCX_TRY_GOTO(lcx_comm_agree(all, LCX_OK), done);
    }
    const lcx_reporter *all_r = r; /* every rank's: a fatal message of any rank */
    lcx_reporter lead_r = lead && r ? *r : (lcx_reporter){0}; /* only the lead says anything else */
    r = &lead_r;

    /* checks before any work */
    LCX_TRY_GOTO(lcx_tool_run_dir_check(o->out, o->resume, &latest), done);
    if (lead && latest) { /* what a killed run left (a save's or a prune's temporary, its `latest` one) goes now:
                           * the resume may have nothing left to save, and only a save swept them */
        char *ckpts = lcx_path_join(o->out, "checkpoints");
        st = ckpts ? lcx_ckpt_sweep(ckpts) : lcx_fail(LCX_ERR_OOM, "out of memory");
        free(ckpts);
        if (st != LCX_OK) goto done;
    }
    if (lead && o->export_hf) LCX_TRY_GOTO(lcx_out_absent(o->export_hf), done); /* not after the training */
    if (o->data) {
        LCX_TRY_GOTO(lcx_tool_data_open(o->data, o->more_data, o->n_more_data, o->data_weights, td, &td_open), done);
    }
    if (o->eval_data) { /* there and readable before anything is created; its documents are read below */
        lcx_tokdata ed;
        LCX_TRY_GOTO(lcx_tokdata_open(o->eval_data, &ed), done);
        lcx_tokdata_close(&ed);
    }
    LCX_FAIL_GOTO(o->ids && !lcx_is_file(o->ids), LCX_ERR_NOT_FOUND, done,
                  "--ids %s: no such file, or not a regular one", o->ids);
    LCX_FAIL_GOTO(o->config && !lcx_is_file(o->config), LCX_ERR_NOT_FOUND, done,
                  "--config %s: no such file, or not a regular one", o->config);
    LCX_FAIL_GOTO(o->ckpt && !lcx_is_dir(o->ckpt) && !lcx_is_file(o->ckpt), LCX_ERR_NOT_FOUND, done,
                  "%s: no such checkpoint", o->ckpt);
    if (lead && o->ckpt && !latest) { /* any form through the loader, tensors checked before RUN exists */
        lcx_source *in = NULL;
        st = lcx_source_open(o->ckpt, 0, &in);
        if (st == LCX_OK) st = lcx_source_need_model(in, "training");
        lcx_source_close(in);
        if (st != LCX_OK) goto done;
    }
    if (tpc) { /* the heads, the MLP and the vocabulary against TP, before anything is created */
        if (latest || o->ckpt) {
            lcx_source *in = NULL;
            st = lcx_source_open(latest ? latest : o->ckpt, LCX_SOURCE_CONFIG_ONLY, &in);
            if (st == LCX_OK && !in->has_config)
                st = lcx_fail(LCX_ERR_INVALID, "%s: no model config: training needs one", in->path);
            if (st == LCX_OK) st = check_mesh(&in->cfg, o, tp, cp, grp.dp_size);
            lcx_source_close(in);
        } else {
            lcx_model_config c0;
            memset(&c0, 0, sizeof c0);
            st = lcx_config_load(o->config, &c0);
            if (st == LCX_OK) st = check_mesh(&c0, o, tp, cp, grp.dp_size);
            lcx_config_free(&c0);
        }
        if (st != LCX_OK) {
            lcx_fail_context(st, "--tp %d: ", tp);
            goto done;
        }
    }
    /* --policy auto: every rank plans the same split, before anything is created */
    if (o->policy == LCX_ACT_AUTO)
        LCX_TRY_GOTO(auto_policies(o, latest ? latest : o->ckpt, tp, cp, g ? g->size : 1, r, &layer_pol), done);
    if (lead && !lcx_is_dir(o->out) && mkdir(o->out, 0777) != 0)
        LCX_FAIL_GOTO(1, LCX_ERR_IO, done, "%s: cannot create the run directory", o->out);

    /* the model: the run's latest checkpoint, a checkpoint, or a config with random weights */
    const char *load_from = NULL;
    if (latest) {
        load_from = latest;
    } else if (o->ckpt) {
        LCX_TRY_GOTO(lcx_tool_source_lcx(o->ckpt, o->out, &src), done);
        load_from = src;
    }
    lcx_model_opts mo;
    memset(&mo, 0, sizeof mo);
    mo.param_dtype = o->param_dtype;
    mo.act_dtype = o->act_dtype;
    mo.max_tokens = o->batch * o->seq_len / cp; /* the rank's local tokens */
    mo.cp_comm = cpc;
    mo.tp_comm = tpc;
    mo.zero_comm = o->ranks.zero1 ? g : NULL;
    mo.training = 1;
    mo.policy = o->policy;
    mo.layer_policy = layer_pol; /* auto: the planner's split */
    mo.mlp_chunk = o->mlp_tile;
    mo.distribute_saved = o->distribute_saved;
    mo.sequence_parallel = o->sequence_parallel;
    mo.backend = o->backend;
    if (load_from) {
        LCX_TRY_GOTO(lcx_train_ckpt_config(load_from, &cfg), done);
        LCX_TRY_GOTO(check_mesh(&cfg, o, tp, cp, grp.dp_size), done);
        LCX_TRY_GOTO(lcx_tool_model_from_lcx(load_from, &cfg, &mo, latest ? &state : NULL, &m), done);
        LCX_TRY_GOTO(lcx_tool_ckpt_tokenizer_files(load_from, &tok, &n_tok), done);
    } else {
        LCX_TRY_GOTO(lcx_config_load(o->config, &cfg), done);
        LCX_TRY_GOTO(check_mesh(&cfg, o, tp, cp, grp.dp_size), done);
        LCX_TRY_GOTO(lcx_model_init(&m, &cfg, &mo), done);
        LCX_TRY_GOTO(lcx_model_init_random(m, (uint64_t)o->seed, o->init_std), done);
    }
    LCX_TRY_GOTO(lcx_config_sync_json(&cfg), done);
    if (o->ids) {
        if (lead) {
            LCX_TRY_GOTO(lcx_tool_ids_open(o->ids, o->out, cfg.vocab_size, &td[0]), done);
        } else { /* the lead converted it */
            char *prefix = lcx_path_join(o->out, "ids");
            LCX_FAIL_GOTO(!prefix, LCX_ERR_OOM, done, "out of memory");
            st = lcx_tokdata_open(prefix, &td[0]);
            free(prefix);
            if (st != LCX_OK) goto done;
        }
        td_open = 1;
    }
    if (all && lead) { /* RUN, the import and the ids are there: the others may read them */
        agreed++;
        LCX_TRY_GOTO(lcx_comm_agree(all, LCX_OK), done);
    }
    /* tokenizer files: the checkpoint's, plus --tokenizer ones not already there by name */
    tok_all = calloc((size_t)(n_tok + o->n_tokenizer_files) + 1, sizeof *tok_all);
    LCX_FAIL_GOTO(!tok_all, LCX_ERR_OOM, done, "out of memory");
    int n_all = 0;
    for (int i = 0; i < o->n_tokenizer_files; i++) {
        LCX_FAIL_GOTO(!lcx_is_file(o->tokenizer_files[i]), LCX_ERR_NOT_FOUND, done,
                      "--tokenizer %s: no such file, or not a regular one", o->tokenizer_files[i]);
        tok_all[n_all++] = o->tokenizer_files[i];
    }
    for (int i = 0; i < n_tok; i++) {
        const char *b = strrchr(tok[i], '/') ? strrchr(tok[i], '/') + 1 : tok[i];
        int dup = 0;
        for (int j = 0; j < o->n_tokenizer_files; j++) {
            const char *t = o->tokenizer_files[j], *u = strrchr(t, '/') ? strrchr(t, '/') + 1 : t;
            dup |= strcmp(u, b) == 0;
        }
        if (!dup) tok_all[n_all++] = tok[i];
    }

    lcx_train_stage sg;
    memset(&sg, 0, sizeof sg);
    sg.index = 0;
    sg.n_stages = 1;
    sg.seq_len = o->seq_len;
    sg.steps = o->steps;
    sg.micro_seqs = o->batch;
    sg.grad_accum = o->accum;
    sg.lr.kind = o->schedule;
    sg.lr.peak = o->lr;
    sg.lr.min_lr = o->min_lr;
    sg.lr.warmup_steps = o->warmup;
    sg.lr.total_steps = o->steps;
    sg.lr.decay_steps = o->decay_steps;
    sg.lr.decay = o->decay;
    sg.clip_norm = o->clip;
    sg.weight_decay = o->weight_decay;
    sg.seed = (uint64_t)o->seed;
    sg.save_interval = o->save_every;
    sg.doc_mask = o->doc_mask;
    sg.min_doc_tokens = o->min_doc_tokens;
    sg.long_doc_tokens = o->long_doc_tokens;
    sg.long_doc_repeat = o->long_doc_repeat;
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = o->out;
    ctx.model_config = cfg.json;
    ctx.tokenizer_paths = tok_all;
    ctx.n_tokenizer = n_all;
    ctx.keep_last = (int)o->keep;
    run_info = json_pack("{s:s, s:s}", "backend", be_name, "attention_mask", o->doc_mask ? "document" : "causal");
    LCX_FAIL_GOTO(!run_info, LCX_ERR_OOM, done, "out of memory");
    if (td_open > 1) json_object_set_new(run_info, "data_mix", lcx_tool_mix_info(td, td_open, o->data_weights));
    ctx.run_info = run_info;
    lcx_reporter train_r = o->quiet ? lcx_tool_quiet_reporter(r) : (r ? *r : (lcx_reporter){0});
    ctx.report = &train_r;
    ctx.grad = g;
    ctx.dp_rank = grp.dp_rank;
    ctx.dp_size = grp.dp_size;
    ctx.cp_rank = cp_rank;
    ctx.cp_size = cp;
    ctx.world = all;
    ctx.tp_size = tp;
    ctx.override_lr = o->override_lr;
    ctx.flops_per_token = lcx_config_flops_per_token(&cfg, o->seq_len);
    ctx.peak_flops = o->peak_tflops * 1e12;
    lcx_tool_validation val = {.seq_len = o->seq_len, .cp_rank = cp_rank, .cp_size = cp,
                               .grad = g, .dp_rank = grp.dp_rank, .dp_size = grp.dp_size};
    if (o->eval_data) { /* every rank: DP shares out the windows, CP splits each, TP its slices (BOS: config.json's) */
        val.bos = lcx_eval_bos(NULL, &cfg);
        LCX_TRY_GOTO(lcx_eval_load_docs(o->eval_data, val.bos, cfg.vocab_size, &val_docs, &n_val_docs, &val_store),
                     done);
        val.docs = val_docs;
        val.n_docs = o->eval_docs > 0 && o->eval_docs < n_val_docs ? o->eval_docs : n_val_docs;
        ctx.eval = lcx_tool_validate;
        ctx.eval_user = &val;
        ctx.eval_every = o->eval_every > 0 ? o->eval_every : o->steps;
    }
    if (latest)
        lcx_report(r, LCX_REPORT_NOTE, "resuming %s at step %lld/%lld (%lld tokens trained)", latest,
                   (long long)state.step, (long long)o->steps, (long long)state.tokens);
    if (all) { /* every replica built */
        agreed++;
        LCX_TRY_GOTO(lcx_comm_agree(all, LCX_OK), done);
    }
    uint64_t n_params = lcx_model_params(m)->total_numel;
    { /* the run directory against what the run writes at most (docs/plan.md "Disk"); r: the lead's only */
        const int wb = o->param_dtype == LCX_BF16 ? 2 : 4;
        const double ckpt = lcx_plan_checkpoint_bytes((double)n_params, wb);
        /* a resumed run: the saves after its step, beside the checkpoints already there */
        const int64_t saves = lcx_train_saves(state.step, o->steps, o->save_every);
        const lcx_disk_need need = {.held = lcx_ckpt_held_new(lcx_tool_run_checkpoints(o->out), saves, (int)o->keep),
                                    .ckpt = ckpt, .export_bytes = o->export_hf ? (double)n_params * wb : 0};
        lcx_tool_warn_disk(r, o->out, &need);
    }
    char dp_text[32] = "", cp_text[192] = "";
    if (grp.dp_size > 1) snprintf(dp_text, sizeof dp_text, "%d ranks x ", grp.dp_size);
    lcx_tool_layout_text(m, &grp, o->seq_len, cp_text, sizeof cp_text);
    const int on_cpu = strcmp(be_name, "cpu") == 0; /* the device is worth a word only when it is not the CPU */
    lcx_report(r, LCX_REPORT_NOTE,
               "train: %s, %llu parameters, seq %lld%s, %s%lld x %lld sequences per step, %lld steps, lr %g (%s)%s%s",
               lcx_arch_name(cfg.arch), (unsigned long long)n_params, (long long)o->seq_len, cp_text, dp_text,
               (long long)o->accum, (long long)o->batch, (long long)o->steps, o->lr, lcx_lr_kind_name(o->schedule),
               on_cpu ? "" : ", backend ", on_cpu ? "" : be_name);
    if (td_open > 1) { /* each sample from one source, in these shares of the samples */
        double wsum = 0;
        char mix_text[1024] = "";
        for (int i = 0; i < td_open; i++) wsum += o->data_weights[i];
        for (int i = 0; i < td_open; i++)
            snprintf(mix_text + strlen(mix_text), sizeof mix_text - strlen(mix_text), "%s%s %.3g%%", i ? ", " : "",
                     td[i].prefix, 100 * o->data_weights[i] / wsum);
        lcx_report(r, LCX_REPORT_NOTE, "data mix (shares of the samples): %s", mix_text);
    }
    lcx_run_event(r, "train_start",
          json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:s, s:s?}", "parameters", (json_int_t)n_params, "seq_len",
                    (json_int_t)o->seq_len, "steps", (json_int_t)o->steps, "micro_seqs", (json_int_t)o->batch,
                    "grad_accum", (json_int_t)o->accum, "lr", o->lr, "schedule", lcx_lr_kind_name(o->schedule),
                    "backend", be_name, "resumed_from", latest));
    lcx_train_catch_signals();
    lcx_train_summary sum = {0}; /* read below also when the stage failed before filling it */
    const lcx_mix_data mix = lcx_tool_mix(td, td_open, td_open > 1 ? o->data_weights : NULL);
    st = lcx_train_stage_run(m, &mix, &sg, &ctx, &state, &sum);
    lcx_train_release_signals(); /* training is over: a signal now (mpirun ending the job) must not claim a save */
    if (all && st != LCX_OK && st != LCX_ERR_INTERRUPTED && !sum.agreed) {
        /* a failure some ranks may not share (one not returned by all of them together, sum.agreed): the others
         * could be waiting in the next step's collectives, so the job ends here */
        char msg[600];
        snprintf(msg, sizeof msg, "train: rank %d: %s: %s", all->rank, lcx_status_name(st), lcx_last_error());
        lcx_comm_abort(all, all_r, 1, msg);
    }
    if (st != LCX_OK) goto done;
    if (!lead) goto done;
    char mfu_text[48];
    lcx_report(r, LCX_REPORT_RESULT,
               "done: %lld steps, final loss %.6f, mean tokens/s %.1f (%.3g model TFLOP/s per device%s), peak RSS "
               "%.1f MiB, checkpoint %s",
               (long long)state.step, state.loss, sum.mean_tokens_per_s, sum.mean_tflops,
               lcx_tool_mfu_text(sum.mean_tflops, o->peak_tflops, mfu_text, sizeof mfu_text), sum.peak_rss / 1048576.0,
               state.saved ? state.saved : "-");
    lcx_run_event(r, "train_done",
          json_pack("{s:I, s:o, s:o, s:I, s:s?}", "steps", (json_int_t)state.step, "loss",
                    lcx_run_json_number(state.loss), "tokens_per_s", lcx_run_json_number(sum.mean_tokens_per_s),
                    "peak_rss", (json_int_t)sum.peak_rss, "checkpoint", state.saved));
    if (o->export_hf) {
        lcx_convert_opts co;
        lcx_convert_opts_default(&co);
        co.threads = 1;
        LCX_TRY_GOTO(lcx_export_hf(state.saved, o->export_hf, &co), done);
        lcx_report(r, LCX_REPORT_RESULT, "exported %s", o->export_hf);
        lcx_run_event(r, "export", json_pack("{s:s, s:s}", "format", "hf", "path", o->export_hf));
    }
done:
    while (all && agreed < 3) { /* this rank's outcome at each point it has not passed yet (the lead's export) */
        agreed++;
        st = lcx_comm_agree(all, st);
    }
    lcx_model_free(m);
    json_decref(run_info);
    free(val_docs);
    free(val_store);
    lcx_config_free(&cfg);
    for (int i = 0; i < td_open; i++) lcx_tokdata_close(&td[i]);
    lcx_train_state_free(&state);
    lcx_tool_strv_free(tok, n_tok);
    free(tok_all);
    free(src);
    free(latest);
    free(layer_pol);
    return st;
}
