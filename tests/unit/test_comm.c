/* comm, single rank: every call of src/comm/comm.h against its obvious result (copies, the self mailbox), the
 * argument errors, launcher detection from the environment, the mesh errors and lcx_comm_check_mesh, and abort
 * (in a child process). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "src/comm/comm.h"
#include "src/comm/mesh_check.h"
#include "test_util.h"

static const char *const launch_vars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_SIZE",
                                          "PMI_RANK", "SLURM_NTASKS", "SLURM_PROCID"};
static void clear_launch_env(void) {
    for (size_t i = 0; i < sizeof launch_vars / sizeof launch_vars[0]; i++) unsetenv(launch_vars[i]);
}

static const lcx_dtype dts[] = {LCX_F32, LCX_BF16, LCX_F64, LCX_I64};

/* Element i of a test buffer, as the bytes of dtype dt (small integers: exact in every dtype). */
static void fill(void *p, lcx_dtype dt, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) {
        double v = (double)((seed * 7 + i * 3) % 50) - 20;
        switch (dt) {
        case LCX_F32: ((float *)p)[i] = (float)v; break;
        case LCX_BF16: ((uint16_t *)p)[i] = lcx_f32_to_bf16((float)v); break;
        case LCX_F64: ((double *)p)[i] = v; break;
        default: ((int64_t *)p)[i] = (int64_t)v; break;
        }
    }
}

static void test_launch(void) {
    lcx_launch l;
    clear_launch_env();
    CHECK_OK(lcx_comm_detect_launch(&l));
    CHECK(strcmp(l.launcher, "none") == 0 && l.rank == 0 && l.size == 1);
    setenv("SLURM_NTASKS", "8", 1), setenv("SLURM_PROCID", "5", 1);
    CHECK_OK(lcx_comm_detect_launch(&l));
    CHECK(strcmp(l.launcher, "srun") == 0 && l.rank == 5 && l.size == 8);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1), setenv("OMPI_COMM_WORLD_RANK", "2", 1); /* mpirun wins over Slurm */
    CHECK_OK(lcx_comm_detect_launch(&l));
    CHECK(strcmp(l.launcher, "mpirun") == 0 && l.rank == 2 && l.size == 4);
    CHECK(lcx_launch_rank() == 2); /* the reporter's view agrees */
    setenv("OMPI_COMM_WORLD_RANK", "4", 1);
    CHECK_FAILS(lcx_comm_detect_launch(&l), LCX_ERR_INVALID, "OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4");
    setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
    CHECK_FAILS(lcx_comm_detect_launch(&l), LCX_ERR_INVALID, "OMPI_COMM_WORLD_RANK='x1'");
    unsetenv("OMPI_COMM_WORLD_RANK");
    CHECK_FAILS(lcx_comm_detect_launch(&l), LCX_ERR_INVALID, "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK");
    clear_launch_env();
    setenv("PMIX_RANK", "3", 1);
    CHECK_OK(lcx_comm_detect_launch(&l));
    CHECK(strcmp(l.launcher, "pmix") == 0 && l.rank == 3 && l.size == -1);
    clear_launch_env();
    setenv("PMI_SIZE", "1", 1), setenv("PMI_RANK", "0", 1);
    CHECK_OK(lcx_comm_detect_launch(&l));
    CHECK(strcmp(l.launcher, "pmi") == 0 && l.size == 1);
    /* A launcher with one rank is a single-rank run: no MPI. */
    lcx_comm *w = NULL;
    CHECK_OK(lcx_comm_world_init(&w));
    CHECK(w && strcmp(w->impl->name, "single") == 0 && w->size == 1 && w->rank == 0);
    CHECK_OK(lcx_comm_finalize(w));
    clear_launch_env();
}

