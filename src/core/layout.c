#include "src/core/layout.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- mesh ------------------------------------------------------------------------------------------------ */

lcx_status lcx_mesh_init(lcx_mesh *m, int tp, int cp, int dp) {
    memset(m, 0, sizeof *m);
    LCX_FAIL_IF(tp < 1 || cp < 1 || dp < 1, LCX_ERR_INVALID, "mesh tp=%d cp=%d dp=%d: every size must be >= 1", tp,
                cp, dp);
    int w;
    LCX_FAIL_IF(__builtin_mul_overflow(tp, cp, &w) || __builtin_mul_overflow(w, dp, &w), LCX_ERR_INVALID,
                "mesh tp=%d cp=%d dp=%d: world size overflows", tp, cp, dp);
    m->tp = tp;
    m->cp = cp;
    m->dp = dp;
    m->world = w;
    return LCX_OK;
}

lcx_status lcx_mesh_coord_of(const lcx_mesh *m, int rank, lcx_mesh_coord *out) {
    *out = (lcx_mesh_coord){0};
    LCX_FAIL_IF(rank < 0 || rank >= m->world, LCX_ERR_INVALID, "rank %d outside the mesh of %d ranks (tp=%d cp=%d dp=%d)",
                rank, m->world, m->tp, m->cp, m->dp);
    out->t = rank % m->tp;
    out->c = (rank / m->tp) % m->cp;
    out->d = rank / (m->tp * m->cp);
    return LCX_OK;
}

int lcx_mesh_rank_of(const lcx_mesh *m, lcx_mesh_coord c) {
    LCX_ASSERT(c.t >= 0 && c.t < m->tp && c.c >= 0 && c.c < m->cp && c.d >= 0 && c.d < m->dp);
    return c.t + m->tp * (c.c + m->cp * c.d);
}

int lcx_mesh_group_size(const lcx_mesh *m, lcx_group_kind kind) {
    switch (kind) {
    case LCX_GROUP_TP: return m->tp;
    case LCX_GROUP_CP: return m->cp;
    case LCX_GROUP_DP: return m->dp;
    case LCX_GROUP_GRAD: return m->cp * m->dp;
    default: return 0;
    }
}

lcx_status lcx_mesh_group(const lcx_mesh *m, int rank, lcx_group_kind kind, int *members, int cap, int *n,
                          int *index) {
    lcx_mesh_coord me;
    LCX_TRY(lcx_mesh_coord_of(m, rank, &me));
    LCX_FAIL_IF(kind < 0 || kind >= LCX_GROUP_COUNT, LCX_ERR_INVALID, "unknown group kind %d", (int)kind);
    int size = lcx_mesh_group_size(m, kind);
    LCX_FAIL_IF(cap < size, LCX_ERR_INVALID, "group of %d ranks does not fit %d slots", size, cap);
    int pos = -1;
    for (int i = 0; i < size; i++) {
        lcx_mesh_coord c = me;
        switch (kind) {
        case LCX_GROUP_TP: c.t = i; break;
        case LCX_GROUP_CP: c.c = i; break;
        case LCX_GROUP_DP: c.d = i; break;
        default: c.c = i % m->cp; c.d = i / m->cp; break; /* gradient group: CP inner, DP outer */
        }
        members[i] = lcx_mesh_rank_of(m, c);
        if (members[i] == rank) pos = i;
    }
    LCX_ASSERT(pos >= 0);
    if (n) *n = size;
    if (index) *index = pos;
    return LCX_OK;
}

/* ---- boxes ----------------------------------------------------------------------------------------------- */

lcx_box lcx_box_full(int ndim, const uint64_t *dims) {
    LCX_ASSERT(ndim >= 0 && ndim <= LCX_BOX_MAX_DIMS);
    lcx_box b;
    memset(&b, 0, sizeof b);
    b.ndim = ndim;
    for (int i = 0; i < ndim; i++) b.shape[i] = dims[i];
    return b;
}

lcx_status lcx_box_volume(const lcx_box *b, uint64_t *volume) {
    *volume = 0;
    LCX_FAIL_IF(b->ndim < 0 || b->ndim > LCX_BOX_MAX_DIMS, LCX_ERR_INVALID, "box has %d dims (0..%d allowed)",
                b->ndim, LCX_BOX_MAX_DIMS);
    uint64_t v = 1, end;
    for (int i = 0; i < b->ndim; i++) {
        LCX_FAIL_IF(__builtin_add_overflow(b->start[i], b->shape[i], &end), LCX_ERR_INVALID,
                    "box dim %d: start + shape overflows", i);
        LCX_FAIL_IF(__builtin_mul_overflow(v, b->shape[i], &v), LCX_ERR_INVALID, "box volume overflows");
    }
    *volume = v;
    return LCX_OK;
}

