/* lcextend export: a checkpoint of any form -> Hugging Face directory or GGUF file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "src/convert/convert.h"

static const char *CMD = "export";

static void help(void) {
    printf("usage: lcextend export CKPT --format hf|gguf --out PATH [--dtype D] [--shard-size SIZE]\n"
           "\n"
           "Write the model of a checkpoint in any form (an .lcx directory: its `param` tensors, any layout; an HF\n"
           "model directory, .safetensors file or index with config.json beside it; a .gguf file: dequantised,\n"
           "q/k rows un-permuted, config from its metadata) as\n"
           "  hf    a Hugging Face directory: config.json (rope in the legacy rope_theta + rope_scaling form),\n"
           "        tokenizer files and generation_config.json copied through, model.safetensors or shards +\n"
           "        model.safetensors.index.json (written into PATH.tmp-*, renamed at the end)\n"
           "  gguf  one GGUF file (architecture llama for llama and mistral models, qwen2, qwen3), metadata with rope\n"
           "        (linear / yarn keys; llama3 as the rope_freqs.weight tensor; dynamic and longrope refused),\n"
           "        llama q/k rows permuted for llama.cpp, tokenizer metadata (the source GGUF's, or converted\n"
           "        from tokenizer.json: byte-level or SentencePiece-style BPE; others are left out with a warning)\n"
           "\n"
           "options:\n"
           "  --out PATH          directory (hf) or file (gguf) to create; must not exist\n"
           "  --dtype D           hf: bf16 | f16 | f32; gguf: f32 | f16 | bf16 | q8_0 (matrices; 1-D tensors stay\n"
           "                      f32). Default: as stored\n"
           "  --shard-size SIZE   hf: largest safetensors file (default 5GB), e.g. 2GB, 500MiB\n"
           "  --quiet             no progress bar\n"
           "\n"
           "examples:\n"
           "  lcextend export run/step-002000 --format hf --out ./llama-32k --dtype bf16\n"
           "  lcextend export llama.lcx --format gguf --out llama-32k-q8_0.gguf --dtype q8_0\n"
           "  lcextend export SmolLM2-135M-Instruct.Q4_1.gguf --format hf --out smollm2-hf --dtype bf16\n");
}

static void warn(void *user, const char *msg) {
    (void)user;
    fprintf(stderr, "lcextend export: warning: %s\n", msg);
}

static const lcx_cli_word FORMATS[] = {{"hf", 0}, {"gguf", 0}, {NULL, 0}};
static const lcx_cli_word DTYPES[] = {
    {"bf16", LCX_BF16}, {"f16", LCX_F16}, {"f32", LCX_F32}, {"q8_0", LCX_Q8_0}, {NULL, 0}};

int lcx_cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *format = NULL;
    uint64_t shard = 0;
    lcx_convert_opts o;
    lcx_convert_opts_default(&o);
    int quiet = 0;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_SWITCH("-q", quiet),
        LCX_FLAG_STR("--out", out),
        LCX_FLAG_WORD("--format", format, FORMATS),
        LCX_FLAG_CHOICE("--dtype", o.dtype, DTYPES),
        LCX_FLAG_SIZE("--shard-size", shard, LCX_BYTES_DECIMAL),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &src, "one checkpoint only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!src) return lcx_cli_usage_error(CMD, "missing the checkpoint to export");
    if (!out) return lcx_cli_usage_error(CMD, "missing --out");
    if (!format) return lcx_cli_usage_error(CMD, "missing --format (hf or gguf)");
    int gguf = !strcmp(format, "gguf");
    if (o.dtype == LCX_Q8_0 && !gguf)
        return lcx_cli_usage_error(CMD, "--dtype 'q8_0' goes with --format gguf (hf: bf16, f16 or f32)");
    if (shard) {
        if (gguf) return lcx_cli_usage_error(CMD, "--shard-size applies to --format hf only");
        o.shard_bytes = shard;
    }
    lcx_cli_bar bar;
    lcx_cli_bar_init(&bar, quiet, "tensors");
    o.progress = lcx_cli_progress;
    o.progress_user = &bar;
    o.warn = warn;
    lcx_status st = gguf ? lcx_export_gguf(src, out, &o) : lcx_export_hf(src, out, &o);
    lcx_cli_bar_end(&bar);
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    if (!quiet) fprintf(stderr, "wrote %s\n", out);
    return LCX_EXIT_OK;
}
