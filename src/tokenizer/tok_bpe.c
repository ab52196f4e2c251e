/* BPE on one pre-tokenized word: initial symbols (chars, byte fallback, unk), then merges applied lowest rank
 * first (leftmost on ties) through a min-heap over a linked list of symbols: O(n log n) per word. This is
 * the order `tokenizers` uses, including how it skips stale heap entries, so results agree on every input. */
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/tok_internal.h"

void tok_bpe_scratch_free(tok_bpe_scratch *sc) {
    free(sc->c); free(sc->prev); free(sc->next); free(sc->len); free(sc->heap);
    memset(sc, 0, sizeof *sc);
}

static lcx_status scratch_reserve(tok_bpe_scratch *sc, size_t n) {
    if (n <= sc->cap) return LCX_OK;
    size_t nc = sc->cap ? sc->cap : 64;
    while (nc < n) nc *= 2;
    uint32_t *c = realloc(sc->c, nc * sizeof *c);
    if (c) sc->c = c;
    int32_t *p = realloc(sc->prev, nc * sizeof *p);
    if (p) sc->prev = p;
    int32_t *x = realloc(sc->next, nc * sizeof *x);
    if (x) sc->next = x;
    uint32_t *l = realloc(sc->len, nc * sizeof *l);
    if (l) sc->len = l;
    uint64_t *h = realloc(sc->heap, nc * 2 * sizeof *h);
    if (h) sc->heap = h;
    if (!c || !p || !x || !l || !h) return lcx_fail(LCX_ERR_OOM, "BPE scratch for a %zu-byte word", n);
    sc->cap = nc;
    sc->heap_cap = nc * 2;
    return LCX_OK;
}

static lcx_status heap_push(tok_bpe_scratch *sc, uint32_t rank, uint32_t pos) {
    if (sc->heap_n == sc->heap_cap) {
        size_t nc = sc->heap_cap * 2;
        uint64_t *h = realloc(sc->heap, nc * sizeof *h);
        if (!h) return lcx_fail(LCX_ERR_OOM, "BPE heap");
        sc->heap = h; sc->heap_cap = nc;
    }
    uint64_t e = ((uint64_t)rank << 32) | pos;
    size_t i = sc->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (sc->heap[parent] <= e) break;
        sc->heap[i] = sc->heap[parent];
        i = parent;
    }
    sc->heap[i] = e;
    return LCX_OK;
}

static uint64_t heap_pop(tok_bpe_scratch *sc) {
    uint64_t top = sc->heap[0], last = sc->heap[--sc->heap_n];
    size_t i = 0, n = sc->heap_n;
    for (;;) { /* 4-ary: half the levels of a binary heap, children share a cache line */
        size_t c = 4 * i + 1, m = i;
        uint64_t mk = last;
        for (size_t k = c; k < c + 4 && k < n; k++)
            if (sc->heap[k] < mk) { m = k; mk = sc->heap[k]; }
        if (m == i) break;
        sc->heap[i] = sc->heap[m];
        i = m;
    }
    if (n) sc->heap[i] = last;
    return top;
}

typedef struct builder {
    tok_bpe_scratch *sc;
    size_t n;
    uint32_t unk_id, unk_len;
    int unk_pending;
} builder;

static void add_sym(builder *b, uint32_t id, uint32_t len) {
    tok_bpe_scratch *sc = b->sc;
    size_t i = b->n++;
    sc->c[i] = id;
    sc->len[i] = len;
    sc->prev[i] = (int32_t)i - 1;
    sc->next[i] = -1;
    if (i > 0) sc->next[i - 1] = (int32_t)i;
}

/* A character (its bytes s[0..n)) that is not in the vocabulary: byte fallback when every byte has a <0xXX>
 * token, else unk (fused with a pending unk when fuse_unk), else dropped - the order `tokenizers` uses. */
static lcx_status unknown_char(const lcx_tokenizer *tok, builder *b, const uint8_t *s, size_t n) {
    if (tok->byte_fallback) {
        size_t k = 0;
        while (k < n && tok->byte_fallback_id[s[k]] != TOK_NONE) k++;
        if (k == n) {
            for (k = 0; k < n; k++) add_sym(b, tok->byte_fallback_id[s[k]], 1);
            return LCX_OK;
        }
    }
    if (tok->unk_id == TOK_NONE) return LCX_OK;
    if (b->unk_pending && tok->fuse_unk) {
        b->unk_len += (uint32_t)n;
    } else {
        if (b->unk_pending) add_sym(b, b->unk_id, b->unk_len);
        b->unk_pending = 1;
        b->unk_id = tok->unk_id;
        b->unk_len = (uint32_t)n;
    }
    return LCX_OK;
}

