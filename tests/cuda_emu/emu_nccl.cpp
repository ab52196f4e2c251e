/* emu_nccl.cpp: emu_nccl.h over MPI (see there). Transfers in flight are numbered; emu_runtime.cpp's events keep
 * the number of the last one posted when they were recorded and are ready once every transfer up to it has
 * completed (emu_nccl_done_through). */
#include "emu_nccl.h"

#define OMPI_SKIP_MPICXX 1 /* the C API only */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "src/core/tensor.h"

struct emu_nccl_comm {
    MPI_Comm mpi;
    int rank, size;
};

namespace {

struct flight {
    long seq;
    MPI_Request req;
    ncclComm_t comm;
    bool done;
};
std::vector<flight> flights; /* posted by ncclGroupEnd, in order, until they complete */
long last_seq;

struct p2p {
    bool send;
    void *buf;
    size_t count;
    ncclDataType_t type;
    int peer;
    ncclComm_t comm;
};
int group_depth;
std::vector<p2p> grouped;

size_t size_of(ncclDataType_t t) { return t == ncclBfloat16 ? 2 : t == ncclFloat32 ? 4 : 8; }

MPI_Datatype mpi_type(ncclDataType_t t) {
    switch (t) {
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclInt64: return MPI_INT64_T;
    default: return MPI_UINT16_T; /* bf16: the user ops below */
    }
}

void bf16_sum(void *in, void *inout, int *n, MPI_Datatype *) {
    const uint16_t *a = (const uint16_t *)in;
    uint16_t *b = (uint16_t *)inout;
    for (int i = 0; i < *n; i++) b[i] = lcx_f32_to_bf16(lcx_bf16_to_f32(a[i]) + lcx_bf16_to_f32(b[i]));
}
void bf16_max(void *in, void *inout, int *n, MPI_Datatype *) {
    const uint16_t *a = (const uint16_t *)in;
    uint16_t *b = (uint16_t *)inout;
    for (int i = 0; i < *n; i++)
        if (lcx_bf16_to_f32(a[i]) > lcx_bf16_to_f32(b[i])) b[i] = a[i];
}

MPI_Op mpi_op(ncclDataType_t t, ncclRedOp_t op) {
    static MPI_Op sum16 = MPI_OP_NULL, max16 = MPI_OP_NULL;
    if (t != ncclBfloat16) return op == ncclMax ? MPI_MAX : MPI_SUM;
    if (sum16 == MPI_OP_NULL) MPI_Op_create(bf16_sum, 1, &sum16);
    if (max16 == MPI_OP_NULL) MPI_Op_create(bf16_max, 1, &max16);
    return op == ncclMax ? max16 : sum16;
}

ncclResult_t check(int mpi_rc) { return mpi_rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError; }

/* Forget the completed transfers (the events that waited for them are ready), so that polling stays short. */
void forget_done(void) {
    flights.erase(std::remove_if(flights.begin(), flights.end(), [](const flight &f) { return f.done; }),
                  flights.end());
}

/* Complete the transfers in flight that pick selects: wait for each, cancelled first when cancel is set. */
template <class Pick> void complete(Pick pick, bool cancel) {
    for (flight &f : flights)
        if (!f.done && pick(f)) {
            if (cancel) MPI_Cancel(&f.req);
            MPI_Wait(&f.req, MPI_STATUS_IGNORE);
            f.done = true;
        }
    forget_done();
}

/* comm's transfers in flight, completed: a collective goes after them, as on the communicator's one stream */
void wait_comm(ncclComm_t comm) {
    complete([comm](const flight &f) { return f.comm == comm; }, false);
}

/* MPI for a process that runs without mpirun (the single communicator never starts it): a singleton. */
void ensure_mpi(void) {
    int up = 0;
    MPI_Initialized(&up);
    if (up) return;
    MPI_Init(NULL, NULL);
    atexit([] {
        int down = 0;
        MPI_Finalized(&down);
        if (!down) MPI_Finalize();
    });
}

/* The meeting directory of an id (its first bytes are the path, NUL-terminated). */
const char *dir_of(const ncclUniqueId *id) { return id->internal; }

} // namespace

