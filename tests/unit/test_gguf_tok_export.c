/* GGUF export of a tokenizer.json (src/convert/convert_gguf_tok.c): the tokenizer.ggml.* metadata written for byte-level
 * BPE tokenizers, read back by our GGUF tokenizer reader (which builds what llama.cpp builds from those keys),
 * gives Hugging Face `tokenizers`' ids (less the added tokens' lstrip/rstrip, which GGUF has no key for) on the
 * >= 1 MB mixed sample (the tokenizer fixtures' .expected.zst, made by
 * gen_tokenizer.py); the bundled tiny model's tokenizer (Digits + ByteLevel -> "smollm") gives the same ids as its
 * tokenizer.json. Token types, padding to vocab_size, add_bos, the pre-tokenizer name, and the refusals
 * (SentencePiece-style, vocab_size too small, unknown split -> "default" with a warning) are checked by hand. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "formats/gguf.h"
#include "src/convert/convert_internal.h"
#include "src/tokenizer/tok_nfc.h"
#include "src/tokenizer/tokenizer.h"
#include "test_util.h"
#include "tok_fixture.h"

static char warned[1024];
static void on_warn(void *u, const char *m) {
    (void)u;
    size_t n = strlen(warned);
    snprintf(warned + n, sizeof warned - n, "%s\n", m); /* all warnings of one export */
}

/* Export the tokenizer of json_path with vocab_size tokens to out; returns written (-1 on error). */
static int export_tok(const char *json_path, int64_t vocab_size, const char *out, int64_t *bos) {
    lcx_convert_opts o;
    memset(&o, 0, sizeof o);
    o.warn = on_warn;
    warned[0] = 0;
    lcx_gguf_writer *w = NULL;
    int written = -1;
    CHECK_OK(lcx_gguf_writer_init(&w, 0));
    if (!w) return -1;
    CHECK_OK(lcx_gguf_writer_add_str(w, "general.architecture", "llama"));
    lcx_status st = cv_gguf_tokenizer_kvs(json_path, vocab_size, bos, w, &o, &written);
    CHECK_OK(st);
    if (st == LCX_OK && *bos >= 0) CHECK_OK(lcx_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)*bos));
    if (st == LCX_OK) CHECK_OK(lcx_gguf_writer_write(w, out));
    lcx_gguf_writer_free(w);
    return st == LCX_OK ? written : -1;
}

static void tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/test_gguf_tok_export_%s.gguf", LCX_BINARY_DIR, name);
    remove(buf);
}

