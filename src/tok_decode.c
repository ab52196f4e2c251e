/* Decoding: ids -> token strings -> the decoder chain (each step maps a list of strings to a list of strings,
 * like tokenizers' decode_chain) -> concatenation. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static int sb_put(sbuf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) return 0;
        b->p = p;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 1;
}

typedef struct toklist {
    sbuf *v;
    size_t n;
} toklist;

static void tl_free(toklist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].p);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Replace list contents with a single string (takes ownership of b). */
static void tl_single(toklist *l, sbuf b) {
    tl_free(l);
    l->v = malloc(sizeof *l->v);
    if (!l->v) { free(b.p); return; }
    l->v[0] = b;
    l->n = 1;
}

static lcx_status oom(void) { return lcx_fail(LCX_ERR_OOM, "decode"); }

static lcx_status dec_bytelevel(toklist *l) {
    sbuf raw = {0};
    for (size_t i = 0; i < l->n; i++) {
        const uint8_t *s = (const uint8_t *)l->v[i].p;
        size_t n = l->v[i].n, start = raw.n, j = 0;
        int ok = 1;
        while (j < n) {
            size_t adv;
            if (tok_utf8_len(s[j]) > n - j) { ok = 0; break; }
            int b = tok_cp_to_byte(tok_utf8_decode(s + j, &adv));
            if (b < 0) { ok = 0; break; }
            char c = (char)b;
            if (!sb_put(&raw, &c, 1)) { free(raw.p); return oom(); }
            j += adv;
        }
        if (!ok) { /* a char outside the byte alphabet: the token's own bytes */
            raw.n = start;
            if (!sb_put(&raw, s, n)) { free(raw.p); return oom(); }
        }
    }
    char *fixed;
    size_t fl;
    int r = lcx_utf8_repair(raw.p ? raw.p : "", raw.n, &fixed, &fl);
    if (r < 0) { free(raw.p); return oom(); }
    if (r) { free(raw.p); raw.p = fixed; raw.n = fl; raw.cap = fl + 1; }
    if (!raw.p && !sb_put(&raw, "", 0)) return oom();
    tl_single(l, raw);
    return l->v ? LCX_OK : oom();
}

