/* Decoding: ids -> token strings -> the decoder chain (each step maps a list of strings to a list of strings,
 * like tokenizers' decode_chain) -> concatenation. */
#include <stdlib.h>
#include <string.h>

#include "src/core/strbuf.h"
#include "src/tokenizer/tok_internal.h"

typedef struct toklist {
    lcx_strbuf *v;
    size_t n;
} toklist;

static void tl_free(toklist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].s);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Replace list contents with a single string (takes ownership of b). */
static void tl_single(toklist *l, lcx_strbuf b) {
    tl_free(l);
    l->v = malloc(sizeof *l->v);
    if (!l->v) { free(b.s); return; }
    l->v[0] = b;
    l->n = 1;
}

static lcx_status oom(void) { return lcx_fail(LCX_ERR_OOM, "decode"); }

static lcx_status dec_bytelevel(toklist *l) {
    lcx_strbuf raw = {0};
    for (size_t i = 0; i < l->n; i++) {
        const uint8_t *s = (const uint8_t *)l->v[i].s;
        size_t n = l->v[i].len, start = raw.len, j = 0;
        int ok = 1;
        while (j < n) {
            size_t adv;
            if (tok_utf8_len(s[j]) > n - j) { ok = 0; break; }
            int b = tok_cp_to_byte(tok_utf8_decode(s + j, &adv));
            if (b < 0) { ok = 0; break; }
            char c = (char)b;
            if (!lcx_strbuf_put(&raw, &c, 1)) { free(raw.s); return oom(); }
            j += adv;
        }
        if (!ok) { /* a char outside the byte alphabet: the token's own bytes */
            raw.len = start;
            if (!lcx_strbuf_put(&raw, s, n)) { free(raw.s); return oom(); }
        }
    }
    char *fixed;
    size_t fl;
    int r = lcx_utf8_repair(raw.s ? raw.s : "", raw.len, &fixed, &fl);
    if (r < 0) { free(raw.s); return oom(); }
    if (r) { free(raw.s); raw.s = fixed; raw.len = fl; raw.cap = fl + 1; }
    if (!raw.s && !lcx_strbuf_put(&raw, "", 0)) return oom();
    tl_single(l, raw);
    return l->v ? LCX_OK : oom();
}

/* Replace in every token; Metaspace's first token with a prepend scheme gets first_b instead of b (its leading
 * replacement was the prepended one: tokenizers drops each one in that token). */
static lcx_status replace_each(toklist *l, const char *a, size_t alen, const char *b, size_t blen,
                               const char *first_b, size_t first_blen) {
    for (size_t i = 0; i < l->n; i++) {
        lcx_strbuf o = {0};
        if (!tok_replace_all(l->v[i].s, l->v[i].len, a, alen, i ? b : first_b, i ? blen : first_blen, &o)) {
            free(o.s);
            return oom();
        }
        free(l->v[i].s);
        l->v[i] = o;
    }
    return LCX_OK;
}

