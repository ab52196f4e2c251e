/* comm_staged: device buffers moved by a host communicator through staging buffers (src/comm/comm_device.h).
 * A call with an exec copies its device input to a host buffer (the stager's to_host, after the exec's queued
 * work), runs the inner communicator's call on host memory, and copies the result back (to_device). The inner
 * communicator does the reductions, so the results are its results, bit for bit. Staging buffers come from a
 * per-communicator pool (pinned allocations are slow: they are kept until the communicator is freed). */
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm_device.h"

/* One staging buffer of the pool. */
typedef struct stage_buf {
    void *p;
    size_t bytes;
    int busy;
} stage_buf;

typedef struct staged_state {
    lcx_comm *inner; /* first (comm_impl.h) */
    const lcx_comm_stager *sg;
    stage_buf *pool;
    int n_pool, cap_pool;
} staged_state;

struct lcx_comm_request {
    lcx_comm_request *inner;
    stage_buf *buf;   /* NULL for an empty message */
    lcx_exec *x;
    void *dev;        /* receive: where the message goes at wait. The whole receive is copied back, so a shorter
                         message leaves the rest undefined (MPI leaves it as it was); callers receive exactly what
                         is sent. */
    size_t bytes;
};

static staged_state *st_of(const lcx_comm *c) { return c->state; }

/* A free pool buffer of at least `bytes`: the smallest that fits, else a free one grown (so the pool never holds
 * more buffers than were ever in flight at once), else a new one. NULL for 0 bytes. */
static lcx_status take(lcx_comm *c, size_t bytes, stage_buf **out) {
    staged_state *s = st_of(c);
    *out = NULL;
    if (bytes == 0) return LCX_OK;
    stage_buf *best = NULL, *grow = NULL;
    for (int i = 0; i < s->n_pool; i++) {
        stage_buf *b = &s->pool[i];
        if (b->busy) continue;
        if (b->bytes >= bytes && (!best || b->bytes < best->bytes)) best = b;
        if (b->bytes < bytes) grow = b;
    }
    if (!best && grow) {
        s->sg->host_free(grow->p);
        *grow = (stage_buf){0};
        LCX_TRY(s->sg->host_alloc(bytes, &grow->p));
        grow->bytes = bytes, best = grow;
    }
    if (!best) {
        /* Requests point into the pool array, so it never moves: its size is fixed up front. */
        LCX_FAIL_IF(s->n_pool == s->cap_pool, LCX_ERR_OOM,
                    "rank %d: more than %d staging buffers in flight (wait for requests before posting more)",
                    c->world_rank, s->cap_pool);
        best = &s->pool[s->n_pool];
        LCX_TRY(s->sg->host_alloc(bytes, &best->p));
        best->bytes = bytes;
        s->n_pool++;
    }
    best->busy = 1;
    *out = best;
    return LCX_OK;
}

static void give(stage_buf *b) {
    if (b) b->busy = 0;
}

static void *host_of(stage_buf *b) { return b ? b->p : NULL; }

static size_t bytes_of(int64_t count, lcx_dtype dt) { return (size_t)count * lcx_comm_dtype_size(dt); }

static lcx_status to_host(lcx_comm *c, lcx_exec *x, stage_buf *b, const void *dev, size_t bytes) {
    return bytes ? st_of(c)->sg->to_host(x, b->p, dev, bytes) : LCX_OK;
}

static lcx_status to_device(lcx_comm *c, lcx_exec *x, void *dev, stage_buf *b, size_t bytes) {
    return bytes ? st_of(c)->sg->to_device(x, dev, b->p, bytes) : LCX_OK;
}

/* ---- point to point: the send is staged when posted, the receive copied back at wait ------------------------ */

