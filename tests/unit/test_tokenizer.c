/* Tokenizer unit checks against independent references: UTF-8 repair against the Unicode standard's worked
 * example, BPE on long words against a naive merge loop written here from the merges list, clear errors for
 * malformed tokenizer.json / GGUF input, vocabulary queries. (HF parity lives in test_tokenizer_parity.) */
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "src/core/fileio.h"
#include "src/tokenizer/tokenizer.h"
#include "test_util.h"
#include "tok_fixture.h"

static void test_utf8_repair(void) {
    /* Unicode 15, section 3.9, Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 ->
     * a FFFD FFFD FFFD b FFFD c FFFD FFFD d (maximal subparts F1 80 80 | E1 80 | C2 | 80 | 80 | BF) */
    const char in[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    const char want[] = "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d";
    char *out;
    size_t n;
    CHECK(lcx_utf8_repair(in, sizeof in - 1, &out, &n) == 1);
    CHECK(n == sizeof want - 1 && memcmp(out, want, n) == 0);
    free(out);
    /* surrogates (ED A0 80) and overlongs (C0 AF, E0 80 AF) are ill-formed byte by byte; F4 90 is past U+10FFFF */
    const char in2[] = "\xED\xA0\x80|\xC0\xAF|\xE0\x80\xAF|\xF4\x90\x80\x80|\xF0\x9F\x98";
    const char want2[] = "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|"
                         "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD";
    CHECK(lcx_utf8_repair(in2, sizeof in2 - 1, &out, &n) == 1);
    CHECK(n == sizeof want2 - 1 && memcmp(out, want2, n) == 0);
    free(out);
    const char ok[] = "plain \xE2\x82\xAC \xF0\x9F\x98\x80";
    CHECK(lcx_utf8_repair(ok, sizeof ok - 1, &out, &n) == 0 && out == NULL);
}

/* Naive BPE over ASCII letters: merge the lowest-ranked adjacent pair (leftmost on ties) until none is left. */
typedef struct naive {
    json_t *ranks; /* "a b" -> rank */
} naive;

static size_t naive_bpe(const naive *nv, const char *w, size_t n, char **syms) {
    size_t k = n;
    for (size_t i = 0; i < n; i++) { syms[i] = malloc(2); syms[i][0] = w[i]; syms[i][1] = 0; }
    char key[4096];
    for (;;) {
        long best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            snprintf(key, sizeof key, "%s %s", syms[i], syms[i + 1]);
            json_t *r = json_object_get(nv->ranks, key);
            if (r && (best < 0 || json_integer_value(r) < best)) { best = (long)json_integer_value(r); at = i; }
        }
        if (best < 0) return k;
        size_t la = strlen(syms[at]), lb = strlen(syms[at + 1]);
        char *m = malloc(la + lb + 1);
        memcpy(m, syms[at], la);
        memcpy(m + la, syms[at + 1], lb + 1);
        free(syms[at]);
        free(syms[at + 1]);
        syms[at] = m;
        memmove(syms + at + 1, syms + at + 2, (k - at - 2) * sizeof *syms);
        k--;
    }
}

