/* lcextend train-steps: N optimizer steps on random or given tokens; prints loss, gradient norm, speed and peak
 * RSS per step (a smoke test of training and the benchmark driver). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "src/checkpoint/source.h"
#include "src/model/model.h"
#include "src/plan/plan.h"

static const char *CMD = "train-steps";

static void help(void) {
    printf("usage: lcextend train-steps (CKPT | --config CONFIG.json) [options]\n"
           "\n"
           "Run N training steps (forward, backward, chunked loss, global-norm clipping, AdamW) and print per step:\n"
           "loss, gradient norm, clip factor, tokens/s and the peak resident memory of the step; first the\n"
           "planner's memory model for this model, length and policy (docs/plan.md \"Memory\").\n"
           "Each step has --micro micro-batches of --batch rows x --seq tokens (gradient accumulation).\n"
           "\n"
           "CKPT             a checkpoint to start from, any form (HF directory, .safetensors, index, .lcx, .gguf)\n"
           "--config FILE    instead of CKPT: a config.json; weights are random (normal, std 0.02, --seed)\n"
           "\n"
           "options:\n"
           "  --steps N            optimizer steps (default 3); 0: print the prediction only (nothing is allocated)\n"
           "  --seq S              tokens per row (default 128)\n"
           "  --batch B            rows per micro-batch (default 1)\n"
           "  --micro M            micro-batches per step (default 1)\n"
           "  --ids FILE           token ids (whitespace-separated) cut into consecutive rows, wrapping around;\n"
           "                       default: random ids from --seed\n"
           "  --lr X               learning rate (default 1e-4); --wd X weight decay (0.01); --clip X max grad\n"
           "                       norm (1.0, 0 = off)\n"
           "  --policy P           activation policy for every layer: keep | recompute | offload | recompute+offload\n"
           "                       (default keep), or auto: per layer, the planner's fastest split that fits\n"
           "                       --memory SIZE per device (and --host-memory SIZE of offload pool, if given)\n"
           "  --dtype f32|bf16     stored weights (default f32; master weights are always f32)\n"
           "  --activations A      activation storage: f32 | bf16 (default f32; math, loss and gradients stay f32)\n"
           "  --chunk N            rows per loss chunk (default 256)\n"
           "  --mlp-tile N         rows per MLP tile (e.g. 1k; default: all rows at once)\n"
           "  --seed N             random seed (default 1)\n"
           "  --peak-tflops X      the device's peak TFLOP/s (e.g. 989: an H100's dense bf16): the last line adds\n"
           "                       the MFU beside the model TFLOP/s (docs/plan.md \"FLOPs\"; no recompute)\n"
           "  --backend B          where the model runs: cpu (default) or cuda (a build with CUDA, a visible GPU);\n"
           "                       peak_rss is host memory either way; at the end, the backend's allocator\n"
           "                       high-water mark against the plan's device total, and what the device holds\n"
           "                       outside the allocator (the CUDA context: the planner's reserve)\n"
           "  --help               this help\n"
           "\n"
           "examples:\n"
           "  lcextend train-steps tests/fixtures/models/llama_gqa --steps 5 --seq 16 --lr 1e-2\n"
           "  lcextend train-steps --config bench/llama10m.json --seq 512 --steps 4 --policy recompute\n");
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The layers' policies (*out, [layers], the caller frees it): `policy` on every layer, or for LCX_ACT_AUTO the
 * planner's split for the budgets; then the planner's memory model for them (the same buffers train-steps
 * allocates; on the CPU the offload host pool is ordinary memory too), printed; *total = its device bytes. */