/* ids of the GGUF tokenizer against HF's expected ids on every sample document */
enum { SKIP_NONE, SKIP_NOT_NFC, SKIP_METASPACE }; /* documents llama.cpp cannot tokenize like HF */
static void check_vs_hf(const char *name, const char *ref, const tokfx_sample *s, const char *want_pre, int skip) {
    char json[1024], out[1024];
    snprintf(json, sizeof json, "%s%s.json", TOK_FIXTURE_DIR, name);
    tmp_path(out, sizeof out, name);
    lcx_tokenizer *jt = NULL, *gt = NULL;
    CHECK_OK(lcx_tokenizer_load(json, &jt));
    if (!jt) return;
    int64_t bos = -1;
    int64_t n = (int64_t)lcx_tokenizer_vocab_size(jt) + 3; /* a padded embedding: three unused ids */
    CHECK(export_tok(json, n, out, &bos) == 1);
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(out, &f));
    if (f) {
        char *pre = NULL, *model = NULL;
        CHECK_OK(lcx_gguf_get_str_dup(f, "tokenizer.ggml.model", &model));
        CHECK(model && !strcmp(model, want_pre ? "gpt2" : "llama"));
        free(model);
        if (want_pre) { /* gpt2 */
            CHECK_OK(lcx_gguf_get_str_dup(f, "tokenizer.ggml.pre", &pre));
            CHECK_MSG(pre && !strcmp(pre, want_pre), "%s: pre '%s', want '%s'", name, pre ? pre : "", want_pre);
            free(pre);
        } else { /* llama: scores, no merges (llama.cpp's SentencePiece tokenizer uses the scores only) */
            CHECK(lcx_gguf_find_kv(f, "tokenizer.ggml.scores") && !lcx_gguf_find_kv(f, "tokenizer.ggml.merges"));
        }
        const lcx_gguf_kv *tt = NULL;
        CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.token_type", LCX_GGUF_I32, &tt));
        int64_t last = 0;
        CHECK(tt && tt->count == (uint64_t)n);
        if (tt) CHECK_OK(lcx_gguf_arr_int(tt, (uint64_t)n - 1, &last));
        CHECK(last == 5); /* padding is unused */
        CHECK_OK(lcx_tokenizer_from_gguf_file(f, &gt));
        lcx_gguf_close(f);
    }
    tokfx_expected e;
    int loaded = tokfx_expected_load(ref, &e);
    CHECK_MSG(loaded, "%s: expected ids unreadable", name);
    size_t bad = 0, total = 0, skipped = 0;
    lcx_tok_ids ids = {0};
    for (uint32_t d = 0; gt && loaded && d < e.n_docs && d < s->n_docs; d++) {
        if (skip == SKIP_METASPACE) { /* llama.cpp prepends "▁" even to a space or "▁", and after special tokens */
            const char *t = (const char *)s->doc[d];
            size_t l = s->len[d];
            if ((l && t[0] == ' ') || (l >= 3 && !memcmp(t, "\xE2\x96\x81", 3)) || memmem(t, l, "<s>", 3) ||
                memmem(t, l, "</s>", 4) || memmem(t, l, "<unk>", 5)) {
                skipped++;
                continue;
            }
        }
        if (skip == SKIP_NOT_NFC) { /* llama.cpp does not normalize: compare where NFC changes nothing */
            char *fixed = NULL, *nf = NULL;
            size_t fl = 0, nl = 0;
            int r = lcx_utf8_repair((const char *)s->doc[d], s->len[d], &fixed, &fl); /* tok_nfc takes valid UTF-8 */
            CHECK(r >= 0);
            CHECK_OK(tok_nfc(r ? fixed : (const char *)s->doc[d], r ? fl : s->len[d], &nf, &nl));
            free(fixed);
            if (nf) { free(nf); skipped++; continue; } /* NULL: already NFC */
        }
        ids.n = 0;
        CHECK_OK(lcx_tokenizer_encode(gt, (const char *)s->doc[d], s->len[d], 1, &ids));
        total += ids.n;
        int same = ids.n == e.n_ids[d] && (ids.n == 0 || memcmp(ids.ids, e.ids[d], ids.n * sizeof *ids.ids) == 0);
        if (!same && bad++ < 3)
            fprintf(stderr, "%s doc %u: GGUF ids differ from HF (%zu vs %u ids)\n", name, d, ids.n, e.n_ids[d]);
    }
    printf("%s: exported GGUF tokenizer, %u docs (%zu skipped), %zu ids, %zu docs differ from HF\n", name,
           e.n_docs, skipped, total, bad);
    CHECK(skipped < e.n_docs / 4);
    CHECK(total > 100000);
    CHECK(bad == 0);
    lcx_tok_ids_free(&ids);
    if (loaded) tokfx_expected_free(&e);
    lcx_tokenizer_free(jt);
    lcx_tokenizer_free(gt);
    remove(out);
}

