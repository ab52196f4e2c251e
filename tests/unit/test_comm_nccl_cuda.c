/* The device communicators on a GPU (label cuda; exit 77 without a device, or without NCCL in the build for the
 * NCCL part). Run alone (world size 1) by ctest; on a machine with several GPUs also under
 * `mpirun -np <GPUs> test_comm_nccl_cuda` (one rank per GPU), and with more ranks than GPUs for the staged part
 * (LCX_COMM_DEVICE=staged). For each communicator, on buffers of the CUDA backend (comm_compare.h): every
 * collective in every dtype against the MPI (or single) communicator over the same ranks on the same data, bit for
 * bit except NCCL's own-order sums of inexact data; the ring's grouped send/recv; lcx_group_sum bit for bit; host
 * calls through it; the same on every group of a mesh. Then the watchdog: a receive nothing matches, with
 * LCX_COMM_TIMEOUT_S=2, fails with LCX_ERR_COMM within the deadline and aborts the communicator, and the next call
 * on it fails at once with the same line instead of hanging.
 * Written without a GPU at hand (docs/cuda.md): the first GPU session runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_compare.h"
#include "kernels/cuda/cuda_runtime_info.h"
#include "src/comm/comm_device.h"
#include "src/core/clock.h"

/* A second host communicator over the world's ranks, in the world's order. */
static lcx_comm *dup_of(lcx_comm *world) {
    lcx_comm *c = NULL;
    CHECK_OK(world->impl->split(world, 0, world->rank, &c));
    return c;
}

/* On an NCCL communicator of its own over the world's ranks (made directly: a split of one rank would be staged,
 * and the one under test stays usable), LCX_COMM_TIMEOUT_S read at its creation. */
static void check_watchdog(lcx_comm *world, lcx_exec *x) {
    lcx_comm *bad = NULL, *inner = dup_of(world);
    CHECK_OK(inner ? lcx_comm_nccl(inner, &bad) : LCX_OK);
    if (!bad) {
        if (inner) inner->impl->free(inner);
        return;
    }
    CHECK(strcmp(bad->impl->name, "nccl") == 0);
    float *d = NULL;
    CHECK_OK(x->be->alloc(64 * sizeof(float), (void **)&d));
    lcx_comm_request *q = NULL;
    const int prev = (bad->rank + bad->size - 1) % bad->size;
    CHECK_OK(lcx_comm_irecv(bad, x, d, 64, LCX_F32, prev, 3, &q)); /* no rank sends it */
    double t0 = lcx_clock_s();
    lcx_status st = lcx_comm_wait(bad, q);
    double took = lcx_clock_s() - t0;
    CHECK_MSG(st == LCX_ERR_COMM && strstr(lcx_last_error(), "the NCCL communicator is aborted"),
              "unmatched receive: %s '%s'", lcx_status_name(st), lcx_last_error());
    CHECK_MSG(took < 30, "the watchdog took %.1f s for a 2 s deadline", took);
    CHECK_FAILS(lcx_comm_all_reduce(bad, x, d, d, 64, LCX_F32, LCX_COMM_SUM), LCX_ERR_COMM,
                "the NCCL communicator is aborted");
    x->be->free(d);
    bad->impl->free(bad);
}

int main(void) {
    const lcx_backend *be = lcx_backend_get("cuda");
    if (!be || !be->available() || lcx_cuda_device_count() < 1) {
        printf("test_comm_nccl_cuda: no CUDA device, skipped\n");
        return 77;
    }
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_comm_nccl_cuda: %s\n", lcx_last_error());
        return 1;
    }
    const int P = world->size;
    lcx_comm *ref = dup_of(world);

    /* staged over MPI with the CUDA stager: any number of ranks per GPU */
    setenv("LCX_COMM_DEVICE", "staged", 1);
    lcx_comm *staged = NULL;
    CHECK_OK(lcx_comm_for_backend(dup_of(world), be, &staged)); /* picks this rank's GPU */
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(be, &x));
    if (!staged || !x) return test_summary("test_comm_nccl_cuda");
    CHECK(strcmp(staged->impl->name, "staged") == 0);
    cc_ctx t = {.dc = staged, .ref = ref, .x = x, .ordered = 1, .what = "staged (cuda stager)"};
    cc_compare(&t);
    if (P % 2 == 0) cc_compare_mesh(staged, ref, x, 1, 2, P / 2, 1, "staged");
    staged->impl->free(staged);

    int ranks_here = 0, node_n = 1;
    CHECK_OK(lcx_comm_node_rank(world, &ranks_here, &node_n));
    if (!lcx_comm_nccl_built() || node_n > lcx_cuda_device_count()) {
        printf("test_comm_nccl_cuda: NCCL %s, %d ranks on %d GPUs: the NCCL part is skipped\n",
               lcx_comm_nccl_built() ? "built" : "not built", node_n, lcx_cuda_device_count());
    } else {
        setenv("LCX_COMM_DEVICE", "nccl", 1);
        lcx_comm *nccl = NULL;
        CHECK_OK(lcx_comm_for_backend(dup_of(world), be, &nccl));
        if (nccl) {
            CHECK(strcmp(nccl->impl->name, "nccl") == 0);
            cc_ctx n = {.dc = nccl, .ref = ref, .x = x, .ordered = 0, .what = "nccl"};
            cc_compare(&n);
            if (P % 2 == 0) cc_compare_mesh(nccl, ref, x, 1, 2, P / 2, 1, "nccl");
            setenv("LCX_COMM_TIMEOUT_S", "2", 1);
            check_watchdog(world, x);
            nccl->impl->free(nccl);
        }
    }
    lcx_exec_free(x);
    ref->impl->free(ref);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_comm_nccl_cuda");
}
