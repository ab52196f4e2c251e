/* comm_device: which communicator moves the model's device buffers (lcx_comm_for_backend, comm_device.h). The
 * CPU backend keeps the world as it is; the CUDA backend gets NCCL (one rank per GPU) or MPI with pinned staging
 * (ranks sharing GPUs), the same choice on every rank. */
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm_device.h"
#include "src/comm/comm_impl.h"

typedef enum { PICK_AUTO, PICK_NCCL, PICK_STAGED } pick;

static lcx_status pick_of_env(pick *out) {
    const char *v = getenv("LCX_COMM_DEVICE");
    *out = PICK_AUTO;
    if (!v || !*v || strcmp(v, "auto") == 0) return LCX_OK;
    if (strcmp(v, "nccl") == 0) *out = PICK_NCCL;
    else if (strcmp(v, "staged") == 0) *out = PICK_STAGED;
    else return lcx_fail(LCX_ERR_INVALID, "LCX_COMM_DEVICE='%s' is not auto, nccl or staged", v);
    return LCX_OK;
}

/* What every rank can do, agreed before anything depends on it (a rank that failed alone would leave the others
 * waiting in the next collective): NCCL only if every rank can use it; a GPU on every rank. */
static lcx_status agree(lcx_comm *world, int can_nccl, int has_gpu, int *all_nccl, int *all_gpu) {
    int64_t cannot[2] = {!can_nccl, !has_gpu};
    LCX_TRY(world->impl->all_reduce(world, NULL, cannot, cannot, 2, LCX_I64, LCX_COMM_MAX));
    *all_nccl = cannot[0] == 0, *all_gpu = cannot[1] == 0;
    return LCX_OK;
}

static lcx_status wrap(lcx_comm *world, const lcx_backend *be, lcx_comm **out) {
    pick p;
    lcx_status env = pick_of_env(&p); /* every rank reads the same environment: all fail here, or none */
    if (env != LCX_OK) return env;
    int local = 0, local_n = 1, gpus = lcx_comm_cuda_devices(), all_nccl = 0, all_gpu = 0;
    LCX_TRY(lcx_comm_node_rank(world, &local, &local_n));
    LCX_TRY(agree(world, lcx_comm_nccl_built() && local_n <= gpus, gpus > 0, &all_nccl, &all_gpu));
    LCX_FAIL_IF(!all_gpu, LCX_ERR_CUDA, "the %s backend needs a GPU on every rank, and %s", be->name,
                gpus > 0 ? "another rank sees none" : "this rank sees none");
    LCX_FAIL_IF(p == PICK_NCCL && !all_nccl, LCX_ERR_UNSUPPORTED,
                "LCX_COMM_DEVICE=nccl needs NCCL in the build and one GPU per rank (rank %d: %d ranks on its node, "
                "%d GPUs, NCCL %s); use LCX_COMM_DEVICE=staged",
                world->world_rank, local_n, gpus, lcx_comm_nccl_built() ? "built" : "not built");
    /* Several ranks on one GPU share it round-robin; with NCCL local_n <= gpus, so each has its own. */
    LCX_TRY(lcx_comm_cuda_set_device(local % gpus));
    if (p != PICK_STAGED && all_nccl) return lcx_comm_nccl(world, out);
    const lcx_comm_stager *sg = lcx_comm_stager_cuda();
    return lcx_comm_staged(world, sg ? sg : lcx_comm_stager_backend(), out);
}

lcx_status lcx_comm_for_backend(lcx_comm *world, const lcx_backend *be, lcx_comm **out) {
    LCX_FAIL_IF(!out || !world, LCX_ERR_INVALID, "comm for backend: missing argument");
    *out = NULL;
    if (!be || strcmp(be->name, "cpu") == 0) {
        *out = world; /* host buffers: the world as it is */
        return LCX_OK;
    }
    return wrap(world, be, out);
}
