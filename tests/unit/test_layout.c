/* layout: mesh coordinates and groups against a nested-loop enumeration, TP slices against hand-derived values
 * from docs/formats.md "Tensor-parallel slicing" and an exact-cover count over every element, CP chunk ownership,
 * and the strided box copy
 * against a naive per-element copy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/layout.h"
#include "test_util.h"

/* ---- mesh ------------------------------------------------------------------------------------------------ */

static void test_mesh(void) {
    const int cfg[][3] = {{1, 1, 1}, {2, 1, 1}, {1, 3, 1}, {2, 2, 2}, {4, 2, 3}, {3, 1, 2}};
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        int tp = cfg[ci][0], cp = cfg[ci][1], dp = cfg[ci][2];
        lcx_mesh m;
        CHECK_OK(lcx_mesh_init(&m, tp, cp, dp));
        CHECK(m.world == tp * cp * dp);
        /* Reference order: DP outermost, then CP, TP innermost; ranks counted in that loop order. */
        int W = m.world, coords[64][3], rank = 0;
        for (int d = 0; d < dp; d++)
            for (int c = 0; c < cp; c++)
                for (int t = 0; t < tp; t++, rank++) coords[rank][0] = t, coords[rank][1] = c, coords[rank][2] = d;
        for (int r = 0; r < W; r++) {
            lcx_mesh_coord mc;
            CHECK_OK(lcx_mesh_coord_of(&m, r, &mc));
            CHECK(mc.t == coords[r][0] && mc.c == coords[r][1] && mc.d == coords[r][2]);
            CHECK(lcx_mesh_rank_of(&m, mc) == r);
            for (int kind = 0; kind < LCX_GROUP_COUNT; kind++) {
                int members[64], n = -1, idx = -1;
                CHECK_OK(lcx_mesh_group(&m, r, (lcx_group_kind)kind, members, 64, &n, &idx));
                /* Brute force: ranks agreeing on the coordinates the group keeps fixed. */
                int ref[64], nref = 0;
                for (int s = 0; s < W; s++) {
                    int same_t = coords[s][0] == coords[r][0], same_c = coords[s][1] == coords[r][1],
                        same_d = coords[s][2] == coords[r][2];
                    int in = kind == LCX_GROUP_TP ? same_c && same_d
                           : kind == LCX_GROUP_CP ? same_t && same_d
                           : kind == LCX_GROUP_DP ? same_t && same_c
                                                  : same_t;
                    if (in) ref[nref++] = s;
                }
                CHECK(n == nref && n == lcx_mesh_group_size(&m, (lcx_group_kind)kind));
                int ok = n == nref;
                for (int i = 0; ok && i < n; i++) ok = members[i] == ref[i]; /* ascending */
                CHECK_MSG(ok, "tp=%d cp=%d dp=%d rank %d group %d", tp, cp, dp, r, kind);
                CHECK(idx >= 0 && idx < n && members[idx] == r);
                if (kind == LCX_GROUP_GRAD) CHECK(idx == coords[r][1] + cp * coords[r][2]);
                if (kind == LCX_GROUP_TP) CHECK(idx == coords[r][0]);
            }
        }
    }
    lcx_mesh m;
    CHECK_FAILS(lcx_mesh_init(&m, 0, 1, 1), LCX_ERR_INVALID, "tp=0");
    CHECK_FAILS(lcx_mesh_init(&m, 65536, 65536, 2), LCX_ERR_INVALID, "overflows");
    CHECK_OK(lcx_mesh_init(&m, 2, 2, 1));
    lcx_mesh_coord mc;
    CHECK_FAILS(lcx_mesh_coord_of(&m, 4, &mc), LCX_ERR_INVALID, "rank 4 outside");
    int few[2];
    CHECK_FAILS(lcx_mesh_group(&m, 0, LCX_GROUP_TP, few, 1, NULL, NULL), LCX_ERR_INVALID, "does not fit");
}

/* ---- TP slicing ------------------------------------------------------------------------------------------ */

static void expect_box(const lcx_tp_slice *s, uint64_t s0, uint64_t e0, uint64_t s1, uint64_t e1, const char *what) {
    int ok = s->box.start[0] == s0 && s->box.start[0] + s->box.shape[0] == e0;
    if (s->ndim > 1) ok = ok && s->box.start[1] == s1 && s->box.start[1] + s->box.shape[1] == e1;
    char buf[96];
    CHECK_MSG(ok, "%s: got %s", what, lcx_box_str(&s->box, buf, sizeof buf));
}

