/* `lcextend train` through its library API (src/pipeline/train_run.h) with a recording reporter: from random init
 * with an HF export (train_start, one step event and line per step, train_done, export), a resume that continues
 * at the saved step, --quiet (no step lines or saved notes, events kept), and a missing data file refused before
 * anything is created. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"
#include "src/pipeline/train_run.h"
#include "tests/test_util.h"
#include "tests/test_tmpdir.h"
#include "tests/unit/recorder.h"

static char g_root[256];

static void options(lcx_train_run_options *o, const char *run, char *buf, size_t cap) {
    static char config[600], ids[600];
    snprintf(config, sizeof config, "%s/tests/fixtures/models/llama_gqa/config.json", LCX_SOURCE_DIR);
    snprintf(ids, sizeof ids, "%s/ids.txt", g_root);
    snprintf(buf, cap, "%s/%s", g_root, run);
    lcx_train_run_options_default(o);
    o->config = config;
    o->ids = ids;
    o->out = buf;
    o->seq_len = 32;
    o->steps = 3;
    o->save_every = 1;
    o->keep = 0;
    o->lr = 1e-2;
}

int main(void) {
    if (test_tmpdir_make(g_root, sizeof g_root, LCX_BINARY_DIR, "test_train_run") != 0) return 1;
    char path[600];
    snprintf(path, sizeof path, "%s/ids.txt", g_root);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    unsigned s = 3;
    for (int i = 0; f && i < 400; i++) {
        s = s * 1103515245u + 12345u;
        fprintf(f, "%u ", (s >> 16) % 256);
    }
    if (f) fclose(f);

    recorder rc;
    lcx_reporter r = recording(&rc);
    lcx_train_run_options o;
    char run[600], hf[300];
    options(&o, "run", run, sizeof run);
    snprintf(hf, sizeof hf, "%s/run-hf", g_root);
    o.export_hf = hf;
    CHECK_OK(lcx_train_run(&o, &r));
    int start = find_event(&rc, "train_start", 0), done = find_event(&rc, "train_done", 0);
    CHECK(start >= 0 && done > start && event_int(&rc, start, "seq_len") == 32);
    CHECK(count_events(&rc, "step") == 3 && find_event(&rc, "step", 0) > start);
    CHECK(done >= 0 && event_int(&rc, done, "steps") == 3);
    int exp = find_event(&rc, "export", 0);
    CHECK(exp > done && exp == rc.n - 1);
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "train: llama") >= 0);
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "done: 3 steps") >= 0);
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "exported ") >= 0);
    CHECK(count_lines(&rc, LCX_REPORT_STEP) == 3);
    snprintf(path, sizeof path, "%s/config.json", hf);
    CHECK(lcx_is_file(path));
    recorder_free(&rc);

    /* resume at step 3 of 5 */
    r = recording(&rc);
    o.export_hf = NULL;
    o.steps = 5;
    o.resume = 1;
    o.quiet = 1;
    CHECK_FAILS(lcx_train_run(&o, &r), LCX_ERR_INVALID, "this run has"); /* another step count: refused */
    recorder_free(&rc);
    r = recording(&rc);
    o.steps = 3;
    CHECK_OK(lcx_train_run(&o, &r)); /* the stage is done: nothing to train, the same checkpoint */
    CHECK(find_line(&rc, LCX_REPORT_NOTE, "resuming ") >= 0);
    CHECK(count_events(&rc, "step") == 0);
    recorder_free(&rc);

    /* quiet: no step lines or saved notes, the events stay */
    r = recording(&rc);
    options(&o, "quiet", run, sizeof run);
    o.quiet = 1;
    CHECK_OK(lcx_train_run(&o, &r));
    CHECK(count_lines(&rc, LCX_REPORT_STEP) == 0 && find_line(&rc, LCX_REPORT_NOTE, "saved ") < 0);
    CHECK(count_events(&rc, "step") == 3 && count_events(&rc, "saved") == 3 && rc.progress == 0);
    recorder_free(&rc);

    /* missing data: refused before the run directory exists */
    options(&o, "none", run, sizeof run);
    o.ids = "/nonexistent/ids.txt";
    CHECK_FAILS(lcx_train_run(&o, NULL), LCX_ERR_NOT_FOUND, "no such file");
    CHECK(!lcx_is_dir(run));
    test_tmpdir_done(g_root);
    return test_summary("test_train_run");
}
