#include "formats/lcx_codec.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

static const char *codec_names[LCX_CODEC_COUNT] = {"raw", "zstd"};
static const char *filter_names[LCX_FILTER_COUNT] = {"none", "shuffle"};

const char *lcx_codec_name(lcx_codec c) { return (unsigned)c < LCX_CODEC_COUNT ? codec_names[c] : "?"; }
const char *lcx_filter_name(lcx_filter f) { return (unsigned)f < LCX_FILTER_COUNT ? filter_names[f] : "?"; }

int lcx_codec_parse(const char *name, lcx_codec *out) {
    for (int i = 0; i < LCX_CODEC_COUNT; i++)
        if (strcmp(name, codec_names[i]) == 0) return *out = (lcx_codec)i, 1;
    return 0;
}

int lcx_filter_parse(const char *name, lcx_filter *out) {
    for (int i = 0; i < LCX_FILTER_COUNT; i++)
        if (strcmp(name, filter_names[i]) == 0) return *out = (lcx_filter)i, 1;
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LCX_SWAR 1 /* 8-byte word tricks below assume little-endian loads */
#else
#define LCX_SWAR 0
#endif

/* Bytes 0,2,4,6 of a little-endian word packed into its low 32 bits. */
static inline uint32_t even_bytes(uint64_t x) {
    x &= 0x00FF00FF00FF00FFull;
    x = (x | x >> 8) & 0x0000FFFF0000FFFFull;
    return (uint32_t)(x | x >> 16);
}
/* Inverse: 4 bytes spread to byte positions 0,2,4,6. */
static inline uint64_t spread_bytes(uint32_t v) {
    uint64_t x = v;
    x = (x | x << 16) & 0x0000FFFF0000FFFFull;
    return (x | x << 8) & 0x00FF00FF00FF00FFull;
}

void lcx_byte_shuffle(const void *src, void *dst, size_t n, size_t es) {
    const uint8_t *s = src;
    uint8_t *d = dst;
    size_t i = 0;
    if (es == 2) { /* bf16/f16: the hot case */
        uint8_t *lo = d, *hi = d + n;
        if (LCX_SWAR)
            for (; i + 4 <= n; i += 4) {
                uint64_t x;
                memcpy(&x, s + 2 * i, 8);
                uint32_t a = even_bytes(x), b = even_bytes(x >> 8);
                memcpy(lo + i, &a, 4);
                memcpy(hi + i, &b, 4);
            }
        for (; i < n; i++) {
            lo[i] = s[2 * i];
            hi[i] = s[2 * i + 1];
        }
        return;
    }
    if (es == 4) { /* f32: one sequential read stream, four write streams */
        for (; i < n; i++) {
            d[i] = s[4 * i];
            d[n + i] = s[4 * i + 1];
            d[2 * n + i] = s[4 * i + 2];
            d[3 * n + i] = s[4 * i + 3];
        }
        return;
    }
    for (; i < n; i++)
        for (size_t k = 0; k < es; k++) d[k * n + i] = s[i * es + k];
}

void lcx_byte_unshuffle(const void *src, void *dst, size_t n, size_t es) {
    const uint8_t *s = src;
    uint8_t *d = dst;
    size_t i = 0;
    if (es == 2) {
        const uint8_t *lo = s, *hi = s + n;
        if (LCX_SWAR)
            for (; i + 4 <= n; i += 4) {
                uint32_t a, b;
                memcpy(&a, lo + i, 4);
                memcpy(&b, hi + i, 4);
                uint64_t x = spread_bytes(a) | spread_bytes(b) << 8;
                memcpy(d + 2 * i, &x, 8);
            }
        for (; i < n; i++) {
            d[2 * i] = lo[i];
            d[2 * i + 1] = hi[i];
        }
        return;
    }
    if (es == 4) {
        for (; i < n; i++) {
            d[4 * i] = s[i];
            d[4 * i + 1] = s[n + i];
            d[4 * i + 2] = s[2 * n + i];
            d[4 * i + 3] = s[3 * n + i];
        }
        return;
    }
    for (; i < n; i++)
        for (size_t k = 0; k < es; k++) d[i * es + k] = s[k * n + i];
}

uint64_t lcx_xxh3(const void *p, size_t n) { return (uint64_t)XXH3_64bits(p, n); }

void lcx_xxh3_hex(uint64_t h, char out[17]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, h >>= 4) out[i] = hex[h & 15];
    out[16] = '\0';
}

int lcx_xxh3_parse(const char *s, uint64_t *out) {
    uint64_t h = 0;
    for (int i = 0; i < 16; i++) {
        char ch = s[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0) return 0; /* also stops at a short string's NUL */
        h = h << 4 | (uint64_t)v;
    }
    if (s[16] != '\0') return 0;
    *out = h;
    return 1;
}

void lcx_codec_ctx_init(lcx_codec_ctx *c, int level, int threads) {
    memset(c, 0, sizeof *c);
    c->level = level;
    c->threads = threads;
}