static void known_sym(builder *b, uint32_t id, uint32_t len) {
    if (b->unk_pending) {
        add_sym(b, b->unk_id, b->unk_len);
        b->unk_pending = 0;
    }
    add_sym(b, id, len);
}

lcx_status tok_bpe_word(const lcx_tokenizer *tok, tok_bpe_scratch *sc, const char *w, size_t len,
                        lcx_tok_ids *out) {
    if (len == 0) return LCX_OK;
    uint32_t id;
    if (tok->ignore_merges && tok_strmap_get(&tok->vocab, w, len, &id)) return lcx_tok_ids_push(out, id);
    LCX_TRY(scratch_reserve(sc, len + 1));
    builder b = {sc, 0, 0, 0, 0};
    const uint8_t *s = (const uint8_t *)w;
    if (tok->byte_level) {
        for (size_t i = 0; i < len; i++) {
            if (tok->byte_sym[s[i]] != TOK_NONE) { known_sym(&b, tok->byte_sym[s[i]], 1); continue; }
            char ch[4];
            size_t n = tok_utf8_encode(tok_byte_to_cp(s[i]), ch); /* the char `tokenizers` would look up */
            LCX_TRY(unknown_char(tok, &b, (const uint8_t *)ch, n));
        }
    } else {
        for (size_t i = 0; i < len;) {
            if (s[i] < 0x80 && tok->ascii_id[s[i]] != TOK_NONE) { known_sym(&b, tok->ascii_id[s[i]], 1); i++; continue; }
            size_t n = tok_utf8_len(s[i]);
            if (n > len - i) n = len - i;
            if (tok_strmap_get(&tok->vocab, w + i, n, &id)) known_sym(&b, id, (uint32_t)n);
            else LCX_TRY(unknown_char(tok, &b, s + i, n));
            i += n;
        }
    }
    if (b.unk_pending) add_sym(&b, b.unk_id, b.unk_len);
    size_t n = b.n;
    if (n == 0) return LCX_OK;

    /* Heap entries are (rank, pos). An entry is stale when the pair now at pos has another rank; a pair with
     * the same rank at the same pos sorts exactly where the entry does, so merging it is what tokenizers'
     * new-id check amounts to. */
    sc->heap_n = 0;
    uint32_t rank, nid;
    for (size_t i = 0; i + 1 < n; i++)
        if (tok_pairmap_get(&tok->merges, sc->c[i], sc->c[i + 1], &rank, &nid)) LCX_TRY(heap_push(sc, rank, (uint32_t)i));
    while (sc->heap_n) {
        uint64_t top = heap_pop(sc);
        uint32_t pos = (uint32_t)top, trank = (uint32_t)(top >> 32);
        if (sc->len[pos] == 0 || sc->next[pos] < 0) continue;
        int32_t np = sc->next[pos];
        if (!tok_pairmap_get(&tok->merges, sc->c[pos], sc->c[np], &rank, &nid) || rank != trank) continue;
        sc->c[pos] = nid;
        sc->len[pos] += sc->len[np];
        sc->next[pos] = sc->next[np];
        sc->len[np] = 0;
        if (sc->next[np] >= 0) sc->prev[sc->next[np]] = (int32_t)pos;
        int32_t pv = sc->prev[pos];
        if (pv >= 0 && tok_pairmap_get(&tok->merges, sc->c[pv], sc->c[pos], &rank, &nid))
            LCX_TRY(heap_push(sc, rank, (uint32_t)pv));
        int32_t nx = sc->next[pos];
        if (nx >= 0 && tok_pairmap_get(&tok->merges, sc->c[pos], sc->c[nx], &rank, &nid))
            LCX_TRY(heap_push(sc, rank, pos));
    }
    for (int32_t i = 0; i >= 0; i = sc->next[i]) LCX_TRY(lcx_tok_ids_push(out, sc->c[i]));
    return LCX_OK;
}