int lcx_box_intersect(const lcx_box *a, const lcx_box *b, lcx_box *out) {
    memset(out, 0, sizeof *out);
    if (a->ndim != b->ndim || a->ndim < 0 || a->ndim > LCX_BOX_MAX_DIMS) return 0;
    out->ndim = a->ndim;
    for (int i = 0; i < a->ndim; i++) {
        /* Ends computed without overflow: validated boxes never overflow, hostile ones saturate. */
        uint64_t ae, be;
        if (__builtin_add_overflow(a->start[i], a->shape[i], &ae)) ae = UINT64_MAX;
        if (__builtin_add_overflow(b->start[i], b->shape[i], &be)) be = UINT64_MAX;
        uint64_t s = a->start[i] > b->start[i] ? a->start[i] : b->start[i];
        uint64_t e = ae < be ? ae : be;
        if (e <= s) {
            memset(out->shape, 0, sizeof out->shape);
            return 0;
        }
        out->start[i] = s;
        out->shape[i] = e - s;
    }
    return 1;
}

int lcx_box_inside(const lcx_box *b, int ndim, const uint64_t *dims) {
    if (b->ndim != ndim || ndim < 0 || ndim > LCX_BOX_MAX_DIMS) return 0;
    for (int i = 0; i < ndim; i++) {
        uint64_t end;
        if (__builtin_add_overflow(b->start[i], b->shape[i], &end) || end > dims[i]) return 0;
    }
    return 1;
}

