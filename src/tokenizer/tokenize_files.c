/* tokenize_files: see tokenize_files.h. */
#include "src/tokenizer/tokenize_files.h"

#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/core/fileio.h"
#include "src/core/strbuf.h" /* lcx_printable */
#include "src/core/units.h"
#include "src/core/zstream.h"
#include "src/tokenizer/tokenizer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct doc {
    const char *p;
    size_t len;
    uint32_t file;
    uint64_t line; /* jsonl: 1-based line number */
} doc;

/* A compressed input (.zst): its decompressed bytes [0, len) of a buffer refilled between batches. */
typedef struct zinput {
    lcx_zstream z;
    char *buf;
    size_t len, cap;
} zinput;

/* Documents are cut from the inputs as they are needed, so memory stays bounded for any input size: a plain file
 * is mapped, a compressed one decompressed into a buffer that holds a batch's documents (and grows to hold one
 * long document, up to ZBUF_MAX). */
#define ZBUF_MIN ((size_t)8 << 20)
#define ZBUF_MAX ((size_t)1 << 30)
typedef struct source {
    const lcx_mapping *maps;      /* plain inputs (a compressed one's entry is empty) */
    zinput *zin;                  /* compressed inputs (a plain one's entry is zeroed) */
    size_t zbuf_min;              /* their first buffer: a batch's bytes, so that every thread has work */
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
    const zinput *zi = &src->zin[src->f];
    src->done += zi->z.path ? zi->z.in.size : src->maps[src->f].size - src->off;
    src->f++;
    src->off = 0;
    src->line = 0;
}

/* Input bytes behind a document or separator of a plain file (a compressed one counts whole files). */
static void advance(source *src, size_t to) {
    if (!src->zin[src->f].z.path) src->done += to - src->off;
    src->off = to;
}

enum { SRC_END = 0, SRC_DOC, SRC_MORE };

/* The next document (SRC_DOC), the end of the input (SRC_END), or SRC_MORE: a compressed input needs its buffer
 * refilled (source_refill, once no document of the batch points into it) before its next document is whole. */
static int source_next(source *src, doc *d) {
    while (src->f < src->n_files) {
        const zinput *zi = &src->zin[src->f];
        const char *s = zi->z.path ? zi->buf : (const char *)src->maps[src->f].data;
        size_t n = zi->z.path ? zi->len : src->maps[src->f].size;
        const int eof = !zi->z.path || zi->z.eof; /* all of the file is in [0, n) */
        uint32_t f = (uint32_t)src->f;
        if (!src->is_jsonl[f] && !src->blank_lines) { /* the whole file */
            if (!eof) return SRC_MORE;
            *d = (doc){s ? s : "", n, f, 0};
            advance(src, n);
            next_file(src);
            return SRC_DOC;
        }
        if (src->off >= n) {
            if (!eof) return SRC_MORE;
            next_file(src);
            continue;
        }
        size_t end, next;
        line_at(s, n, src->off, &end, &next);
        if (end == n && !eof) return SRC_MORE; /* the line goes on past the buffer */
        src->line++;
        if (blank_line(s + src->off, end - src->off)) { /* skip separators / empty lines */
            advance(src, next);
            continue;
        }
        if (src->is_jsonl[f]) { /* one line */
            *d = (doc){s + src->off, end - src->off, f, src->line};
            advance(src, next);
            return SRC_DOC;
        }
        size_t start = src->off, last_end = end; /* a block: lines up to the next blank one */
        size_t pos = next;
        uint64_t line0 = src->line - 1;
        while (pos < n) {
            line_at(s, n, pos, &end, &next);
            if (blank_line(s + pos, end - pos)) break;
            src->line++;
            last_end = end;
            pos = next;
        }
        if (!eof && (pos >= n || end == n)) { /* the block, or its last line, may go on past the buffer */
            src->line = line0;
            return SRC_MORE;
        }
        *d = (doc){s + start, last_end - start, f, 0};
        advance(src, pos);
        return SRC_DOC;
    }
    return SRC_END;
}

/* The current compressed input's buffer: the bytes not yet cut into documents moved to its start, then filled
 * from the stream; grown when one document fills it (up to ZBUF_MAX). Only between batches. */
