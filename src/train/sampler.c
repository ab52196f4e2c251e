/* Packed-sequence sampler: deterministic per-epoch shuffles of the eligible documents, read as one stream. */
#include "src/train/sampler.h"

#include <stdlib.h>
#include <string.h>

struct lcx_sampler {
    const lcx_tokdata *td;
    lcx_sampler_config cfg;
    uint64_t *base;    /* [n_entries] eligible document ids, long ones repeated, before shuffling */
    uint64_t *order;   /* [n_entries] the shuffled list of order_epoch */
    uint64_t n_entries, epoch_tokens, order_epoch;
    int have_order;
    lcx_sampler_cursor cur;
};

/* splitmix64: a small, well-mixed, portable generator */
static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection). */
static uint64_t bounded(uint64_t *st, uint64_t n) {
    unsigned __int128 m = (unsigned __int128)splitmix(st) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t thr = (0 - n) % n;
        while (lo < thr) {
            m = (unsigned __int128)splitmix(st) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static uint64_t doc_tokens(const lcx_tokdata *td, uint64_t d) {
    uint64_t first, end, n = 0;
    lcx_tokdata_doc_seqs(td, d, &first, &end);
    for (uint64_t i = first; i < end; i++) n += lcx_tokdata_seq_len(td, i);
    return n;
}

static uint64_t entry_len(const lcx_sampler *s, uint64_t d) {
    return doc_tokens(s->td, d) + (s->cfg.eos_id >= 0);
}

static void build_order(lcx_sampler *s, uint64_t epoch) {
    if (s->have_order && s->order_epoch == epoch) return;
    memcpy(s->order, s->base, s->n_entries * sizeof *s->order);
    uint64_t st = s->cfg.seed ^ (epoch * 0xD1B54A32D192ED03ull) ^ 0x6C63787361ull;
    for (uint64_t i = s->n_entries; i > 1; i--) { /* Fisher-Yates */
        uint64_t j = bounded(&st, i);
        uint64_t t = s->order[i - 1];
        s->order[i - 1] = s->order[j];
        s->order[j] = t;
    }
    s->order_epoch = epoch;
    s->have_order = 1;
}

lcx_status lcx_sampler_init(const lcx_tokdata *td, const lcx_sampler_config *cfg, lcx_sampler **out) {
    *out = NULL;
    LCX_FAIL_IF(cfg->seq_len == 0, LCX_ERR_INVALID, "sampler: sequence length must be >= 1");
    LCX_FAIL_IF(cfg->long_doc_tokens && cfg->long_doc_repeat == 0, LCX_ERR_INVALID,
                "sampler: long-document repeat must be >= 1");
    LCX_FAIL_IF(cfg->eos_id > (int64_t)UINT32_MAX, LCX_ERR_INVALID, "sampler: EOS id %lld out of range",
                (long long)cfg->eos_id);
    lcx_sampler *s = calloc(1, sizeof *s);
    LCX_FAIL_IF(!s, LCX_ERR_OOM, "sampler");
    s->td = td;
    s->cfg = *cfg;
    uint64_t n = 0;
    for (uint64_t d = 0; d < td->n_docs; d++) {
        uint64_t len = doc_tokens(td, d);
        if (len == 0 || len < cfg->min_doc_tokens) continue;
        n += (cfg->long_doc_tokens && len >= cfg->long_doc_tokens) ? cfg->long_doc_repeat : 1;
    }
    if (n == 0) {
        free(s);
        return lcx_fail(LCX_ERR_INVALID, "%s: no document has at least %llu tokens (of %llu documents)", td->prefix,
                        (unsigned long long)(cfg->min_doc_tokens ? cfg->min_doc_tokens : 1),
                        (unsigned long long)td->n_docs);
    }
    s->base = malloc(n * sizeof *s->base);
    s->order = malloc(n * sizeof *s->order);
    if (!s->base || !s->order) { lcx_sampler_free(s); return lcx_fail(LCX_ERR_OOM, "sampler of %llu entries", (unsigned long long)n); }
    uint64_t k = 0;
    for (uint64_t d = 0; d < td->n_docs; d++) {
        uint64_t len = doc_tokens(td, d);
        if (len == 0 || len < cfg->min_doc_tokens) continue;
        uint64_t r = (cfg->long_doc_tokens && len >= cfg->long_doc_tokens) ? cfg->long_doc_repeat : 1;
        for (uint64_t j = 0; j < r; j++) s->base[k++] = d;
        s->epoch_tokens += r * (len + (cfg->eos_id >= 0));
    }
    s->n_entries = n;
    *out = s;
    return LCX_OK;
}

void lcx_sampler_free(lcx_sampler *s) {
    if (!s) return;
    free(s->base);
    free(s->order);
    free(s);
}

uint64_t lcx_sampler_epoch_entries(const lcx_sampler *s) { return s->n_entries; }
uint64_t lcx_sampler_epoch_tokens(const lcx_sampler *s) { return s->epoch_tokens; }

uint64_t lcx_sampler_doc_at(lcx_sampler *s, uint64_t epoch, uint64_t pos) {
    LCX_ASSERT(pos < s->n_entries);
    build_order(s, epoch);
    return s->order[pos];
}

lcx_sampler_cursor lcx_sampler_tell(const lcx_sampler *s) { return s->cur; }

lcx_status lcx_sampler_seek(lcx_sampler *s, const lcx_sampler_cursor *c) {
    LCX_FAIL_IF(c->pos >= s->n_entries, LCX_ERR_INVALID, "sampler cursor: position %llu past the %llu entries of an "
                "epoch (different data or settings?)", (unsigned long long)c->pos, (unsigned long long)s->n_entries);
    uint64_t d = lcx_sampler_doc_at(s, c->epoch, c->pos);
    LCX_FAIL_IF(c->offset >= entry_len(s, d), LCX_ERR_INVALID, "sampler cursor: offset %llu past document %llu "
                "(%llu tokens; different data or settings?)", (unsigned long long)c->offset, (unsigned long long)d,
                (unsigned long long)entry_len(s, d));
    s->cur = *c;
    return LCX_OK;
}

/* Copy n stream tokens from cursor c into out, moving c past them; doc (may be NULL) gets each token's document
 * start, an index into out (0 for the document out begins inside). */
static lcx_status stream_read(lcx_sampler *s, lcx_sampler_cursor *c, uint64_t n, uint32_t *out, int32_t *doc) {
    const uint32_t *out0 = out;
    while (n) {
        uint64_t d = lcx_sampler_doc_at(s, c->epoch, c->pos);
        uint64_t dl = doc_tokens(s->td, d), el = dl + (s->cfg.eos_id >= 0);
        const uint32_t *first_out = out;
        const int32_t start = c->offset == 0 ? (int32_t)(out - out0) : 0;
        if (c->offset < dl) {
            uint64_t first, end, skip = c->offset;
            lcx_tokdata_doc_seqs(s->td, d, &first, &end);
            for (uint64_t q = first; q < end && n; q++) {
                uint64_t ql = lcx_tokdata_seq_len(s->td, q);
                if (skip >= ql) { skip -= ql; continue; }
                uint64_t take = ql - skip < n ? ql - skip : n;
                LCX_TRY(lcx_tokdata_read(s->td, q, skip, take, out));
                out += take;
                n -= take;
                c->offset += take;
                skip = 0;
            }
        }
        if (n && c->offset == dl && s->cfg.eos_id >= 0) {
            *out++ = (uint32_t)s->cfg.eos_id;
            n--;
            c->offset++;
        }
        for (const uint32_t *p = first_out; doc && p < out; p++) doc[p - out0] = start;
        if (c->offset == el) {
            c->offset = 0;
            if (++c->pos == s->n_entries) { c->pos = 0; c->epoch++; }
        }
    }
    return LCX_OK;
}

lcx_status lcx_sampler_next(lcx_sampler *s, uint32_t *out, int32_t *doc) {
    lcx_sampler_cursor c = s->cur;
    LCX_TRY(stream_read(s, &c, s->cfg.seq_len, out, doc)); /* c: where the next sample starts */
    lcx_sampler_cursor peek = c;
    LCX_TRY(stream_read(s, &peek, 1, out + s->cfg.seq_len, NULL)); /* the shared last token */
    c.samples = s->cur.samples + 1;
    s->cur = c;
    return LCX_OK;
}
