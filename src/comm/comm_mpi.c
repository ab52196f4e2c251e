/* comm_mpi: the communicator over MPI (Open MPI from Debian), host buffers of the CPU backend. Every
 * communicator uses MPI_ERRORS_RETURN, so an MPI failure comes back as LCX_ERR_COMM naming the world rank, the
 * call and MPI's error string instead of aborting the job. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm_device.h"
#include "src/comm/comm_impl.h"

struct lcx_comm_request {
    MPI_Request req;
    const char *what; /* "MPI_Isend" / "MPI_Irecv" */
};

static int g_we_initialised; /* this process called MPI_Init_thread (and so finalises) */
static MPI_Op g_bf16_op[LCX_COMM_OP_COUNT] = {MPI_OP_NULL, MPI_OP_NULL};

static MPI_Comm comm_of(const lcx_comm *c) { return *(MPI_Comm *)c->state; }

static lcx_status mpi_fail(int world_rank, int err, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(err, s, &n) != MPI_SUCCESS) n = 0;
    s[n] = 0;
    return lcx_fail(LCX_ERR_COMM, "rank %d: %s failed: %s", world_rank, what, n ? s : "unknown MPI error");
}
#define MPI_TRY(c, call, what)                                                                              \
    do {                                                                                                    \
        int e_ = (call);                                                                                    \
        if (e_ != MPI_SUCCESS) return mpi_fail((c)->world_rank, e_, (what));                                \
    } while (0)

/* bfloat16 has no MPI type: it travels as 16-bit words and is reduced by these, in float32 per step. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = lcx_f32_to_bf16(lcx_bf16_to_f32(a[i]) + lcx_bf16_to_f32(b[i]));
}
static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        if (lcx_bf16_to_f32(a[i]) > lcx_bf16_to_f32(b[i])) b[i] = a[i];
}

static MPI_Datatype type_of(lcx_dtype dt) {
    switch (dt) {
    case LCX_F32: return MPI_FLOAT;
    case LCX_F64: return MPI_DOUBLE;
    case LCX_I64: return MPI_INT64_T;
    default: return MPI_UINT16_T; /* LCX_BF16 (the only other dtype comm.c lets through) */
    }
}

static MPI_Op op_of(lcx_dtype dt, lcx_comm_op op) {
    if (dt == LCX_BF16) return g_bf16_op[op];
    return op == LCX_COMM_MAX ? MPI_MAX : MPI_SUM;
}

/* MPI counts are int; the exec's queued work must be done before MPI reads host memory. */
static lcx_status prepare(const lcx_comm *c, lcx_exec *x, int64_t count, const char *what) {
    LCX_FAIL_IF(x && strcmp(x->be->name, "cpu") != 0, LCX_ERR_UNSUPPORTED,
                "%s: the MPI communicator moves host buffers only (backend %s needs NCCL)", what, x->be->name);
    LCX_FAIL_IF(count > INT_MAX, LCX_ERR_UNSUPPORTED, "%s: %lld elements exceed MPI's int count", what,
                (long long)count);
    if (x) LCX_TRY(x->be->sync(x));
    (void)c;
    return LCX_OK;
}

static lcx_status m_isend(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer,
                          int tag, lcx_comm_request **out) {
    LCX_TRY(prepare(c, x, count, "isend"));
    lcx_comm_request *r = calloc(1, sizeof *r);
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "rank %d: out of memory for a request", c->world_rank);
    r->what = "MPI_Isend";
    int e = MPI_Isend(buf, (int)count, type_of(dt), peer, tag, comm_of(c), &r->req);
    if (e != MPI_SUCCESS) {
        free(r);
        return mpi_fail(c->world_rank, e, "MPI_Isend");
    }
    *out = r;
    return LCX_OK;
}

static lcx_status m_irecv(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                          lcx_comm_request **out) {
    LCX_TRY(prepare(c, x, count, "irecv"));
    lcx_comm_request *r = calloc(1, sizeof *r);
    LCX_FAIL_IF(!r, LCX_ERR_OOM, "rank %d: out of memory for a request", c->world_rank);
    r->what = "MPI_Irecv";
    int e = MPI_Irecv(buf, (int)count, type_of(dt), peer, tag, comm_of(c), &r->req);
    if (e != MPI_SUCCESS) {
        free(r);
        return mpi_fail(c->world_rank, e, "MPI_Irecv");
    }
    *out = r;
    return LCX_OK;
}

static lcx_status m_wait(lcx_comm *c, lcx_comm_request *r) {
    /* MPI_Wait returns the transfer's error itself (status.MPI_ERROR is set only by the multi-waits). */
    int e = MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    const char *what = r->what;
    free(r);
    return e == MPI_SUCCESS ? LCX_OK : mpi_fail(c->world_rank, e, what);
}

static lcx_status m_all_reduce(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count,
                               lcx_dtype dt, lcx_comm_op op) {
    LCX_TRY(prepare(c, x, count, "all_reduce"));
    MPI_TRY(c, MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, type_of(dt), op_of(dt, op),
                             comm_of(c)),
            "MPI_Allreduce");
    return LCX_OK;
}

static lcx_status m_reduce_scatter(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                   lcx_dtype dt, lcx_comm_op op) {
    LCX_TRY(prepare(c, x, recv_count * c->size, "reduce_scatter"));
    MPI_TRY(c, MPI_Reduce_scatter_block(send, recv, (int)recv_count, type_of(dt), op_of(dt, op), comm_of(c)),
            "MPI_Reduce_scatter_block");
    return LCX_OK;
}

static lcx_status m_all_gather(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                               lcx_dtype dt) {
    LCX_TRY(prepare(c, x, send_count * c->size, "all_gather"));
    MPI_TRY(c, MPI_Allgather(send, (int)send_count, type_of(dt), recv, (int)send_count, type_of(dt), comm_of(c)),
            "MPI_Allgather");
    return LCX_OK;
}

