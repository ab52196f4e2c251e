/* NFC: canonical decomposition (tables + Hangul), canonical ordering, canonical composition (UAX #15). */
#include "src/tokenizer/tok_nfc.h"

#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/tok_internal.h"

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int find1(const uint32_t (*tab)[1], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tab[mid][0] < cp) lo = mid + 1; else hi = mid;
    }
    return lo < n && tab[lo][0] == cp;
}

static uint32_t ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = tok_nfc_n_ccc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_nfc_ccc[mid][0] < cp) lo = mid + 1; else hi = mid;
    }
    return lo < tok_nfc_n_ccc && tok_nfc_ccc[lo][0] == cp ? tok_nfc_ccc[lo][1] : 0;
}

static const uint32_t *decomp(uint32_t cp) {
    size_t lo = 0, hi = tok_nfc_n_decomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_nfc_decomp[mid][0] < cp) lo = mid + 1; else hi = mid;
    }
    return lo < tok_nfc_n_decomp && tok_nfc_decomp[lo][0] == cp ? tok_nfc_decomp[lo] : NULL;
}

static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = tok_nfc_n_comp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_nfc_comp[mid][0] < a || (tok_nfc_comp[mid][0] == a && tok_nfc_comp[mid][1] < b)) lo = mid + 1;
        else hi = mid;
    }
    return lo < tok_nfc_n_comp && tok_nfc_comp[lo][0] == a && tok_nfc_comp[lo][1] == b ? tok_nfc_comp[lo][2] : 0;
}

/* Full canonical decomposition of cp appended to buf (at most 4 code points per level, depth is small). */
static size_t decompose(uint32_t cp, uint32_t *buf) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE, t = s % TCOUNT;
        buf[0] = LBASE + s / NCOUNT;
        buf[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (t) { buf[2] = TBASE + t; return 3; }
        return 2;
    }
    const uint32_t *d = decomp(cp);
    if (!d) { buf[0] = cp; return 1; }
    size_t n = decompose(d[1], buf);
    if (d[2]) n += decompose(d[2], buf + n);
    return n;
}

lcx_status tok_nfc(const char *str, size_t n, char **out, size_t *out_len) {
    const uint8_t *s = (const uint8_t *)str;
    *out = NULL;
    *out_len = 0;
    size_t i = 0;
    for (; i < n; i++) { /* fast path: nothing at or above U+0300 that NFC could touch */
        if (s[i] < 0xCC) continue;
        size_t st = i;
        while (st > 0 && (s[st] & 0xC0) == 0x80) st--;
        size_t adv;
        uint32_t cp = tok_utf8_decode(s + st, &adv);
        if (find1(tok_nfc_unstable, tok_nfc_n_unstable, cp)) break;
        i = st + adv - 1;
    }
    if (i >= n) return LCX_OK;
    /* decompose everything (UTF-8 length bounds the code point count; decompositions add at most x4) */
    size_t cap;
    if (!lcx_mul_size(n, 4, &cap) || !lcx_add_size(cap, 8, &cap)) return lcx_fail(LCX_ERR_OOM, "NFC");
    uint32_t *cps = malloc(cap * sizeof *cps);
    if (!cps) return lcx_fail(LCX_ERR_OOM, "NFC of %zu bytes", n);
    size_t m = 0;
    for (size_t k = 0; k < n;) {
        size_t adv;
        uint32_t cp = tok_utf8_decode(s + k, &adv);
        k += adv;
        if (m + 18 > cap) { /* cannot happen with the x4 bound for real data; stay safe */
            uint32_t *p = realloc(cps, 2 * cap * sizeof *p);
            if (!p) { free(cps); return lcx_fail(LCX_ERR_OOM, "NFC"); }
            cps = p;
            cap *= 2;
        }
        m += decompose(cp, cps + m);
    }
    /* canonical ordering: stable insertion sort of each run of non-starters by class */
    for (size_t k = 1; k < m; k++) {
        uint32_t c = ccc(cps[k]);
        if (!c) continue;
        size_t j = k;
        uint32_t x = cps[k];
        while (j > 0 && ccc(cps[j - 1]) > c) { cps[j] = cps[j - 1]; j--; }
        cps[j] = x;
    }
    /* canonical composition */
    size_t w = 0;
    if (m) {
        size_t starter = 0;
        uint32_t last = ccc(cps[0]);
        if (last) last = 256; /* no starter yet: nothing composes */
        w = 1;
        for (size_t k = 1; k < m; k++) {
            uint32_t c = cps[k], cc = ccc(c), comp = compose(cps[starter], c);
            if (comp && (last < cc || last == 0) && !(last == 256)) {
                cps[starter] = comp;
                continue;
            }
            if (cc == 0) { starter = w; last = 0; }
            else last = cc;
            cps[w++] = c;
        }
    }
    char *o = malloc(4 * w + 1);
    if (!o) { free(cps); return lcx_fail(LCX_ERR_OOM, "NFC"); }
    size_t ol = 0;
    for (size_t k = 0; k < w; k++) ol += tok_utf8_encode(cps[k], o + ol);
    o[ol] = 0;
    free(cps);
    *out = o;
    *out_len = ol;
    return LCX_OK;
}
