/* cp_ring: the context-parallel ring attention schedule as pure functions — at each step of the ring, which
 * rank's K/V block a CP rank holds, which attention calls it makes on it, what it sends afterwards and how many
 * bytes that is. No communication and no kernels: the caller (the model) turns a step into attention ops and
 * sends; tests/unit/test_cp_ring.c proves the schedule covers every causal pair exactly once with equal work
 * per rank and reproduces full causal attention numerically.
 *
 * Split (src/core/layout.h lcx_cp_split_of): the sequence is cut into 2*cp chunks of n tokens; CP rank c holds
 * chunk c (local rows [0, n)) then chunk 2cp-1-c (local rows [n, 2n)). Its K/V block has the same two chunks in
 * the same order, so a block is 2n rows and "rows of the block" below are local rows of its owner.
 *
 * Forward: at step s (0 <= s < cp) rank c holds the block of rank (c - s) mod cp; after computing it sends that
 * block to rank c+1 and receives the next from rank c-1 (mod cp), except after the last step. Backward: the ring
 * runs the other way — at step s rank c holds the block of rank (c + s) mod cp together with that block's float32
 * dK/dV accumulator; after computing it sends both to rank c-1 and receives from c+1. After the last step the
 * accumulator it holds belongs to rank c-1, so one last message carries only dK/dV back to its owner: every rank
 * ends with the complete gradient of its own K/V.
 *
 * Tasks of query rank c against the block of rank r (the same in both directions; spec: docs/parallel.md
 * "Context parallelism"):
 *   r == c: q[0,n) x k[0,n) causal; q[n,2n) x k[0,n) full; q[n,2n) x k[n,2n) causal  (q[0,n) x k[n,2n) is
 *           entirely in the future: skipped)
 *   r <  c: q[0,2n) x k[0,n) full   (both query chunks lie after chunk r and before chunk 2cp-1-r)
 *   r >  c: q[n,2n) x k[0,2n) full  (only chunk 2cp-1-c lies after the block's chunks, and after both)
 * so every off-diagonal step is 2n^2 unmasked pairs on every rank. */
#ifndef LCX_CP_RING_H
#define LCX_CP_RING_H

#include <stdint.h>

#include "src/core/status.h"
#include "src/core/tensor.h"

/* The mask of one task. Same values as lcx_attn_mask (kernels/backend.h), which the core may not include: a
 * task's mask casts directly (tests/unit/test_cp_ring.c checks the values agree). Skipped pairs get no task. */
typedef enum lcx_cp_mask {
    LCX_CP_CAUSAL = 0, /* key visible iff its global position <= the query's */
    LCX_CP_FULL = 1,   /* every key visible */
} lcx_cp_mask;

/* One attention call: local query rows [q_row, q_row + n_q) against rows [k_row, k_row + n_k) of the held block.
 * q_offset and k_offset are the global positions of the first query and key row, as lcx_attn_args takes them.
 * A causal task never spans two chunks, so its positions are contiguous; a full task may (q[0,2n) or k[0,2n)),
 * and then only the first chunk's offset is given: a full mask does not read positions. */
typedef struct lcx_cp_task {
    int64_t q_row, n_q;
    int64_t k_row, n_k;
    int64_t q_offset, k_offset;
    lcx_cp_mask mask;
} lcx_cp_task;

#define LCX_CP_MAX_TASKS 3

typedef enum lcx_cp_dir {
    LCX_CP_FORWARD = 0, /* ring c -> c+1, carries K, V */
    LCX_CP_BACKWARD,    /* ring c -> c-1, carries K, V and float32 dK, dV */
} lcx_cp_dir;

/* What travels after a step's compute. */
typedef enum lcx_cp_send {
    LCX_CP_SEND_NONE = 0, /* nothing (last forward step; cp == 1) */
    LCX_CP_SEND_KV,       /* forward: K, V in the activation dtype, one message */
    LCX_CP_SEND_KV_DKV,   /* backward: K, V in the activation dtype and float32 dK, dV, one message */
    LCX_CP_SEND_DKV,      /* backward, after the last step: float32 dK, dV only, back to the block's owner */
} lcx_cp_send;

/* One step of one rank. */
typedef struct lcx_cp_step {
    int src;             /* owner of the K/V block (and, backward, of the dK/dV accumulator) held at this step */
    int send_to;         /* rank the held block goes to after the compute ((c+1) mod cp forward, (c-1) backward) */
    int recv_from;       /* rank the next block comes from ((c-1) mod cp forward, (c+1) backward) */
    lcx_cp_send send;    /* what is sent to send_to (and received from recv_from) after the compute */
    int n_tasks;         /* 1..LCX_CP_MAX_TASKS */
    lcx_cp_task task[LCX_CP_MAX_TASKS];
} lcx_cp_step;

/* The tasks of query rank c against the block of rank r, for a sequence of seq_len tokens (see the table above).
 * Fails (LCX_ERR_INVALID) on a bad split (lcx_cp_split_of) or r outside [0, cp). */
lcx_status lcx_cp_ring_tasks(int64_t seq_len, int cp, int c, int r, lcx_cp_task task[LCX_CP_MAX_TASKS],
                             int *n_tasks);

/* Step s in [0, cp) of rank c in direction dir. Fails (LCX_ERR_INVALID) on a bad split or step. */
lcx_status lcx_cp_ring_step(int64_t seq_len, int cp, int c, int s, lcx_cp_dir dir, lcx_cp_step *out);

/* Bytes of one ring message carrying `send` for a block of block_len rows (= 2 * chunk_len, a rank's local
 * length) of kv_heads x head_dim, K/V stored in act_dt (LCX_F32 or LCX_BF16):
 *   KV     : 2 * kv_heads * head_dim * block_len * sizeof(act_dt)
 *   KV_DKV : 2 * kv_heads * head_dim * block_len * (sizeof(act_dt) + 4)
 *   DKV    : 2 * kv_heads * head_dim * block_len * 4;   NONE: 0.
 * kv_heads is the model's KV heads (K/V are never repeated to the query heads before sending). Fails
 * (LCX_ERR_INVALID) on negative sizes, another dtype or overflow. */
lcx_status lcx_cp_ring_msg_bytes(lcx_cp_send send, int64_t kv_heads, int64_t head_dim, int64_t block_len,
                                 lcx_dtype act_dt, uint64_t *bytes);

#endif /* LCX_CP_RING_H */
