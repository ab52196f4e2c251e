/* Data parallelism (4 ranks): the stage loop (lcx_train_stage_run) over a gradient group of DP = 2 (mesh
 * tp=2 cp=1 dp=2: two groups {0, 2} and {1, 3}) and DP = 4 (mesh 1x1x4), each rank training on its slice of every
 * step's sequences, against one rank training on all of them (micro-batches D times larger; every rank runs
 * that reference itself, without communicating). Over STEPS AdamW steps with clipping active:
 *   - per-step loss and gradient norm within REL_TOL (relative) of the reference, tokens equal;
 *   - final fp32 master weights within W_TOL (absolute) of the reference;
 *   - every rank of a group holds bit-identical weights, and a rerun repeats losses and weights bit for bit.
 * Tolerances: float32 sums run in another order (a rank's GEMMs add D times fewer rows, then the ranks'
 * gradients are added in rank order). Loss and gradient norm: measured <= 2e-7 relative, REL_TOL 2e-6. Weights:
 * AdamW moves an element by lr * m / (sqrt(v) + eps), which turns the rounding difference of a gradient element
 * near eps into a visible one (eps 1e-6 here; with 1e-8 single elements differ by 2.5e-4); measured <= 3.1e-5
 * after 4 steps at lr 1e-2 with OpenBLAS's Haswell kernels, 1.1e-4 with its Cooperlake (AVX-512) kernels on an
 * AMD EPYC; W_TOL 3e-4 (3% of one step's largest update: a gradient left out of the sum, or added twice, moves
 * weights by the order of lr, and the losses and norms above catch it at 2e-6). Float32 parameters.
 * Also: the group step with a ragged batch (ignored labels, different counts per rank) equals one rank's step over
 * all rows, and a group of size 1 is the one-rank step bit for bit. */
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


#define STEPS 4
#define SEQ 16
#define ACCUM 2
#define REL_TOL 2e-6
#define W_TOL 3e-4
#define EPS 1e-6
#include "train_mpi_fixture.h"
#include "worst_of.h"

/* One stage run; returns the final master weights (malloc'd, all parameters back to back). */
static float *train(const lcx_tokdata *td, const char *name, lcx_comm *grad, int dp_rank, int dp_size,
                    int64_t micro_seqs, run_log *log, size_t *n_out) {
    const lcx_mix_data data = lcx_mix_single(td);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", g_root, name);
    mkdir(dir, 0777);
    memset(log, 0, sizeof *log);
    lcx_reporter rep = {.event = on_event, .user = log};
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = dir;
    ctx.model_config = g_cfg.json;
    ctx.report = &rep;
    ctx.grad = grad;
    ctx.dp_rank = dp_rank;
    ctx.dp_size = dp_size;
    lcx_train_stage sg = stage(micro_seqs, 0);
    lcx_model *m = new_model(micro_seqs * SEQ, NULL);
    lcx_train_state state;
    lcx_train_state_init(&state);
    lcx_train_summary sum;
    CHECK_OK(lcx_train_stage_run(m, &data, &sg, &ctx, &state, &sum));
    CHECK(log->n == STEPS);
    float *w = masters(m, n_out);
    lcx_train_state_free(&state);
    lcx_model_free(m);
    return w;
}

