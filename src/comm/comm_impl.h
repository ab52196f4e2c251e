/* comm_impl: what the implementations share with the dispatching code (src/comm/comm.c, launch.c); not for
 * callers of the communicator. */
#ifndef LCX_COMM_IMPL_H
#define LCX_COMM_IMPL_H

#include "src/comm/comm.h"

/* The state of a device communicator ("staged", "nccl"; comm_device.h) is a struct whose first member is the
 * lcx_comm * it wraps (and frees): lcx_comm_finalize follows it to find MPI. */

/* A one-rank communicator whose error messages name world rank `world_rank`. */
lcx_status lcx_comm_single_create(int world_rank, lcx_comm **out);

/* MPI_Init_thread (once per process) and the world communicator with MPI_ERRORS_RETURN. `expect_size` > 0: the
 * launcher's world size, which MPI must agree with; `launcher` names it in that error. */
lcx_status lcx_comm_mpi_world(const char *launcher, int expect_size, lcx_comm **out);
/* MPI_Finalize when lcx_comm_mpi_world initialised MPI (LCX_OK otherwise). */
lcx_status lcx_comm_mpi_finalize(void);

/* CUDA builds (src/comm/comm_stage_cuda.c): the number of visible GPUs (0 without CUDA), and cudaSetDevice. */
int lcx_comm_cuda_devices(void);
lcx_status lcx_comm_cuda_set_device(int device);

#endif /* LCX_COMM_IMPL_H */
