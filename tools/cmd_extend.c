/* lcextend CKPT --to N: the whole context extension. plan (printed; --dry-run stops) -> import -> evaluation of
 * the input (before) -> per stage: rope config for the stage's length, train at that length (src/train/train.h),
 * evaluate, save -> evaluation of the result (after) and the before/after table -> final HF export (GGUF on
 * request). --resume continues from RUN/checkpoints/latest (stage and step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "eval_common.h"
#include "extend_eval.h"
#include "formats/lcx.h"
#include "src/plan/recipe.h"
#include "kernels/backend.h"
#include "src/convert/convert.h"
#include "src/eval/eval.h"
#include "src/core/fileio.h"
#include "src/plan/plan.h"
#include "src/tokenizer/tokenizer.h"
#include "src/train/train.h"
#include "src/core/units.h"
#include "train_common.h"

static const char *CMD = "extend";

static void help(void) {
    printf("usage: lcextend CKPT --to N (--data PREFIX | --ids FILE) [options]\n"
           "\n"
           "Extend the context of CKPT (.lcx, HF model directory, .safetensors or .gguf) to N tokens: print the plan\n"
           "(stages, lengths, rope factors, steps, tokens, estimated time and peak memory), import, then per stage set\n"
           "the stage's rope config, train at its sequence length, evaluate (with --eval-data) and save an .lcx\n"
           "checkpoint; at the end export an HF directory RUN/hf (and RUN/model.gguf with --gguf).\n"
           "RUN gets metrics.jsonl (one JSON line per step and per evaluation) and checkpoints/ (`latest`).\n"
           "Ctrl-C finishes the current step, saves and exits; --resume continues exactly where it stopped.\n"
           "\n"
           "  --to N               target context: 32768, 32k, 128k, 1m\n"
           "  --recipe NAME|FILE   built-in recipe name or YAML file (default yarn-x2; see lcextend plan --help)\n"
           "  --method M           yarn | pi | abf | llama3 | ntk: overrides the recipe's method\n"
           "  --data PREFIX        training data PREFIX.bin/.idx (lcextend tokenize writes it)\n"
           "  --ids FILE           or: whitespace-separated token ids (one document)\n"
           "  --eval-data PREFIX   held-out data: perplexity at each stage's eval lengths and stride over all its\n"
           "                       documents (src/eval/eval.h protocol) -> RUN/eval/stageN.json, RUN/eval/ppl.svg;\n"
           "                       and of the input before training and the result after it (the last stage's\n"
           "                       eval lengths, plus the passkey test) -> RUN/eval/before.json, after.json\n"
           "                       (the JSON of lcextend eval --json) and a before/after table on stdout\n"
           "  --passkey N          passkey trials per (length, depth) before and after (default 2 when CKPT has\n"
           "                       a tokenizer and --eval-data is given; 0 = off; N > 0 alone also evaluates)\n"
           "  --depths D,D,...     passkey key depths in [0, 1] (default 0,0.25,0.5,0.75,1)\n"
           "  --out RUN            run directory (default: CKPT's name + '-' + N)\n"
           "  --resume             continue RUN from its latest checkpoint (same flags)\n"
           "  --dry-run            print the plan and stop\n"
           "  --gguf               also export RUN/model.gguf\n"
           "  --dtype f32|bf16     stored weights while training (default f32; master weights are f32)\n"
           "  --activations A      activation storage while training: f32 | bf16 (default f32; the plan's memory\n"
           "                       estimate follows it; the before/after evaluations run in f32)\n"
           "  --tokens-per-s X     throughput for the time estimate\n"
           "  --keep N             checkpoints kept (default 2, 0 = all)\n"
           "  --quiet              no per-step lines on stdout\n"
           "\n"
           "examples:\n"
           "  lcextend ./tiny-256 --to 2048 --recipe tiny-demo --data corpus --out tiny-2k\n"
           "  lcextend ./Llama-3.1-8B --to 128k --recipe llama3-8k-128k --data pile --dry-run\n");
}

/* sgemm rate of this machine (GFLOP/s), 256^3 products for about 0.1 s: the basis of the time estimate when no
 * --tokens-per-s is given. */
