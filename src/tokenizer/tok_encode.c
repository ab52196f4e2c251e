/* Encoding: UTF-8 repair -> split out non-normalized added tokens -> normalize each remaining piece -> split out
 * normalized added tokens -> pre-tokenize -> BPE per word (with a per-encoder word cache) -> template.
 * Each step follows the corresponding `tokenizers` component, including which pieces are dropped as empty. */
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/tok_internal.h"
#include "src/tokenizer/tok_nfc.h"

typedef struct piece {
    size_t off, len; /* in enc->arena */
    int first;       /* starts at offset 0 of the original input (Metaspace prepend_scheme "first") */
} piece;
typedef struct ival {
    size_t s, e;
    int m; /* a match of the split pattern */
} ival;
typedef struct span {
    size_t s, e;
    int32_t added; /* index into tok->added, or -1 for text */
} span;

#define CACHE_MAX_ENTRIES 65536
#define CACHE_MAX_WORD 256
#define CACHE_MAX_IDS (1u << 20)

struct lcx_tok_encoder {
    const lcx_tokenizer *tok;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    tok_bpe_scratch sc;
    char *arena;
    size_t alen, acap;
    piece *pa, *pb;
    size_t na, nb, capa, capb;
    ival *iv;
    size_t niv, capiv;
    span *raw, *nrm;
    size_t nraw, capraw, nnrm, capnrm;
    /* word cache: word -> slot; slot -> ids[off .. off+n) */
    tok_strmap cache;
    uint32_t *cids;
    size_t ncids, capcids;
    uint64_t *slots; /* off << 8 | n */
    size_t nslots, capslots;
    lcx_tok_ids word;
};

static lcx_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return LCX_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return lcx_fail(LCX_ERR_OOM, "tokenizer scratch (%zu elements)", nc);
    *p = np;
    *cap = nc;
    return LCX_OK;
}
#define GROW(ptr, cap, need) grow((void **)&(ptr), &(cap), (need), sizeof *(ptr))

lcx_status lcx_tok_encoder_init(const lcx_tokenizer *tok, lcx_tok_encoder **out) {
    *out = NULL;
    lcx_tok_encoder *e = calloc(1, sizeof *e);
    if (!e) return lcx_fail(LCX_ERR_OOM, "encoder");
    e->tok = tok;
    e->md = pcre2_match_data_create(16, NULL);
    e->mctx = pcre2_match_context_create(NULL);
    /* Long runs of spaces backtrack through \s+(?!\S): give the JIT a stack that grows to 64 MiB. */
    e->jit = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
    if (!e->md || !e->mctx || !e->jit) { lcx_tok_encoder_free(e); return lcx_fail(LCX_ERR_OOM, "encoder"); }
    pcre2_jit_stack_assign(e->mctx, NULL, e->jit);
    *out = e;
    return LCX_OK;
}

void lcx_tok_encoder_free(lcx_tok_encoder *e) {
    if (!e) return;
    pcre2_match_data_free(e->md);
    pcre2_match_context_free(e->mctx);
    pcre2_jit_stack_free(e->jit);
    tok_bpe_scratch_free(&e->sc);
    free(e->arena); free(e->pa); free(e->pb); free(e->iv); free(e->raw); free(e->nrm);
    tok_strmap_free(&e->cache);
    free(e->cids); free(e->slots);
    lcx_tok_ids_free(&e->word);
    free(e);
}

/* ---- normalizers ------------------------------------------------------------------------------------------ */
static lcx_status apply_norm(const tok_norm *nm, const char *s, size_t n, char **out, size_t *out_len) {
    if (nm->kind == NORM_NFC) {
        LCX_TRY(tok_nfc(s, n, out, out_len));
        if (*out) return LCX_OK;
        *out = malloc(n + 1); /* already NFC: a copy, as the other steps return */
        if (!*out) return lcx_fail(LCX_ERR_OOM, "normalizer");
        memcpy(*out, s, n);
        (*out)[n] = 0;
        *out_len = n;
        return LCX_OK;
    }
    if (nm->kind == NORM_PREPEND) {
        char *o = malloc(nm->alen + n + 1);
        if (!o) return lcx_fail(LCX_ERR_OOM, "normalizer");
        size_t w = 0;
        if (n) { memcpy(o, nm->a, nm->alen); w = nm->alen; } /* an empty string stays empty */
        memcpy(o + w, s, n);
        o[w + n] = 0;
        *out = o; *out_len = w + n;
        return LCX_OK;
    }
    lcx_strbuf o = {0};
    if (!tok_replace_all(s, n, nm->a, nm->alen, nm->b, nm->blen, &o)) {
        free(o.s);
        return lcx_fail(LCX_ERR_OOM, "normalizer");
    }
    *out = o.s;
    *out_len = o.len;
    return LCX_OK;
}

