/* comm_nccl: the communicator over NCCL for the CUDA backend's device buffers (comm_device.h); calls on host
 * buffers (exec NULL, or a CPU exec) go to the inner MPI/single communicator it was made from. Built only when
 * CMake finds NCCL (LCX_HAVE_NCCL); otherwise lcx_comm_nccl reports that it is not built.
 *
 * - Creation: rank 0 of the group calls ncclGetUniqueId and broadcasts it through the inner communicator; every
 *   rank joins with ncclCommInitRankConfig in non-blocking mode, so that no NCCL call can block the host without
 *   the watchdog seeing it; the ranks then agree that every one of them succeeded. A group of one rank split from
 *   it is a staged communicator instead (nothing to move, no NCCL buffers).
 * - Streams: the communicator has its own stream. A call records an event on the exec's stream and the
 *   communication stream waits for it, so the transfer starts once the data is ready and runs beside whatever
 *   the exec queues next (the CP ring's attention on the held block).
 * - Point to point: isend/irecv only record the transfer (and the exec's "data ready" event); the first wait (or
 *   collective) issues every transfer posted so far as one ncclGroupStart/End group. The CP ring posts the send
 *   and receive of one step and then waits, so each step is one group, as NCCL needs for a ring of send/recv
 *   (issued one by one, every rank's send would wait for a receive queued behind its neighbour's send).
 * - Completion and the watchdog: wait and the collectives return when the transfer has completed on the device
 *   (the host polls its event). While polling, ncclCommGetAsyncError is checked and a deadline enforced
 *   (LCX_COMM_TIMEOUT_S, default 600 s): an error or a timeout calls ncclCommAbort and returns LCX_ERR_COMM
 *   "rank R: NCCL <call> ...: the communicator is aborted"; every later device call on it fails at once with
 *   that message, never hangs. Ending the job is the caller's (lcx_comm_abort), as for MPI errors.
 * - Sums: NCCL's all-reduce and reduce-scatter add in NCCL's order, not rank order; comm.h leaves the order to
 *   the implementation. The model's fixed-order sums (lcx_group_sum, src/model/model_dp.c) are an all-gather and
 *   adds in rank order, so they give the same bits over NCCL as over MPI.
 *
 * Status: not yet run on a GPU (docs/cuda.md, "What the GPU session runs first"). Its logic runs on the CPU in
 * tests/cuda_emu/backend_run.sh's test_comm_nccl_cuda, over an emulation of NCCL by MPI (emu_nccl.cpp): creation
 * from the unique id, the grouped send/recv and their events, every collective, the watchdog's abort. */
#include "src/comm/comm_device.h"
#include "src/comm/comm_impl.h"

#ifdef LCX_HAVE_NCCL
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "src/core/clock.h"

struct lcx_comm_request {
    lcx_comm_request *host;  /* a host call's request of the inner communicator (the rest unused) */
    int is_send, issued;
    void *buf;
    size_t count;
    ncclDataType_t type;
    int peer;
    cudaStream_t xs;         /* the exec's stream */
    cudaEvent_t ready, done; /* on xs: data ready; on the communication stream: transfer complete */
    lcx_comm_request *next;  /* posted, not yet issued */
};

typedef struct nccl_state {
    lcx_comm *inner; /* first (comm_impl.h) */
    ncclComm_t nc;        /* NULL once aborted */
    cudaStream_t stream;  /* the communication stream */
    cudaEvent_t ev_in, ev_done;
    double timeout_s;
    int dead;
    char why[384];        /* the abort's message, repeated by every later device call */
    lcx_comm_request *first, *last;
} nccl_state;

static nccl_state *st_of(const lcx_comm *c) { return c->state; }

/* ---- failures: every NCCL or CUDA error aborts the communicator ---------------------------------------------- */