/* Every collective on one rank, with exec x (NULL: host buffers). */
static void test_collectives(lcx_comm *c, lcx_exec *x) {
    enum { N = 37 };
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        lcx_dtype dt = dts[di];
        size_t es = lcx_comm_dtype_size(dt), bytes = N * es;
        CHECK(es == (dt == LCX_BF16 ? 2u : dt == LCX_F32 ? 4u : 8u));
        _Alignas(8) unsigned char a[N * 8 + 8], b[N * 8 + 8], ref[N * 8 + 8];
        fill(ref, dt, N, (int)di);
        for (int op = 0; op < LCX_COMM_OP_COUNT; op++) {
            memcpy(a, ref, bytes), memset(b, 0x5a, sizeof b);
            CHECK_OK(lcx_comm_all_reduce(c, x, a, b, N, dt, (lcx_comm_op)op));
            CHECK(memcmp(b, ref, bytes) == 0 && b[bytes] == 0x5a); /* exactly N elements written */
            CHECK_OK(lcx_comm_all_reduce(c, x, a, a, N, dt, (lcx_comm_op)op)); /* in place */
            CHECK(memcmp(a, ref, bytes) == 0);
            memset(b, 0x5a, sizeof b);
            CHECK_OK(lcx_comm_reduce_scatter(c, x, a, b, N, dt, (lcx_comm_op)op));
            CHECK(memcmp(b, ref, bytes) == 0 && b[bytes] == 0x5a);
        }
        memset(b, 0x5a, sizeof b);
        CHECK_OK(lcx_comm_all_gather(c, x, a, b, N, dt));
        CHECK(memcmp(b, ref, bytes) == 0 && b[bytes] == 0x5a);
        CHECK_OK(lcx_comm_broadcast(c, x, a, N, dt, 0));
        CHECK(memcmp(a, ref, bytes) == 0);
    }
    CHECK_OK(lcx_comm_barrier(c, x));
    CHECK_OK(lcx_comm_all_reduce(c, x, NULL, NULL, 0, LCX_F32, LCX_COMM_SUM)); /* empty: nothing to move */
}

static void test_p2p(lcx_comm *c, lcx_exec *x) {
    float s1[5] = {1, 2, 3, 4, 5}, s2[3] = {-1, -2, -3}, r1[5] = {0}, r2[8] = {0};
    lcx_comm_request *q[4];
    /* Send first, then receive; and receive first, then send; tags keep the two apart. */
    CHECK_OK(lcx_comm_isend(c, x, s1, 5, LCX_F32, 0, 7, &q[0]));
    CHECK_OK(lcx_comm_irecv(c, x, r2, 8, LCX_F32, 0, 9, &q[1]));
    CHECK_OK(lcx_comm_isend(c, x, s2, 3, LCX_F32, 0, 9, &q[2]));
    CHECK_OK(lcx_comm_irecv(c, x, r1, 5, LCX_F32, 0, 7, &q[3]));
    CHECK_OK(lcx_comm_waitall(c, 4, q));
    CHECK(q[0] == NULL && q[3] == NULL);
    CHECK(memcmp(r1, s1, sizeof s1) == 0);
    CHECK(r2[0] == -1 && r2[2] == -3 && r2[3] == 0); /* a shorter message fills the front only */
    /* Same tag: first sent, first received. */
    int64_t i1 = 11, i2 = 22, o1 = 0, o2 = 0;
    CHECK_OK(lcx_comm_isend(c, x, &i1, 1, LCX_I64, 0, 0, &q[0]));
    CHECK_OK(lcx_comm_isend(c, x, &i2, 1, LCX_I64, 0, 0, &q[1]));
    CHECK_OK(lcx_comm_irecv(c, x, &o1, 1, LCX_I64, 0, 0, &q[2]));
    CHECK_OK(lcx_comm_irecv(c, x, &o2, 1, LCX_I64, 0, 0, &q[3]));
    CHECK_OK(lcx_comm_waitall(c, 4, q));
    CHECK(o1 == 11 && o2 == 22);
    /* A message longer than the receive fails at both waits. */
    CHECK_OK(lcx_comm_isend(c, x, s1, 5, LCX_F32, 0, 1, &q[0]));
    CHECK_OK(lcx_comm_irecv(c, x, r1, 4, LCX_F32, 0, 1, &q[1]));
    CHECK_FAILS(lcx_comm_wait(c, q[0]), LCX_ERR_COMM, "message of 5 F32 (tag 1) does not fit a receive of 4");
    CHECK_FAILS(lcx_comm_wait(c, q[1]), LCX_ERR_COMM, "does not fit");
    /* Waiting for a send nobody receives would hang on one rank: it fails instead; waitall keeps the first error. */
    CHECK_OK(lcx_comm_isend(c, x, s1, 5, LCX_F32, 0, 2, &q[0]));
    CHECK_OK(lcx_comm_irecv(c, x, r1, 5, LCX_F32, 0, 3, &q[1]));
    CHECK_FAILS(lcx_comm_waitall(c, 2, q), LCX_ERR_COMM, "wait on a send with tag 2 that no receive matches");
    CHECK_OK(lcx_comm_wait(c, NULL));
}

