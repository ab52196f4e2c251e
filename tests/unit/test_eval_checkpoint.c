/* `lcextend eval` through its library API (src/eval/eval_checkpoint.h) with a recording reporter: the fixture
 * llama_gqa on a small token dataset at two lengths -> the perplexity table as RESULT lines, one "ppl" event per
 * length matching the JSON written, the picture; a passkey test without a tokenizer refused; a NULL reporter.
 * Progress (a state after every pass here): passes done of those expected, counted before the work (the
 * perplexity's windows by a dry walk, the passkey's trials x answers), a rate, and an ETA until the last pass. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"
#include "src/eval/eval_checkpoint.h"
#include "src/pipeline/run_common.h"
#include "tests/test_util.h"
#include "tests/test_tmpdir.h"
#include "tests/unit/recorder.h"

/* The states of progress `what`: done counts up to total (when known: 0 = unknown) and ends there, every state has
 * a rate and, but the last, an ETA. Returns the last state's total (-1: no state). */
static int64_t check_states(const recorder *rc, const char *what) {
    int n = 0, ok = 1;
    const state *last = NULL;
    for (int i = 0; i < rc->n_states; i++) {
        const state *x = &rc->st[i];
        if (strcmp(x->what, what) != 0) continue;
        ok &= x->done == (last ? last->done + 1 : 1) && (x->total == 0 || x->done <= x->total) && x->rate > 0;
        if (last) ok &= last->eta_s > 0; /* a state with passes after it */
        last = x, n++;
    }
    CHECK_MSG(n > 0 && ok, "%s: %d states, not counting up with a rate and an ETA", what, n);
    if (!last) return -1;
    CHECK_MSG(last->total == 0 || (last->done == last->total && last->eta_s < 0), "%s: ended at %lld of %lld", what,
              (long long)last->done, (long long)last->total);
    return last->total;
}

int main(void) {
    char root[256], path[400], data[400], json[400], svg[400], ckpt[400];
    if (test_tmpdir_make(root, sizeof root, LCX_BINARY_DIR, "test_eval_checkpoint") != 0) return 1;
    snprintf(path, sizeof path, "%s/ids.txt", root);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    unsigned s = 5;
    for (int i = 0; f && i < 300; i++) {
        s = s * 1103515245u + 12345u;
        fprintf(f, "%u ", (s >> 16) % 256);
    }
    if (f) fclose(f);
    snprintf(data, sizeof data, "%s/data", root);
    CHECK_OK(lcx_tool_ids_to_tokdata(path, data, 256));
    snprintf(json, sizeof json, "%s/eval.json", root);
    snprintf(svg, sizeof svg, "%s/ppl.svg", root);
    snprintf(ckpt, sizeof ckpt, "%s/tests/fixtures/models/llama_gqa", LCX_SOURCE_DIR);

    static const int64_t lengths[] = {32, 64};
    lcx_eval_options o;
    lcx_eval_options_default(&o);
    o.ckpt = ckpt;
    o.data = data;
    o.lengths = lengths;
    o.n_lengths = 2;
    o.stride = 0;
    o.json_out = json;
    o.svg_out = svg;
    o.progress_s = 1e-12; /* every pass */
    recorder rc;
    lcx_reporter r = recording(&rc);
    CHECK_OK(lcx_eval_checkpoint(&o, &r));
    CHECK(find_line(&rc, LCX_REPORT_RESULT, "perplexity of ") == 0);
    CHECK(count_lines(&rc, LCX_REPORT_RESULT) == 4); /* title, header, two rows */
    CHECK(count_events(&rc, "ppl") == 2);
    json_t *j = json_load_file(json, 0, NULL);
    CHECK(j != NULL);
    json_t *results = json_object_get(json_object_get(j, "perplexity"), "results");
    int64_t windows = 0;
    for (int k = 0, i = find_event(&rc, "ppl", 0); i >= 0; k++, i = find_event(&rc, "ppl", i + 1)) {
        CHECK(event_int(&rc, i, "length") == lengths[k]);
        json_t *row = json_array_get(results, (size_t)k);
        CHECK(event_int(&rc, i, "tokens") == json_integer_value(json_object_get(row, "tokens")));
        windows += event_int(&rc, i, "windows");
    }
    int64_t passes = check_states(&rc, "perplexity");
    CHECK_MSG(windows > 2 && passes == windows, "perplexity: %lld passes expected, %lld windows scored",
              (long long)passes, (long long)windows);
    json_decref(j);
    CHECK(lcx_is_file(svg));
    recorder_free(&rc);

    /* the outputs are the user's now: a second run to them is refused before any work, and they stay as they were */
    char *before = NULL;
    size_t before_len = 0;
    CHECK_OK(lcx_read_file(json, 1 << 20, &before, &before_len));
    CHECK_FAILS(lcx_eval_checkpoint(&o, NULL), LCX_ERR_INVALID, "eval.json: already exists (refusing to overwrite)");
    o.json_out = NULL;
    CHECK_FAILS(lcx_eval_checkpoint(&o, NULL), LCX_ERR_INVALID, "ppl.svg: already exists (refusing to overwrite)");
    char *after = NULL;
    size_t after_len = 0;
    CHECK_OK(lcx_read_file(json, 1 << 20, &after, &after_len));
    CHECK(before && after && before_len == after_len && memcmp(before, after, before_len) == 0);
    free(before);
    free(after);

    /* the passkey test needs a tokenizer; the fixture has none */
    o.trials = 1;
    o.json_out = o.svg_out = NULL;
    CHECK_FAILS(lcx_eval_checkpoint(&o, NULL), LCX_ERR_NOT_FOUND, "tokenizer");
    o.trials = 0;
    CHECK_OK(lcx_eval_checkpoint(&o, NULL));

    /* the passkey's progress, on the bundled tiny model (it has a tokenizer): 2 keys in each prompt, so every trial
     * scores all 2 + 4 answers in loglik mode and makes the greedy check: 2 depths x 7 passes */
    char tiny[400];
    snprintf(tiny, sizeof tiny, "%s/recipes/tiny/model", LCX_SOURCE_DIR);
    static const int64_t pk_len[] = {200};
    static const double depths[] = {0, 1};
    lcx_eval_options_default(&o);
    o.ckpt = tiny;
    o.trials = 1;
    o.pk_lengths = pk_len, o.n_pk_lengths = 1;
    o.depths = depths, o.n_depths = 2;
    o.modes = LCX_PASSKEY_GREEDY | LCX_PASSKEY_LOGLIK;
    o.needles = 2;
    o.progress_s = 1e-12;
    r = recording(&rc);
    CHECK_OK(lcx_eval_checkpoint(&o, &r));
    passes = check_states(&rc, "passkey");
    CHECK_MSG(passes == 14, "passkey: %lld passes expected, not 14", (long long)passes);
    recorder_free(&rc);
    o.needles = 1; /* one key: loglik stops at the first distractor that wins, so the count is unknown */
    r = recording(&rc);
    CHECK_OK(lcx_eval_checkpoint(&o, &r));
    CHECK(check_states(&rc, "passkey") == 0);
    recorder_free(&rc);
    test_tmpdir_done(root);
    return test_summary("test_eval_checkpoint");
}
