/* lcextend CKPT --to N: the whole context extension. The flags become lcx_extend_options and the run is one
 * library call, lcx_extend_run (src/pipeline/extend.h: plan -> import -> evaluate before -> stages -> evaluate
 * after -> export), reporting through the terminal reporter. */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "kernels/backend.h"
#include "src/checkpoint/source.h"
#include "src/eval/eval.h"
#include "src/pipeline/extend.h"
#include "src/plan/plan.h"
#include "src/plan/recipe.h"
#include "src/rope/rope.h"
#include "src/train/mix.h"

static const char *CMD = "extend";

/* --gpus without --dry-run: the layout must be known before the mesh opens, so search it here from CKPT's config
 * (the run's plan searches again with the layout kept and prints the explanation). */
static lcx_status search_layout(const char *ckpt, const char *recipe, const lcx_plan_opts *po, int *tp, int *cp,
                                int *dp) {
    lcx_source *src = NULL;
    lcx_recipe *r = NULL;
    lcx_plan *p = NULL;
    lcx_status st = lcx_source_open(ckpt, LCX_SOURCE_CONFIG_FILE, &src);
    if (st == LCX_OK && !src->has_config)
        st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no config.json beside it: the layout search needs the model config", ckpt);
    if (st == LCX_OK) st = lcx_recipe_open(recipe, 2 * (po->cp ? po->cp : 1), &r);
    if (st == LCX_OK) st = lcx_plan_build(&src->cfg, r, po, &p);
    if (st == LCX_OK) *tp = (int)p->opts.tp, *cp = (int)p->opts.cp, *dp = (int)p->opts.dp;
    lcx_plan_free(p);
    lcx_recipe_free(r);
    lcx_source_close(src);
    return st;
}