lcx_status tok_normalize_string(const lcx_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len) {
    char *cur = malloc(n + 1);
    if (!cur) return lcx_fail(LCX_ERR_OOM, "normalizer");
    memcpy(cur, s, n);
    cur[n] = 0;
    size_t cl = n;
    for (size_t i = 0; i < t->n_norms; i++) {
        char *nx = NULL;
        size_t nl = 0;
        lcx_status st = apply_norm(&t->norms[i], cur, cl, &nx, &nl);
        free(cur);
        LCX_TRY(st);
        cur = nx; cl = nl;
    }
    *out = cur;
    *out_len = cl;
    return LCX_OK;
}

/* ---- added tokens ----------------------------------------------------------------------------------------- */
static int is_word_char(const lcx_tok_encoder *e, const char *s, size_t n) {
    int rc = pcre2_match(e->tok->word_re, (PCRE2_SPTR)s, n, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, e->md, e->mctx);
    return rc >= 0;
}

static size_t prev_char_start(const char *s, size_t i) {
    do i--; while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80);
    return i;
}

/* Split s on the added tokens of trie (leftmost-longest, then single_word / lstrip / rstrip as tokenizers). */
static lcx_status split_added(lcx_tok_encoder *e, const char *s, size_t n, const tok_trie *trie, span **out,
                              size_t *nout, size_t *cap) {
    *nout = 0;
    const lcx_tokenizer *t = e->tok;
    size_t start_offset = 0, pos = 0;
    if (trie->n) {
        while (pos < n) {
            if (!trie->first[(uint8_t)s[pos]]) { pos++; continue; }
            uint32_t node = 0;
            int32_t best = -1;
            size_t best_end = 0;
            for (size_t k = pos; k < n; k++) {
                uint32_t ch = trie->nodes[node].first_child;
                while (ch && trie->nodes[ch].byte != (uint8_t)s[k]) ch = trie->nodes[ch].next_sibling;
                if (!ch) break;
                node = ch;
                if (trie->nodes[node].added >= 0) { best = trie->nodes[node].added; best_end = k + 1; }
            }
            if (best < 0) { pos++; continue; }
            const tok_added *a = &t->added[best];
            size_t start = pos, stop = best_end;
            pos = best_end;
            if (a->single_word) {
                int start_space = start == 0 || !is_word_char(e, s + prev_char_start(s, start), start - prev_char_start(s, start));
                int stop_space = stop == n || !is_word_char(e, s + stop, tok_utf8_len((uint8_t)s[stop]));
                if (!start_space || !stop_space) continue;
            }
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t p = prev_char_start(s, ns), adv;
                    if (!tok_is_whitespace(tok_utf8_decode((const uint8_t *)s + p, &adv))) break;
                    ns = p;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < n) {
                    size_t adv;
                    if (!tok_is_whitespace(tok_utf8_decode((const uint8_t *)s + stop, &adv))) break;
                    stop += adv;
                }
            }
            LCX_TRY(grow((void **)out, cap, *nout + 2, sizeof **out));
            if (start_offset < start) (*out)[(*nout)++] = (span){start_offset, start, -1};
            /* a match inside the whitespace the previous one stripped ends up empty: tokenizers drops the empty
             * piece, so the token is not there */
            if (start < stop) (*out)[(*nout)++] = (span){start, stop, best};
            start_offset = stop;
        }
    }
    if (start_offset < n) {
        LCX_TRY(grow((void **)out, cap, *nout + 1, sizeof **out));
        (*out)[(*nout)++] = (span){start_offset, n, -1};
    }
    return LCX_OK;
}

/* ---- pre-tokenization ------------------------------------------------------------------------------------- */
static lcx_status arena_append(lcx_tok_encoder *e, const char *s, size_t n, size_t *off) {
    LCX_TRY(GROW(e->arena, e->acap, e->alen + n + 1));
    *off = e->alen;
    if (n) memcpy(e->arena + e->alen, s, n);
    e->alen += n;
    return LCX_OK;
}

static lcx_status push_piece(lcx_tok_encoder *e, size_t off, size_t len, int first) {
    if (len == 0) return LCX_OK; /* tokenizers drops empty splits */
    LCX_TRY(GROW(e->pb, e->capb, e->nb + 1));
    e->pb[e->nb++] = (piece){off, len, first};
    return LCX_OK;
}