static void test_long_words(void) {
    lcx_tokenizer *tok = NULL;
    CHECK_OK(lcx_tokenizer_load(TOK_FIXTURE_DIR "bytelevel.json", &tok));
    json_error_t err;
    json_t *root = json_load_file(TOK_FIXTURE_DIR "bytelevel.json", 0, &err);
    CHECK(root != NULL);
    if (!tok || !root) { lcx_tokenizer_free(tok); json_decref(root); return; }
    naive nv = {json_object()};
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges"), *m;
    size_t i;
    json_array_foreach(merges, i, m) {
        char key[512];
        snprintf(key, sizeof key, "%s %s", json_string_value(json_array_get(m, 0)), json_string_value(json_array_get(m, 1)));
        if (!json_object_get(nv.ranks, key)) json_object_set_new(nv.ranks, key, json_integer((json_int_t)i));
    }
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    /* letters only: one pre-tokenized word; random, so not in the vocabulary (ignore_merges does not apply) */
    size_t n = 3000;
    char *w = malloc(n + 1);
    uint64_t x = 12345;
    for (size_t k = 0; k < n; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        w[k] = "etaoinshrdlucmfwypvbgkqjxz"[(x >> 33) % (k % 3 ? 26 : 8)];
    }
    w[n] = 0;
    char **syms = malloc(n * sizeof *syms);
    size_t k = naive_bpe(&nv, w, n, syms);
    lcx_tok_ids ids = {0};
    CHECK_OK(lcx_tokenizer_encode(tok, w, n, 0, &ids));
    int same = ids.n == k;
    for (size_t j = 0; j < k; j++) {
        json_t *id = json_object_get(vocab, syms[j]);
        if (same && (!id || (uint32_t)json_integer_value(id) != ids.ids[j])) same = 0;
        free(syms[j]);
    }
    CHECK_MSG(same, "3000-letter word: %zu ids vs naive %zu symbols", ids.n, k);
    free(syms);
    free(w);

    /* no quadratic behaviour: a 1,000,000-letter word and 200,000 spaces tokenize in well under a second */
    size_t big = 1000000;
    char *b = malloc(big);
    for (size_t j = 0; j < big; j++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        b[j] = "etaoinshrdlu"[(x >> 33) % 12];
    }
    clock_t t0 = clock();
    ids.n = 0;
    CHECK_OK(lcx_tokenizer_encode(tok, b, big, 0, &ids));
    double t_word = (double)(clock() - t0) / CLOCKS_PER_SEC;
    memset(b, ' ', 200000);
    t0 = clock();
    ids.n = 0;
    CHECK_OK(lcx_tokenizer_encode(tok, b, 200000, 0, &ids));
    double t_space = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("1M-letter word: %.3f s; 200k spaces: %.3f s (%zu ids)\n", t_word, t_space, ids.n);
    CHECK(t_word < 5.0 && t_space < 5.0); /* generous for sanitizer builds; quadratic would take minutes */
    free(b);
    lcx_tok_ids_free(&ids);
    json_decref(nv.ranks);
    json_decref(root);
    lcx_tokenizer_free(tok);
}

static lcx_status from_str(const char *json) {
    lcx_tokenizer *t = NULL;
    lcx_status st = lcx_tokenizer_from_json(json, strlen(json), "tok.json", &t);
    lcx_tokenizer_free(t);
    return st;
}

#define BPE_OK "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}"

