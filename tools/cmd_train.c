/* lcextend train: one training stage at one sequence length, into a run directory with checkpoints, metrics and
 * --resume (src/train/train.h). Pretrains a model from random init (--config) or continues a checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "formats/lcx.h"
#include "src/convert/convert.h"
#include "src/core/fileio.h"
#include "src/train/train.h"
#include "src/pipeline/run_common.h"

static const char *CMD = "train";

static void help(void) {
    printf("usage: lcextend train (CKPT | --config CONFIG.json) (--data PREFIX | --ids FILE) --seq L --steps N\n"
           "                      --out RUN [options]\n"
           "\n"
           "Train at one sequence length: packed sequences of --seq tokens from a Megatron indexed dataset (shuffled\n"
           "documents, deterministic), AdamW with warm-up + cosine (or constant) learning rate, gradient clipping and\n"
           "accumulation. RUN gets metrics.jsonl (one JSON line per step) and checkpoints/ (.lcx with weights, fp32\n"
           "master, AdamW moments and the training state; `latest` names the newest). Ctrl-C finishes the step,\n"
           "saves and exits; --resume continues from RUN's latest checkpoint with bit-identical results.\n"
           "\n"
           "CKPT                 .lcx checkpoint, HF model directory, .safetensors or .gguf to start from\n"
           "--config FILE        instead of CKPT: config.json, random weights (normal, std --init-std, --seed)\n"
           "--data PREFIX        training data PREFIX.bin/.idx (lcextend tokenize writes it)\n"
           "--ids FILE           or: whitespace-separated token ids (one document; written to RUN/ids.bin/.idx)\n"
           "--seq L              tokens per sequence\n"
           "--steps N            optimizer steps\n"
           "--out RUN            run directory (created)\n"
           "\n"
           "options:\n"
           "  --batch B            sequences per micro-batch (default 1)\n"
           "  --accum A            micro-batches per optimizer step (default 1)\n"
           "  --lr X               peak learning rate (default 3e-4); --min-lr X (default 0)\n"
           "  --warmup N           warm-up steps (default 0); --schedule cosine|constant (default cosine)\n"
           "  --clip X             max gradient norm (default 1, 0 = off); --wd X weight decay (default 0.01)\n"
           "  --dtype f32|bf16     stored weights (default f32; master weights are f32)\n"
           "  --policy P           activations: keep | recompute | offload (default keep)\n"
           "  --activations A      activation storage: f32 | bf16 (default f32; math, loss, gradients and\n"
           "                       optimizer state stay f32). Not recorded in RUN: a --resume may change it (the\n"
           "                       saved state is f32 either way; only bit-identity with an unbroken run is lost)\n"
           "  --seed N             data shuffle seed and random init seed (default 1234)\n"
           "  --init-std X         random init standard deviation (default 0.02)\n"
           "  --save-every K       also save every K steps (default: at the end only)\n"
           "  --keep N             checkpoints kept in RUN/checkpoints (default 2, 0 = all)\n"
           "  --tokenizer FILE     copy this tokenizer file into the checkpoints (repeatable; CKPT's are kept)\n"
           "  --export-hf DIR      at the end write the model as an HF directory DIR\n"
           "  --resume             continue RUN from its latest checkpoint (same flags)\n"
           "  --quiet              no per-step lines on stdout\n"
           "\n"
           "examples:\n"
           "  lcextend train --config tiny.json --data corpus --seq 256 --steps 500 --lr 1e-3 --out run --export-hf tiny\n"
           "  lcextend train tests/fixtures/models/llama_gqa --ids ids.txt --seq 32 --steps 6 --out run --save-every 3\n");
}

#define MAX_TOK 16

static const lcx_cli_word SCHEDULES[] = {{"cosine", LCX_LR_COSINE}, {"constant", LCX_LR_CONSTANT}, {NULL, 0}};

int lcx_cmd_train(int argc, char **argv) {
    const char *ckpt = NULL, *config = NULL, *data = NULL, *ids = NULL, *out = NULL, *export_hf = NULL;
    const char *user_tok[MAX_TOK];
    int n_user_tok = 0, resume = 0, quiet = 0;
    int64_t seq = 0, steps = 0, batch = 1, accum = 1, warmup = 0, save_every = 0, keep = 2, seed = 1234;
    double lr = 3e-4, min_lr = 0, clip = 1.0, wd = 0.01, init_std = 0.02;
    lcx_lr_kind sched = LCX_LR_COSINE;
    lcx_act_policy policy = LCX_ACT_KEEP;
    lcx_dtype pdt = LCX_F32, adt = LCX_F32;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--resume", resume),
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_INT("--seq", seq, 2, INT32_MAX),
        LCX_FLAG_INT("--steps", steps, 1, INT64_C(1) << 40),
        LCX_FLAG_INT("--batch", batch, 1, 1 << 20),
        LCX_FLAG_INT("--accum", accum, 1, 1 << 20),
        LCX_FLAG_INT("--warmup", warmup, 0, INT64_C(1) << 40),
        LCX_FLAG_INT("--save-every", save_every, 0, INT64_C(1) << 40),
        LCX_FLAG_INT("--keep", keep, 0, 1 << 20),
        LCX_FLAG_INT("--seed", seed, 0, INT64_MAX),
        LCX_FLAG_REAL("--lr", lr, 1e-12, 1e3),
        LCX_FLAG_REAL("--min-lr", min_lr, 0, 1e3),
        LCX_FLAG_REAL("--clip", clip, 0, 1e30),
        LCX_FLAG_REAL("--wd", wd, 0, 1e3),
        LCX_FLAG_REAL("--init-std", init_std, 1e-12, 10),
        LCX_FLAG_STR("--config", config),
        LCX_FLAG_STR("--data", data),
        LCX_FLAG_STR("--ids", ids),
        LCX_FLAG_STR("--out", out),
        LCX_FLAG_STR("--export-hf", export_hf),
        LCX_FLAG_STRS("--tokenizer", user_tok, n_user_tok, MAX_TOK),
        LCX_FLAG_CHOICE("--schedule", sched, SCHEDULES),
        LCX_FLAG_CHOICE("--policy", policy, lcx_cli_act_policies),
        LCX_FLAG_CHOICE("--dtype", pdt, lcx_cli_weight_dtypes),
        LCX_FLAG_CHOICE("--activations", adt, lcx_cli_act_dtypes),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!ckpt == !config) return lcx_cli_usage_error(CMD, "give either CKPT or --config FILE");
    if (!data == !ids) return lcx_cli_usage_error(CMD, "give either --data PREFIX or --ids FILE");
    if (!seq) return lcx_cli_usage_error(CMD, "missing --seq L");
    if (!steps) return lcx_cli_usage_error(CMD, "missing --steps N");
    if (!out) return lcx_cli_usage_error(CMD, "missing --out RUN");
    if (warmup > steps) return lcx_cli_usage_error(CMD, "--warmup %lld is longer than --steps %lld", (long long)warmup,
                                                   (long long)steps);
    if (min_lr > lr) return lcx_cli_usage_error(CMD, "--min-lr %g is above --lr %g", min_lr, lr);
    if (batch > INT32_MAX / seq) return lcx_cli_usage_error(CMD, "--batch x --seq is too many tokens");

    lcx_status st = LCX_OK;
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_model *m = NULL;
    lcx_tokdata td;
    memset(&td, 0, sizeof td);
    int td_open = 0;
    char *src = NULL, *latest = NULL, **tok = NULL;
    const char **tok_all = NULL;
    int n_tok = 0;
    lcx_train_state state;
    lcx_train_state_init(&state);

    /* checks before any work */
    LCX_TRY_GOTO(lcx_run_dir_check(out, resume, &latest), fail);
    if (data) {
        LCX_TRY_GOTO(lcx_tokdata_open(data, &td), fail);
        td_open = 1;
    }
    LCX_FAIL_GOTO(ids && !lcx_is_file(ids), LCX_ERR_NOT_FOUND, fail, "--ids %s: no such file", ids);
    LCX_FAIL_GOTO(config && !lcx_is_file(config), LCX_ERR_NOT_FOUND, fail, "--config %s: no such file", config);
    LCX_FAIL_GOTO(ckpt && !lcx_is_dir(ckpt) && !lcx_is_file(ckpt), LCX_ERR_NOT_FOUND, fail, "%s: no such checkpoint",
                  ckpt);
    if (!lcx_is_dir(out) && mkdir(out, 0777) != 0)
        LCX_FAIL_GOTO(1, LCX_ERR_IO, fail, "%s: cannot create the run directory", out);

    /* the model: the run's latest checkpoint, a checkpoint, or a config with random weights */
    const char *load_from = NULL;
    if (latest) {
        load_from = latest;
    } else if (ckpt) {
        LCX_TRY_GOTO(lcx_run_source_lcx(ckpt, out, &src), fail);
        load_from = src;
    }
    if (load_from) {
        LCX_TRY_GOTO(lcx_train_ckpt_config(load_from, &cfg), fail);
        LCX_TRY_GOTO(lcx_run_model_from_lcx(load_from, &cfg, batch * seq, policy, pdt, adt, latest ? &state : NULL,
                                             &m),
                     fail);
        LCX_TRY_GOTO(lcx_run_ckpt_tokenizer_files(load_from, &tok, &n_tok), fail);
    } else {
        LCX_TRY_GOTO(lcx_config_load(config, &cfg), fail);
        lcx_model_opts o;
        memset(&o, 0, sizeof o);
        o.param_dtype = pdt;
        o.act_dtype = adt;
        o.max_tokens = batch * seq;
        o.training = 1;
        o.policy = policy;
        LCX_TRY_GOTO(lcx_model_init(&m, &cfg, &o), fail);
        LCX_TRY_GOTO(lcx_model_init_random(m, (uint64_t)seed, init_std), fail);
    }
    LCX_TRY_GOTO(lcx_config_sync_json(&cfg), fail);
    if (ids) {
        LCX_TRY_GOTO(lcx_run_ids_open(ids, out, cfg.vocab_size, &td), fail);
        td_open = 1;
    }
    /* tokenizer files: the checkpoint's, plus --tokenizer ones not already there by name */
    tok_all = calloc((size_t)(n_tok + n_user_tok) + 1, sizeof *tok_all);
    LCX_FAIL_GOTO(!tok_all, LCX_ERR_OOM, fail, "out of memory");
    int n_all = 0;
    for (int i = 0; i < n_user_tok; i++) {
        LCX_FAIL_GOTO(!lcx_is_file(user_tok[i]), LCX_ERR_NOT_FOUND, fail, "--tokenizer %s: no such file", user_tok[i]);
        tok_all[n_all++] = user_tok[i];
    }
    for (int i = 0; i < n_tok; i++) {
        const char *b = strrchr(tok[i], '/') ? strrchr(tok[i], '/') + 1 : tok[i];
        int dup = 0;
        for (int j = 0; j < n_user_tok; j++) {
            const char *u = strrchr(user_tok[j], '/') ? strrchr(user_tok[j], '/') + 1 : user_tok[j];
            dup |= strcmp(u, b) == 0;
        }
        if (!dup) tok_all[n_all++] = tok[i];
    }

    lcx_train_stage sg;
    memset(&sg, 0, sizeof sg);
    sg.index = 0;
    sg.n_stages = 1;
    sg.seq_len = seq;
    sg.steps = steps;
    sg.micro_seqs = batch;
    sg.grad_accum = accum;
    sg.lr.kind = sched;
    sg.lr.peak = lr;
    sg.lr.min_lr = min_lr;
    sg.lr.warmup_steps = warmup;
    sg.lr.total_steps = steps;
    sg.clip_norm = clip;
    sg.weight_decay = wd;
    sg.seed = (uint64_t)seed;
    sg.save_interval = save_every;
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = out;
    ctx.model_config = cfg.json;
    ctx.tokenizer_paths = tok_all;
    ctx.n_tokenizer = n_all;
    ctx.keep_last = (int)keep;
    lcx_terminal term;
    lcx_reporter rep = lcx_cli_reporter(&term, quiet);
    ctx.report = &rep;
    if (latest)
        printf("resuming %s at step %lld/%lld (%lld tokens trained)\n", latest, (long long)state.step,
               (long long)steps, (long long)state.tokens);
    printf("train: %s, %llu parameters, seq %lld, %lld x %lld sequences per step, %lld steps, lr %g (%s)\n",
           lcx_arch_name(cfg.arch), (unsigned long long)lcx_model_params(m)->total_numel, (long long)seq,
           (long long)accum, (long long)batch, (long long)steps, lr, lcx_lr_kind_name(sched));
    fflush(stdout);
    lcx_train_catch_signals();
    lcx_train_summary sum;
    LCX_TRY_GOTO(lcx_train_stage_run(m, &td, &sg, &ctx, &state, &sum), fail);
    printf("done: %lld steps, final loss %.6f, mean tokens/s %.1f, peak RSS %.1f MiB, checkpoint %s\n",
           (long long)state.step, state.loss, sum.mean_tokens_per_s, sum.peak_rss / 1048576.0,
           state.saved ? state.saved : "-");
    if (export_hf) {
        lcx_convert_opts co;
        lcx_convert_opts_default(&co);
        co.threads = 1;
        LCX_TRY_GOTO(lcx_export_hf(state.saved, export_hf, &co), fail);
        printf("exported %s\n", export_hf);
    }
    LCX_TRY_GOTO(lcx_cli_flush_stdout(), fail);
    int rc = LCX_EXIT_OK;
    goto done;
fail:
    rc = lcx_cli_report(CMD, st);
done:
    lcx_model_free(m);
    lcx_config_free(&cfg);
    if (td_open) lcx_tokdata_close(&td);
    lcx_train_state_free(&state);
    lcx_run_strv_free(tok, n_tok);
    free(tok_all);
    free(src);
    free(latest);
    return rc;
}
