/* cp_ring and cp_perm: the context-parallel ring schedule and token permutation.
 * - Hand-checked steps for cp = 2 and 4 (the examples of docs/parallel.md).
 * - Property test, cp = 1..16 at several chunk lengths: over all ranks and steps every causal (query, key) pair
 *   is computed exactly once, no task shows a key after its query, causal tasks have contiguous positions, every
 *   rank does the same work, and the messages (simulated sends) bring every block, and in the backward every
 *   dK/dV accumulator, where the schedule says, ending at its owner.
 * - Numerical check in one process: cp = 1..4 ranks simulated with the CPU backend's attention op, partials
 *   merged by LSE, gathered back to global order, against one full causal attention over the whole sequence
 *   (GQA 4:1), forward and backward (dQ, dK, dV through the reverse ring), with K/V and dK/dV really copied
 *   through packed messages whose size is counted.
 * - Message bytes = 2 x kv_heads x head_dim x block length x dtype size, and the permutation helpers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_common.h"
#include "src/core/cp_perm.h"
#include "src/core/cp_ring.h"
#include "src/core/layout.h"
#include "worst_of.h"

_Static_assert((int)LCX_CP_CAUSAL == (int)LCX_MASK_CAUSAL, "cp task masks cast to lcx_attn_mask");
_Static_assert((int)LCX_CP_FULL == (int)LCX_MASK_FULL, "cp task masks cast to lcx_attn_mask");

static int same_task(const lcx_cp_task *t, int64_t q_row, int64_t n_q, int64_t k_row, int64_t n_k, int64_t q_off,
                     int64_t k_off, lcx_cp_mask mask) {
    return t->q_row == q_row && t->n_q == n_q && t->k_row == k_row && t->n_k == n_k && t->q_offset == q_off &&
           t->k_offset == k_off && t->mask == mask;
}

/* ---- hand-checked examples (docs/parallel.md) -------------------------------------------------------------- */