/* Hand-derived from docs/formats.md with nh=8, ng=2, d=4, H=16, F=24, V=37, T=4. */
static void test_tp_hand(void) {
    lcx_tp_dims m = {.nh = 8, .ng = 2, .d = 4, .H = 16, .F = 24, .V = 37};
    lcx_tp_slice s;
    CHECK_OK(lcx_tp_slice_of(LCX_W_Q_PROJ, &m, 4, 1, &s));
    expect_box(&s, 8, 16, 0, 16, "q_proj r1"); /* heads 2,3 -> rows 8..16 */
    CHECK(s.replicas == 1 && s.local[0] == 8 && s.local[1] == 16);
    CHECK_OK(lcx_tp_slice_of(LCX_W_Q_BIAS, &m, 4, 3, &s));
    expect_box(&s, 24, 32, 0, 0, "q_bias r3");
    CHECK_OK(lcx_tp_slice_of(LCX_W_K_PROJ, &m, 4, 1, &s)); /* ng=2 < T=4: rank 1 holds kv head floor(1*2/4)=0 */
    expect_box(&s, 0, 4, 0, 16, "k_proj r1");
    CHECK(s.replicas == 2 && s.replica_index == 1);
    CHECK_OK(lcx_tp_slice_of(LCX_W_V_BIAS, &m, 4, 2, &s)); /* kv head floor(2*2/4)=1 */
    expect_box(&s, 4, 8, 0, 0, "v_bias r2");
    CHECK(s.replicas == 2 && s.replica_index == 0);
    CHECK_OK(lcx_tp_slice_of(LCX_W_O_PROJ, &m, 4, 3, &s));
    expect_box(&s, 0, 16, 24, 32, "o_proj r3");
    CHECK_OK(lcx_tp_slice_of(LCX_W_GATE_PROJ, &m, 4, 2, &s));
    expect_box(&s, 12, 18, 0, 16, "gate r2");
    CHECK_OK(lcx_tp_slice_of(LCX_W_UP_BIAS, &m, 4, 1, &s));
    expect_box(&s, 6, 12, 0, 0, "up_bias r1");
    CHECK_OK(lcx_tp_slice_of(LCX_W_DOWN_PROJ, &m, 4, 2, &s));
    expect_box(&s, 0, 16, 12, 18, "down r2");
    CHECK_OK(lcx_tp_slice_of(LCX_W_EMBED, &m, 4, 3, &s)); /* Vp=40, 10 rows each; rank 3: 30..40, stored 30..37 */
    expect_box(&s, 30, 37, 0, 16, "embed r3");
    CHECK(s.local[0] == 10 && s.local[1] == 16);
    CHECK_OK(lcx_tp_slice_of(LCX_W_LM_HEAD, &m, 4, 0, &s));
    expect_box(&s, 0, 10, 0, 16, "lm_head r0");
    CHECK_OK(lcx_tp_slice_of(LCX_W_NORM, &m, 4, 2, &s));
    expect_box(&s, 0, 16, 0, 0, "norm r2");
    CHECK(s.replicas == 4 && s.replica_index == 2);
    CHECK_OK(lcx_tp_slice_of(LCX_W_K_NORM, &m, 4, 0, &s));
    expect_box(&s, 0, 4, 0, 0, "k_norm r0");
    CHECK_OK(lcx_tp_slice_of(LCX_W_O_BIAS, &m, 4, 1, &s));
    CHECK(s.replicas == 4 && s.box.shape[0] == 16);
    /* A vocab so small that the last rank stores nothing: V=3, T=4 -> Vp=4, rank 3 holds padding only. */
    lcx_tp_dims tiny = {.nh = 4, .ng = 4, .d = 2, .H = 8, .F = 8, .V = 3};
    CHECK_OK(lcx_tp_slice_of(LCX_W_EMBED, &tiny, 4, 3, &s));
    CHECK(s.box.start[0] == 3 && s.box.shape[0] == 0 && s.local[0] == 1);
    int64_t vp;
    CHECK_OK(lcx_vocab_padded(37, 4, &vp));
    CHECK(vp == 40);
    CHECK_OK(lcx_vocab_padded(40, 4, &vp));
    CHECK(vp == 40);
    CHECK(lcx_tp_kv_replicated(&m, 4) && !lcx_tp_kv_replicated(&m, 2));
}

