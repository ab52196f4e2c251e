/* comm_single: the communicator of a run with one rank. Collectives are copies (or nothing); a send to self
 * waits in a mailbox until the receive with its tag is posted, then both complete with one copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm_impl.h"

struct lcx_comm_request {
    int is_send, done;
    const void *sbuf;
    void *rbuf;
    int64_t count;
    lcx_dtype dt;
    int tag;
    lcx_exec *x;
    lcx_status st;            /* of the match (a truncated message fails both ends) */
    char msg[160];
    lcx_comm_request *next;   /* pending list, oldest first */
};

typedef struct single_state {
    lcx_comm_request *pending; /* posted, not yet matched */
} single_state;

/* Copy through the exec's backend (device memory), or memcpy for host buffers. */
static lcx_status copy(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    if (bytes == 0 || dst == src) return LCX_OK;
    if (x) return x->be->copy_d2d(x, dst, src, bytes);
    memcpy(dst, src, bytes);
    return LCX_OK;
}

static void unlink_pending(single_state *s, lcx_comm_request *r) {
    for (lcx_comm_request **p = &s->pending; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            return;
        }
}

/* Complete r against the oldest pending opposite end with its tag, if any. */
static void match(lcx_comm *c, lcx_comm_request *r) {
    single_state *s = c->state;
    lcx_comm_request *o = s->pending;
    while (o && (o->is_send == r->is_send || o->tag != r->tag)) o = o->next;
    if (!o) {
        r->next = NULL;
        lcx_comm_request **p = &s->pending;
        while (*p) p = &(*p)->next;
        *p = r;
        return;
    }
    unlink_pending(s, o);
    lcx_comm_request *snd = r->is_send ? r : o, *rcv = r->is_send ? o : r;
    lcx_status st = LCX_OK;
    if (snd->dt != rcv->dt || snd->count > rcv->count) {
        st = lcx_fail(LCX_ERR_COMM, "rank %d: message of %lld %s (tag %d) does not fit a receive of %lld %s",
                      c->world_rank, (long long)snd->count, lcx_dtype_name(snd->dt), snd->tag,
                      (long long)rcv->count, lcx_dtype_name(rcv->dt));
    } else {
        st = copy(rcv->x, rcv->rbuf, snd->sbuf, (size_t)snd->count * lcx_comm_dtype_size(snd->dt));
    }
    for (int i = 0; i < 2; i++) {
        lcx_comm_request *q = i ? rcv : snd;
        q->done = 1;
        q->st = st;
        if (st != LCX_OK) snprintf(q->msg, sizeof q->msg, "%s", lcx_last_error());
    }
}

static lcx_status post(lcx_comm *c, lcx_exec *x, int is_send, const void *sbuf, void *rbuf, int64_t count,
                       lcx_dtype dt, int tag, lcx_comm_request **out) {
    lcx_comm_request *r = calloc(1, sizeof *r);
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "rank %d: out of memory for a request", c->world_rank);
    r->is_send = is_send;
    r->sbuf = sbuf;
    r->rbuf = rbuf;
    r->count = count;
    r->dt = dt;
    r->tag = tag;
    r->x = x;
    match(c, r);
    *out = r;
    return LCX_OK;
}

static lcx_status s_isend(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer,
                          int tag, lcx_comm_request **out) {
    (void)peer;
    return post(c, x, 1, buf, NULL, count, dt, tag, out);
}

static lcx_status s_irecv(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                          lcx_comm_request **out) {
    (void)peer;
    return post(c, x, 0, NULL, buf, count, dt, tag, out);
}

static lcx_status s_wait(lcx_comm *c, lcx_comm_request *r) {
    lcx_status st = r->st;
    if (!r->done) {
        /* One rank: nothing else can ever post the other end, so waiting would hang forever. */
        unlink_pending(c->state, r);
        st = lcx_fail(LCX_ERR_COMM, "rank %d: wait on a %s with tag %d that no %s matches (it would never complete)",
                      c->world_rank, r->is_send ? "send" : "receive", r->tag, r->is_send ? "receive" : "send");
    } else if (st != LCX_OK) {
        lcx_fail(st, "%s", r->msg);
    }
    free(r);
    return st;
}

static lcx_status s_all_reduce(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count,
                               lcx_dtype dt, lcx_comm_op op) {
    (void)c, (void)op;
    return copy(x, recv, send, (size_t)count * lcx_comm_dtype_size(dt));
}

static lcx_status s_reduce_scatter(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                   lcx_dtype dt, lcx_comm_op op) {
    (void)c, (void)op;
    return copy(x, recv, send, (size_t)recv_count * lcx_comm_dtype_size(dt));
}

static lcx_status s_all_gather(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                               lcx_dtype dt) {
    (void)c;
    return copy(x, recv, send, (size_t)send_count * lcx_comm_dtype_size(dt));
}

static lcx_status s_broadcast(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root) {
    (void)c, (void)x, (void)buf, (void)count, (void)dt, (void)root;
    return LCX_OK;
}

static lcx_status s_barrier(lcx_comm *c, lcx_exec *x) {
    (void)c, (void)x;
    return LCX_OK;
}

static lcx_status s_split(lcx_comm *c, int color, int key, lcx_comm **out) {
    (void)color, (void)key;
    return lcx_comm_single_create(c->world_rank, out);
}

static void s_free(lcx_comm *c) {
    if (!c) return;
    single_state *s = c->state;
    /* Requests never waited for are the caller's leak, but not ours to keep. */
    while (s && s->pending) {
        lcx_comm_request *r = s->pending;
        s->pending = r->next;
        free(r);
    }
    free(s);
    free(c);
}

__attribute__((noreturn)) static void s_abort(lcx_comm *c, int code) {
    (void)c;
    exit(code);
}

static const lcx_comm_impl single_impl = {
    .name = "single",
    .isend = s_isend,
    .irecv = s_irecv,
    .wait = s_wait,
    .all_reduce = s_all_reduce,
    .reduce_scatter = s_reduce_scatter,
    .all_gather = s_all_gather,
    .broadcast = s_broadcast,
    .barrier = s_barrier,
    .split = s_split,
    .free = s_free,
    .abort = s_abort,
};

lcx_status lcx_comm_single_create(int world_rank, lcx_comm **out) {
    lcx_comm *c = calloc(1, sizeof *c);
    single_state *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return lcx_fail(LCX_ERR_OOM, "out of memory for a communicator");
    }
    c->impl = &single_impl;
    c->rank = 0;
    c->size = 1;
    c->world_rank = world_rank;
    c->state = s;
    *out = c;
    return LCX_OK;
}
