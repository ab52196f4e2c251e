/* Small tokenizer.json pipelines that the trained parity tokenizers never reach (empty Replace patterns, every
 * Split behavior with odd patterns, added-token flags, decoder chains...), against the ids and decodes of Hugging
 * Face `tokenizers`: tests/fixtures/gen_tokenizer_edges.py writes DIR/cases.json and the tokenizers it names.
 *
 *   test_tokenizer_cases [DIR]     default: tests/fixtures/tokenizer_edges
 *
 * Every text is encoded with and without the special tokens of the post-processor; tokenizers' ids are decoded
 * with and without skip_special_tokens, so decode is checked even where encode differs. A case that tokenizers
 * refused to build is not in the file; one that we refuse to load fails here. `gen_tokenizer_edges.py --random N`
 * writes N random pipelines to another DIR for a developer's differential run. */
#include <jansson.h>
#include <string.h>

#include "src/tokenizer/tokenizer.h"
#include "test_util.h"

static int same_ids(const lcx_tok_ids *got, json_t *want) {
    if (got->n != json_array_size(want)) return 0;
    for (size_t i = 0; i < got->n; i++)
        if (got->ids[i] != (uint32_t)json_integer_value(json_array_get(want, i))) return 0;
    return 1;
}

static void print_ids(const char *what, const uint32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %u", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* One text: encode both ways, decode tokenizers' ids both ways. Returns 1 when everything matched. */
static int check_text(const char *name, lcx_tokenizer *t, json_t *c, size_t k) {
    json_t *jt = json_array_get(json_object_get(c, "texts"), k);
    const char *text = json_string_value(jt);
    size_t tlen = json_string_length(jt);
    int ok = 1;
    static const char *const ids_key[2] = {"ids_plain", "ids"};
    for (int add_special = 0; add_special < 2; add_special++) {
        json_t *want = json_array_get(json_object_get(c, ids_key[add_special]), k);
        lcx_tok_ids got = {0};
        lcx_status st = lcx_tokenizer_encode(t, text, tlen, add_special, &got);
        CHECK_MSG(st == LCX_OK && same_ids(&got, want), "%s: text %zu (add_special %d): %zu ids, tokenizers %zu%s%s",
                  name, k, add_special, got.n, json_array_size(want), st == LCX_OK ? "" : ": ",
                  st == LCX_OK ? "" : lcx_last_error());
        if (st != LCX_OK || !same_ids(&got, want)) {
            ok = 0;
            print_ids("ours", got.ids, got.n);
            char *w = json_dumps(want, JSON_COMPACT);
            fprintf(stderr, "  tokenizers: %s\n", w ? w : "?");
            free(w);
        }
        lcx_tok_ids_free(&got);
    }
    json_t *hf_ids = json_array_get(json_object_get(c, "ids"), k);
    size_t n = json_array_size(hf_ids);
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < n; i++) ids[i] = (uint32_t)json_integer_value(json_array_get(hf_ids, i));
    static const char *const dec_key[2] = {"decoded", "decoded_skip"};
    for (int skip = 0; ids && skip < 2; skip++) {
        json_t *want = json_array_get(json_object_get(c, dec_key[skip]), k);
        char *out = NULL;
        size_t len = 0;
        lcx_status st = lcx_tokenizer_decode(t, ids, n, skip, &out, &len);
        int match = st == LCX_OK && len == json_string_length(want) && memcmp(out, json_string_value(want), len) == 0;
        CHECK_MSG(match, "%s: text %zu decodes (skip_special %d) to '%s', tokenizers to '%s'", name, k, skip,
                  out ? out : lcx_last_error(), json_string_value(want));
        ok &= match;
        free(out);
    }
    free(ids);
    return ok;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : LCX_SOURCE_DIR "/tests/fixtures/tokenizer_edges";
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.json", dir);
    json_error_t je;
    json_t *all = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    CHECK_MSG(all != NULL, "%s: %s", path, je.text);
    json_t *cases = json_object_get(all, "cases");
    CHECK_MSG(json_array_size(cases) > 0, "%s: no cases", path);
    size_t n_ok = 0, n_texts = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "name"));
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_object_get(c, "tokenizer")));
        lcx_tokenizer *t = NULL;
        lcx_status st = lcx_tokenizer_load(path, &t);
        CHECK_MSG(st == LCX_OK, "%s: %s", name, lcx_last_error());
        if (st != LCX_OK) continue;
        int ok = 1;
        for (size_t k = 0; k < json_array_size(json_object_get(c, "texts")); k++, n_texts++)
            ok &= check_text(name, t, c, k);
        n_ok += (size_t)ok;
        lcx_tokenizer_free(t);
    }
    printf("%zu of %zu tokenizers match tokenizers on all of their texts (%zu texts)\n", n_ok,
           json_array_size(cases), n_texts);
    json_decref(all);
    return test_summary("test_tokenizer_cases");
}