static const lcx_weight_kind all_kinds[] = {
    LCX_W_Q_PROJ, LCX_W_Q_BIAS, LCX_W_K_PROJ, LCX_W_K_BIAS, LCX_W_V_PROJ, LCX_W_V_BIAS, LCX_W_O_PROJ,
    LCX_W_O_BIAS, LCX_W_GATE_PROJ, LCX_W_GATE_BIAS, LCX_W_UP_PROJ, LCX_W_UP_BIAS, LCX_W_DOWN_PROJ,
    LCX_W_DOWN_BIAS, LCX_W_EMBED, LCX_W_LM_HEAD, LCX_W_NORM, LCX_W_Q_NORM, LCX_W_K_NORM};

/* Every rank's box, counted per element: each element covered exactly `replicas` times, the same box for every
 * replica, and the local buffers of vocab tensors add up to Vp. */
static void test_tp_cover(const lcx_tp_dims *m, int T) {
    for (size_t ki = 0; ki < sizeof all_kinds / sizeof all_kinds[0]; ki++) {
        lcx_weight_kind k = all_kinds[ki];
        lcx_tp_slice s0;
        CHECK_OK(lcx_tp_slice_of(k, m, T, 0, &s0));
        uint64_t numel;
        CHECK_OK(lcx_box_volume(&s0.global, &numel));
        uint8_t *count = calloc(numel ? numel : 1, 1);
        uint64_t local_rows = 0;
        int replicas = s0.replicas;
        for (int r = 0; r < T; r++) {
            lcx_tp_slice s;
            CHECK_OK(lcx_tp_slice_of(k, m, T, r, &s));
            CHECK(lcx_box_inside(&s.box, s.global.ndim, s.global.shape));
            CHECK(s.replicas == replicas && s.replica_index >= 0 && s.replica_index < s.replicas);
            local_rows += s.local[0];
            uint64_t cols = s.ndim == 2 ? s.global.shape[1] : 1;
            for (uint64_t i = s.box.start[0]; i < s.box.start[0] + s.box.shape[0]; i++) {
                if (s.ndim == 1) { count[i]++; continue; }
                for (uint64_t j = s.box.start[1]; j < s.box.start[1] + s.box.shape[1]; j++) count[i * cols + j]++;
            }
        }
        int ok = 1;
        for (uint64_t i = 0; i < numel; i++) ok = ok && count[i] == replicas;
        CHECK_MSG(ok, "kind %s T=%d: not covered exactly %d times", lcx_weight_kind_name(k), T, replicas);
        if (k == LCX_W_EMBED || k == LCX_W_LM_HEAD) {
            int64_t vp;
            CHECK_OK(lcx_vocab_padded(m->V, T, &vp));
            CHECK(local_rows == (uint64_t)vp && vp % T == 0 && vp >= m->V && vp - m->V < T);
        }
        if (k == LCX_W_K_PROJ) CHECK(replicas == (m->ng < T ? T / m->ng : 1));
        if (k == LCX_W_NORM || k == LCX_W_O_BIAS) CHECK(replicas == T);
        free(count);
    }
    /* GQA consistency: every q head on rank r finds its kv head (h / (nh/ng)) inside the rank's k rows, and
     * o_proj columns match the q rows. */
    for (int r = 0; r < T; r++) {
        lcx_tp_slice q, kk, o;
        CHECK_OK(lcx_tp_slice_of(LCX_W_Q_PROJ, m, T, r, &q));
        CHECK_OK(lcx_tp_slice_of(LCX_W_K_PROJ, m, T, r, &kk));
        CHECK_OK(lcx_tp_slice_of(LCX_W_O_PROJ, m, T, r, &o));
        CHECK(o.box.start[1] == q.box.start[0] && o.box.shape[1] == q.box.shape[0]);
        for (uint64_t h = q.box.start[0] / m->d; h < (q.box.start[0] + q.box.shape[0]) / m->d; h++) {
            uint64_t g = h / (uint64_t)(m->nh / m->ng);
            CHECK_MSG(g * m->d >= kk.box.start[0] && (g + 1) * m->d <= kk.box.start[0] + kk.box.shape[0],
                      "T=%d rank %d q head %llu needs kv head %llu", T, r, (unsigned long long)h,
                      (unsigned long long)g);
        }
    }
}