/* Turn the match/non-match intervals of piece p into output pieces according to behavior. */
static lcx_status apply_behavior(lcx_tok_encoder *e, const piece *p, tok_split_behavior b, int invert) {
    ival *iv = e->iv;
    size_t n = e->niv, k = 0;
    if (invert)
        for (size_t i = 0; i < n; i++) iv[i].m = !iv[i].m;
    switch (b) {
    case SPLIT_ISOLATED: k = n; break;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!iv[i].m) iv[k++] = iv[i];
        break;
    case SPLIT_CONTIGUOUS: {
        int prev = 0;
        for (size_t i = 0; i < n; i++) {
            if (iv[i].m == prev && k > 0) iv[k - 1].e = iv[i].e;
            else iv[k++] = iv[i];
            prev = iv[i].m;
        }
        break;
    }
    case SPLIT_MERGED_PREV: {
        int prev = 0;
        for (size_t i = 0; i < n; i++) {
            int m = iv[i].m;
            if (m && !prev && k > 0) iv[k - 1].e = iv[i].e;
            else iv[k++] = iv[i];
            prev = m;
        }
        break;
    }
    case SPLIT_MERGED_NEXT: {
        /* right to left; results collected from the end of the array backwards, which keeps them in order */
        int prev = 0;
        size_t w = n;
        for (size_t i = n; i-- > 0;) {
            ival cur = iv[i];
            if (cur.m && !prev && w < n) iv[w].s = cur.s;
            else iv[--w] = cur;
            prev = cur.m;
        }
        if (n > w) memmove(iv, iv + w, (n - w) * sizeof *iv);
        k = n - w;
        break;
    }
    }
    for (size_t i = 0; i < k; i++)
        LCX_TRY(push_piece(e, p->off + iv[i].s, iv[i].e - iv[i].s, p->first && iv[i].s == 0));
    return LCX_OK;
}

static lcx_status add_ival(lcx_tok_encoder *e, size_t s, size_t en, int m) {
    LCX_TRY(GROW(e->iv, e->capiv, e->niv + 1));
    e->iv[e->niv++] = (ival){s, en, m};
    return LCX_OK;
}

/* Matches of re in piece p as intervals covering it (like tokenizers' Pattern::find_matches for a regex). As in
 * its regex iterator, an empty match right where the previous match ended is not one: "x*" over "xx-" matches
 * "xx" and then nothing before "-". */