static lcx_status die(lcx_comm *c, const char *what, const char *cause) {
    nccl_state *s = st_of(c);
    if (s->nc) {
        (void)ncclCommAbort(s->nc);
        s->nc = NULL;
    }
    s->dead = 1;
    snprintf(s->why, sizeof s->why, "rank %d: NCCL %s: %s; the NCCL communicator is aborted", c->world_rank, what,
             cause);
    return lcx_fail(LCX_ERR_COMM, "%s", s->why);
}

static lcx_status die_nccl(lcx_comm *c, const char *what, ncclResult_t r) {
    char cause[256];
    const char *last = st_of(c)->nc ? ncclGetLastError(st_of(c)->nc) : NULL;
    snprintf(cause, sizeof cause, "%s%s%s", ncclGetErrorString(r), last && *last ? " - " : "", last ? last : "");
    return die(c, what, cause);
}

static lcx_status die_cuda(lcx_comm *c, const char *what, cudaError_t e) {
    (void)cudaGetLastError();
    return die(c, what, cudaGetErrorString(e));
}

#define CU_TRY(c, call, what)                                                                                 \
    do {                                                                                                      \
        cudaError_t e_ = (call);                                                                              \
        if (e_ != cudaSuccess) return die_cuda((c), (what), e_);                                              \
    } while (0)

static lcx_status timed_out(lcx_comm *c, const char *what) {
    char cause[128];
    snprintf(cause, sizeof cause, "did not complete within %.0f s (LCX_COMM_TIMEOUT_S)", st_of(c)->timeout_s);
    return die(c, what, cause);
}

/* A NCCL call's result: ncclInProgress (non-blocking mode) is polled until the communicator settles. */
static lcx_status settle(lcx_comm *c, ncclResult_t r, const char *what) {
    nccl_state *s = st_of(c);
    if (r == ncclSuccess) return LCX_OK;
    if (r != ncclInProgress || !s->nc) return die_nccl(c, what, r);
    const double t0 = lcx_clock_s();
    for (;;) {
        ncclResult_t a = ncclInProgress, q = ncclCommGetAsyncError(s->nc, &a);
        if (q != ncclSuccess) return die_nccl(c, what, q);
        if (a == ncclSuccess) return LCX_OK;
        if (a != ncclInProgress) return die_nccl(c, what, a);
        if (lcx_clock_s() - t0 > s->timeout_s) return timed_out(c, what);
        sched_yield();
    }
}

/* The watchdog: poll `done` until it completes, an asynchronous NCCL error shows, or the deadline passes. */
static lcx_status watch(lcx_comm *c, cudaEvent_t done, const char *what) {
    nccl_state *s = st_of(c);
    const double t0 = lcx_clock_s();
    for (;;) {
        cudaError_t e = cudaEventQuery(done);
        if (e == cudaSuccess) return LCX_OK;
        if (e != cudaErrorNotReady) return die_cuda(c, what, e);
        ncclResult_t a = ncclSuccess, q = ncclCommGetAsyncError(s->nc, &a);
        if (q != ncclSuccess) return die_nccl(c, what, q);
        if (a != ncclSuccess && a != ncclInProgress) return die_nccl(c, what, a);
        if (lcx_clock_s() - t0 > s->timeout_s) return timed_out(c, what);
        sched_yield();
    }
}

static lcx_status alive(const lcx_comm *c) {
    LCX_FAIL_IF(st_of(c)->dead, LCX_ERR_COMM, "%s", st_of(c)->why);
    return LCX_OK;
}

/* ---- what goes to NCCL ---------------------------------------------------------------------------------------- */

/* A device call: an exec of the CUDA backend. Everything else (exec NULL, a CPU exec) is host memory. */
static int on_device(const lcx_exec *x) { return x && x->be && strcmp(x->be->name, "cuda") == 0; }
static cudaStream_t stream_of(const lcx_exec *x) { return (cudaStream_t)x->queue; }

static ncclDataType_t type_of(lcx_dtype dt) {
    switch (dt) {
    case LCX_F32: return ncclFloat32;
    case LCX_BF16: return ncclBfloat16;
    case LCX_F64: return ncclFloat64;
    default: return ncclInt64; /* LCX_I64, the only other dtype comm.c lets through */
    }
}