static void test_tp_errors(void) {
    lcx_tp_slice s;
    lcx_tp_dims a = {.nh = 6, .ng = 6, .d = 4, .H = 24, .F = 32, .V = 50};
    CHECK_FAILS(lcx_tp_slice_of(LCX_W_Q_PROJ, &a, 4, 0, &s), LCX_ERR_INVALID, "tp=4 does not divide the 6 attention");
    lcx_tp_dims b = {.nh = 8, .ng = 8, .d = 4, .H = 32, .F = 30, .V = 50};
    CHECK_FAILS(lcx_tp_slice_of(LCX_W_NORM, &b, 4, 0, &s), LCX_ERR_INVALID, "intermediate_size 30");
    lcx_tp_dims c = {.nh = 12, .ng = 3, .d = 4, .H = 48, .F = 32, .V = 50};
    CHECK_FAILS(lcx_tp_check(&c, 4), LCX_ERR_INVALID, "tp=4 is larger than the 3 kv heads");
    lcx_tp_dims e = {.nh = 12, .ng = 6, .d = 4, .H = 48, .F = 32, .V = 50};
    CHECK_FAILS(lcx_tp_check(&e, 4), LCX_ERR_INVALID, "does not divide the 6 kv heads");
    lcx_tp_dims f = {.nh = 8, .ng = 3, .d = 4, .H = 32, .F = 32, .V = 50};
    CHECK_FAILS(lcx_tp_check(&f, 1), LCX_ERR_INVALID, "not divisible by kv heads 3");
    lcx_tp_dims g = {.nh = 8, .ng = 8, .d = 4, .H = 32, .F = 32, .V = 0};
    CHECK_FAILS(lcx_tp_check(&g, 1), LCX_ERR_INVALID, "vocab 0");
    lcx_tp_dims h = {.nh = 8, .ng = 8, .d = 4, .H = INT64_MAX / 4, .F = 32, .V = 50};
    CHECK_FAILS(lcx_tp_check(&h, 1), LCX_ERR_INVALID, "overflow");
    CHECK_FAILS(lcx_tp_slice_of(LCX_W_NORM, &b, 2, 2, &s), LCX_ERR_INVALID, "tp rank 2 outside tp=2");
    CHECK_FAILS(lcx_tp_slice_of(LCX_W_UNKNOWN, &b, 2, 0, &s), LCX_ERR_INVALID, "no tensor-parallel rule");
    CHECK_FAILS(lcx_tp_check(&b, 0), LCX_ERR_INVALID, "tensor parallel size 0");
}