static lcx_status plan_step(const lcx_model_config *mc, uint64_t n_params, lcx_dtype pdt, lcx_dtype adt,
                            lcx_act_policy policy, double memory, double host_memory, int64_t chunk,
                            int64_t mlp_tile, int64_t tokens, lcx_mem_backend where, lcx_act_policy **out,
                            double *total) {
    lcx_mem_model pm = lcx_mem_model_of(mc, n_params);
    pm.weight_bytes = pdt == LCX_BF16 ? 2 : 4, pm.act_bytes = (int)lcx_act_size(adt);
    pm.loss_chunk = chunk, pm.mlp_tile = mlp_tile;
    lcx_mem_set_op_ws(&pm, where);
    lcx_act_policy *pol = malloc((size_t)mc->num_hidden_layers * sizeof *pol);
    LCX_FAIL_IF(!pol, LCX_ERR_OOM, "out of memory");
    lcx_mem_estimate e;
    if (policy == LCX_ACT_AUTO) {
        lcx_plan_opts po;
        lcx_plan_opts_default(&po);
        po.mem_budget = memory, po.host_budget = host_memory, po.backend = where;
        lcx_status st = lcx_plan_step_policies(&pm, &po, tokens, pol, &e);
        if (st != LCX_OK) {
            free(pol);
            return lcx_fail_context(st, "--policy auto: ");
        }
        const size_t len = (size_t)lcx_act_layers_str(pol, mc->num_hidden_layers, NULL, 0) + 1;
        char *runs = malloc(len);
        if (!runs) {
            free(pol);
            return lcx_fail(LCX_ERR_OOM, "out of memory");
        }
        lcx_act_layers_str(pol, mc->num_hidden_layers, runs, len);
        printf("policy (auto): layers%s\n", runs);
        free(runs);
    } else {
        for (int64_t l = 0; l < mc->num_hidden_layers; l++) pol[l] = policy;
        lcx_mem_estimate_compute(&pm, tokens, 1, pol, &e);
    }
    *out = pol;
    *total = e.total;
    printf("predicted (plan memory model): %.1f MiB = weights, grads, master, AdamW %.1f MiB + activations, "
           "workspace, logits %.1f MiB + host pool %.1f MiB\n",
           (e.total + e.host) / 1048576.0, (e.weights + e.grads + e.master + e.optimizer) / 1048576.0,
           (e.activations + e.workspace + e.logits) / 1048576.0, e.host / 1048576.0);
    return LCX_OK;
}

