/* A device communicator against a host one over the same ranks, on the same data (test_comm_staged_mpi.c on the
 * CPU backend, test_comm_nccl_cuda.c on a GPU). Every collective in every dtype and reduction, in and out of place,
 * a ring exchange of two messages per step, the model's fixed-order sum (lcx_group_sum) and host calls through the
 * device communicator: the result, copied back, must be the reference's bytes. The one exception is NCCL's sum
 * (all_reduce, reduce_scatter) of data whose sum is not exact: NCCL adds in its own order, so those are checked
 * within the rounding of that order (`ordered` 0), and exact sums (small integers) still bit for bit. */
#ifndef LCX_TEST_COMM_COMPARE_H
#define LCX_TEST_COMM_COMPARE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/model/model_dp.h"
#include "test_util.h"

enum { CC_N = 37, CC_DTYPES = 4 };
static const lcx_dtype cc_dtypes[CC_DTYPES] = {LCX_F32, LCX_BF16, LCX_F64, LCX_I64};

/* Rank w's element i: small integers (every sum exact in every dtype) or values of mixed sign and magnitude. */
static double cc_value(int w, int64_t i, int exact, int salt) {
    if (exact) return (double)(((w + 1) * 7 + i * 5 + salt) % 19) - 9;
    uint64_t h = (uint64_t)(w + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1) * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)salt;
    h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 32;
    return ((double)(h >> 11) * 0x1p-53 - 0.5) * (double)(1 << (h & 7));
}

static void cc_fill(void *p, lcx_dtype dt, int64_t n, int w, int exact, int salt) {
    for (int64_t i = 0; i < n; i++) {
        double v = cc_value(w, i, exact, salt);
        switch (dt) {
        case LCX_F32: ((float *)p)[i] = (float)v; break;
        case LCX_BF16: ((uint16_t *)p)[i] = lcx_f32_to_bf16((float)v); break;
        case LCX_F64: ((double *)p)[i] = v; break;
        default: ((int64_t *)p)[i] = (int64_t)(v * 1000); break;
        }
    }
}

static double cc_load(const void *p, lcx_dtype dt, int64_t i) {
    switch (dt) {
    case LCX_F32: return ((const float *)p)[i];
    case LCX_BF16: return lcx_bf16_to_f32(((const uint16_t *)p)[i]);
    case LCX_F64: return ((const double *)p)[i];
    default: return (double)((const int64_t *)p)[i];
    }
}

typedef struct cc_ctx {
    lcx_comm *dc, *ref; /* device communicator, host reference (same ranks, same order) */
    lcx_exec *x;        /* the device communicator's buffers live on x's backend */
    int ordered;        /* its sums are the reference's bits on any data */
    const char *what;
} cc_ctx;

static void *cc_dev(const cc_ctx *t, const void *host, size_t bytes) {
    void *d = NULL;
    CHECK_OK(t->x->be->alloc(bytes, &d));
    if (d && host && bytes) CHECK_OK(t->x->be->copy_h2d(t->x, d, host, bytes));
    return d;
}

/* The device result `dev` (bytes) against the reference `want`. Unordered sums of inexact data: within
 * (ranks - 1) roundings of the dtype relative to the sum of magnitudes of the inputs (`mag`). */
static void cc_expect(const cc_ctx *t, const void *dev, const void *want, size_t bytes, lcx_dtype dt,
                      const double *mag, const char *call, const char *detail) {
    unsigned char *got = malloc(bytes ? bytes : 1);
    CHECK_OK(t->x->be->copy_d2h(t->x, got, dev, bytes));
    if (!mag) {
        CHECK_MSG(memcmp(got, want, bytes) == 0, "%s: %s %s (%s) differs from the reference on rank %d", t->what,
                  call, lcx_dtype_name(dt), detail, t->ref->rank);
    } else {
        const double eps = dt == LCX_BF16 ? 0x1p-8 : dt == LCX_F32 ? 0x1p-24 : 0x1p-53;
        int64_t n = (int64_t)(bytes / lcx_comm_dtype_size(dt)), bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (!(fabs(cc_load(got, dt, i) - cc_load(want, dt, i)) <= 2.0 * t->ref->size * eps * mag[i])) bad = i;
        CHECK_MSG(bad < 0, "%s: %s %s (%s) element %lld: %.9g, reference %.9g", t->what, call, lcx_dtype_name(dt),
                  detail, (long long)bad, bad < 0 ? 0 : cc_load(got, dt, bad), bad < 0 ? 0 : cc_load(want, dt, bad));
    }
    free(got);
}