/* The passkey runs at the last stage's eval lengths: refuse one its prompt cannot fit before any work. */
static lcx_status check_passkey_fit(const lcx_plan *p, lcx_tokenizer *etok, const lcx_model_config *cfg,
                                    int pk_trials) {
    if (pk_trials <= 0 || !etok) return LCX_OK;
    const lcx_plan_stage *last = &p->stages[p->n_stages - 1];
    lcx_passkey_config pk = {.lengths = last->eval_lengths, .n_lengths = last->n_eval};
    lcx_status st = lcx_cli_eval_check_passkey(&pk, etok, lcx_cli_eval_bos(etok, cfg));
    if (st != LCX_OK) lcx_fail_context(st, "the last stage's eval lengths (--passkey 0 turns the test off): ");
    return st;
}

/* The float32 GEMM rate of the CPU backend's matmul (the path training takes: split over the OpenMP team). */
static double measure_gflops(void) {
    enum { N = 256 };
    lcx_exec *x = NULL;
    if (lcx_exec_create(lcx_backend_cpu(), &x) != LCX_OK) return 0;
    float *a = malloc(sizeof(float) * N * N * 3);
    if (!a) {
        lcx_exec_free(x);
        return 0;
    }
    for (int i = 0; i < N * N * 3; i++) a[i] = (float)((i * 7) % 13) * 0.01f;
    lcx_matmul_args g = {0};
    g.m = g.n = g.k = N, g.batch = 1, g.alpha = 1.0f, g.beta = 0.0f;
    g.a_dtype = g.b_dtype = LCX_F32, g.a = a, g.b = a + N * N, g.c = a + 2 * N * N;
    double t0 = lcx_cli_now_s(), t = 0;
    int reps = 0;
    do {
        if (x->be->matmul(x, &g) != LCX_OK) break; /* float32: no scratch needed */
        reps++;
        t = lcx_cli_now_s() - t0;
    } while (t < 0.1);
    free(a);
    lcx_exec_free(x);
    return reps > 0 ? 2.0 * N * N * N * reps / t / 1e9 : 0;
}

/* Fill the plan's times from model FLOPs at a third of the measured sgemm rate (a training step's kernels are
 * not all sgemm; docs/extend.md). */
