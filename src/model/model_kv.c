/* model_kv: a KV cache and the cached forward of a forward-only model (src/model/model.h), so that decoding a token or
 * scoring a short continuation costs a pass over the new tokens only, not over the whole prompt again. The
 * layers are those of src/model/model_infer.c with keys and values written straight into the cache; the new queries
 * attend to cache rows 0 .. len+n-1 in one attention call (key block = cached + new, q_offset = len gives the
 * causal mask). Rows past the committed length are scratch: uncommitted tokens leave the cache as it was. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model_internal.h"

struct lcx_kv_cache {
    const lcx_backend *be;
    int64_t L, KV, cap, len;
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
    LCX_FAIL_IF(m->cp, LCX_ERR_UNSUPPORTED, "kv cache: not with context parallelism (opts.cp_comm)");
    LCX_FAIL_IF(capacity < 1 || capacity > INT32_MAX, LCX_ERR_INVALID, "kv cache: capacity %lld out of range [1, 2^31)",
                (long long)capacity);
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
    c->n_pairs = m->rope.n_pairs;
    c->inv_freq = calloc((size_t)c->n_pairs, sizeof(float));
    lcx_status st = LCX_OK;
    if (!c->inv_freq) {
        st = lcx_fail(LCX_ERR_OOM, "kv cache: out of memory");
    } else {
        void *buf = NULL;
        st = m->be->alloc(2 * half, &buf);
        if (st != LCX_OK) lcx_fail_context(st, "kv cache of %lld tokens: ", (long long)capacity);
        c->k = buf;
        c->v = buf ? (char *)buf + half : NULL;
        c->bytes = 2 * half;
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
int64_t lcx_kv_cache_capacity(const lcx_kv_cache *c) { return c->cap; }
size_t lcx_kv_cache_bytes(const lcx_kv_cache *c) { return c->bytes; }

lcx_status lcx_kv_cache_truncate(lcx_kv_cache *c, int64_t len) {
    LCX_FAIL_IF(len < 0 || len > c->len, LCX_ERR_INVALID, "kv cache: cannot truncate %lld cached tokens to %lld",
                (long long)c->len, (long long)len);
    c->len = len;
    if (len == 0) c->has_rope = 0;
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

int64_t lcx_kv_cache_usable(const lcx_model *m, const lcx_kv_cache *c, int64_t total) {
    int same = 0;
    if (c->len == 0 || same_rope(m, c, total, &same) != LCX_OK) return 0;
    return same ? c->len : 0;
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
    LCX_FAIL_IF(n > c->cap - c->len, LCX_ERR_INVALID,
                "cached forward: %lld cached + %lld new tokens exceed the cache's capacity of %lld", (long long)c->len,
                (long long)n, (long long)c->cap);
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
    lcx_status st = lcx_model_prepare(m, &b, NULL);
    if (st == LCX_OK) st = lcx_model_embed(m, n);
    if (st == LCX_OK) st = lcx_infer_layers_cached(m, &b, c->k, c->v, c->cap, c->len);
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
