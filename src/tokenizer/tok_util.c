/* Tokenizer building blocks: UTF-8 repair, hash maps, the byte-level alphabet, regex compilation, tries. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "src/tokenizer/tok_internal.h"

/* ---- UTF-8 ------------------------------------------------------------------------------------------------ */

size_t tok_utf8_len(uint8_t b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

uint32_t tok_utf8_decode(const uint8_t *s, size_t *adv) {
    uint8_t b = s[0];
    if (b < 0x80) { *adv = 1; return b; }
    if (b < 0xE0) { *adv = 2; return ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F); }
    if (b < 0xF0) { *adv = 3; return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F); }
    *adv = 4;
    return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
           (s[3] & 0x3F);
}

size_t tok_utf8_encode(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the well-formed sequence at s (>0), or -(length of the maximal ill-formed subpart) (<0). The
 * ranges are Unicode's Table 3-7; a subpart stops at the first byte outside the allowed range. */
static long utf8_step(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    uint8_t lo = 0x80, hi = 0xBF;
    size_t need;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) { need = 2; lo = 0xA0; }
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) need = 2;
    else if (b == 0xED) { need = 2; hi = 0x9F; }
    else if (b == 0xF0) { need = 3; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else if (b == 0xF4) { need = 3; hi = 0x8F; }
    else return -1;
    for (size_t k = 1; k <= need; k++) {
        if (k >= n || s[k] < lo || s[k] > hi) return -(long)k;
        lo = 0x80; hi = 0xBF;
    }
    return (long)need + 1;
}

int lcx_utf8_repair(const char *str, size_t len, char **out, size_t *out_len) {
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    *out = NULL;
    *out_len = 0;
    while (i < len) { /* fast scan for the first problem */
        if (s[i] < 0x80) { i++; continue; }
        long k = utf8_step(s + i, len - i);
        if (k < 0) break;
        i += (size_t)k;
    }
    if (i == len) return 0;
    size_t cap;
    if (!lcx_mul_size(len, 3, &cap)) return -1; /* worst case: every byte -> EF BF BD */
    char *o = malloc(cap + 1);
    if (!o) return -1;
    memcpy(o, s, i);
    size_t w = i;
    while (i < len) {
        if (s[i] < 0x80) { o[w++] = (char)s[i++]; continue; }
        long k = utf8_step(s + i, len - i);
        if (k > 0) { memcpy(o + w, s + i, (size_t)k); w += (size_t)k; i += (size_t)k; }
        else { o[w++] = (char)0xEF; o[w++] = (char)0xBF; o[w++] = (char)0xBD; i += (size_t)(-k); }
    }
    o[w] = 0;
    *out = o;
    *out_len = w;
    return 1;
}

/* Unicode White_Space (what Rust's char::is_whitespace and Oniguruma's \s accept). */
int tok_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int tok_replace_all(const char *s, size_t n, const char *a, size_t alen, const char *b, size_t blen, lcx_strbuf *out) {
    lcx_strbuf_put(out, "", 0);
    for (size_t j = 0; j < n;) {
        if (alen == 0) { /* b, one character, and b again after the last one */
            size_t step = tok_utf8_len((uint8_t)s[j]);
            if (step > n - j) step = n - j;
            lcx_strbuf_put(out, b, blen);
            lcx_strbuf_put(out, s + j, step);
            j += step;
            if (j == n) lcx_strbuf_put(out, b, blen);
        } else if (j + alen <= n && memcmp(s + j, a, alen) == 0) {
            lcx_strbuf_put(out, b, blen);
            j += alen;
        } else { /* up to the next byte that could start a match */
            const char *next = memchr(s + j + 1, a[0], n - j - 1);
            size_t run = next ? (size_t)(next - (s + j)) : n - j;
            lcx_strbuf_put(out, s + j, run);
            j += run;
        }
    }
    return !out->oom;
}

