/* libFuzzer target: lcx_st_parse on arbitrary bytes must return OK or an error, never crash or leak; when it
 * accepts, every tensor view must lie inside the buffer and be findable by name. */
#include <stdint.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lcx_st_file *f = NULL;
    if (lcx_st_parse("fuzz.safetensors", data, size, &f) != LCX_OK) return 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lcx_st_tensor *t = &f->tensors[i];
        if (lcx_st_find(f, t->name) != t) __builtin_trap();
        if (t->end > t->begin) {
            if (t->data < data || t->data + (t->end - t->begin) > data + size) __builtin_trap();
            sum += t->data[0] + t->data[t->end - t->begin - 1]; /* touch both ends under ASan */
        }
    }
    for (size_t i = 0; i < f->n_meta; i++)
        if (lcx_st_meta(f, f->meta_keys[i]) == NULL) __builtin_trap();
    lcx_st_close(f);
    return (int)(sum & 0); /* libFuzzer wants 0 */
}
