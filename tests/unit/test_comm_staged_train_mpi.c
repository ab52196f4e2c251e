/* The model's parallel training over the staged device communicator (4 ranks, CPU backend): the path a GPU run
 * with several ranks on one device takes, with every device buffer of the model going through staging buffers
 * and MPI. Two meshes of the llama_gqa fixture (random weights), 2 AdamW steps with clipping active:
 *  - TP 2 x CP 2 (the CP ring's isend/irecv, the TP layers' lcx_group_sum, the gradient group's sums);
 *  - DP 2 x CP 2 with ZeRO-1 (its reduce-scatter and all-gather by isend/irecv), with float32 weights and with
 *    bf16 ones (the fp32 master sharded, the all-gather moving the bf16 weights).
 * Each is trained once with the mesh split from the plain MPI world and once from a staged communicator over the
 * same ranks: losses, gradient norms and every master weight (bf16: every stored weight) must be the same bits,
 * since the staged
 * communicator moves the same bytes through the same MPI calls (the model's sums are in rank order either way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "src/comm/comm_device.h"
#include "src/core/cp_perm.h"
#include "src/model/model.h"
#include "test_util.h"

enum { STEPS = 2, SEQ = 32, MSEQ = 2, MAXP = 64 };

typedef struct run_out {
    double loss[STEPS], norm[STEPS];
    float *master[MAXP];
    size_t numel[MAXP], n;
} run_out;

static void run_free(run_out *r) {
    for (size_t i = 0; i < r->n; i++) free(r->master[i]);
}

/* Sequence s of step `step` (the same on every rank): ids, next-token targets (some ignored), positions. */
static void make_rows(int step, int dp_rank, int64_t vocab, int32_t *ids, int32_t *tgt, int32_t *pos) {
    for (int s = 0; s < MSEQ; s++)
        for (int t = 0; t < SEQ; t++) {
            int64_t k = (int64_t)step * 1000 + dp_rank * 100 + s * SEQ + t;
            ids[s * SEQ + t] = (int32_t)((k * 2654435761u + 17) % (uint64_t)vocab);
            pos[s * SEQ + t] = t + 3 * s;
        }
    for (int s = 0; s < MSEQ; s++)
        for (int t = 0; t < SEQ; t++)
            tgt[s * SEQ + t] = t + 1 < SEQ && (t * 7 + s) % 11 != 3 ? ids[s * SEQ + t + 1] : LCX_IGNORE_INDEX;
}

static void train(lcx_comm *world, const lcx_model_config *cfg, int tp, int cp, int dp, int zero, lcx_dtype dt,
                  run_out *r) {
    memset(r, 0, sizeof *r);
    lcx_mesh mesh;
    lcx_comm_groups gs;
    CHECK_OK(lcx_mesh_init(&mesh, tp, cp, dp));
    CHECK_OK(lcx_comm_mesh(world, &mesh, &gs));
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = dt;
    o.max_tokens = MSEQ * SEQ / cp;
    o.loss_chunk = 7;
    o.training = 1;
    o.tp_comm = tp > 1 ? gs.group[LCX_GROUP_TP] : NULL;
    o.cp_comm = cp > 1 ? gs.group[LCX_GROUP_CP] : NULL;
    o.zero_comm = zero ? gs.group[LCX_GROUP_GRAD] : NULL;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 77, 0.08));
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    ao.lr = 1e-2, ao.weight_decay = 0.1, ao.max_grad_norm = 0.3, ao.eps = 1e-6;
    const int64_t L = SEQ / cp;
    int32_t ids[MSEQ * SEQ], tgt[MSEQ * SEQ], pos[MSEQ * SEQ], lid[MSEQ * SEQ], ltg[MSEQ * SEQ], lpos[MSEQ * SEQ];
    for (int step = 0; m && step < STEPS; step++) {
        make_rows(step, gs.coord.d, cfg->vocab_size, ids, tgt, pos);
        for (int s = 0; s < MSEQ; s++)
            CHECK_OK(lcx_cp_local_batch(SEQ, cp, gs.coord.c, ids + s * SEQ, tgt + s * SEQ, pos + s * SEQ,
                                        lid + s * L, ltg + s * L, lpos + s * L));
        lcx_batch b = {.n_seq = MSEQ, .seq_len = L, .ids = lid, .targets = ltg, .positions = lpos};
        lcx_step_result res;
        CHECK_OK(lcx_model_train_step_group(m, &b, 1, &ao, gs.group[LCX_GROUP_GRAD], &res));
        r->loss[step] = res.loss, r->norm[step] = res.grad_norm;
    }
    const lcx_param_table *t = m ? lcx_model_params(m) : NULL;
    for (size_t i = 0; t && i < t->n && i < MAXP; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_model_param_slice(m, i, &s));
        size_t n = 1;
        for (int k = 0; k < s.ndim; k++) n *= (size_t)s.local[k];
        r->numel[i] = n;
        r->master[i] = malloc(n * sizeof(float));
        CHECK_OK(dt == LCX_BF16 ? lcx_model_get_param(m, i, r->master[i]) : lcx_model_get_master(m, i, r->master[i]));
        r->n = i + 1;
    }
    lcx_model_free(m);
    lcx_comm_groups_free(&gs);
}

