/* lcextend tokenize: text / JSON lines -> Megatron indexed dataset (PREFIX.bin + PREFIX.idx), multithreaded. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "formats/tokdata.h"
#include "src/tokenizer/tokenize_files.h"

static const char *const CMD = "tokenize";

static void help(void) {
    fprintf(stdout,
            "usage: lcextend tokenize --tokenizer PATH --input FILE [FILE ...] --output PREFIX [options]\n"
            "\n"
            "Tokenizes documents exactly like Hugging Face `tokenizers` and writes a Megatron-LM indexed dataset\n"
            "PREFIX.bin + PREFIX.idx (one sequence per document, EOS appended to every document).\n"
            "\n"
            "  --tokenizer PATH   tokenizer.json, a directory holding one, or a .gguf file\n"
            "  --input FILE ...   input files (the flag may also be repeated); FILE.zst and FILE.gz are\n"
            "                     decompressed as they are read (e.g. data.jsonl.zst, c4.json.gz)\n"
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

static const lcx_cli_word SPLITS[] = {{"file", 0}, {"blank-line", 1}, {NULL, 0}};
static const lcx_cli_word FORMATS[] = {{"text", LCX_INPUT_TEXT}, {"jsonl", LCX_INPUT_JSONL}, {NULL, 0}};
static const lcx_cli_word DTYPES[] = {{"uint16", LCX_TOKDATA_U16}, {"int32", LCX_TOKDATA_I32}, {NULL, 0}};

int lcx_cmd_tokenize(int argc, char **argv) {
    lcx_tokenize_options o = {.format = LCX_INPUT_AUTO, .field = "text", .dtype = -1};
    int n_inputs = 0, quiet = 0;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs); /* room for every argument */
    if (!inputs) return lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "arguments"));
    const lcx_cli_flag flags[] = {
        LCX_FLAG_STR("--tokenizer", o.tokenizer),
        /* --input FILE [FILE ...]: the files after it, up to the next flag; repeatable */
        {.name = "--input", .kind = LCX_CLI_STRS, .to.strs = inputs, .count = &n_inputs, .cap = argc, .greedy = 1},
        LCX_FLAG_STR("--output", o.output),
        {.name = "--format", .kind = LCX_CLI_CHOICE, .to.integer = &o.format, .size = sizeof o.format,
         .words = FORMATS, .rule = "must be 'text' or 'jsonl'"},
        {.name = "--split", .kind = LCX_CLI_CHOICE, .to.integer = &o.blank_line_split,
         .size = sizeof o.blank_line_split, .words = SPLITS, .rule = "must be 'file' or 'blank-line'"},
        LCX_FLAG_STR("--field", o.field),
        LCX_FLAG_STR("--eos", o.eos),
        LCX_FLAG_SWITCH("--no-eos", o.no_eos),
        LCX_FLAG_SWITCH("--no-special", o.no_special),
        {.name = "--dtype", .kind = LCX_CLI_CHOICE, .to.integer = &o.dtype, .size = sizeof o.dtype, .words = DTYPES,
         .rule = "must be uint16 or int32"},
        LCX_FLAG_INT("--threads", o.threads, 1, 1024),
        LCX_FLAG_SWITCH("--quiet", quiet),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), NULL, NULL};
    int rc = lcx_cli_parse(&spec, argc, argv);
    if (rc != LCX_CLI_RUN) goto out;
    rc = LCX_EXIT_OK;
    o.inputs = inputs;
    o.n_inputs = (size_t)n_inputs;
#define USAGE(...) do { rc = lcx_cli_usage_error(CMD, __VA_ARGS__); goto out; } while (0)
    if (!o.tokenizer) USAGE("--tokenizer is required");
    if (!n_inputs) USAGE("--input is required");
    if (!o.output) USAGE("--output is required");
    if (o.no_eos && o.eos) USAGE("--eos and --no-eos exclude each other");
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
