/* comm: the communication contract. One table of function pointers (lcx_comm_impl), implemented for a single
 * rank (src/comm/comm_single.c) and over MPI (src/comm/comm_mpi.c, Open MPI from Debian), and for device buffers
 * MPI staged through host memory and NCCL (src/comm/comm_device.h). The model, the trainer and the parallel
 * algorithms are written once against the calls below. Spec: docs/parallel.md "Communicator".
 *
 * ---- World, mesh and groups ---------------------------------------------------------------------------------
 * lcx_comm_world_init detects a launcher from the environment (lcx_comm_detect_launch: mpirun, PMI/PMIx, srun).
 * Launched with more than one rank, the world is MPI_COMM_WORLD (MPI_Init_thread is called once); otherwise
 * the run is a single rank and MPI is never initialised. lcx_comm_mesh lays a TP x CP x DP mesh
 * (src/core/layout.h) over the world, rank = t + tp * (c + cp * d), and creates one communicator per group kind
 * (TP, CP, DP and GRAD = CP x DP). A group communicator's rank of a process is its position in
 * lcx_mesh_group's list (ascending world rank; for GRAD c + cp * d).
 *
 * ---- Buffers, dtypes, reductions ----------------------------------------------------------------------------
 * - Buffers are device pointers of the exec's backend (host memory for the CPU backend). exec may be NULL: the
 *   buffers are host memory. Counts are elements (int64_t, >= 0); a count of 0 moves nothing.
 * - dtypes: LCX_F32, LCX_BF16, LCX_F64, LCX_I64; reductions: LCX_COMM_SUM, LCX_COMM_MAX. bfloat16 is reduced in
 *   float32 and rounded to nearest even after each pairwise step; the order of the steps belongs to the
 *   implementation, so only sums exact in bfloat16 are reproducible across implementations.
 * - Every call takes the same arguments on every rank of the communicator (collectives: same count, dtype,
 *   op and root), and every rank calls the collectives of one communicator in the same order.
 *
 * ---- Ordering and completion --------------------------------------------------------------------------------
 * - Collectives are queued on the exec's queue after the work already queued there, like ops
 *   (kernels/backend.h): they may return before the data has moved (a CUDA stream), and their buffers must stay
 *   valid until the queue has passed them. On the CPU (and with exec NULL) they have completed when they return.
 * - isend/irecv return a request at once; the transfer is complete only when lcx_comm_wait (or waitall) has
 *   returned for that request. Until then the send buffer must not change and the receive buffer must not be
 *   read. Each request is waited exactly once (wait frees it, also on failure). Post both ends of an exchange
 *   before waiting: the CP ring posts its send to rank + 1 and its receive from rank - 1, then waits for both.
 *   Messages between one pair of ranks with one tag arrive in the order they were sent.
 *
 * ---- Errors -------------------------------------------------------------------------------------------------
 * Bad arguments fail at the call with LCX_ERR_INVALID or LCX_ERR_UNSUPPORTED (dtype, backend) naming the value.
 * A failing transfer returns LCX_ERR_COMM whose message names the world rank, the call and the MPI error
 * string: MPI communicators use MPI_ERRORS_RETURN, so MPI never aborts the job on its own. A rank that cannot
 * go on (its peers would wait forever) ends the whole job with lcx_comm_abort. The library never prints. */
#ifndef LCX_COMM_H
#define LCX_COMM_H

#include <stdint.h>

#include "kernels/backend.h"
#include "src/core/layout.h"
#include "src/core/report.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

typedef enum lcx_comm_op {
    LCX_COMM_SUM = 0,
    LCX_COMM_MAX,
    LCX_COMM_OP_COUNT
} lcx_comm_op;

/* Tags of isend/irecv: 0 .. LCX_COMM_TAG_MAX (the smallest upper bound MPI guarantees). */
#define LCX_COMM_TAG_MAX 32767

typedef struct lcx_comm lcx_comm;
typedef struct lcx_comm_request lcx_comm_request; /* one implementation's pending transfer (opaque) */

/* The implementation table. Arguments reach it validated (lcx_comm_* below check ranks, counts, dtypes,
 * buffers), so an implementation checks only what is its own (counts that fit MPI's int, backends). */
typedef struct lcx_comm_impl {
    const char *name; /* "single", "mpi", "staged", "nccl" */
    lcx_status (*isend)(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                        lcx_comm_request **out);
    lcx_status (*irecv)(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                        lcx_comm_request **out);
    lcx_status (*wait)(lcx_comm *c, lcx_comm_request *req); /* completes and frees req */
    lcx_status (*all_reduce)(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count, lcx_dtype dt,
                             lcx_comm_op op);
    lcx_status (*reduce_scatter)(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                 lcx_dtype dt, lcx_comm_op op);
    lcx_status (*all_gather)(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                             lcx_dtype dt);
    lcx_status (*broadcast)(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root);
    lcx_status (*barrier)(lcx_comm *c, lcx_exec *x);
    /* Collective over c: processes with the same color form one new communicator, ordered by key. */
    lcx_status (*split)(lcx_comm *c, int color, int key, lcx_comm **out);
    void (*free)(lcx_comm *c);                           /* the communicator and its state (not the world's MPI) */
    void (*abort)(lcx_comm *c, int code) __attribute__((noreturn));
} lcx_comm_impl;

/* A communicator: a set of processes numbered 0 .. size-1. */
struct lcx_comm {
    const lcx_comm_impl *impl;
    int rank, size;  /* this process in the communicator */
    int world_rank;  /* this process in the world (named in error messages) */
    void *state;     /* the implementation's */
};