static void test_examples(void) {
    lcx_cp_step st;
    /* cp = 2, chunk_len 10 (L = 40): rank 0 holds chunks 0, 3 (positions 0..9, 30..39); rank 1 chunks 1, 2. */
    CHECK_OK(lcx_cp_ring_step(40, 2, 0, 0, LCX_CP_FORWARD, &st));
    CHECK(st.src == 0 && st.send_to == 1 && st.recv_from == 1 && st.send == LCX_CP_SEND_KV && st.n_tasks == 3);
    CHECK(same_task(&st.task[0], 0, 10, 0, 10, 0, 0, LCX_CP_CAUSAL));
    CHECK(same_task(&st.task[1], 10, 10, 0, 10, 30, 0, LCX_CP_FULL));
    CHECK(same_task(&st.task[2], 10, 10, 10, 10, 30, 30, LCX_CP_CAUSAL));
    CHECK_OK(lcx_cp_ring_step(40, 2, 0, 1, LCX_CP_FORWARD, &st)); /* block of rank 1 > 0: late queries, all keys */
    CHECK(st.src == 1 && st.send == LCX_CP_SEND_NONE && st.n_tasks == 1);
    CHECK(same_task(&st.task[0], 10, 10, 0, 20, 30, 10, LCX_CP_FULL));
    CHECK_OK(lcx_cp_ring_step(40, 2, 1, 1, LCX_CP_FORWARD, &st)); /* block of rank 0 < 1: all queries, early keys */
    CHECK(st.src == 0 && st.n_tasks == 1);
    CHECK(same_task(&st.task[0], 0, 20, 0, 10, 10, 0, LCX_CP_FULL));
    CHECK_OK(lcx_cp_ring_step(40, 2, 1, 0, LCX_CP_BACKWARD, &st));
    CHECK(st.src == 1 && st.send_to == 0 && st.recv_from == 0 && st.send == LCX_CP_SEND_KV_DKV);
    CHECK_OK(lcx_cp_ring_step(40, 2, 1, 1, LCX_CP_BACKWARD, &st));
    CHECK(st.src == 0 && st.send_to == 0 && st.send == LCX_CP_SEND_DKV); /* rank 0's gradient goes home */

    /* cp = 4, chunk_len 1 (L = 8): rank 1 holds chunks 1, 6. Forward blocks: 1, 0, 3, 2; backward: 1, 2, 3, 0. */
    const int fwd_src[4] = {1, 0, 3, 2}, bwd_src[4] = {1, 2, 3, 0};
    for (int s = 0; s < 4; s++) {
        CHECK_OK(lcx_cp_ring_step(8, 4, 1, s, LCX_CP_FORWARD, &st));
        CHECK(st.src == fwd_src[s] && st.send_to == 2 && st.recv_from == 0);
        CHECK(st.send == (s < 3 ? LCX_CP_SEND_KV : LCX_CP_SEND_NONE));
        CHECK_OK(lcx_cp_ring_step(8, 4, 1, s, LCX_CP_BACKWARD, &st));
        CHECK(st.src == bwd_src[s] && st.send_to == 0 && st.recv_from == 2);
        CHECK(st.send == (s < 3 ? LCX_CP_SEND_KV_DKV : LCX_CP_SEND_DKV));
    }
    CHECK_OK(lcx_cp_ring_step(8, 4, 1, 1, LCX_CP_FORWARD, &st)); /* block 0 (chunks 0, 7): keys at position 0 */
    CHECK(st.n_tasks == 1 && same_task(&st.task[0], 0, 2, 0, 1, 1, 0, LCX_CP_FULL));
    CHECK_OK(lcx_cp_ring_step(8, 4, 1, 2, LCX_CP_FORWARD, &st)); /* block 3 (chunks 3, 4): query at position 6 */
    CHECK(st.n_tasks == 1 && same_task(&st.task[0], 1, 1, 0, 2, 6, 3, LCX_CP_FULL));

    /* cp = 1: the whole sequence, nothing sent */
    CHECK_OK(lcx_cp_ring_step(6, 1, 0, 0, LCX_CP_BACKWARD, &st));
    CHECK(st.src == 0 && st.send == LCX_CP_SEND_NONE && st.n_tasks == 3);

    CHECK_FAILS(lcx_cp_ring_step(10, 2, 0, 0, LCX_CP_FORWARD, &st), LCX_ERR_INVALID, "multiple of 2*cp");
    CHECK_FAILS(lcx_cp_ring_step(8, 2, 0, 2, LCX_CP_FORWARD, &st), LCX_ERR_INVALID, "ring step 2 outside 0..1");
    CHECK_FAILS(lcx_cp_ring_step(8, 2, 2, 0, LCX_CP_FORWARD, &st), LCX_ERR_INVALID, "cp rank 2 outside cp=2");
    lcx_cp_task t[LCX_CP_MAX_TASKS];
    int nt;
    CHECK_FAILS(lcx_cp_ring_tasks(8, 2, 0, -1, t, &nt), LCX_ERR_INVALID, "block of cp rank -1");
}

/* ---- property test ----------------------------------------------------------------------------------------- */

