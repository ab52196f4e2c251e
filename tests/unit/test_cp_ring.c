/* cp_ring and cp_perm: the context-parallel ring schedule and token permutation.
 * - Hand-checked steps for cp = 2 and 4 (the examples of docs/parallel.md).
 * - Property test, cp = 1..16 at several chunk lengths: over all ranks and steps every causal (query, key) pair
 *   is computed exactly once, no task shows a key after its query, causal tasks have contiguous positions, every
 *   rank does the same work, and the messages (simulated sends) bring every block, and in the backward every
 *   dK/dV accumulator, where the schedule says, ending at its owner.
 * - Message bytes = 2 x kv_heads x head_dim x block length x dtype size, and the permutation helpers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops_common.h"
#include "src/core/cp_perm.h"
#include "src/core/cp_ring.h"
#include "src/core/layout.h"

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
        for (int64_t i = 0; i < L; i++) ids[i] = (int32_t)(1000 + i), tg[i] = (int32_t)(1001 + i), ps[i] = (int32_t)(7 * i);
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

int main(void) {
    test_examples();
    test_property();
    test_bytes();
    test_perm();
    return test_summary("test_cp_ring");
}