static void test_names(void) {
    const struct { const char *name; lcx_weight_kind k; } cases[] = {
        {"model.embed_tokens.weight", LCX_W_EMBED},
        {"lm_head.weight", LCX_W_LM_HEAD},
        {"model.norm.weight", LCX_W_NORM},
        {"model.layers.0.input_layernorm.weight", LCX_W_NORM},
        {"model.layers.11.post_attention_layernorm.weight", LCX_W_NORM},
        {"model.layers.3.self_attn.q_proj.weight", LCX_W_Q_PROJ},
        {"model.layers.3.self_attn.k_proj.bias", LCX_W_K_BIAS},
        {"model.layers.3.self_attn.v_proj.weight", LCX_W_V_PROJ},
        {"model.layers.3.self_attn.o_proj.weight", LCX_W_O_PROJ},
        {"model.layers.3.self_attn.o_proj.bias", LCX_W_O_BIAS},
        {"model.layers.3.self_attn.q_norm.weight", LCX_W_Q_NORM},
        {"model.layers.3.self_attn.k_norm.weight", LCX_W_K_NORM},
        {"model.layers.3.mlp.gate_proj.weight", LCX_W_GATE_PROJ},
        {"model.layers.3.mlp.up_proj.bias", LCX_W_UP_BIAS},
        {"model.layers.3.mlp.down_proj.weight", LCX_W_DOWN_PROJ},
        {"model.layers.3.mlp.down_proj.bias", LCX_W_DOWN_BIAS},
        {"model.layers.3.mlp.fused_proj.weight", LCX_W_UNKNOWN},
        {"xlm_head.weight", LCX_W_UNKNOWN},
        {"", LCX_W_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(lcx_weight_kind_of_name(cases[i].name) == cases[i].k, "%s", cases[i].name);
}

/* ---- CP -------------------------------------------------------------------------------------------------- */

static void test_cp(void) {
    /* Hand-derived: S=16, CP=2 -> chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2. */
    int64_t pos[64];
    CHECK_OK(lcx_cp_positions(16, 2, 0, pos));
    const int64_t r0[8] = {0, 1, 2, 3, 12, 13, 14, 15}, r1[8] = {4, 5, 6, 7, 8, 9, 10, 11};
    CHECK(memcmp(pos, r0, sizeof r0) == 0);
    CHECK_OK(lcx_cp_positions(16, 2, 1, pos));
    CHECK(memcmp(pos, r1, sizeof r1) == 0);
    for (int cp = 1; cp <= 4; cp++) {
        for (int64_t S = 2 * cp; S <= 16 * cp; S += 2 * cp) {
            int owned[64] = {0};
            int64_t work0 = -1;
            for (int c = 0; c < cp; c++) {
                lcx_cp_split sp;
                CHECK_OK(lcx_cp_split_of(S, cp, c, &sp));
                CHECK(sp.chunk[0] == c && sp.chunk[1] == 2 * cp - 1 - c && sp.chunk_len * 2 * cp == S);
                CHECK_OK(lcx_cp_positions(S, cp, c, pos));
                int64_t work = 0; /* causal attention work of the rank: sum of (pos + 1) */
                for (int64_t i = 0; i < S / cp; i++) {
                    CHECK(pos[i] >= 0 && pos[i] < S);
                    if (pos[i] >= 0 && pos[i] < S) owned[pos[i]]++;
                    if (i > 0 && i != S / cp / 2) CHECK(pos[i] == pos[i - 1] + 1); /* two contiguous runs */
                    work += pos[i] + 1;
                }
                if (c == 0) work0 = work;
                CHECK(work == work0); /* load balanced */
            }
            for (int64_t p = 0; p < S; p++) CHECK(owned[p] == 1);
        }
    }
    lcx_cp_split sp;
    CHECK_FAILS(lcx_cp_split_of(10, 2, 0, &sp), LCX_ERR_INVALID, "sequence length 10 is not a positive multiple of 2*cp = 4");
    CHECK_FAILS(lcx_cp_split_of(0, 1, 0, &sp), LCX_ERR_INVALID, "sequence length 0");
    CHECK_FAILS(lcx_cp_split_of(8, 2, 2, &sp), LCX_ERR_INVALID, "cp rank 2 outside cp=2");
    CHECK_FAILS(lcx_cp_positions(12, 0, 0, pos), LCX_ERR_INVALID, "context parallel size 0");
}

/* ---- box copy vs naive ----------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static lcx_box random_box(int ndim, const uint64_t *dims) {
    lcx_box b;
    memset(&b, 0, sizeof b);
    b.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        b.start[i] = rnd_below(dims[i]);
        b.shape[i] = 1 + rnd_below(dims[i] - b.start[i]);
        if (rnd_below(20) == 0) b.shape[i] = 0; /* sometimes empty */
    }
    return b;
}

/* Linear index of global point x in box b (x inside b). */
static uint64_t local_index(const lcx_box *b, const uint64_t *x) {
    uint64_t idx = 0;
    for (int i = 0; i < b->ndim; i++) idx = idx * b->shape[i] + (x[i] - b->start[i]);
    return idx;
}