/* One schedule (cp, chunk length n) in direction dir: coverage, positions, equal work and message routing. */
static void check_schedule(int cp, int64_t n, lcx_cp_dir dir) {
    int64_t L = 2 * cp * n, nl = 2 * n;
    int *cover = calloc((size_t)(L * L), sizeof(int));
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)L); /* [rank][local row] global positions */
    for (int c = 0; c < cp; c++) CHECK_OK(lcx_cp_positions(L, cp, c, pos + c * nl));
    int *held = malloc(sizeof(int) * (size_t)cp), *next = malloc(sizeof(int) * (size_t)cp);
    int *seen = calloc((size_t)(cp * cp), sizeof(int)); /* [rank][block] steps that held it */
    int64_t area0 = -1, vis0 = -1;
    int bad_pos = 0, bad_future = 0, bad_route = 0;
    for (int c = 0; c < cp; c++) held[c] = c; /* step 0: the own block (and, backward, its zeroed dK/dV) */
    int64_t *area = calloc((size_t)cp, sizeof(int64_t)), *vis = calloc((size_t)cp, sizeof(int64_t));
    for (int s = 0; s < cp; s++) {
        for (int c = 0; c < cp; c++) next[c] = -1;
        for (int c = 0; c < cp; c++) {
            lcx_cp_step st;
            CHECK_OK(lcx_cp_ring_step(L, cp, c, s, dir, &st));
            if (st.src != held[c]) bad_route++;
            seen[c * cp + st.src]++;
            const int64_t *qp = pos + c * nl, *kp = pos + st.src * nl;
            for (int t = 0; t < st.n_tasks; t++) {
                const lcx_cp_task *k = &st.task[t];
                if (k->q_row < 0 || k->n_q <= 0 || k->q_row + k->n_q > nl || k->k_row < 0 || k->n_k <= 0 ||
                    k->k_row + k->n_k > nl || k->q_offset != qp[k->q_row] || k->k_offset != kp[k->k_row]) {
                    bad_pos++;
                    continue;
                }
                area[c] += k->n_q * k->n_k; /* what a tiled op computes, masked half of causal tiles included */
                for (int64_t i = 0; i < k->n_q; i++)
                    for (int64_t j = 0; j < k->n_k; j++) {
                        int64_t gq = qp[k->q_row + i], gk = kp[k->k_row + j];
                        /* the op sees positions q_offset + i, k_offset + j: exact for causal tasks */
                        if (k->mask == LCX_CP_CAUSAL && (gq != k->q_offset + i || gk != k->k_offset + j)) bad_pos++;
                        int visible = k->mask == LCX_CP_FULL || gk <= gq;
                        if (!visible) continue;
                        if (gk > gq) bad_future++;
                        cover[gq * L + gk]++;
                        vis[c]++;
                    }
            }
            /* the message after the step: the held block (and accumulator) moves to send_to */
            int want_send = cp == 1                  ? LCX_CP_SEND_NONE
                            : dir == LCX_CP_FORWARD ? (s + 1 < cp ? LCX_CP_SEND_KV : LCX_CP_SEND_NONE)
                                                    : (s + 1 < cp ? LCX_CP_SEND_KV_DKV : LCX_CP_SEND_DKV);
            if ((int)st.send != want_send) bad_route++;
            if (st.send != LCX_CP_SEND_NONE) {
                lcx_cp_step rs; /* the receiver expects it from us */
                CHECK_OK(lcx_cp_ring_step(L, cp, st.send_to, s, dir, &rs));
                if (rs.recv_from != c || next[st.send_to] != -1) bad_route++;
                next[st.send_to] = held[c];
            }
        }
        int sent = 0;
        for (int c = 0; c < cp; c++) sent += next[c] != -1;
        if (sent == cp) memcpy(held, next, sizeof(int) * (size_t)cp);
        else if (sent != 0) bad_route++; /* all ranks pass on together, or none */
    }
    /* backward: the last message brought every accumulator home; forward: nothing left to send */
    for (int c = 0; c < cp; c++)
        if (dir == LCX_CP_BACKWARD && held[c] != c) bad_route++;
    for (int i = 0; i < cp * cp; i++)
        if (seen[i] != 1) bad_route++; /* every rank meets every block once */
    int64_t bad_cover = 0;
    for (int64_t q = 0; q < L; q++)
        for (int64_t k = 0; k < L; k++) bad_cover += cover[q * L + k] != (k <= q ? 1 : 0);
    area0 = area[0], vis0 = vis[0];
    int unequal = 0;
    for (int c = 0; c < cp; c++) unequal += area[c] != area0 || vis[c] != vis0;
    /* per rank: own block 3 n^2 (two causal diagonal tiles, one full), each other block 2 n^2 */
    CHECK_MSG(bad_cover == 0 && bad_pos == 0 && bad_future == 0 && bad_route == 0 && unequal == 0 &&
                  area0 == 3 * n * n + (int64_t)(cp - 1) * 2 * n * n &&
                  vis0 == n * (n + 1) + n * n + (int64_t)(cp - 1) * 2 * n * n,
              "cp=%d n=%lld %s: cover errors %lld, bad positions %d, future keys %d, routing errors %d, unequal "
              "ranks %d, area %lld, visible %lld",
              cp, (long long)n, dir == LCX_CP_FORWARD ? "fwd" : "bwd", (long long)bad_cover, bad_pos, bad_future,
              bad_route, unequal, (long long)area0, (long long)vis0);
    free(cover); free(pos); free(held); free(next); free(seen); free(area); free(vis);
}