static lcx_status post(lcx_comm *c, lcx_exec *x, int is_send, void *buf, int64_t count, lcx_dtype dt, int peer,
                       int tag, lcx_comm_request **out) {
    lcx_comm *in = st_of(c)->inner;
    lcx_comm_request *r = calloc(1, sizeof *r);
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "rank %d: out of memory for a request", c->world_rank);
    lcx_status st = LCX_OK;
    void *h = buf; /* host calls (x NULL) go straight to the inner communicator, in a request of ours all the same */
    if (x) {
        r->x = x, r->dev = is_send ? NULL : buf, r->bytes = bytes_of(count, dt);
        st = take(c, r->bytes, &r->buf);
        if (st == LCX_OK && is_send) st = to_host(c, x, r->buf, buf, r->bytes);
        h = host_of(r->buf);
    }
    if (st == LCX_OK)
        st = is_send ? in->impl->isend(in, NULL, h, count, dt, peer, tag, &r->inner)
                     : in->impl->irecv(in, NULL, h, count, dt, peer, tag, &r->inner);
    if (st != LCX_OK) {
        give(r->buf);
        free(r);
        return st;
    }
    *out = r;
    return LCX_OK;
}

static lcx_status s_isend(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer,
                          int tag, lcx_comm_request **out) {
    return post(c, x, 1, (void *)(uintptr_t)buf, count, dt, peer, tag, out);
}

static lcx_status s_irecv(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                          lcx_comm_request **out) {
    return post(c, x, 0, buf, count, dt, peer, tag, out);
}

static lcx_status s_wait(lcx_comm *c, lcx_comm_request *r) {
    lcx_comm *in = st_of(c)->inner;
    lcx_status st = in->impl->wait(in, r->inner);
    if (st == LCX_OK && r->dev) st = to_device(c, r->x, r->dev, r->buf, r->bytes);
    give(r->buf);
    free(r);
    return st;
}

/* ---- collectives: stage in, the inner call on host memory, stage out --------------------------------------- */

static lcx_status s_all_reduce(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count,
                               lcx_dtype dt, lcx_comm_op op) {
    lcx_comm *in = st_of(c)->inner;
    if (!x) return in->impl->all_reduce(in, NULL, send, recv, count, dt, op);
    const size_t n = bytes_of(count, dt);
    stage_buf *b = NULL;
    lcx_status st = take(c, n, &b); /* reduced in place on the host */
    if (st == LCX_OK) st = to_host(c, x, b, send, n);
    if (st == LCX_OK) st = in->impl->all_reduce(in, NULL, host_of(b), host_of(b), count, dt, op);
    if (st == LCX_OK) st = to_device(c, x, recv, b, n);
    give(b);
    return st;
}

/* The inner call from hs (send_bytes) to hr (recv_bytes); `gather` picks all_gather over reduce_scatter. */
static lcx_status two_buffers(lcx_comm *c, lcx_exec *x, const void *send, size_t send_bytes, void *recv,
                              size_t recv_bytes, int gather, int64_t count, lcx_dtype dt, lcx_comm_op op) {
    lcx_comm *in = st_of(c)->inner;
    stage_buf *hs = NULL, *hr = NULL;
    lcx_status st = take(c, send_bytes, &hs);
    if (st == LCX_OK) st = take(c, recv_bytes, &hr);
    if (st == LCX_OK) st = to_host(c, x, hs, send, send_bytes);
    if (st == LCX_OK)
        st = gather ? in->impl->all_gather(in, NULL, host_of(hs), host_of(hr), count, dt)
                    : in->impl->reduce_scatter(in, NULL, host_of(hs), host_of(hr), count, dt, op);
    if (st == LCX_OK) st = to_device(c, x, recv, hr, recv_bytes);
    give(hs);
    give(hr);
    return st;
}

static lcx_status s_reduce_scatter(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                   lcx_dtype dt, lcx_comm_op op) {
    lcx_comm *in = st_of(c)->inner;
    if (!x) return in->impl->reduce_scatter(in, NULL, send, recv, recv_count, dt, op);
    const size_t n = bytes_of(recv_count, dt);
    return two_buffers(c, x, send, n * (size_t)c->size, recv, n, 0, recv_count, dt, op);
}

static lcx_status s_all_gather(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                               lcx_dtype dt) {
    lcx_comm *in = st_of(c)->inner;
    if (!x) return in->impl->all_gather(in, NULL, send, recv, send_count, dt);
    const size_t n = bytes_of(send_count, dt);
    return two_buffers(c, x, send, n, recv, n * (size_t)c->size, 1, send_count, dt, LCX_COMM_SUM);
}

