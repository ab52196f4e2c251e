/* emu_nccl.h: the NCCL API subset of src/comm/comm_nccl.c, for tests/cuda_emu/backend_run.sh, which puts it in
 * place of <nccl.h>; emu_nccl.cpp implements it over MPI, so that the NCCL communicator's own logic (the unique
 * id, non-blocking creation, send/recv issued as one group, the events its watchdog polls, the abort) runs on the
 * CPU under mpirun. What it cannot show: NCCL's transports, its own-order sums (MPI's are used), its buffers.
 *
 * - Communicators: ncclCommInitRankConfig meets the other ranks of the id in a directory named by the id (each
 *   writes its MPI world rank there) and makes an MPI communicator of them in NCCL rank order
 *   (MPI_Comm_create_group, collective over those ranks only, as NCCL's creation is).
 * - Send/recv between ncclGroupStart and ncclGroupEnd are posted at the end as MPI_Isend/MPI_Irecv and stay in
 *   flight: an event recorded after them (emu_runtime.cpp) is not ready until they complete, so a receive that
 *   nothing matches never completes, as on a GPU. Collectives complete before they return.
 * - ncclCommAbort cancels what is in flight; ncclCommGetAsyncError reports no error. */
#ifndef LCX_EMU_NCCL_H
#define LCX_EMU_NCCL_H

#include <stddef.h>

#include "emu_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;
typedef enum { ncclInt64 = 5, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclMax = 3 } ncclRedOp_t;
typedef struct emu_nccl_comm *ncclComm_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef struct {
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1}

const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