static void test_bad_args(lcx_comm *c) {
    float f[4] = {0}, g[4];
    int32_t i32[4] = {0};
    lcx_comm_request *q = (lcx_comm_request *)&q;
    CHECK_FAILS(lcx_comm_all_reduce(c, NULL, i32, i32, 4, LCX_I32, LCX_COMM_SUM), LCX_ERR_UNSUPPORTED, "I32 cannot");
    CHECK_FAILS(lcx_comm_all_reduce(c, NULL, f, f, 4, LCX_F32, (lcx_comm_op)7), LCX_ERR_INVALID, "unknown reduction 7");
    CHECK_FAILS(lcx_comm_all_reduce(c, NULL, f, f + 1, 3, LCX_F32, LCX_COMM_SUM), LCX_ERR_INVALID, "overlap");
    CHECK_FAILS(lcx_comm_all_reduce(c, NULL, NULL, g, 4, LCX_F32, LCX_COMM_SUM), LCX_ERR_INVALID, "send buffer is NULL");
    CHECK_FAILS(lcx_comm_all_gather(c, NULL, f, g, -1, LCX_F32), LCX_ERR_INVALID, "count -1 is negative");
    CHECK_FAILS(lcx_comm_broadcast(c, NULL, f, 4, LCX_F32, 1), LCX_ERR_INVALID, "root rank 1 outside a communicator of 1");
    CHECK_FAILS(lcx_comm_isend(c, NULL, f, 4, LCX_F32, -1, 0, &q), LCX_ERR_INVALID, "peer rank -1");
    CHECK(q == NULL); /* a failed post leaves no request behind */
    CHECK_FAILS(lcx_comm_irecv(c, NULL, f, 4, LCX_F32, 0, LCX_COMM_TAG_MAX + 1, &q), LCX_ERR_INVALID, "tag 32768");
    CHECK_FAILS(lcx_comm_reduce_scatter(c, NULL, f, f, 4, LCX_F32, LCX_COMM_SUM), LCX_ERR_INVALID, "overlap");
    CHECK_FAILS(lcx_comm_barrier(NULL, NULL), LCX_ERR_INVALID, "no communicator");
}

static void test_mesh(lcx_comm *world) {
    lcx_mesh m;
    lcx_comm_groups g;
    CHECK_OK(lcx_mesh_init(&m, 1, 1, 1));
    CHECK_OK(lcx_comm_mesh(world, &m, &g));
    for (int k = 0; k < LCX_GROUP_COUNT; k++) CHECK(g.group[k] && g.group[k]->size == 1 && g.group[k]->rank == 0);
    CHECK(g.coord.t == 0 && g.coord.c == 0 && g.coord.d == 0);
    float v = 3, w = 0;
    CHECK_OK(lcx_comm_all_reduce(g.group[LCX_GROUP_GRAD], NULL, &v, &w, 1, LCX_F32, LCX_COMM_SUM));
    CHECK(w == 3);
    lcx_comm_groups_free(&g);
    CHECK(g.group[LCX_GROUP_TP] == NULL);
    CHECK_OK(lcx_mesh_init(&m, 2, 1, 2));
    CHECK_FAILS(lcx_comm_mesh(world, &m, &g), LCX_ERR_INVALID, "mesh tp=2 cp=1 dp=2 needs 4 ranks, but the world has 1");
    for (int k = 0; k < LCX_GROUP_COUNT; k++) CHECK(g.group[k] == NULL);
}

