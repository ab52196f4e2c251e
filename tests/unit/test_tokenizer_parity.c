/* Token ids and decodes identical to Hugging Face `tokenizers` on the >= 1 MB mixed sample (English prose, code,
 * CJK, emoji, other scripts, whitespace runs, digits, added/special tokens in text, invalid UTF-8), for the
 * tokenizer.json files trained by tests/fixtures/gen_tokenizer.py; GGUF vocabularies against HF / SentencePiece. */
#include <string.h>

#include "src/tokenizer/tokenizer.h"
#include "test_util.h"
#include "tok_fixture.h"

/* file: tokenizer.json or .gguf; check_full: compare decode(skip_special=false) too (not for SentencePiece's
 * reference, whose decode always drops control tokens). */
static void check_tokenizer(const char *name, const char *file, int check_full, const tokfx_sample *s) {
    int whole = strcmp(name, "variants") != 0; /* variants.expected covers the first 250 documents */
    char path[1024];
    snprintf(path, sizeof path, "%s%s", TOK_FIXTURE_DIR, file);
    lcx_tokenizer *tok = NULL;
    CHECK_OK(lcx_tokenizer_open(path, &tok));
    tokfx_expected e;
    int loaded = tokfx_expected_load(name, &e);
    CHECK_MSG(loaded, "%s: expected ids unreadable", name);
    if (!tok || !loaded) { lcx_tokenizer_free(tok); tokfx_expected_free(&e); return; }
    CHECK(whole ? e.n_docs == s->n_docs : e.n_docs <= s->n_docs);
    lcx_tok_encoder *enc = NULL;
    CHECK_OK(lcx_tok_encoder_init(tok, &enc));
    size_t bad_ids = 0, bad_full = 0, bad_plain = 0, bad_rt = 0, rt = 0, total = 0, bytes = 0;
    lcx_tok_ids ids = {0};
    for (uint32_t d = 0; d < e.n_docs && d < s->n_docs; d++) {
        ids.n = 0;
        CHECK_OK(lcx_tok_encode(enc, (const char *)s->doc[d], s->len[d], 1, &ids));
        total += ids.n;
        bytes += s->len[d];
        int same = ids.n == e.n_ids[d] && (ids.n == 0 || memcmp(ids.ids, e.ids[d], ids.n * sizeof *ids.ids) == 0);
        if (!same && bad_ids++ < 5) {
            size_t k = 0;
            while (k < ids.n && k < e.n_ids[d] && ids.ids[k] == e.ids[d][k]) k++;
            fprintf(stderr, "%s doc %u (%zu bytes): ids differ at %zu: ours %zu ids (%d), HF %u ids (%d)\n", name, d,
                    s->len[d], k, ids.n, k < ids.n ? (int)ids.ids[k] : -1, e.n_ids[d],
                    k < e.n_ids[d] ? (int)e.ids[d][k] : -1);
        }
        /* decode HF's ids, so decode is checked even where encode differs */
        char *text;
        size_t tl;
        CHECK_OK(lcx_tokenizer_decode(tok, e.ids[d], e.n_ids[d], 0, &text, &tl));
        if (check_full && tokfx_fnv1a64(text, tl) != e.h_full[d] && bad_full++ < 5)
            fprintf(stderr, "%s doc %u: decode(skip_special=false) differs: '%.80s'\n", name, d, text);
        free(text);
        CHECK_OK(lcx_tokenizer_decode(tok, e.ids[d], e.n_ids[d], 1, &text, &tl));
        if (tokfx_fnv1a64(text, tl) != e.h_plain[d] && bad_plain++ < 5)
            fprintf(stderr, "%s doc %u: decode(skip_special=true) differs: '%.80s'\n", name, d, text);
        if (e.roundtrip[d]) { /* HF round-trips this document (as repaired UTF-8): so must we, from our ids */
            rt++;
            char *fixed, *mine;
            size_t fl, ml;
            int r = lcx_utf8_repair((const char *)s->doc[d], s->len[d], &fixed, &fl);
            const char *want = r ? fixed : (const char *)s->doc[d];
            size_t wl = r ? fl : s->len[d];
            CHECK_OK(lcx_tokenizer_decode(tok, ids.ids, ids.n, 1, &mine, &ml));
            if (!(ml == wl && memcmp(mine, want, wl) == 0) && bad_rt++ < 5)
                fprintf(stderr, "%s doc %u: decode(encode(x)) != x\n", name, d);
            free(fixed);
            free(mine);
        }
        free(text);
    }
    printf("%s: %u docs, %zu bytes, %zu ids; %zu docs with different ids, %zu/%zu decode mismatches, "
           "%zu of %zu round-trips failed\n", name, e.n_docs, bytes, total, bad_ids, bad_full, bad_plain, bad_rt, rt);
    CHECK(bytes >= (whole ? 1000000 : 400000));
    CHECK(bad_ids == 0);
    CHECK(bad_full == 0);
    CHECK(bad_plain == 0);
    CHECK(bad_rt == 0);
    if (whole) CHECK(rt > e.n_docs / 3);
    lcx_tok_ids_free(&ids);
    lcx_tok_encoder_free(enc);
    tokfx_expected_free(&e);
    lcx_tokenizer_free(tok);
}

int main(void) {
    tokfx_sample s;
    int ok = tokfx_sample_load(&s);
    CHECK_MSG(ok, "sample unreadable");
    if (ok) {
        check_tokenizer("bytelevel", "bytelevel.json", 1, &s);
        check_tokenizer("spm", "spm.json", 1, &s);
        check_tokenizer("metaspace", "metaspace.json", 1, &s);
        check_tokenizer("qwen2", "qwen2.json", 1, &s);      /* NFC normalizer, Qwen2 split regex */
        check_tokenizer("variants", "variants.json", 1, &s); /* rarer pre-tokenizer / added-token options */
        check_tokenizer("gpt2", "gpt2.gguf", 1, &s);    /* GGUF of bytelevel.json vs HF */
        check_tokenizer("llama", "llama.gguf", 0, &s);  /* GGUF of a SentencePiece model vs SentencePiece */
    }
    tokfx_sample_free(&s);
    return test_summary("test_tokenizer_parity");
}
