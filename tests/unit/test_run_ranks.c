/* run_ranks: every rank of several TP x CP x DP meshes, its groups made as lcx_comm_mesh makes them (sizes and
 * ranks from lcx_mesh_group), resolves to the groups a run uses; each inconsistency a caller could pass (a rank
 * or size that is not the group's, CP without a gradient group, a world that is not TP x grad) fails with a line
 * naming it. Communicators are plain structs here: resolving reads only their rank and size. */
#include <string.h>

#include "src/comm/comm.h"
#include "src/comm/run_ranks.h"
#include "src/core/layout.h"
#include "test_util.h"

/* One rank's communicators and ranks, as the CLI's mesh gives them. */
typedef struct {
    lcx_comm world, group[LCX_GROUP_COUNT];
    lcx_run_ranks rk;
} rank_view;

static void view_of(const lcx_mesh *m, int r, rank_view *v) {
    memset(v, 0, sizeof *v);
    v->world = (lcx_comm){.rank = r, .size = m->world, .world_rank = r};
    for (int k = 0; k < LCX_GROUP_COUNT; k++) {
        int members[64], n = 0, idx = 0;
        CHECK_OK(lcx_mesh_group(m, r, (lcx_group_kind)k, members, 64, &n, &idx));
        v->group[k] = (lcx_comm){.rank = idx, .size = n, .world_rank = r};
    }
    lcx_mesh_coord c;
    CHECK_OK(lcx_mesh_coord_of(m, r, &c));
    const int many = m->world > 1;
    v->rk = (lcx_run_ranks){.world = many ? &v->world : NULL,
                            .grad = many ? &v->group[LCX_GROUP_GRAD] : NULL,
                            .cp_comm = m->cp > 1 ? &v->group[LCX_GROUP_CP] : NULL,
                            .tp_comm = m->tp > 1 ? &v->group[LCX_GROUP_TP] : NULL,
                            .dp_rank = c.d, .dp_size = m->dp, .cp_rank = c.c, .cp_size = m->cp,
                            .tp_rank = c.t, .tp_size = m->tp};
}

static void test_meshes(void) {
    const int cfg[][3] = {{1, 1, 1}, {1, 1, 4}, {1, 2, 1}, {2, 1, 1}, {2, 2, 2}, {4, 2, 1}, {1, 4, 2}, {2, 3, 2}};
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        lcx_mesh m;
        CHECK_OK(lcx_mesh_init(&m, cfg[ci][0], cfg[ci][1], cfg[ci][2]));
        for (int r = 0; r < m.world; r++) {
            rank_view v;
            view_of(&m, r, &v);
            lcx_run_groups g;
            CHECK_OK(lcx_run_ranks_resolve(&v.rk, "train", &g));
            const int grad_n = m.cp * m.dp;
            CHECK(g.g == (grad_n > 1 ? &v.group[LCX_GROUP_GRAD] : NULL));
            CHECK(g.all == (m.world > 1 ? &v.world : NULL));
            CHECK(g.lead == (r == 0));
            CHECK(g.tp == m.tp && g.cp == m.cp);
            CHECK(g.tpc == (m.tp > 1 ? &v.group[LCX_GROUP_TP] : NULL));
            CHECK(g.cpc == (m.cp > 1 ? &v.group[LCX_GROUP_CP] : NULL));
            /* the gradient group's rank is cp_rank + cp x dp_rank (lcx_mesh's order) */
            if (g.g) CHECK(g.g->rank == g.cp_rank + m.cp * g.dp_rank);
            CHECK(g.dp_size == (grad_n > 1 ? m.dp : 1));
            CHECK(g.dp_rank >= 0 && g.dp_rank < g.dp_size);
        }
    }
    /* no ranks at all: one rank */
    lcx_run_ranks none;
    memset(&none, 0, sizeof none);
    lcx_run_groups g;
    CHECK_OK(lcx_run_ranks_resolve(&none, "train", &g));
    CHECK(!g.g && !g.all && !g.tpc && !g.cpc && g.lead && g.tp == 1 && g.cp == 1 && g.dp_size == 1);
}

static void test_mismatches(void) {
    lcx_mesh m;
    CHECK_OK(lcx_mesh_init(&m, 2, 2, 2));
    rank_view v;
    lcx_run_groups g;
    const int r = 5; /* t 1, c 0, d 1 */
    view_of(&m, r, &v);
    v.rk.cp_rank = 1;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "extend", &g), LCX_ERR_INVALID,
                "extend: CP rank 1 of 2 does not match the CP group's rank 0 of 2");
    CHECK(g.all == &v.world && !g.lead); /* filled before the checks: the caller's agreement needs all */
    view_of(&m, r, &v);
    v.rk.cp_size = 4;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID, "CP rank 0 of 4 does not match");
    view_of(&m, r, &v);
    v.rk.grad = NULL;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID,
                "train: context parallelism needs the gradient group (CP x DP)");
    view_of(&m, r, &v);
    v.rk.tp_rank = 0;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID,
                "train: TP rank 0 of 2 does not match the TP group's rank 1 of 2 and a world of 8 ranks "
                "(TP x the gradient group's 4)");
    view_of(&m, r, &v);
    v.world.size = 6;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID, "a world of 6 ranks");
    view_of(&m, r, &v);
    v.rk.world = NULL; /* TP needs the world */
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID, "TP rank 1 of 2 does not match");
    view_of(&m, r, &v);
    v.rk.dp_rank = 0;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID,
                "train: CP rank 0 of 2, DP rank 0 of 2 do not match the gradient group's rank 2 of 4");
    view_of(&m, r, &v);
    v.rk.dp_size = 4;
    CHECK_FAILS(lcx_run_ranks_resolve(&v.rk, "train", &g), LCX_ERR_INVALID, "DP rank 1 of 4 do not match");
    /* one rank's view of a TP or CP group is no group: sizes 0 and 1 mean none */
    view_of(&m, r, &v);
    v.rk.tp_size = 1;
    v.rk.tp_comm = &v.group[LCX_GROUP_TP];
    v.rk.world = &v.group[LCX_GROUP_GRAD]; /* without TP the job is the gradient group */
    CHECK_OK(lcx_run_ranks_resolve(&v.rk, "train", &g));
    CHECK(!g.tpc && g.tp == 1);
}

int main(void) {
    test_meshes();
    test_mismatches();
    return test_summary("test_run_ranks");
}
