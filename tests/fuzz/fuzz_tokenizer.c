/* libFuzzer: arbitrary bytes as (a) text to encode with the fixture tokenizers, decoding the result, and
 * (b) a tokenizer.json document. Nothing may crash, leak or read out of bounds.
 * Run from the source tree (or set LCX_SRC to it) so the fixture tokenizers are found. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/tokenizer/tokenizer.h"

static lcx_tokenizer *toks[4];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        const char *src = getenv("LCX_SRC") ? getenv("LCX_SRC") : ".";
        char p[4096];
        snprintf(p, sizeof p, "%s/tests/fixtures/tokenizer/bytelevel.json", src);
        lcx_tokenizer_load(p, &toks[0]);
        snprintf(p, sizeof p, "%s/tests/fixtures/tokenizer/spm.json", src);
        lcx_tokenizer_load(p, &toks[1]);
        snprintf(p, sizeof p, "%s/tests/fixtures/tokenizer/qwen2.json", src); /* NFC */
        lcx_tokenizer_load(p, &toks[2]);
        snprintf(p, sizeof p, "%s/tests/fixtures/tokenizer/variants.json", src); /* all Split behaviors */
        lcx_tokenizer_load(p, &toks[3]);
        init = 1;
    }
    for (int i = 0; i < 4; i++) {
        if (!toks[i]) continue;
        lcx_tok_ids ids = {0};
        if (lcx_tokenizer_encode(toks[i], (const char *)data, size, 1, &ids) == LCX_OK) {
            char *text;
            size_t len;
            if (lcx_tokenizer_decode(toks[i], ids.ids, ids.n, 0, &text, &len) == LCX_OK) free(text);
        }
        lcx_tok_ids_free(&ids);
    }
    lcx_tokenizer *t = NULL;
    if (lcx_tokenizer_from_json((const char *)data, size, "fuzz.json", &t) == LCX_OK) {
        lcx_tok_ids ids = {0};
        lcx_tokenizer_encode(t, "Hello world <s> 123", 19, 1, &ids);
        lcx_tok_ids_free(&ids);
        lcx_tokenizer_free(t);
    }
    return 0;
}