static ncclRedOp_t op_of(lcx_comm_op op) { return op == LCX_COMM_MAX ? ncclMax : ncclSum; }

/* ---- point to point ---------------------------------------------------------------------------------------- */

static void request_free(lcx_comm_request *r) {
    if (r->ready) (void)cudaEventDestroy(r->ready);
    if (r->done) (void)cudaEventDestroy(r->done);
    free(r);
}

/* Issue every posted transfer as one group on the communication stream, after each one's data is ready. */
static lcx_status flush(lcx_comm *c) {
    nccl_state *s = st_of(c);
    lcx_comm_request *list = s->first;
    if (!list) return LCX_OK;
    s->first = s->last = NULL;
    for (lcx_comm_request *r = list; r; r = r->next) r->issued = 1; /* a failure below fails each one's wait */
    for (lcx_comm_request *r = list; r; r = r->next)
        CU_TRY(c, cudaStreamWaitEvent(s->stream, r->ready, 0), "send/recv (waiting for the data)");
    ncclResult_t g = ncclGroupStart();
    if (g != ncclSuccess) return die_nccl(c, "ncclGroupStart", g);
    for (lcx_comm_request *r = list; r; r = r->next) {
        ncclResult_t e = r->is_send ? ncclSend(r->buf, r->count, r->type, r->peer, s->nc, s->stream)
                                    : ncclRecv(r->buf, r->count, r->type, r->peer, s->nc, s->stream);
        if (e != ncclSuccess && e != ncclInProgress) {
            (void)ncclGroupEnd();
            return die_nccl(c, r->is_send ? "ncclSend" : "ncclRecv", e);
        }
    }
    LCX_TRY(settle(c, ncclGroupEnd(), "ncclGroupEnd (send/recv)"));
    for (lcx_comm_request *r = list; r; r = r->next)
        CU_TRY(c, cudaEventRecord(r->done, s->stream), "send/recv (completion event)");
    return LCX_OK;
}

static lcx_status post(lcx_comm *c, lcx_exec *x, int is_send, void *buf, int64_t count, lcx_dtype dt, int peer,
                       int tag, lcx_comm_request **out) {
    nccl_state *s = st_of(c);
    lcx_comm *in = s->inner;
    lcx_comm_request *r = calloc(1, sizeof *r);
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "rank %d: out of memory for a request", c->world_rank);
    lcx_status st = LCX_OK;
    if (!on_device(x)) {
        st = is_send ? in->impl->isend(in, x, buf, count, dt, peer, tag, &r->host)
                     : in->impl->irecv(in, x, buf, count, dt, peer, tag, &r->host);
    } else {
        /* NCCL has no tags: transfers between two ranks match in the order they are posted, which is what the
         * callers rely on (one message per pair and step). */
        *r = (lcx_comm_request){.is_send = is_send, .buf = buf, .count = (size_t)count, .type = type_of(dt),
                                .peer = peer, .xs = stream_of(x)};
        st = alive(c);
        cudaError_t e = cudaSuccess;
        if (st == LCX_OK) e = cudaEventCreateWithFlags(&r->ready, cudaEventDisableTiming);
        if (st == LCX_OK && e == cudaSuccess) e = cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming);
        if (st == LCX_OK && e == cudaSuccess) e = cudaEventRecord(r->ready, stream_of(x));
        if (st == LCX_OK && e != cudaSuccess) st = die_cuda(c, is_send ? "isend" : "irecv", e);
        if (st == LCX_OK && count == 0) {
            r->issued = 1; /* nothing to move (both ends post 0, as every caller does): its events never record */
        } else if (st == LCX_OK) {
            if (s->last) s->last->next = r;
            else s->first = r;
            s->last = r;
        }
    }
    if (st != LCX_OK) {
        request_free(r);
        return st;
    }
    *out = r;
    return LCX_OK;
}

static lcx_status n_isend(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer,
                          int tag, lcx_comm_request **out) {
    return post(c, x, 1, (void *)(uintptr_t)buf, count, dt, peer, tag, out);
}

