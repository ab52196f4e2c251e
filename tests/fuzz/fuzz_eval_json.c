/* libFuzzer target: lcx_ppl_from_json on arbitrary bytes (parsed by jansson first). Checks beyond "no crash":
 * a failure names the source and returns nothing; a success survives lcx_ppl_to_json -> lcx_ppl_from_json with
 * identical fields. Seed corpus: tests/fuzz/corpus/eval_json/. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/eval/eval.h"

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_eval_json: invariant broken: %s\n", what);
        abort();
    }
}

static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= 1e-9 * fabs(a); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!root) return 0;
    lcx_ppl_result *r = NULL;
    int n = -1;
    char *name = NULL;
    lcx_status st = lcx_ppl_from_json(root, "fuzz.json", &r, &n, &name);
    json_decref(root);
    if (st != LCX_OK) {
        require(r == NULL && name == NULL && n == 0, "nothing returned on failure");
        require(strncmp(lcx_last_error(), "fuzz.json", 9) == 0 && !strchr(lcx_last_error(), '\n'),
                "one-line message naming the source");
        return 0;
    }
    require(n >= 0 && (n == 0 || r != NULL), "results");
    int64_t *lengths = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) lengths[i] = r[i].length;
    lcx_ppl_config cfg = {lengths, n, 0, -1, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
    json_t *again = lcx_ppl_to_json(&cfg, r, name);
    require(again != NULL, "re-serialise");
    lcx_ppl_result *r2 = NULL;
    int n2 = -1;
    char *name2 = NULL;
    require(lcx_ppl_from_json(again, "again", &r2, &n2, &name2) == LCX_OK && n2 == n, "round trip");
    require((name == NULL) == (name2 == NULL) && (!name || strcmp(name, name2) == 0), "series name");
    for (int i = 0; i < n; i++) {
        require(r2[i].length == r[i].length && r2[i].stride == r[i].stride && r2[i].docs == r[i].docs &&
                    r2[i].docs_skipped == r[i].docs_skipped && r2[i].windows == r[i].windows &&
                    r2[i].tokens == r[i].tokens,
                "integers");
        require(same(r2[i].ppl, r[i].ppl) && same(r2[i].mean_nll, r[i].mean_nll) &&
                    same(r2[i].window_mean_nll, r[i].window_mean_nll) &&
                    same(r2[i].ppl_window_mean, r[i].ppl_window_mean),
                "numbers");
    }
    json_decref(again);
    free(lengths);
    free(r);
    free(r2);
    free(name);
    free(name2);
    return 0;
}
