/* The extension pipeline through its library API (src/pipeline/extend.h), with a recording reporter instead of
 * the terminal: the fixture llama_gqa (context 64) --to 256 with a 2-stage recipe and held-out data. Checks what
 * is reported: the plan, stage starts and ends in order, one eval event per stage and length, the before/after
 * evaluations and table, the export event last; --quiet drops step lines but keeps the run's notes and events;
 * a dry run reports the plan only; a resume of a finished run skips the export; a NULL reporter is silent (nothing
 * reaches stdout or stderr). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/core/fileio.h"
#include "src/pipeline/extend.h"
#include "src/pipeline/run_common.h"
#include "tests/test_util.h"
#include "tests/test_tmpdir.h"
#include "tests/unit/recorder.h"

static char g_root[256];

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void options(lcx_extend_options *o, const char *run, char *buf, size_t cap) {
    static char ckpt[600], recipe[600], ids[600], eval[600];
    snprintf(ckpt, sizeof ckpt, "%s/tests/fixtures/models/llama_gqa", LCX_SOURCE_DIR);
    snprintf(recipe, sizeof recipe, "%s/tiny.yaml", g_root);
    snprintf(ids, sizeof ids, "%s/ids.txt", g_root);
    snprintf(eval, sizeof eval, "%s/held", g_root);
    snprintf(buf, cap, "%s/%s", g_root, run);
    lcx_extend_options_default(o);
    o->ckpt = ckpt;
    o->plan.target = 256;
    o->plan.tokens_per_s = 1e6; /* no sgemm measurement: quick and deterministic */
    o->recipe = recipe;
    o->ids = ids;
    o->eval_data = eval;
    o->out = buf;
    o->keep = 0;
}

/* A full run: the order of what is reported. */
static void check_full_run(void) {
    recorder rc;
    lcx_reporter r = recording(&rc);
    lcx_extend_options o;
    char run[600];
    options(&o, "full", run, sizeof run);
    CHECK_OK(lcx_extend_run(&o, &r));

    int plan = find_event(&rc, "plan", 0);
    CHECK(plan >= 0 && event_int(&rc, plan, "stages") == 2 && event_int(&rc, plan, "target") == 256);
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "stage length") >= 0); /* the plan table */

    int before = find_event(&rc, "evaluated", plan);
    CHECK(before >= 0 && strstr(rc.r[before].text, "\"which\":\"before\"") != NULL);
    /* stages start and end in order, each one's eval events (stage 1's) inside it */
    int at = before;
    for (int s = 1; s <= 2; s++) {
        int start = find_event(&rc, "stage_start", at + 1), done = find_event(&rc, "stage_done", at + 1);
        CHECK_MSG(start > at && done > start, "stage %d: start %d, done %d", s, start, done);
        if (start < 0 || done < 0) return;
        CHECK(event_int(&rc, start, "stage") == s && event_int(&rc, done, "stage") == s);
        CHECK(event_int(&rc, start, "seq_len") == 128 * s);
        int next = find_event(&rc, "stage_start", start + 1);
        CHECK(next < 0 || next > done);
        CHECK(find_event(&rc, "step", start) > start && find_event(&rc, "step", start) < done);
        at = done;
    }
    int after = find_event(&rc, "evaluated", at);
    CHECK(after > at && strstr(rc.r[after].text, "\"which\":\"after\"") != NULL);

    /* one eval result per stage and length: stage 1 after its training, stage 2 from the after-evaluation */
    CHECK(count_events(&rc, "eval") == 4);
    int seen[3][2] = {{0}};
    for (int i = find_event(&rc, "eval", 0); i >= 0; i = find_event(&rc, "eval", i + 1)) {
        json_int_t s = event_int(&rc, i, "stage"), len = event_int(&rc, i, "eval_len");
        CHECK(s >= 1 && s <= 2 && (len == 64 || len == 128));
        if (s >= 1 && s <= 2 && (len == 64 || len == 128)) seen[s][len == 128]++;
        if (s == 2) CHECK(i > after);
    }
    CHECK(seen[1][0] == 1 && seen[1][1] == 1 && seen[2][0] == 1 && seen[2][1] == 1);
    CHECK(count_events(&rc, "stage_start") == 2 && count_events(&rc, "stage_done") == 2);

    /* the before/after table, then the export: the last event */
    int table = -1;
    for (int i = 0; i < rc.n; i++)
        if (rc.r[i].kind == 't') table = i;
    CHECK(table > after && rc.r[table].rows == 2 && strncmp(rc.r[table].text, "before / after", 14) == 0);
    int exp = find_event(&rc, "export", 0);
    CHECK(exp > table && exp == rc.n - 1);
    CHECK(exp >= 0 && event_int(&rc, exp, "context") == 256 && !event_true(&rc, exp, "skipped"));
    CHECK(strstr(exp >= 0 ? rc.r[exp].text : "", "\"format\":\"hf\"") != NULL);

    /* lines at their levels */
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "stage 1/2: seq 128") >= 0);
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "stage 2/2 done: loss") >= 0);
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "evaluating the input") >= 0);
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "  eval length 64: loss") >= 0);
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "exported ") >= 0);
    CHECK(count_lines(&rc, LCX_REPORT_STEP) == 4); /* 2 stages x 2 steps */
    CHECK(count_lines(&rc, LCX_REPORT_WARN) == 0);
    recorder_free(&rc);

    /* resume of the finished run: nothing to train, the export is already there */
    r = recording(&rc);
    o.resume = 1;
    CHECK_OK(lcx_extend_run(&o, &r));
    int res = find_event(&rc, "resume", 0);
    CHECK(res >= 0 && event_int(&rc, res, "stage") == 2 && event_true(&rc, res, "stage_done"));
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "resuming from ") >= 0);
    CHECK(count_events(&rc, "stage_start") == 0);
    exp = find_event(&rc, "export", 0);
    CHECK(exp >= 0 && event_true(&rc, exp, "skipped"));
    recorder_free(&rc);

    /* without --resume the same directory is refused before any work */
    r = recording(&rc);
    o.resume = 0;
    CHECK_FAILS(lcx_extend_run(&o, &r), LCX_ERR_INVALID, "already holds a run");
    recorder_free(&rc);
}

