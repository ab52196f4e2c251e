/* libFuzzer target: the GGUF parser on arbitrary bytes, then every accessor a loader would call on what it
 * accepted (getters, array elements, tensor conversion, the tokenizer from tokenizer.ggml.*), so accepted files
 * are also exercised. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "src/tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lcx_gguf_file *f = NULL;
    if (lcx_gguf_parse("fuzz.gguf", data, size, &f) != LCX_OK) return 0;
    for (size_t i = 0; i < f->n_kv; i++) {
        const lcx_gguf_kv *kv = &f->kv[i];
        uint64_t u;
        int64_t s;
        double d;
        int b;
        const char *str;
        size_t len;
        char *dup = NULL;
        (void)lcx_gguf_get_u64(f, kv->key, &u);
        (void)lcx_gguf_get_i64(f, kv->key, &s);
        (void)lcx_gguf_get_f64(f, kv->key, &d);
        (void)lcx_gguf_get_bool(f, kv->key, &b);
        (void)lcx_gguf_get_str(f, kv->key, &str, &len);
        if (lcx_gguf_get_str_dup(f, kv->key, &dup) == LCX_OK) free(dup);
        if (kv->type == LCX_GGUF_ARRAY) {
            uint64_t n = kv->count < 64 ? kv->count : 64;
            for (uint64_t k = 0; k < n; k++) {
                (void)lcx_gguf_arr_int(kv, k, &s);
                (void)lcx_gguf_arr_float(kv, k, &d);
                if (lcx_gguf_arr_str(kv, k, &str, &len) == LCX_OK && len) (void)(volatile char)str[len - 1];
            }
            (void)lcx_gguf_arr_int(kv, kv->count, &s);
        }
    }
    lcx_tokenizer *tok = NULL;
    if (lcx_tokenizer_from_gguf_file(f, &tok) == LCX_OK) {
        lcx_tok_ids ids = {0};
        (void)lcx_tokenizer_encode(tok, (const char *)data, size < 256 ? size : 256, 1, &ids);
        lcx_tok_ids_free(&ids);
        lcx_tokenizer_free(tok);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lcx_gguf_tensor *t = &f->tensors[i];
        if (lcx_gguf_find_tensor(f, t->name) != t) abort();
        lcx_shape sh = lcx_gguf_tensor_shape(t);
        (void)sh;
        if (t->nbytes) (void)(volatile uint8_t)t->data[t->nbytes - 1];
        if (t->numel <= (1u << 16)) {
            float *out = malloc((size_t)t->numel * sizeof(float) + 1);
            if (out) (void)lcx_gguf_tensor_to_f32(f, t, out);
            free(out);
        }
    }
    lcx_gguf_close(f);
    return 0;
}
