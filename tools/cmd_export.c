/* lcextend export: .lcx -> Hugging Face directory or GGUF file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "src/convert/convert.h"

static const char *CMD = "export";

static void help(void) {
    printf("usage: lcextend export X.lcx --format hf|gguf --out PATH [--dtype D] [--shard-size SIZE]\n"
           "\n"
           "Write the model of a checkpoint (its `param` tensors, any layout) as\n"
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
           "  lcextend export llama.lcx --format gguf --out llama-32k-q8_0.gguf --dtype q8_0\n");
}

static void warn(void *user, const char *msg) {
    (void)user;
    fprintf(stderr, "lcextend export: warning: %s\n", msg);
}

int lcx_cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *format = NULL, *dtype = NULL, *shard = NULL;
    lcx_convert_opts o;
    lcx_convert_opts_default(&o);
    int quiet = 0, err = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return LCX_EXIT_OK;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
            continue;
        }
        if (lcx_cli_flag_value(argc, argv, &i, "--out", &out, CMD, &err) ||
            lcx_cli_flag_value(argc, argv, &i, "--format", &format, CMD, &err) ||
            lcx_cli_flag_value(argc, argv, &i, "--dtype", &dtype, CMD, &err) ||
            lcx_cli_flag_value(argc, argv, &i, "--shard-size", &shard, CMD, &err)) {
            if (err) return LCX_EXIT_USAGE;
            continue;
        }
        if (a[0] == '-' && a[1]) return lcx_cli_usage_error(CMD, "unknown flag '%s'", a);
        if (src) return lcx_cli_usage_error(CMD, "unexpected argument '%s' (one checkpoint only)", a);
        src = a;
    }
    if (!src) return lcx_cli_usage_error(CMD, "missing the checkpoint to export");
    if (!out) return lcx_cli_usage_error(CMD, "missing --out");
    if (!format) return lcx_cli_usage_error(CMD, "missing --format (hf or gguf)");
    int gguf = !strcmp(format, "gguf");
    if (!gguf && strcmp(format, "hf")) return lcx_cli_usage_error(CMD, "--format '%s': expected hf or gguf", format);
    if (dtype) {
        if (!strcmp(dtype, "bf16")) o.dtype = LCX_BF16;
        else if (!strcmp(dtype, "f16")) o.dtype = LCX_F16;
        else if (!strcmp(dtype, "f32")) o.dtype = LCX_F32;
        else if (!strcmp(dtype, "q8_0") && gguf) o.dtype = LCX_Q8_0;
        else return lcx_cli_usage_error(CMD, "--dtype '%s': expected bf16, f16, f32%s", dtype, gguf ? " or q8_0" : "");
    }
    if (shard) {
        if (gguf) return lcx_cli_usage_error(CMD, "--shard-size applies to --format hf only");
        if (lcx_parse_size(shard, &o.shard_bytes) != LCX_OK || o.shard_bytes == 0)
            return lcx_cli_usage_error(CMD, "--shard-size '%s': expected a size like 5GB or 500MiB", shard);
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
