/* model_kv: a KV cache and the cached forward of a forward-only model (src/model/model.h), so that decoding a token or
 * scoring a short continuation costs a pass over the new tokens only, not over the whole prompt again. The
 * layers are those of src/model/model_infer.c with keys and values written straight into the cache; the new queries
 * attend to cache rows 0 .. len+n-1 in one attention call (key block = cached + new, q_offset = len gives the
 * causal mask). Rows past the committed length are scratch: uncommitted tokens leave the cache as it was.
 *
 * Under context parallelism the prefix is split as a CP sequence is: the first call commits it whole through the
 * ring (each rank its two chunks of it, padded to a multiple of 2 CP, into its cache rows), and later calls are
 * continuations that commit nothing: their tokens run on every rank alike, and each layer merges the ranks'
 * partial attention over their parts of the prefix (model_internal.h lcx_cp_cached). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/cp_perm.h"
#include "src/model/model_internal.h"

/* The most new tokens of a continuation under CP (a passkey answer is under 20). */
#define LCX_KV_CP_TAIL 64

struct lcx_kv_cache {
    const lcx_backend *be;
    int64_t L, KV, cap, len; /* under CP: cap = this rank's rows, len = the prefix's tokens (global) */
    int cp;              /* the CP size the cache was made for (1: none) */
    int64_t tail;        /* under CP: rows for a continuation's new tokens, after the prefix's */
    int64_t rows, valid; /* under CP: this rank's rows of the prefix, and those before the pad */
    int64_t global;      /* the capacity asked for: the longest prefix (under CP cap is this rank's rows) */
    void *cp_o;          /* under CP: the ranks' partials, act [CP][tail][Q] and f32 [CP][tail][nh] */
    float *cp_lse;
    lcx_dtype dt;        /* the model's activation dtype: K and V are stored in it */
    void *k, *v;         /* device act [L][cap][KV] each (one allocation) */
    size_t bytes;
    int has_rope;        /* inv_freq/attn below are those of the cached keys (set by the first commit) */
    int64_t n_pairs;
    float *inv_freq;     /* host [n_pairs] */
    double attn;
};

