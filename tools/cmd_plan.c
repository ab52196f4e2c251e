/* lcextend plan: print the staged extension plan for a checkpoint (what `lcextend CKPT --to N --dry-run` shows). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/hf_config.h"
#include "src/checkpoint/source.h"
#include "src/plan/recipe.h"
#include "src/plan/plan.h"
#include "src/core/units.h"

static const char *CMD = "plan";

static void help(void) {
    printf("usage: lcextend plan CKPT --to N [--recipe NAME|FILE] [--method M] [--json] [layout options]\n"
           "\n"
           "Print the staged context-extension plan for a checkpoint without doing any work: per stage the\n"
           "sequence length, rope config (type, factor, theta, new max_position_embeddings), steps, tokens,\n"
           "batch, learning-rate schedule, activation policy, evaluation lengths, and estimates of peak memory\n"
           "per device (= per rank), model FLOPs and time (formulas in docs/plan.md); with --cp > 1 also the bytes\n"
           "each ring attention step sends per rank and per optimizer step. Errors (target too short, not\n"
           "reachable by the recipe, does not fit the memory budget, ...) are reported before anything runs.\n"
           "\n"
           "CKPT   any checkpoint form, only its config is read: a Hugging Face model directory, a .safetensors\n"
           "       file or model.safetensors.index.json (config.json beside it), an .lcx checkpoint directory (its\n"
           "       manifest's config), a .gguf file (its metadata; no tensor data is read), or a config .json file\n"
           "\n"
           "options:\n"
           "  --to N              target context length: 131072, 128k, 1m (k = 1024, m = 1048576)\n"
           "  --recipe R          built-in recipe name or a YAML file (default yarn-x2); built in:");
    for (size_t i = 0; i < lcx_recipe_builtin_count(); i++) printf(" %s", lcx_recipe_builtin_name(i));
    printf("\n"
           "  --method M          override the recipe's rope method: yarn, pi, abf, ntk, llama3, longrope\n"
           "  --tp N, --cp N, --dp N   parallel layout (default 1 each); lengths must be multiples of 2 x CP\n"
           "  --memory SIZE       memory budget per device, e.g. 80G, 24GiB, 512M (binary units); activation\n"
           "                      'auto' then keeps as many layers as fit, and a plan that does not fit fails\n"
           "  --gpus N            search the layout for N devices (docs/plan.md \"Layout search\"): TP x CP x DP = N,\n"
           "                      the loss chunk, the MLP tile and the per-layer policy of 'auto' stages, for the\n"
           "                      best predicted throughput that fits --gpu-memory; --tp/--cp/--dp/--loss-chunk/\n"
           "                      --mlp-tile given are kept;\n"
           "                      prints why it chose the layout and the runner-up, or why nothing fits\n"
           "  --gpu-memory SIZE   each device's memory for --gpus (nvidia-smi's memory.total), of which the\n"
           "                      search keeps a reserve for what its memory model does not count: the CUDA\n"
           "                      context (1 GiB) and 512 MiB per NCCL communicator of more than one rank\n"
           "                      (docs/plan.md \"Reserve\")\n"
           "  --reserve SIZE      keep SIZE of each device's budget instead (with --memory too); --no-reserve: none\n"
           "  --keep N            training checkpoints the run keeps, for the disk estimate (default 2, 0 = all; the\n"
           "                      main command's --keep)\n"
           "  --host-memory SIZE  with --gpus: pinned host memory per device that offload may use (default no limit)\n"
           "  --tokens-per-s X    training throughput (tokens/s, all devices) for time estimates\n"
           "  --fp32              fp32 weights and activations (CPU backend) instead of bf16 + fp32 master\n"
           "  --loss-chunk N      tokens per chunk of the chunked loss (default 4096)\n"
           "  --mlp-tile N        tokens per MLP tile in training (default: none, the whole micro-batch at once)\n"
           "  --distribute-saved-activations\n"
           "                      TP ranks keep only their rows of a recomputed layer's input and all-gather them\n"
           "                      before its rerun (docs/parallel.md). Default with TP and --memory or --gpus:\n"
           "                      the faster plan that fits, of the two; --no-distribute-saved-activations: never\n"
           "  --sequence-parallel the residual stream and the norms split over TP by rows, Megatron's sequence\n"
           "                      parallelism (docs/parallel.md). Default with TP and --memory or --gpus: tried as\n"
           "                      the distribution is; --no-sequence-parallel: never\n"
           "  --zero1             shard the AdamW moments and the fp32 master over the CP x DP ranks (ZeRO-1;\n"
           "                      docs/parallel.md): each holds 1/(CP x DP) of them. Default with --memory or\n"
           "                      --gpus: on wherever CP x DP > 1 (it costs no time in the throughput model);\n"
           "                      --no-zero1: never\n"
           "  --json              print one JSON object instead of the table\n"
           "  --help              this help\n"
           "\n"
           "examples:\n"
           "  lcextend plan ./Llama-3.1-8B-base --to 128k\n"
           "  lcextend plan ./Llama-3.1-8B-base --to 128k --recipe llama3-8k-128k --tp 8 --cp 4 --memory 80G\n"
           "  lcextend plan ./Llama-3.1-8B-base --to 128k --gpus 8 --gpu-memory 80GB\n"
           "  lcextend plan ./tiny --to 2048 --recipe tiny-demo --fp32 --tokens-per-s 1000\n"
           "  lcextend plan ./model --to 64k --recipe my-recipe.yaml --method pi --json\n"
           "  lcextend plan SmolLM2-135M-Instruct.Q4_1.gguf --to 32k\n");
}

int lcx_cmd_plan(int argc, char **argv) {
    const char *path = NULL, *recipe = "yarn-x2", *method = NULL;
    int as_json = 0, fp32 = 0, distribute = 0, whole = 0, sp = 0, no_sp = 0, zero1 = 0, no_zero1 = 0, no_reserve = 0;
    uint64_t memory = 0, host_memory = 0, reserve = 0;
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.tp = o.cp = o.dp = o.loss_chunk = 0; /* 0 = not given: searched with --gpus, else the defaults below */
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--json", as_json),
        LCX_FLAG_SWITCH("--fp32", fp32),
        LCX_FLAG_SWITCH("--distribute-saved-activations", distribute),
        LCX_FLAG_SWITCH("--no-distribute-saved-activations", whole),
        LCX_FLAG_SWITCH("--sequence-parallel", sp),
        LCX_FLAG_SWITCH("--no-sequence-parallel", no_sp),
        LCX_FLAG_SWITCH("--zero1", zero1),
        LCX_FLAG_SWITCH("--no-zero1", no_zero1),
        LCX_FLAG_SWITCH("--no-reserve", no_reserve),
        LCX_FLAG_LENGTH("--to", o.target, 1, INT64_C(1) << 34),
        LCX_FLAG_STR("--recipe", recipe),
        LCX_FLAG_STR("--method", method),
        LCX_FLAG_INT("--tp", o.tp, 1, 65536),
        LCX_FLAG_INT("--cp", o.cp, 1, 65536),
        LCX_FLAG_INT("--dp", o.dp, 1, 65536),
        LCX_FLAG_SIZE("--memory", memory, LCX_BYTES_BINARY),
        LCX_FLAG_SIZE("--gpu-memory", memory, LCX_BYTES_BINARY),
        LCX_FLAG_INT("--gpus", o.gpus, 1, 65536),
        LCX_FLAG_SIZE("--host-memory", host_memory, LCX_BYTES_BINARY),
        LCX_FLAG_SIZE("--reserve", reserve, LCX_BYTES_BINARY),
        LCX_FLAG_INT("--keep", o.keep_checkpoints, 0, 1 << 20),
        LCX_FLAG_POSITIVE("--tokens-per-s", o.tokens_per_s),
        LCX_FLAG_LENGTH("--loss-chunk", o.loss_chunk, 1, INT64_C(1) << 34),
        LCX_FLAG_LENGTH("--mlp-tile", o.mlp_tile, 1, INT64_C(1) << 34),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &path, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (fp32) o.weight_bytes = o.act_bytes = 4;
    if ((stop = lcx_cli_distribute_saved(CMD, distribute, whole, o.tp, o.gpus, &o.distribute_saved)) != LCX_CLI_RUN)
        return stop;
    if ((stop = lcx_cli_sequence_parallel(CMD, sp, no_sp, o.tp, o.gpus, distribute, &o.sequence_parallel)) !=
        LCX_CLI_RUN)
        return stop;
    if ((stop = lcx_cli_zero1(CMD, zero1, no_zero1, o.gpus ? 0 : (o.cp ? o.cp : 1) * (o.dp ? o.dp : 1), &o.zero1)) !=
        LCX_CLI_RUN)
        return stop;
    if (memory) o.mem_budget = (double)memory;
    if (host_memory) o.host_budget = (double)host_memory;
    if ((stop = lcx_cli_reserve(CMD, reserve, no_reserve, o.mem_budget, &o.reserve)) != LCX_CLI_RUN) return stop;
    if (!o.gpus) {
        if (!o.tp) o.tp = 1;
        if (!o.cp) o.cp = 1;
        if (!o.dp) o.dp = 1;
        if (!o.loss_chunk) o.loss_chunk = 4096;
        if (host_memory) return lcx_cli_usage_error(CMD, "flag --host-memory: only with --gpus (the layout search)");
    } else if (!memory) {
        return lcx_cli_usage_error(CMD, "flag --gpus: give --gpu-memory SIZE (the memory per device) to search a "
                                        "layout for %lld devices", (long long)o.gpus);
    }
    if (!path) return lcx_cli_usage_error(CMD, "missing CKPT");
    if (!o.target) return lcx_cli_usage_error(CMD, "missing --to N (the target context length)");
    if (method) {
        if (lcx_rope_method_parse(method, &o.method) != LCX_OK)
            return lcx_cli_usage_error(CMD, "flag --method: %s", lcx_last_error());
        if (o.method == LCX_EXTEND_DYNAMIC)
            return lcx_cli_usage_error(CMD, "flag --method: dynamic is for evaluation only, not for training");
        o.has_method = 1;
    }

    /* CKPT: any checkpoint form or a config .json, its config only (a GGUF's from its metadata, no tensor read) */
    lcx_source *src = NULL;
    lcx_recipe *r = NULL;
    lcx_plan *p = NULL;
    lcx_status st = lcx_source_open(path, LCX_SOURCE_CONFIG_FILE, &src);
    if (st == LCX_OK && !src->has_config)
        st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no config.json beside it: the plan needs the model config", path);
    if (st == LCX_OK) st = lcx_recipe_open(recipe, 2 * (o.cp ? o.cp : 1), &r);
    if (st == LCX_OK) st = lcx_plan_build(&src->cfg, r, &o, &p);
    if (st == LCX_OK) {
        if (as_json) {
            json_t *j = lcx_plan_json(p);
            char *s = j ? lcx_json_dumps_hf(j) : NULL; /* sorted keys, shortest round-trip floats */
            json_decref(j);
            if (!s) st = lcx_fail(LCX_ERR_OOM, "out of memory");
            else printf("%s\n", s);
            free(s);
        } else {
            lcx_plan_print(p, stdout);
        }
    }
    lcx_plan_free(p);
    lcx_recipe_free(r);
    lcx_source_close(src);
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    lcx_status fst = lcx_cli_flush_stdout();
    return fst == LCX_OK ? LCX_EXIT_OK : lcx_cli_report(CMD, fst);
}
