/* model_mesh_fixture: what the MPI tests of a training model over one TP x CP x DP mesh share
 * (test_model_distribute_mpi.c, test_model_sp_mpi.c): a fixture's config cut to 4 layers, the world split into
 * independent worlds of `sub` ranks with the mesh's groups over each, and one row of tokens a micro-batch (this
 * CP rank's chunks of it under CP). Include after test_util.h. */
#ifndef LCX_TEST_MODEL_MESH_FIXTURE_H
#define LCX_TEST_MODEL_MESH_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/core/cp_perm.h"
#include "src/model/model.h"

typedef struct mesh_world {
    lcx_model_config cfg;
    lcx_comm *w;          /* this rank's world of sub ranks */
    lcx_comm_groups gs;   /* the mesh's groups over it */
} mesh_world;

static inline void mesh_world_open(lcx_comm *world, const char *fixture, int sub, int tp, int cp, int dp,
                                   mesh_world *mw) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fixtures/models/%s/config.json", LCX_SOURCE_DIR, fixture);
    memset(mw, 0, sizeof *mw);
    CHECK_OK(lcx_config_load(path, &mw->cfg));
    mw->cfg.num_hidden_layers = 4;
    CHECK_OK(world->impl->split(world, world->rank / sub, world->rank, &mw->w));
    lcx_mesh mesh;
    CHECK_OK(lcx_mesh_init(&mesh, tp, cp, dp));
    CHECK_OK(lcx_comm_mesh(mw->w, &mesh, &mw->gs));
}

static inline void mesh_world_close(mesh_world *mw) {
    lcx_comm_groups_free(&mw->gs);
    mw->w->impl->free(mw->w);
    lcx_config_free(&mw->cfg);
}

/* One row of seq tokens (ids, targets: the next id but every 9th from the 5th ignored, positions 0..) from key k
 * (e.g. 10 x step + micro-batch) into ids/tgt/pos; with CP > 1 this CP rank's chunks of it into lids/ltgt/lpos.
 * *b: the batch this rank trains. */
static inline void mesh_batch(const mesh_world *mw, int cp, int64_t seq, int64_t k, int32_t *ids, int32_t *tgt,
                              int32_t *pos, int32_t *lids, int32_t *ltgt, int32_t *lpos, lcx_batch *b) {
    for (int64_t t = 0; t < seq; t++) {
        ids[t] = (int32_t)(((k * 100 + t) * 2654435761u + 11) % (uint64_t)mw->cfg.vocab_size);
        pos[t] = (int32_t)t;
    }
    for (int64_t t = 0; t < seq; t++) tgt[t] = t + 1 < seq && t % 9 != 4 ? ids[t + 1] : LCX_IGNORE_INDEX;
    *b = (lcx_batch){.n_seq = 1, .seq_len = seq, .ids = ids, .targets = tgt, .positions = pos};
    if (cp == 1) return;
    CHECK_OK(lcx_cp_local_batch(seq, cp, mw->gs.coord.c, ids, tgt, pos, lids, ltgt, lpos));
    *b = (lcx_batch){.n_seq = 1, .seq_len = seq / cp, .ids = lids, .targets = ltgt, .positions = lpos};
}

#endif
