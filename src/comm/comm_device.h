/* comm_device: communicators for device buffers. Two implementations of comm.h's table wrap a host communicator
 * (the "inner" one: MPI or single) and take over the calls whose exec is a device queue:
 *  - staged (src/comm/comm_staged.c, every build): device buffers are copied to host staging buffers, moved by
 *    the inner communicator, and copied back. With the CUDA stager the staging buffers are pinned
 *    (cudaMallocHost) and the copies run on a copy stream ordered by events (src/comm/comm_stage_cuda.c). This is
 *    how several ranks share one GPU, so the multi-rank GPU path is testable on one device.
 *  - nccl (src/comm/comm_nccl.c, built when CMake finds NCCL): one rank per GPU, collectives and grouped
 *    send/receive over NCCL on the communicator's own stream.
 * Calls with exec NULL (host buffers: loss sums, flags, checkpoint lists) always go to the inner communicator, so
 * a wrapped communicator is a drop-in replacement for its inner one. Spec: docs/parallel.md "Device buffers".
 *
 * Status: the staged communicator with the backend stager is tested on the CPU (tests/unit/test_comm_staged_mpi.c);
 * the CUDA stager and NCCL are compiled only, not yet run on a GPU (docs/cuda.md). */
#ifndef LCX_COMM_DEVICE_H
#define LCX_COMM_DEVICE_H

#include <stddef.h>

#include "src/comm/comm.h"

/* How the staged communicator moves bytes between an exec's device buffers and host staging buffers. */
typedef struct lcx_comm_stager {
    const char *name; /* "backend", "cuda" */
    lcx_status (*host_alloc)(size_t bytes, void **out);
    void (*host_free)(void *p);
    /* host <- dev, after the work already queued on x; complete when it returns. */
    lcx_status (*to_host)(lcx_exec *x, void *host, const void *dev, size_t bytes);
    /* dev <- host: work queued on x after this call sees the data, and host may be reused when it returns. */
    lcx_status (*to_device)(lcx_exec *x, void *dev, const void *host, size_t bytes);
} lcx_comm_stager;

/* malloc'd staging through the exec's own copy_d2h / copy_h2d: any backend (the CPU's are memcpy). */
const lcx_comm_stager *lcx_comm_stager_backend(void);
/* Pinned staging on a copy stream (CUDA builds); NULL without CUDA. */
const lcx_comm_stager *lcx_comm_stager_cuda(void);

/* A communicator over `inner` whose device-buffer calls are staged by sg. On success it owns inner (freed with
 * it; lcx_comm_finalize of it finalises MPI as for inner); on failure inner stays the caller's. Not collective. */
lcx_status lcx_comm_staged(lcx_comm *inner, const lcx_comm_stager *sg, lcx_comm **out);

/* A NCCL communicator over the same ranks as `inner` (collective over inner: rank 0 creates the unique id and
 * broadcasts it through inner). The current CUDA device must be this rank's (lcx_comm_for_backend sets it).
 * Owns inner on success, as lcx_comm_staged. Without NCCL in the build: LCX_ERR_UNSUPPORTED. */
lcx_status lcx_comm_nccl(lcx_comm *inner, lcx_comm **out);
/* 1 when this build has the NCCL communicator. */
int lcx_comm_nccl_built(void);

/* This process's rank among the ranks of c on its node, and their number (MPI_Comm_split_type shared; collective
 * over c). A single-rank communicator: 0 of 1; any other kind: LCX_ERR_UNSUPPORTED. */
lcx_status lcx_comm_node_rank(lcx_comm *c, int *rank, int *size);

/* The world communicator for the model's backend `be` (collective over world; call it before creating any exec of
 * be, since it picks this rank's GPU). A NULL or CPU backend: *out = world, unchanged. The CUDA backend: the
 * environment variable LCX_COMM_DEVICE picks the communicator, the same on every rank:
 *   auto (default)  nccl when NCCL is built and this node has at least as many GPUs as ranks, else staged;
 *   nccl            one rank per GPU (fails with a line naming the counts when the node has too few GPUs);
 *   staged          MPI with pinned staging; ranks share the node's GPUs round-robin.
 * The GPU is the node-local rank (MPI_Comm_split_type shared) modulo the GPU count. Groups split from the
 * result (lcx_comm_mesh) are of the same kind, but a group of one rank split from nccl is staged (it moves
 * nothing, and a NCCL communicator would hold buffers). On success *out owns world (finalise *out instead); on
 * failure world stays the caller's. */
lcx_status lcx_comm_for_backend(lcx_comm *world, const lcx_backend *be, lcx_comm **out);

#endif /* LCX_COMM_DEVICE_H */
