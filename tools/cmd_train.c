/* lcextend train: one training stage at one sequence length, into a run directory with checkpoints, metrics and
 * --resume. Pretrains a model from random init (--config) or continues a checkpoint. The flags become
 * lcx_train_run_options for one library call, lcx_train_run (src/pipeline/train_run.h). */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "src/pipeline/train_run.h"
#include "src/train/mix.h"

static const char *CMD = "train";

static void help(void) {
    printf("usage: lcextend train (CKPT | --config CONFIG.json) (--data PREFIX | --ids FILE) --seq L --steps N\n"
           "                      --out RUN [options]\n"
           "\n"
           "Train at one sequence length: packed sequences of --seq tokens from a Megatron indexed dataset (shuffled\n"
           "documents, deterministic), AdamW with warm-up + cosine (or constant) learning rate, gradient clipping and\n"
           "accumulation. RUN gets metrics.jsonl (one JSON line per step and per validation) and checkpoints/ (.lcx\n"
           "with weights, fp32 master, AdamW moments and the training state; `latest` names the newest). Ctrl-C\n"
           "finishes the step, saves and exits; --resume continues from RUN's latest checkpoint with bit-identical\n"
           "results.\n"
           "\n"
           "CKPT                 checkpoint to start from, any form: .lcx directory, HF model directory, .safetensors\n"
           "                     file or index, .gguf (other than an .lcx, imported into RUN/import.lcx first)\n"
           "--config FILE        instead of CKPT: config.json, random weights (normal, std --init-std, --seed)\n"
           "--data PREFIX        training data PREFIX.bin/.idx (lcextend tokenize writes it)\n"
           "--ids FILE           or: whitespace-separated token ids (one document; written to RUN/ids.bin/.idx)\n"
           "--data-weights W,..  with --data given 2 to 8 times: a data mix, each sample from one dataset, in these\n"
           "                     shares of the samples (e.g. --data long --data short --data-weights 0.6,0.4)\n"
           "--seq L              tokens per sequence\n"
           "--steps N            optimizer steps\n"
           "--out RUN            run directory (created)\n"
           "\n"
           "options:\n"
           "  --batch B            sequences per micro-batch (default 1)\n"
           "  --accum A            micro-batches per optimizer step (default 1)\n"
           "  --lr X               peak learning rate (default 3e-4); --min-lr X (default 0)\n"
           "  --warmup N           warm-up steps (default 0); --schedule cosine|constant|wsd (default cosine)\n"
           "  --decay-steps N      wsd (warm-up, stable at --lr, decay to --min-lr): the last N steps decay\n"
           "                       (default a fifth of --steps); --decay-type cosine|linear|1-sqrt (default cosine)\n"
           "  --clip X             max gradient norm (default 1, 0 = off); --wd X weight decay (default 0.01)\n"
           "  --dtype f32|bf16     stored weights (default f32; master weights are f32)\n"
           "  --policy P           activations: keep | recompute | offload | recompute+offload (default keep), or\n"
           "                       auto: per layer, the planner's fastest split that fits --memory SIZE per device\n"
           "                       (and --host-memory SIZE of offload pool, if given; docs/plan.md); printed\n"
           "  --mlp-tile N         run the MLP in tiles of N tokens (e.g. 4k; default: all tokens at once): with\n"
           "                       recompute no [tokens x intermediate] buffer exists; gradients change in the\n"
           "                       last bits only\n"
           "  --distribute-saved-activations\n"
           "                       with --tp and --policy recompute (or recompute+offload): each TP rank keeps\n"
           "                       only its rows of a layer's input and the backward all-gathers them (the same\n"
           "                       numbers; 1/T of each input stored, plus one shared: less memory from 3 such\n"
           "                       layers at --tp 2, 2 at --tp 4 or more)\n"
           "  --sequence-parallel  with --tp: the residual stream, the norms and their outputs split over the TP\n"
           "                       ranks by rows (Megatron's sequence parallelism): the same forward, the norm\n"
           "                       weights' gradients in another order; 1/T of those tensors in every layer kept\n"
           "  --activations A      activation storage: f32 | bf16 (default f32; math, loss, gradients and\n"
           "                       optimizer state stay f32). Not recorded in RUN: a --resume may change it (the\n"
           "                       saved state is f32 either way; only bit-identity with an unbroken run is lost)\n"
           "  --doc-mask           document masking: attention stays inside each document of a packed sequence\n"
           "                       (default: causal over the whole sequence, documents see the ones before)\n"
           "  --seed N             data shuffle seed and random init seed (default 1234)\n"
           "  --init-std X         random init standard deviation (default 0.02)\n"
           "  --save-every K       also save every K steps (default: at the end only)\n"
           "  --eval-data PREFIX   held-out documents: the validation loss at --seq (non-overlapping windows)\n"
           "                       after the last step, into metrics.jsonl as val_loss / val_ppl\n"
           "  --eval-every K       ... and after every K-th step; --eval-docs N: the first N documents only\n"
           "  --min-doc-tokens N   draw only documents of N+ tokens (e.g. 4k: long-context data only)\n"
           "  --long-doc-tokens N --long-doc-repeat R\n"
           "                       documents of N+ tokens are drawn R times per epoch (length upsampling)\n"
           "  --keep N             checkpoints kept in RUN/checkpoints (default 2, 0 = all)\n"
           "  --tokenizer FILE     copy this tokenizer file into the checkpoints (repeatable; CKPT's are kept)\n"
           "  --export-hf DIR      at the end write the model as an HF directory DIR\n"
           "  --resume             continue RUN from its latest checkpoint (same flags)\n"
           "  --override-lr        with --resume: go on with this command's --lr, --min-lr, --warmup, --schedule,\n"
           "                       --decay-* where they differ from the saved run's (default: refused)\n"
           "  --quiet              no per-step lines on stdout\n"
           "  --peak-tflops X      the device's peak TFLOP/s (e.g. 989: an H100's dense bf16): each metrics line\n"
           "                       gets \"mfu\" beside \"tflops\" (model TFLOP/s per device, no recompute)\n"
           "  --backend B          where the model runs: cpu (default) or cuda (a build with CUDA, a visible GPU;\n"
           "                       under mpirun NCCL with one rank per GPU, else MPI staged through host memory:\n"
           "                       docs/parallel.md \"Device buffers\"); recorded in the checkpoints\n"
           "\n"
           "parallel (under mpirun; docs/parallel.md):\n"
           "  --dp D               data-parallel ranks (default: the world / (tp x cp), i.e. every rank): each\n"
           "                       trains on its share of every step, a step is D x --accum x --batch sequences\n"
           "  --cp C               context-parallel ranks (default 1): each holds --seq / C tokens of every\n"
           "                       sequence (--seq a multiple of 2 C); C x D ranks train on the same sequences as D\n"
           "  --zero1              shard the AdamW moments (and with --dtype bf16 the fp32 master) over the C x D\n"
           "                       ranks (ZeRO-1): each holds 1/(C x D) of them; the same numbers as without it;\n"
           "                       every rank writes its checkpoint pieces\n"
           "  --tp T               tensor-parallel ranks (default 1): each holds 1/T of the heads, the MLP and the\n"
           "                       vocabulary (T divides the query heads and the MLP; KV heads fewer than T are\n"
           "                       replicated); the same numbers as one process; checkpoints load in any layout.\n"
           "                       The mesh must match the world: mpirun -np (T x C x D)\n"
           "\n"
           "examples:\n"
           "  lcextend train --config tiny.json --data corpus --seq 256 --steps 500 --lr 1e-3 --out run --export-hf tiny\n"
           "  lcextend train tests/fixtures/models/llama_gqa --ids ids.txt --seq 32 --steps 6 --out run --save-every 3\n"
           "  mpirun -np 2 lcextend train --config tiny.json --data corpus --seq 256 --steps 500 --out run --dp 2\n"
           "  mpirun -np 4 lcextend train --config tiny.json --data corpus --seq 4096 --steps 500 --out r --cp 2\n"
           "  mpirun -np 4 lcextend train --config tiny.json --data corpus --seq 4096 --steps 500 --out r --tp 2 --cp 2\n");
}