static void test_check_mesh(void) {
    /* Llama-3-8B-like: 32 heads, 8 kv heads, 14336 intermediate, 128256 vocab. */
    lcx_tp_dims d = {.nh = 32, .ng = 8, .d = 128, .H = 4096, .F = 14336, .V = 128256};
    lcx_mesh m;
    CHECK_OK(lcx_mesh_init(&m, 8, 4, 2));
    CHECK_OK(lcx_comm_check_mesh(&m, &d, 65536));
    CHECK_OK(lcx_mesh_init(&m, 16, 1, 1)); /* 16 > 8 kv heads, a multiple: replicated */
    CHECK_OK(lcx_comm_check_mesh(&m, &d, 4096));
    CHECK_OK(lcx_mesh_init(&m, 3, 1, 1));
    CHECK_FAILS(lcx_comm_check_mesh(&m, &d, 4096), LCX_ERR_INVALID, "tp=3 does not divide the 32 attention heads");
    lcx_tp_dims d2 = d;
    d2.ng = 4, d2.nh = 24, d2.F = 24 * 128;
    CHECK_OK(lcx_mesh_init(&m, 6, 1, 1));
    CHECK_FAILS(lcx_comm_check_mesh(&m, &d2, 4096), LCX_ERR_INVALID, "tp=6 is larger than the 4 kv heads");
    d2 = d, d2.ng = 16, d2.nh = 48, d2.F = 48 * 64;
    CHECK_OK(lcx_mesh_init(&m, 12, 1, 1));
    CHECK_FAILS(lcx_comm_check_mesh(&m, &d2, 4096), LCX_ERR_INVALID, "tp=12 does not divide the 16 kv heads");
    CHECK_OK(lcx_mesh_init(&m, 2, 3, 1));
    CHECK_FAILS(lcx_comm_check_mesh(&m, &d, 4096), LCX_ERR_INVALID,
                "sequence length 4096 is not a positive multiple of 2*cp = 6");
    d2 = d, d2.V = INT64_MAX - 1;
    CHECK_OK(lcx_mesh_init(&m, 2, 1, 1));
    CHECK(lcx_comm_check_mesh(&m, &d2, 4096) == LCX_ERR_INVALID); /* padded vocabulary overflows */
    d2 = d, d2.V = 32001; /* odd vocabulary: padded to a multiple of tp, fine */
    CHECK_OK(lcx_mesh_init(&m, 4, 1, 1));
    CHECK_OK(lcx_comm_check_mesh(&m, &d2, 4096));
}

/* The child's reporter writes its warning lines into a pipe, so the parent sees what abort reported. */
static void pipe_line(void *user, lcx_report_level level, const char *text) {
    if (level != LCX_REPORT_WARN) return;
    ssize_t n = write(*(int *)user, text, strlen(text));
    (void)n;
}

static void test_abort(void) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        lcx_comm *c;
        if (lcx_comm_single(&c) != LCX_OK) _exit(99);
        lcx_reporter r = {.line = pipe_line, .user = &fds[1]};
        lcx_comm_abort(c, &r, 42, "fatal: rank 0 lost its peer");
    }
    close(fds[1]);
    char got[128] = {0};
    size_t len = 0;
    ssize_t n;
    while (len < sizeof got - 1 && (n = read(fds[0], got + len, sizeof got - 1 - len)) > 0) len += (size_t)n;
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);
    CHECK_MSG(strcmp(got, "fatal: rank 0 lost its peer") == 0, "abort reported '%s'", got);
}

int main(void) {
    test_launch();
    lcx_comm *world = NULL;
    CHECK_OK(lcx_comm_world_init(&world)); /* no launcher: single rank */
    CHECK(world && strcmp(world->impl->name, "single") == 0 && world->size == 1 && world->rank == 0);
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(NULL, &x));
    test_collectives(world, NULL);
    test_collectives(world, x);
    test_p2p(world, NULL);
    test_p2p(world, x);
    test_bad_args(world);
    test_mesh(world);
    test_check_mesh();
    test_abort();
    lcx_exec_free(x);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_comm");
}