static lcx_status regex_intervals(lcx_tok_encoder *e, const pcre2_code *re, const piece *p) {
    e->niv = 0;
    const char *s = e->arena + p->off;
    size_t n = p->len, pos = 0, prev = 0;
    int matched = 0; /* prev is the end of a match */
    if (n == 0) return add_ival(e, 0, 0, 0);
    while (pos <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return lcx_fail(LCX_ERR_INVALID, "%s: regex match failed on a %zu-byte piece: %s", e->tok->name, n,
                            (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (me > ms || !matched || me != prev) {
            if (prev < ms) LCX_TRY(add_ival(e, prev, ms, 0));
            LCX_TRY(add_ival(e, ms, me, 1));
            prev = me;
            matched = 1;
        }
        if (me > ms) pos = me;
        else if (me < n) pos = me + tok_utf8_len((uint8_t)s[me]);
        else break;
    }
    if (prev < n) LCX_TRY(add_ival(e, prev, n, 0));
    return LCX_OK;
}

static lcx_status literal_intervals(lcx_tok_encoder *e, const char *lit, size_t ll, const piece *p) {
    e->niv = 0;
    const char *s = e->arena + p->off;
    size_t n = p->len, prev = 0;
    for (size_t i = 0; i + ll <= n;) {
        if (memcmp(s + i, lit, ll) == 0) {
            if (prev < i) LCX_TRY(add_ival(e, prev, i, 0));
            LCX_TRY(add_ival(e, i, i + ll, 1));
            i += ll;
            prev = i;
        } else i++;
    }
    if (prev < n) LCX_TRY(add_ival(e, prev, n, 0));
    return LCX_OK;
}

static lcx_status pre_step(lcx_tok_encoder *e, const tok_pre *st, const piece *p0) {
    piece p = *p0;
    switch (st->kind) {
    case PRE_SPLIT:
    case PRE_DIGITS:
        LCX_TRY(regex_intervals(e, st->re, &p));
        return apply_behavior(e, &p, st->behavior, st->invert);
    case PRE_BYTELEVEL:
        if (st->add_prefix_space && e->arena[p.off] != ' ') {
            size_t off;
            LCX_TRY(GROW(e->arena, e->acap, e->alen + p.len + 2));
            off = e->alen;
            e->arena[off] = ' ';
            memcpy(e->arena + off + 1, e->arena + p.off, p.len);
            e->alen += p.len + 1;
            p.off = off;
            p.len += 1;
        }
        if (!st->re) return push_piece(e, p.off, p.len, p.first);
        LCX_TRY(regex_intervals(e, st->re, &p));
        return apply_behavior(e, &p, SPLIT_ISOLATED, 0);
    case PRE_METASPACE: {
        size_t spaces = 0;
        for (size_t i = 0; i < p.len; i++) spaces += e->arena[p.off + i] == ' ';
        size_t need = p.len + spaces * st->repl_len + st->repl_len + 1;
        LCX_TRY(GROW(e->arena, e->acap, e->alen + need));
        char *o = e->arena + e->alen, *src = e->arena + p.off;
        size_t w = 0;
        int starts = p.len >= st->repl_len && memcmp(src, st->repl, st->repl_len) == 0;
        if (!starts && src[0] == ' ') starts = 1; /* the space is about to become the replacement */
        if (!starts && (st->scheme == PREPEND_ALWAYS || (st->scheme == PREPEND_FIRST && p.first))) {
            memcpy(o, st->repl, st->repl_len);
            w = st->repl_len;
        }
        for (size_t i = 0; i < p.len; i++) {
            if (src[i] == ' ') { memcpy(o + w, st->repl, st->repl_len); w += st->repl_len; }
            else o[w++] = src[i];
        }
        p.off = e->alen;
        p.len = w;
        e->alen += w;
        if (!st->split) return push_piece(e, p.off, p.len, p.first);
        LCX_TRY(literal_intervals(e, st->repl, st->repl_len, &p));
        return apply_behavior(e, &p, SPLIT_MERGED_NEXT, 0);
    }
    }
    return LCX_OK;
}

/* ---- model with cache ------------------------------------------------------------------------------------- */
static lcx_status model_word(lcx_tok_encoder *e, const char *w, size_t n, lcx_tok_ids *out) {
    const lcx_tokenizer *t = e->tok;
    uint32_t slot;
    if (n <= CACHE_MAX_WORD && tok_strmap_get(&e->cache, w, n, &slot)) {
        uint64_t sv = e->slots[slot];
        size_t off = (size_t)(sv >> 8), k = (size_t)(sv & 0xFF);
        if (out->n + k > out->cap) {
            size_t nc = out->cap ? out->cap : 256;
            while (nc < out->n + k) nc *= 2;
            uint32_t *p = realloc(out->ids, nc * sizeof *p);
            if (!p) return lcx_fail(LCX_ERR_OOM, "token ids");
            out->ids = p; out->cap = nc;
        }
        if (k) memcpy(out->ids + out->n, e->cids + off, k * sizeof *out->ids);
        out->n += k;
        return LCX_OK;
    }
    if (n > CACHE_MAX_WORD) return tok_bpe_word(t, &e->sc, w, n, out);
    e->word.n = 0;
    LCX_TRY(tok_bpe_word(t, &e->sc, w, n, &e->word));
    for (size_t i = 0; i < e->word.n; i++) LCX_TRY(lcx_tok_ids_push(out, e->word.ids[i]));
    if (e->word.n > 255) return LCX_OK;
    if (e->nslots >= CACHE_MAX_ENTRIES || e->ncids >= CACHE_MAX_IDS) { /* full: start over, no recency tracking */
        memset(e->cache.hash, 0, e->cache.cap * sizeof *e->cache.hash);
        e->cache.count = 0;
        e->cache.arena_len = 0;
        e->nslots = 0;
        e->ncids = 0;
    }
    LCX_TRY(GROW(e->cids, e->capcids, e->ncids + e->word.n));
    LCX_TRY(GROW(e->slots, e->capslots, e->nslots + 1));
    if (e->word.n) memcpy(e->cids + e->ncids, e->word.ids, e->word.n * sizeof *e->cids);
    e->slots[e->nslots] = ((uint64_t)e->ncids << 8) | e->word.n;
    e->ncids += e->word.n;
    LCX_TRY(tok_strmap_put(&e->cache, w, n, (uint32_t)e->nslots));
    e->nslots++;
    return LCX_OK;
}

/* Pre-tokenize one text piece (already normalized) and run the model on every word. */
static lcx_status encode_text(lcx_tok_encoder *e, const char *s, size_t n, int first, lcx_tok_ids *out) {
    const lcx_tokenizer *t = e->tok;
    if (n == 0) return LCX_OK;
    e->alen = 0;
    size_t off;
    LCX_TRY(arena_append(e, s, n, &off));
    e->na = 0;
    LCX_TRY(GROW(e->pa, e->capa, 1));
    e->pa[e->na++] = (piece){off, n, first};
    for (size_t k = 0; k < t->n_pres; k++) {
        e->nb = 0;
        for (size_t i = 0; i < e->na; i++) LCX_TRY(pre_step(e, &t->pres[k], &e->pa[i]));
        piece *tp = e->pa; e->pa = e->pb; e->pb = tp;
        size_t tc = e->capa; e->capa = e->capb; e->capb = tc;
        e->na = e->nb;
    }
    for (size_t i = 0; i < e->na; i++) {
        const char *w = e->arena + e->pa[i].off;
        size_t n = e->pa[i].len;
        if (!t->split_meta) {
            LCX_TRY(model_word(e, w, n, out));
            continue;
        }
        /* cut before each "▁" (E2 96 81) that follows another character (see split_meta) */
        size_t start = 0;
        for (size_t k = 3; k + 3 <= n; k++) {
            if ((uint8_t)w[k] == 0xE2 && (uint8_t)w[k + 1] == 0x96 && (uint8_t)w[k + 2] == 0x81 &&
                !((uint8_t)w[k - 3] == 0xE2 && (uint8_t)w[k - 2] == 0x96 && (uint8_t)w[k - 1] == 0x81)) {
                LCX_TRY(model_word(e, w + start, k - start, out));
                start = k;
            }
        }
        LCX_TRY(model_word(e, w + start, n - start, out));
    }
    return LCX_OK;
}

static lcx_status encode_segment(lcx_tok_encoder *e, const char *s, size_t n, int first, lcx_tok_ids *out) {
    const lcx_tokenizer *t = e->tok;
    if (t->n_norms == 0 && t->trie_norm.n == 0) return encode_text(e, s, n, first, out);
    char *ns = NULL;
    size_t nn = n;
    if (t->n_norms) LCX_TRY(tok_normalize_string(t, s, n, &ns, &nn));
    const char *src = ns ? ns : s;
    lcx_status st = split_added(e, src, nn, &t->trie_norm, &e->nrm, &e->nnrm, &e->capnrm);
    for (size_t i = 0; st == LCX_OK && i < e->nnrm; i++) {
        span sp = e->nrm[i];
        if (sp.added >= 0) st = lcx_tok_ids_push(out, t->added[sp.added].id);
        else st = encode_text(e, src + sp.s, sp.e - sp.s, first && sp.s == 0, out);
    }
    free(ns);
    return st;
}

lcx_status lcx_tok_encode(lcx_tok_encoder *e, const char *text, size_t len, int add_special, lcx_tok_ids *out) {
    const lcx_tokenizer *t = e->tok;
    char *fixed = NULL;
    size_t flen;
    int r = lcx_utf8_repair(text, len, &fixed, &flen);
    if (r < 0) return lcx_fail(LCX_ERR_OOM, "UTF-8 repair of %zu bytes", len);
    const char *s = r ? fixed : text;
    size_t n = r ? flen : len;
    lcx_status st = LCX_OK;
    if (add_special)
        for (size_t i = 0; st == LCX_OK && i < t->n_tmpl_pre; i++) st = lcx_tok_ids_push(out, t->tmpl_pre[i]);
    if (st == LCX_OK) st = split_added(e, s, n, &t->trie_raw, &e->raw, &e->nraw, &e->capraw);
    for (size_t i = 0; st == LCX_OK && i < e->nraw; i++) {
        span sp = e->raw[i];
        if (sp.added >= 0) st = lcx_tok_ids_push(out, t->added[sp.added].id);
        else st = encode_segment(e, s + sp.s, sp.e - sp.s, sp.s == 0, out);
    }
    if (add_special)
        for (size_t i = 0; st == LCX_OK && i < t->n_tmpl_post; i++) st = lcx_tok_ids_push(out, t->tmpl_post[i]);
    free(fixed);
    return st;
}

lcx_status lcx_tokenizer_encode(const lcx_tokenizer *tok, const char *text, size_t len, int add_special,
                                lcx_tok_ids *out) {
    lcx_tok_encoder *e;
    LCX_TRY(lcx_tok_encoder_init(tok, &e));
    lcx_status st = lcx_tok_encode(e, text, len, add_special, out);
    lcx_tok_encoder_free(e);
    return st;
}