void lcx_codec_ctx_free(lcx_codec_ctx *c) {
    if (!c) return;
    ZSTD_freeCCtx(c->cctx);
    ZSTD_freeDCtx(c->dctx);
    free(c->out);
    free(c->tmp);
    memset(c, 0, sizeof *c);
}

static lcx_status reserve(uint8_t **buf, size_t *cap, size_t n) {
    if (*cap >= n && *buf) return LCX_OK;
    uint8_t *p = realloc(*buf, n ? n : 1);
    LCX_FAIL_IF(!p, LCX_ERR_OOM, "cannot allocate %zu bytes for checkpoint piece", n);
    *buf = p;
    *cap = n;
    return LCX_OK;
}

lcx_status lcx_codec_encode(lcx_codec_ctx *c, lcx_codec codec, lcx_filter filter, size_t es, const void *src,
                            size_t n, const uint8_t **stored, size_t *stored_len) {
    LCX_FAIL_IF(es == 0 || n % es != 0, LCX_ERR_INVALID, "encode: %zu bytes is not a whole number of %zu-byte elements",
                n, es);
    LCX_FAIL_IF((unsigned)codec >= LCX_CODEC_COUNT || (unsigned)filter >= LCX_FILTER_COUNT, LCX_ERR_INVALID,
                "encode: unknown codec %d / filter %d", (int)codec, (int)filter);
    const uint8_t *in = src;
    if (filter == LCX_FILTER_SHUFFLE && es > 1) {
        LCX_TRY(reserve(&c->tmp, &c->tmp_cap, n));
        lcx_byte_shuffle(src, c->tmp, n / es, es);
        in = c->tmp;
    }
    if (codec == LCX_CODEC_RAW) {
        *stored = in;
        *stored_len = n;
        return LCX_OK;
    }
    if (!c->cctx) {
        c->cctx = ZSTD_createCCtx();
        LCX_FAIL_IF(!c->cctx, LCX_ERR_OOM, "cannot create a zstd compression context");
        ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, c->level);
        ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 1);
        /* Fails harmlessly on a libzstd built without threads: it then compresses in this thread. */
        if (c->threads > 0) ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_nbWorkers, c->threads);
    }
    size_t bound = ZSTD_compressBound(n);
    LCX_TRY(reserve(&c->out, &c->out_cap, bound));
    size_t r = ZSTD_compress2(c->cctx, c->out, bound, in, n);
    LCX_FAIL_IF(ZSTD_isError(r), LCX_ERR_IO, "zstd compression failed: %s", ZSTD_getErrorName(r));
    *stored = c->out;
    *stored_len = r;
    return LCX_OK;
}

lcx_status lcx_codec_decode(lcx_codec_ctx *c, lcx_codec codec, lcx_filter filter, size_t es, const void *stored,
                            size_t stored_len, void *dst, size_t raw_len) {
    LCX_FAIL_IF(es == 0 || raw_len % es != 0, LCX_ERR_FORMAT, "%zu bytes is not a whole number of %zu-byte elements",
                raw_len, es);
    int shuffle = filter == LCX_FILTER_SHUFFLE && es > 1;
    /* Decode into dst directly unless the shuffle filter needs a staging copy. */
    uint8_t *out = dst;
    if (shuffle) {
        LCX_TRY(reserve(&c->tmp, &c->tmp_cap, raw_len));
        out = c->tmp;
    }
    if (codec == LCX_CODEC_RAW) {
        LCX_FAIL_IF(stored_len != raw_len, LCX_ERR_FORMAT, "raw piece stores %zu bytes, expected %zu", stored_len,
                    raw_len);
        if (!shuffle) {
            if (dst != stored && raw_len) memcpy(dst, stored, raw_len);
            return LCX_OK;
        }
        lcx_byte_unshuffle(stored, dst, raw_len / es, es);
        return LCX_OK;
    }
    LCX_FAIL_IF(codec != LCX_CODEC_ZSTD, LCX_ERR_FORMAT, "unknown codec %d", (int)codec);
    unsigned long long fcs = ZSTD_getFrameContentSize(stored, stored_len);
    LCX_FAIL_IF(fcs == ZSTD_CONTENTSIZE_ERROR, LCX_ERR_FORMAT, "not a zstd frame");
    LCX_FAIL_IF(fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != raw_len, LCX_ERR_FORMAT,
                "zstd frame holds %llu bytes, expected %zu", fcs, raw_len);
    if (!c->dctx) {
        c->dctx = ZSTD_createDCtx();
        LCX_FAIL_IF(!c->dctx, LCX_ERR_OOM, "cannot create a zstd decompression context");
    }
    size_t r = ZSTD_decompressDCtx(c->dctx, out, raw_len, stored, stored_len);
    LCX_FAIL_IF(ZSTD_isError(r), LCX_ERR_FORMAT, "zstd: %s", ZSTD_getErrorName(r));
    LCX_FAIL_IF(r != raw_len, LCX_ERR_FORMAT, "zstd piece decompressed to %zu bytes, expected %zu", r, raw_len);
    if (shuffle) lcx_byte_unshuffle(out, dst, raw_len / es, es);
    return LCX_OK;
}
