/* lcextend tokenize: text / JSON lines -> Megatron indexed dataset (PREFIX.bin + PREFIX.idx), multithreaded. */
#include <jansson.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "formats/tokdata.h"
#include "src/core/fileio.h"
#include "src/tokenizer/tokenizer.h"

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

typedef struct doc {
    const char *p;
    size_t len;
    uint32_t file;
    uint64_t line; /* jsonl: 1-based line number */
} doc;

/* Documents are cut from the mapped inputs as they are needed, so memory stays bounded for any input size. */
typedef struct source {
    const lcx_mapping *maps;
    const uint8_t *is_jsonl;
    size_t n_files;
    int blank_lines;   /* text: documents are blank-line separated blocks (else one per file) */
    size_t f, off;     /* current file and byte offset in it */
    uint64_t line;     /* lines consumed in the current file */
    uint64_t done;     /* input bytes fully behind us (for progress) */
} source;

static int blank_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v') return 0;
    return 1;
}

/* Line [off, *end) of s (without its newline); *next is where the following line starts. */
static void line_at(const char *s, size_t n, size_t off, size_t *end, size_t *next) {
    const char *nl = memchr(s + off, '\n', n - off);
    *end = nl ? (size_t)(nl - s) : n;
    *next = nl ? *end + 1 : n;
}

static void next_file(source *src) {
    src->done += src->maps[src->f].size - src->off;
    src->f++;
    src->off = 0;
    src->line = 0;
}

/* The next document, or 0 at the end of the input. */
static int source_next(source *src, doc *d) {
    while (src->f < src->n_files) {
        const char *s = (const char *)src->maps[src->f].data;
        size_t n = src->maps[src->f].size;
        uint32_t f = (uint32_t)src->f;
        if (!src->is_jsonl[f] && !src->blank_lines) { /* the whole file */
            *d = (doc){s ? s : "", n, f, 0};
            src->off = n;
            next_file(src);
            return 1;
        }
        if (src->off >= n) { next_file(src); continue; }
        size_t end, next;
        line_at(s, n, src->off, &end, &next);
        src->line++;
        if (blank_line(s + src->off, end - src->off)) { /* skip separators / empty lines */
            src->done += next - src->off;
            src->off = next;
            continue;
        }
        if (src->is_jsonl[f]) { /* one line */
            *d = (doc){s + src->off, end - src->off, f, src->line};
            src->done += next - src->off;
            src->off = next;
            return 1;
        }
        size_t start = src->off, last_end = end; /* a block: lines up to the next blank one */
        size_t pos = next;
        while (pos < n) {
            line_at(s, n, pos, &end, &next);
            if (blank_line(s + pos, end - pos)) break;
            src->line++;
            last_end = end;
            pos = next;
        }
        *d = (doc){s + start, last_end - start, f, 0};
        src->done += pos - src->off;
        src->off = pos;
        return 1;
    }
    return 0;
}

static void progress(double t0, uint64_t done, uint64_t total, int final) {
    double dt = lcx_cli_now_s() - t0, mb = (double)done / 1e6, rate = dt > 0 ? mb / dt : 0;
    double frac = total ? (double)done / (double)total : 1.0;
    int w = 30, fill = (int)(frac * w + 0.5);
    char bar[64];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
    bar[w] = 0;
    double eta = rate > 0 ? ((double)total / 1e6 - mb) / rate : 0;
    fprintf(stderr, "\r[%s] %5.1f%% %.1f/%.1f MB %.1f MB/s ETA %d:%02d%s", bar, 100 * frac, mb, (double)total / 1e6,
            rate, (int)eta / 60, (int)eta % 60, final ? "\n" : "");
    fflush(stderr);
}

/* Text of a JSON-lines document: the string `field` of the object on that line. */
static lcx_status jsonl_text(const doc *d, const char *path, const char *field, json_t **root, const char **s,
                             size_t *n) {
    json_error_t err;
    *root = json_loadb(d->p, d->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!*root)
        return lcx_fail(LCX_ERR_FORMAT, "%s:%llu: invalid JSON at column %d: %s", path, (unsigned long long)d->line,
                        err.column, err.text);
    json_t *v = json_is_object(*root) ? json_object_get(*root, field) : NULL;
    if (!json_is_string(v))
        return lcx_fail(LCX_ERR_FORMAT, "%s:%llu: no string field '%s'", path, (unsigned long long)d->line, field);
    *s = json_string_value(v);
    *n = json_string_length(v);
    return LCX_OK;
}