/* DP = dp_size over the mesh's gradient group g, against the reference run on this rank alone. */
static void check_dp(const lcx_tokdata *td, lcx_comm *g, int dp_size, int tag) {
    char name[64];
    run_log ref, a, b;
    size_t n_ref = 0, n_a = 0, n_b = 0;
    snprintf(name, sizeof name, "ref%d-r%d", dp_size, g_world_rank);
    float *w_ref = train(td, name, NULL, 0, 0, dp_size, &ref, &n_ref);
    snprintf(name, sizeof name, "dp%d-g%d-a", dp_size, tag);
    float *w_a = train(td, name, g, g->rank, dp_size, 1, &a, &n_a);
    snprintf(name, sizeof name, "dp%d-g%d-b", dp_size, tag);
    float *w_b = train(td, name, g, g->rank, dp_size, 1, &b, &n_b);
    CHECK(n_ref == n_a && n_a == n_b);
    double max_rel = 0, max_w = 0;
    for (int s = 0; s < STEPS && s < a.n && s < ref.n; s++) {
        CHECK_REL(a.loss[s], ref.loss[s], REL_TOL);
        CHECK_REL(a.norm[s], ref.norm[s], REL_TOL);
        CHECK_REL(a.clip[s], ref.clip[s], 1e-5); /* reported with 6 digits */
        CHECK(a.tokens[s] == ref.tokens[s]);
        max_rel = worst_of(max_rel, fabs(a.loss[s] - ref.loss[s]) / ref.loss[s]);
        max_rel = worst_of(max_rel, fabs(a.norm[s] - ref.norm[s]) / ref.norm[s]);
        CHECK_MSG(a.loss[s] == b.loss[s] && a.norm[s] == b.norm[s], "DP=%d step %d: the rerun differs", dp_size,
                  s + 1);
    }
    CHECK_MSG(ref.clip[0] < 1, "clipping inactive (clip %g): the test wants it active", ref.clip[0]);
    for (size_t i = 0; i < n_a && n_a == n_ref; i++) max_w = worst_of(max_w, fabs((double)w_a[i] - w_ref[i]));
    CHECK_MSG(max_w <= W_TOL, "DP=%d: weights differ from the reference by %g (tol %g)", dp_size, max_w, W_TOL);
    CHECK_MSG(n_a == n_b && memcmp(w_a, w_b, n_a * sizeof *w_a) == 0, "DP=%d: the rerun's weights differ",
              dp_size);
    /* every replica of the group holds the same bits */
    uint64_t h = hash_bytes(w_a, n_a * sizeof *w_a), hs[64];
    CHECK_OK(lcx_comm_all_gather(g, NULL, &h, hs, 1, LCX_I64));
    for (int r = 0; r < g->size; r++)
        CHECK_MSG(hs[r] == h, "DP=%d: rank %d's weights differ from rank %d's", dp_size, r, g->rank);
    if (g_world_rank == 0)
        printf("DP=%d: %d steps, loss %.6f -> %.6f (clip %.3f); max relative difference of loss/norm %.2e, of "
               "weights (absolute) %.2e; rerun bit-identical\n",
               dp_size, STEPS, ref.loss[0], ref.loss[STEPS - 1], ref.clip[0], max_rel, max_w);
    free(w_ref);
    free(w_a);
    free(w_b);
}

/* The step directly: a ragged batch (rank r has r + 1 rows, some labels ignored) against one rank over all rows
 * (micro-batches of the ranks in rank order, so only the place of the cross-rank additions differs: measured
 * bit-identical on the parameters compared, checked to W_TOL), and a group of one against lcx_model_train_step. */