static lcx_status source_refill(source *src) {
    zinput *zi = &src->zin[src->f];
    const char *path = zi->z.path;
    if (src->off) memmove(zi->buf, zi->buf + src->off, zi->len - src->off); /* (no buffer yet: off 0) */
    zi->len -= src->off;
    src->off = 0;
    if (zi->len == zi->cap && zi->z.in_pos == zi->z.in.size && !zi->z.frame_open) { /* it ended at the edge */
        zi->z.eof = 1;
        return LCX_OK;
    }
    if (zi->len == zi->cap) {
        LCX_FAIL_IF(zi->cap >= ZBUF_MAX, LCX_ERR_UNSUPPORTED,
                    "%s: a document of more than %zu MiB once decompressed (after line %llu): too long to tokenize "
                    "from a compressed file", path, ZBUF_MAX >> 20, (unsigned long long)src->line);
        size_t cap = zi->cap ? 2 * zi->cap : src->zbuf_min;
        char *b = realloc(zi->buf, cap);
        LCX_FAIL_IF(!b, LCX_ERR_OOM, "%s: out of memory for a %zu MiB buffer", path, cap >> 20);
        zi->buf = b, zi->cap = cap;
    }
    size_t got = 0;
    LCX_TRY(lcx_zstream_read(&zi->z, (uint8_t *)zi->buf + zi->len, zi->cap - zi->len, &got));
    zi->len += got;
    return LCX_OK;
}

/* Input bytes behind the source: whole files, and of a compressed one the compressed bytes read so far. */
static uint64_t source_done(const source *src) {
    return src->done + (src->f < src->n_files ? src->zin[src->f].z.in_pos : 0);
}