static lcx_status s_broadcast(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root) {
    lcx_comm *in = st_of(c)->inner;
    if (!x) return in->impl->broadcast(in, NULL, buf, count, dt, root);
    const size_t n = bytes_of(count, dt);
    stage_buf *b = NULL;
    lcx_status st = take(c, n, &b);
    if (st == LCX_OK && c->rank == root) st = to_host(c, x, b, buf, n);
    if (st == LCX_OK) st = in->impl->broadcast(in, NULL, host_of(b), count, dt, root);
    if (st == LCX_OK && c->rank != root) st = to_device(c, x, buf, b, n);
    give(b);
    return st;
}

/* The exec's queued work first, so that "every rank has entered" also means its work before the call is done. */
static lcx_status s_barrier(lcx_comm *c, lcx_exec *x) {
    lcx_comm *in = st_of(c)->inner;
    if (x) LCX_TRY(x->be->sync(x));
    return in->impl->barrier(in, NULL);
}

static lcx_status s_split(lcx_comm *c, int color, int key, lcx_comm **out) {
    lcx_comm *in = st_of(c)->inner, *sub = NULL;
    LCX_TRY(in->impl->split(in, color, key, &sub));
    lcx_status st = lcx_comm_staged(sub, st_of(c)->sg, out);
    if (st != LCX_OK) sub->impl->free(sub);
    return st;
}

static void s_free(lcx_comm *c) {
    if (!c) return;
    staged_state *s = c->state;
    if (s) {
        for (int i = 0; i < s->n_pool; i++) s->sg->host_free(s->pool[i].p);
        free(s->pool);
        if (s->inner) s->inner->impl->free(s->inner);
        free(s);
    }
    free(c);
}

__attribute__((noreturn)) static void s_abort(lcx_comm *c, int code) {
    lcx_comm *in = st_of(c)->inner;
    in->impl->abort(in, code);
}

static const lcx_comm_impl staged_impl = {
    .name = "staged",
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

/* Staging buffers in flight at once: a collective takes 2, each posted device request 1 (ZeRO-1 posts 2 per peer). */
enum { POOL_CAP = 1024 };

lcx_status lcx_comm_staged(lcx_comm *inner, const lcx_comm_stager *sg, lcx_comm **out) {
    LCX_FAIL_IF(!out, LCX_ERR_INVALID, "comm staged: no output pointer");
    *out = NULL;
    LCX_FAIL_IF(!inner || !sg, LCX_ERR_INVALID, "comm staged: no %s", inner ? "stager" : "inner communicator");
    lcx_comm *c = calloc(1, sizeof *c);
    staged_state *s = calloc(1, sizeof *s);
    stage_buf *pool = calloc(POOL_CAP, sizeof *pool);
    if (!c || !s || !pool) {
        free(c), free(s), free(pool);
        return lcx_fail(LCX_ERR_OOM, "rank %d: out of memory for a communicator", inner->world_rank);
    }
    *s = (staged_state){.inner = inner, .sg = sg, .pool = pool, .cap_pool = POOL_CAP};
    *c = (lcx_comm){.impl = &staged_impl, .rank = inner->rank, .size = inner->size, .world_rank = inner->world_rank,
                    .state = s};
    *out = c;
    return LCX_OK;
}

/* ---- the backend stager: malloc'd host memory, the exec's own copies ----------------------------------------- */

static lcx_status be_host_alloc(size_t bytes, void **out) {
    *out = malloc(bytes);
    LCX_FAIL_IF(!*out, LCX_ERR_OOM, "comm staged: out of memory for a staging buffer of %zu bytes", bytes);
    return LCX_OK;
}
static void be_host_free(void *p) { free(p); }
/* copy_d2h waits for the queue's earlier work; copy_h2d returns with the host buffer reusable (backend.h). */
static lcx_status be_to_host(lcx_exec *x, void *host, const void *dev, size_t bytes) {
    return x->be->copy_d2h(x, host, dev, bytes);
}
static lcx_status be_to_device(lcx_exec *x, void *dev, const void *host, size_t bytes) {
    return x->be->copy_h2d(x, dev, host, bytes);
}

static const lcx_comm_stager backend_stager = {
    .name = "backend",
    .host_alloc = be_host_alloc,
    .host_free = be_host_free,
    .to_host = be_to_host,
    .to_device = be_to_device,
};

const lcx_comm_stager *lcx_comm_stager_backend(void) { return &backend_stager; }