#define MAX_TOK 16

static const lcx_cli_word SCHEDULES[] = {
    {"cosine", LCX_LR_COSINE}, {"constant", LCX_LR_CONSTANT}, {"wsd", LCX_LR_WSD}, {NULL, 0}};
static const lcx_cli_word DECAYS[] = {
    {"cosine", LCX_DECAY_COSINE}, {"linear", LCX_DECAY_LINEAR}, {"1-sqrt", LCX_DECAY_SQRT}, {NULL, 0}};

int lcx_cmd_train(int argc, char **argv) {
    const char *ckpt = NULL, *config = NULL, *ids = NULL, *out = NULL, *export_hf = NULL, *eval_data = NULL;
    const char *backend = "cpu";
    const char *user_tok[MAX_TOK], *data[LCX_MIX_MAX];
    double data_w[LCX_MIX_MAX];
    double peak_tflops = 0;
    int n_data = 0, n_data_w = 0;
    int override_lr = 0, distribute = 0, sp = 0;
    uint64_t memory = 0, host_memory = 0;
    int n_user_tok = 0, resume = 0, quiet = 0, zero1 = 0, doc_mask = 0, tp = 1, cp = 1, dp = 0;
    int64_t mlp_tile = 0;
    int64_t seq = 0, steps = 0, batch = 1, accum = 1, warmup = 0, save_every = 0, keep = 2, seed = 1234;
    int64_t eval_every = 0, eval_docs = 0, min_doc = 0, long_doc = 0, long_repeat = 0, decay_steps = 0;
    int decay_type = -1; /* -1: not given */
    double lr = 3e-4, min_lr = 0, clip = 1.0, wd = 0.01, init_std = 0.02;
    lcx_lr_kind sched = LCX_LR_COSINE;
    lcx_act_policy policy = LCX_ACT_KEEP;
    lcx_dtype pdt = LCX_F32, adt = LCX_F32;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--resume", resume),
        LCX_FLAG_SWITCH("--override-lr", override_lr),
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_SWITCH("--zero1", zero1),
        LCX_FLAG_SWITCH("--doc-mask", doc_mask),
        LCX_FLAG_INT("--seq", seq, 2, INT32_MAX),
        LCX_FLAG_LENGTH("--mlp-tile", mlp_tile, 1, INT32_MAX),
        LCX_FLAG_SWITCH("--distribute-saved-activations", distribute),
        LCX_FLAG_SWITCH("--sequence-parallel", sp),
        LCX_FLAG_INT("--tp", tp, 1, 1 << 16),
        LCX_FLAG_INT("--cp", cp, 1, 1 << 16),
        LCX_FLAG_INT("--dp", dp, 1, 1 << 16),
        LCX_FLAG_INT("--steps", steps, 1, INT64_C(1) << 40),
        LCX_FLAG_INT("--batch", batch, 1, 1 << 20),
        LCX_FLAG_INT("--accum", accum, 1, 1 << 20),
        LCX_FLAG_INT("--warmup", warmup, 0, INT64_C(1) << 40),
        LCX_FLAG_INT("--decay-steps", decay_steps, 1, INT64_C(1) << 40),
        LCX_FLAG_INT("--save-every", save_every, 0, INT64_C(1) << 40),
        LCX_FLAG_INT("--eval-every", eval_every, 1, INT64_C(1) << 40),
        LCX_FLAG_INT("--eval-docs", eval_docs, 1, INT64_C(1) << 40),
        LCX_FLAG_LENGTH("--min-doc-tokens", min_doc, 1, INT64_C(1) << 40),
        LCX_FLAG_LENGTH("--long-doc-tokens", long_doc, 1, INT64_C(1) << 40),
        LCX_FLAG_INT("--long-doc-repeat", long_repeat, 1, 1000),
        LCX_FLAG_INT("--keep", keep, 0, 1 << 20),
        LCX_FLAG_INT("--seed", seed, 0, INT64_MAX),
        LCX_FLAG_REAL("--lr", lr, 1e-12, 1e3),
        LCX_FLAG_REAL("--min-lr", min_lr, 0, 1e3),
        LCX_FLAG_REAL("--clip", clip, 0, 1e30),
        LCX_FLAG_REAL("--wd", wd, 0, 1e3),
        LCX_FLAG_REAL("--init-std", init_std, 1e-12, 10),
        LCX_FLAG_STR("--config", config),
        LCX_FLAG_STRS("--data", data, n_data, LCX_MIX_MAX),
        LCX_FLAG_REAL("--peak-tflops", peak_tflops, 1e-6, 1e9),
        LCX_FLAG_REALS("--data-weights", data_w, n_data_w, LCX_MIX_MAX, DBL_TRUE_MIN, DBL_MAX),
        LCX_FLAG_STR("--ids", ids),
        LCX_FLAG_STR("--eval-data", eval_data),
        LCX_FLAG_STR("--out", out),
        LCX_FLAG_STR("--export-hf", export_hf),
        LCX_FLAG_STRS("--tokenizer", user_tok, n_user_tok, MAX_TOK),
        LCX_FLAG_CHOICE("--schedule", sched, SCHEDULES),
        LCX_FLAG_CHOICE("--decay-type", decay_type, DECAYS),
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
    if (!n_data == !ids) return lcx_cli_usage_error(CMD, "give either --data PREFIX or --ids FILE");
    if ((stop = lcx_cli_data_mix(CMD, n_data, n_data_w)) != LCX_CLI_RUN) return stop;
    if ((policy == LCX_ACT_AUTO) != (memory > 0))
        return lcx_cli_usage_error(CMD, policy == LCX_ACT_AUTO ? "--policy auto needs --memory SIZE (the budget to fit)"
                                                                : "flag --memory: only with --policy auto");
    if (host_memory && policy != LCX_ACT_AUTO)
        return lcx_cli_usage_error(CMD, "flag --host-memory: only with --policy auto");
    if (distribute && (tp == 1 || !(lcx_act_recomputes(policy) || policy == LCX_ACT_AUTO)))
        return lcx_cli_usage_error(CMD, "flag --distribute-saved-activations: %s",
                                   tp == 1 ? "the rows are split over TP ranks: give --tp 2 or more"
                                           : "only recomputed layers keep their input: give --policy recompute or "
                                             "recompute+offload");
    if (sp && (tp == 1 || distribute))
        return lcx_cli_usage_error(CMD, "flag --sequence-parallel: %s",
                                   tp == 1 ? "the rows are split over TP ranks: give --tp 2 or more"
                                           : "not with --distribute-saved-activations (sequence parallelism "
                                             "already keeps only each TP rank's rows of every layer's input)");
    if (!long_doc != !long_repeat)
        return lcx_cli_usage_error(CMD, "--long-doc-tokens N and --long-doc-repeat R go together (documents of N+ "
                                   "tokens drawn R times per epoch)");
    if ((eval_every || eval_docs) && !eval_data)
        return lcx_cli_usage_error(CMD, "--%s: validation needs --eval-data PREFIX (the held-out documents)",
                                   eval_every ? "eval-every" : "eval-docs");
    if (override_lr && !resume) return lcx_cli_usage_error(CMD, "--override-lr goes with --resume");
    if (!seq) return lcx_cli_usage_error(CMD, "missing --seq L");
    if (!steps) return lcx_cli_usage_error(CMD, "missing --steps N");
    if (!out) return lcx_cli_usage_error(CMD, "missing --out RUN");
    if (warmup > steps) return lcx_cli_usage_error(CMD, "--warmup %lld is longer than --steps %lld", (long long)warmup,
                                                   (long long)steps);
    if (min_lr > lr) return lcx_cli_usage_error(CMD, "--min-lr %g is above --lr %g", min_lr, lr);
    if ((decay_steps || decay_type >= 0) && sched != LCX_LR_WSD)
        return lcx_cli_usage_error(CMD, "--%s: only --schedule wsd has a decay phase (the schedule is %s)",
                                   decay_steps ? "decay-steps" : "decay-type", lcx_lr_kind_name(sched));
    if (sched == LCX_LR_WSD && !decay_steps) decay_steps = lcx_lr_decay_steps(LCX_LR_WSD_DECAY_FRACTION, steps, warmup);
    if (warmup + decay_steps > steps)
        return lcx_cli_usage_error(CMD, "--warmup %lld + --decay-steps %lld are more than --steps %lld",
                                   (long long)warmup, (long long)decay_steps, (long long)steps);
    if (batch > INT32_MAX / seq) return lcx_cli_usage_error(CMD, "--batch x --seq is too many tokens");
    const lcx_backend *be = NULL;
    if ((stop = lcx_cli_backend(CMD, backend, &be)) != LCX_CLI_RUN) return stop;

    lcx_cli_mesh mesh;
    if ((stop = lcx_cli_mesh_open(CMD, tp, cp, dp, be, &mesh)) != LCX_CLI_RUN) return stop;

    lcx_train_run_options o;
    lcx_train_run_options_default(&o);
    o.ckpt = ckpt;
    o.config = config;
    o.data = n_data ? data[0] : NULL;
    o.more_data = data + 1;
    o.n_more_data = n_data ? n_data - 1 : 0;
    o.data_weights = n_data > 1 ? data_w : NULL;
    o.ids = ids;
    o.eval_data = eval_data;
    o.eval_every = eval_every;
    o.eval_docs = eval_docs;
    o.min_doc_tokens = min_doc;
    o.long_doc_tokens = long_doc;
    o.long_doc_repeat = long_repeat;
    o.out = out;
    o.export_hf = export_hf;
    o.tokenizer_files = user_tok;
    o.n_tokenizer_files = n_user_tok;
    o.seq_len = seq;
    o.steps = steps;
    o.batch = batch;
    o.accum = accum;
    o.warmup = warmup;
    o.save_every = save_every;
    o.keep = keep;
    o.seed = seed;
    o.lr = lr;
    o.min_lr = min_lr;
    o.clip = clip;
    o.weight_decay = wd;
    o.init_std = init_std;
    o.schedule = sched;
    o.decay_steps = decay_steps;
    o.decay = decay_type < 0 ? LCX_DECAY_COSINE : (lcx_lr_decay)decay_type;
    o.policy = policy;
    o.doc_mask = doc_mask;
    o.mlp_tile = mlp_tile;
    o.distribute_saved = distribute;
    o.sequence_parallel = sp;
    o.mem_budget = (double)memory;
    o.host_budget = (double)host_memory;
    o.param_dtype = pdt;
    o.act_dtype = adt;
    o.backend = be;
    o.resume = resume;
    o.override_lr = override_lr;
    o.quiet = quiet;
    o.peak_tflops = peak_tflops;
    o.ranks = lcx_cli_mesh_ranks(&mesh, zero1);
    /* --quiet silences the step lines and progress inside the library; the run's notes always print */
    lcx_terminal term;
    lcx_reporter rep = lcx_cli_reporter(&term, 0);
    lcx_status st = lcx_train_run(&o, &rep);
    if (st == LCX_OK) st = lcx_cli_flush_stdout();
    return lcx_cli_mesh_close(CMD, &mesh, st);
}
