/* mesh: the TP, CP, DP and gradient communicators of a TP x CP x DP mesh, split from the world so that each
 * group's rank order is lcx_mesh_group's list (src/core/layout.h). */
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"

lcx_status lcx_comm_mesh(lcx_comm *world, const lcx_mesh *mesh, lcx_comm_groups *out) {
    LCX_FAIL_IF(!world || !world->impl || !mesh || !out, LCX_ERR_INVALID, "comm mesh: missing argument");
    memset(out, 0, sizeof *out);
    /* Every rank must have been given the same mesh, or the splits below would pair ranks wrongly. This comes
     * first so that every rank takes part even when some would fail a local check. One max over
     * (tp, cp, dp, -tp, -cp, -dp) gives max and min of each. */
    int64_t mm[6] = {mesh->tp, mesh->cp, mesh->dp, -mesh->tp, -mesh->cp, -mesh->dp};
    LCX_TRY(lcx_comm_all_reduce(world, NULL, mm, mm, 6, LCX_I64, LCX_COMM_MAX));
    LCX_FAIL_IF(mm[0] != -mm[3] || mm[1] != -mm[4] || mm[2] != -mm[5], LCX_ERR_INVALID,
                "ranks were given different meshes (tp %lld..%lld, cp %lld..%lld, dp %lld..%lld)",
                (long long)-mm[3], (long long)mm[0], (long long)-mm[4], (long long)mm[1], (long long)-mm[5],
                (long long)mm[2]);
    /* Same message on every rank: it names the mesh and the world, never the rank. */
    LCX_FAIL_IF(world->size != mesh->world || mesh->tp * mesh->cp * mesh->dp != mesh->world, LCX_ERR_INVALID,
                "mesh tp=%d cp=%d dp=%d needs %d ranks, but the world has %d", mesh->tp, mesh->cp, mesh->dp,
                mesh->tp * mesh->cp * mesh->dp, world->size);
    out->mesh = *mesh;
    LCX_TRY(lcx_mesh_coord_of(mesh, world->rank, &out->coord));
    lcx_status st = LCX_OK;
    int members[1] = {0};
    for (int k = 0; k < LCX_GROUP_COUNT; k++) {
        int n, index;
        /* The list's first member names the group (color); the position in it is the new rank (key). */
        int cap = lcx_mesh_group_size(mesh, (lcx_group_kind)k);
        int *list = cap <= 1 ? members : malloc((size_t)cap * sizeof *list);
        LCX_FAIL_GOTO(!list, LCX_ERR_OOM, fail, "comm mesh: out of memory for a group of %d ranks", cap);
        st = lcx_mesh_group(mesh, world->rank, (lcx_group_kind)k, list, cap, &n, &index);
        int color = list[0];
        if (list != members) free(list);
        if (st != LCX_OK) goto fail;
        LCX_TRY_GOTO(world->impl->split(world, color, index, &out->group[k]), fail);
        LCX_FAIL_GOTO(out->group[k]->rank != index || out->group[k]->size != n, LCX_ERR_COMM, fail,
                      "rank %d: group %d came out as rank %d of %d, layout says %d of %d", world->rank, k,
                      out->group[k]->rank, out->group[k]->size, index, n);
    }
    return LCX_OK;
fail:
    lcx_comm_groups_free(out);
    return st;
}

void lcx_comm_groups_free(lcx_comm_groups *g) {
    if (!g) return;
    for (int k = 0; k < LCX_GROUP_COUNT; k++) {
        if (g->group[k]) g->group[k]->impl->free(g->group[k]);
        g->group[k] = NULL;
    }
}
