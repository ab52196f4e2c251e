/* comm: argument checks and dispatch to the implementation table, so every implementation sees the same
 * validated calls and fails the same way on bad arguments. */
#include "src/comm/comm.h"

#include <stdio.h>
#include <stdlib.h>

size_t lcx_comm_dtype_size(lcx_dtype dt) {
    switch (dt) {
    case LCX_F32: return 4;
    case LCX_BF16: return 2;
    case LCX_F64: case LCX_I64: return 8;
    default: return 0;
    }
}

static lcx_status check_comm(const lcx_comm *c, const char *call) {
    LCX_FAIL_IF(!c || !c->impl, LCX_ERR_INVALID, "%s: no communicator", call);
    return LCX_OK;
}

/* count elements of dt in a buffer (times `mult` ranks); NULL is fine only for an empty buffer. */
static lcx_status check_buf(const void *p, int64_t count, int64_t mult, lcx_dtype dt, const char *call,
                            const char *what, size_t *bytes) {
    size_t es = lcx_comm_dtype_size(dt);
    LCX_FAIL_IF(es == 0, LCX_ERR_UNSUPPORTED, "%s: dtype %s cannot be communicated (f32, bf16, f64, i64)", call,
                lcx_dtype_name(dt));
    LCX_FAIL_IF(count < 0, LCX_ERR_INVALID, "%s: count %lld is negative", call, (long long)count);
    size_t n;
    LCX_FAIL_IF(!lcx_mul_size((size_t)count, (size_t)mult, &n) || !lcx_mul_size(n, es, bytes), LCX_ERR_INVALID,
                "%s: %lld x %lld elements overflow the address space", call, (long long)count, (long long)mult);
    LCX_FAIL_IF(*bytes > 0 && !p, LCX_ERR_INVALID, "%s: %s buffer is NULL for %lld elements", call, what,
                (long long)count);
    return LCX_OK;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

static lcx_status check_rank(const lcx_comm *c, int r, const char *call, const char *what) {
    LCX_FAIL_IF(r < 0 || r >= c->size, LCX_ERR_INVALID, "%s: %s rank %d outside a communicator of %d ranks", call,
                what, r, c->size);
    return LCX_OK;
}

static lcx_status check_op(lcx_comm_op op, const char *call) {
    LCX_FAIL_IF((int)op < 0 || op >= LCX_COMM_OP_COUNT, LCX_ERR_INVALID, "%s: unknown reduction %d", call, (int)op);
    return LCX_OK;
}

static lcx_status check_p2p(const lcx_comm *c, const void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                            lcx_comm_request **out, const char *call) {
    size_t bytes;
    LCX_TRY(check_comm(c, call));
    LCX_FAIL_IF(!out, LCX_ERR_INVALID, "%s: no request pointer", call);
    *out = NULL;
    LCX_TRY(check_buf(buf, count, 1, dt, call, "the", &bytes));
    LCX_TRY(check_rank(c, peer, call, "peer"));
    LCX_FAIL_IF(tag < 0 || tag > LCX_COMM_TAG_MAX, LCX_ERR_INVALID, "%s: tag %d outside 0..%d", call, tag,
                LCX_COMM_TAG_MAX);
    return LCX_OK;
}

lcx_status lcx_comm_isend(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer,
                          int tag, lcx_comm_request **out) {
    LCX_TRY(check_p2p(c, buf, count, dt, peer, tag, out, "isend"));
    return c->impl->isend(c, x, buf, count, dt, peer, tag, out);
}

lcx_status lcx_comm_irecv(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                          lcx_comm_request **out) {
    LCX_TRY(check_p2p(c, buf, count, dt, peer, tag, out, "irecv"));
    return c->impl->irecv(c, x, buf, count, dt, peer, tag, out);
}

lcx_status lcx_comm_wait(lcx_comm *c, lcx_comm_request *req) {
    LCX_TRY(check_comm(c, "wait"));
    return req ? c->impl->wait(c, req) : LCX_OK;
}

lcx_status lcx_comm_waitall(lcx_comm *c, int n, lcx_comm_request **reqs) {
    LCX_TRY(check_comm(c, "waitall"));
    lcx_status first = LCX_OK;
    char msg[512] = "";
    for (int i = 0; i < n; i++) {
        lcx_status st = lcx_comm_wait(c, reqs[i]);
        reqs[i] = NULL;
        if (st != LCX_OK && first == LCX_OK) {
            first = st;
            snprintf(msg, sizeof msg, "%s", lcx_last_error());
        }
    }
    /* A later failure must not replace the first one's message. */
    return first == LCX_OK ? LCX_OK : lcx_fail(first, "%s", msg);
}

lcx_status lcx_comm_all_reduce(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count,
                               lcx_dtype dt, lcx_comm_op op) {
    size_t bs = 0, br = 0; /* set by check_buf before use; gcc -O3 cannot see it */
    LCX_TRY(check_comm(c, "all_reduce"));
    LCX_TRY(check_op(op, "all_reduce"));
    LCX_TRY(check_buf(send, count, 1, dt, "all_reduce", "send", &bs));
    LCX_TRY(check_buf(recv, count, 1, dt, "all_reduce", "receive", &br));
    LCX_FAIL_IF(send != recv && overlap(send, bs, recv, br), LCX_ERR_INVALID,
                "all_reduce: send and receive buffers overlap without being the same (in place: pass one buffer)");
    return c->impl->all_reduce(c, x, send, recv, count, dt, op);
}

lcx_status lcx_comm_reduce_scatter(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                   lcx_dtype dt, lcx_comm_op op) {
    size_t bs = 0, br = 0; /* set by check_buf before use; gcc -O3 cannot see it */
    LCX_TRY(check_comm(c, "reduce_scatter"));
    LCX_TRY(check_op(op, "reduce_scatter"));
    LCX_TRY(check_buf(send, recv_count, c->size, dt, "reduce_scatter", "send", &bs));
    LCX_TRY(check_buf(recv, recv_count, 1, dt, "reduce_scatter", "receive", &br));
    LCX_FAIL_IF(overlap(send, bs, recv, br), LCX_ERR_INVALID, "reduce_scatter: send and receive buffers overlap");
    return c->impl->reduce_scatter(c, x, send, recv, recv_count, dt, op);
}

lcx_status lcx_comm_all_gather(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                               lcx_dtype dt) {
    size_t bs = 0, br = 0; /* set by check_buf before use; gcc -O3 cannot see it */
    LCX_TRY(check_comm(c, "all_gather"));
    LCX_TRY(check_buf(send, send_count, 1, dt, "all_gather", "send", &bs));
    LCX_TRY(check_buf(recv, send_count, c->size, dt, "all_gather", "receive", &br));
    LCX_FAIL_IF(overlap(send, bs, recv, br), LCX_ERR_INVALID, "all_gather: send and receive buffers overlap");
    return c->impl->all_gather(c, x, send, recv, send_count, dt);
}

lcx_status lcx_comm_broadcast(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root) {
    size_t b;
    LCX_TRY(check_comm(c, "broadcast"));
    LCX_TRY(check_buf(buf, count, 1, dt, "broadcast", "the", &b));
    LCX_TRY(check_rank(c, root, "broadcast", "root"));
    return c->impl->broadcast(c, x, buf, count, dt, root);
}

lcx_status lcx_comm_barrier(lcx_comm *c, lcx_exec *x) {
    LCX_TRY(check_comm(c, "barrier"));
    return c->impl->barrier(c, x);
}

void lcx_comm_abort(lcx_comm *c, const lcx_reporter *r, int code, const char *message) {
    lcx_report(r, LCX_REPORT_WARN, "%s", message ? message : "aborting the job");
    if (c && c->impl) c->impl->abort(c, code);
    exit(code);
}

lcx_status lcx_comm_agree(lcx_comm *g, lcx_status st) {
    if (!g || g->size <= 1) return st;
    /* the largest of size - rank over the failing ranks: the lowest failing rank */
    int64_t flag = st != LCX_OK ? (int64_t)(g->size - g->rank) : 0;
    lcx_status cs = lcx_comm_all_reduce(g, NULL, &flag, &flag, 1, LCX_I64, LCX_COMM_MAX);
    if (st != LCX_OK) return st;
    LCX_TRY(cs);
    LCX_FAIL_IF(flag != 0, LCX_ERR_COMM, "rank %d failed (its message is above)", g->size - (int)flag);
    return LCX_OK;
}