static void cc_collectives(const cc_ctx *t, lcx_dtype dt, int exact) {
    const int P = t->ref->size, me = t->ref->rank, w = t->ref->world_rank;
    const size_t es = lcx_comm_dtype_size(dt), nb = CC_N * es, all = nb * (size_t)P;
    const char *detail = exact ? "exact data" : "inexact data";
    unsigned char *hs = malloc(all), *hr = malloc(all);
    double *mag = calloc((size_t)P * CC_N, sizeof *mag);
    /* the magnitudes of every rank's inputs, known to all (cc_value is a function of the world rank) */
    int64_t *worlds = malloc((size_t)P * sizeof *worlds), mine = w;
    CHECK_OK(lcx_comm_all_gather(t->ref, NULL, &mine, worlds, 1, LCX_I64));
    for (int q = 0; q < P; q++)
        for (int64_t i = 0; i < (int64_t)P * CC_N; i++) mag[i] += fabs(cc_value((int)worlds[q], i, exact, 3));
    cc_fill(hs, dt, (int64_t)P * CC_N, w, exact, 3);
    void *ds = cc_dev(t, hs, all), *dr = cc_dev(t, NULL, all);
    for (int op = 0; op < LCX_COMM_OP_COUNT; op++) {
        const int loose = !t->ordered && !exact && op == LCX_COMM_SUM && dt != LCX_I64;
        CHECK_OK(lcx_comm_all_reduce(t->ref, NULL, hs, hr, CC_N, dt, (lcx_comm_op)op));
        CHECK_OK(lcx_comm_all_reduce(t->dc, t->x, ds, dr, CC_N, dt, (lcx_comm_op)op));
        cc_expect(t, dr, hr, nb, dt, loose ? mag : NULL, op ? "all_reduce max" : "all_reduce sum", detail);
        CHECK_OK(lcx_comm_all_reduce(t->dc, t->x, ds, ds, CC_N, dt, (lcx_comm_op)op)); /* in place */
        cc_expect(t, ds, hr, nb, dt, loose ? mag : NULL, "all_reduce in place", detail);
        CHECK_OK(t->x->be->copy_h2d(t->x, ds, hs, all));
        CHECK_OK(lcx_comm_reduce_scatter(t->ref, NULL, hs, hr, CC_N, dt, (lcx_comm_op)op));
        CHECK_OK(lcx_comm_reduce_scatter(t->dc, t->x, ds, dr, CC_N, dt, (lcx_comm_op)op));
        cc_expect(t, dr, hr, nb, dt, loose ? mag + (size_t)me * CC_N : NULL,
                  op ? "reduce_scatter max" : "reduce_scatter sum", detail);
    }
    CHECK_OK(lcx_comm_all_gather(t->ref, NULL, hs, hr, CC_N, dt));
    CHECK_OK(lcx_comm_all_gather(t->dc, t->x, ds, dr, CC_N, dt));
    cc_expect(t, dr, hr, all, dt, NULL, "all_gather", detail);
    const int root = P - 1; /* not 0: a broadcast that ignores its root fails */
    memcpy(hr, hs, nb);
    CHECK_OK(lcx_comm_broadcast(t->ref, NULL, hr, CC_N, dt, root));
    CHECK_OK(lcx_comm_broadcast(t->dc, t->x, ds, CC_N, dt, root));
    cc_expect(t, ds, hr, nb, dt, NULL, "broadcast", detail);
    t->x->be->free(ds), t->x->be->free(dr);
    free(hs), free(hr), free(mag), free(worlds);
}

/* The CP ring's pattern: each rank posts a receive from rank - 1 and a send to rank + 1, twice (two tags, in the
 * same order on every rank), then waits for all four. */
static void cc_ring(const cc_ctx *t) {
    const int P = t->dc->size, next = (t->dc->rank + 1) % P, prev = (t->dc->rank + P - 1) % P;
    int64_t *pw = malloc(sizeof *pw * (size_t)P), w = t->ref->world_rank;
    CHECK_OK(lcx_comm_all_gather(t->ref, NULL, &w, pw, 1, LCX_I64));
    float hs[2][CC_N], want[2][CC_N];
    for (int m = 0; m < 2; m++) {
        cc_fill(hs[m], LCX_F32, CC_N, (int)w, 0, 10 + m);
        cc_fill(want[m], LCX_F32, CC_N, (int)pw[prev], 0, 10 + m);
    }
    float *ds = cc_dev(t, hs, sizeof hs), *dr = cc_dev(t, NULL, sizeof hs);
    lcx_comm_request *q[4];
    for (int m = 0; m < 2; m++) {
        CHECK_OK(lcx_comm_irecv(t->dc, t->x, dr + m * CC_N, CC_N, LCX_F32, prev, 7 + m, &q[2 * m]));
        CHECK_OK(lcx_comm_isend(t->dc, t->x, ds + m * CC_N, CC_N, LCX_F32, next, 7 + m, &q[2 * m + 1]));
    }
    CHECK_OK(lcx_comm_waitall(t->dc, 4, q));
    cc_expect(t, dr, want, sizeof want, LCX_F32, NULL, "ring send/recv", "two messages per step");
    t->x->be->free(ds), t->x->be->free(dr);
    free(pw);
}