static void help(void) {
    printf("usage: lcextend CKPT --to N (--data PREFIX | --ids FILE) [options]\n"
           "\n"
           "Extend the context of CKPT (any form: HF model directory, .safetensors file or index, .lcx, .gguf) to N\n"
           "tokens: print the plan (stages, lengths, rope factors, steps, tokens, estimated time and peak memory; a\n"
           "GGUF is planned from its metadata), import, then per stage set the stage's rope config, train at its\n"
           "sequence length, evaluate (with --eval-data) and save an .lcx checkpoint; at the end export an HF\n"
           "directory RUN/hf (and RUN/model.gguf with --gguf).\n"
           "RUN gets metrics.jsonl (one JSON line per step and per evaluation) and checkpoints/ (`latest`).\n"
           "Ctrl-C finishes the current step, saves and exits; --resume continues exactly where it stopped.\n"
           "\n"
           "  --to N               target context: 32768, 32k, 128k, 1m\n"
           "  --recipe NAME|FILE   built-in recipe name or YAML file (default yarn-x2; see lcextend plan --help)\n"
           "  --method M           yarn | pi | abf | llama3 | ntk: overrides the recipe's method\n"
           "  --data PREFIX        training data PREFIX.bin/.idx (lcextend tokenize writes it)\n"
           "  --ids FILE           or: whitespace-separated token ids (one document)\n"
           "  --data-weights W,..  with --data given 2 to 8 times: a data mix for every stage, each sample from one\n"
           "                       dataset, in these shares of the samples (--data long --data short\n"
           "                       --data-weights 0.6,0.4)\n"
           "  --eval-data PREFIX   held-out data: perplexity at each stage's eval lengths and stride over all its\n"
           "                       documents (src/eval/eval.h protocol) -> RUN/eval/stageN.json, RUN/eval/ppl.svg;\n"
           "                       and of the input before training and the result after it (the last stage's\n"
           "                       eval lengths, plus the passkey test) -> RUN/eval/before.json, after.json\n"
           "                       (the JSON of lcextend eval --json) and a before/after table on stdout\n"
           "  --eval-every K       with --eval-data: also the validation loss at each stage's seq_len after every\n"
           "                       K-th step of the stage and its last (val_loss / val_ppl in metrics.jsonl)\n"
           "  --passkey N          passkey trials per (length, depth) before and after (default 2 when CKPT has\n"
           "                       a tokenizer and --eval-data is given; 0 = off; N > 0 alone also evaluates)\n"
           "  --depths D,D,...     passkey key depths in [0, 1] (default 0,0.25,0.5,0.75,1)\n"
           "  --needles N          N named keys in each passkey prompt, one asked for (multi-key retrieval;\n"
           "                       default 1: the classic test; lcextend eval --help)\n"
           "  --haystack FILE      fill the passkey prompts with the words of a text file instead of the\n"
           "                       repeated sentences (lcextend eval --help)\n"
           "  --stage-passkey      also the passkey test after every stage but the last, at the stage's eval\n"
           "                       lengths -> RUN/eval/passkey-stageN.json (the JSON of lcextend eval) and .svg\n"
           "  --out RUN            run directory (default: CKPT's name + '-' + N)\n"
           "  --resume             continue RUN from its latest checkpoint (same flags)\n"
           "  --override-lr        with --resume: go on with the recipe's learning-rate schedule where it differs\n"
           "                       from the saved stage's (default: refused)\n"
           "  --dry-run            print the plan and stop\n"
           "  --gguf               also export RUN/model.gguf\n"
           "  --dtype f32|bf16     stored weights while training (default f32; master weights are f32)\n"
           "  --activations A      activation storage while training: f32 | bf16 (default f32; the plan's memory\n"
           "                       estimate follows it; the before/after evaluations run in f32)\n"
           "  --tokens-per-s X     throughput for the time estimate\n"
           "  --gpus N             search the layout for N devices with --gpu-memory SIZE each (lcextend plan --help,\n"
           "                       docs/plan.md \"Layout search\"): TP x CP x DP = N and the per-layer policies of\n"
           "                       'auto' stages, the loss chunk and the MLP tile for the best predicted throughput\n"
           "                       that fits; --tp/--cp/--dp/--mlp-tile given are kept; activations bf16 unless\n"
           "                       --activations; without --dry-run the world (mpirun -np) must be N; training\n"
           "                       runs the plan's loss chunk, MLP tile and per-layer policies\n"
           "  --gpu-memory SIZE    memory per device for --gpus, e.g. 80GB; with --backend cuda the search keeps a\n"
           "                       reserve of it for the CUDA context and NCCL (lcextend plan --help)\n"
           "  --reserve SIZE       keep SIZE of each device's memory out of the plan instead; --no-reserve: none\n"
           "  --mlp-tile N         run the MLP in tiles of N tokens while training (e.g. 4k; default: all at once,\n"
           "                       or the search's choice with --gpus)\n"
           "  --distribute-saved-activations\n"
           "                       with --tp: TP ranks keep only their rows of a recomputed layer's input and\n"
           "                       all-gather them before its rerun (the same numbers; less memory from 3 such\n"
           "                       layers at --tp 2, 2 at --tp 4 or more; with --gpus the search tries both unless\n"
           "                       --no-distribute-saved-activations)\n"
           "  --sequence-parallel  with --tp: the residual stream and the norms split over TP by rows (Megatron's\n"
           "                       sequence parallelism; the same forward, less memory in every layer kept; with\n"
           "                       --gpus the search tries both unless --no-sequence-parallel)\n"
           "  --keep N             checkpoints kept (default 2, 0 = all)\n"
           "  --quiet              no per-step lines on stdout\n"
           "  --peak-tflops X      the device's peak TFLOP/s (e.g. 989: an H100's dense bf16): each metrics line\n"
           "                       gets \"mfu\" beside \"tflops\" (model TFLOP/s per device, no recompute)\n"
           "  --backend B          where the model trains and evaluates: cpu (default) or cuda (a build with CUDA,\n"
           "                       a visible GPU; under mpirun NCCL with one rank per GPU, else MPI staged through\n"
           "                       host memory); recorded in the checkpoints. The time estimate is the CPU's: give\n"
           "                       --tokens-per-s for another backend\n"
           "\n"
           "parallel (under mpirun; docs/parallel.md):\n"
           "  --dp D               data-parallel ranks (default: the world / (tp x cp), i.e. every rank; 1 for\n"
           "                       --dry-run): the plan's steps are split over D ranks, each trains on its share;\n"
           "                       rank 0 alone writes RUN and exports\n"
           "  --cp C               context-parallel ranks (default 1): every sequence is split over C ranks (ring\n"
           "                       attention); every stage length must be a multiple of 2 x C. The stage\n"
           "                       evaluations run on the C ranks of DP rank 0; the before/after evaluation\n"
           "                       (and passkey) on rank 0 alone\n"
           "  --zero1              shard the AdamW moments (and with --dtype bf16 the fp32 master) over the C x D\n"
           "                       ranks (ZeRO-1): each holds 1/(CD) of them; the same numbers as without it; every\n"
           "                       rank writes its checkpoint pieces. With --gpus on wherever C x D > 1 unless\n"
           "                       --no-zero1\n"
           "  --tp T               tensor-parallel ranks (default 1): every stage's model holds 1/T of the heads,\n"
           "                       the MLP and the vocabulary on each rank (T divides the query heads and the MLP;\n"
           "                       KV heads fewer than T are replicated); the stage evaluations run on every TP\n"
           "                       rank of them; the export reads the whole tensors from the final checkpoint.\n"
           "                       The mesh must match the world: mpirun -np TxCxD\n"
           "\n"
           "examples:\n"
           "  lcextend ./tiny-256 --to 2048 --recipe tiny-demo --data corpus --out tiny-2k\n"
           "  lcextend ./Llama-3.1-8B --to 128k --recipe llama3-8k-128k --data pile --dry-run\n"
           "  mpirun -np 2 lcextend ./tiny-256 --to 2048 --recipe tiny-demo --data corpus --out tiny-2k --dp 2\n"
           "  mpirun -np 4 lcextend ./tiny-256 --to 2048 --recipe tiny-demo --data corpus --out tiny-2k \\\n"
           "      --cp 2 --dp 2\n");
}

