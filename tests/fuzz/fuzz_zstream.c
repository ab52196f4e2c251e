/* Fuzz the compressed-input reader (src/core/zstream.h) through the file it opens: the first input byte picks the
 * kind (even: zstd, written as in.zst; odd: gzip, in.gz) and the read size (1 + byte / 2 bytes a call, so small
 * reads cross every internal boundary); the rest is the file. Whatever it is, reading ends: at the end of the
 * stream (every byte handed out, no byte past what was asked) or with a one-line error naming the file; never a
 * hang (a read that neither ends nor returns bytes is a failure here); an empty file is refused at open. At most 64 MiB are read from one input (a
 * small file may expand a lot). Seeds: tests/fuzz/corpus/zstream (made by tests/fuzz/make_seeds.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/core/zstream.h"

static char dir[64];

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_zstream: invariant broken: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_zstream.XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    char path[128];
    snprintf(path, sizeof path, "%s/in.%s", dir, data[0] % 2 ? "gz" : "zst");
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) abort();
    if (fclose(f)) abort();
    const size_t chunk = 1 + data[0] / 2;
    lcx_zstream z;
    lcx_status st = lcx_zstream_open(path, &z);
    if (st == LCX_ERR_UNSUPPORTED) return 0; /* a build without zlib refuses .gz */
    if (size == 1) { /* an empty file: refused, one line naming it */
        require(st == LCX_ERR_FORMAT && strstr(lcx_last_error(), path) == lcx_last_error(), "an empty file refused");
        return 0;
    }
    require(st == LCX_OK, "a written file opens");
    uint8_t *buf = malloc(chunk + 1);
    if (!buf) abort();
    size_t total = 0;
    for (;;) {
        size_t got = (size_t)-1;
        buf[chunk] = 0xA5; /* a canary one past the read size */
        st = lcx_zstream_read(&z, buf, chunk, &got);
        if (st != LCX_OK) {
            const char *m = lcx_last_error();
            require(strstr(m, path) == m, "the error names the file first");
            require(strchr(m, '\n') == NULL, "one line");
            break;
        }
        require(got <= chunk && buf[chunk] == 0xA5, "no byte past the read size");
        require(got > 0 || z.eof, "a read returns bytes or ends");
        if (got == 0) break; /* the end (z.eof, checked above) */
        total += got;
        if (total > ((size_t)64 << 20)) break;
    }
    free(buf);
    lcx_zstream_close(&z);
    return 0;
}