lcx_status lcx_kv_cache_init(lcx_kv_cache **out, const lcx_model *m, int64_t capacity) {
    LCX_FAIL_IF(!out || !m, LCX_ERR_INVALID, "kv cache: NULL argument");
    *out = NULL;
    LCX_FAIL_IF(m->training, LCX_ERR_INVALID, "kv cache: the model was built for training (opts.training = 1)");
    LCX_FAIL_IF(capacity < 1 || capacity > INT32_MAX, LCX_ERR_INVALID, "kv cache: capacity %lld out of range [1, 2^31)",
                (long long)capacity);
    const int cp = m->cp ? m->cp_size : 1;
    const int64_t global = capacity, tail = m->max_tokens < LCX_KV_CP_TAIL ? m->max_tokens : LCX_KV_CP_TAIL;
    if (cp > 1) capacity = lcx_cp_local_len(global, cp) + tail; /* this rank's part of a prefix, and the new rows */
    size_t half;
    LCX_FAIL_IF(!lcx_mul_size((size_t)m->L * (size_t)m->KV, (size_t)capacity, &half) ||
                    !lcx_mul_size(half, lcx_act_size(m->adt), &half) || half > SIZE_MAX / 2,
                LCX_ERR_OOM, "kv cache: %lld tokens x %lld layers is too large", (long long)capacity, (long long)m->L);
    /* the cached attention sees up to capacity keys: the model's arena must hold that op's workspace too */
    lcx_attn_args aa = lcx_m_attn_args(m, m->max_tokens, 0);
    aa.n_k = capacity;
    LCX_TRY(m->be->sync(m->x));
    LCX_TRY(lcx_exec_reserve(m->x, lcx_exec_workspace(m->x, LCX_OP_ATTENTION_FWD, &aa)));
    lcx_kv_cache *c = calloc(1, sizeof *c);
    LCX_FAIL_IF(!c, LCX_ERR_OOM, "kv cache: out of memory");
    c->be = m->be;
    c->L = m->L;
    c->dt = m->adt;
    c->KV = m->KV;
    c->cap = capacity;
    c->global = global;
    c->cp = cp;
    c->tail = cp > 1 ? tail : 0;
    c->n_pairs = m->rope.n_pairs;
    c->inv_freq = calloc((size_t)c->n_pairs, sizeof(float));
    lcx_status st = LCX_OK;
    if (!c->inv_freq) {
        st = lcx_fail(LCX_ERR_OOM, "kv cache: out of memory");
    } else {
        /* under CP the ranks' partials follow K and V: [CP][tail][Q] act, [CP][tail][nh] f32 (64-byte pieces) */
        const size_t po = cp > 1 ? ((size_t)(cp * tail * m->Q) * lcx_act_size(m->adt) + 63) & ~(size_t)63 : 0;
        const size_t pl = cp > 1 ? (size_t)(cp * tail * m->nh) * sizeof(float) : 0;
        void *buf = NULL;
        st = m->be->alloc(2 * half + po + pl, &buf);
        if (st != LCX_OK) lcx_fail_context(st, "kv cache of %lld tokens: ", (long long)global);
        c->k = buf;
        c->v = buf ? (char *)buf + half : NULL;
        c->cp_o = buf && cp > 1 ? (char *)buf + 2 * half : NULL;
        c->cp_lse = buf && cp > 1 ? (float *)((char *)buf + 2 * half + po) : NULL;
        c->bytes = 2 * half + po + pl;
    }
    if (st != LCX_OK) {
        lcx_kv_cache_free(c);
        return st;
    }
    *out = c;
    return LCX_OK;
}

void lcx_kv_cache_free(lcx_kv_cache *c) {
    if (!c) return;
    c->be->free(c->k); /* k is the start of the one allocation */
    free(c->inv_freq);
    free(c);
}

int64_t lcx_kv_cache_len(const lcx_kv_cache *c) { return c->len; }
int64_t lcx_kv_cache_capacity(const lcx_kv_cache *c) { return c->global; }
int64_t lcx_kv_cache_cp_tail(const lcx_kv_cache *c) { return c->cp > 1 ? c->tail : 0; }
size_t lcx_kv_cache_bytes(const lcx_kv_cache *c) { return c->bytes; }

lcx_status lcx_kv_cache_truncate(lcx_kv_cache *c, int64_t len) {
    LCX_FAIL_IF(len < 0 || len > c->len, LCX_ERR_INVALID, "kv cache: cannot truncate %lld cached tokens to %lld",
                (long long)c->len, (long long)len);
    LCX_FAIL_IF(c->cp > 1 && len != 0 && len != c->len, LCX_ERR_INVALID,
                "kv cache: under CP the %lld cached tokens are split over the ring: truncate to 0 (and fill it "
                "again), not to %lld", (long long)c->len, (long long)len);
    c->len = len;
    if (len == 0) c->has_rope = 0, c->rows = c->valid = 0;
    return LCX_OK;
}

/* Are the rope frequencies for a forward of length total those of the cached keys? */
static lcx_status same_rope(const lcx_model *m, const lcx_kv_cache *c, int64_t total, int *same) {
    *same = 1;
    if (!c->has_rope) return LCX_OK;
    float f[LCX_ROPE_MAX_PAIRS];
    double attn = 1.0;
    LCX_TRY(lcx_rope_inv_freq(&m->rope, total, f, &attn));
    *same = attn == c->attn && memcmp(f, c->inv_freq, (size_t)c->n_pairs * sizeof(float)) == 0;
    return LCX_OK;
}

