/* The staged device communicator (src/comm/comm_staged.c) on the CPU backend, 4 ranks: buffers of a CPU exec go
 * through the backend stager (host staging buffers, the exec's copy_d2h / copy_h2d) and MPI; every collective, the
 * ring exchange, lcx_group_sum and host calls must give the plain MPI communicator's bytes (comm_compare.h), on
 * the world and on every group of two meshes split from it. Also: one rank (staged over single), a stager whose
 * copy fails (the call fails with its message, the pool stays usable), lcx_comm_for_backend leaving the world
 * alone for the CPU backend and failing on every rank alike for a GPU backend without a GPU, the node-local rank. The same staging code carries the CUDA stager (pinned, copy stream) on a GPU. */
#include <stdio.h>
#include <string.h>

#include "comm_compare.h"
#include "kernels/cuda/cuda_runtime_info.h"
#include "src/comm/comm_device.h"

static int g_fail_copies; /* the failing stager's to_host fails while set */

static lcx_status flaky_to_host(lcx_exec *x, void *host, const void *dev, size_t bytes) {
    if (g_fail_copies) return lcx_fail(LCX_ERR_IO, "planted staging failure");
    return lcx_comm_stager_backend()->to_host(x, host, dev, bytes);
}

static void check_single(lcx_exec *x) {
    lcx_comm *inner = NULL, *ref = NULL, *dc = NULL;
    CHECK_OK(lcx_comm_single(&inner));
    CHECK_OK(lcx_comm_single(&ref));
    CHECK_OK(lcx_comm_staged(inner, lcx_comm_stager_backend(), &dc));
    cc_ctx t = {.dc = dc, .ref = ref, .x = x, .ordered = 1, .what = "staged over single"};
    cc_compare(&t);
    lcx_comm_finalize(dc);
    lcx_comm_finalize(ref);

    /* a failing copy: the call returns its error, and the buffers it took are free again for the next call */
    lcx_comm_stager flaky = *lcx_comm_stager_backend();
    flaky.to_host = flaky_to_host;
    CHECK_OK(lcx_comm_single(&inner));
    CHECK_OK(lcx_comm_staged(inner, &flaky, &dc));
    float a[4] = {1, 2, 3, 4}, b[4] = {0};
    g_fail_copies = 1;
    CHECK_FAILS(lcx_comm_all_gather(dc, x, a, b, 4, LCX_F32), LCX_ERR_IO, "planted staging failure");
    lcx_comm_request *q = NULL;
    CHECK_FAILS(lcx_comm_isend(dc, x, a, 4, LCX_F32, 0, 1, &q), LCX_ERR_IO, "planted staging failure");
    CHECK(q == NULL);
    g_fail_copies = 0;
    CHECK_OK(lcx_comm_all_gather(dc, x, a, b, 4, LCX_F32));
    CHECK(memcmp(a, b, sizeof a) == 0);
    lcx_comm_finalize(dc);
}

/* The choice for a GPU backend, where there is no GPU: every rank fails with the same line (they agree first, so
 * none waits for another), and the world is still the caller's and works. */
static void check_selection(lcx_comm *world) {
    int r = -1, n = 0;
    CHECK_OK(lcx_comm_node_rank(world, &r, &n));
    CHECK_MSG(r == world->rank && n == 4, "node rank %d of %d (one node: the world's %d of 4)", r, n, world->rank);
    if (lcx_cuda_device_count() > 0) return; /* a GPU machine: test_comm_nccl_cuda covers the choice */
    const lcx_backend gpu = {.name = "cuda"};
    lcx_comm *out = world;
    CHECK_FAILS(lcx_comm_for_backend(world, &gpu, &out), LCX_ERR_CUDA, "needs a GPU on every rank");
    CHECK(out == NULL);
    setenv("LCX_COMM_DEVICE", "infiniband", 1);
    CHECK_FAILS(lcx_comm_for_backend(world, &gpu, &out), LCX_ERR_INVALID, "LCX_COMM_DEVICE='infiniband'");
    unsetenv("LCX_COMM_DEVICE");
    CHECK_OK(lcx_comm_barrier(world, NULL));
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_comm_staged_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_comm_staged_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(lcx_backend_cpu(), &x));

    /* the CPU backend keeps the world as it is */
    lcx_comm *same = NULL;
    CHECK_OK(lcx_comm_for_backend(world, lcx_backend_cpu(), &same));
    CHECK(same == world);
    check_selection(world);

    /* a second MPI communicator over the world's ranks carries the staged one */
    lcx_comm *inner = NULL, *dc = NULL;
    CHECK_OK(world->impl->split(world, 0, world->rank, &inner));
    CHECK_OK(lcx_comm_staged(inner, lcx_comm_stager_backend(), &dc));
    CHECK(strcmp(dc->impl->name, "staged") == 0);
    cc_ctx t = {.dc = dc, .ref = world, .x = x, .ordered = 1, .what = "staged world"};
    cc_compare(&t);
    cc_compare_mesh(dc, world, x, 1, 2, 2, 1, "staged");
    cc_compare_mesh(dc, world, x, 1, 1, 2, 2, "staged");
    dc->impl->free(dc);

    if (world->rank == 0) check_single(x);
    lcx_exec_free(x);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_comm_staged_mpi");
}
