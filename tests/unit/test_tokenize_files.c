/* lcx_tokenize_files, the library call behind `lcextend tokenize`, driven without a terminal: its dataset equals
 * the Hugging Face tokenizers + Megatron reference (tests/fixtures/gen_tokenizer.py) for 1 and 3 threads, what
 * it reports (summary line, "tokenized" event) matches its result and the file, and failures leave nothing at
 * the output prefix and say whether an option is at fault. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/core/fileio.h"
#include "src/tokenizer/tokenize_files.h"
#include "test_util.h"
#include "test_tmpdir.h"

#define FX LCX_SOURCE_DIR "/tests/fixtures/tokenizer/"

typedef struct seen {
    int notes, events, progress_ends;
    char note[512], event[256];
} seen;
static void on_line(void *u, lcx_report_level lv, const char *text) {
    seen *s = u;
    if (lv != LCX_REPORT_NOTE) return;
    s->notes++;
    snprintf(s->note, sizeof s->note, "%s", text);
}
static void on_event(void *u, const char *name, const char *json) {
    seen *s = u;
    if (strcmp(name, "tokenized") != 0) return;
    s->events++;
    snprintf(s->event, sizeof s->event, "%s", json);
}
static void on_progress(void *u, const lcx_progress *p) {
    if (!p) ((seen *)u)->progress_ends++;
}

static int same_file(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int same = lcx_read_file(a, 1 << 24, &x, &nx) == LCX_OK && lcx_read_file(b, 1 << 24, &y, &ny) == LCX_OK &&
               nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

int main(void) {
    char dir[200];
    if (test_tmpdir_make(dir, sizeof dir, LCX_BINARY_DIR, "test_tokenize_files") != 0) return 1;
    const char *jsonl[] = {FX "cli_input.jsonl"};
    char prefix[256], bin[300], idx[300];

    for (int threads = 1; threads <= 3; threads += 2) {
        snprintf(prefix, sizeof prefix, "%s/jl%d", dir, threads);
        snprintf(bin, sizeof bin, "%s.bin", prefix);
        snprintf(idx, sizeof idx, "%s.idx", prefix);
        lcx_tokenize_options o = {.tokenizer = FX "bytelevel.json", .inputs = jsonl, .n_inputs = 1,
                                  .output = prefix, .eos = "<|end_of_text|>", .dtype = -1, .threads = threads};
        seen s = {0};
        lcx_reporter rep = {.line = on_line, .event = on_event, .progress = on_progress, .user = &s};
        lcx_tokenize_result res;
        CHECK_OK(lcx_tokenize_files(&o, &rep, &res));
        CHECK_MSG(same_file(bin, FX "cli_jsonl.bin") && same_file(idx, FX "cli_jsonl.idx"),
                  "%d threads: dataset differs from the tokenizers + Megatron reference", threads);
        CHECK(res.threads == threads && res.documents > 0 && res.tokens > res.documents);
        /* the .bin holds exactly the reported tokens (uint16 for this vocabulary) */
        struct stat sb;
        CHECK(stat(bin, &sb) == 0 && (uint64_t)sb.st_size == 2 * res.tokens && res.dtype == LCX_TOKDATA_U16);
        char want[256];
        snprintf(want, sizeof want, "{\"documents\": %llu, \"tokens\": %llu, \"bytes\": %llu}",
                 (unsigned long long)res.documents, (unsigned long long)res.tokens, (unsigned long long)res.bytes);
        CHECK(s.events == 1 && strcmp(s.event, want) == 0);
        CHECK(s.notes == 1 && strncmp(s.note, "tokenized ", 10) == 0 && strstr(s.note, prefix));
        CHECK(s.progress_ends >= 1);
        /* a NULL reporter is silent and gives the same bytes */
        snprintf(prefix, sizeof prefix, "%s/quiet%d", dir, threads);
        snprintf(bin, sizeof bin, "%s.bin", prefix);
        o.output = prefix;
        CHECK_OK(lcx_tokenize_files(&o, NULL, &res));
        CHECK(same_file(bin, FX "cli_jsonl.bin"));
    }

    /* an option at fault: a token the vocabulary lacks; nothing is created */
    snprintf(prefix, sizeof prefix, "%s/bad", dir);
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    lcx_tokenize_options o = {.tokenizer = FX "bytelevel.json", .inputs = jsonl, .n_inputs = 1, .output = prefix,
                              .eos = "<nope>", .dtype = -1};
    lcx_tokenize_result res;
    CHECK(lcx_tokenize_files(&o, NULL, &res) == LCX_ERR_INVALID && res.bad_option == 1);
    CHECK(strstr(lcx_last_error(), "--eos '<nope>' is not a token") != NULL);
    CHECK(!exists(bin) && !exists(idx));

    /* an input at fault: the second line of a JSON-lines file lacks the field; named with its line, no output */
    char badjl[300];
    snprintf(badjl, sizeof badjl, "%s/bad.jsonl", dir);
    FILE *f = fopen(badjl, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"text\": \"hello\"}\n{\"body\": \"x\"}\n", f);
        fclose(f);
    }
    const char *bad_inputs[] = {badjl};
    o = (lcx_tokenize_options){.tokenizer = FX "bytelevel.json", .inputs = bad_inputs, .n_inputs = 1,
                               .output = prefix, .no_eos = 1, .dtype = -1, .threads = 2};
    CHECK(lcx_tokenize_files(&o, NULL, &res) == LCX_ERR_FORMAT && res.bad_option == 0);
    CHECK(strstr(lcx_last_error(), "bad.jsonl:2: no string field 'text'") != NULL);
    CHECK(!exists(bin) && !exists(idx));

    test_tmpdir_done(dir);
    return test_summary("test_tokenize_files");
}