/* Compressed inputs the source has left: their buffers are freed once the batch cut from them is written. */
static void release_behind(source *src) {
    for (size_t f = 0; f < src->f && f < src->n_files; f++) {
        free(src->zin[f].buf);
        src->zin[f].buf = NULL;
        src->zin[f].len = src->zin[f].cap = 0;
    }
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

/* tokenizer_config.json is small (chat template, added-token table): a bound on what is read. */
#define TOKENIZER_CONFIG_MAX_BYTES ((size_t)64 << 20)

/* EOS from tokenizer_config.json next to the tokenizer (a string or {"content": ...}); *id -1 when the file is
 * absent or names none (null). A file that is there is validated where it is read: bad JSON, an eos_token of
 * another type or one that is no token of the tokenizer is an error, not a silent fall back to another EOS. */
static lcx_status config_eos(const lcx_tokenizer *tok, const char *tok_path, int64_t *id) {
    *id = -1;
    char *dir;
    if (lcx_is_dir(tok_path)) {
        dir = strdup(tok_path);
    } else {
        const char *sl = strrchr(tok_path, '/');
        dir = sl ? strndup(tok_path, (size_t)(sl - tok_path)) : strdup(".");
    }
    char *p = dir ? lcx_path_join(dir, "tokenizer_config.json") : NULL;
    free(dir);
    LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
    int present = 0;
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    lcx_status st = lcx_optional_input(p, 0, &present);
    if (st == LCX_OK && present) st = lcx_read_input(p, 0, TOKENIZER_CONFIG_MAX_BYTES, &text, &len);
    if (st == LCX_OK && present) {
        json_error_t err;
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
        if (!root)
            st = lcx_fail(LCX_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", p, err.text, err.line,
                          err.column);
    }
    if (st == LCX_OK && root) {
        json_t *e = json_is_object(root) ? json_object_get(root, "eos_token") : NULL;
        if (json_is_object(e)) e = json_object_get(e, "content");
        char shown[96];
        if (!json_is_object(root))
            st = lcx_fail(LCX_ERR_FORMAT, "%s: not a JSON object", p);
        else if (e && !json_is_null(e) && !json_is_string(e))
            st = lcx_fail(LCX_ERR_FORMAT, "%s: eos_token must be a string or {\"content\": string}", p);
        else if (json_is_string(e) &&
                 (*id = lcx_tokenizer_token_id(tok, json_string_value(e), json_string_length(e))) < 0)
            st = lcx_fail(LCX_ERR_FORMAT, "%s: eos_token '%s' is not a token of %s", p,
                          lcx_printable(json_string_value(e), shown, sizeof shown), tok_path);
    }
    json_decref(root);
    free(text);
    free(p);
    return st;
}

/* The end-of-document id: o->eos as a number or a token, else the tokenizer's own; -1 with no_eos. */
static lcx_status resolve_eos(const lcx_tokenize_options *o, const lcx_tokenizer *tok, int64_t *eos, int *bad) {
    *eos = -1;
    if (o->no_eos) return LCX_OK;
    if (o->eos) {
        if (lcx_parse_int(o->eos, 0, UINT32_MAX, eos) != LCX_OK) /* not an id: a token's text */
            *eos = lcx_tokenizer_token_id(tok, o->eos, strlen(o->eos));
        if (*eos < 0 || *eos > UINT32_MAX || !lcx_tokenizer_token(tok, (uint32_t)*eos, NULL)) {
            *bad = 1;
            return lcx_fail(LCX_ERR_INVALID, "--eos '%s' is not a token of %s", o->eos, o->tokenizer);
        }
        return LCX_OK;
    }
    LCX_TRY(config_eos(tok, o->tokenizer, eos));
    if (*eos < 0) *eos = lcx_tokenizer_eos_id(tok);
    if (*eos < 0) {
        *bad = 1;
        return lcx_fail(LCX_ERR_INVALID, "%s names no EOS token: pass --eos TOKEN or --no-eos", o->tokenizer);
    }
    return LCX_OK;
}

static int is_jsonl_name(const char *path) {
    size_t n = lcx_zstream_stem_len(path); /* web.jsonl.zst and c4.json.gz are JSON lines */
    return (n > 6 && strncmp(path + n - 6, ".jsonl", 6) == 0) || (n > 5 && strncmp(path + n - 5, ".json", 5) == 0);
}

static void report_progress(const lcx_reporter *r, double t0, uint64_t done, uint64_t total) {
    double dt = now_s() - t0, rate = dt > 0 ? (double)done / 1e6 / dt : 0;
    lcx_report_progress(r, &(lcx_progress){.what = "tokenize: MB", .done = (int64_t)(done / 1000000),
                                          .total = (int64_t)((total + 999999) / 1000000), .rate = rate,
                                          .unit = "MB/s",
                                          .eta_s = rate > 0 ? (double)(total - done) / 1e6 / rate : -1});
}

lcx_status lcx_tokenize_files(const lcx_tokenize_options *o, const lcx_reporter *r, lcx_tokenize_result *res) {
    *res = (lcx_tokenize_result){0};
    const char *field = o->field ? o->field : "text";
    int nthreads = o->threads > 0 ? o->threads : omp_get_num_procs();
    lcx_tokenizer *tok = NULL;
    lcx_mapping *maps = NULL;
    zinput *zin = NULL;
    uint8_t *is_jsonl = NULL;
    doc *batch = NULL;
    lcx_tokdata_writer w = {0};
    lcx_tok_encoder **encs = NULL;
    lcx_tok_ids *ids = NULL;
    lcx_status *sts = NULL;
    char **msgs = NULL;
    const size_t batch_cap = 4096;
    lcx_status st;

    json_object_seed(0); /* jansson's hash seed is its one global: set it before the worker threads parse */
    LCX_TRY_GOTO(lcx_tokenizer_open(o->tokenizer, &tok), out);
    int64_t eos;
    LCX_TRY_GOTO(resolve_eos(o, tok, &eos, &res->bad_option), out);
    size_t vocab = lcx_tokenizer_vocab_size(tok);
    lcx_tokdata_dtype dtype = o->dtype < 0 ? lcx_tokdata_dtype_for_vocab(vocab) : (lcx_tokdata_dtype)o->dtype;
    if (dtype == LCX_TOKDATA_U16 && vocab > 65536) {
        res->bad_option = 1;
        st = lcx_fail(LCX_ERR_INVALID, "--dtype uint16 cannot hold a vocabulary of %zu", vocab);
        goto out;
    }

    maps = calloc(o->n_inputs, sizeof *maps);
    zin = calloc(o->n_inputs, sizeof *zin);
    is_jsonl = calloc(o->n_inputs, 1);
    if (!maps || !zin || !is_jsonl) { st = lcx_fail(LCX_ERR_OOM, "inputs: out of memory"); goto out; }
    for (size_t f = 0; f < o->n_inputs; f++) {
        if (lcx_zstream_kind(o->inputs[f]) != LCX_Z_NONE) { /* read as a stream (progress: compressed bytes) */
            LCX_TRY_GOTO(lcx_zstream_open(o->inputs[f], &zin[f].z), out);
            res->bytes += zin[f].z.in.size;
        } else {
            LCX_TRY_GOTO(lcx_map_file(o->inputs[f], &maps[f]), out);
            res->bytes += maps[f].size;
        }
        is_jsonl[f] = (uint8_t)(o->format == LCX_INPUT_AUTO ? is_jsonl_name(o->inputs[f]) : o->format == LCX_INPUT_JSONL);
    }
    /* batches of documents: encoded in parallel, written in input order; 4 MB of text per thread per batch */
    const size_t batch_bytes = (size_t)nthreads << 22;
    source src = {.maps = maps, .zin = zin, .zbuf_min = 2 * batch_bytes > ZBUF_MIN ? 2 * batch_bytes : ZBUF_MIN,
                  .is_jsonl = is_jsonl, .n_files = o->n_inputs, .blank_lines = o->blank_line_split};

    LCX_TRY_GOTO(lcx_tokdata_writer_create(&w, o->output, dtype), out);
    encs = calloc((size_t)nthreads, sizeof *encs);
    ids = calloc(batch_cap, sizeof *ids);
    sts = calloc(batch_cap, sizeof *sts);
    msgs = calloc(batch_cap, sizeof *msgs);
    batch = calloc(batch_cap, sizeof *batch);
    if (!encs || !ids || !sts || !msgs || !batch) { st = lcx_fail(LCX_ERR_OOM, "tokenize: out of memory"); goto out; }
    for (int t = 0; t < nthreads; t++) LCX_TRY_GOTO(lcx_tok_encoder_init(tok, &encs[t]), out);

    double t0 = now_s(), last = 0;
    for (;;) {
        size_t cnt = 0, bytes = 0;
        while (cnt < batch_cap && bytes < batch_bytes) {
            int k = source_next(&src, &batch[cnt]);
            if (k == SRC_DOC) {
                bytes += batch[cnt++].len;
            } else if (k == SRC_MORE && cnt == 0) { /* no document points into the buffer yet: refill it now */
                LCX_TRY_GOTO(source_refill(&src), out);
            } else {
                break; /* the end, or a refill after this batch */
            }
        }
        if (cnt == 0) break;
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
        for (size_t k = 0; k < cnt; k++) {
            const doc *d = &batch[k];
            lcx_tok_encoder *enc = encs[omp_get_thread_num()];
            ids[k].n = 0;
            lcx_status s2;
            if (is_jsonl[d->file]) {
                json_t *root = NULL;
                const char *txt = NULL;
                size_t tl = 0;
                s2 = jsonl_text(d, o->inputs[d->file], field, &root, &txt, &tl); /* names file:line itself */
                if (s2 == LCX_OK) {
                    s2 = lcx_tok_encode(enc, txt, tl, !o->no_special, &ids[k]);
                    if (s2 != LCX_OK) lcx_fail_context(s2, "%s:%llu: ", o->inputs[d->file], (unsigned long long)d->line);
                }
                json_decref(root);
            } else {
                s2 = lcx_tok_encode(enc, d->p, d->len, !o->no_special, &ids[k]);
                if (s2 != LCX_OK) lcx_fail_context(s2, "%s: ", o->inputs[d->file]);
            }
            if (s2 == LCX_OK && eos >= 0) s2 = lcx_tok_ids_push(&ids[k], (uint32_t)eos);
            sts[k] = s2;
            if (s2 != LCX_OK) msgs[k] = strdup(lcx_last_error()); /* the detail is thread-local */
        }
        for (size_t k = 0; k < cnt; k++) {
            if (sts[k] != LCX_OK) { /* the first failing document in input order */
                st = lcx_fail(sts[k], "%s", msgs[k] ? msgs[k] : "tokenize failed");
                goto out;
            }
            LCX_TRY_GOTO(lcx_tokdata_writer_add(&w, ids[k].ids, ids[k].n), out);
            res->tokens += ids[k].n;
        }
        res->documents += cnt;
        release_behind(&src);
        if (now_s() - last > 0.2) { report_progress(r, t0, source_done(&src), res->bytes); last = now_s(); }
    }
    LCX_TRY_GOTO(lcx_tokdata_writer_commit(&w), out);
    report_progress(r, t0, res->bytes, res->bytes);
    lcx_report_progress_end(r);
    res->seconds = now_s() - t0;
    res->threads = nthreads;
    res->dtype = dtype;
    lcx_report(r, LCX_REPORT_NOTE,
               "tokenized %llu documents, %.1f MB -> %llu tokens (%s) in %.2f s, %.1f MB/s, %d threads: %s.bin/.idx",
               (unsigned long long)res->documents, (double)res->bytes / 1e6, (unsigned long long)res->tokens,
               lcx_tokdata_dtype_name(dtype), res->seconds,
               res->seconds > 0 ? (double)res->bytes / 1e6 / res->seconds : 0.0, nthreads, o->output);
    lcx_report_event(r, "tokenized", "{\"documents\": %llu, \"tokens\": %llu, \"bytes\": %llu}",
                     (unsigned long long)res->documents, (unsigned long long)res->tokens,
                     (unsigned long long)res->bytes);
    st = LCX_OK;
out:
    lcx_report_progress_end(r);
    lcx_tokdata_writer_abort(&w);
    for (size_t k = 0; ids && k < batch_cap; k++) lcx_tok_ids_free(&ids[k]);
    for (size_t k = 0; msgs && k < batch_cap; k++) free(msgs[k]);
    free(msgs);
    free(ids);
    free(sts);
    for (int t = 0; encs && t < nthreads; t++) lcx_tok_encoder_free(encs[t]);
    free(encs);
    for (size_t f = 0; maps && f < o->n_inputs; f++) lcx_unmap(&maps[f]);
    for (size_t f = 0; zin && f < o->n_inputs; f++) {
        lcx_zstream_close(&zin[f].z);
        free(zin[f].buf);
    }
    free(maps);
    free(zin);
    free(is_jsonl);
    free(batch);
    lcx_tokenizer_free(tok);
    return st;
}
