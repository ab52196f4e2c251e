/* Small tokenizer.json pipelines that the trained parity tokenizers never reach (empty Replace patterns, every
 * Split behavior with odd patterns, added-token flags, decoder chains...), against the ids and decodes of Hugging
 * Face `tokenizers`: tests/fixtures/gen_tokenizer_edges.py writes DIR/cases.json and the tokenizers it names.
 *
 *   test_tokenizer_cases [DIR]     default: tests/fixtures/tokenizer_edges
 *   test_tokenizer_cases --ggml-vocab DIR   llama.cpp's vocabulary tests (below)
 *
 * Every text is encoded with and without the special tokens of the post-processor; tokenizers' ids are decoded
 * with and without skip_special_tokens, so decode is checked even where encode differs. A case that tokenizers
 * refused to build is not in the file; one that we refuse to load fails here. A case with "gguf_pre" is also
 * built as GGUF metadata (lcx_tokenizer_from_gguf: its vocabulary and merges, that tokenizer.ggml.pre) and must
 * give the same ids. `gen_tokenizer_edges.py --random N` writes N random pipelines to another DIR for a
 * developer's differential run. */
#include <jansson.h>
#include <string.h>

#include "src/core/fileio.h"
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

/* The case's tokenizer.json vocabulary and merges as GGUF metadata (tokenizer.ggml.model "gpt2", tokens by id, the
 * case's tokenizer.ggml.pre), built the way a GGUF file is: the same ids as tokenizers' without special tokens. */
static void check_as_gguf(const char *name, const char *path, json_t *c, const char *pre) {
    json_error_t je;
    json_t *tj = json_load_file(path, 0, &je);
    json_t *vocab = json_object_get(json_object_get(tj, "model"), "vocab");
    json_t *merges = json_object_get(json_object_get(tj, "model"), "merges");
    size_t n = json_object_size(vocab), nm = json_array_size(merges);
    CHECK_MSG(n > 0 && nm > 0, "%s: %s: no vocabulary or merges", name, path);
    const char **tokens = calloc(n ? n : 1, sizeof *tokens), **mstr = calloc(nm ? nm : 1, sizeof *mstr);
    size_t *tlen = calloc(n ? n : 1, sizeof *tlen), *mlen = calloc(nm ? nm : 1, sizeof *mlen);
    char **owned = calloc(nm ? nm : 1, sizeof *owned);
    const char *key;
    json_t *v;
    int ok = tokens && mstr && tlen && mlen && owned && n && nm;
    json_object_foreach(vocab, key, v) {
        json_int_t id = json_integer_value(v);
        if (ok && id >= 0 && (size_t)id < n) { tokens[id] = key; tlen[id] = strlen(key); }
    }
    for (size_t i = 0; ok && i < n; i++) ok = tokens[i] != NULL; /* ids 0..n-1, as GGUF lists them */
    for (size_t i = 0; ok && i < nm; i++) { /* merges as pairs ["a", "b"] (tokenizers >= 0.20) or "a b" */
        json_t *m = json_array_get(merges, i);
        if (json_is_string(m)) { mstr[i] = json_string_value(m); mlen[i] = strlen(mstr[i]); continue; }
        const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
        size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0;
        owned[i] = a && b ? malloc(la + lb + 2) : NULL;
        if (!owned[i]) { ok = 0; break; }
        memcpy(owned[i], a, la);
        owned[i][la] = ' ';
        memcpy(owned[i] + la + 1, b, lb + 1);
        mstr[i] = owned[i];
        mlen[i] = la + lb + 1;
    }
    CHECK_MSG(ok, "%s: %s: the vocabulary is not ids 0..%zu, or a merge is not a pair", name, path, n - 1);
    lcx_tokenizer *t = NULL;
    if (ok) {
        lcx_gguf_vocab gv = {.model = "gpt2", .pre = pre, .n_tokens = n, .tokens = tokens, .token_lens = tlen,
                             .n_merges = nm, .merges = mstr, .merge_lens = mlen, .bos_id = -1, .eos_id = -1,
                             .unk_id = -1, .add_bos = 0, .add_eos = 0, .add_space_prefix = -1};
        CHECK_OK(lcx_tokenizer_from_gguf(&gv, name, &t));
    }
    json_t *texts = json_object_get(c, "texts");
    for (size_t k = 0; t && k < json_array_size(texts); k++) {
        json_t *jt = json_array_get(texts, k), *want = json_array_get(json_object_get(c, "ids_plain"), k);
        lcx_tok_ids got = {0};
        lcx_status st = lcx_tokenizer_encode(t, json_string_value(jt), json_string_length(jt), 0, &got);
        CHECK_MSG(st == LCX_OK && same_ids(&got, want), "%s as GGUF (pre '%s'): text %zu: %zu ids, tokenizers %zu",
                  name, pre, k, got.n, json_array_size(want));
        lcx_tok_ids_free(&got);
    }
    lcx_tokenizer_free(t);
    for (size_t i = 0; owned && i < nm; i++) free(owned[i]);
    free(owned); free(tokens); free(tlen); free(mstr); free(mlen);
    json_decref(tj);
}