/* quiet: no step lines, "saved" notes or progress; the run's notes and every event stay. */
static void check_quiet(void) {
    recorder rc;
    lcx_reporter r = recording(&rc);
    lcx_extend_options o;
    char run[600];
    options(&o, "quiet", run, sizeof run);
    o.eval_data = NULL;
    o.quiet = 1;
    CHECK_OK(lcx_extend_run(&o, &r));
    CHECK(count_lines(&rc, LCX_REPORT_STEP) == 0);
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "saved ") < 0);
    CHECK(rc.progress == 0);
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "stage 2/2: seq 256") >= 0);
    CHECK(count_events(&rc, "step") == 4 && count_events(&rc, "stage_done") == 2);
    CHECK(count_events(&rc, "eval") == 0 && count_events(&rc, "evaluated") == 0); /* no --eval-data */
    recorder_free(&rc);
}

/* dry run: the plan, nothing else, nothing written */
static void check_dry_run(void) {
    recorder rc;
    lcx_reporter r = recording(&rc);
    lcx_extend_options o;
    char run[600];
    options(&o, "dry", run, sizeof run);
    o.dry_run = 1;
    CHECK_OK(lcx_extend_run(&o, &r));
    CHECK(count_events(&rc, "plan") == 1 && count_events(&rc, "stage_start") == 0);
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "total: 2 stages") >= 0);
    CHECK(!lcx_is_dir(run));
    recorder_free(&rc);
}

/* A NULL reporter: the run works and nothing reaches the terminal. */
static void check_silent(void) {
    lcx_extend_options o;
    char run[600], out[600];
    options(&o, "silent", run, sizeof run);
    snprintf(out, sizeof out, "%s/terminal.txt", g_root);
    fflush(stdout);
    fflush(stderr);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), o1 = dup(1), o2 = dup(2);
    CHECK(fd >= 0 && o1 >= 0 && o2 >= 0);
    dup2(fd, 1);
    dup2(fd, 2);
    lcx_status st = lcx_extend_run(&o, NULL);
    fflush(stdout);
    fflush(stderr);
    dup2(o1, 1);
    dup2(o2, 2);
    close(fd), close(o1), close(o2);
    CHECK_OK(st);
    struct stat sb;
    CHECK(stat(out, &sb) == 0 && sb.st_size == 0);
    char hf[700];
    snprintf(hf, sizeof hf, "%s/hf/config.json", run);
    CHECK(lcx_is_file(hf));
}

int main(void) {
    if (test_tmpdir_make(g_root, sizeof g_root, LCX_BINARY_DIR, "test_extend") != 0) return 1;
    /* training ids and held-out data: pseudo-random ids below the vocabulary (256) */
    char path[600], text[20000];
    size_t at = 0;
    unsigned s = 7;
    for (int i = 0; i < 2500; i++) {
        s = s * 1103515245u + 12345u;
        at += (size_t)snprintf(text + at, sizeof text - at, "%u ", (s >> 16) % 256);
    }
    snprintf(path, sizeof path, "%s/ids.txt", g_root);
    write_text(path, text);
    char held[600];
    snprintf(held, sizeof held, "%s/held", g_root);
    CHECK_OK(lcx_tool_ids_to_tokdata(path, held, 256));
    snprintf(path, sizeof path, "%s/tiny.yaml", g_root);
    write_text(path, "name: tiny-test\n"
                     "defaults:\n"
                     "  method: yarn\n"
                     "  factor: auto\n"
                     "  steps: 2\n"
                     "  lr: {peak: 1e-3, warmup_steps: 1, schedule: cosine, min_lr: 1e-4}\n"
                     "  tokens_per_batch: 256\n"
                     "  grad_accum: 1\n"
                     "  eval_lengths: [64, 128]\n"
                     "  save_interval: 1\n"
                     "  activation: keep\n"
                     "  seed: 7\n"
                     "stages:\n"
                     "  - seq_len: 128\n"
                     "  - seq_len: 256\n");
    check_full_run();
    check_quiet();
    check_dry_run();
    check_silent();
    test_tmpdir_done(g_root);
    return test_summary("test_extend");
}