/* bytelevel.json by hand: token types, strings, merges form, add_bos and the bos id from the template */
static void check_bytelevel_keys(void) {
    char out[1024];
    tmp_path(out, sizeof out, "keys");
    int64_t bos = -1;
    CHECK(export_tok(TOK_FIXTURE_DIR "bytelevel.json", 3005, out, &bos) == 1);
    CHECK(bos == 0); /* <|begin_of_text|> leads the single template */
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(out, &f));
    if (!f) return;
    const lcx_gguf_kv *tok = NULL, *tt = NULL, *mg = NULL;
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.tokens", LCX_GGUF_STRING, &tok));
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.token_type", LCX_GGUF_I32, &tt));
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.merges", LCX_GGUF_STRING, &mg));
    if (tok && tt && mg) {
        CHECK(tok->count == 3005 && tt->count == 3005);
        /* ids: 0-2 special added, 3000 <tool> non-special, 3001 <mask> special, 3002-3004 padding */
        static const struct { uint64_t id; int64_t type; const char *s; } want[] = {
            {0, 3, "<|begin_of_text|>"}, {2, 3, "<|eot_id|>"}, {3000, 4, "<tool>"}, {3001, 3, "<mask>"},
            {3002, 5, "[PAD3002]"},      {3004, 5, "[PAD3004]"}};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            int64_t ty = -1;
            const char *s = NULL;
            size_t l = 0;
            CHECK_OK(lcx_gguf_arr_int(tt, want[i].id, &ty));
            CHECK_OK(lcx_gguf_arr_str(tok, want[i].id, &s, &l));
            CHECK_MSG(ty == want[i].type && s && l == strlen(want[i].s) && !memcmp(s, want[i].s, l),
                      "id %llu: type %lld '%.*s'", (unsigned long long)want[i].id, (long long)ty, (int)l, s ? s : "");
        }
        /* a byte-level token keeps its mapped form: " the" is "Ġthe" (U+0120) */
        int found = 0;
        for (uint64_t i = 0; i < tok->count && !found; i++) {
            const char *s;
            size_t l;
            if (lcx_gguf_arr_str(tok, i, &s, &l) == LCX_OK && l == 5 && !memcmp(s, "\xC4\xA0the", 5)) found = 1;
        }
        CHECK(found);
        const char *m0;
        size_t l0;
        CHECK_OK(lcx_gguf_arr_str(mg, 0, &m0, &l0));
        CHECK(memchr(m0, ' ', l0) != NULL); /* [a, b] pairs become "a b" */
    }
    int add_bos = -1, add_eos = -1;
    CHECK_OK(lcx_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos));
    CHECK_OK(lcx_gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &add_eos));
    CHECK(add_bos == 1 && add_eos == 0);
    char *model = NULL;
    CHECK_OK(lcx_gguf_get_str_dup(f, "tokenizer.ggml.model", &model));
    CHECK(model && !strcmp(model, "gpt2"));
    free(model);
    lcx_gguf_close(f);
    remove(out);
}

/* the bundled tiny model: Digits(individual) + ByteLevel = llama.cpp's "smollm"; GGUF ids == tokenizer.json ids */
static void check_tiny(const tokfx_sample *s) {
    const char *json = LCX_SOURCE_DIR "/recipes/tiny/model/tokenizer.json";
    char out[1024];
    tmp_path(out, sizeof out, "tiny");
    int64_t bos = -1;
    CHECK(export_tok(json, 2048, out, &bos) == 1);
    CHECK(warned[0] == 0);
    lcx_tokenizer *jt = NULL, *gt = NULL;
    CHECK_OK(lcx_tokenizer_load(json, &jt));
    CHECK_OK(lcx_tokenizer_load_gguf(out, &gt));
    size_t bad = 0;
    lcx_tok_ids a = {0}, b = {0};
    static const char *extra[] = {"In 1611, 12345 men said: \"I'LL go\" - don't they?\n\n  x  \t y",
                                  "<|end_of_text|>caf\xC3\xA9 99 bottles\r\n"};
    for (uint32_t d = 0; jt && gt && d < s->n_docs + 2; d++) {
        const char *t = d < s->n_docs ? (const char *)s->doc[d] : extra[d - s->n_docs];
        size_t len = d < s->n_docs ? s->len[d] : strlen(t);
        a.n = b.n = 0;
        CHECK_OK(lcx_tokenizer_encode(jt, t, len, 1, &a));
        CHECK_OK(lcx_tokenizer_encode(gt, t, len, 1, &b));
        if (!(a.n == b.n && (a.n == 0 || memcmp(a.ids, b.ids, a.n * sizeof *a.ids) == 0)) && bad++ < 3)
            fprintf(stderr, "tiny doc %u: GGUF ids differ from tokenizer.json (%zu vs %zu ids)\n", d, b.n, a.n);
    }
    CHECK(bad == 0);
    CHECK(bos == 0);
    lcx_tok_ids_free(&a);
    lcx_tok_ids_free(&b);
    lcx_tokenizer_free(jt);
    lcx_tokenizer_free(gt);
    remove(out);
}