int lcx_model_rope_same(const lcx_model *m, int64_t a, int64_t b) {
    float fa[LCX_ROPE_MAX_PAIRS], fb[LCX_ROPE_MAX_PAIRS];
    double xa = 1.0, xb = 1.0;
    if (lcx_rope_inv_freq(&m->rope, a, fa, &xa) != LCX_OK || lcx_rope_inv_freq(&m->rope, b, fb, &xb) != LCX_OK)
        return 0;
    return xa == xb && memcmp(fa, fb, (size_t)m->rope.n_pairs * sizeof(float)) == 0;
}

int64_t lcx_kv_cache_usable(const lcx_model *m, const lcx_kv_cache *c, int64_t total) {
    int same = 0;
    if (c->len == 0 || same_rope(m, c, total, &same) != LCX_OK) return 0;
    return same ? c->len : 0;
}

/* Under CP, the prefill of an empty cache (every token committed, no logits): the prefix through the ring, each
 * rank its two chunks of it into its cache rows. */
static lcx_status prefill_cp(lcx_model *m, lcx_kv_cache *c, const int32_t *ids, int64_t n, int64_t n_commit,
                             lcx_logits_fn fn) {
    const int C = c->cp;
    LCX_FAIL_IF(n_commit != n || fn, LCX_ERR_INVALID,
                "cached forward: under CP the first call fills the cache with a whole prefix (commit all %lld "
                "tokens, no logits)", (long long)n);
    LCX_FAIL_IF(n > c->global, LCX_ERR_INVALID, "cached forward: a prefix of %lld tokens exceeds the cache's "
                "capacity of %lld", (long long)n, (long long)c->global);
    const int64_t loc = lcx_cp_local_len(n, C);
    int32_t *buf = malloc((size_t)(3 * loc) * sizeof *buf);
    LCX_FAIL_IF(!buf, LCX_ERR_OOM, "cached forward: out of memory");
    int32_t *lid = buf, *lpos = lid + loc, *ltgt = lpos + loc;
    for (int64_t j = 0; j < loc; j++) ltgt[j] = LCX_IGNORE_INDEX;
    lcx_status st = lcx_cp_local_window(n, C, m->cp_rank, ids, lid, lpos); /* the pad after the prefix */
    lcx_batch b = {.n_seq = 1, .seq_len = loc, .ids = lid, .targets = ltgt, .positions = lpos, .rope_len = n};
    if (st == LCX_OK) st = lcx_model_prepare(m, &b, NULL);
    if (st == LCX_OK) st = lcx_model_embed(m, loc);
    if (st == LCX_OK) st = lcx_infer_layers_cp_cached(m, &b, c->k, c->v, c->cap, NULL);
    int64_t valid = 0;
    while (valid < loc && lpos[valid] < n) valid++; /* both chunks ascend: the pad is a suffix */
    free(buf);
    LCX_TRY(st);
    LCX_TRY(lcx_rope_inv_freq(&m->rope, n, c->inv_freq, &c->attn));
    c->has_rope = 1;
    c->len = n, c->rows = loc, c->valid = valid;
    return LCX_OK;
}