static lcx_status n_irecv(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                          lcx_comm_request **out) {
    return post(c, x, 0, buf, count, dt, peer, tag, out);
}

static void unlink_pending(nccl_state *s, lcx_comm_request *r) {
    lcx_comm_request *prev = NULL;
    for (lcx_comm_request *p = s->first; p; prev = p, p = p->next)
        if (p == r) {
            if (prev) prev->next = r->next;
            else s->first = r->next;
            if (s->last == r) s->last = prev;
            return;
        }
}

static lcx_status n_wait(lcx_comm *c, lcx_comm_request *r) {
    nccl_state *s = st_of(c);
    lcx_status st;
    if (r->host) {
        st = s->inner->impl->wait(s->inner, r->host);
    } else {
        st = alive(c);
        if (st == LCX_OK && !r->issued) st = flush(c);
        if (!r->issued) unlink_pending(s, r); /* flush not reached (a dead communicator) */
        if (st == LCX_OK) st = watch(c, r->done, r->is_send ? "send" : "recv");
        /* complete already; the exec's stream is ordered after it all the same, as for any cross-stream use */
        cudaError_t e = st == LCX_OK ? cudaStreamWaitEvent(r->xs, r->done, 0) : cudaSuccess;
        if (e != cudaSuccess) st = die_cuda(c, "wait", e);
    }
    request_free(r);
    return st;
}

/* ---- collectives: queued on the communication stream after the exec's work, completed before returning ------ */

static lcx_status begin(lcx_comm *c, lcx_exec *x) {
    nccl_state *s = st_of(c);
    LCX_TRY(alive(c));
    LCX_TRY(flush(c)); /* transfers posted earlier go first, in the order every rank posted them */
    CU_TRY(c, cudaEventRecord(s->ev_in, stream_of(x)), "waiting for the exec");
    CU_TRY(c, cudaStreamWaitEvent(s->stream, s->ev_in, 0), "waiting for the exec");
    return LCX_OK;
}

static lcx_status finish(lcx_comm *c, lcx_exec *x, ncclResult_t r, const char *what) {
    nccl_state *s = st_of(c);
    LCX_TRY(settle(c, r, what));
    CU_TRY(c, cudaEventRecord(s->ev_done, s->stream), what);
    LCX_TRY(watch(c, s->ev_done, what));
    CU_TRY(c, cudaStreamWaitEvent(stream_of(x), s->ev_done, 0), what);
    return LCX_OK;
}

static lcx_status n_all_reduce(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count,
                               lcx_dtype dt, lcx_comm_op op) {
    nccl_state *s = st_of(c);
    if (!on_device(x)) return s->inner->impl->all_reduce(s->inner, x, send, recv, count, dt, op);
    if (count == 0) return alive(c);
    LCX_TRY(begin(c, x));
    return finish(c, x, ncclAllReduce(send, recv, (size_t)count, type_of(dt), op_of(op), s->nc, s->stream),
                  "ncclAllReduce");
}

static lcx_status n_reduce_scatter(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                   lcx_dtype dt, lcx_comm_op op) {
    nccl_state *s = st_of(c);
    if (!on_device(x)) return s->inner->impl->reduce_scatter(s->inner, x, send, recv, recv_count, dt, op);
    if (recv_count == 0) return alive(c);
    LCX_TRY(begin(c, x));
    return finish(c, x, ncclReduceScatter(send, recv, (size_t)recv_count, type_of(dt), op_of(op), s->nc, s->stream),
                  "ncclReduceScatter");
}

static lcx_status n_all_gather(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                               lcx_dtype dt) {
    nccl_state *s = st_of(c);
    if (!on_device(x)) return s->inner->impl->all_gather(s->inner, x, send, recv, send_count, dt);
    if (send_count == 0) return alive(c);
    LCX_TRY(begin(c, x));
    return finish(c, x, ncclAllGather(send, recv, (size_t)send_count, type_of(dt), s->nc, s->stream), "ncclAllGather");
}