static lcx_status dec_replace(toklist *l, const tok_dec *d) {
    for (size_t i = 0; i < l->n; i++) {
        sbuf o = {0};
        const char *s = l->v[i].p;
        size_t n = l->v[i].n;
        if (!sb_put(&o, "", 0)) return oom();
        for (size_t j = 0; j < n;) {
            if (j + d->alen <= n && memcmp(s + j, d->a, d->alen) == 0) {
                if (!sb_put(&o, d->b, d->blen)) { free(o.p); return oom(); }
                j += d->alen;
            } else {
                if (!sb_put(&o, s + j, 1)) { free(o.p); return oom(); }
                j++;
            }
        }
        free(l->v[i].p);
        l->v[i] = o;
    }
    return LCX_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static lcx_status flush_bytes(toklist *out, sbuf *bytes) {
    if (!bytes->n) return LCX_OK;
    char *fixed;
    size_t fl;
    int r = lcx_utf8_repair(bytes->p, bytes->n, &fixed, &fl);
    if (r < 0) return oom();
    if (r == 0) {
        out->v[out->n++] = *bytes;
        *bytes = (sbuf){0};
        return LCX_OK;
    }
    free(fixed);
    /* invalid UTF-8: one U+FFFD per byte, as tokenizers' ByteFallback does */
    for (size_t k = 0; k < bytes->n; k++) {
        sbuf r1 = {0};
        if (!sb_put(&r1, "\xEF\xBF\xBD", 3)) return oom();
        out->v[out->n++] = r1;
    }
    bytes->n = 0;
    return LCX_OK;
}

static lcx_status dec_bytefallback(toklist *l) {
    /* worst case every byte token becomes its own U+FFFD: the output has at most l->n entries */
    toklist out = {calloc(l->n ? l->n : 1, sizeof(sbuf)), 0};
    if (!out.v) return oom();
    sbuf bytes = {0};
    lcx_status st = LCX_OK;
    for (size_t i = 0; i < l->n && st == LCX_OK; i++) {
        const char *s = l->v[i].p;
        if (l->v[i].n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            char b = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            if (!sb_put(&bytes, &b, 1)) st = oom();
            continue;
        }
        st = flush_bytes(&out, &bytes);
        if (st == LCX_OK) { out.v[out.n++] = l->v[i]; l->v[i] = (sbuf){0}; }
    }
    if (st == LCX_OK) st = flush_bytes(&out, &bytes);
    free(bytes.p);
    tl_free(l);
    *l = out;
    return st;
}

static lcx_status dec_fuse(toklist *l) {
    sbuf o = {0};
    if (!sb_put(&o, "", 0)) return oom();
    for (size_t i = 0; i < l->n; i++)
        if (!sb_put(&o, l->v[i].p, l->v[i].n)) { free(o.p); return oom(); }
    tl_single(l, o);
    return l->v ? LCX_OK : oom();
}

static lcx_status dec_strip(toklist *l, const tok_dec *d) {
    for (size_t i = 0; i < l->n; i++) {
        char *s = l->v[i].p;
        size_t n = l->v[i].n, a = 0, b = n;
        for (size_t k = 0; k < d->start && a + d->alen <= b && memcmp(s + a, d->a, d->alen) == 0; k++) a += d->alen;
        for (size_t k = 0; k < d->stop && b >= a + d->alen && memcmp(s + b - d->alen, d->a, d->alen) == 0; k++)
            b -= d->alen;
        memmove(s, s + a, b - a);
        l->v[i].n = b - a;
        s[b - a] = 0;
    }
    return LCX_OK;
}

static lcx_status dec_metaspace(toklist *l, const tok_dec *d) {
    for (size_t i = 0; i < l->n; i++) {
        sbuf o = {0};
        const char *s = l->v[i].p;
        size_t n = l->v[i].n;
        if (!sb_put(&o, "", 0)) return oom();
        for (size_t j = 0; j < n;) {
            if (j + d->alen <= n && memcmp(s + j, d->a, d->alen) == 0) {
                if (!(i == 0 && d->scheme != PREPEND_NEVER) && !sb_put(&o, " ", 1)) { free(o.p); return oom(); }
                j += d->alen;
            } else {
                if (!sb_put(&o, s + j, 1)) { free(o.p); return oom(); }
                j++;
            }
        }
        free(l->v[i].p);
        l->v[i] = o;
    }
    return LCX_OK;
}

lcx_status lcx_tokenizer_decode(const lcx_tokenizer *t, const uint32_t *ids, size_t n, int skip_special,
                                char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    toklist l = {calloc(n ? n : 1, sizeof(sbuf)), 0};
    if (!l.v) return oom();
    lcx_status st = LCX_OK;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= t->n_ids || !t->id_str[id]) continue;
        if (skip_special && (t->id_flags[id] & 2)) continue;
        sbuf b = {0};
        if (!sb_put(&b, t->id_str[id], t->id_len[id])) { st = oom(); break; }
        l.v[l.n++] = b;
    }
    for (size_t k = 0; st == LCX_OK && k < t->n_decs; k++) {
        const tok_dec *d = &t->decs[k];
        switch (d->kind) {
        case DEC_BYTELEVEL: st = dec_bytelevel(&l); break;
        case DEC_REPLACE: st = dec_replace(&l, d); break;
        case DEC_BYTEFALLBACK: st = dec_bytefallback(&l); break;
        case DEC_FUSE: st = dec_fuse(&l); break;
        case DEC_STRIP: st = dec_strip(&l, d); break;
        case DEC_METASPACE: st = dec_metaspace(&l, d); break;
        }
    }
    sbuf o = {0};
    if (st == LCX_OK && !sb_put(&o, "", 0)) st = oom();
    for (size_t i = 0; st == LCX_OK && i < l.n; i++) {
        if (!t->has_decoder && i > 0 && !sb_put(&o, " ", 1)) st = oom();
        if (st == LCX_OK && !sb_put(&o, l.v[i].p, l.v[i].n)) st = oom();
    }
    tl_free(&l);
    if (st != LCX_OK) { free(o.p); return st; }
    *text = o.p;
    *len = o.n;
    return LCX_OK;
}