/* lcx_group_sum (all-gather, then adds in rank order) through the device communicator on x against the same sum
 * through the reference on the CPU backend: the same bits. */
static void cc_group_sum(const cc_ctx *t, lcx_dtype dt) {
    const int P = t->ref->size;
    const size_t nb = CC_N * lcx_comm_dtype_size(dt);
    unsigned char *h = malloc(nb), *scratch = malloc(nb * (size_t)P);
    cc_fill(h, dt, CC_N, t->ref->world_rank, 0, 20);
    void *d = cc_dev(t, h, nb), *ds = cc_dev(t, NULL, nb * (size_t)P);
    lcx_exec *cpu = NULL;
    CHECK_OK(lcx_exec_create(lcx_backend_cpu(), &cpu));
    CHECK_OK(lcx_group_sum(t->ref, lcx_backend_cpu(), cpu, dt, h, CC_N, ~(uint64_t)0, scratch));
    CHECK_OK(lcx_group_sum(t->dc, t->x->be, t->x, dt, d, CC_N, ~(uint64_t)0, ds));
    cc_expect(t, d, h, nb, dt, NULL, "lcx_group_sum", "ordered sum");
    lcx_exec_free(cpu);
    t->x->be->free(d), t->x->be->free(ds);
    free(h), free(scratch);
}

/* Host buffers (exec NULL) through the device communicator: the inner communicator's results. */
static void cc_host_calls(const cc_ctx *t) {
    int64_t a[3] = {t->ref->world_rank, -t->ref->world_rank, 5}, b[3];
    memcpy(b, a, sizeof a);
    CHECK_OK(lcx_comm_all_reduce(t->ref, NULL, a, a, 3, LCX_I64, LCX_COMM_SUM));
    CHECK_OK(lcx_comm_all_reduce(t->dc, NULL, b, b, 3, LCX_I64, LCX_COMM_SUM));
    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "%s: host all_reduce through the device communicator", t->what);
    CHECK_OK(lcx_comm_barrier(t->dc, NULL));
    CHECK_OK(lcx_comm_barrier(t->dc, t->x));
}

static void cc_compare(const cc_ctx *t) {
    CHECK_MSG(t->dc->rank == t->ref->rank && t->dc->size == t->ref->size, "%s: rank %d of %d, reference %d of %d",
              t->what, t->dc->rank, t->dc->size, t->ref->rank, t->ref->size);
    for (int d = 0; d < CC_DTYPES; d++)
        for (int exact = 0; exact < 2; exact++) cc_collectives(t, cc_dtypes[d], exact);
    cc_ring(t);
    cc_group_sum(t, LCX_F32);
    cc_group_sum(t, LCX_BF16);
    cc_host_calls(t);
    /* empty buffers move nothing and fail nothing */
    CHECK_OK(lcx_comm_all_gather(t->dc, t->x, NULL, NULL, 0, LCX_F32));
    CHECK_OK(lcx_comm_all_reduce(t->dc, t->x, NULL, NULL, 0, LCX_F32, LCX_COMM_SUM));
}

/* cc_compare on the world, then on each group of a TP x CP x DP mesh laid over both communicators. */
static void cc_compare_mesh(lcx_comm *dc, lcx_comm *ref, lcx_exec *x, int ordered, int tp, int cp, int dp,
                            const char *what) {
    lcx_mesh m;
    lcx_comm_groups gd, gr;
    CHECK_OK(lcx_mesh_init(&m, tp, cp, dp));
    CHECK_OK(lcx_comm_mesh(dc, &m, &gd));
    CHECK_OK(lcx_comm_mesh(ref, &m, &gr));
    static const char *const kinds[] = {"tp", "cp", "dp", "grad"};
    for (int k = 0; k < LCX_GROUP_COUNT && gd.group[k] && gr.group[k]; k++) {
        char name[96];
        snprintf(name, sizeof name, "%s mesh %dx%dx%d %s group", what, tp, cp, dp, k < 4 ? kinds[k] : "?");
        /* the parent's kind, but a one-rank group split from NCCL is staged (no NCCL communicator of one) */
        const char *want = gd.group[k]->size == 1 && !strcmp(dc->impl->name, "nccl") ? "staged" : dc->impl->name;
        CHECK_MSG(strcmp(gd.group[k]->impl->name, want) == 0, "%s is %s, not %s", name, gd.group[k]->impl->name,
                  want);
        cc_ctx t = {.dc = gd.group[k], .ref = gr.group[k], .x = x, .ordered = ordered, .what = name};
        cc_compare(&t);
    }
    lcx_comm_groups_free(&gd);
    lcx_comm_groups_free(&gr);
}

#endif /* LCX_TEST_COMM_COMPARE_H */
