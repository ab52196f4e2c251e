#include "src/core/zstream.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static size_t ext_len(const char *path) {
    size_t n = strlen(path);
    if (n > 4 && !strcmp(path + n - 4, ".zst")) return 4;
    if (n > 5 && !strcmp(path + n - 5, ".zstd")) return 5;
    return 0;
}

int lcx_zstream_is_zst(const char *path) { return ext_len(path) > 0; }

size_t lcx_zstream_stem_len(const char *path) { return strlen(path) - ext_len(path); }

lcx_status lcx_zstream_open(const char *path, lcx_zstream *z) {
    memset(z, 0, sizeof *z);
    z->path = strdup(path);
    LCX_FAIL_IF(!z->path, LCX_ERR_OOM, "%s: out of memory", path);
    lcx_status st = lcx_map_file(path, &z->in);
    if (st == LCX_OK && !(z->dctx = ZSTD_createDCtx())) st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
    if (st != LCX_OK) lcx_zstream_close(z);
    return st;
}

lcx_status lcx_zstream_read(lcx_zstream *z, uint8_t *dst, size_t cap, size_t *got) {
    ZSTD_outBuffer out = {dst, cap, 0};
    ZSTD_inBuffer in = {z->in.data, z->in.size, z->in_pos};
    while (out.pos < out.size && !z->eof) {
        if (in.pos == in.size && !z->frame_open) { /* every frame ended and no input is left: the end */
            z->eof = 1;
            break;
        }
        size_t before = out.pos;
        size_t r = ZSTD_decompressStream(z->dctx, &out, &in);
        LCX_FAIL_IF(ZSTD_isError(r), LCX_ERR_FORMAT, "%s: not a valid zstd stream at compressed byte %zu: %s",
                    z->path, in.pos, ZSTD_getErrorName(r));
        z->frame_open = r != 0;
        /* a frame that wants more input when there is none, with nothing left to flush: cut off */
        LCX_FAIL_IF(r != 0 && in.pos == in.size && out.pos == before, LCX_ERR_FORMAT,
                    "%s: zstd stream is truncated (the last frame is cut off after %zu compressed bytes)", z->path,
                    in.size);
    }
    z->in_pos = in.pos;
    *got = out.pos;
    return LCX_OK;
}

void lcx_zstream_close(lcx_zstream *z) {
    if (!z) return;
    ZSTD_freeDCtx(z->dctx);
    lcx_unmap(&z->in);
    free(z->path);
    memset(z, 0, sizeof *z);
}