/* EOS from tokenizer_config.json next to the tokenizer (string or {"content": ...}); -1 if none. */
static int64_t config_eos(const lcx_tokenizer *tok, const char *tok_path) {
    char *dir;
    if (lcx_is_dir(tok_path)) {
        dir = strdup(tok_path);
    } else {
        const char *sl = strrchr(tok_path, '/');
        dir = sl ? strndup(tok_path, (size_t)(sl - tok_path)) : strdup(".");
    }
    if (!dir) return -1;
    char *p = lcx_path_join(dir, "tokenizer_config.json");
    free(dir);
    if (!p || !lcx_is_file(p)) { free(p); return -1; }
    json_error_t err;
    json_t *root = json_load_file(p, 0, &err);
    free(p);
    int64_t id = -1;
    json_t *e = root ? json_object_get(root, "eos_token") : NULL;
    if (json_is_object(e)) e = json_object_get(e, "content");
    if (json_is_string(e)) id = lcx_tokenizer_token_id(tok, json_string_value(e), json_string_length(e));
    json_decref(root);
    return id;
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
    lcx_tokenizer *tok = NULL;
    lcx_mapping *maps = NULL;
    uint8_t *is_jsonl = NULL;
    doc *batch = NULL;
    lcx_tokdata_writer w = {0};
    lcx_tok_encoder **encs = NULL;
    lcx_tok_ids *res = NULL;
    lcx_status *sts = NULL;
    int nthreads = 0;
    if (!tok_path) USAGE("--tokenizer is required");
    if (!n_inputs) USAGE("--input is required");
    if (!output) USAGE("--output is required");
    if (strcmp(split, "file") != 0 && strcmp(split, "blank-line") != 0) USAGE("--split must be 'file' or 'blank-line'");
    if (format && strcmp(format, "text") != 0 && strcmp(format, "jsonl") != 0) USAGE("--format must be 'text' or 'jsonl'");
    if (no_eos && eos_arg) USAGE("--eos and --no-eos exclude each other");
    nthreads = omp_get_num_procs();
    if (threads_arg) {
        char *end;
        long t = strtol(threads_arg, &end, 10);
        if (*end || t < 1 || t > 1024) USAGE("--threads must be an integer in [1, 1024]");
        nthreads = (int)t;
    }

    json_object_seed(0); /* jansson's hash seed is its one global: set it before the worker threads parse */
    lcx_status st = lcx_tokenizer_open(tok_path, &tok);
    if (st != LCX_OK) { rc = lcx_cli_report(CMD, st); goto out; }
    int64_t eos = -1;
    if (!no_eos) {
        if (eos_arg) {
            char *end;
            long long v = strtoll(eos_arg, &end, 10);
            if (!*end && *eos_arg) eos = v;
            else eos = lcx_tokenizer_token_id(tok, eos_arg, strlen(eos_arg));
            if (eos < 0 || !lcx_tokenizer_token(tok, (uint32_t)eos, NULL)) USAGE("--eos '%s' is not a token of %s", eos_arg, tok_path);
        } else {
            eos = config_eos(tok, tok_path);
            if (eos < 0) eos = lcx_tokenizer_eos_id(tok);
            if (eos < 0) USAGE("%s names no EOS token: pass --eos TOKEN or --no-eos", tok_path);
        }
    }
    size_t vocab = lcx_tokenizer_vocab_size(tok);
    lcx_tokdata_dtype dtype = lcx_tokdata_dtype_for_vocab(vocab);
    if (dtype_arg) {
        if (strcmp(dtype_arg, "uint16") == 0) dtype = LCX_TOKDATA_U16;
        else if (strcmp(dtype_arg, "int32") == 0) dtype = LCX_TOKDATA_I32;
        else USAGE("--dtype must be uint16 or int32");
        if (dtype == LCX_TOKDATA_U16 && vocab > 65536) USAGE("--dtype uint16 cannot hold a vocabulary of %zu", vocab);
    }

    /* map inputs */
    maps = calloc(n_inputs, sizeof *maps);
    is_jsonl = calloc(n_inputs, 1);
    if (!maps || !is_jsonl) { rc = lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "inputs")); goto out; }
    uint64_t total_bytes = 0;
    for (size_t f = 0; f < n_inputs; f++) {
        st = lcx_map_file(inputs[f], &maps[f]);
        if (st != LCX_OK) { rc = lcx_cli_report(CMD, st); goto out; }
        size_t ln = strlen(inputs[f]);
        is_jsonl[f] = (uint8_t)(format ? strcmp(format, "jsonl") == 0
                                       : (ln > 6 && strcmp(inputs[f] + ln - 6, ".jsonl") == 0) ||
                                             (ln > 5 && strcmp(inputs[f] + ln - 5, ".json") == 0));
        total_bytes += maps[f].size;
    }
    source src = {maps, is_jsonl, n_inputs, strcmp(split, "blank-line") == 0, 0, 0, 0, 0};

    st = lcx_tokdata_writer_open(&w, output, dtype);
    if (st != LCX_OK) { rc = lcx_cli_report(CMD, st); goto out; }
    encs = calloc((size_t)nthreads, sizeof *encs);
    if (!encs) { rc = lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "encoders")); goto out; }
    for (int t = 0; t < nthreads; t++) {
        st = lcx_tok_encoder_init(tok, &encs[t]);
        if (st != LCX_OK) { rc = lcx_cli_report(CMD, st); goto out; }
    }

    /* Batches of documents: encoded in parallel, written in input order. */
    size_t batch_cap = 4096;
    res = calloc(batch_cap, sizeof *res);
    sts = calloc(batch_cap, sizeof *sts);
    batch = calloc(batch_cap, sizeof *batch);
    if (!res || !sts || !batch) { rc = lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "batch")); goto out; }
    const size_t batch_bytes = (size_t)nthreads << 22; /* 4 MB of text per thread per batch */
    double t0 = lcx_cli_now_s(), last = 0;
    int show = !quiet && isatty(2);
    uint64_t n_tokens = 0, n_docs = 0;
    for (;;) {
        size_t cnt = 0, bytes = 0;
        while (cnt < batch_cap && bytes < batch_bytes && source_next(&src, &batch[cnt])) bytes += batch[cnt++].len;
        if (cnt == 0) break;
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
        for (size_t k = 0; k < cnt; k++) {
            const doc *d = &batch[k];
            lcx_tok_encoder *enc = encs[omp_get_thread_num()];
            res[k].n = 0;
            lcx_status s2;
            if (is_jsonl[d->file]) {
                json_t *root = NULL;
                const char *txt = NULL;
                size_t tl = 0;
                s2 = jsonl_text(d, inputs[d->file], field, &root, &txt, &tl); /* names file:line itself */
                if (s2 == LCX_OK) {
                    s2 = lcx_tok_encode(enc, txt, tl, !no_special, &res[k]);
                    if (s2 != LCX_OK) lcx_fail_context(s2, "%s:%llu: ", inputs[d->file], (unsigned long long)d->line);
                }
                json_decref(root);
            } else {
                s2 = lcx_tok_encode(enc, d->p, d->len, !no_special, &res[k]);
                if (s2 != LCX_OK) lcx_fail_context(s2, "%s: ", inputs[d->file]);
            }
            if (s2 == LCX_OK && eos >= 0) s2 = lcx_tok_ids_push(&res[k], (uint32_t)eos);
            sts[k] = s2;
            if (s2 != LCX_OK) {
                /* keep the message: the thread-local detail is gone after the region */
                fprintf(stderr, "%slcextend %s: %s: %s\n", show ? "\n" : "", CMD, lcx_status_name(s2), lcx_last_error());
            }
        }
        for (size_t k = 0; k < cnt; k++) {
            if (sts[k] != LCX_OK) { rc = LCX_EXIT_FAIL; goto out; }
            st = lcx_tokdata_writer_add(&w, res[k].ids, res[k].n);
            if (st != LCX_OK) { rc = lcx_cli_report(CMD, st); goto out; }
            n_tokens += res[k].n;
        }
        n_docs += cnt;
        if (show && lcx_cli_now_s() - last > 0.2) { progress(t0, src.done, total_bytes, 0); last = lcx_cli_now_s(); }
    }
    st = lcx_tokdata_writer_commit(&w);
    if (st != LCX_OK) { rc = lcx_cli_report(CMD, st); goto out; }
    if (show) progress(t0, total_bytes, total_bytes, 1);
    double dt = lcx_cli_now_s() - t0;
    if (!quiet)
        fprintf(stderr, "tokenized %llu documents, %.1f MB -> %llu tokens (%s) in %.2f s, %.1f MB/s, %d threads: %s.bin/.idx\n",
                (unsigned long long)n_docs, (double)total_bytes / 1e6, (unsigned long long)n_tokens, lcx_tokdata_dtype_name(dtype), dt,
                dt > 0 ? (double)total_bytes / 1e6 / dt : 0.0, nthreads, output);
out:
    lcx_tokdata_writer_abort(&w);
    for (size_t k = 0; res && k < batch_cap; k++) lcx_tok_ids_free(&res[k]);
    free(res);
    free(sts);
    for (int t = 0; encs && t < nthreads; t++) lcx_tok_encoder_free(encs[t]);
    free(encs);
    for (size_t f = 0; maps && f < n_inputs; f++) lcx_unmap(&maps[f]);
    free(maps);
    free(is_jsonl);
    free(batch);
    lcx_tokenizer_free(tok);
    free(inputs);
    return rc;
#undef USAGE
}