char *lcx_box_str(const lcx_box *b, char *buf, size_t cap) {
    if (cap == 0) return buf;
    size_t used = 0;
    buf[0] = '\0';
    int w = snprintf(buf, cap, "[");
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < b->ndim && i < LCX_BOX_MAX_DIMS && used < cap; i++) {
        w = snprintf(buf + used, cap - used, "%s%llu:%llu", i ? ", " : "", (unsigned long long)b->start[i],
                     (unsigned long long)(b->start[i] + b->shape[i]));
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

lcx_status lcx_box_copy(const lcx_box *src_box, const void *src, const lcx_box *dst_box, void *dst, size_t es,
                        uint64_t *copied) {
    if (copied) *copied = 0;
    LCX_FAIL_IF(es == 0, LCX_ERR_INVALID, "box copy: element size 0");
    LCX_FAIL_IF(src_box->ndim != dst_box->ndim, LCX_ERR_INVALID, "box copy: source has %d dims, destination %d",
                src_box->ndim, dst_box->ndim);
    lcx_box in;
    if (!lcx_box_intersect(src_box, dst_box, &in)) return LCX_OK;
    const int n = in.ndim;
    const uint8_t *s = src;
    uint8_t *d = dst;
    if (n == 0) {
        memcpy(d, s, es);
        if (copied) *copied = 1;
        return LCX_OK;
    }
    /* Row-major element strides and the byte offsets of the intersection's first element. */
    uint64_t ss[LCX_BOX_MAX_DIMS], ds[LCX_BOX_MAX_DIMS];
    ss[n - 1] = ds[n - 1] = 1;
    for (int i = n - 2; i >= 0; i--) {
        ss[i] = ss[i + 1] * src_box->shape[i + 1];
        ds[i] = ds[i + 1] * dst_box->shape[i + 1];
    }
    uint64_t so = 0, doff = 0;
    for (int i = 0; i < n; i++) {
        so += (in.start[i] - src_box->start[i]) * ss[i];
        doff += (in.start[i] - dst_box->start[i]) * ds[i];
    }
    /* Merge trailing dims that are whole in source, destination and intersection into one contiguous run. */
    int inner = n - 1;
    uint64_t run = in.shape[n - 1];
    while (inner > 0 && in.shape[inner] == src_box->shape[inner] && in.shape[inner] == dst_box->shape[inner]) {
        inner--;
        run *= in.shape[inner];
    }
    const size_t run_bytes = (size_t)run * es;
    uint64_t idx[LCX_BOX_MAX_DIMS] = {0};
    uint64_t total = 0;
    for (;;) {
        memcpy(d + doff * es, s + so * es, run_bytes);
        total += run;
        /* Odometer over dims [0, inner). */
        int k = inner - 1;
        while (k >= 0) {
            idx[k]++;
            so += ss[k];
            doff += ds[k];
            if (idx[k] < in.shape[k]) break;
            so -= ss[k] * in.shape[k];
            doff -= ds[k] * in.shape[k];
            idx[k] = 0;
            k--;
        }
        if (k < 0) break;
    }
    if (copied) *copied = total;
    return LCX_OK;
}

/* ---- tensor-parallel slicing ----------------------------------------------------------------------------- */

static const struct {
    const char *suffix;
    lcx_weight_kind kind;
} kind_table[] = {
    {".self_attn.q_proj.weight", LCX_W_Q_PROJ},      {".self_attn.q_proj.bias", LCX_W_Q_BIAS},
    {".self_attn.k_proj.weight", LCX_W_K_PROJ},      {".self_attn.k_proj.bias", LCX_W_K_BIAS},
    {".self_attn.v_proj.weight", LCX_W_V_PROJ},      {".self_attn.v_proj.bias", LCX_W_V_BIAS},
    {".self_attn.o_proj.weight", LCX_W_O_PROJ},      {".self_attn.o_proj.bias", LCX_W_O_BIAS},
    {".mlp.gate_proj.weight", LCX_W_GATE_PROJ},      {".mlp.gate_proj.bias", LCX_W_GATE_BIAS},
    {".mlp.up_proj.weight", LCX_W_UP_PROJ},          {".mlp.up_proj.bias", LCX_W_UP_BIAS},
    {".mlp.down_proj.weight", LCX_W_DOWN_PROJ},      {".mlp.down_proj.bias", LCX_W_DOWN_BIAS},
    {".input_layernorm.weight", LCX_W_NORM},         {".post_attention_layernorm.weight", LCX_W_NORM},
    {".self_attn.q_norm.weight", LCX_W_Q_NORM},      {".self_attn.k_norm.weight", LCX_W_K_NORM},
    {"model.embed_tokens.weight", LCX_W_EMBED},      {"lm_head.weight", LCX_W_LM_HEAD},
    {"model.norm.weight", LCX_W_NORM},
};

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

lcx_weight_kind lcx_weight_kind_of_name(const char *name) {
    for (size_t i = 0; i < sizeof kind_table / sizeof kind_table[0]; i++) {
        const char *suf = kind_table[i].suffix;
        /* Layer tensors match by suffix; top-level names must match exactly. */
        if (suf[0] == '.' ? ends_with(name, suf) : strcmp(name, suf) == 0) return kind_table[i].kind;
    }
    return LCX_W_UNKNOWN;
}

const char *lcx_weight_kind_name(lcx_weight_kind k) {
    static const char *names[LCX_W_COUNT] = {
        "unknown",   "q_proj",    "q_bias",  "k_proj",    "k_bias", "v_proj", "v_bias",
        "o_proj",    "o_bias",    "gate_proj", "gate_bias", "up_proj", "up_bias", "down_proj",
        "down_bias", "embed",     "lm_head", "norm",      "q_norm", "k_norm",
    };
    return (k >= 0 && k < LCX_W_COUNT) ? names[k] : "unknown";
}

lcx_status lcx_tp_check(const lcx_tp_dims *m, int T) {
    LCX_FAIL_IF(T < 1, LCX_ERR_INVALID, "tensor parallel size %d must be >= 1", T);
    LCX_FAIL_IF(m->nh <= 0 || m->ng <= 0 || m->d <= 0 || m->H <= 0 || m->F <= 0 || m->V <= 0, LCX_ERR_INVALID,
                "model dims must be positive: heads %lld, kv heads %lld, head_dim %lld, hidden %lld, "
                "intermediate %lld, vocab %lld",
                (long long)m->nh, (long long)m->ng, (long long)m->d, (long long)m->H, (long long)m->F,
                (long long)m->V);
    LCX_FAIL_IF(m->nh % m->ng != 0, LCX_ERR_INVALID, "attention heads %lld not divisible by kv heads %lld",
                (long long)m->nh, (long long)m->ng);
    /* Every tensor's byte size (8-byte elements at most) must fit int64. */
    int64_t a, b, c, e, lim = INT64_MAX / 8;
    LCX_FAIL_IF(__builtin_mul_overflow(m->nh, m->d, &a) || __builtin_mul_overflow(a, m->H, &a) || a > lim ||
                    m->V > lim || __builtin_mul_overflow(m->V + (int64_t)T, m->H, &b) || b > lim ||
                    __builtin_mul_overflow(m->F, m->H, &c) || c > lim || __builtin_mul_overflow(m->ng, m->d, &e),
                LCX_ERR_INVALID, "model dims too large (tensor sizes overflow)");
    LCX_FAIL_IF(m->nh % T != 0, LCX_ERR_INVALID, "tp=%d does not divide the %lld attention heads", T,
                (long long)m->nh);
    LCX_FAIL_IF(m->F % T != 0, LCX_ERR_INVALID, "tp=%d does not divide intermediate_size %lld", T, (long long)m->F);
    if (m->ng >= T) {
        LCX_FAIL_IF(m->ng % T != 0, LCX_ERR_INVALID, "tp=%d does not divide the %lld kv heads", T, (long long)m->ng);
    } else {
        LCX_FAIL_IF(T % m->ng != 0, LCX_ERR_INVALID,
                    "tp=%d is larger than the %lld kv heads and not a multiple of it (kv heads cannot be replicated "
                    "evenly)",
                    T, (long long)m->ng);
    }
    return LCX_OK;
}

int lcx_tp_kv_replicated(const lcx_tp_dims *m, int T) { return m->ng < T; }

lcx_status lcx_vocab_padded(int64_t V, int T, int64_t *Vp) {
    *Vp = 0;
    LCX_FAIL_IF(V <= 0 || T < 1, LCX_ERR_INVALID, "vocab %lld / tp %d must be positive", (long long)V, T);
    int64_t r = V % T, p = V;
    LCX_FAIL_IF(r && __builtin_add_overflow(V, (int64_t)T - r, &p), LCX_ERR_INVALID, "vocab %lld overflows",
                (long long)V);
    *Vp = p;
    return LCX_OK;
}

/* Slice [lo, hi) along dim `dim` of the global box. */
static void set_range(lcx_tp_slice *s, int dim, int64_t lo, int64_t hi) {
    s->box.start[dim] = (uint64_t)lo;
    s->box.shape[dim] = (uint64_t)(hi - lo);
    s->local[dim] = (uint64_t)(hi - lo);
}

lcx_status lcx_tp_slice_of(lcx_weight_kind k, const lcx_tp_dims *m, int T, int r, lcx_tp_slice *out) {
    memset(out, 0, sizeof *out);
    LCX_TRY(lcx_tp_check(m, T));
    LCX_FAIL_IF(r < 0 || r >= T, LCX_ERR_INVALID, "tp rank %d outside tp=%d", r, T);
    const int64_t q = m->nh * m->d, kv = m->ng * m->d;
    uint64_t dims[2];
    int ndim = 2;
    switch (k) {
    case LCX_W_Q_PROJ: case LCX_W_K_PROJ: case LCX_W_V_PROJ:
        dims[0] = (uint64_t)(k == LCX_W_Q_PROJ ? q : kv); dims[1] = (uint64_t)m->H; break;
    case LCX_W_Q_BIAS: case LCX_W_K_BIAS: case LCX_W_V_BIAS:
        dims[0] = (uint64_t)(k == LCX_W_Q_BIAS ? q : kv); ndim = 1; break;
    case LCX_W_O_PROJ: dims[0] = (uint64_t)m->H; dims[1] = (uint64_t)q; break;
    case LCX_W_GATE_PROJ: case LCX_W_UP_PROJ: dims[0] = (uint64_t)m->F; dims[1] = (uint64_t)m->H; break;
    case LCX_W_GATE_BIAS: case LCX_W_UP_BIAS: dims[0] = (uint64_t)m->F; ndim = 1; break;
    case LCX_W_DOWN_PROJ: dims[0] = (uint64_t)m->H; dims[1] = (uint64_t)m->F; break;
    case LCX_W_O_BIAS: case LCX_W_DOWN_BIAS: case LCX_W_NORM: dims[0] = (uint64_t)m->H; ndim = 1; break;
    case LCX_W_Q_NORM: case LCX_W_K_NORM: dims[0] = (uint64_t)m->d; ndim = 1; break;
    case LCX_W_EMBED: case LCX_W_LM_HEAD: dims[0] = (uint64_t)m->V; dims[1] = (uint64_t)m->H; break;
    default: return lcx_fail(LCX_ERR_INVALID, "tensor kind %d has no tensor-parallel rule", (int)k);
    }
    out->ndim = ndim;
    out->global = lcx_box_full(ndim, dims);
    out->box = out->global;
    for (int i = 0; i < ndim; i++) out->local[i] = dims[i];
    out->replicas = 1;
    out->replica_index = 0;

    const int64_t hq = m->nh / T; /* q heads per rank */
    switch (k) {
    case LCX_W_Q_PROJ: case LCX_W_Q_BIAS:
        set_range(out, 0, r * hq * m->d, (r + 1) * hq * m->d);
        break;
    case LCX_W_O_PROJ:
        set_range(out, 1, r * hq * m->d, (r + 1) * hq * m->d);
        break;
    case LCX_W_K_PROJ: case LCX_W_K_BIAS: case LCX_W_V_PROJ: case LCX_W_V_BIAS:
        if (m->ng >= T) {
            int64_t hk = m->ng / T;
            set_range(out, 0, r * hk * m->d, (r + 1) * hk * m->d);
        } else {
            /* Replicated: T/ng consecutive ranks share kv head floor(r*ng/T). */
            int64_t h = (int64_t)r * m->ng / T, per = T / m->ng;
            set_range(out, 0, h * m->d, (h + 1) * m->d);
            out->replicas = (int)per;
            out->replica_index = (int)(r - h * per);
        }
        break;
    case LCX_W_GATE_PROJ: case LCX_W_UP_PROJ: case LCX_W_GATE_BIAS: case LCX_W_UP_BIAS:
        set_range(out, 0, r * (m->F / T), (r + 1) * (m->F / T));
        break;
    case LCX_W_DOWN_PROJ:
        set_range(out, 1, r * (m->F / T), (r + 1) * (m->F / T));
        break;
    case LCX_W_EMBED: case LCX_W_LM_HEAD: {
        int64_t Vp;
        LCX_TRY(lcx_vocab_padded(m->V, T, &Vp));
        int64_t per = Vp / T, lo = r * per, hi = lo + per;
        int64_t slo = lo < m->V ? lo : m->V, shi = hi < m->V ? hi : m->V; /* padding rows are not stored */
        set_range(out, 0, slo, shi);
        out->local[0] = (uint64_t)per;
        break;
    }
    default: /* replicated on every TP rank */
        out->replicas = T;
        out->replica_index = r;
        break;
    }
    return LCX_OK;
}

/* ---- context-parallel sequence split --------------------------------------------------------------------- */

lcx_status lcx_cp_split_of(int64_t seq_len, int cp, int c, lcx_cp_split *out) {
    memset(out, 0, sizeof *out);
    LCX_FAIL_IF(cp < 1, LCX_ERR_INVALID, "context parallel size %d must be >= 1", cp);
    LCX_FAIL_IF(c < 0 || c >= cp, LCX_ERR_INVALID, "cp rank %d outside cp=%d", c, cp);
    LCX_FAIL_IF(seq_len <= 0 || seq_len % (2 * (int64_t)cp) != 0, LCX_ERR_INVALID,
                "sequence length %lld is not a positive multiple of 2*cp = %lld (cp=%d splits it into 2*cp equal "
                "chunks; pad or change seq_len)",
                (long long)seq_len, 2 * (long long)cp, cp);
    out->chunk_len = seq_len / (2 * (int64_t)cp);
    out->chunk[0] = c;
    out->chunk[1] = 2 * (int64_t)cp - 1 - c;
    out->start[0] = out->chunk[0] * out->chunk_len;
    out->start[1] = out->chunk[1] * out->chunk_len;
    return LCX_OK;
}

lcx_status lcx_cp_positions(int64_t seq_len, int cp, int c, int64_t *pos) {
    lcx_cp_split s;
    LCX_TRY(lcx_cp_split_of(seq_len, cp, c, &s));
    for (int64_t i = 0; i < 2 * s.chunk_len; i++) pos[i] = s.start[i / s.chunk_len] + i % s.chunk_len;
    return LCX_OK;
}

int lcx_box_contiguous_in(const lcx_box *outer, const lcx_box *inner, uint64_t *offset) {
    if (outer->ndim != inner->ndim) return 0;
    int n = inner->ndim;
    for (int d = 0; d < n; d++) {
        if (inner->shape[d] == 0) return 0;
        if (inner->start[d] < outer->start[d] || inner->start[d] - outer->start[d] > outer->shape[d] ||
            inner->shape[d] > outer->shape[d] - (inner->start[d] - outer->start[d]))
            return 0;
    }
    int j = n; /* dims j+1.. whole */
    while (j > 0 && inner->start[j - 1] == outer->start[j - 1] && inner->shape[j - 1] == outer->shape[j - 1]) j--;
    /* dims j.. are whole; dim j-1 may be partial; dims before it must have extent 1 */
    for (int d = 0; d + 1 < j; d++)
        if (inner->shape[d] != 1) return 0;
    uint64_t off = 0;
    for (int d = 0; d < n; d++) off = off * outer->shape[d] + (inner->start[d] - outer->start[d]);
    *offset = off;
    return 1;
}
