/* Tokenizers from GGUF files written with our GGUF writer: a hand-made SentencePiece vocabulary (tokenized by
 * hand in test_tokenizer.c: "ab ab" -> <s> ▁ab ▁ab) loads through lcx_tokenizer_load_gguf and through an open
 * lcx_gguf_file; each kind of broken tokenizer.ggml.* metadata fails with a message naming the file and the key,
 * from the tokenizer and from the HF tokenizer.json writer alike. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "src/tokenizer/tokenizer.h"
#include "test_util.h"

enum {
    OK, OK_U32_TYPES, MODEL_U32, MODEL_BERT, NO_TOKENS, TOKENS_U32, SCORES_SHORT, SCORES_NAN, SCORES_F64,
    TYPES_F32, TYPES_SHORT, BOS_RANGE, BOS_STRING, ADD_BOS_U8, BAD_MERGE, N_CASES
};

/* The vocabulary of test_gguf_llama_by_hand, as a GGUF file, with one defect `mut`. */
static lcx_status write_vocab(const char *path, int mut) {
    unlink(path); /* the GGUF writer never replaces: a rerun of this test starts from no file */
    static const char *toks[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a",
                                 "\xE2\x96\x81" "ab"};
    float scores[] = {0, 0, 0, -1, -2, -3, -4, -5, -6};
    double scores64[] = {0, 0, 0, -1, -2, -3, -4, -5, -6};
    int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    uint32_t u32s[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    float types_f32[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    static const char *merges[] = {"a b", "ab"};
    if (mut == SCORES_NAN) scores[4] = NAN;
    lcx_gguf_writer *w;
    LCX_TRY(lcx_gguf_writer_init(&w, 0));
    lcx_status st = LCX_OK;
    LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "general.architecture", "llama"), out);
    if (mut == MODEL_U32) LCX_TRY_GOTO(lcx_gguf_writer_add_u32(w, "tokenizer.ggml.model", 1), out);
    else LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "tokenizer.ggml.model", mut == MODEL_BERT ? "bert" : "llama"), out);
    if (mut == TOKENS_U32)
        LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.tokens", LCX_GGUF_U32, u32s, 9), out);
    else if (mut != NO_TOKENS)
        LCX_TRY_GOTO(lcx_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 9), out);
    if (mut == SCORES_F64)
        LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.scores", LCX_GGUF_F64, scores64, 9), out);
    else
        LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.scores", LCX_GGUF_F32, scores,
                                               mut == SCORES_SHORT ? 8 : 9), out);
    if (mut == TYPES_F32)
        LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.token_type", LCX_GGUF_F32, types_f32, 9), out);
    else if (mut == OK_U32_TYPES)
        LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.token_type", LCX_GGUF_U32, u32s, 9), out);
    else
        LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.token_type", LCX_GGUF_I32, types,
                                               mut == TYPES_SHORT ? 8 : 9), out);
    if (mut == BOS_STRING) LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "tokenizer.ggml.bos_token_id", "1"), out);
    else if (mut == OK_U32_TYPES) LCX_TRY_GOTO(lcx_gguf_writer_add_u64(w, "tokenizer.ggml.bos_token_id", 1), out);
    else LCX_TRY_GOTO(lcx_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", mut == BOS_RANGE ? 9 : 1), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0), out);
    if (mut == ADD_BOS_U8) LCX_TRY_GOTO(lcx_gguf_writer_add_u8(w, "tokenizer.ggml.add_bos_token", 1), out);
    else LCX_TRY_GOTO(lcx_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 1), out);
    if (mut == BAD_MERGE) LCX_TRY_GOTO(lcx_gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, NULL, 2), out);
    LCX_TRY_GOTO(lcx_gguf_writer_write(w, path), out);
out:
    lcx_gguf_writer_free(w);
    return st;
}

/* "ab ab" with BOS: <s> ▁ab ▁ab (derived by hand in test_tokenizer.c). */
static void check_encodes(const lcx_tokenizer *t, const char *what) {
    lcx_tok_ids ids = {0};
    CHECK_OK(lcx_tokenizer_encode(t, "ab ab", 5, 1, &ids));
    uint32_t want[] = {1, 8, 8};
    CHECK_MSG(ids.n == 3 && memcmp(ids.ids, want, sizeof want) == 0, "%s: %zu ids", what, ids.n);
    CHECK_MSG(lcx_tokenizer_bos_id(t) == 1 && lcx_tokenizer_eos_id(t) == 2, "%s: BOS/EOS", what);
    lcx_tok_ids_free(&ids);
}