/* ---- launcher and world -------------------------------------------------------------------------------------- */

/* What started this process, from the environment, first match wins (the order of lcx_launch_rank):
 * OMPI_COMM_WORLD_SIZE/RANK ("mpirun"), PMIX_RANK ("pmix", size unknown: -1), PMI_SIZE/PMI_RANK ("pmi"),
 * SLURM_NTASKS/SLURM_PROCID ("srun"); none: "none", rank 0, size 1. A malformed or inconsistent value fails
 * with LCX_ERR_INVALID naming the variable. */
typedef struct lcx_launch {
    const char *launcher;
    int rank, size;
} lcx_launch;
lcx_status lcx_comm_detect_launch(lcx_launch *out);

/* The world communicator: MPI when the launcher started more than one rank (or an unknown number), else the
 * single-rank implementation. Fails with LCX_ERR_COMM if MPI's world disagrees with the launcher's size. */
lcx_status lcx_comm_world_init(lcx_comm **out);
/* Free the world; if this process initialised MPI, MPI_Finalize (collective: every rank calls it). Group
 * communicators must be freed first. NULL ok. */
lcx_status lcx_comm_finalize(lcx_comm *world);

/* A communicator of one rank, outside any launcher (tests, tools that never communicate). */
lcx_status lcx_comm_single(lcx_comm **out);

/* ---- mesh groups ------------------------------------------------------------------------------------------- */

typedef struct lcx_comm_groups {
    lcx_mesh mesh;
    lcx_mesh_coord coord;                 /* of this process */
    lcx_comm *group[LCX_GROUP_COUNT];     /* indexed by lcx_group_kind */
} lcx_comm_groups;

/* Collective over world. Checks world->size == mesh->world ("mesh tp=2 cp=2 dp=2 needs 8 ranks, but the world
 * has 4") and that every rank passed the same mesh, both with the same message on every rank; then splits the
 * world into the four group communicators. On failure *out holds no communicators. */
lcx_status lcx_comm_mesh(lcx_comm *world, const lcx_mesh *mesh, lcx_comm_groups *out);
/* Free the group communicators (NULL entries ok). */
void lcx_comm_groups_free(lcx_comm_groups *g);

/* ---- point to point ---------------------------------------------------------------------------------------- */

/* Start sending count elements of buf to rank `peer` of c (peer == c->rank works), tag in [0, LCX_COMM_TAG_MAX]. */
lcx_status lcx_comm_isend(lcx_comm *c, lcx_exec *x, const void *buf, int64_t count, lcx_dtype dt, int peer,
                          int tag, lcx_comm_request **out);
/* Start receiving up to count elements from rank `peer` with `tag` into buf; a longer message fails at wait. */
lcx_status lcx_comm_irecv(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int peer, int tag,
                          lcx_comm_request **out);
/* Complete and free one request (NULL: nothing to do). A request that can never complete (single rank: no
 * matching send/receive posted) fails with LCX_ERR_COMM instead of hanging. */
lcx_status lcx_comm_wait(lcx_comm *c, lcx_comm_request *req);
/* Wait for every request in reqs[0..n) (each set to NULL), even after a failure; returns the first failure. */
lcx_status lcx_comm_waitall(lcx_comm *c, int n, lcx_comm_request **reqs);

/* ---- collectives (queued on x; complete on return on the CPU) ----------------------------------------------- */

/* recv[i] = op over ranks r of send_r[i], i < count. send == recv is in place; otherwise they must not overlap. */
lcx_status lcx_comm_all_reduce(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t count,
                               lcx_dtype dt, lcx_comm_op op);
/* send holds size * recv_count elements; rank r gets recv[i] = op over ranks q of send_q[r * recv_count + i]. */
lcx_status lcx_comm_reduce_scatter(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t recv_count,
                                   lcx_dtype dt, lcx_comm_op op);
/* recv holds size * send_count elements: recv[r * send_count + i] = send_r[i], ranks in the communicator's order. */
lcx_status lcx_comm_all_gather(lcx_comm *c, lcx_exec *x, const void *send, void *recv, int64_t send_count,
                               lcx_dtype dt);
/* Every rank's buf = root's buf. */
lcx_status lcx_comm_broadcast(lcx_comm *c, lcx_exec *x, void *buf, int64_t count, lcx_dtype dt, int root);
/* Returns once every rank of c has entered it (queued like the others: on a stream, later work waits). */
lcx_status lcx_comm_barrier(lcx_comm *c, lcx_exec *x);
/* Where the ranks of c could have gone different ways: collective over c (NULL or size 1: returns st). Every rank
 * learns whether any failed; a rank that did not fail returns LCX_ERR_COMM naming the lowest failing rank, a rank
 * that failed returns its own st. */
lcx_status lcx_comm_agree(lcx_comm *c, lcx_status st);

/* ---- fatal errors ------------------------------------------------------------------------------------------ */

/* End the whole job: hand `message` to the reporter as a warning (NULL reporter: none), then MPI_Abort on c
 * (every rank of the job ends, with exit code `code`); a single rank exits with `code`. Never returns. */
void lcx_comm_abort(lcx_comm *c, const lcx_reporter *r, int code, const char *message) __attribute__((noreturn));

/* Bytes per element of a communicable dtype, 0 for any other. */
size_t lcx_comm_dtype_size(lcx_dtype dt);

#endif /* LCX_COMM_H */
