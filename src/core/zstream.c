#include "src/core/zstream.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#ifdef LCX_HAVE_ZLIB
#include <zlib.h>
#endif

static int ends_with(const char *s, size_t n, const char *ext) {
    size_t k = strlen(ext);
    return n > k && !strcmp(s + n - k, ext);
}

lcx_zkind lcx_zstream_kind(const char *path) {
    size_t n = strlen(path);
    if (ends_with(path, n, ".zst") || ends_with(path, n, ".zstd")) return LCX_Z_ZSTD;
    if (ends_with(path, n, ".gz")) return LCX_Z_GZIP;
    return LCX_Z_NONE;
}

size_t lcx_zstream_stem_len(const char *path) {
    size_t n = strlen(path);
    switch (lcx_zstream_kind(path)) {
    case LCX_Z_ZSTD: return n - (ends_with(path, n, ".zst") ? 4 : 5);
    case LCX_Z_GZIP: return n - 3;
    default: return n;
    }
}

lcx_status lcx_zstream_open(const char *path, lcx_zstream *z) {
    memset(z, 0, sizeof *z);
    z->kind = lcx_zstream_kind(path);
    LCX_FAIL_IF(z->kind == LCX_Z_NONE, LCX_ERR_INVALID, "%s: not a compressed file's name (.zst, .zstd, .gz)", path);
#ifndef LCX_HAVE_ZLIB
    LCX_FAIL_IF(z->kind == LCX_Z_GZIP, LCX_ERR_UNSUPPORTED,
                "%s: this build reads no gzip files (built without zlib: install zlib1g-dev and rebuild, or "
                "decompress it first)", path);
#endif
    z->path = strdup(path);
    LCX_FAIL_IF(!z->path, LCX_ERR_OOM, "%s: out of memory", path);
    lcx_status st = lcx_map_file(path, &z->in);
    /* the zstd and gzip tools refuse an empty file too: here it is a failed download, not an empty corpus */
    if (st == LCX_OK && z->in.size == 0)
        st = lcx_fail(LCX_ERR_FORMAT, "%s: empty file (a %s file holds at least one frame)", path,
                      z->kind == LCX_Z_ZSTD ? "zstd" : "gzip");
    if (st == LCX_OK && z->kind == LCX_Z_ZSTD && !(z->ctx = ZSTD_createDCtx()))
        st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
#ifdef LCX_HAVE_ZLIB
    if (st == LCX_OK && z->kind == LCX_Z_GZIP) {
        z_stream *g = calloc(1, sizeof *g);
        if (!g || inflateInit2(g, 15 + 16) != Z_OK) { /* 15 + 16: a gzip header and trailer */
            free(g);
            st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
        } else {
            z->ctx = g;
        }
    }
#endif
    if (st != LCX_OK) lcx_zstream_close(z);
    return st;
}

/* One step of the decoder: consumes from the input at *in_pos, writes at dst[*out_pos..cap); *more = 1 while the
 * current frame (member) is not complete. */
static lcx_status step(lcx_zstream *z, uint8_t *dst, size_t cap, size_t *out_pos, size_t *in_pos, int *more) {
    if (z->kind == LCX_Z_ZSTD) {
        ZSTD_outBuffer out = {dst, cap, *out_pos};
        ZSTD_inBuffer in = {z->in.data, z->in.size, *in_pos};
        size_t r = ZSTD_decompressStream(z->ctx, &out, &in);
        LCX_FAIL_IF(ZSTD_isError(r), LCX_ERR_FORMAT, "%s: not a valid zstd stream at compressed byte %zu: %s",
                    z->path, in.pos, ZSTD_getErrorName(r));
        *out_pos = out.pos, *in_pos = in.pos, *more = r != 0;
        return LCX_OK;
    }
#ifdef LCX_HAVE_ZLIB
    z_stream *g = z->ctx;
    /* zlib counts in uInt: feed and take at most 1 GiB a call */
    size_t in_left = z->in.size - *in_pos, out_left = cap - *out_pos;
    g->next_in = (Bytef *)(uintptr_t)(z->in.data + *in_pos);
    g->avail_in = (uInt)(in_left < (1u << 30) ? in_left : 1u << 30);
    g->next_out = dst + *out_pos, g->avail_out = (uInt)(out_left < (1u << 30) ? out_left : 1u << 30);
    uInt in0 = g->avail_in, out0 = g->avail_out;
    int r = inflate(g, Z_NO_FLUSH);
    *in_pos += in0 - g->avail_in, *out_pos += out0 - g->avail_out;
    LCX_FAIL_IF(r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR, LCX_ERR_FORMAT,
                "%s: not a valid gzip stream at compressed byte %zu: %s", z->path, *in_pos,
                g->msg ? g->msg : "inflate failed");
    *more = r != Z_STREAM_END;
    if (r == Z_STREAM_END) {
        LCX_FAIL_IF(inflateReset(g) != Z_OK, LCX_ERR_FORMAT, "%s: inflateReset failed", z->path);
        while (*in_pos < z->in.size && z->in.data[*in_pos] == 0) ++*in_pos; /* zero padding, as gzip skips it */
    }
    return LCX_OK;
#else
    (void)dst, (void)cap, (void)out_pos, (void)in_pos, (void)more;
    return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: built without zlib", z->path);
#endif
}

lcx_status lcx_zstream_read(lcx_zstream *z, uint8_t *dst, size_t cap, size_t *got) {
    size_t out_pos = 0, in_pos = z->in_pos;
    lcx_status st = LCX_OK;
    while (out_pos < cap && !z->eof) {
        if (in_pos == z->in.size && !z->frame_open) { /* every frame ended and no input is left: the end */
            z->eof = 1;
            break;
        }
        size_t before = out_pos, in_before = in_pos;
        int more = 0;
        if ((st = step(z, dst, cap, &out_pos, &in_pos, &more)) != LCX_OK) break;
        z->frame_open = more;
        /* a frame that wants more input when there is none, with nothing left to flush: cut off */
        if (more && in_pos == z->in.size && out_pos == before) {
            st = lcx_fail(LCX_ERR_FORMAT, "%s: %s stream is truncated (the last %s is cut off after %zu compressed "
                          "bytes)", z->path, z->kind == LCX_Z_ZSTD ? "zstd" : "gzip",
                          z->kind == LCX_Z_ZSTD ? "frame" : "member", z->in.size);
            break;
        }
        if (out_pos == before && in_pos == in_before) { /* a decoder that neither reads nor writes */
            st = lcx_fail(LCX_ERR_FORMAT, "%s: the decoder is stuck at compressed byte %zu", z->path, in_pos);
            break;
        }
    }
    z->in_pos = in_pos;
    *got = out_pos;
    return st;
}

void lcx_zstream_close(lcx_zstream *z) {
    if (!z) return;
    if (z->kind == LCX_Z_ZSTD) ZSTD_freeDCtx(z->ctx);
#ifdef LCX_HAVE_ZLIB
    if (z->kind == LCX_Z_GZIP && z->ctx) {
        inflateEnd(z->ctx);
        free(z->ctx);
    }
#endif
    lcx_unmap(&z->in);
    free(z->path);
    memset(z, 0, sizeof *z);
}
