/* lcextend tokenize: text / JSON lines -> Megatron indexed dataset (PREFIX.bin + PREFIX.idx), multithreaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/tokdata.h"
#include "src/tokenizer/tokenize_files.h"

static const char *const CMD = "tokenize";

static void help(FILE *f) {
    fprintf(f,
            "usage: lcextend tokenize --tokenizer PATH --input FILE [FILE ...] --output PREFIX [options]\n"
            "\n"
            "Tokenizes documents exactly like Hugging Face `tokenizers` and writes a Megatron-LM indexed dataset\n"
            "PREFIX.bin + PREFIX.idx (one sequence per document, EOS appended to every document).\n"
            "\n"
            "  --tokenizer PATH   tokenizer.json, a directory holding one, or a .gguf file\n"
            "  --input FILE ...   input files (the flag may also be repeated)\n"
            "  --output PREFIX    output prefix\n"
            "  --format F         text | jsonl (default: jsonl for *.jsonl / *.json, text otherwise)\n"
            "  --split S          text: 'file' (one document per file, default) or 'blank-line' (documents are\n"
            "                     separated by lines that are empty or only whitespace)\n"
            "  --field NAME       jsonl: the string field holding the text (default: text)\n"
            "  --eos TOKEN        end-of-document token (string or numeric id); default: the tokenizer's EOS\n"
            "                     (tokenizer_config.json's eos_token next to tokenizer.json, GGUF metadata, or\n"
            "                     a special token named <|end_of_text|>, </s>, <|endoftext|>, ...)\n"
            "  --no-eos           do not append EOS\n"
            "  --no-special       do not apply the post-processor template (no BOS)\n"
            "  --dtype D          uint16 | int32 (default: Megatron's choice, uint16 when the vocabulary < 65500)\n"
            "  --threads N        worker threads (default: all cores)\n"
            "  --quiet            no progress bar\n"
            "\n"
            "examples:\n"
            "  lcextend tokenize --tokenizer model/ --input books/*.txt --output data/books\n"
            "  lcextend tokenize --tokenizer tokenizer.json --input web.jsonl --field content --output data/web\n"
            "  lcextend tokenize --tokenizer model.gguf --input notes.txt --split blank-line --output data/notes\n");
}

int lcx_cmd_tokenize(int argc, char **argv) {
    const char *tok_path = NULL, *output = NULL, *format = NULL, *split = "file", *field = "text", *eos_arg = NULL;
    const char *dtype_arg = NULL, *threads_arg = NULL;
    int no_eos = 0, no_special = 0, quiet = 0, err = 0;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    size_t n_inputs = 0;
    if (!inputs) return lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "arguments"));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { help(stdout); free(inputs); return LCX_EXIT_OK; }
        if (strcmp(a, "--no-eos") == 0) { no_eos = 1; continue; }
        if (strcmp(a, "--no-special") == 0) { no_special = 1; continue; }
        if (strcmp(a, "--quiet") == 0) { quiet = 1; continue; }
        if (strcmp(a, "--input") == 0 || strncmp(a, "--input=", 8) == 0) {
            if (a[7] == '=') inputs[n_inputs++] = a + 8;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) inputs[n_inputs++] = argv[++i];
            continue;
        }
        if (lcx_cli_flag_value(argc, argv, &i, "--tokenizer", &v, CMD, &err)) { tok_path = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--output", &v, CMD, &err)) { output = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--format", &v, CMD, &err)) { format = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--split", &v, CMD, &err)) { split = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--field", &v, CMD, &err)) { field = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--eos", &v, CMD, &err)) { eos_arg = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--dtype", &v, CMD, &err)) { dtype_arg = v; }
        else if (lcx_cli_flag_value(argc, argv, &i, "--threads", &v, CMD, &err)) { threads_arg = v; }
        else { free(inputs); return lcx_cli_usage_error(CMD, "unknown argument '%s'", a); }
        if (err) { free(inputs); return LCX_EXIT_USAGE; }
    }
    int rc = LCX_EXIT_OK;
#define USAGE(...) do { rc = lcx_cli_usage_error(CMD, __VA_ARGS__); goto out; } while (0)
    lcx_tokenize_options o = {.tokenizer = tok_path, .inputs = inputs, .n_inputs = n_inputs, .output = output,
                              .field = field, .eos = eos_arg, .no_eos = no_eos, .no_special = no_special,
                              .dtype = -1};
    if (!tok_path) USAGE("--tokenizer is required");
    if (!n_inputs) USAGE("--input is required");
    if (!output) USAGE("--output is required");
    if (strcmp(split, "file") != 0 && strcmp(split, "blank-line") != 0) USAGE("--split must be 'file' or 'blank-line'");
    o.blank_line_split = strcmp(split, "blank-line") == 0;
    if (format && strcmp(format, "text") != 0 && strcmp(format, "jsonl") != 0) USAGE("--format must be 'text' or 'jsonl'");
    o.format = !format ? LCX_INPUT_AUTO : strcmp(format, "jsonl") == 0 ? LCX_INPUT_JSONL : LCX_INPUT_TEXT;
    if (no_eos && eos_arg) USAGE("--eos and --no-eos exclude each other");
    if (threads_arg) {
        char *end;
        long t = strtol(threads_arg, &end, 10);
        if (*end || t < 1 || t > 1024) USAGE("--threads must be an integer in [1, 1024]");
        o.threads = (int)t;
    }
    if (dtype_arg) {
        if (strcmp(dtype_arg, "uint16") == 0) o.dtype = LCX_TOKDATA_U16;
        else if (strcmp(dtype_arg, "int32") == 0) o.dtype = LCX_TOKDATA_I32;
        else USAGE("--dtype must be uint16 or int32");
    }
    lcx_terminal term;
    lcx_reporter rep = lcx_cli_reporter(&term, quiet);
    lcx_tokenize_result res;
    lcx_status st = lcx_tokenize_files(&o, &rep, &res);
    if (st != LCX_OK) rc = res.bad_option ? lcx_cli_usage_error(CMD, "%s", lcx_last_error()) : lcx_cli_report(CMD, st);
out:
    free(inputs);
    return rc;
#undef USAGE
}