static void check_refusals(void) {
    char out[1024];
    tmp_path(out, sizeof out, "refuse");
    int64_t bos = -1;
    /* not BPE: nothing written, a warning that says so */
    char json[1024];
    snprintf(json, sizeof json, "%s/test_gguf_tok_export_unigram.json", LCX_BINARY_DIR);
    FILE *jf = fopen(json, "w");
    CHECK(jf != NULL);
    if (jf) fputs("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}", jf), fclose(jf);
    CHECK(export_tok(json, 10, out, &bos) == 0);
    CHECK(strstr(warned, "tokenizer not written (the model is not BPE)") != NULL);
    remove(json);
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(out, &f));
    CHECK(f && !lcx_gguf_find_kv(f, "tokenizer.ggml.tokens") && !lcx_gguf_find_kv(f, "tokenizer.ggml.model"));
    lcx_gguf_close(f);
    remove(out);
    /* the model's vocabulary is smaller than the tokenizer's */
    CHECK(export_tok(TOK_FIXTURE_DIR "bytelevel.json", 2000, out, &bos) == 0);
    CHECK(strstr(warned, "past the model's vocab_size") != NULL);
    remove(out);
    /* a Split regex llama.cpp has no name for: written with "default", and a warning */
    CHECK(export_tok(TOK_FIXTURE_DIR "variants.json", 3004, out, &bos) == 1);
    CHECK(strstr(warned, "\"default\"") != NULL);
    remove(out);
    /* not a tokenizer.json */
    lcx_gguf_writer *w = NULL;
    lcx_convert_opts o;
    memset(&o, 0, sizeof o);
    int written = 7;
    CHECK_OK(lcx_gguf_writer_init(&w, 0));
    CHECK_FAILS(cv_gguf_tokenizer_kvs(LCX_SOURCE_DIR "/tests/fixtures/tokenizer/cli_input.txt", 10, &bos, w, &o,
                                      &written),
                LCX_ERR_FORMAT, "cli_input.txt: line 1");
    CHECK(written == 0);
    lcx_gguf_writer_free(w);
}

int main(void) {
    tokfx_sample s;
    int ok = tokfx_sample_load(&s);
    CHECK_MSG(ok, "sample unreadable");
    if (ok) {
        /* reference: bytelevel.json without <mask>'s lstrip/rstrip, which GGUF cannot express (gen_tokenizer.py) */
        check_vs_hf("bytelevel", "gpt2", &s, "llama-bpe", SKIP_NONE);
        CHECK(strstr(warned, "lstrip") != NULL);
        check_vs_hf("qwen2", "qwen2", &s, "qwen2", SKIP_NOT_NFC); /* NFC normalizer: not in GGUF */
        CHECK(strstr(warned, "NFC") != NULL);
        /* SentencePiece-style (model "llama", scores from the merge ranks): legacy Prepend/Replace normalizer and
         * Metaspace; GGUF has no merges here, so our reader derives them from the scores like llama.cpp */
        check_vs_hf("spm", "spm", &s, NULL, SKIP_NONE);
        check_vs_hf("metaspace", "metaspace", &s, NULL, SKIP_METASPACE);
        CHECK(strstr(warned, "prepend_scheme") != NULL);
        check_tiny(&s);
    }
    check_bytelevel_keys();
    check_refusals();
    tokfx_sample_free(&s);
    return test_summary("test_gguf_tok_export");
}