static void check_ragged(lcx_comm *world) {
    const int W = world->size, R = W * (W + 1) / 2; /* rows over all ranks */
    int32_t *ids = malloc((size_t)R * SEQ * 4), *tgt = malloc((size_t)R * SEQ * 4);
    for (int i = 0; i < R * SEQ; i++) {
        ids[i] = (int32_t)((i * 31 + 7) % g_cfg.vocab_size);
        int ignored = i % 5 == 0 || i % SEQ > SEQ - 3 - i / SEQ;
        tgt[i] = ignored ? LCX_IGNORE_INDEX : (int32_t)((i * 17 + 3) % g_cfg.vocab_size);
    }
    lcx_adamw_opts o = lcx_adamw_opts_default();
    o.lr = 1e-2;
    o.max_grad_norm = 0.3;
    int row0 = g_world_rank * (g_world_rank + 1) / 2, rows = g_world_rank + 1;
    /* reference: every row, one micro-batch per rank's share */
    lcx_model *ref = new_model((int64_t)W * SEQ, NULL), *dp = new_model((int64_t)W * SEQ, NULL);
    lcx_batch *all = calloc((size_t)W, sizeof *all);
    for (int r = 0, at = 0; r < W; at += r + 1, r++)
        all[r] = (lcx_batch){.n_seq = r + 1, .seq_len = SEQ, .ids = ids + at * SEQ, .targets = tgt + at * SEQ};
    lcx_batch mine = {.n_seq = rows, .seq_len = SEQ, .ids = ids + row0 * SEQ, .targets = tgt + row0 * SEQ};
    lcx_step_result rr, rd;
    for (int s = 0; s < 2; s++) {
        CHECK_OK(lcx_model_train_step(ref, all, W, &o, &rr));
        CHECK_OK(lcx_model_train_step_group(dp, &mine, 1, &o, world, &rd));
        CHECK(rr.n_tokens == rd.n_tokens);
        CHECK_REL(rd.loss, rr.loss, REL_TOL);
        CHECK_REL(rd.grad_norm, rr.grad_norm, REL_TOL);
        CHECK(rr.ring_wait_s == 0 && rd.ring_wait_s == 0); /* no CP: no ring */
    }
    float *a = malloc(4096 * 4), *b = malloc(4096 * 4);
    const lcx_param_table *t = lcx_model_params(ref);
    double max_w = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->params[i].numel > 4096) continue;
        CHECK_OK(lcx_model_get_master(ref, i, a));
        CHECK_OK(lcx_model_get_master(dp, i, b));
        for (size_t k = 0; k < t->params[i].numel; k++) max_w = worst_of(max_w, fabs((double)a[k] - b[k]));
    }
    CHECK_MSG(max_w <= W_TOL, "ragged: weights differ by %g", max_w);
    /* a group of one rank: the one-rank step bit for bit */
    lcx_comm *one = NULL;
    CHECK_OK(lcx_comm_single(&one));
    lcx_model *p = new_model((int64_t)W * SEQ, NULL), *q = new_model((int64_t)W * SEQ, NULL);
    CHECK_OK(lcx_model_train_step(p, &mine, 1, &o, &rr));
    CHECK_OK(lcx_model_train_step_group(q, &mine, 1, &o, one, &rd));
    CHECK(rr.loss == rd.loss && rr.grad_norm == rd.grad_norm);
    for (size_t i = 0; i < t->n; i++) {
        if (t->params[i].numel > 4096) continue;
        CHECK_OK(lcx_model_get_master(p, i, a));
        CHECK_OK(lcx_model_get_master(q, i, b));
        CHECK(memcmp(a, b, t->params[i].numel * 4) == 0);
    }
    if (g_world_rank == 0) printf("ragged batch over %d ranks: weights within %.2e of one rank\n", W, max_w);
    lcx_comm_finalize(one);
    lcx_model_free(p);
    lcx_model_free(q);
    lcx_model_free(ref);
    lcx_model_free(dp);
    free(all);
    free(a);
    free(b);
    free(ids);
    free(tgt);
}

int main(void) {
    omp_set_num_threads(1); /* 4 ranks share the machine's cores */
    lcx_comm *world = NULL;
    CHECK_OK(lcx_comm_world_init(&world));
    if (!world) return test_summary("test_train_dp_mpi");
    lcx_tokdata td;
    fixture_open(world, "test_train_dp_mpi", 25, 8, &td);

    /* DP = 2: mesh tp=2 cp=1 dp=2, gradient groups {0, 2} and {1, 3} (same t) */
    lcx_comm_groups g2, g4;
    lcx_mesh m2 = {2, 1, 2, 4}, m4 = {1, 1, 4, 4};
    CHECK_OK(lcx_comm_mesh(world, &m2, &g2));
    check_dp(&td, g2.group[LCX_GROUP_GRAD], 2, g2.coord.t);
    lcx_comm_groups_free(&g2);
    /* DP = 4: mesh 1x1x4 */
    CHECK_OK(lcx_comm_mesh(world, &m4, &g4));
    check_dp(&td, g4.group[LCX_GROUP_GRAD], 4, 0);
    lcx_comm_groups_free(&g4);

    check_ragged(world);

    return fixture_close(world, &td, "test_train_dp_mpi");
}