static void test_property(void) {
    const int64_t lens[] = {1, 2, 3, 7};
    for (int cp = 1; cp <= 16; cp++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            check_schedule(cp, lens[i], LCX_CP_FORWARD);
            check_schedule(cp, lens[i], LCX_CP_BACKWARD);
        }
}

/* ---- message bytes ----------------------------------------------------------------------------------------- */

static void test_bytes(void) {
    uint64_t b;
    /* Llama-3-8B-like: 8 KV heads (32 query heads), head_dim 128, 4096 local tokens, bf16 */
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, 8, 128, 4096, LCX_BF16, &b));
    CHECK(b == 2ull * 8 * 128 * 4096 * 2);
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, 8, 128, 4096, LCX_F32, &b));
    CHECK(b == 2ull * 8 * 128 * 4096 * 4);
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV_DKV, 8, 128, 4096, LCX_BF16, &b));
    CHECK(b == 2ull * 8 * 128 * 4096 * (2 + 4));
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_DKV, 8, 128, 4096, LCX_BF16, &b));
    CHECK(b == 2ull * 8 * 128 * 4096 * 4);
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_NONE, 8, 128, 4096, LCX_BF16, &b));
    CHECK(b == 0);
    CHECK_FAILS(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, 8, 128, 4096, LCX_F16, &b), LCX_ERR_INVALID,
                "float32 or bfloat16");
    CHECK_FAILS(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, -1, 128, 4096, LCX_F32, &b), LCX_ERR_INVALID, ">= 0");
    CHECK_FAILS(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, INT64_MAX, INT64_MAX, 4, LCX_F32, &b), LCX_ERR_INVALID,
                "overflows");
}

/* ---- permutation ------------------------------------------------------------------------------------------- */

static void test_perm(void) {
    for (int cp = 1; cp <= 5; cp++) {
        int64_t n = 3, L = 2 * cp * n, nl = 2 * n;
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)L), *tg = malloc(sizeof(int32_t) * (size_t)L);
        int32_t *ps = malloc(sizeof(int32_t) * (size_t)L), *back = malloc(sizeof(int32_t) * (size_t)L);
        for (int64_t i = 0; i < L; i++)
            ids[i] = (int32_t)(1000 + i), tg[i] = (int32_t)(1001 + i), ps[i] = (int32_t)(7 * i);
        memset(back, 0xff, sizeof(int32_t) * (size_t)L);
        int bad = 0;
        for (int c = 0; c < cp; c++) {
            int32_t il[64], tl[64], pl[64], pl0[64];
            int64_t want[64];
            CHECK_OK(lcx_cp_positions(L, cp, c, want));
            CHECK_OK(lcx_cp_local_batch(L, cp, c, ids, tg, ps, il, tl, pl));
            CHECK_OK(lcx_cp_local_batch(L, cp, c, ids, NULL, NULL, il, NULL, pl0));
            for (int64_t i = 0; i < nl; i++)
                bad += il[i] != ids[want[i]] || tl[i] != tg[want[i]] || pl[i] != ps[want[i]] || pl0[i] != want[i];
            CHECK_OK(lcx_cp_gather_rows(L, cp, c, il, back, sizeof(int32_t)));
        }
        for (int64_t i = 0; i < L; i++) bad += back[i] != ids[i]; /* every rank's rows gathered: the identity */
        CHECK_MSG(bad == 0, "cp=%d: %d permutation errors", cp, bad);
        free(ids); free(tg); free(ps); free(back);
    }
    char g[13] = "abcdefghijkl", l[6];
    CHECK_OK(lcx_cp_scatter_rows(6, 3, 1, g, l, 2)); /* 6 chunks of 2 bytes; rank 1: chunks 1 and 4 */
    CHECK(memcmp(l, "cdij", 4) == 0);
    CHECK_FAILS(lcx_cp_scatter_rows(6, 2, 0, g, l, 2), LCX_ERR_INVALID, "multiple of 2*cp");
    CHECK_FAILS(lcx_cp_scatter_rows(6, 3, 0, g, l, 0), LCX_ERR_INVALID, "0 bytes");
}

