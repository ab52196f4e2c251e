#include "src/core/cp_ring.h"

#include <string.h>

#include "src/core/layout.h"

static lcx_cp_task task_of(const lcx_cp_split *q, const lcx_cp_split *k, int qc, int kc, int64_t nq_chunks,
                           int64_t nk_chunks, lcx_cp_mask mask) {
    int64_t n = q->chunk_len;
    return (lcx_cp_task){.q_row = qc * n, .n_q = nq_chunks * n, .k_row = kc * n, .n_k = nk_chunks * n,
                         .q_offset = q->start[qc], .k_offset = k->start[kc], .mask = mask};
}

lcx_status lcx_cp_ring_tasks(int64_t seq_len, int cp, int c, int r, lcx_cp_task task[LCX_CP_MAX_TASKS],
                             int *n_tasks) {
    memset(task, 0, sizeof(lcx_cp_task) * LCX_CP_MAX_TASKS);
    *n_tasks = 0;
    lcx_cp_split q, k;
    LCX_TRY(lcx_cp_split_of(seq_len, cp, c, &q));
    LCX_FAIL_IF(r < 0 || r >= cp, LCX_ERR_INVALID, "K/V block of cp rank %d outside cp=%d", r, cp);
    LCX_TRY(lcx_cp_split_of(seq_len, cp, r, &k));
    if (r == c) {
        /* Own block: the two diagonal chunk pairs are causal, the late queries see the early keys whole, and
         * the early queries see nothing of the late keys. */
        task[0] = task_of(&q, &k, 0, 0, 1, 1, LCX_CP_CAUSAL);
        task[1] = task_of(&q, &k, 1, 0, 1, 1, LCX_CP_FULL);
        task[2] = task_of(&q, &k, 1, 1, 1, 1, LCX_CP_CAUSAL);
        *n_tasks = 3;
    } else if (r < c) {
        /* Chunk r < c < 2cp-1-c < 2cp-1-r: both query chunks see key chunk r whole and none of 2cp-1-r. */
        task[0] = task_of(&q, &k, 0, 0, 2, 1, LCX_CP_FULL);
        *n_tasks = 1;
    } else {
        /* Chunk c < r < 2cp-1-r < 2cp-1-c: only the late query chunk sees keys, and it sees both chunks. */
        task[0] = task_of(&q, &k, 1, 0, 1, 2, LCX_CP_FULL);
        *n_tasks = 1;
    }
    return LCX_OK;
}

lcx_status lcx_cp_ring_step(int64_t seq_len, int cp, int c, int s, lcx_cp_dir dir, lcx_cp_step *out) {
    memset(out, 0, sizeof *out);
    lcx_cp_split q;
    LCX_TRY(lcx_cp_split_of(seq_len, cp, c, &q));
    LCX_FAIL_IF(s < 0 || s >= cp, LCX_ERR_INVALID, "ring step %d outside 0..%d (cp=%d)", s, cp - 1, cp);
    LCX_FAIL_IF(dir != LCX_CP_FORWARD && dir != LCX_CP_BACKWARD, LCX_ERR_INVALID, "ring direction %d unknown",
                (int)dir);
    int fwd = dir == LCX_CP_FORWARD, next = (c + 1) % cp, prev = (c + cp - 1) % cp;
    out->src = fwd ? (c - s + cp) % cp : (c + s) % cp;
    out->send_to = fwd ? next : prev;
    out->recv_from = fwd ? prev : next;
    if (cp == 1)
        out->send = LCX_CP_SEND_NONE; /* the only block, and its gradient, never leave the rank */
    else if (fwd)
        out->send = s + 1 < cp ? LCX_CP_SEND_KV : LCX_CP_SEND_NONE;
    else /* after the last step the held accumulator is (c+cp-1) mod cp = send_to's own: return only it */
        out->send = s + 1 < cp ? LCX_CP_SEND_KV_DKV : LCX_CP_SEND_DKV;
    return lcx_cp_ring_tasks(seq_len, cp, c, out->src, out->task, &out->n_tasks);
}

lcx_status lcx_cp_ring_msg_bytes(lcx_cp_send send, int64_t kv_heads, int64_t head_dim, int64_t block_len,
                                 lcx_dtype act_dt, uint64_t *bytes) {
    *bytes = 0;
    LCX_FAIL_IF(kv_heads < 0 || head_dim < 0 || block_len < 0, LCX_ERR_INVALID,
                "ring message of kv_heads=%lld head_dim=%lld block_len=%lld: sizes must be >= 0",
                (long long)kv_heads, (long long)head_dim, (long long)block_len);
    LCX_FAIL_IF(act_dt != LCX_F32 && act_dt != LCX_BF16, LCX_ERR_INVALID,
                "ring message in %s: K/V travel as float32 or bfloat16", lcx_dtype_name(act_dt));
    uint64_t per_elem; /* bytes per element of one of the two tensors (K and V, or their gradients) */
    switch (send) {
    case LCX_CP_SEND_NONE: return LCX_OK;
    case LCX_CP_SEND_KV: per_elem = act_dt == LCX_F32 ? 4 : 2; break;
    case LCX_CP_SEND_KV_DKV: per_elem = (act_dt == LCX_F32 ? 4 : 2) + 4; break;
    case LCX_CP_SEND_DKV: per_elem = 4; break;
    default: return lcx_fail(LCX_ERR_INVALID, "ring message kind %d unknown", (int)send);
    }
    uint64_t b = 2 * per_elem;
    LCX_FAIL_IF(__builtin_mul_overflow(b, (uint64_t)kv_heads, &b) ||
                    __builtin_mul_overflow(b, (uint64_t)head_dim, &b) ||
                    __builtin_mul_overflow(b, (uint64_t)block_len, &b),
                LCX_ERR_INVALID, "ring message of kv_heads=%lld head_dim=%lld block_len=%lld overflows 64 bits",
                (long long)kv_heads, (long long)head_dim, (long long)block_len);
    *bytes = b;
    return LCX_OK;
}
