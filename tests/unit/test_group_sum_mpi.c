/* The rank-ordered sums of src/model/model_dp.h (4 ranks): lcx_group_sum_all (a reduce-scatter of pieces sent
 * point to point, then an all-gather) must give every rank the bits of lcx_group_sum over every rank (the whole
 * buffers all-gathered and added in rank order), and lcx_group_reduce_piece each rank its piece of that sum with
 * the rest of the piece zeroed; lcx_dp_sum_f32 in chunks the same. Float32 and bf16, lengths that do not divide
 * into 4 pieces, shorter than 4 (ranks with an empty piece), and groups of 2 and 3 ranks (split worlds). The values
 * are random with magnitudes over many octaves, so that another order of the additions changes bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "src/comm/comm.h"
#include "src/model/model_dp.h"
#include "test_util.h"

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* n values of dtype dt, different on every rank r of the world */
static void fill(void *buf, int64_t n, lcx_dtype dt, int r, int salt) {
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1) + (uint64_t)salt;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0;
        float v = (float)((u - 0.5) * ldexp(1.0, (int)(s % 24) - 12));
        if (dt == LCX_F32) ((float *)buf)[i] = v;
        else ((uint16_t *)buf)[i] = to_bf16(v);
    }
}

static void check_case(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, int64_t n, int salt,
                       int world_rank) {
    const size_t es = dt == LCX_F32 ? 4 : 2;
    const int size = g->size;
    const int64_t p = (n + size - 1) / size;
    char *ref = malloc((size_t)n * es + 1), *got = malloc((size_t)n * es + 1), *piece = malloc((size_t)p * es + 1);
    char *gather = malloc((size_t)(size * n) * es + 1);
    char *scratch = malloc((size_t)lcx_group_sum_all_scratch(size, n) * es + 1);
    char *recv = malloc((size_t)(size * p) * es + 1);
    fill(ref, n, dt, world_rank, salt);
    memcpy(got, ref, (size_t)n * es);
    CHECK_OK(lcx_group_reduce_piece(g, be, x, dt, got, n, p, recv, piece, 5));
    CHECK_OK(lcx_group_sum(g, be, x, dt, ref, n, ~(uint64_t)0, gather));
    CHECK_OK(lcx_group_sum_all(g, be, x, dt, got, n, scratch, 6));
    CHECK_MSG(memcmp(ref, got, (size_t)n * es) == 0, "%s n %lld over %d ranks: the sum's bits differ",
              dt == LCX_F32 ? "f32" : "bf16", (long long)n, size);
    const int64_t k = lcx_piece_len(n, p, g->rank);
    int zero = 1;
    for (size_t b = (size_t)k * es; b < (size_t)p * es; b++) zero &= piece[b] == 0;
    CHECK_MSG(memcmp(piece, ref + (size_t)(g->rank * p) * es, (size_t)k * es) == 0 && zero,
              "%s n %lld over %d ranks: rank %d's piece (%lld of %lld elements) is not its part of the sum",
              dt == LCX_F32 ? "f32" : "bf16", (long long)n, size, g->rank, (long long)k, (long long)p);
    if (dt == LCX_F32) { /* the gradient group's sum in chunks of 7 */
        fill(got, n, dt, world_rank, salt);
        CHECK_OK(lcx_dp_sum_f32(g, be, x, (float *)got, n, 7, NULL));
        CHECK_MSG(memcmp(ref, got, (size_t)n * es) == 0, "lcx_dp_sum_f32 n %lld over %d ranks differs",
                  (long long)n, size);
    }
    free(ref);
    free(got);
    free(piece);
    free(gather);
    free(scratch);
    free(recv);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_group_sum_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_group_sum_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    const lcx_backend *be = lcx_backend_cpu();
    lcx_exec *x = NULL;
    CHECK_OK(lcx_exec_create(be, &x));
    const int64_t lengths[] = {1, 3, 4, 5, 17, 1000, 4099};
    int cases = 0;
    /* the world, then split into 2 + 2 and 3 + 1 */
    for (int layout = 0; layout < 3; layout++) {
        lcx_comm *g = world;
        if (layout == 1) CHECK_OK(world->impl->split(world, world->rank / 2, world->rank, &g));
        if (layout == 2) CHECK_OK(world->impl->split(world, world->rank < 3, world->rank, &g));
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
            for (int d = 0; d < 2; d++, cases++)
                check_case(g, be, x, d ? LCX_BF16 : LCX_F32, lengths[i], (int)i, world->rank);
        if (g != world) g->impl->free(g);
    }
    if (world->rank == 0)
        printf("%d cases (f32 and bf16, 7 lengths, groups of 4, 2, 3 and 1 ranks): lcx_group_sum_all and its pieces "
               "have lcx_group_sum's bits\n", cases);
    lcx_exec_free(x);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_group_sum_mpi");
}