static lcx_status n_broadcast(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root) {
    nccl_state *s = st_of(c);
    if (!on_device(x)) return s->inner->impl->broadcast(s->inner, x, buf, count, dt, root);
    if (count == 0) return alive(c);
    LCX_TRY(begin(c, x));
    return finish(c, x, ncclBroadcast(buf, buf, (size_t)count, type_of(dt), root, s->nc, s->stream), "ncclBroadcast");
}

/* The exec's queued work and this communicator's transfers first, then the host barrier. */
static lcx_status n_barrier(lcx_comm *c, lcx_exec *x) {
    nccl_state *s = st_of(c);
    if (on_device(x)) {
        LCX_TRY(begin(c, x));
        CU_TRY(c, cudaEventRecord(s->ev_done, s->stream), "barrier");
        LCX_TRY(watch(c, s->ev_done, "barrier"));
    }
    return s->inner->impl->barrier(s->inner, on_device(x) ? NULL : x);
}

/* A group of one rank moves nothing: it is staged (a copy at most), and creates no NCCL communicator, whose
 * buffers a one-rank communicator may still allocate (the planner's reserve counts only groups of more). */
static lcx_status n_split(lcx_comm *c, int color, int key, lcx_comm **out) {
    lcx_comm *in = st_of(c)->inner, *sub = NULL;
    LCX_TRY(in->impl->split(in, color, key, &sub));
    const lcx_comm_stager *sg = lcx_comm_stager_cuda();
    lcx_status st = sub->size == 1 && sg ? lcx_comm_staged(sub, sg, out) : lcx_comm_nccl(sub, out);
    if (st != LCX_OK) sub->impl->free(sub);
    return st;
}

/* Everything but the inner communicator (which stays the caller's when creation fails). */
static void release(lcx_comm *c) {
    nccl_state *s = c->state;
    if (s) {
        while (s->first) { /* posted and never waited: the caller's leak, not ours to keep */
            lcx_comm_request *r = s->first;
            s->first = r->next;
            request_free(r);
        }
        if (s->nc) {
            /* Finalize flushes what is queued (polled, so a dead peer cannot hang it), then the local free. */
            if (settle(c, ncclCommFinalize(s->nc), "ncclCommFinalize") == LCX_OK) (void)ncclCommDestroy(s->nc);
            s->nc = NULL;
        }
        if (s->ev_in) (void)cudaEventDestroy(s->ev_in);
        if (s->ev_done) (void)cudaEventDestroy(s->ev_done);
        if (s->stream) (void)cudaStreamDestroy(s->stream);
        free(s);
    }
    free(c);
}

static void n_free(lcx_comm *c) {
    if (!c) return;
    lcx_comm *in = c->state ? st_of(c)->inner : NULL;
    release(c);
    if (in) in->impl->free(in);
}

__attribute__((noreturn)) static void n_abort(lcx_comm *c, int code) {
    nccl_state *s = st_of(c);
    if (s->nc) (void)ncclCommAbort(s->nc);
    s->nc = NULL;
    s->inner->impl->abort(s->inner, code);
}

static const lcx_comm_impl nccl_impl = {
    .name = "nccl",
    .isend = n_isend,
    .irecv = n_irecv,
    .wait = n_wait,
    .all_reduce = n_all_reduce,
    .reduce_scatter = n_reduce_scatter,
    .all_gather = n_all_gather,
    .broadcast = n_broadcast,
    .barrier = n_barrier,
    .split = n_split,
    .free = n_free,
    .abort = n_abort,
};

/* ---- creation ------------------------------------------------------------------------------------------------ */

static lcx_status timeout_of_env(double *out) {
    *out = 600.0;
    const char *v = getenv("LCX_COMM_TIMEOUT_S");
    if (!v || !*v) return LCX_OK;
    char *end;
    double t = strtod(v, &end);
    LCX_FAIL_IF(*end != 0 || !(t > 0 && t < 1e7), LCX_ERR_INVALID,
                "LCX_COMM_TIMEOUT_S='%s' is not a number of seconds > 0", v);
    *out = t;
    return LCX_OK;
}

