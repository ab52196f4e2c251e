/* lcextend eval: perplexity by context length (sliding window) and passkey retrieval of a checkpoint, as a
 * table, JSON and SVG pictures. The protocol is docs/evaluation-protocol.md; this file only turns the flags into
 * lcx_eval_options for one library call, lcx_eval_checkpoint (src/eval/eval_checkpoint.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "src/comm/comm.h"
#include "src/eval/eval.h"
#include "src/eval/eval_checkpoint.h"

static const char *CMD = "eval";
enum { MAX_LIST = 64, MAX_COMPARE = 16 };

static void help(void) {
    printf("usage: lcextend eval CKPT (--data PREFIX | --text FILE) [options]\n"
           "       lcextend eval CKPT --passkey N [options]\n"
           "\n"
           "Perplexity by context length with a sliding window (each token scored once, BOS starting every\n"
           "window when the tokenizer has one) and passkey retrieval accuracy per length x depth; the exact\n"
           "protocol is docs/evaluation-protocol.md. Prints tables; --json / --svg / --passkey-svg save them.\n"
           "\n"
           "CKPT   any checkpoint form: a Hugging Face model directory (config.json + safetensors), a .safetensors\n"
           "       file or index (config.json beside it), an .lcx checkpoint directory or a .gguf file; its tokenizer\n"
           "       (tokenizer.json beside the config, the .lcx's tokenizer file, the GGUF's own) is used unless\n"
           "       --tokenizer says otherwise\n"
           "\n"
           "data (perplexity):\n"
           "  --data PREFIX       a tokenized dataset PREFIX.bin/.idx (lcextend tokenize); one document each; a\n"
           "                      leading BOS of a document is dropped (the window adds its own)\n"
           "  --text FILE         a plain-text file, encoded as one document with the tokenizer\n"
           "  --lengths L,L,...   window lengths in tokens, BOS included (k = 1024); default: the model's\n"
           "                      context, then powers of two up to --to\n"
           "  --to N              with the default lengths: the largest length (default: the model's context)\n"
           "  --stride S          sliding-window stride in tokens (default 256; 0 = non-overlapping windows)\n"
           "  --short skip|score  documents shorter than a window: skipped (default) or scored as one window\n"
           "  --truncate          score only the first window of each document (YaRN's --truncate); every\n"
           "                      length then comes from one pass per document at the longest, as a causal\n"
           "                      model's first L positions do not see the rest (not with dynamic or longrope\n"
           "                      rope, whose tables depend on the pass length: one pass per length there)\n"
           "\n"
           "passkey:\n"
           "  --passkey N         N trials per (length, depth) cell (default 0: no passkey test)\n"
           "  --passkey-lengths L,...  prompt lengths (default: the perplexity lengths)\n"
           "  --depths D,D,...    key depths in [0, 1] (default 0,0.25,0.5,0.75,1)\n"
           "  --mode greedy|loglik|both  greedy decode of the key (default) and/or key log-likelihood rank\n"
           "  --distractors K     loglik: keys compared against (default 4: chance is 20%%)\n"
           "  --needles N         N named keys in each prompt, one asked for (multi-key retrieval, as RULER's\n"
           "                      niah_multikey; default 1: the classic test); loglik also ranks the key against\n"
           "                      the other N-1, which the prompt holds; N <= 32\n"
           "  --haystack FILE     fill the prompts with the words of a text file, from its start (wrapping\n"
           "                      around), instead of the repeated sentences (RULER's essay haystack)\n"
           "  --seed N            key seed (default 1)\n"
           "\n"
           "output:\n"
           "  --json OUT          {\"checkpoint\", \"perplexity\": {...}, \"passkey\": {...}}\n"
           "  --svg OUT           perplexity vs length; one line for this run plus one per --compare file\n"
           "  --compare FILE      an earlier --json output to draw in the same picture (repeatable)\n"
           "  --series NAME       this run's name in JSON and legend (default: CKPT's last path component)\n"
           "  --passkey-svg OUT   passkey heat map (greedy mode, else loglik)\n"
           "\n"
           "model:\n"
           "  --tokenizer PATH    tokenizer.json, a directory holding one, or a .gguf file\n"
           "  --dtype f32|bf16    weights stored as float32 (default) or bfloat16\n"
           "  --chunk N           rows per logits chunk (default 256)\n"
           "  --backend B         where the model runs: cpu (default) or cuda (a build with CUDA, a visible GPU)\n"
           "  --tp T              tensor parallel over T ranks: each rank holds 1/T of the weights\n"
           "  --cp C              context parallel over C ranks: each rank holds 1/C of every window (ring\n"
           "                      attention; the passkey prompts' KV cache split the same way). Under\n"
           "                      mpirun -np N, N/(T x C) copies of the model share out the windows and the\n"
           "                      passkey trials.\n"
           "                      The results are one process's to float rounding; rank 0 prints and writes\n"
           "                      the files\n"
           "  --quiet             no progress lines on stderr\n"
           "\n"
           "examples:\n"
           "  lcextend eval recipes/tiny/model --data recipes/tiny/data/heldout --lengths 256,512,1024,2048\n"
           "  lcextend eval out/stage2 --data val --to 32k --stride 32k --passkey 5 --json stage2.json \\\n"
           "      --svg ppl.svg --compare base.json --passkey-svg passkey.svg\n");
}

static const lcx_cli_word SHORT_DOCS[] = {{"skip", 0}, {"score", 0}, {NULL, 0}};
static const lcx_cli_word PASSKEY_MODES[] = {{"greedy", 0}, {"loglik", 0}, {"both", 0}, {NULL, 0}};

int lcx_cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *text = NULL, *tok_path = NULL, *json_out = NULL, *svg_out = NULL,
               *pk_svg = NULL, *haystack = NULL, *series = NULL, *mode = "greedy", *shortd = "skip", *backend = "cpu";
    const char *compare[MAX_COMPARE];
    int n_compare = 0, quiet = 0, truncate = 0, tp = 1, cp = 1;
    int64_t lengths[MAX_LIST], pk_lengths[MAX_LIST], to = 0, stride = 256, chunk = 256, seed = 1;
    int n_lengths = 0, n_pk_lengths = 0, n_depths = 5, trials = 0, distractors = 4, needles = 1;
    double depths[MAX_LIST] = {0, 0.25, 0.5, 0.75, 1};
    lcx_dtype dtype = LCX_F32;
    const int64_t max_len = INT64_C(1) << 24;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_STR("--data", data),
        LCX_FLAG_STR("--text", text),
        LCX_FLAG_LENGTHS("--lengths", lengths, n_lengths, MAX_LIST, 2, max_len),
        LCX_FLAG_LENGTH("--to", to, 2, max_len),
        LCX_FLAG_LENGTH("--stride", stride, 0, max_len),
        LCX_FLAG_WORD("--short", shortd, SHORT_DOCS),
        LCX_FLAG_SWITCH("--truncate", truncate),
        LCX_FLAG_INT("--passkey", trials, 0, 100000),
        LCX_FLAG_LENGTHS("--passkey-lengths", pk_lengths, n_pk_lengths, MAX_LIST, 2, max_len),
        LCX_FLAG_REALS("--depths", depths, n_depths, MAX_LIST, 0, 1),
        LCX_FLAG_WORD("--mode", mode, PASSKEY_MODES),
        LCX_FLAG_INT("--distractors", distractors, 1, 1000),
        LCX_FLAG_INT("--needles", needles, 1, LCX_NEEDLE_NAMES),
        LCX_FLAG_STR("--haystack", haystack),
        LCX_FLAG_INT("--seed", seed, 0, INT32_MAX),
        LCX_FLAG_STR("--json", json_out),
        LCX_FLAG_STR("--svg", svg_out),
        LCX_FLAG_STR("--passkey-svg", pk_svg),
        LCX_FLAG_STRS("--compare", compare, n_compare, MAX_COMPARE),
        LCX_FLAG_STR("--series", series),
        LCX_FLAG_STR("--tokenizer", tok_path),
        LCX_FLAG_CHOICE("--dtype", dtype, lcx_cli_weight_dtypes),
        LCX_FLAG_INT("--chunk", chunk, 1, 1 << 20),
        LCX_FLAG_STR("--backend", backend),
        LCX_FLAG_INT("--tp", tp, 1, 4096),
        LCX_FLAG_INT("--cp", cp, 1, 4096),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!ckpt) return lcx_cli_usage_error(CMD, "missing CKPT");
    if (data && text) return lcx_cli_usage_error(CMD, "--data and --text exclude each other");
    if (!data && !text && trials == 0)
        return lcx_cli_usage_error(CMD, "nothing to evaluate: give --data PREFIX or --text FILE, and/or --passkey N");
    if (svg_out && !data && !text) return lcx_cli_usage_error(CMD, "--svg draws perplexity: needs --data or --text");
    if (pk_svg && trials == 0) return lcx_cli_usage_error(CMD, "--passkey-svg needs --passkey N");
    if (needles > 1 && trials == 0) return lcx_cli_usage_error(CMD, "--needles needs --passkey N");
    if (haystack && trials == 0) return lcx_cli_usage_error(CMD, "--haystack needs --passkey N");
    const lcx_backend *be = NULL;
    if ((stop = lcx_cli_backend(CMD, backend, &be)) != LCX_CLI_RUN) return stop;
    lcx_eval_options o;
    lcx_eval_options_default(&o);
    o.ckpt = ckpt;
    o.data = data;
    o.text = text;
    o.tokenizer = tok_path;
    o.lengths = lengths;
    o.n_lengths = n_lengths;
    o.to = to;
    o.stride = stride;
    o.short_score = strcmp(shortd, "score") == 0;
    o.truncate = truncate;
    o.trials = trials;
    o.pk_lengths = pk_lengths;
    o.n_pk_lengths = n_pk_lengths;
    o.depths = depths;
    o.n_depths = n_depths;
    o.modes = strcmp(mode, "greedy") == 0   ? LCX_PASSKEY_GREEDY
              : strcmp(mode, "loglik") == 0 ? LCX_PASSKEY_LOGLIK
                                            : LCX_PASSKEY_GREEDY | LCX_PASSKEY_LOGLIK;
    o.distractors = distractors;
    o.needles = needles;
    o.haystack = haystack;
    o.seed = (uint64_t)seed;
    o.json_out = json_out;
    o.svg_out = svg_out;
    o.compare = compare;
    o.n_compare = n_compare;
    o.series = series;
    o.pk_svg = pk_svg;
    o.dtype = dtype;
    o.chunk = chunk;
    o.backend = be;
    o.quiet = quiet;
    /* under mpirun: world / (T x C) copies of the model, each on a TP x CP group, sharing out the windows and
     * trials over the gradient group (a copy's CP ranks consecutive) */
    lcx_cli_mesh mesh;
    if ((stop = lcx_cli_mesh_open(CMD, tp, cp, 0, be, &mesh)) != LCX_CLI_RUN) return stop;
    o.tp_comm = mesh.tp_size > 1 ? mesh.group[LCX_GROUP_TP] : NULL;
    o.cp_comm = mesh.cp_size > 1 ? mesh.group[LCX_GROUP_CP] : NULL;
    o.replicas = mesh.dp_size > 1 ? mesh.group[LCX_GROUP_GRAD] : NULL;
    lcx_terminal term;
    lcx_reporter rep = lcx_cli_reporter(&term, quiet);
    lcx_status st = lcx_eval_checkpoint(&o, &rep);
    if (st == LCX_OK) st = lcx_cli_flush_stdout();
    return lcx_cli_mesh_close(CMD, &mesh, st);
}