int lcx_cmd_extend(int argc, char **argv) {
    const char *ckpt = argv[0], *to = NULL, *recipe = "yarn-x2", *method = NULL, *ids = NULL;
    const char *eval_data = NULL, *haystack = NULL, *out_arg = NULL, *backend = "cpu", *data[LCX_MIX_MAX];
    double data_w[LCX_MIX_MAX];
    double peak_tflops = 0;
    int n_data = 0, n_data_w = 0;
    int override_lr = 0, distribute = 0, whole = 0, sp = 0, no_sp = 0;
    int resume = 0, dry = 0, gguf = 0, quiet = 0, zero1 = 0, no_zero1 = 0, keep = 2, pk_trials = -1, n_depths = 5, tp = 1, cp = 1, dp = 0;
    int no_reserve = 0;
    int needles = 1, stage_passkey = 0;
    double depths[LCX_RECIPE_MAX_EVAL] = {0, 0.25, 0.5, 0.75, 1};
    lcx_dtype pdt = LCX_F32, adt = LCX_F32;
    int64_t gpus = 0;
    uint64_t gpu_memory = 0, reserve = 0;
    int64_t eval_every = 0;
    lcx_plan_opts po;
    lcx_plan_opts_default(&po);
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--resume", resume),
        LCX_FLAG_SWITCH("--override-lr", override_lr),
        LCX_FLAG_SWITCH("--dry-run", dry),
        LCX_FLAG_SWITCH("--gguf", gguf),
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_SWITCH("--zero1", zero1),
        LCX_FLAG_SWITCH("--no-zero1", no_zero1),
        LCX_FLAG_SWITCH("--no-reserve", no_reserve),
        /* the text too: the default run directory is named after it */
        {.name = "--to", .kind = LCX_CLI_LENGTH, .to.length = &po.target, .lo = 1, .hi = INT64_C(1) << 34,
         .text = &to},
        LCX_FLAG_STR("--recipe", recipe),
        LCX_FLAG_STR("--method", method),
        LCX_FLAG_STRS("--data", data, n_data, LCX_MIX_MAX),
        LCX_FLAG_REAL("--peak-tflops", peak_tflops, 1e-6, 1e9),
        LCX_FLAG_REALS("--data-weights", data_w, n_data_w, LCX_MIX_MAX, DBL_TRUE_MIN, DBL_MAX),
        LCX_FLAG_STR("--ids", ids),
        LCX_FLAG_STR("--eval-data", eval_data),
        LCX_FLAG_INT("--eval-every", eval_every, 1, INT64_C(1) << 40),
        LCX_FLAG_STR("--out", out_arg),
        LCX_FLAG_INT("--passkey", pk_trials, 0, 100000),
        LCX_FLAG_REALS("--depths", depths, n_depths, LCX_RECIPE_MAX_EVAL, 0, 1),
        LCX_FLAG_INT("--needles", needles, 1, LCX_NEEDLE_NAMES),
        LCX_FLAG_STR("--haystack", haystack),
        LCX_FLAG_SWITCH("--stage-passkey", stage_passkey),
        LCX_FLAG_INT("--keep", keep, 0, 1 << 20),
        LCX_FLAG_INT("--tp", tp, 1, 1 << 16),
        LCX_FLAG_INT("--cp", cp, 1, 1 << 16),
        LCX_FLAG_INT("--dp", dp, 1, 1 << 16),
        LCX_FLAG_POSITIVE("--tokens-per-s", po.tokens_per_s),
        LCX_FLAG_CHOICE("--dtype", pdt, lcx_cli_weight_dtypes),
        LCX_FLAG_CHOICE("--activations", adt, lcx_cli_act_dtypes),
        LCX_FLAG_INT("--gpus", gpus, 1, 65536),
        LCX_FLAG_LENGTH("--mlp-tile", po.mlp_tile, 1, INT32_MAX),
        LCX_FLAG_SWITCH("--distribute-saved-activations", distribute),
        LCX_FLAG_SWITCH("--no-distribute-saved-activations", whole),
        LCX_FLAG_SWITCH("--sequence-parallel", sp),
        LCX_FLAG_SWITCH("--no-sequence-parallel", no_sp),
        LCX_FLAG_SIZE("--gpu-memory", gpu_memory, LCX_BYTES_BINARY),
        LCX_FLAG_SIZE("--reserve", reserve, LCX_BYTES_BINARY),
        LCX_FLAG_STR("--backend", backend),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), NULL, NULL};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (gpus && !gpu_memory)
        return lcx_cli_usage_error(CMD, "flag --gpus: give --gpu-memory SIZE (the memory per device) to search a "
                                        "layout for %lld devices", (long long)gpus);
    if (gpu_memory && !gpus) return lcx_cli_usage_error(CMD, "flag --gpu-memory: only with --gpus N");
    if (gpus && !lcx_cli_flag_given(argc, argv, "--activations")) adt = LCX_BF16; /* the search's default */
    po.weight_bytes = pdt == LCX_BF16 ? 2 : 4;
    po.act_bytes = (int)lcx_act_size(adt); /* the plan's memory estimate follows --activations */
    if (!to) return lcx_cli_usage_error(CMD, "missing --to N (the target context length)");
    if (override_lr && !resume) return lcx_cli_usage_error(CMD, "flag --override-lr: only with --resume");
    if ((needles > 1 || haystack || stage_passkey) && (pk_trials == 0 || (pk_trials < 0 && !eval_data)))
        return lcx_cli_usage_error(CMD, "flag %s: the passkey test is off (give --passkey N or --eval-data)",
                                   needles > 1 ? "--needles" : haystack ? "--haystack" : "--stage-passkey");
    const int64_t tp_given = lcx_cli_flag_given(argc, argv, "--tp") ? tp : 0;
    if ((stop = lcx_cli_distribute_saved(CMD, distribute, whole, tp_given, gpus, &po.distribute_saved)) != LCX_CLI_RUN)
        return stop;
    if ((stop = lcx_cli_sequence_parallel(CMD, sp, no_sp, tp_given, gpus, distribute, &po.sequence_parallel)) !=
        LCX_CLI_RUN)
        return stop;
    if ((stop = lcx_cli_zero1(CMD, zero1, no_zero1, 0, &po.zero1)) != LCX_CLI_RUN) return stop;
    if ((stop = lcx_cli_reserve(CMD, reserve, no_reserve, (double)gpu_memory, &po.reserve)) != LCX_CLI_RUN) return stop;
    if (method) {
        if (lcx_rope_method_parse(method, &po.method) != LCX_OK)
            return lcx_cli_usage_error(CMD, "flag --method: %s", lcx_last_error());
        if (po.method == LCX_EXTEND_DYNAMIC)
            return lcx_cli_usage_error(CMD, "flag --method: dynamic is for evaluation only, not for training");
        po.has_method = 1;
    }
    if (!dry && !n_data == !ids) return lcx_cli_usage_error(CMD, "give either --data PREFIX or --ids FILE");
    if ((stop = lcx_cli_data_mix(CMD, n_data, n_data_w)) != LCX_CLI_RUN) return stop;
    if (eval_every && !eval_data)
        return lcx_cli_usage_error(CMD, "--eval-every: validation needs --eval-data PREFIX (the held-out documents)");
    const lcx_backend *be = NULL;
    if ((stop = lcx_cli_backend(CMD, backend, &be)) != LCX_CLI_RUN) return stop;
    po.backend = be == lcx_backend_cpu() ? LCX_MEM_CPU : LCX_MEM_CUDA; /* the search's memory model: this backend's */

    /* a dry run only plans (any layout); training opens the mesh over the launcher's world */
    lcx_cli_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    if (gpus) {
        /* the search: --tp/--cp/--dp given are kept, the rest searched */
        po.gpus = gpus;
        po.mem_budget = (double)gpu_memory;
        po.tp = lcx_cli_flag_given(argc, argv, "--tp") ? tp : 0;
        po.cp = lcx_cli_flag_given(argc, argv, "--cp") ? cp : 0;
        po.dp = dp;
        po.loss_chunk = 0; /* searched; training runs the plan's (extend_stage.c) */
        if (!dry) {
            lcx_status st = search_layout(ckpt, recipe, &po, &tp, &cp, &dp);
            if (st != LCX_OK) return lcx_cli_report(CMD, st);
            po.tp = tp, po.cp = cp, po.dp = dp; /* the run's plan searches again within this layout */
        }
    }
    if (dry && gpus) {
        /* po is the search's */
    } else if (dry) {
        po.tp = tp;
        po.cp = cp;
        po.dp = dp ? dp : 1;
    } else {
        if ((stop = lcx_cli_mesh_open(CMD, tp, cp, dp, be, &mesh)) != LCX_CLI_RUN) return stop;
        /* with --gpus, tp x cp x dp = N: opening the mesh checks the world is N ranks */
        po.tp = tp;
        po.cp = mesh.cp_size; /* the plan the run uses is the layout's: stage lengths multiples of 2 x CP */
        po.dp = mesh.dp_size;
    }

    lcx_extend_options o;
    lcx_extend_options_default(&o);
    o.ckpt = ckpt;
    o.to_text = to;
    o.plan = po;
    o.recipe = recipe;
    o.data = n_data ? data[0] : NULL;
    o.more_data = data + 1;
    o.n_more_data = n_data ? n_data - 1 : 0;
    o.data_weights = n_data > 1 ? data_w : NULL;
    o.ids = ids;
    o.eval_data = eval_data;
    o.eval_every = eval_every;
    o.out = out_arg;
    o.passkey_trials = pk_trials;
    o.depths = depths;
    o.n_depths = n_depths;
    o.needles = needles;
    o.haystack = haystack;
    o.stage_passkey = stage_passkey;
    o.resume = resume;
    o.override_lr = override_lr;
    o.dry_run = dry;
    o.gguf = gguf;
    o.param_dtype = pdt;
    o.act_dtype = adt;
    o.backend = be;
    o.keep = keep;
    o.quiet = quiet;
    o.peak_tflops = peak_tflops;
    o.ranks = lcx_cli_mesh_ranks(&mesh, 0); /* ZeRO-1: the plan's (po.zero1), extend_stage.c */
    /* --quiet silences training's step lines and progress inside the library; the run's notes always print */
    lcx_terminal term;
    lcx_reporter rep = lcx_cli_reporter(&term, 0);
    lcx_status st = lcx_extend_run(&o, &rep);
    if (st == LCX_OK) st = lcx_cli_flush_stdout();
    return lcx_cli_mesh_close(CMD, &mesh, st);
}