int main(void) {
    static const struct {
        int mut;
        lcx_status code;
        const char *msg; /* after "<file>: " */
    } bad[] = {
        {MODEL_U32, LCX_ERR_FORMAT, "key 'tokenizer.ggml.model' has type u32, expected string"},
        {MODEL_BERT, LCX_ERR_UNSUPPORTED, "tokenizer.ggml.model 'bert' is not supported"},
        {NO_TOKENS, LCX_ERR_FORMAT, "no tokenizer.ggml.tokens"},
        {TOKENS_U32, LCX_ERR_FORMAT, "key 'tokenizer.ggml.tokens' is an array of u32, expected an array of string"},
        {SCORES_SHORT, LCX_ERR_FORMAT, "tokenizer.ggml.scores has 8 entries for 9 tokens"},
        {SCORES_NAN, LCX_ERR_FORMAT, "tokenizer.ggml.scores[4] is not finite"},
        {SCORES_F64, LCX_ERR_FORMAT, "key 'tokenizer.ggml.scores' is an array of f64, expected an array of f32"},
        {TYPES_F32, LCX_ERR_FORMAT,
         "key 'tokenizer.ggml.token_type' is an array of f32, expected an array of i32 or u32"},
        {TYPES_SHORT, LCX_ERR_FORMAT, "tokenizer.ggml.token_type has 8 entries for 9 tokens"},
        {BOS_RANGE, LCX_ERR_FORMAT, "tokenizer.ggml.bos_token_id 9 out of range"},
        {BOS_STRING, LCX_ERR_FORMAT, "key 'tokenizer.ggml.bos_token_id' has type string, expected an integer"},
        {ADD_BOS_U8, LCX_ERR_FORMAT, "key 'tokenizer.ggml.add_bos_token' has type u8, expected bool"},
        {BAD_MERGE, LCX_ERR_FORMAT, "tokenizer.ggml.merges[1]: 'ab' is not two tokens separated by one space"},
    };
    char path[1024], needle[512];
    lcx_tokenizer *t = NULL;

    /* the good file, by path and through an open lcx_gguf_file (closed before the tokenizer is used) */
    snprintf(path, sizeof path, "%s/tokg_ok.gguf", LCX_BINARY_DIR);
    CHECK_OK(write_vocab(path, OK));
    CHECK_OK(lcx_tokenizer_load_gguf(path, &t));
    if (t) check_encodes(t, "load_gguf");
    lcx_tokenizer_free(t);
    t = NULL;
    CHECK_OK(lcx_tokenizer_open(path, &t)); /* by extension */
    if (t) check_encodes(t, "open");
    lcx_tokenizer_free(t);
    t = NULL;
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(path, &f));
    if (f) CHECK_OK(lcx_tokenizer_from_gguf_file(f, &t));
    /* an HF tokenizer.json is written for byte-level vocabularies only (tests/cli/gguf_tokenizer.sh): a
     * SentencePiece one is refused by name, with nothing returned */
    struct json_t *tj = (struct json_t *)&tj, *tc = (struct json_t *)&tc;
    if (f) CHECK_FAILS(lcx_tokenizer_hf_from_gguf(f, 0, &tj, &tc), LCX_ERR_UNSUPPORTED,
                       "tokg_ok.gguf: tokenizer.ggml.model 'llama': only byte-level BPE (gpt2)");
    CHECK(tj == NULL && tc == NULL);
    /* each broken file below is refused by the HF writer with the tokenizer's own message (checked there) */
    lcx_gguf_close(f);
    if (t) check_encodes(t, "from_gguf_file");
    lcx_tokenizer_free(t);
    t = NULL;
    /* u32 token types and a u64 BOS id mean the same */
    snprintf(path, sizeof path, "%s/tokg_u32.gguf", LCX_BINARY_DIR);
    CHECK_OK(write_vocab(path, OK_U32_TYPES));
    CHECK_OK(lcx_tokenizer_load_gguf(path, &t));
    if (t) check_encodes(t, "u32 token types");
    lcx_tokenizer_free(t);

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/tokg_bad%zu.gguf", LCX_BINARY_DIR, i);
        CHECK_OK(write_vocab(path, bad[i].mut));
        snprintf(needle, sizeof needle, "tokg_bad%zu.gguf: %s", i, bad[i].msg);
        t = NULL;
        CHECK_FAILS(lcx_tokenizer_load_gguf(path, &t), bad[i].code, needle);
        CHECK(t == NULL);
        f = NULL;
        if (lcx_gguf_open(path, &f) == LCX_OK) {
            struct json_t *j1 = NULL, *j2 = NULL;
            CHECK_FAILS(lcx_tokenizer_hf_from_gguf(f, 0, &j1, &j2), bad[i].code, needle);
            CHECK(j1 == NULL && j2 == NULL);
            lcx_gguf_close(f);
        }
        remove(path);
    }
    return test_summary("test_tokenizer_gguf");
}