int lcx_cmd_train_steps(int argc, char **argv) {
    const char *ckpt = NULL, *config = NULL, *ids_path = NULL, *backend = "cpu";
    int64_t mlp_tile = 0;
    double peak_tflops = 0, flops_per_token = 0;
    int64_t steps = 3, seq = 128, batch = 1, micro = 1, chunk = 256, seed = 1;
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    lcx_act_policy policy = LCX_ACT_KEEP, *layer_policy = NULL;
    uint64_t memory = 0, host_memory = 0;
    lcx_dtype pdt = LCX_F32, adt = LCX_F32;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_INT("--steps", steps, 0, 1000000),
        LCX_FLAG_INT("--seq", seq, 2, INT32_MAX),
        LCX_FLAG_INT("--batch", batch, 1, 1 << 20),
        LCX_FLAG_INT("--micro", micro, 1, 1 << 20),
        LCX_FLAG_INT("--chunk", chunk, 1, INT32_MAX),
        LCX_FLAG_LENGTH("--mlp-tile", mlp_tile, 1, INT32_MAX),
        LCX_FLAG_INT("--seed", seed, 0, INT64_MAX),
        LCX_FLAG_REAL("--lr", ao.lr, 0, 1e3),
        LCX_FLAG_REAL("--wd", ao.weight_decay, 0, 1e3),
        LCX_FLAG_REAL("--clip", ao.max_grad_norm, 0, 1e30),
        LCX_FLAG_REAL("--peak-tflops", peak_tflops, 1e-6, 1e9),
        LCX_FLAG_STR("--config", config),
        LCX_FLAG_STR("--ids", ids_path),
        LCX_FLAG_CHOICE("--policy", policy, lcx_cli_act_policies_auto),
        LCX_FLAG_SIZE("--memory", memory, LCX_BYTES_BINARY),
        LCX_FLAG_SIZE("--host-memory", host_memory, LCX_BYTES_BINARY),
        LCX_FLAG_CHOICE("--dtype", pdt, lcx_cli_weight_dtypes),
        LCX_FLAG_CHOICE("--activations", adt, lcx_cli_act_dtypes),
        LCX_FLAG_STR("--backend", backend),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!ckpt == !config) return lcx_cli_usage_error(CMD, "give either CKPT or --config FILE");
    if (batch > INT32_MAX / seq) return lcx_cli_usage_error(CMD, "--batch x --seq is too many tokens");
    if ((policy == LCX_ACT_AUTO) != (memory > 0))
        return lcx_cli_usage_error(CMD, policy == LCX_ACT_AUTO ? "--policy auto needs --memory SIZE (the budget to fit)"
                                                                : "flag --memory: only with --policy auto");
    if (host_memory && policy != LCX_ACT_AUTO)
        return lcx_cli_usage_error(CMD, "flag --host-memory: only with --policy auto");
    const lcx_backend *be = NULL;
    if ((stop = lcx_cli_backend(CMD, backend, &be)) != LCX_CLI_RUN) return stop;

    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = pdt;
    o.act_dtype = adt;
    o.max_tokens = batch * seq;
    o.loss_chunk = chunk;
    o.mlp_chunk = mlp_tile;
    o.training = 1;
    o.backend = be;
    lcx_model *m = NULL;
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_source *src = NULL;
    int32_t *file_ids = NULL, *tokens = NULL;
    lcx_batch *mb = NULL;
    int64_t n_file = 0;
    int rc = LCX_EXIT_OK;
    lcx_status st;
    size_t held0 = 0, hwm = 0; /* the backend's allocator: before the model, and its high-water mark after */
    double predicted = 0;      /* the plan's device total for the same model, length and policy */

    /* the config alone first (a GGUF's from its metadata): the prediction needs no weights, so a length that
     * would not fit is predicted, not run out of memory */
    st = lcx_source_open(config ? config : ckpt, LCX_SOURCE_CONFIG_FILE, &src);
    if (st == LCX_OK && !src->has_config)
        st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no config.json beside it: train-steps needs the model config",
                      config ? config : ckpt);
    if (st != LCX_OK) goto fail;
    printf("model: %s, %llu parameters, %s weights, %s activations, policy %s%s%s; step = %lld x %lld x %lld tokens\n",
           lcx_arch_name(src->cfg.arch), (unsigned long long)src->params.total_numel, lcx_dtype_name(pdt),
           lcx_dtype_name(adt), lcx_act_policy_name(policy), be != lcx_backend_cpu() ? ", backend " : "",
           be != lcx_backend_cpu() ? be->name : "", (long long)micro, (long long)batch, (long long)seq);
    flops_per_token = lcx_config_flops_per_token(&src->cfg, seq);
    st = plan_step(&src->cfg, src->params.total_numel, pdt, adt, policy, (double)memory, (double)host_memory, chunk,
                   mlp_tile, batch * seq, be == lcx_backend_cpu() ? LCX_MEM_CPU : LCX_MEM_CUDA, &layer_policy,
                   &predicted);
    lcx_source_close(src);
    src = NULL;
    if (st != LCX_OK) goto fail;
    if (steps == 0) goto flush;
    o.layer_policy = layer_policy; /* every layer's, auto resolved */
    o.policy = LCX_ACT_KEEP;

    be->mem_reset_peak();
    be->mem_stats(&held0, NULL);
    if (config) {
        st = lcx_config_load(config, &cfg);
        if (st == LCX_OK) st = lcx_model_init(&m, &cfg, &o);
        if (st == LCX_OK) st = lcx_model_init_random(m, (uint64_t)seed, 0.02);
    } else {
        st = lcx_model_from_checkpoint(ckpt, &o, &m);
    }
    if (st != LCX_OK) goto fail;
    if (ids_path) {
        st = lcx_cli_read_ids(ids_path, &file_ids, &n_file);
        if (st != LCX_OK) goto fail;
        if (n_file < 2) {
            st = lcx_fail(LCX_ERR_INVALID, "%s: %lld token id(s): need at least 2", ids_path, (long long)n_file);
            goto fail;
        }
    }
    int64_t V = lcx_model_config_of(m)->vocab_size, per_step = micro * batch * seq;
    tokens = malloc((size_t)per_step * sizeof(int32_t));
    mb = calloc((size_t)micro, sizeof *mb);
    if (!tokens || !mb) {
        st = lcx_fail(LCX_ERR_OOM, "out of memory for %lld tokens", (long long)per_step);
        goto fail;
    }
    const lcx_model_memory mem = lcx_model_memory_of(m);
    printf("memory: params %.1f MiB, master %.1f MiB, grads %.1f MiB, AdamW %.1f MiB, activations %.1f MiB\n",
           mem.params / 1048576.0, mem.master / 1048576.0, mem.grads / 1048576.0, mem.moments / 1048576.0,
           mem.acts / 1048576.0);
    uint64_t rng = (uint64_t)seed * 0x2545F4914F6CDD1Dull + 1;
    int64_t cursor = 0;
    double sum_tps = 0, sum_cpu_tps = 0, max_rss = 0;
    int n_tps = 0;
    for (int64_t s = 0; s < steps; s++) {
        for (int64_t t = 0; t < per_step; t++) {
            if (file_ids) {
                tokens[t] = file_ids[cursor];
                cursor = (cursor + 1) % n_file;
            } else {
                tokens[t] = (int32_t)(mix(&rng) % (uint64_t)V);
            }
        }
        for (int64_t k = 0; k < micro; k++) {
            mb[k].n_seq = batch;
            mb[k].seq_len = seq;
            mb[k].ids = tokens + k * batch * seq;
        }
        lcx_step_result r;
        double t0 = lcx_cli_now_s(), c0 = cpu_s();
        st = lcx_model_train_step(m, mb, (int)micro, &ao, &r);
        double dt = lcx_cli_now_s() - t0, dc = cpu_s() - c0;
        if (st != LCX_OK) goto fail;
        double tps = (double)per_step / dt, rss = r.peak_rss / 1048576.0;
        if (rss > max_rss) max_rss = rss;
        if (s > 0 || steps == 1) sum_tps += tps, sum_cpu_tps += (double)per_step / dc, n_tps++;
        printf("step %lld/%lld  loss %.6f  grad_norm %.4f  clip %.4f  time %.3f s  cpu %.3f s  tokens/s %.1f  "
               "peak_rss %.1f MiB\n",
               (long long)r.step, (long long)steps, r.loss, r.grad_norm, r.clip_scale, dt, dc, tps, rss);
        fflush(stdout);
    }
    if (n_tps > 0) {
        double tflops = flops_per_token * sum_tps / n_tps / 1e12; /* one device: the model FLOPs of its tokens */
        printf("mean tokens/s %.1f (steps %s)  max peak_rss %.1f MiB  tokens/cpu-s %.1f  tflops %.4g", sum_tps / n_tps,
               steps > 1 ? "2..N" : "1", max_rss, sum_cpu_tps / n_tps, tflops);
        if (peak_tflops > 0) printf("  mfu %.1f%%", 100.0 * tflops / peak_tflops);
        printf("\n");
    }
    be->mem_stats(NULL, &hwm); /* the device's side of the prediction: what the backend's alloc held at most */
    printf("backend memory: high-water mark %.1f MiB (%s's allocations), predicted %.1f MiB (%+.1f%%)\n",
           (double)(hwm - held0) / 1048576.0, be->name, predicted / 1048576.0,
           predicted > 0 ? 100.0 * ((double)(hwm - held0) / predicted - 1) : 0.0);
    const size_t used = be->device_used(); /* 0 on the CPU, whose device is the host */
    if (used > 0) { /* what no allocator shows: the context, the libraries (the planner's reserve) */
        size_t in_use = 0;
        be->mem_stats(&in_use, NULL);
        if (used >= in_use)
            printf("device memory outside the allocator: %.1f MiB (in use on the device %.1f MiB, allocated %.1f "
                   "MiB); the planner reserves %.1f MiB for one device (docs/plan.md \"Reserve\")\n",
                   (double)(used - in_use) / 1048576.0, (double)used / 1048576.0, (double)in_use / 1048576.0,
                   lcx_mem_runtime(LCX_MEM_CUDA, 1, 1, 1) / 1048576.0);
    }
flush:
    LCX_TRY_GOTO(lcx_cli_flush_stdout(), fail);
    goto done;
fail:
    rc = lcx_cli_report(CMD, st);
done:
    free(tokens);
    free(mb);
    free(file_ids);
    lcx_model_free(m);
    lcx_config_free(&cfg);
    lcx_source_close(src);
    free(layer_policy);
    return rc;
}
