/* Reading the tokenizer parity fixtures written by tests/fixtures/gen_tokenizer.py (format described there). */
#ifndef LCX_TESTS_TOK_FIXTURE_H
#define LCX_TESTS_TOK_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "src/core/fileio.h"

#define TOK_FIXTURE_DIR LCX_SOURCE_DIR "/tests/fixtures/tokenizer/"

/* Whole zstd file, decompressed (NULL on failure, message on stderr). */
static inline uint8_t *tokfx_read_zst(const char *path, size_t *len) {
    char *raw;
    size_t rl;
    if (lcx_read_file(path, (size_t)64 << 20, &raw, &rl) != LCX_OK) {
        fprintf(stderr, "%s: %s\n", path, lcx_last_error());
        return NULL;
    }
    unsigned long long n = ZSTD_getFrameContentSize(raw, rl);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > ((size_t)256 << 20)) {
        fprintf(stderr, "%s: not a zstd frame with a known size\n", path);
        free(raw);
        return NULL;
    }
    uint8_t *out = malloc(n ? n : 1);
    size_t got = out ? ZSTD_decompress(out, n, raw, rl) : 0;
    free(raw);
    if (!out || ZSTD_isError(got) || got != n) {
        fprintf(stderr, "%s: zstd decompression failed\n", path);
        free(out);
        return NULL;
    }
    *len = n;
    return out;
}

static inline uint32_t tokfx_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline uint64_t tokfx_u64(const uint8_t *p) { return tokfx_u32(p) | (uint64_t)tokfx_u32(p + 4) << 32; }

typedef struct tokfx_sample {
    uint8_t *blob;
    uint32_t n_docs;
    const uint8_t **doc; /* [n_docs] */
    size_t *len;         /* [n_docs] */
} tokfx_sample;

static inline int tokfx_sample_load(tokfx_sample *s) {
    size_t n;
    memset(s, 0, sizeof *s);
    s->blob = tokfx_read_zst(TOK_FIXTURE_DIR "sample.bin.zst", &n);
    if (!s->blob || n < 12 || memcmp(s->blob, "LCXTOKS1", 8) != 0) return 0;
    s->n_docs = tokfx_u32(s->blob + 8);
    if ((n - 12) / 4 < s->n_docs) return 0;
    s->doc = calloc(s->n_docs, sizeof *s->doc);
    s->len = calloc(s->n_docs, sizeof *s->len);
    size_t off = 12 + 4 * (size_t)s->n_docs;
    for (uint32_t i = 0; i < s->n_docs; i++) {
        s->len[i] = tokfx_u32(s->blob + 12 + 4 * (size_t)i);
        if (off + s->len[i] > n) return 0;
        s->doc[i] = s->blob + off;
        off += s->len[i];
    }
    return off == n;
}

static inline void tokfx_sample_free(tokfx_sample *s) {
    free(s->blob); free(s->doc); free(s->len);
}

typedef struct tokfx_expected {
    uint8_t *blob;
    uint32_t n_docs;
    uint32_t *n_ids;        /* [n_docs] */
    uint64_t *h_full, *h_plain;
    uint8_t *roundtrip;
    uint32_t **ids;         /* [n_docs] -> [n_ids] */
} tokfx_expected;

static inline int tokfx_expected_load(const char *name, tokfx_expected *e) {
    char path[1024];
    size_t n;
    memset(e, 0, sizeof *e);
    snprintf(path, sizeof path, "%s%s.expected.zst", TOK_FIXTURE_DIR, name);
    e->blob = tokfx_read_zst(path, &n);
    if (!e->blob || n < 12 || memcmp(e->blob, "LCXTOKE1", 8) != 0) return 0;
    e->n_docs = tokfx_u32(e->blob + 8);
    size_t off = 12, rec = 4 + 8 + 8 + 1;
    if ((n - off) / rec < e->n_docs) return 0;
    e->n_ids = calloc(e->n_docs, sizeof *e->n_ids);
    e->h_full = calloc(e->n_docs, sizeof *e->h_full);
    e->h_plain = calloc(e->n_docs, sizeof *e->h_plain);
    e->roundtrip = calloc(e->n_docs, 1);
    e->ids = calloc(e->n_docs, sizeof *e->ids);
    for (uint32_t i = 0; i < e->n_docs; i++, off += rec) {
        e->n_ids[i] = tokfx_u32(e->blob + off);
        e->h_full[i] = tokfx_u64(e->blob + off + 4);
        e->h_plain[i] = tokfx_u64(e->blob + off + 12);
        e->roundtrip[i] = e->blob[off + 20];
    }
    for (uint32_t i = 0; i < e->n_docs; i++) {
        if (off + 2 * (size_t)e->n_ids[i] > n) return 0;
        e->ids[i] = malloc((e->n_ids[i] + 1) * sizeof(uint32_t));
        for (uint32_t k = 0; k < e->n_ids[i]; k++)
            e->ids[i][k] = (uint32_t)e->blob[off + 2 * k] | (uint32_t)e->blob[off + 2 * k + 1] << 8;
        off += 2 * (size_t)e->n_ids[i];
    }
    return off == n;
}

static inline void tokfx_expected_free(tokfx_expected *e) {
    for (uint32_t i = 0; e->ids && i < e->n_docs; i++) free(e->ids[i]);
    free(e->blob); free(e->n_ids); free(e->h_full); free(e->h_plain); free(e->roundtrip); free(e->ids);
}

static inline uint64_t tokfx_fnv1a64(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

#endif
