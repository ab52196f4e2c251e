/* Fuzz the Megatron indexed dataset reader (formats/tokdata.h) through the files it opens: the input is split into
 * PREFIX.idx and PREFIX.bin (a little-endian u32 length L of the .idx, then L bytes of .idx, the rest .bin; L past
 * the end takes everything as .idx with an empty .bin), written to a private directory and opened with
 * lcx_tokdata_open. Whatever opens must survive reading every sequence in full (converted to ids) and walking every
 * document's sequences; a failure is one line naming the file. Seeds: tests/fuzz/corpus/tokdata (made by
 * tests/fuzz/make_seeds.py from tests/fixtures/tokdata and small writer outputs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/tokdata.h"

static char dir[64], prefix[96];

static void write_bytes(const char *ext, const uint8_t *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s%s", prefix, ext);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f)) abort();
}

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_tokdata: invariant broken: %s\n", what);
        abort();
    }
}

static void cleanup(void) { /* at exit: the private directory goes */
    char p[128];
    snprintf(p, sizeof p, "%s/ds.idx", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/ds.bin", dir);
    unlink(p);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_tokdata.XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
        snprintf(prefix, sizeof prefix, "%s/ds", dir);
    }
    size_t li = size;
    if (size >= 4) {
        uint32_t l = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
        data += 4;
        size -= 4;
        li = l <= size ? l : size;
    } else {
        li = size;
    }
    write_bytes(".idx", data, li);
    write_bytes(".bin", data + li, size - li);
    lcx_tokdata td;
    if (lcx_tokdata_open(prefix, &td) != LCX_OK) {
        const char *m = lcx_last_error();
        require(!strchr(m, '\n'), "one-line error");
        require(strstr(m, prefix) != NULL, "error names the file");
        return 0;
    }
    require(td.n_seqs <= li && td.n_tokens * td.itemsize == td.bin.size, "counts bounded by the files");
    uint32_t *ids = malloc(td.n_tokens ? td.n_tokens * sizeof *ids : 1);
    if (!ids) abort();
    for (uint64_t i = 0; i < td.n_seqs; i++) {
        uint64_t len = lcx_tokdata_seq_len(&td, i);
        require(len <= td.n_tokens, "sequence within the tokens");
        (void)lcx_tokdata_read(&td, i, 0, len, ids);
        if (len) (void)lcx_tokdata_read(&td, i, len - 1, 1, ids);
        require(lcx_tokdata_read(&td, i, 0, len + 1, ids) != LCX_OK, "read past a sequence refused");
    }
    for (uint64_t d = 0; d < td.n_docs; d++) {
        uint64_t first, end;
        lcx_tokdata_doc_seqs(&td, d, &first, &end);
        require(first <= end && end <= td.n_seqs, "document within the sequences");
    }
    free(ids);
    lcx_tokdata_close(&td);
    return 0;
}