/* ---- byte-level alphabet ---------------------------------------------------------------------------------- */
/* Printable Latin-1 bytes stand for themselves; the other 68 bytes map, in byte order, to U+0100.. */
static int printable_byte(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t tok_byte_to_cp(uint8_t b) {
    if (printable_byte(b)) return b;
    uint32_t n = 0;
    for (unsigned x = 0; x < b; x++) n += !printable_byte(x);
    return 0x100 + n;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return printable_byte(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t n = 0;
    for (unsigned x = 0; x < 256; x++)
        if (!printable_byte(x) && n++ == cp - 0x100) return (int)x;
    return -1;
}

/* ---- string map ------------------------------------------------------------------------------------------- */
static uint64_t strhash(const char *k, size_t len) {
    uint64_t h = XXH3_64bits(k, len);
    return h ? h : 1;
}

static lcx_status strmap_grow(tok_strmap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *h = calloc(ncap, sizeof *h);
    uint32_t *ko = malloc(ncap * sizeof *ko), *kl = malloc(ncap * sizeof *kl), *v = malloc(ncap * sizeof *v);
    if (!h || !ko || !kl || !v) { free(h); free(ko); free(kl); free(v); return lcx_fail(LCX_ERR_OOM, "vocabulary map"); }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->hash[i]) continue;
        size_t j = (size_t)m->hash[i] & (ncap - 1);
        while (h[j]) j = (j + 1) & (ncap - 1);
        h[j] = m->hash[i]; ko[j] = m->koff[i]; kl[j] = m->klen[i]; v[j] = m->val[i];
    }
    free(m->hash); free(m->koff); free(m->klen); free(m->val);
    m->hash = h; m->koff = ko; m->klen = kl; m->val = v; m->cap = ncap;
    return LCX_OK;
}

lcx_status tok_strmap_put(tok_strmap *m, const char *k, size_t len, uint32_t val) {
    if ((m->count + 1) * 2 > m->cap) LCX_TRY(strmap_grow(m));
    uint64_t h = strhash(k, len);
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    while (m->hash[i]) {
        if (m->hash[i] == h && m->klen[i] == len && memcmp(m->arena + m->koff[i], k, len) == 0) {
            m->val[i] = val;
            return LCX_OK;
        }
        i = (i + 1) & mask;
    }
    if (len > UINT32_MAX || m->arena_len + len > UINT32_MAX) return lcx_fail(LCX_ERR_INVALID, "vocabulary too large");
    if (m->arena_len + len > m->arena_cap) {
        size_t nc = m->arena_cap ? m->arena_cap * 2 : 65536;
        while (nc < m->arena_len + len) nc *= 2;
        char *a = realloc(m->arena, nc);
        if (!a) return lcx_fail(LCX_ERR_OOM, "vocabulary map");
        m->arena = a; m->arena_cap = nc;
    }
    if (len) memcpy(m->arena + m->arena_len, k, len);
    m->hash[i] = h; m->koff[i] = (uint32_t)m->arena_len; m->klen[i] = (uint32_t)len; m->val[i] = val;
    m->arena_len += len;
    m->count++;
    return LCX_OK;
}

int tok_strmap_get(const tok_strmap *m, const char *k, size_t len, uint32_t *val) {
    if (!m->cap) return 0;
    uint64_t h = strhash(k, len);
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    while (m->hash[i]) {
        if (m->hash[i] == h && m->klen[i] == len && memcmp(m->arena + m->koff[i], k, len) == 0) {
            *val = m->val[i];
            return 1;
        }
        i = (i + 1) & mask;
    }
    return 0;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->hash); free(m->koff); free(m->klen); free(m->val); free(m->arena);
    memset(m, 0, sizeof *m);
}

/* ---- pair map --------------------------------------------------------------------------------------------- */
static lcx_status pairmap_grow(tok_pairmap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *k = malloc(ncap * sizeof *k);
    uint32_t *r = malloc(ncap * sizeof *r), *id = malloc(ncap * sizeof *id);
    if (!k || !r || !id) { free(k); free(r); free(id); return lcx_fail(LCX_ERR_OOM, "merge map"); }
    memset(k, 0xFF, ncap * sizeof *k);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->key[i] == UINT64_MAX) continue;
        size_t j = (size_t)tok_pair_hash(m->key[i]) & (ncap - 1);
        while (k[j] != UINT64_MAX) j = (j + 1) & (ncap - 1);
        k[j] = m->key[i]; r[j] = m->rank[i]; id[j] = m->id[i];
    }
    free(m->key); free(m->rank); free(m->id);
    m->key = k; m->rank = r; m->id = id; m->cap = ncap;
    return LCX_OK;
}

lcx_status tok_pairmap_put(tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
    if ((m->count + 1) * 2 > m->cap) LCX_TRY(pairmap_grow(m));
    uint64_t k = ((uint64_t)a << 32) | b;
    size_t mask = m->cap - 1, i = (size_t)tok_pair_hash(k) & mask;
    while (m->key[i] != UINT64_MAX && m->key[i] != k) i = (i + 1) & mask;
    if (m->key[i] == UINT64_MAX) m->count++;
    m->key[i] = k; m->rank[i] = rank; m->id[i] = id;
    return LCX_OK;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->key); free(m->rank); free(m->id);
    memset(m, 0, sizeof *m);
}