/* --ggml-vocab DIR: llama.cpp's tokenizer test vocabularies (models/ggml-vocab-NAME.gguf, with .inp: texts
 * separated by "\n__ggml_vocab_test__\n", and .out: a line of ids per text, written by Hugging Face tokenizers
 * without special tokens). A vocabulary we refuse (another tokenizer model or pre-tokenizer) is listed, not
 * failed. tests/fixtures/check_llamacpp_vocab.sh fetches them. */
static int ggml_vocab(const char *dir) {
    static const char *const names[] = {"gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2", "refact", "starcoder",
                                        "deepseek-llm", "deepseek-coder", "falcon", "mpt", "command-r", "qwen35",
                                        "gemma-4", "bert-bge"};
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n_checked = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[4096], *inp = NULL, *out = NULL;
        size_t il, ol;
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.inp", dir, names[k]);
        if (lcx_read_file(path, (size_t)1 << 24, &inp, &il) != LCX_OK) continue;
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.out", dir, names[k]);
        CHECK_OK(lcx_read_file(path, (size_t)1 << 24, &out, &ol));
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, names[k]);
        lcx_tokenizer *t = NULL;
        if (!out || lcx_tokenizer_open(path, &t) != LCX_OK) {
            printf("ggml-vocab-%s: not checked: %s\n", names[k], out ? lcx_last_error() : "no .out");
            free(inp);
            free(out);
            continue;
        }
        int n = 0, bad = 0;
        for (char *s = inp, *o = out; s; n++) {
            char *e = strstr(s, sep), *oe = strchr(o, '\n');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            if (oe) *oe = 0;
            lcx_tok_ids got = {0};
            CHECK_OK(lcx_tokenizer_encode(t, s, len, 0, &got));
            char *w = o, *end;
            size_t i = 0;
            int same = 1;
            for (unsigned long id = strtoul(w, &end, 10); end != w; id = strtoul(w, &end, 10), i++) {
                same &= i < got.n && got.ids[i] == id;
                w = end;
            }
            same &= i == got.n;
            if (!same) fprintf(stderr, "ggml-vocab-%s: text %d: ids differ from tokenizers'\n", names[k], n);
            bad += !same;
            lcx_tok_ids_free(&got);
            s = e ? e + sizeof sep - 1 : NULL;
            o = oe ? oe + 1 : o + strlen(o);
        }
        CHECK_MSG(bad == 0, "ggml-vocab-%s: %d of %d texts differ", names[k], bad, n);
        printf("ggml-vocab-%s: %d texts, %d differ\n", names[k], n, bad);
        n_checked++;
        lcx_tokenizer_free(t);
        free(inp);
        free(out);
    }
    CHECK_MSG(n_checked > 0, "%s: no ggml-vocab-*.gguf with .inp and .out", dir);
    return test_summary("test_tokenizer_cases --ggml-vocab");
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--ggml-vocab") == 0) return ggml_vocab(argv[2]);
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
        const char *pre = json_string_value(json_object_get(c, "gguf_pre"));
        if (pre) check_as_gguf(name, path, c, pre);
    }
    printf("%zu of %zu tokenizers match tokenizers on all of their texts (%zu texts)\n", n_ok,
           json_array_size(cases), n_texts);
    json_decref(all);
    return test_summary("test_tokenizer_cases");
}