static void test_errors(void) {
    CHECK_OK(from_str("{" BPE_OK "}"));
    CHECK_FAILS(from_str("{\"model\": {"), LCX_ERR_FORMAT, "tok.json: invalid JSON at line 1");
    CHECK_FAILS(from_str("[1, 2]"), LCX_ERR_FORMAT, "top level is not a JSON object");
    CHECK_FAILS(from_str("{}"), LCX_ERR_FORMAT, "missing 'model'");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}"), LCX_ERR_UNSUPPORTED,
                "model: type 'WordPiece' is not supported");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}"), LCX_ERR_FORMAT,
                "model.merges[0]: token 'b' is not in the vocabulary");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", \"b\"]]}}"),
                LCX_ERR_FORMAT, "merged token 'ab' is not in the vocabulary");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}"),
                LCX_ERR_FORMAT, "id 0 is used by both");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}"), LCX_ERR_FORMAT,
                "model.vocab['a']: expected an id");
    /* ids index a table: bounded by the entries, not by the largest id written (issue 18: 2^27 took 3.4 GB) */
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 134217728}, \"merges\": []}}"),
                LCX_ERR_FORMAT, "model.vocab['b']: id 134217728 is not below 2, the number of vocabulary and added-token");
    CHECK_FAILS(from_str("{\"added_tokens\": [{\"id\": 2147483647, \"content\": \"x\"}], " BPE_OK "}"),
                LCX_ERR_FORMAT, "added_tokens[0].id: 2147483647 is not below 4");
    CHECK_OK(from_str("{\"added_tokens\": [{\"id\": 3, \"content\": \"x\"}], " BPE_OK "}")); /* just past the vocab */
    CHECK_FAILS(from_str("{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                         "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
                         "\"special_tokens\": {\"<s>\": {\"ids\": [3]}}}, " BPE_OK "}"),
                LCX_ERR_FORMAT, "special_tokens['<s>'].ids: 3 is not below 3");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a  b\"]}}"),
                LCX_ERR_FORMAT, "is not two tokens separated by one space");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"unk_token\": \"<unk>\"}}"),
                LCX_ERR_FORMAT, "model.unk_token '<unk>' is not in the vocabulary");
    CHECK_FAILS(from_str("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"dropout\": 0.1}}"),
                LCX_ERR_UNSUPPORTED, "dropout");
    CHECK_FAILS(from_str("{\"normalizer\": {\"type\": \"NFKC\"}, " BPE_OK "}"), LCX_ERR_UNSUPPORTED,
                "normalizer: normalizer type 'NFKC' is not supported");
    CHECK_FAILS(from_str("{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                         "\"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\", \"invert\": false}]}, " BPE_OK "}"),
                LCX_ERR_FORMAT, "pre_tokenizer.pretokenizers[0].pattern: regex '(a' does not compile");
    CHECK_FAILS(from_str("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": "
                         "\"Sideways\", \"invert\": false}, " BPE_OK "}"),
                LCX_ERR_FORMAT, "pre_tokenizer.behavior: unknown value 'Sideways'");
    CHECK_FAILS(from_str("{\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, " BPE_OK "}"), LCX_ERR_UNSUPPORTED,
                "pre-tokenizer type 'BertPreTokenizer' is not supported");
    CHECK_FAILS(from_str("{\"added_tokens\": [{\"id\": 5}], " BPE_OK "}"), LCX_ERR_FORMAT,
                "added_tokens[0]: missing string 'content'");
    CHECK_FAILS(from_str("{\"added_tokens\": [{\"id\": 5, \"content\": \"x\", \"special\": \"yes\"}], " BPE_OK "}"),
                LCX_ERR_FORMAT, "added_tokens[0].special: expected true or false");
    CHECK_FAILS(from_str("{\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                         "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
                         "\"special_tokens\": {}}, " BPE_OK "}"),
                LCX_ERR_FORMAT, "special_tokens: no entry with ids for '<s>'");
    CHECK_FAILS(from_str("{\"decoder\": {\"type\": \"WordPiece\"}, " BPE_OK "}"), LCX_ERR_UNSUPPORTED,
                "decoder: decoder type 'WordPiece' is not supported");
    lcx_tokenizer *t = NULL;
    CHECK_FAILS(lcx_tokenizer_load(LCX_BINARY_DIR "/no_such_tokenizer.json", &t), LCX_ERR_NOT_FOUND,
                "no_such_tokenizer.json");

    /* GGUF: truncated and foreign files */
    char *g;
    size_t gl;
    if (lcx_read_file(TOK_FIXTURE_DIR "llama.gguf", 1 << 24, &g, &gl) == LCX_OK) {
        CHECK_OK(lcx_write_file_atomic(LCX_BINARY_DIR "/trunc.gguf", g, gl / 2));
        CHECK_FAILS(lcx_tokenizer_load_gguf(LCX_BINARY_DIR "/trunc.gguf", &t), LCX_ERR_FORMAT,
                    "trunc.gguf: key 'tokenizer.ggml.tokens': string");
        memcpy(g, "GGUX", 4);
        CHECK_OK(lcx_write_file_atomic(LCX_BINARY_DIR "/magic.gguf", g, gl));
        CHECK_FAILS(lcx_tokenizer_load_gguf(LCX_BINARY_DIR "/magic.gguf", &t), LCX_ERR_FORMAT, "not a GGUF file");
        free(g);
    }
    const char *toks[] = {"a", "b"};
    size_t lens[] = {1, 1};
    lcx_gguf_vocab v = {"bert", NULL, 2, toks, lens, NULL, NULL, 0, NULL, NULL, -1, -1, -1, -1, -1, -1};
    CHECK_FAILS(lcx_tokenizer_from_gguf(&v, "m.gguf", &t), LCX_ERR_UNSUPPORTED, "tokenizer.ggml.model 'bert'");
    v.model = "gpt2";
    v.pre = "falcon";
    CHECK_FAILS(lcx_tokenizer_from_gguf(&v, "m.gguf", &t), LCX_ERR_UNSUPPORTED, "tokenizer.ggml.pre 'falcon'");
    v.pre = NULL;
    CHECK_FAILS(lcx_tokenizer_from_gguf(&v, "m.gguf", &t), LCX_ERR_FORMAT, "gpt2 tokenizer without tokenizer.ggml.merges");
}