/* ---- numerical check: simulated ranks with the real attention op -------------------------------------------- */

static lcx_exec *X;

static lcx_status run_op(lcx_op op, const void *args) {
    LCX_TRY(lcx_exec_reserve(X, lcx_exec_workspace(X, op, args)));
    return op_call(X, op, args);
}

/* max |got - want| / max |want| */
static double scaled_err(const float *got, const float *want, int64_t n) {
    double e = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        e = worst_of(e, d);
    }
    return e / m;
}

static double worst_o = 0, worst_lse = 0, worst_grad = 0;

static void check_ring_numeric(int cp, int64_t n) {
    const int64_t H = 8, G = 2, hd = 16, L = 2 * cp * n, nl = 2 * n;
    const int64_t qe = H * hd, ke = G * hd; /* elements per token */
    const float scale = (float)(1.0 / sqrt((double)hd));
    float *q = rand_f32(L * qe, -1.5, 1.5), *k = rand_f32(L * ke, -1.5, 1.5), *v = rand_f32(L * ke, -1, 1);
    float *go = rand_f32(L * qe, -1, 1);

    /* reference: one causal attention over the whole sequence */
    float *o_ref = zeros_f32(L * qe), *lse_ref = zeros_f32(L * H);
    float *dq_ref = zeros_f32(L * qe), *dk_ref = zeros_f32(L * ke), *dv_ref = zeros_f32(L * ke);
    lcx_attn_args full = {.dt = LCX_F32, .n_q = L, .n_k = L, .n_heads = H, .n_kv_heads = G, .head_dim = hd,
                          .mask = LCX_MASK_CAUSAL, .scale = scale, .q = q, .k = k, .v = v, .o = o_ref,
                          .lse = lse_ref, .dout = go, .dq = dq_ref, .dk = dk_ref, .dv = dv_ref};
    CHECK_OK(run_op(LCX_OP_ATTENTION_FWD, &full));
    CHECK_OK(run_op(LCX_OP_ATTENTION_BWD, &full));

    /* every rank's local tensors, in local order */
    float **ql = calloc((size_t)cp, sizeof(float *)), **gol = calloc((size_t)cp, sizeof(float *));
    float **ol = calloc((size_t)cp, sizeof(float *)), **lsel = calloc((size_t)cp, sizeof(float *));
    float **dql = calloc((size_t)cp, sizeof(float *));
    char **held = calloc((size_t)cp, sizeof(char *)), **inbox = calloc((size_t)cp, sizeof(char *));
    const size_t kv_bytes = (size_t)(nl * ke) * sizeof(float);   /* one of K, V for a block (activations f32) */
    const size_t msg_cap = 4 * kv_bytes;                         /* K | V | dK | dV packed */
    for (int c = 0; c < cp; c++) {
        ql[c] = zeros_f32(nl * qe), gol[c] = zeros_f32(nl * qe), ol[c] = zeros_f32(nl * qe);
        lsel[c] = zeros_f32(nl * H), dql[c] = zeros_f32(nl * qe);
        held[c] = calloc(1, msg_cap), inbox[c] = calloc(1, msg_cap);
        CHECK_OK(lcx_cp_scatter_rows(L, cp, c, q, ql[c], (size_t)qe * sizeof(float)));
        CHECK_OK(lcx_cp_scatter_rows(L, cp, c, go, gol[c], (size_t)qe * sizeof(float)));
        for (int64_t i = 0; i < nl * H; i++) lsel[c][i] = -INFINITY; /* empty accumulator: O = 0, LSE = -inf */
    }
    float *op = zeros_f32(nl * qe), *lp = zeros_f32(nl * H);
    uint64_t want_kv, want_kvd, want_d;
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, G, hd, nl, LCX_F32, &want_kv));
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV_DKV, G, hd, nl, LCX_F32, &want_kvd));
    CHECK_OK(lcx_cp_ring_msg_bytes(LCX_CP_SEND_DKV, G, hd, nl, LCX_F32, &want_d));
    CHECK(want_kv == 2 * (uint64_t)G * hd * nl * 4); /* the model's KV heads, never the H query heads */
    int bad_bytes = 0;

    /* forward ring: K | V packed in the held buffer, passed on after each step */
    for (int c = 0; c < cp; c++) {
        CHECK_OK(lcx_cp_scatter_rows(L, cp, c, k, held[c], (size_t)ke * sizeof(float)));
        CHECK_OK(lcx_cp_scatter_rows(L, cp, c, v, held[c] + kv_bytes, (size_t)ke * sizeof(float)));
    }
    for (int s = 0; s < cp; s++) {
        int any_send = 0;
        for (int c = 0; c < cp; c++) {
            lcx_cp_step st;
            CHECK_OK(lcx_cp_ring_step(L, cp, c, s, LCX_CP_FORWARD, &st));
            const float *kb = (const float *)held[c], *vb = (const float *)(held[c] + kv_bytes);
            for (int t = 0; t < st.n_tasks; t++) {
                const lcx_cp_task *tk = &st.task[t];
                lcx_attn_args a = {.dt = LCX_F32, .n_q = tk->n_q, .n_k = tk->n_k, .n_heads = H, .n_kv_heads = G,
                                   .head_dim = hd, .q_offset = tk->q_offset, .k_offset = tk->k_offset,
                                   .mask = (lcx_attn_mask)tk->mask, .scale = scale, .q = ql[c] + tk->q_row * qe,
                                   .k = kb + tk->k_row * ke, .v = vb + tk->k_row * ke, .o = op, .lse = lp};
                CHECK_OK(run_op(LCX_OP_ATTENTION_FWD, &a));
                lcx_attn_merge_args m = {.dt = LCX_F32, .n_rows = tk->n_q, .n_heads = H, .head_dim = hd,
                                         .o_acc = ol[c] + tk->q_row * qe, .lse_acc = lsel[c] + tk->q_row * H,
                                         .o_part = op, .lse_part = lp};
                CHECK_OK(run_op(LCX_OP_ATTENTION_MERGE, &m));
            }
            if (st.send == LCX_CP_SEND_KV) { /* K and V, one message */
                size_t bytes = 2 * kv_bytes;
                memcpy(inbox[st.send_to], held[c], bytes);
                bad_bytes += bytes != want_kv;
                any_send = 1;
            }
        }
        if (any_send)
            for (int c = 0; c < cp; c++) { char *t = held[c]; held[c] = inbox[c]; inbox[c] = t; }
    }
    float *o_got = zeros_f32(L * qe), *lse_got = zeros_f32(L * H);
    for (int c = 0; c < cp; c++) {
        CHECK_OK(lcx_cp_gather_rows(L, cp, c, ol[c], o_got, (size_t)qe * sizeof(float)));
        CHECK_OK(lcx_cp_gather_rows(L, cp, c, lsel[c], lse_got, (size_t)H * sizeof(float)));
    }
    double eo = scaled_err(o_got, o_ref, L * qe), el = scaled_err(lse_got, lse_ref, L * H);

    /* backward ring, reverse direction: K | V | dK | dV packed; the accumulators start at zero on their owners */
    for (int c = 0; c < cp; c++) {
        memset(held[c], 0, msg_cap);
        CHECK_OK(lcx_cp_scatter_rows(L, cp, c, k, held[c], (size_t)ke * sizeof(float)));
        CHECK_OK(lcx_cp_scatter_rows(L, cp, c, v, held[c] + kv_bytes, (size_t)ke * sizeof(float)));
    }
    for (int s = 0; s < cp; s++) {
        int any_send = 0;
        for (int c = 0; c < cp; c++) {
            lcx_cp_step st;
            CHECK_OK(lcx_cp_ring_step(L, cp, c, s, LCX_CP_BACKWARD, &st));
            const float *kb = (const float *)held[c], *vb = (const float *)(held[c] + kv_bytes);
            float *dkb = (float *)(held[c] + 2 * kv_bytes), *dvb = (float *)(held[c] + 3 * kv_bytes);
            for (int t = 0; t < st.n_tasks; t++) {
                const lcx_cp_task *tk = &st.task[t];
                lcx_attn_args a = {.dt = LCX_F32, .n_q = tk->n_q, .n_k = tk->n_k, .n_heads = H, .n_kv_heads = G,
                                   .head_dim = hd, .q_offset = tk->q_offset, .k_offset = tk->k_offset,
                                   .mask = (lcx_attn_mask)tk->mask, .scale = scale, .q = ql[c] + tk->q_row * qe,
                                   .k = kb + tk->k_row * ke, .v = vb + tk->k_row * ke,
                                   .o = ol[c] + tk->q_row * qe, .lse = lsel[c] + tk->q_row * H,
                                   .dout = gol[c] + tk->q_row * qe, .dq = dql[c] + tk->q_row * qe,
                                   .dk = dkb + tk->k_row * ke, .dv = dvb + tk->k_row * ke};
                CHECK_OK(run_op(LCX_OP_ATTENTION_BWD, &a));
            }
            if (st.send == LCX_CP_SEND_KV_DKV) { /* K, V, dK, dV in one message */
                memcpy(inbox[st.send_to], held[c], 4 * kv_bytes);
                bad_bytes += 4 * kv_bytes != want_kvd;
                any_send = 1;
            } else if (st.send == LCX_CP_SEND_DKV) { /* only the gradients go home */
                memcpy(inbox[st.send_to] + 2 * kv_bytes, held[c] + 2 * kv_bytes, 2 * kv_bytes);
                bad_bytes += 2 * kv_bytes != want_d;
                any_send = 1;
            }
        }
        if (any_send)
            for (int c = 0; c < cp; c++) { char *t = held[c]; held[c] = inbox[c]; inbox[c] = t; }
    }
    float *dq_got = zeros_f32(L * qe), *dk_got = zeros_f32(L * ke), *dv_got = zeros_f32(L * ke);
    for (int c = 0; c < cp; c++) { /* each rank's own K/V gradient, now home */
        CHECK_OK(lcx_cp_gather_rows(L, cp, c, dql[c], dq_got, (size_t)qe * sizeof(float)));
        CHECK_OK(lcx_cp_gather_rows(L, cp, c, held[c] + 2 * kv_bytes, dk_got, (size_t)ke * sizeof(float)));
        CHECK_OK(lcx_cp_gather_rows(L, cp, c, held[c] + 3 * kv_bytes, dv_got, (size_t)ke * sizeof(float)));
    }
    double eg = worst_of(scaled_err(dq_got, dq_ref, L * qe),
                         worst_of(scaled_err(dk_got, dk_ref, L * ke), scaled_err(dv_got, dv_ref, L * ke)));
    CHECK_MSG(eo <= 2e-6 && el <= 2e-6 && eg <= 2e-6 && bad_bytes == 0,
              "cp=%d n=%lld: O err %.3e, LSE err %.3e, grad err %.3e, wrong message sizes %d", cp, (long long)n, eo,
              el, eg, bad_bytes);
    worst_o = worst_of(worst_o, eo), worst_lse = worst_of(worst_lse, el), worst_grad = worst_of(worst_grad, eg);

    for (int c = 0; c < cp; c++) {
        free(ql[c]); free(gol[c]); free(ol[c]); free(lsel[c]); free(dql[c]); free(held[c]); free(inbox[c]);
    }
    free(ql); free(gol); free(ol); free(lsel); free(dql); free(held); free(inbox);
    free(q); free(k); free(v); free(go); free(o_ref); free(lse_ref); free(dq_ref); free(dk_ref); free(dv_ref);
    free(op); free(lp); free(o_got); free(lse_got); free(dq_got); free(dk_got); free(dv_got);
}