static lcx_status m_broadcast(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root) {
    LCX_TRY(prepare(c, x, count, "broadcast"));
    MPI_TRY(c, MPI_Bcast(buf, (int)count, type_of(dt), root, comm_of(c)), "MPI_Bcast");
    return LCX_OK;
}

static lcx_status m_barrier(lcx_comm *c, lcx_exec *x) {
    LCX_TRY(prepare(c, x, 0, "barrier"));
    MPI_TRY(c, MPI_Barrier(comm_of(c)), "MPI_Barrier");
    return LCX_OK;
}

static lcx_status wrap(MPI_Comm mc, int world_rank, int owned, lcx_comm **out);

static lcx_status m_split(lcx_comm *c, int color, int key, lcx_comm **out) {
    MPI_Comm nc;
    MPI_TRY(c, MPI_Comm_split(comm_of(c), color, key, &nc), "MPI_Comm_split");
    return wrap(nc, c->world_rank, 1, out);
}

typedef struct mpi_state {
    MPI_Comm comm; /* first: comm_of reads it */
    int owned;     /* split from another (freed with it); the world is MPI's */
} mpi_state;

static void m_free(lcx_comm *c) {
    if (!c) return;
    mpi_state *s = c->state;
    if (s && s->owned) MPI_Comm_free(&s->comm);
    free(s);
    free(c);
}

__attribute__((noreturn)) static void m_abort(lcx_comm *c, int code) {
    MPI_Abort(comm_of(c), code);
    exit(code); /* MPI_Abort does not return; this is for the compiler and a broken MPI */
}

static const lcx_comm_impl mpi_impl = {
    .name = "mpi",
    .isend = m_isend,
    .irecv = m_irecv,
    .wait = m_wait,
    .all_reduce = m_all_reduce,
    .reduce_scatter = m_reduce_scatter,
    .all_gather = m_all_gather,
    .broadcast = m_broadcast,
    .barrier = m_barrier,
    .split = m_split,
    .free = m_free,
    .abort = m_abort,
};

static lcx_status wrap(MPI_Comm mc, int world_rank, int owned, lcx_comm **out) {
    lcx_comm *c = calloc(1, sizeof *c);
    mpi_state *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        if (owned) MPI_Comm_free(&mc);
        return lcx_fail(LCX_ERR_OOM, "rank %d: out of memory for a communicator", world_rank);
    }
    s->comm = mc;
    s->owned = owned;
    *c = (lcx_comm){.impl = &mpi_impl, .world_rank = world_rank, .state = s};
    int e = MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    if (e == MPI_SUCCESS) e = MPI_Comm_rank(mc, &c->rank);
    if (e == MPI_SUCCESS) e = MPI_Comm_size(mc, &c->size);
    if (e != MPI_SUCCESS) {
        m_free(c);
        return mpi_fail(world_rank, e, "setting up a communicator");
    }
    *out = c;
    return LCX_OK;
}

lcx_status lcx_comm_mpi_world(const char *launcher, int expect_size, lcx_comm **out) {
    int inited = 0, e;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        /* Only the thread that called init talks to MPI (OpenMP threads never do). */
        e = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (e != MPI_SUCCESS) return mpi_fail(-1, e, "MPI_Init_thread");
        g_we_initialised = 1;
        /* Errors from here on come back to us, also those raised outside any communicator. */
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        LCX_FAIL_IF(provided < MPI_THREAD_FUNNELED, LCX_ERR_COMM, "MPI provides thread level %d, need FUNNELED",
                    provided);
    }
    if (g_bf16_op[LCX_COMM_SUM] == MPI_OP_NULL) {
        MPI_Op_create(bf16_sum, 1, &g_bf16_op[LCX_COMM_SUM]);
        MPI_Op_create(bf16_max, 1, &g_bf16_op[LCX_COMM_MAX]);
    }
    int rank = 0, size = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    LCX_FAIL_IF(expect_size > 0 && size != expect_size, LCX_ERR_COMM,
                "rank %d: the launcher (%s) started %d ranks but MPI's world has %d (under Slurm run through srun "
                "with MPI support, e.g. srun --mpi=pmix)",
                rank, launcher, expect_size, size);
    return wrap(MPI_COMM_WORLD, rank, 0, out);
}

lcx_status lcx_comm_mpi_finalize(void) {
    if (!g_we_initialised) return LCX_OK;
    for (int i = 0; i < LCX_COMM_OP_COUNT; i++)
        if (g_bf16_op[i] != MPI_OP_NULL) MPI_Op_free(&g_bf16_op[i]);
    g_we_initialised = 0;
    int e = MPI_Finalize();
    return e == MPI_SUCCESS ? LCX_OK : mpi_fail(-1, e, "MPI_Finalize");
}

lcx_status lcx_comm_node_rank(lcx_comm *c, int *rank, int *size) {
    *rank = 0, *size = 1;
    if (c->size == 1 && strcmp(c->impl->name, "mpi") != 0) return LCX_OK;
    LCX_FAIL_IF(strcmp(c->impl->name, "mpi") != 0, LCX_ERR_UNSUPPORTED,
                "rank %d: node-local ranks need an MPI communicator, not %s", c->world_rank, c->impl->name);
    MPI_Comm node;
    MPI_TRY(c, MPI_Comm_split_type(comm_of(c), MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
    int e = MPI_Comm_rank(node, rank);
    if (e == MPI_SUCCESS) e = MPI_Comm_size(node, size);
    MPI_Comm_free(&node);
    return e == MPI_SUCCESS ? LCX_OK : mpi_fail(c->world_rank, e, "the node's ranks");
}
