/* zstream: reading a compressed file as a stream of bytes, in pieces of a caller's size, so that an input larger
 * than memory once decompressed is read with a bounded buffer (lcextend tokenize's `*.jsonl.zst`, the form The
 * Pile and SlimPajama ship in, and `*.json.gz`, C4's and Dolma's). zstd always; gzip where the build found zlib
 * (LCX_HAVE_ZLIB; else a .gz input is refused with a line saying so). The compressed file is mapped; several
 * concatenated frames (gzip members) read as one stream, as `cat a.zst b.zst` writes them; a truncated or
 * corrupt stream is an error naming the file. */
#ifndef LCX_ZSTREAM_H
#define LCX_ZSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/fileio.h"
#include "src/core/status.h"

typedef enum lcx_zkind { LCX_Z_NONE = 0, LCX_Z_ZSTD, LCX_Z_GZIP } lcx_zkind;

typedef struct lcx_zstream {
    char *path;             /* for messages (owned) */
    lcx_zkind kind;
    lcx_mapping in;         /* the compressed file */
    size_t in_pos;          /* compressed bytes consumed */
    void *ctx;              /* ZSTD_DCtx or z_stream */
    int frame_open;         /* a frame (gzip member) started and not yet ended */
    int eof;                /* every byte has been returned */
} lcx_zstream;

/* The compression a path names by its extension: ".zst"/".zstd" zstd, ".gz" gzip, else none. */
lcx_zkind lcx_zstream_kind(const char *path);
/* The path's length without that extension (the name the format is guessed from: web.jsonl.zst -> web.jsonl). */
size_t lcx_zstream_stem_len(const char *path);

/* Open path as a stream of its kind (lcx_zstream_kind, not NONE). */
lcx_status lcx_zstream_open(const char *path, lcx_zstream *z);
/* Up to cap decompressed bytes into dst; *got of them (0 only at the end, then z->eof). */
lcx_status lcx_zstream_read(lcx_zstream *z, uint8_t *dst, size_t cap, size_t *got);
void lcx_zstream_close(lcx_zstream *z); /* no-op on a zeroed one */

#endif
