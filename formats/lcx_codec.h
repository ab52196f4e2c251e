/* lcx_codec: how checkpoint pieces are stored — an optional byte-shuffle filter, then raw or zstd — and their
 * XXH3-64 checksums. Used by formats/lcx (the native checkpoint) and bench/bench_lcx_codec. */
#ifndef LCX_FORMATS_LCX_CODEC_H
#define LCX_FORMATS_LCX_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

typedef enum lcx_codec { LCX_CODEC_RAW = 0, LCX_CODEC_ZSTD, LCX_CODEC_COUNT } lcx_codec;
typedef enum lcx_filter { LCX_FILTER_NONE = 0, LCX_FILTER_SHUFFLE, LCX_FILTER_COUNT } lcx_filter;

/* "raw" / "zstd", "none" / "shuffle"; parsing returns 0 for an unknown name. */
const char *lcx_codec_name(lcx_codec c);
const char *lcx_filter_name(lcx_filter f);
int lcx_codec_parse(const char *name, lcx_codec *out);
int lcx_filter_parse(const char *name, lcx_filter *out);

/* Byte shuffle of n elements of es bytes: dst[k*n + i] = src[i*es + k] (byte k of every element together, so
 * the exponent bytes of bf16/fp32 sit side by side and compress well). Unshuffle inverts it. */
void lcx_byte_shuffle(const void *src, void *dst, size_t n, size_t es);
void lcx_byte_unshuffle(const void *src, void *dst, size_t n, size_t es);

/* XXH3-64 of a buffer; 16 lowercase hex digits (+NUL) and back (exactly 16 hex digits, else 0). */
uint64_t lcx_xxh3(const void *p, size_t n);
void lcx_xxh3_hex(uint64_t h, char out[17]);
int lcx_xxh3_parse(const char *hex, uint64_t *out);

/* Reusable compression state and scratch buffers (one per thread). */
typedef struct lcx_codec_ctx {
    void *cctx, *dctx;  /* ZSTD_CCtx / ZSTD_DCtx, created on first use */
    int level, threads; /* zstd level (1..22, negative = fast) and worker threads (0 = in the caller's thread) */
    uint8_t *out;       /* encode output / decode staging */
    size_t out_cap;
    uint8_t *tmp;       /* shuffle staging */
    size_t tmp_cap;
} lcx_codec_ctx;

void lcx_codec_ctx_init(lcx_codec_ctx *c, int level, int threads);
void lcx_codec_ctx_free(lcx_codec_ctx *c); /* zeroed or NULL: no-op */

/* Encode n bytes (n multiple of es) with filter then codec. *stored points at src itself (raw, no filter) or at
 * the context's buffer, valid until the next call on the context. zstd frames carry their content size and
 * zstd's own content checksum. */
lcx_status lcx_codec_encode(lcx_codec_ctx *c, lcx_codec codec, lcx_filter filter, size_t es, const void *src,
                            size_t n, const uint8_t **stored, size_t *stored_len);
/* Decode stored bytes into dst, which must come out exactly raw_len bytes (else LCX_ERR_FORMAT). */
lcx_status lcx_codec_decode(lcx_codec_ctx *c, lcx_codec codec, lcx_filter filter, size_t es, const void *stored,
                            size_t stored_len, void *dst, size_t raw_len);

#endif
