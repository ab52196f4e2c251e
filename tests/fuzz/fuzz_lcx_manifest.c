/* Fuzz the .lcx manifest reader: the input is manifest.json of a checkpoint directory whose data file holds 4 KiB
 * of fixed bytes. Whatever opens must also survive reading every tensor in full and lcx_ckpt_verify.
 * Seed idea: a manifest written by test_lcx (e.g. the "hostile" checkpoint) with data-0.bin truncated to 4 KiB. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/lcx.h"

static char dir[64];

static void write_bytes(const char *name, const void *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_lcx.XXXXXX");
        if (!mkdtemp(dir)) abort();
        uint8_t blob[4096];
        for (size_t i = 0; i < sizeof blob; i++) blob[i] = (uint8_t)(i * 131 + 7);
        write_bytes("data-0.bin", blob, sizeof blob);
        write_bytes("tokenizer.json", "{}", 2);
    }
    write_bytes(LCX_CKPT_MANIFEST, data, size);
    lcx_ckpt *ck = NULL;
    if (lcx_ckpt_open(dir, &ck) == LCX_OK) {
        for (int i = 0; i < lcx_ckpt_tensor_count(ck); i++) {
            const lcx_ckpt_tensor *t = lcx_ckpt_tensor_at(ck, i);
            lcx_box full = lcx_box_full(t->ndim, t->shape);
            uint64_t n;
            if (lcx_box_volume(&full, &n) != LCX_OK || n > (1u << 16)) continue; /* bound memory, not validity */
            void *buf = malloc(n * t->es + 1);
            (void)lcx_ckpt_read_box(ck, t->name, t->role, &full, buf);
            free(buf);
        }
        (void)lcx_ckpt_verify(ck);
    }
    lcx_ckpt_free(ck);
    return 0;
}