static void test_box_copy(void) {
    for (int iter = 0; iter < 3000; iter++) {
        int ndim = 1 + (int)rnd_below(4);
        uint64_t dims[4];
        for (int i = 0; i < ndim; i++) dims[i] = 1 + rnd_below(7);
        size_t es = (size_t[]){1, 2, 3, 4, 8}[rnd_below(5)];
        lcx_box sb = random_box(ndim, dims), db = random_box(ndim, dims);
        uint64_t sv, dv;
        CHECK_OK(lcx_box_volume(&sb, &sv));
        CHECK_OK(lcx_box_volume(&db, &dv));
        uint8_t *src = malloc(sv * es + 1), *dst = malloc(dv * es + 1), *ref = malloc(dv * es + 1);
        for (uint64_t i = 0; i < sv * es; i++) src[i] = (uint8_t)rnd();
        memset(dst, 0xAB, dv * es + 1);
        memset(ref, 0xAB, dv * es + 1);
        /* Naive: walk every element of the destination box, copy it when the source box has it. */
        uint64_t nref = 0, x[4];
        for (uint64_t li = 0; li < dv; li++) {
            uint64_t rem = li;
            for (int i = ndim - 1; i >= 0; i--) {
                x[i] = db.start[i] + rem % db.shape[i];
                rem /= db.shape[i];
            }
            int in = 1;
            for (int i = 0; i < ndim; i++) in = in && x[i] >= sb.start[i] && x[i] < sb.start[i] + sb.shape[i];
            if (!in) continue;
            memcpy(ref + local_index(&db, x) * es, src + local_index(&sb, x) * es, es);
            nref++;
        }
        uint64_t copied = 99;
        CHECK_OK(lcx_box_copy(&sb, src, &db, dst, es, &copied));
        CHECK(copied == nref);
        CHECK_MSG(memcmp(dst, ref, dv * es + 1) == 0, "iter %d ndim %d es %zu", iter, ndim, es);
        /* The intersection is symmetric and inside both. */
        lcx_box i1, i2;
        int n1 = lcx_box_intersect(&sb, &db, &i1), n2 = lcx_box_intersect(&db, &sb, &i2);
        CHECK(n1 == n2 && (n1 == 0) == (nref == 0));
        if (n1) CHECK(memcmp(&i1, &i2, sizeof i1) == 0);
        free(src);
        free(dst);
        free(ref);
    }
    /* Scalars, dim mismatch, element size 0. */
    lcx_box s0 = {.ndim = 0}, b1 = {.ndim = 1, .start = {0}, .shape = {2}};
    uint32_t a = 0xDEADBEEF, b = 0;
    uint64_t copied = 0;
    CHECK_OK(lcx_box_copy(&s0, &a, &s0, &b, 4, &copied));
    CHECK(b == 0xDEADBEEF && copied == 1);
    CHECK_FAILS(lcx_box_copy(&s0, &a, &b1, &b, 4, NULL), LCX_ERR_INVALID, "source has 0 dims, destination 1");
    CHECK_FAILS(lcx_box_copy(&b1, &a, &b1, &b, 0, NULL), LCX_ERR_INVALID, "element size 0");
    /* Volume overflow and the inside test near UINT64_MAX. */
    lcx_box huge = {.ndim = 2, .start = {0, 0}, .shape = {UINT64_MAX / 2, 4}};
    uint64_t v;
    CHECK_FAILS(lcx_box_volume(&huge, &v), LCX_ERR_INVALID, "volume overflows");
    lcx_box wrap = {.ndim = 1, .start = {UINT64_MAX - 1}, .shape = {4}};
    uint64_t dim = UINT64_MAX;
    CHECK(!lcx_box_inside(&wrap, 1, &dim));
    CHECK_FAILS(lcx_box_volume(&wrap, &v), LCX_ERR_INVALID, "start + shape overflows");
    char buf[64];
    lcx_box p = {.ndim = 2, .start = {2, 0}, .shape = {3, 5}};
    CHECK(strcmp(lcx_box_str(&p, buf, sizeof buf), "[2:5, 0:5]") == 0);
}

int main(void) {
    test_mesh();
    test_tp_hand();
    const lcx_tp_dims models[] = {
        {.nh = 8, .ng = 2, .d = 4, .H = 16, .F = 24, .V = 37},  /* GQA, vocab not divisible */
        {.nh = 8, .ng = 8, .d = 2, .H = 16, .F = 16, .V = 40},  /* MHA */
        {.nh = 4, .ng = 1, .d = 3, .H = 12, .F = 8, .V = 5},    /* MQA, vocab smaller than some T*per */
        {.nh = 16, .ng = 4, .d = 2, .H = 8, .F = 32, .V = 3},   /* tiny vocab: some ranks store nothing */
    };
    const int Ts[] = {1, 2, 4, 8};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (size_t j = 0; j < sizeof Ts / sizeof Ts[0]; j++)
            if (models[i].nh % Ts[j] == 0 && models[i].F % Ts[j] == 0) test_tp_cover(&models[i], Ts[j]);
    test_tp_errors();
    test_names();
    test_cp();
    test_box_copy();
    return test_summary("test_layout");
}