_Static_assert(sizeof(ncclUniqueId) % 8 == 0 && sizeof(ncclUniqueId) <= 16 * 8, "ncclUniqueId travels as int64s");

/* Rank 0's unique id to every rank of inner; a failure to create it fails every rank with the same line. */
static lcx_status share_id(lcx_comm *inner, ncclUniqueId *id) {
    int64_t msg[17] = {0}; /* the id, then rank 0's ncclResult_t */
    if (inner->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r == ncclSuccess) memcpy(msg, id, sizeof *id);
        msg[16] = (int64_t)r;
    }
    LCX_TRY(inner->impl->broadcast(inner, NULL, msg, 17, LCX_I64, 0));
    LCX_FAIL_IF(msg[16] != ncclSuccess, LCX_ERR_COMM,
                "NCCL: rank 0 of a group of %d could not create the unique id: %s", inner->size,
                ncclGetErrorString((ncclResult_t)msg[16]));
    memcpy(id, msg, sizeof *id);
    return LCX_OK;
}

static lcx_status init(lcx_comm *c, const ncclUniqueId *id) {
    nccl_state *s = st_of(c);
    CU_TRY(c, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "communication stream");
    CU_TRY(c, cudaEventCreateWithFlags(&s->ev_in, cudaEventDisableTiming), "events");
    CU_TRY(c, cudaEventCreateWithFlags(&s->ev_done, cudaEventDisableTiming), "events");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* every call returns at once; settle() polls it under the deadline */
    return settle(c, ncclCommInitRankConfig(&s->nc, c->size, *id, c->rank, &cfg), "ncclCommInitRank");
}

lcx_status lcx_comm_nccl(lcx_comm *inner, lcx_comm **out) {
    LCX_FAIL_IF(!out || !inner, LCX_ERR_INVALID, "comm nccl: missing argument");
    *out = NULL;
    double timeout;
    LCX_TRY(timeout_of_env(&timeout));
    ncclUniqueId id;
    LCX_TRY(share_id(inner, &id));
    lcx_comm *c = calloc(1, sizeof *c);
    nccl_state *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c), free(s);
        return lcx_fail(LCX_ERR_OOM, "rank %d: out of memory for a communicator", inner->world_rank);
    }
    *s = (nccl_state){.inner = inner, .timeout_s = timeout};
    *c = (lcx_comm){.impl = &nccl_impl, .rank = inner->rank, .size = inner->size, .world_rank = inner->world_rank,
                    .state = s};
    lcx_status st = init(c, &id);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st == LCX_OK ? "" : lcx_last_error());
    /* Every rank learns whether every rank succeeded, so that none goes on with a communicator others lack. */
    int64_t failed = st == LCX_OK ? -1 : c->rank;
    lcx_status sa = inner->impl->all_reduce(inner, NULL, &failed, &failed, 1, LCX_I64, LCX_COMM_MAX);
    if (st == LCX_OK && sa != LCX_OK) st = sa;
    else if (st == LCX_OK && failed >= 0)
        st = lcx_fail(LCX_ERR_COMM, "rank %d: NCCL: rank %lld of the group could not join its communicator",
                      c->world_rank, (long long)failed);
    else if (st != LCX_OK)
        st = lcx_fail(st, "%s", msg);
    if (st != LCX_OK) {
        if (s->nc) (void)ncclCommAbort(s->nc); /* its peers may be gone: no finalize */
        s->nc = NULL;
        release(c);
        return st;
    }
    *out = c;
    return LCX_OK;
}

int lcx_comm_nccl_built(void) { return 1; }

#else /* no NCCL in this build */

lcx_status lcx_comm_nccl(lcx_comm *inner, lcx_comm **out) {
    (void)inner;
    if (out) *out = NULL;
    return lcx_fail(LCX_ERR_UNSUPPORTED, "the NCCL communicator is not in this build (CMake found no NCCL)");
}

int lcx_comm_nccl_built(void) { return 0; }

#endif
