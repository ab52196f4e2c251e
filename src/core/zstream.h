/* zstream: reading a zstd-compressed file (.zst) as a stream of bytes, in pieces of a caller's size, so that an
 * input larger than memory once decompressed is read with a bounded buffer (lcextend tokenize's `.jsonl.zst`,
 * the form The Pile and SlimPajama ship in). The compressed file is mapped; several concatenated frames read
 * as one stream, as the zstd tool writes them; a truncated or corrupt stream is an error naming the file. */
#ifndef LCX_ZSTREAM_H
#define LCX_ZSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/fileio.h"
#include "src/core/status.h"

typedef struct lcx_zstream {
    char *path;             /* for messages (owned) */
    lcx_mapping in;         /* the compressed file */
    size_t in_pos;          /* compressed bytes consumed */
    void *dctx;             /* ZSTD_DCtx */
    int frame_open;         /* a frame started and not yet ended */
    int eof;                /* every byte has been returned */
} lcx_zstream;

/* 1 when path names a zstd file by its extension (".zst", ".zstd"). */
int lcx_zstream_is_zst(const char *path);
/* The path without a ".zst"/".zstd" extension: its length (the name the format is guessed from). */
size_t lcx_zstream_stem_len(const char *path);

lcx_status lcx_zstream_open(const char *path, lcx_zstream *z);
/* Up to cap decompressed bytes into dst; *got of them (0 only at the end, then z->eof). */
lcx_status lcx_zstream_read(lcx_zstream *z, uint8_t *dst, size_t cap, size_t *got);
void lcx_zstream_close(lcx_zstream *z); /* no-op on a zeroed one */

#endif