static void check_same(lcx_comm *world, lcx_comm *staged, const lcx_model_config *cfg, int tp, int cp, int dp,
                       int zero, lcx_dtype dt) {
    run_out a, b;
    train(world, cfg, tp, cp, dp, zero, dt, &a);
    train(staged, cfg, tp, cp, dp, zero, dt, &b);
    CHECK_MSG(a.n == b.n && a.n > 0, "tp %d cp %d dp %d: %zu vs %zu parameters", tp, cp, dp, a.n, b.n);
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(a.loss[s] == b.loss[s] && a.norm[s] == b.norm[s],
                  "tp %d cp %d dp %d zero %d step %d: loss %.17g vs %.17g, norm %.17g vs %.17g", tp, cp, dp, zero, s,
                  a.loss[s], b.loss[s], a.norm[s], b.norm[s]);
    size_t differ = 0;
    for (size_t i = 0; i < a.n && i < b.n; i++)
        differ += a.numel[i] != b.numel[i] || memcmp(a.master[i], b.master[i], a.numel[i] * sizeof(float)) != 0;
    CHECK_MSG(differ == 0, "tp %d cp %d dp %d zero %d rank %d: %zu parameters differ after %d steps", tp, cp, dp,
              zero, world->rank, differ, STEPS);
    /* the run did something: the loss moved */
    CHECK_MSG(a.loss[STEPS - 1] != a.loss[0], "tp %d cp %d dp %d: the loss did not change", tp, cp, dp);
    run_free(&a), run_free(&b);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK || world->size != 4) {
        fprintf(stderr, "test_comm_staged_train_mpi: needs 4 MPI ranks (%s)\n", world ? "" : lcx_last_error());
        return 1;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fixtures/models/llama_gqa/config.json", LCX_SOURCE_DIR);
    lcx_model_config cfg;
    CHECK_OK(lcx_config_load(path, &cfg));
    lcx_comm *inner = NULL, *staged = NULL;
    CHECK_OK(world->impl->split(world, 0, world->rank, &inner));
    CHECK_OK(lcx_comm_staged(inner, lcx_comm_stager_backend(), &staged));
    if (staged) {
        check_same(world, staged, &cfg, 2, 2, 1, 0, LCX_F32);
        check_same(world, staged, &cfg, 1, 2, 2, 1, LCX_F32);
        check_same(world, staged, &cfg, 1, 2, 2, 1, LCX_BF16);
        staged->impl->free(staged);
    }
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_comm_staged_train_mpi");
}
