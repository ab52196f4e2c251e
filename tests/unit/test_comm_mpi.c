/* comm over MPI (run with 4 ranks): for each mesh of 4 ranks, every collective on every group communicator
 * against the result computed locally from every rank's input (input(world rank, i) is known to all), in f32,
 * f64, i64 and bf16; the CP ring with isend/irecv posted before the wait; group membership against layout.h's
 * lists; and the error paths (a mesh that does not fit the world, ranks given different meshes, an MPI error
 * returned instead of aborting). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "test_util.h"

enum { N = 6, MAXW = 64 };

/* Rank w's input element i: small integers, so every sum over 4 ranks is exact in bfloat16. */
static double input(int w, int64_t i) { return (double)(((w + 1) * 5 + i * 3) % 23) - 9; }

static void store(void *p, lcx_dtype dt, int64_t i, double v) {
    switch (dt) {
    case LCX_F32: ((float *)p)[i] = (float)v; break;
    case LCX_BF16: ((uint16_t *)p)[i] = lcx_f32_to_bf16((float)v); break;
    case LCX_F64: ((double *)p)[i] = v; break;
    default: ((int64_t *)p)[i] = (int64_t)v; break;
    }
}
static double load(const void *p, lcx_dtype dt, int64_t i) {
    switch (dt) {
    case LCX_F32: return ((const float *)p)[i];
    case LCX_BF16: return lcx_bf16_to_f32(((const uint16_t *)p)[i]);
    case LCX_F64: return ((const double *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

static double reduce(const int *members, int n, int64_t i, lcx_comm_op op) {
    double r = input(members[0], i);
    for (int m = 1; m < n; m++) r = op == LCX_COMM_SUM ? r + input(members[m], i) : fmax(r, input(members[m], i));
    return r;
}

static const char *const kind_name[] = {"tp", "cp", "dp", "grad"};

/* Every collective of group g (this rank's list `members`, n ranks) in dtype dt. */
static void check_collectives(lcx_comm *g, const int *members, int n, int me, lcx_dtype dt, const char *what) {
    _Alignas(8) unsigned char send[MAXW * N * 8], recv[MAXW * N * 8];
    const char *dn = lcx_dtype_name(dt);
    for (int op = 0; op < LCX_COMM_OP_COUNT; op++) {
        for (int64_t i = 0; i < N; i++) store(send, dt, i, input(me, i));
        CHECK_OK(lcx_comm_all_reduce(g, NULL, send, recv, N, dt, (lcx_comm_op)op));
        int ok = 1;
        for (int64_t i = 0; i < N; i++) ok &= load(recv, dt, i) == reduce(members, n, i, (lcx_comm_op)op);
        CHECK_MSG(ok, "%s all_reduce %s op %d", what, dn, op);
        CHECK_OK(lcx_comm_all_reduce(g, NULL, send, send, N, dt, (lcx_comm_op)op)); /* in place */
        CHECK_MSG(memcmp(send, recv, N * lcx_comm_dtype_size(dt)) == 0, "%s in-place all_reduce %s", what, dn);
        /* reduce_scatter: rank r of the group gets block r of the reduction of every rank's n*N elements. */
        for (int64_t i = 0; i < n * N; i++) store(send, dt, i, input(me, i));
        CHECK_OK(lcx_comm_reduce_scatter(g, NULL, send, recv, N, dt, (lcx_comm_op)op));
        ok = 1;
        for (int64_t i = 0; i < N; i++) ok &= load(recv, dt, i) == reduce(members, n, g->rank * N + i, (lcx_comm_op)op);
        CHECK_MSG(ok, "%s reduce_scatter %s op %d", what, dn, op);
    }
    for (int64_t i = 0; i < N; i++) store(send, dt, i, input(me, i));
    CHECK_OK(lcx_comm_all_gather(g, NULL, send, recv, N, dt));
    int ok = 1;
    for (int m = 0; m < n; m++)
        for (int64_t i = 0; i < N; i++) ok &= load(recv, dt, m * N + i) == input(members[m], i);
    CHECK_MSG(ok, "%s all_gather %s", what, dn);
    int root = n - 1; /* not 0: a broadcast that ignores the root fails */
    CHECK_OK(lcx_comm_broadcast(g, NULL, send, N, dt, root));
    ok = 1;
    for (int64_t i = 0; i < N; i++) ok &= load(send, dt, i) == input(members[root], i);
    CHECK_MSG(ok, "%s broadcast %s", what, dn);
}

/* Each CP rank sends its block to c+1 and receives c-1's, both posted before the wait. */
static void check_ring(lcx_comm *cp, const int *members, int me) {
    double out[N], in[N];
    for (int i = 0; i < N; i++) out[i] = input(me, i), in[i] = -1e9;
    int n = cp->size, next = (cp->rank + 1) % n, prev = (cp->rank + n - 1) % n;
    lcx_comm_request *q[2];
    CHECK_OK(lcx_comm_irecv(cp, NULL, in, N, LCX_F64, prev, 5, &q[0]));
    CHECK_OK(lcx_comm_isend(cp, NULL, out, N, LCX_F64, next, 5, &q[1]));
    CHECK_OK(lcx_comm_waitall(cp, 2, q));
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= in[i] == input(members[prev], i);
    CHECK_MSG(ok, "ring: rank %d got the wrong block from cp rank %d", me, prev);
}

static void check_mesh(lcx_comm *world, int tp, int cp, int dp) {
    lcx_mesh m;
    lcx_comm_groups gs;
    CHECK_OK(lcx_mesh_init(&m, tp, cp, dp));
    CHECK_OK(lcx_comm_mesh(world, &m, &gs));
    if (!gs.group[0]) return;
    lcx_mesh_coord mc;
    CHECK_OK(lcx_mesh_coord_of(&m, world->rank, &mc));
    CHECK(mc.t == gs.coord.t && mc.c == gs.coord.c && mc.d == gs.coord.d);
    static const lcx_dtype dts[] = {LCX_F32, LCX_F64, LCX_I64, LCX_BF16};
    for (int k = 0; k < LCX_GROUP_COUNT; k++) {
        lcx_comm *g = gs.group[k];
        int members[MAXW], n, index;
        CHECK_OK(lcx_mesh_group(&m, world->rank, (lcx_group_kind)k, members, MAXW, &n, &index));
        char what[64];
        snprintf(what, sizeof what, "mesh %dx%dx%d rank %d group %s", tp, cp, dp, world->rank, kind_name[k]);
        CHECK_MSG(g->size == n && g->rank == index, "%s: rank %d of %d, layout %d of %d", what, g->rank, g->size,
                  index, n);
        /* Membership and order: the world ranks gathered over the group are layout's list. */
        int64_t wr = world->rank, got[MAXW];
        CHECK_OK(lcx_comm_all_gather(g, NULL, &wr, got, 1, LCX_I64));
        int ok = 1;
        for (int i = 0; i < n; i++) ok &= got[i] == members[i];
        CHECK_MSG(ok, "%s: members differ from lcx_mesh_group", what);
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++)
            check_collectives(g, members, n, world->rank, dts[di], what);
        CHECK_OK(lcx_comm_barrier(g, NULL));
        if (k == LCX_GROUP_CP) check_ring(g, members, world->rank);
    }
    lcx_comm_groups_free(&gs);
}

/* Every rank must fail, with the same message: compare a hash of it across the world. */
static void check_same_failure(lcx_comm *world, lcx_status st, const char *needle) {
    CHECK_MSG(st == LCX_ERR_INVALID && strstr(lcx_last_error(), needle), "rank %d: got '%s'", world->rank,
              lcx_last_error());
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (const char *p = lcx_last_error(); *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211u;
    int64_t hm[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    CHECK_OK(lcx_comm_all_reduce(world, NULL, hm, hm, 2, LCX_I64, LCX_COMM_MAX));
    CHECK_MSG(hm[0] == -hm[1], "rank %d: the ranks failed with different messages", world->rank);
}

static void check_errors(lcx_comm *world) {
    lcx_mesh m;
    lcx_comm_groups gs;
    CHECK_OK(lcx_mesh_init(&m, 2, 2, 2));
    check_same_failure(world, lcx_comm_mesh(world, &m, &gs), "mesh tp=2 cp=2 dp=2 needs 8 ranks, but the world has 4");
    CHECK(gs.group[0] == NULL);
    /* Rank 0 thinks 4x1x1, the others 2x2x1: all four notice. */
    CHECK_OK(lcx_mesh_init(&m, world->rank == 0 ? 4 : 2, world->rank == 0 ? 1 : 2, 1));
    check_same_failure(world, lcx_comm_mesh(world, &m, &gs), "ranks were given different meshes (tp 2..4, cp 1..2");
    /* Rank 0 alone has a mesh too big for the world: the others must not wait for it in a collective. */
    CHECK_OK(lcx_mesh_init(&m, 2, 2, world->rank == 0 ? 2 : 1));
    check_same_failure(world, lcx_comm_mesh(world, &m, &gs), "ranks were given different meshes (tp 2..2, cp 2..2, dp 1..2)");
    /* An error inside MPI (a root MPI itself rejects; the checked entry point would catch it first) comes back as
     * a status naming the rank and MPI's error string, and the world still works afterwards. */
    float f = 1;
    lcx_status st = world->impl->broadcast(world, NULL, &f, 1, LCX_F32, 99);
    char want[64];
    snprintf(want, sizeof want, "rank %d: MPI_Bcast failed: ", world->rank);
    CHECK_MSG(st == LCX_ERR_COMM && strstr(lcx_last_error(), want), "rank %d: got %s '%s'", world->rank,
              lcx_status_name(st), lcx_last_error());
    CHECK_OK(lcx_comm_barrier(world, NULL));
}

int main(void) {
    lcx_comm *world = NULL;
    lcx_status st = lcx_comm_world_init(&world);
    if (st != LCX_OK) {
        fprintf(stderr, "test_comm_mpi: %s\n", lcx_last_error());
        return 1;
    }
    CHECK(strcmp(world->impl->name, "mpi") == 0);
    CHECK(world->rank == lcx_launch_rank());
    if (world->size != 4) {
        fprintf(stderr, "test_comm_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    static const int meshes[][3] = {{4, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 2, 1}, {2, 1, 2}, {1, 2, 2}};
    for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++)
        check_mesh(world, meshes[i][0], meshes[i][1], meshes[i][2]);
    check_errors(world);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_comm_mpi");
}