static void test_numeric(void) {
    X = cpu_exec();
    rng_seed(13);
    const int64_t lens[] = {1, 5, 20}; /* chunks shorter and longer than a 16-row query tile */
    for (int cp = 1; cp <= 4; cp++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) check_ring_numeric(cp, lens[i]);
    printf("ring vs full causal attention, cp 1..4: worst O %.2e, LSE %.2e, dQ/dK/dV %.2e (scaled by max |ref|)\n",
           worst_o, worst_lse, worst_grad);
    lcx_exec_free(X);
}

/* lcx_cp_local_len: the smallest multiple of 2 cp at or above n, split cp ways; against the definition by search */
static void test_local_len(void) {
    int bad = 0;
    for (int cp = 0; cp <= 6; cp++)
        for (int64_t n = 1; n <= 100; n++) {
            int64_t want = n;
            if (cp > 1) {
                int64_t padded = n;
                while (padded % (2 * cp)) padded++;
                want = padded / cp;
            }
            bad += lcx_cp_local_len(n, cp) != want;
        }
    CHECK_MSG(bad == 0, "lcx_cp_local_len: %d wrong", bad);
    CHECK(lcx_cp_local_len(131088, 4) == 32772 && lcx_cp_local_len(1017, 4) == 256);
    /* lcx_cp_local_window against lcx_cp_local_batch of the window padded by hand with its last token */
    int32_t tok[100], glob[128], ids[128], pos[128], want_ids[128], want_pos[128];
    bad = 0;
    for (int i = 0; i < 100; i++) tok[i] = 1000 + i;
    for (int cp = 2; cp <= 6; cp++)
        for (int64_t n = 1; n <= 100; n++) {
            const int64_t loc = lcx_cp_local_len(n, cp), np = loc * cp;
            for (int64_t j = 0; j < np; j++) glob[j] = tok[j < n ? j : n - 1];
            for (int c = 0; c < cp; c++) {
                CHECK_OK(lcx_cp_local_window(n, cp, c, tok, ids, pos));
                CHECK_OK(lcx_cp_local_batch(np, cp, c, glob, NULL, NULL, want_ids, NULL, want_pos));
                bad += memcmp(ids, want_ids, (size_t)loc * sizeof *ids) != 0 ||
                       memcmp(pos, want_pos, (size_t)loc * sizeof *pos) != 0;
            }
        }
    CHECK_MSG(bad == 0, "lcx_cp_local_window: %d windows differ from the padded lcx_cp_local_batch", bad);
    CHECK_FAILS(lcx_cp_local_window(10, 2, 2, tok, ids, pos), LCX_ERR_INVALID, "");
}

int main(void) {
    test_local_len();
    test_examples();
    test_property();
    test_bytes();
    test_perm();
    test_numeric();
    return test_summary("test_cp_ring");
}