extern "C" {

long emu_nccl_in_flight_mark(void) { return last_seq; }

int emu_nccl_done_through(long mark) {
    int all = 1;
    for (flight &f : flights)
        if (!f.done && f.seq <= mark) {
            int flag = 0;
            MPI_Test(&f.req, &flag, MPI_STATUS_IGNORE);
            f.done = flag != 0;
            all &= f.done;
        }
    forget_done();
    return all;
}

void emu_nccl_wait_through(long mark) {
    complete([mark](const flight &f) { return f.seq <= mark; }, false);
}

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "unhandled system error (emulated)";
    }
}
const char *ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    ensure_mpi();
    memset(id, 0, sizeof *id);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    const char *tmp = getenv("TMPDIR");
    snprintf(id->internal, sizeof id->internal, "%s/emu_nccl.%d.%lld.%ld", tmp && *tmp ? tmp : "/tmp", (int)getpid(),
             (long long)t.tv_sec, (long)t.tv_nsec);
    return mkdir(id->internal, 0700) == 0 ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *) {
    *comm = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    ensure_mpi();
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    char path[256], tmp[300];
    snprintf(path, sizeof path, "%s/%d", dir_of(&id), rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ncclSystemError;
    fprintf(f, "%d\n", world_rank);
    fclose(f);
    if (rename(tmp, path) != 0) return ncclSystemError;
    std::vector<int> members((size_t)nranks, -1);
    for (int r = 0; r < nranks; r++) { /* every member's world rank, as it arrives */
        snprintf(path, sizeof path, "%s/%d", dir_of(&id), r);
        for (int tries = 0; members[(size_t)r] < 0; tries++) {
            FILE *g = fopen(path, "r");
            if (g) {
                if (fscanf(g, "%d", &members[(size_t)r]) != 1) members[(size_t)r] = -1;
                fclose(g);
            }
            if (members[(size_t)r] < 0) {
                if (tries > 60000) return ncclSystemError; /* a minute: a member that never came */
                usleep(1000);
            }
        }
    }
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, nranks, members.data(), &group);
    ncclComm_t c = (ncclComm_t)calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    int rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, members[0] & 0x7fff, &c->mpi);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    if (rc != MPI_SUCCESS) {
        free(c);
        return ncclSystemError;
    }
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->size);
    MPI_Barrier(c->mpi); /* every member has read the directory: rank 0 removes it */
    if (c->rank == 0) {
        for (int r = 0; r < nranks; r++) {
            snprintf(path, sizeof path, "%s/%d", dir_of(&id), r);
            unlink(path);
        }
        rmdir(dir_of(&id));
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
    if (!comm) return ncclInvalidArgument;
    *async_error = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    wait_comm(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    MPI_Comm_free(&comm->mpi);
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    /* what nothing will match: cancelled, so that the events waiting for it complete */
    complete([comm](const flight &f) { return f.comm == comm; }, true);
    free(comm); /* its MPI communicator is left: freeing it is collective in spirit, and peers may be gone */
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    if (group_depth < 1) return ncclInvalidUsage;
    if (--group_depth > 0) return ncclSuccess;
    for (const p2p &p : grouped) {
        flight f = {++last_seq, MPI_REQUEST_NULL, p.comm, false};
        int rc = p.send ? MPI_Isend(p.buf, (int)p.count, mpi_type(p.type), p.peer, 0, p.comm->mpi, &f.req)
                        : MPI_Irecv(p.buf, (int)p.count, mpi_type(p.type), p.peer, 0, p.comm->mpi, &f.req);
        if (rc != MPI_SUCCESS) {
            grouped.clear();
            return ncclSystemError;
        }
        flights.push_back(f);
    }
    grouped.clear();
    return ncclSuccess;
}

static ncclResult_t p2p_call(bool send, void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm) {
    if (!comm || peer < 0 || peer >= comm->size || count > (size_t)INT32_MAX) return ncclInvalidArgument;
    grouped.push_back({send, buf, count, type, peer, comm});
    if (group_depth == 0) return ncclGroupStart() == ncclSuccess ? ncclGroupEnd() : ncclInternalError;
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
    return p2p_call(true, (void *)(uintptr_t)buf, count, type, peer, comm);
}
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
    return p2p_call(false, buf, count, type, peer, comm);
}

/* Collectives complete before they return, after the communicator's transfers posted before them. */
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
    if (!comm || count > (size_t)INT32_MAX) return ncclInvalidArgument;
    wait_comm(comm);
    return check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(type),
                               mpi_op(type, op), comm->mpi));
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
    if (!comm || recv_count > (size_t)INT32_MAX) return ncclInvalidArgument;
    wait_comm(comm);
    const size_t bytes = recv_count * size_of(type) * (size_t)comm->size;
    std::vector<char> in((const char *)send, (const char *)send + bytes); /* NCCL's in-place form aliases recv */
    return check(MPI_Reduce_scatter_block(in.data(), recv, (int)recv_count, mpi_type(type), mpi_op(type, op),
                                          comm->mpi));
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
    if (!comm || send_count > (size_t)INT32_MAX) return ncclInvalidArgument;
    wait_comm(comm);
    const size_t bytes = send_count * size_of(type);
    std::vector<char> in((const char *)send, (const char *)send + bytes); /* the in-place form: send inside recv */
    return check(MPI_Allgather(in.data(), (int)send_count, mpi_type(type), recv, (int)send_count, mpi_type(type),
                               comm->mpi));
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t) {
    if (!comm || root < 0 || root >= comm->size || count > (size_t)INT32_MAX) return ncclInvalidArgument;
    wait_comm(comm);
    if (comm->rank == root && send != recv) memcpy(recv, send, count * size_of(type));
    return check(MPI_Bcast(recv, (int)count, mpi_type(type), root, comm->mpi));
}

} /* extern "C" */