/* ---- regex ------------------------------------------------------------------------------------------------ */
#define WS_CLASS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

lcx_status tok_regex_compile(const char *pat, size_t len, int literal, const char *what, pcre2_code **out) {
    char *p = NULL;
    size_t plen = 0;
    if (!literal) {
        /* Rewrite \s and \S to Unicode White_Space, Oniguruma's meaning: PCRE2's UCP \s also matches U+180E. */
        size_t cap = len * 8 + sizeof WS_CLASS * 4 + 16;
        p = malloc(cap);
        if (!p) return lcx_fail(LCX_ERR_OOM, "regex");
        int in_class = 0;
        for (size_t i = 0; i < len; i++) {
            char c = pat[i];
            if (plen + sizeof WS_CLASS + 8 > cap) {
                cap *= 2;
                char *np = realloc(p, cap);
                if (!np) { free(p); return lcx_fail(LCX_ERR_OOM, "regex"); }
                p = np;
            }
            if (c == '\\' && i + 1 < len) {
                char d = pat[i + 1];
                if (d == 's') {
                    const char *ins = in_class ? WS_CLASS : "[" WS_CLASS "]";
                    size_t n = strlen(ins);
                    memcpy(p + plen, ins, n); plen += n; i++;
                    continue;
                }
                if (d == 'S' && !in_class) {
                    const char *ins = "[^" WS_CLASS "]";
                    size_t n = strlen(ins);
                    memcpy(p + plen, ins, n); plen += n; i++;
                    continue;
                }
                p[plen++] = c; p[plen++] = d; i++;
                continue;
            }
            if (c == '[' && !in_class) in_class = 1;
            else if (c == ']' && in_class) in_class = 0;
            p[plen++] = c;
        }
    }
    int err = 0;
    PCRE2_SIZE off = 0;
    /* Oniguruma's (Ruby syntax) ^ and $ are line anchors, a line ending at each "\n" alone: PCRE2's MULTILINE with
     * LF newlines, which also keeps "." off "\n" only. LITERAL refuses UCP. */
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc || pcre2_set_newline(cc, PCRE2_NEWLINE_LF) != 0) {
        free(p);
        pcre2_compile_context_free(cc);
        return lcx_fail(LCX_ERR_OOM, "regex");
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(literal ? pat : p), literal ? len : plen, opts, &err, &off, cc);
    pcre2_compile_context_free(cc);
    free(p);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return lcx_fail(LCX_ERR_FORMAT, "%s: regex '%.*s' does not compile: %s (at offset %zu)", what,
                        (int)(len > 200 ? 200 : len), pat, (const char *)msg, (size_t)off);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    *out = re;
    return LCX_OK;
}

/* ---- trie ------------------------------------------------------------------------------------------------- */
static lcx_status trie_node(tok_trie *t, uint8_t byte, uint32_t *idx) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        tok_trie_node *nn = realloc(t->nodes, nc * sizeof *nn);
        if (!nn) return lcx_fail(LCX_ERR_OOM, "added-token trie");
        t->nodes = nn; t->cap = nc;
    }
    t->nodes[t->n] = (tok_trie_node){0, 0, -1, byte};
    *idx = (uint32_t)t->n++;
    return LCX_OK;
}

lcx_status tok_trie_add(tok_trie *t, const char *s, size_t len, int32_t added) {
    if (len == 0) return LCX_OK; /* an empty pattern never matches */
    uint32_t cur;
    if (t->n == 0) LCX_TRY(trie_node(t, 0, &cur));
    cur = 0;
    t->first[(uint8_t)s[0]] = 1;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        uint32_t ch = t->nodes[cur].first_child, found = 0;
        while (ch) {
            if (t->nodes[ch].byte == b) { found = ch; break; }
            ch = t->nodes[ch].next_sibling;
        }
        if (!found) {
            LCX_TRY(trie_node(t, b, &found));
            t->nodes[found].next_sibling = t->nodes[cur].first_child;
            t->nodes[cur].first_child = found;
        }
        cur = found;
    }
    /* Duplicate contents: the later token wins, like a map insert. */
    t->nodes[cur].added = added;
    return LCX_OK;
}

void tok_trie_free(tok_trie *t) {
    free(t->nodes);
    memset(t, 0, sizeof *t);
}