/* A hand-made SentencePiece vocabulary, tokenized by hand with SentencePiece's rule (highest score first,
 * leftmost on ties): "▁ab▁ab" -> ▁ a b ▁ a b -> ▁ ab ▁ a b -> ▁ ab ▁ ab -> ▁ab ▁ ab -> ▁ab ▁ab. */
static void test_gguf_llama_by_hand(void) {
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab"};
    size_t lens[] = {5, 3, 4, 3, 1, 1, 2, 4, 5};
    float scores[] = {0, 0, 0, -1, -2, -3, -4, -5, -6};
    int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    lcx_gguf_vocab v = {"llama", NULL, 9, toks, lens, scores, types, 0, NULL, NULL, 1, 2, 0, -1, -1, -1};
    for (int prefix = 1; prefix >= 0; prefix--) {
        v.add_space_prefix = prefix;
        lcx_tokenizer *t = NULL;
        CHECK_OK(lcx_tokenizer_from_gguf(&v, "hand.gguf", &t));
        if (!t) continue;
        lcx_tok_ids ids = {0};
        CHECK_OK(lcx_tokenizer_encode(t, "ab ab", 5, 1, &ids));
        uint32_t want1[] = {1, 8, 8}, want0[] = {1, 6, 8};
        CHECK_MSG(ids.n == 3 && memcmp(ids.ids, prefix ? want1 : want0, sizeof want1) == 0,
                  "add_space_prefix=%d: %zu ids [%u %u ...]", prefix, ids.n, ids.n ? ids.ids[0] : 0, ids.n > 1 ? ids.ids[1] : 0);
        ids.n = 0;
        CHECK_OK(lcx_tokenizer_encode(t, "ab</s>ab", 8, 0, &ids)); /* control tokens are matched in text */
        uint32_t want2[] = {8, 2, 8}, want3[] = {6, 2, 6};
        CHECK(ids.n == 3 && memcmp(ids.ids, prefix ? want2 : want3, sizeof want2) == 0);
        char *text;
        size_t len;
        uint32_t dec[] = {1, 8, 8};
        CHECK_OK(lcx_tokenizer_decode(t, dec, 3, 1, &text, &len));
        CHECK(strcmp(text, prefix ? "ab ab" : " ab ab") == 0);
        free(text);
        lcx_tok_ids_free(&ids);
        lcx_tokenizer_free(t);
    }
}

static void test_queries(void) {
    lcx_tokenizer *tok = NULL;
    CHECK_OK(lcx_tokenizer_load(TOK_FIXTURE_DIR "spm.json", &tok));
    if (!tok) return;
    /* the ids gen_tokenizer.py puts first: <unk>, <s>, </s>, <0x00>.. */
    CHECK(lcx_tokenizer_token_id(tok, "<s>", 3) == 1);
    CHECK(lcx_tokenizer_token_id(tok, "<0x41>", 6) == 3 + 0x41);
    CHECK(lcx_tokenizer_bos_id(tok) == 1);
    CHECK(lcx_tokenizer_eos_id(tok) == 2);
    CHECK(lcx_tokenizer_is_special(tok, 1) && !lcx_tokenizer_is_special(tok, 100));
    CHECK(lcx_tokenizer_vocab_size(tok) == 4000);
    size_t len;
    const char *s = lcx_tokenizer_token(tok, 2, &len);
    CHECK(s && len == 4 && memcmp(s, "</s>", 4) == 0);
    CHECK(lcx_tokenizer_token(tok, 999999, &len) == NULL);
    /* unknown ids are skipped by decode, like tokenizers */
    uint32_t ids[] = {3 + 'H', 999999, 3 + 'i'};
    char *text;
    CHECK_OK(lcx_tokenizer_decode(tok, ids, 3, 1, &text, &len));
    CHECK(strcmp(text, "Hi") == 0);
    free(text);
    lcx_tokenizer_free(tok);
}

int main(void) {
    test_utf8_repair();
    test_long_words();
    test_errors();
    test_queries();
    test_gguf_llama_by_hand();
    return test_summary("test_tokenizer");
}