static void estimate_times(lcx_plan *p, double gflops) {
    p->total_time_s = 0;
    for (int i = 0; i < p->n_stages; i++) {
        p->stages[i].time_s = p->stages[i].flops / (gflops * 1e9 / 3.0);
        p->total_time_s += p->stages[i].time_s;
    }
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

/* A stage's perplexities: printed, appended to metrics.jsonl, RUN/eval/stageN.json, RUN/eval/ppl.svg redrawn. */
static lcx_status record_stage_eval(const char *mpath, const char *eval_dir, int stage, int n_stages, int64_t seq_len,
                                   const lcx_ppl_config *pc, const lcx_ppl_result *res) {
    FILE *mf = fopen(mpath, "a");
    LCX_FAIL_IF(!mf, LCX_ERR_IO, "%s: cannot open for appending", mpath);
    for (int e = 0; e < pc->n_lengths; e++) {
        printf("  eval length %lld: loss %.4f, perplexity %.3f (%lld tokens, %lld windows)\n",
               (long long)pc->lengths[e], res[e].mean_nll, res[e].ppl, (long long)res[e].tokens,
               (long long)res[e].windows);
        fprintf(mf, "{\"stage\": %d, \"eval_len\": %lld, \"loss\": %.9g, \"ppl\": %.9g, \"tokens\": %lld}\n", stage,
                (long long)pc->lengths[e], res[e].mean_nll, res[e].ppl, (long long)res[e].tokens);
    }
    LCX_FAIL_IF(fclose(mf) != 0, LCX_ERR_IO, "%s: write failed", mpath);
    char series[64], jp[64];
    snprintf(series, sizeof series, "stage %d (%lld)", stage, (long long)seq_len);
    snprintf(jp, sizeof jp, "stage%d.json", stage);
    mkdir(eval_dir, 0777);
    json_t *ej = lcx_ppl_to_json(pc, res, series);
    char *jpath = lcx_path_join(eval_dir, jp);
    lcx_status st = ej && jpath ? lcx_eval_json_write(jpath, ej) : lcx_fail(LCX_ERR_OOM, "out of memory");
    json_decref(ej);
    free(jpath);
    LCX_TRY(st);
    return plot_stages(eval_dir, n_stages);
}

/* stage config: the input config.json with the stage's rope written in (a fresh parse keeps both in sync) */
static lcx_status stage_config(const lcx_model_config *in, const lcx_plan_stage *ps, lcx_model_config *out) {
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

static lcx_status config_of(const char *ckpt, lcx_model_config *cfg) {
    if (lcx_tool_is_lcx(ckpt)) return lcx_train_ckpt_config(ckpt, cfg);
    if (lcx_is_dir(ckpt)) {
        char *p = lcx_path_join(ckpt, "config.json");
        LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
        lcx_status st = lcx_config_load(p, cfg);
        free(p);
        return st;
    }
    return lcx_fail(LCX_ERR_NOT_FOUND, "%s: not a checkpoint directory", ckpt);
}

int lcx_cmd_extend(int argc, char **argv) {
    const char *ckpt = argv[0], *to = NULL, *recipe = "yarn-x2", *method = NULL, *data = NULL, *ids = NULL;
    const char *eval_data = NULL, *out_arg = NULL;
    int resume = 0, dry = 0, gguf = 0, quiet = 0, keep = 2, pk_trials = -1, n_depths = 5;
    double depths[LCX_RECIPE_MAX_EVAL] = {0, 0.25, 0.5, 0.75, 1};
    lcx_dtype pdt = LCX_F32, adt = LCX_F32;
    lcx_plan_opts po;
    lcx_plan_opts_default(&po);
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--resume", resume),
        LCX_FLAG_SWITCH("--dry-run", dry),
        LCX_FLAG_SWITCH("--gguf", gguf),
        LCX_FLAG_SWITCH("--quiet", quiet),
        /* the text too: the default run directory is named after it */
        {.name = "--to", .kind = LCX_CLI_LENGTH, .to.length = &po.target, .lo = 1, .hi = INT64_C(1) << 34,
         .text = &to},
        LCX_FLAG_STR("--recipe", recipe),
        LCX_FLAG_STR("--method", method),
        LCX_FLAG_STR("--data", data),
        LCX_FLAG_STR("--ids", ids),
        LCX_FLAG_STR("--eval-data", eval_data),
        LCX_FLAG_STR("--out", out_arg),
        LCX_FLAG_INT("--passkey", pk_trials, 0, 100000),
        LCX_FLAG_REALS("--depths", depths, n_depths, LCX_RECIPE_MAX_EVAL, 0, 1),
        LCX_FLAG_INT("--keep", keep, 0, 1 << 20),
        LCX_FLAG_POSITIVE("--tokens-per-s", po.tokens_per_s),
        LCX_FLAG_CHOICE("--dtype", pdt, lcx_cli_weight_dtypes),
        LCX_FLAG_CHOICE("--activations", adt, lcx_cli_act_dtypes),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), NULL, NULL};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    po.weight_bytes = pdt == LCX_BF16 ? 2 : 4;
    po.act_bytes = (int)lcx_act_size(adt); /* the plan's memory estimate follows --activations */
    if (!to) return lcx_cli_usage_error(CMD, "missing --to N (the target context length)");
    if (method) {
        if (lcx_rope_method_parse(method, &po.method) != LCX_OK)
            return lcx_cli_usage_error(CMD, "flag --method: %s", lcx_last_error());
        if (po.method == LCX_EXTEND_DYNAMIC)
            return lcx_cli_usage_error(CMD, "flag --method: dynamic is for evaluation only, not for training");
        po.has_method = 1;
    }
    if (!dry && !data == !ids) return lcx_cli_usage_error(CMD, "give either --data PREFIX or --ids FILE");

    lcx_status st = LCX_OK;
    int rc = LCX_EXIT_OK;
    lcx_model_config cfg, scfg;
    memset(&cfg, 0, sizeof cfg);
    memset(&scfg, 0, sizeof scfg);
    lcx_recipe *r = NULL;
    lcx_plan *p = NULL;
    lcx_model *m = NULL;
    lcx_tokdata td, ed;
    memset(&td, 0, sizeof td);
    memset(&ed, 0, sizeof ed);
    int td_open = 0, ed_open = 0, n_tok = 0;
    char *out = NULL, *src = NULL, *latest = NULL, *hf = NULL, *gg = NULL, **tok = NULL;
    json_t *run_info = NULL;
    lcx_ppl_doc *docs = NULL;
    int32_t *doc_store = NULL;
    int64_t n_docs = 0;
    char *mpath = NULL, *eval_dir = NULL, *before_json = NULL, *after_json = NULL, *pk_before = NULL, *pk_after = NULL;
    lcx_tokenizer *etok = NULL; /* the input's tokenizer: BOS of the evaluation windows, passkey prompts */
    int32_t bos = -1;
    lcx_ppl_result *fres = NULL;
    /* before/after evaluation: with --eval-data, or with --passkey N > 0 alone */
    const int full_eval = eval_data || pk_trials > 0;
    lcx_train_state state;
    lcx_train_state_init(&state);

    /* RUN */
    if (out_arg) {
        out = strdup(out_arg);
    } else {
        const char *b = ckpt + strlen(ckpt);
        while (b > ckpt && b[-1] == '/') b--;
        const char *s = b;
        while (s > ckpt && s[-1] != '/') s--;
        size_t n = (size_t)(b - s) + strlen(to) + 2;
        out = malloc(n);
        if (out) snprintf(out, n, "%.*s-%s", (int)(b - s), s, to);
    }
    LCX_FAIL_GOTO(!out, LCX_ERR_OOM, fail, "out of memory");

    /* everything checkable before any work: config, recipe, plan, data, run directory */
    LCX_FAIL_GOTO(!lcx_is_dir(ckpt) && !lcx_is_file(ckpt), LCX_ERR_NOT_FOUND, fail, "%s: no such checkpoint", ckpt);
    int is_gguf = lcx_is_file(ckpt) && !lcx_is_dir(ckpt);
    if (!is_gguf) LCX_TRY_GOTO(config_of(ckpt, &cfg), fail);
    LCX_TRY_GOTO(lcx_recipe_open(recipe, 2 * po.cp, &r), fail);
    if (!is_gguf) {
        LCX_TRY_GOTO(lcx_plan_build(&cfg, r, &po, &p), fail);
        double gf = po.tokens_per_s > 0 ? 0 : measure_gflops();
        if (gf > 0) estimate_times(p, gf);
        lcx_plan_print(p, stdout);
        if (gf > 0)
            printf("time estimate: model FLOPs at a third of this machine's sgemm rate (%.1f GFLOP/s); "
                   "--tokens-per-s X overrides\n", gf);
        fflush(stdout);
    }
    if (dry) {
        if (is_gguf) printf("(a GGUF input is imported before planning; the plan needs its config)\n");
        goto done;
    }
    if (data) {
        LCX_TRY_GOTO(lcx_tokdata_open(data, &td), fail);
        td_open = 1;
    }
    if (ids && !lcx_is_file(ids)) LCX_FAIL_GOTO(1, LCX_ERR_NOT_FOUND, fail, "--ids %s: no such file", ids);
    if (ids && !is_gguf) { /* ids read and checked against the vocabulary before anything is written */
        int32_t *v_ids = NULL;
        int64_t n_ids = 0;
        LCX_TRY_GOTO(lcx_cli_read_ids(ids, &v_ids, &n_ids), fail);
        int64_t bad = -1;
        for (int64_t k = 0; k < n_ids && bad < 0; k++)
            if (v_ids[k] >= cfg.vocab_size) bad = k;
        int32_t bad_id = bad >= 0 ? v_ids[bad] : 0;
        free(v_ids);
        LCX_FAIL_GOTO(n_ids < 2, LCX_ERR_INVALID, fail, "%s: %lld token id(s): need at least 2", ids, (long long)n_ids);
        LCX_FAIL_GOTO(bad >= 0, LCX_ERR_INVALID, fail, "%s: token %lld: id %d is not below the vocabulary size %lld", ids,
                      (long long)bad, bad_id, (long long)cfg.vocab_size);
    }
    if (eval_data) {
        LCX_TRY_GOTO(lcx_tokdata_open(eval_data, &ed), fail);
        ed_open = 1;
    }
    if (full_eval) {
        st = lcx_tokenizer_open(ckpt, &etok);
        if (st != LCX_OK && pk_trials > 0) {
            lcx_fail_context(st, "--passkey needs the input's tokenizer: ");
            goto fail;
        }
        st = LCX_OK;
        if (pk_trials < 0) pk_trials = etok ? 2 : 0;
    }
    if (p) LCX_TRY_GOTO(check_passkey_fit(p, etok, &cfg, pk_trials), fail);
    LCX_TRY_GOTO(lcx_tool_run_dir_check(out, resume, &latest), fail);
    if (!lcx_is_dir(out) && mkdir(out, 0777) != 0)
        LCX_FAIL_GOTO(1, LCX_ERR_IO, fail, "%s: cannot create the run directory", out);

    /* import */
    LCX_TRY_GOTO(lcx_tool_source_lcx(ckpt, out, &src), fail);
    if (is_gguf) {
        LCX_TRY_GOTO(lcx_train_ckpt_config(src, &cfg), fail);
        LCX_TRY_GOTO(lcx_plan_build(&cfg, r, &po, &p), fail);
        lcx_plan_print(p, stdout);
        LCX_TRY_GOTO(check_passkey_fit(p, etok, &cfg, pk_trials), fail);
    }
    LCX_TRY_GOTO(lcx_tool_ckpt_tokenizer_files(src, &tok, &n_tok), fail);
    if (ids) {
        LCX_TRY_GOTO(lcx_tool_ids_open(ids, out, cfg.vocab_size, &td), fail);
        td_open = 1;
    }
    run_info = json_pack("{s:s, s:I, s:s, s:i}", "source", ckpt, "target", (json_int_t)p->target, "recipe",
                         p->recipe_name ? p->recipe_name : recipe, "stages", p->n_stages);
    LCX_FAIL_GOTO(!run_info, LCX_ERR_OOM, fail, "out of memory");

    /* where to start */
    int first = 0;
    if (latest) {
        lcx_ckpt *ck = NULL;
        LCX_TRY_GOTO(lcx_ckpt_open(latest, &ck), fail);
        const json_t *ts = lcx_ckpt_training_state(ck);
        const json_t *ri = json_object_get(ts, "run");
        json_int_t tgt = json_integer_value(json_object_get(ri, "target"));
        json_int_t sidx = json_integer_value(json_object_get(ts, "stage")) - 1; /* stored 1-based */
        int done_ = json_is_true(json_object_get(ts, "stage_done"));
        lcx_ckpt_free(ck);
        LCX_FAIL_GOTO(tgt != p->target, LCX_ERR_INVALID, fail,
                      "--resume: %s was saved by a run to %lld tokens, not --to %lld", latest, (long long)tgt,
                      (long long)p->target);
        LCX_FAIL_GOTO(sidx < 0 || sidx >= p->n_stages, LCX_ERR_INVALID, fail,
                      "--resume: %s is at stage %lld, the plan has %d stages", latest, (long long)sidx + 1,
                      p->n_stages);
        first = (int)sidx + done_;
        printf("resuming from %s (stage %d%s)\n", latest, (int)sidx + 1, done_ ? " finished" : "");
    }
    bos = lcx_cli_eval_bos(etok, &cfg);
    if (ed_open) LCX_TRY_GOTO(lcx_cli_eval_load_docs(eval_data, bos, cfg.vocab_size, &docs, &n_docs, &doc_store), fail);
    eval_dir = lcx_path_join(out, "eval");
    before_json = lcx_path_join(eval_dir, "before.json");
    after_json = lcx_path_join(eval_dir, "after.json");
    pk_before = lcx_path_join(eval_dir, "passkey-before.svg");
    pk_after = lcx_path_join(eval_dir, "passkey-after.svg");
    fres = calloc(LCX_RECIPE_MAX_EVAL, sizeof *fres);
    LCX_FAIL_GOTO(!eval_dir || !before_json || !after_json || !pk_before || !pk_after || !fres, LCX_ERR_OOM, fail,
                  "out of memory");
    /* The before/after evaluation: the last stage's eval lengths and stride, passkey at the same lengths. */
    const lcx_plan_stage *last = &p->stages[p->n_stages - 1];
    lcx_cli_eval_spec es = {
        .data_name = eval_data, .docs = ed_open ? docs : NULL, .n_docs = n_docs,
        .ppl = {last->eval_lengths, last->n_eval, last->eval_stride, bos, LCX_PPL_SHORT_SKIP, 0},
        .pk = {last->eval_lengths, last->n_eval, depths, n_depths, pk_trials > 0 ? pk_trials : 0, 4,
               LCX_PASSKEY_GREEDY, 1},
        .quiet = quiet};
    if (full_eval && !lcx_is_file(before_json)) {
        printf("evaluating the input %s (rope unchanged) before training\n", ckpt);
        fflush(stdout);
        mkdir(eval_dir, 0777);
        es.label = ckpt;
        es.series = "before";
        LCX_TRY_GOTO(lcx_extend_eval_ckpt(src, &cfg, &es, etok, before_json, pk_before, fres), fail);
    }
    mpath = lcx_path_join(out, "metrics.jsonl");
    LCX_FAIL_GOTO(!mpath, LCX_ERR_OOM, fail, "out of memory");
    lcx_train_catch_signals();
    const char *load_from = latest ? latest : src;
    for (int i = first; i < p->n_stages; i++) {
        const lcx_plan_stage *ps = &p->stages[i];
        lcx_config_free(&scfg);
        memset(&scfg, 0, sizeof scfg);
        LCX_TRY_GOTO(stage_config(&cfg, ps, &scfg), fail);
        lcx_model_free(m);
        m = NULL;
        lcx_model_opts mo;
        memset(&mo, 0, sizeof mo);
        mo.param_dtype = pdt;
        mo.act_dtype = adt;
        mo.max_tokens = ps->micro_seqs * ps->seq_len;
        for (int e = 0; e < ps->n_eval; e++)
            if (ps->eval_lengths[e] > mo.max_tokens && eval_data) mo.max_tokens = ps->eval_lengths[e];
        mo.training = 1;
        mo.policy = LCX_ACT_KEEP;
        mo.layer_policy = ps->activation;
        LCX_TRY_GOTO(lcx_model_init(&m, &scfg, &mo), fail);
        /* weights (+ optimizer and position when continuing the stage) */
        {
            lcx_train_state ls;
            lcx_train_state_init(&ls);
            st = lcx_train_load(load_from, m, &ls);
            if (st == LCX_OK && latest && ls.stage == i && !ls.stage_done) {
                lcx_train_state_free(&state);
                state = ls;
            } else {
                int64_t tokens = latest || i > first ? ls.tokens : 0;
                lcx_train_state_free(&ls);
                lcx_train_state_free(&state);
                lcx_train_state_init(&state);
                state.stage = i;
                state.tokens = tokens;
            }
            if (st != LCX_OK) goto fail;
        }
        printf("stage %d/%d: seq %lld, rope %s (max_position_embeddings %lld), %lld steps x %lld tokens\n", i + 1,
               p->n_stages, (long long)ps->seq_len, lcx_rope_method_name(ps->method), (long long)ps->max_pos,
               (long long)ps->steps, (long long)ps->tokens_per_step);
        fflush(stdout);
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
        sg.seed = ps->seed + (uint64_t)i; /* each stage its own document order */
        sg.save_interval = ps->save_interval;
        lcx_train_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.run_dir = out;
        ctx.model_config = scfg.json;
        ctx.tokenizer_paths = (const char *const *)tok;
        ctx.n_tokenizer = n_tok;
        ctx.keep_last = keep;
        lcx_terminal term;
        lcx_reporter rep = lcx_cli_reporter(&term, quiet);
        ctx.report = &rep;
        ctx.run_info = run_info;
        ctx.run_tokens = (int64_t)p->total_tokens;
        lcx_train_summary sum;
        LCX_TRY_GOTO(lcx_train_stage_run(m, &td, &sg, &ctx, &state, &sum), fail);
        printf("stage %d/%d done: loss %.6f, %.1f tokens/s, peak RSS %.1f MiB, saved %s\n", i + 1, p->n_stages,
               state.loss, sum.mean_tokens_per_s, sum.peak_rss / 1048576.0, state.saved);
        if (ed_open && !(full_eval && i == p->n_stages - 1)) { /* the last one: in the after-evaluation */
            int64_t lens[LCX_RECIPE_MAX_EVAL];
            lcx_ppl_result res[LCX_RECIPE_MAX_EVAL];
            int nl = 0;
            for (int e = 0; e < ps->n_eval; e++) lens[nl++] = ps->eval_lengths[e];
            lcx_ppl_config pc;
            memset(&pc, 0, sizeof pc);
            pc.lengths = lens;
            pc.n_lengths = nl;
            pc.stride = ps->eval_stride;
            pc.bos_id = bos;
            pc.short_docs = LCX_PPL_SHORT_SKIP;
            LCX_TRY_GOTO(lcx_ppl_eval(&pc, docs, n_docs, lcx_train_window_score, m, res), fail);
            LCX_TRY_GOTO(record_stage_eval(mpath, eval_dir, i + 1, p->n_stages, ps->seq_len, &pc, res), fail);
        }
        fflush(stdout);
        load_from = state.saved;
        if (lcx_train_interrupted() && i + 1 < p->n_stages) { /* Ctrl-C during the evaluation: stop here */
            st = lcx_fail(LCX_ERR_INTERRUPTED, "interrupted after stage %d; saved %s (continue with --resume)", i + 1,
                          state.saved);
            goto fail;
        }
        if (latest && i == first) { /* later stages load the stage's own final checkpoint */
            free(latest);
            latest = NULL;
        }
    }
    /* after: the result at the last stage's config; its perplexities are also the last stage's evaluation */
    if (full_eval) {
        const char *fin = state.saved ? state.saved : load_from;
        char sj[64];
        snprintf(sj, sizeof sj, "stage%d.json", p->n_stages);
        char *stage_json = lcx_path_join(eval_dir, sj);
        int redo = !lcx_is_file(after_json) || (ed_open && stage_json && !lcx_is_file(stage_json));
        free(stage_json);
        if (redo) {
            printf("evaluating the result %s\n", fin);
            fflush(stdout);
            lcx_model_free(m); /* the training model is done with: one model in memory at a time */
            m = NULL;
            lcx_config_free(&scfg);
            memset(&scfg, 0, sizeof scfg);
            LCX_TRY_GOTO(stage_config(&cfg, last, &scfg), fail);
            mkdir(eval_dir, 0777);
            es.label = fin;
            es.series = "after";
            LCX_TRY_GOTO(lcx_extend_eval_ckpt(fin, &scfg, &es, etok, after_json, pk_after, fres), fail);
            if (ed_open)
                LCX_TRY_GOTO(record_stage_eval(mpath, eval_dir, p->n_stages, p->n_stages, last->seq_len, &es.ppl, fres),
                             fail);
        }
        if (lcx_is_file(before_json)) LCX_TRY_GOTO(lcx_extend_eval_table(before_json, after_json, stdout), fail);
        fflush(stdout);
    }

    /* export */
    LCX_FAIL_GOTO(!state.saved && !load_from, LCX_ERR_INVALID, fail, "no checkpoint to export");
    const char *final = state.saved ? state.saved : load_from;
    hf = lcx_path_join(out, "hf");
    LCX_FAIL_GOTO(!hf, LCX_ERR_OOM, fail, "out of memory");
    lcx_convert_opts co;
    lcx_convert_opts_default(&co);
    co.threads = 1;
    if (lcx_is_dir(hf)) {
        printf("%s exists: not exported again\n", hf);
    } else {
        LCX_TRY_GOTO(lcx_export_hf(final, hf, &co), fail);
        printf("exported %s (Hugging Face, context %lld)\n", hf, (long long)p->target);
    }
    if (gguf) {
        gg = lcx_path_join(out, "model.gguf");
        LCX_FAIL_GOTO(!gg, LCX_ERR_OOM, fail, "out of memory");
        if (!lcx_is_file(gg)) {
            LCX_TRY_GOTO(lcx_export_gguf(final, gg, &co), fail);
            printf("exported %s\n", gg);
        }
    }
    LCX_TRY_GOTO(lcx_cli_flush_stdout(), fail);
    goto done;
fail:
    rc = lcx_cli_report(CMD, st);
done:
    lcx_model_free(m);
    lcx_config_free(&cfg);
    lcx_config_free(&scfg);
    lcx_recipe_free(r);
    lcx_plan_free(p);
    if (td_open) lcx_tokdata_close(&td);
    if (ed_open) lcx_tokdata_close(&ed);
    lcx_train_state_free(&state);
    lcx_tool_strv_free(tok, n_tok);
    json_decref(run_info);
    free(docs);
    free(doc_store);
    free(mpath);
    lcx_tokenizer_free(etok);
    free(fres);
    free(before_json);
    free(after_json);
    free(pk_before);
    free(pk_after);
    free(eval_dir);
    free(out);
    free(src);
    free(latest);
    free(hf);
    free(gg);
    return rc;
}