static lcx_status dec_replace(toklist *l, const tok_dec *d) {
    return replace_each(l, d->a, d->alen, d->b, d->blen, d->b, d->blen);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static lcx_status flush_bytes(toklist *out, lcx_strbuf *bytes) {
    if (!bytes->len) return LCX_OK;
    char *fixed;
    size_t fl;
    int r = lcx_utf8_repair(bytes->s, bytes->len, &fixed, &fl);
    if (r < 0) return oom();
    if (r == 0) {
        out->v[out->n++] = *bytes;
        *bytes = (lcx_strbuf){0};
        return LCX_OK;
    }
    free(fixed);
    /* invalid UTF-8: one U+FFFD per byte, as tokenizers' ByteFallback does */
    for (size_t k = 0; k < bytes->len; k++) {
        lcx_strbuf r1 = {0};
        if (!lcx_strbuf_put(&r1, "\xEF\xBF\xBD", 3)) return oom();
        out->v[out->n++] = r1;
    }
    bytes->len = 0;
    return LCX_OK;
}

static lcx_status dec_bytefallback(toklist *l) {
    /* worst case every byte token becomes its own U+FFFD: the output has at most l->n entries */
    toklist out = {calloc(l->n ? l->n : 1, sizeof(lcx_strbuf)), 0};
    if (!out.v) return oom();
    lcx_strbuf bytes = {0};
    lcx_status st = LCX_OK;
    for (size_t i = 0; i < l->n && st == LCX_OK; i++) {
        const char *s = l->v[i].s;
        if (l->v[i].len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            char b = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            if (!lcx_strbuf_put(&bytes, &b, 1)) st = oom();
            continue;
        }
        st = flush_bytes(&out, &bytes);
        if (st == LCX_OK) { out.v[out.n++] = l->v[i]; l->v[i] = (lcx_strbuf){0}; }
    }
    if (st == LCX_OK) st = flush_bytes(&out, &bytes);
    free(bytes.s);
    tl_free(l);
    *l = out;
    return st;
}

static lcx_status dec_fuse(toklist *l) {
    lcx_strbuf o = {0};
    if (!lcx_strbuf_put(&o, "", 0)) return oom();
    for (size_t i = 0; i < l->n; i++)
        if (!lcx_strbuf_put(&o, l->v[i].s, l->v[i].len)) { free(o.s); return oom(); }
    tl_single(l, o);
    return l->v ? LCX_OK : oom();
}

static lcx_status dec_strip(toklist *l, const tok_dec *d) {
    for (size_t i = 0; i < l->n; i++) {
        char *s = l->v[i].s;
        size_t n = l->v[i].len, a = 0, b = n;
        for (size_t k = 0; k < d->start && a + d->alen <= b && memcmp(s + a, d->a, d->alen) == 0; k++) a += d->alen;
        for (size_t k = 0; k < d->stop && b >= a + d->alen && memcmp(s + b - d->alen, d->a, d->alen) == 0; k++)
            b -= d->alen;
        memmove(s, s + a, b - a);
        l->v[i].len = b - a;
        s[b - a] = 0;
    }
    return LCX_OK;
}

static lcx_status dec_metaspace(toklist *l, const tok_dec *d) {
    const int drop_first = d->scheme != PREPEND_NEVER;
    return replace_each(l, d->a, d->alen, " ", 1, drop_first ? "" : " ", drop_first ? 0 : 1);
}

lcx_status lcx_tokenizer_decode(const lcx_tokenizer *t, const uint32_t *ids, size_t n, int skip_special,
                                char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    toklist l = {calloc(n ? n : 1, sizeof(lcx_strbuf)), 0};
    if (!l.v) return oom();
    lcx_status st = LCX_OK;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= t->n_ids || !t->id_str[id]) continue;
        if (skip_special && (t->id_flags[id] & TOK_ID_SKIPPED)) continue;
        const char *s = t->id_str[id];
        size_t sl = t->id_len[id];
        if (t->id_flags[id] & TOK_ID_DECODES_NORMALIZED) {
            const tok_id_added key = {id, 0};
            const tok_id_added *o = bsearch(&key, t->dec_over, t->n_dec_over, sizeof key, tok_id_added_cmp);
            if (o) { s = t->added[o->added].decoded; sl = t->added[o->added].decoded_len; }
        }
        lcx_strbuf b = {0};
        if (!lcx_strbuf_put(&b, s, sl)) { st = oom(); break; }
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
    lcx_strbuf o = {0};
    if (st == LCX_OK && !lcx_strbuf_put(&o, "", 0)) st = oom();
    for (size_t i = 0; st == LCX_OK && i < l.n; i++) {
        if (!t->has_decoder && i > 0 && !lcx_strbuf_put(&o, " ", 1)) st = oom();
        if (st == LCX_OK && !lcx_strbuf_put(&o, l.v[i].s, l.v[i].len)) st = oom();
    }
    tl_free(&l);
    if (st != LCX_OK) { free(o.s); return st; }
    *text = o.s;
    *len = o.len;
    return LCX_OK;
}