lcx_status lcx_model_forward_cached(lcx_model *m, lcx_kv_cache *c, const int32_t *ids, int64_t n, int64_t n_commit,
                                    int64_t first_row, lcx_logits_fn fn, void *user) {
    LCX_FAIL_IF(!m || !c || !ids, LCX_ERR_INVALID, "cached forward: NULL argument");
    LCX_FAIL_IF(m->training, LCX_ERR_INVALID, "cached forward: the model was built for training (opts.training = 1)");
    LCX_FAIL_IF(c->L != m->L || c->KV != m->KV || c->be != m->be || c->dt != m->adt, LCX_ERR_INVALID,
                "cached forward: the cache was made for another model (%lld layers x %lld key values in %s, model %lld x "
                "%lld in %s)",
                (long long)c->L, (long long)c->KV, lcx_dtype_name(c->dt), (long long)m->L, (long long)m->KV,
                lcx_dtype_name(m->adt));
    LCX_FAIL_IF(n < 1, LCX_ERR_INVALID, "cached forward: no new tokens");
    LCX_FAIL_IF(n_commit < 0 || n_commit > n, LCX_ERR_INVALID, "cached forward: commit %lld of %lld new tokens",
                (long long)n_commit, (long long)n);
    LCX_FAIL_IF(first_row < 0 || first_row > n, LCX_ERR_INVALID, "cached forward: first_row %lld outside [0, %lld]",
                (long long)first_row, (long long)n);
    LCX_FAIL_IF(c->cp != (m->cp ? m->cp_size : 1), LCX_ERR_INVALID, "cached forward: the cache was made for CP %d, "
                "the model runs on %d ranks", c->cp, m->cp ? m->cp_size : 1);
    if (c->cp > 1 && c->len == 0) return prefill_cp(m, c, ids, n, n_commit, fn);
    if (c->cp > 1) { /* a continuation: the same new tokens on every rank, nothing committed */
        LCX_FAIL_IF(n_commit != 0, LCX_ERR_INVALID,
                    "cached forward: under CP a filled cache takes continuations only (commit 0 of %lld tokens, not "
                    "%lld)", (long long)n, (long long)n_commit);
        LCX_FAIL_IF(n > c->tail, LCX_ERR_INVALID,
                    "cached forward: under CP a continuation holds at most %lld new tokens, not %lld",
                    (long long)c->tail, (long long)n);
    } else {
        LCX_FAIL_IF(n > c->cap - c->len, LCX_ERR_INVALID,
                    "cached forward: %lld cached + %lld new tokens exceed the cache's capacity of %lld",
                    (long long)c->len, (long long)n, (long long)c->cap);
    }
    int64_t total = c->len + n;
    LCX_FAIL_IF(m->cfg.sliding_window > 0 && total > m->cfg.sliding_window, LCX_ERR_UNSUPPORTED,
                "cached forward: %s sliding_window %lld is smaller than the %lld tokens attended to (sliding-window "
                "attention is not implemented)",
                lcx_arch_name(m->cfg.arch), (long long)m->cfg.sliding_window, (long long)total);
    int same = 1;
    LCX_TRY(same_rope(m, c, total, &same));
    LCX_FAIL_IF(c->len > 0 && !same, LCX_ERR_INVALID,
                "cached forward: %s rope frequencies at %lld tokens differ from those of the %lld cached tokens "
                "(they depend on the length): truncate the cache and run the prefix again",
                lcx_rope_type_name(m->rope.type), (long long)total, (long long)c->len);
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    LCX_FAIL_IF(!pos, LCX_ERR_OOM, "cached forward: out of memory");
    for (int64_t i = 0; i < n; i++) pos[i] = (int32_t)(c->len + i);
    lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = ids, .positions = pos};
    const lcx_cp_cached cc = {c->len, c->rows, c->valid, c->cp_o, c->cp_lse};
    lcx_status st = lcx_model_prepare_rows(m, &b, NULL, 0); /* under CP the same rows on every rank, not chunks */
    if (st == LCX_OK) st = lcx_model_embed(m, n);
    if (st == LCX_OK)
        st = c->cp > 1 ? lcx_infer_layers_cp_cached(m, &b, c->k, c->v, c->cap, &cc)
                       : lcx_infer_layers_cached(m, &b, c->k, c->v, c->cap, c->len);
    free(pos);
    LCX_TRY(st);
    if (fn) LCX_TRY(lcx_model_emit_logits(m, n, first_row, fn, user));
    if (n_commit > 0 && c->len == 0) { /* the first keys in the cache: remember their rope */
        LCX_TRY(lcx_rope_inv_freq(&m->rope, total, c->inv_freq, &c->attn));
        c->has_rope = 1;
    }
    c->len += n_commit;
    return LCX_OK;
}
