/* Fuzz loading a Hugging Face tokenizer.json from a file, as `lcextend tokenize --tokenizer` and import do
 * (lcx_tokenizer_load: the input opener, the size bound, the JSON parse and every model / normalizer /
 * pre-tokenizer / decoder it names). Whatever loads must encode and decode a few fixed texts, and every id in its
 * table must name a token; a failure is one line naming the file. fuzz_tokenizer covers encoding arbitrary text
 * with the fixture tokenizers. Seeds: tests/fuzz/corpus/tokenizer_json (tests/fuzz/make_seeds.py: the fixture
 * tokenizers cut down to a few hundred entries). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/tokenizer/tokenizer.h"

static char dir[64], path[96];

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_tokenizer_json: invariant broken: %s\n", what);
        abort();
    }
}

static void cleanup(void) { /* at exit: the private directory goes */
    char p[128];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_tokjson.XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
    lcx_tokenizer *t = NULL;
    if (lcx_tokenizer_load(path, &t) != LCX_OK) {
        const char *m = lcx_last_error();
        require(t == NULL, "no tokenizer on failure");
        require(!strchr(m, '\n'), "one-line error");
        return 0;
    }
    static const char *texts[] = {"Hello world", " <s> 123\n\n\tcaf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 ", "", "\xff\xfe a"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        lcx_tok_ids ids = {0};
        if (lcx_tokenizer_encode(t, texts[k], strlen(texts[k]), 1, &ids) == LCX_OK) {
            char *text;
            size_t len;
            for (size_t i = 0; i < ids.n; i++) require(ids.ids[i] < lcx_tokenizer_vocab_size(t), "id in vocabulary");
            if (lcx_tokenizer_decode(t, ids.ids, ids.n, 0, &text, &len) == LCX_OK) free(text);
            if (lcx_tokenizer_decode(t, ids.ids, ids.n, 1, &text, &len) == LCX_OK) free(text);
        }
        lcx_tok_ids_free(&ids);
    }
    size_t n = lcx_tokenizer_vocab_size(t);
    for (size_t i = 0; i < n && i < 4096; i++) {
        size_t len;
        const char *tok = lcx_tokenizer_token(t, (uint32_t)i, &len);
        if (tok) (void)lcx_tokenizer_token_id(t, tok, len);
        (void)lcx_tokenizer_is_special(t, (uint32_t)i);
    }
    (void)lcx_tokenizer_bos_id(t);
    (void)lcx_tokenizer_eos_id(t);
    lcx_tokenizer_free(t);
    return 0;
}
