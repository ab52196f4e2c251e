/* Context x data parallelism in training (4 ranks): the stage loop (lcx_train_stage_run) with the model's CP group
 * (opts.cp_comm) and the mesh's GRAD group (CP x DP) as the step's group, on meshes 1x2x2 (CP 2 x DP 2) and
 * 1x4x1 (CP 4). The CP ranks of a DP rank take the same sequences and each trains on its local part of every
 * row (lcx_cp_local_batch); the DP ranks take their shares of the step's sequences. Reference: one rank training
 * on all of them (micro-batches DP times larger, whole rows; every rank runs it itself, without communicating).
 * Over STEPS AdamW steps of the llama_gqa fixture's shape (4 query heads on 2 KV heads) with clipping active:
 *   - step 1 (the same weights on both sides): loss and gradient norm within STEP1_TOL (relative);
 *   - every step: loss within REL_TOL, gradient norm (and the clipping factor) within NORM_TOL (relative), tokens
 *     equal;
 *   - final fp32 master weights within W_TOL (absolute) of the reference;
 *   - every rank of the GRAD group holds bit-identical weights, and a rerun repeats losses and weights bit for bit.
 * Tolerances: float32 sums run in another order: attention over a row is the ring's blocks merged by their
 * log-sum-exp instead of one causal pass, a rank's GEMMs add fewer rows (the weight gradients are partial
 * contributions), and the GRAD group adds the ranks' gradients in rank order. Step 1, where only that order
 * differs: loss and norm measured <= 1e-8 relative, STEP1_TOL 1e-6. Weights: AdamW turns the rounding difference
 * of a gradient element near eps into a visible one (see test_train_dp_mpi; eps 1e-6 here); measured <= 1.4e-5
 * after 4 steps at lr 1e-2, W_TOL 1e-4 (1% of one step's largest update). The later steps then start from
 * weights that differ by that much: loss measured <= 1e-7 relative, REL_TOL 2e-6 (test_train_dp_mpi's); the
 * gradient norm, which moves more with the weights, measured <= 3.9e-6 (CP 4, step 3), NORM_TOL 2e-5. Float32
 * parameters.
 * Also, on the step directly: with a CP model no group means the CP group (bit-identical to passing the GRAD
 * group of mesh 1x4x1, the same ranks in the same order), and a group whose size is not a multiple of the CP
 * group's is refused; the stage loop refuses CP without a GRAD group of CP x DP ranks or with a sequence length
 * that is not a multiple of 2 CP. And the window score of the stage evaluations over CP 2 and 4
 * (check_window_score). */
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/core/clock.h"
#include "src/core/cp_perm.h"

#define STEPS 4
#define SEQ 32
#define ACCUM 2
#define STEP1_TOL 1e-6
#define REL_TOL 2e-6
#define NORM_TOL 2e-5
#define W_TOL 1e-4
#define EPS 1e-6
#include "train_mpi_fixture.h"
#include "worst_of.h"

static double g_worst_loss, g_worst_norm, g_worst_w;

/* One stage run (groups NULL: the one-rank reference); returns the final master weights (malloc'd). */
static float *train(const lcx_tokdata *td, const char *name, const lcx_comm_groups *gs, int64_t micro_seqs,
                    run_log *log, size_t *n_out) {
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
    int cp = 1;
    if (gs) {
        cp = gs->mesh.cp;
        ctx.grad = gs->group[LCX_GROUP_GRAD];
        ctx.dp_rank = gs->coord.d, ctx.dp_size = gs->mesh.dp;
        ctx.cp_rank = gs->coord.c, ctx.cp_size = cp;
    }
    lcx_train_stage sg = stage(micro_seqs, 0);
    lcx_model *m = new_model(micro_seqs * SEQ / cp, gs ? gs->group[LCX_GROUP_CP] : NULL);
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

/* Mesh 1 x cp x dp against the reference run on this rank alone. */
static void check_cpdp(lcx_comm *world, const lcx_tokdata *td, int cp, int dp) {
    lcx_mesh mesh;
    lcx_comm_groups gs;
    CHECK_OK(lcx_mesh_init(&mesh, 1, cp, dp));
    CHECK_OK(lcx_comm_mesh(world, &mesh, &gs));
    lcx_comm *g = gs.group[LCX_GROUP_GRAD];
    char name[64];
    run_log ref, a, b;
    size_t n_ref = 0, n_a = 0, n_b = 0;
    snprintf(name, sizeof name, "ref%dx%d-r%d", cp, dp, g_world_rank);
    float *w_ref = train(td, name, NULL, dp, &ref, &n_ref);
    snprintf(name, sizeof name, "cp%ddp%d-a", cp, dp);
    float *w_a = train(td, name, &gs, 1, &a, &n_a);
    snprintf(name, sizeof name, "cp%ddp%d-b", cp, dp);
    float *w_b = train(td, name, &gs, 1, &b, &n_b);
    CHECK(n_ref == n_a && n_a == n_b);
    double max_loss = 0, max_norm = 0, max_w = 0;
    for (int s = 0; s < STEPS && s < a.n && s < ref.n; s++) {
        CHECK_REL(a.loss[s], ref.loss[s], REL_TOL);
        CHECK_REL(a.norm[s], ref.norm[s], s == 0 ? STEP1_TOL : NORM_TOL);
        if (s == 0) CHECK_REL(a.loss[s], ref.loss[s], STEP1_TOL);
        CHECK_REL(a.clip[s], ref.clip[s], NORM_TOL + 1e-5); /* reported with 6 digits */
        CHECK(a.tokens[s] == ref.tokens[s]);
        max_loss = worst_of(max_loss, fabs(a.loss[s] - ref.loss[s]) / ref.loss[s]);
        max_norm = worst_of(max_norm, fabs(a.norm[s] - ref.norm[s]) / ref.norm[s]);
        CHECK_MSG(a.loss[s] == b.loss[s] && a.norm[s] == b.norm[s], "CP=%d DP=%d step %d: the rerun differs", cp,
                  dp, s + 1);
    }
    CHECK_MSG(ref.clip[0] < 1, "clipping inactive (clip %g): the test wants it active", ref.clip[0]);
    for (size_t i = 0; i < n_a && n_a == n_ref; i++) max_w = worst_of(max_w, fabs((double)w_a[i] - w_ref[i]));
    CHECK_MSG(max_w <= W_TOL, "CP=%d DP=%d: weights differ from the reference by %g (tol %g)", cp, dp, max_w, W_TOL);
    CHECK_MSG(n_a == n_b && memcmp(w_a, w_b, n_a * sizeof *w_a) == 0, "CP=%d DP=%d: the rerun's weights differ", cp,
              dp);
    /* every rank of the GRAD group holds the same bits */
    uint64_t h = hash_bytes(w_a, n_a * sizeof *w_a), hs[64];
    CHECK_OK(lcx_comm_all_gather(g, NULL, &h, hs, 1, LCX_I64));
    for (int r = 0; r < g->size; r++)
        CHECK_MSG(hs[r] == h, "CP=%d DP=%d: rank %d's weights differ from rank %d's", cp, dp, r, g->rank);
    /* the worst over the ranks */
    double worst[3] = {max_loss, max_norm, max_w};
    CHECK_OK(lcx_comm_all_reduce(world, NULL, worst, worst, 3, LCX_F64, LCX_COMM_MAX));
    g_worst_loss = worst_of(g_worst_loss, worst[0]), g_worst_norm = worst_of(g_worst_norm, worst[1]);
    g_worst_w = worst_of(g_worst_w, worst[2]);
    if (g_world_rank == 0)
        printf("CP=%d x DP=%d: %d steps, loss %.6f -> %.6f (clip %.3f); max relative difference of loss %.2e, of "
               "norm %.2e, of weights (absolute) %.2e; rerun bit-identical\n",
               cp, dp, STEPS, ref.loss[0], ref.loss[STEPS - 1], ref.clip[0], worst[0], worst[1], worst[2]);
    free(w_ref);
    free(w_a);
    free(w_b);
    lcx_comm_groups_free(&gs);
}

/* The step directly on mesh 1x4x1: grad NULL is the CP group (bit for bit the GRAD group's step), and a group of
 * 2 ranks (the DP group of mesh 1x2x2) with a CP-4 model is refused before any communication. */
static void check_step(lcx_comm *world, const lcx_tokdata *td) {
    const lcx_mix_data data = lcx_mix_single(td);
    lcx_mesh m4, m2;
    lcx_comm_groups g4, g2;
    CHECK_OK(lcx_mesh_init(&m4, 1, 4, 1));
    CHECK_OK(lcx_mesh_init(&m2, 1, 2, 2));
    CHECK_OK(lcx_comm_mesh(world, &m4, &g4));
    CHECK_OK(lcx_comm_mesh(world, &m2, &g2));
    const int cp = 4, c = g4.coord.c, S = SEQ / cp;
    int32_t ids[SEQ], tgt[SEQ], lid[SEQ], ltg[SEQ], lpos[SEQ];
    for (int t = 0; t < SEQ; t++) ids[t] = (int32_t)((t * 31 + 7) % g_cfg.vocab_size);
    for (int t = 0; t < SEQ; t++) tgt[t] = t % 5 == 2 ? LCX_IGNORE_INDEX : (int32_t)((t * 17 + 3) % g_cfg.vocab_size);
    CHECK_OK(lcx_cp_local_batch(SEQ, cp, c, ids, tgt, NULL, lid, ltg, lpos));
    lcx_batch lb = {.n_seq = 1, .seq_len = S, .ids = lid, .targets = ltg, .positions = lpos};
    lcx_adamw_opts o = lcx_adamw_opts_default();
    o.lr = 1e-2;
    o.max_grad_norm = 0.3;
    lcx_model *p = new_model(S, g4.group[LCX_GROUP_CP]), *q = new_model(S, g4.group[LCX_GROUP_CP]);
    lcx_step_result rp, rq;
    double t0 = lcx_clock_s();
    CHECK_OK(lcx_model_train_step_group(p, &lb, 1, &o, g4.group[LCX_GROUP_GRAD], &rp));
    double dt = lcx_clock_s() - t0;
    CHECK_OK(lcx_model_train_step_group(q, &lb, 1, &o, NULL, &rq));
    /* the ring's waits are timed (a wait of MPI never takes no time) and are part of the step */
    CHECK_MSG(rp.ring_wait_s > 0 && rp.ring_wait_s <= dt && rq.ring_wait_s > 0, "CP=4: ring_wait_s %g, %g (step %g s)",
              rp.ring_wait_s, rq.ring_wait_s, dt);
    CHECK(rp.n_tokens == SEQ - SEQ / 5 - (SEQ % 5 > 2) && rq.n_tokens == rp.n_tokens);
    CHECK(rp.loss == rq.loss && rp.grad_norm == rq.grad_norm);
    size_t np = 0, nq = 0;
    float *wp = masters(p, &np), *wq = masters(q, &nq);
    CHECK_MSG(np == nq && memcmp(wp, wq, np * sizeof *wp) == 0, "CP=4: the step without a group differs from GRAD's");
    CHECK_FAILS(lcx_model_train_step_group(p, &lb, 1, &o, g2.group[LCX_GROUP_DP], &rp), LCX_ERR_INVALID,
                "not a multiple");
    /* the stage loop refuses CP without the GRAD group, or with a sequence length that is not a multiple of 2 CP */
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = g_root;
    ctx.model_config = g_cfg.json;
    ctx.cp_rank = c, ctx.cp_size = cp;
    lcx_train_stage sg = stage(1, 0);
    lcx_train_state state;
    lcx_train_state_init(&state);
    lcx_train_summary sum;
    CHECK_FAILS(lcx_train_stage_run(p, &data, &sg, &ctx, &state, &sum), LCX_ERR_INVALID, "needs a gradient group");
    ctx.grad = g2.group[LCX_GROUP_GRAD];
    ctx.dp_rank = g2.coord.d, ctx.dp_size = 2; /* a GRAD group of 4 is CP 4 x DP 1, not x 2 */
    CHECK_FAILS(lcx_train_stage_run(p, &data, &sg, &ctx, &state, &sum), LCX_ERR_INVALID, "needs a gradient group");
    ctx.grad = g4.group[LCX_GROUP_GRAD];
    ctx.dp_rank = 0, ctx.dp_size = 1;
    sg.seq_len = 20;
    CHECK_FAILS(lcx_train_stage_run(p, &data, &sg, &ctx, &state, &sum), LCX_ERR_INVALID, "multiple of 8");
    lcx_train_state_free(&state);
    free(wp);
    free(wq);
    lcx_model_free(p);
    lcx_model_free(q);
    lcx_comm_groups_free(&g2);
    lcx_comm_groups_free(&g4);
}

/* lcx_train_window_score_cp (the main command's stage evaluations under CP): a window whose length 2 CP does not
 * divide (padded), scored over the CP group of mesh 1xCPx(4/CP), gives every rank the mean NLL of the one-rank
 * lcx_train_window_score of the same weights; measured 2.5e-9 (CP 2), 5.8e-10 (CP 4) relative (the ring's blocks
 * merged by their log-sum-exp, the loss summed over CP), bound 1e-6. cp_size 1 is lcx_train_window_score itself.
 * dynamic: a dynamic NTK rope (factor 16) past 8 positions, whose frequencies come from the pass's length, and
 * weights of std 0.4: the padded window must use its own length's (lcx_batch.rope_len), as the one rank does
 * (measured 2.9e-8; with the padded length's frequencies 6e-4). */
static void check_window_score(lcx_comm *world, int cp, int dynamic) {
    const lcx_model_config saved = g_cfg;
    if (dynamic) {
        snprintf(g_cfg.rope.type, sizeof g_cfg.rope.type, "dynamic");
        g_cfg.rope.has_factor = 1;
        g_cfg.rope.factor = 16.0;
        g_cfg.max_position_embeddings = 8;
    }
    lcx_mesh mesh;
    lcx_comm_groups g;
    CHECK_OK(lcx_mesh_init(&mesh, 1, cp, 4 / cp));
    CHECK_OK(lcx_comm_mesh(world, &mesh, &g));
    enum { N = 45, FIRST = 7 };
    int32_t ids[N];
    for (int t = 0; t < N; t++) ids[t] = (int32_t)((t * 29 + 5) % g_cfg.vocab_size);
    lcx_model *one = new_model(N, NULL);
    lcx_model *cpm = new_model(lcx_cp_local_len(N, cp), g.group[LCX_GROUP_CP]);
    if (dynamic && one && cpm) { /* larger weights: attention that tells the frequencies apart */
        CHECK_OK(lcx_model_init_random(one, 11, 0.4));
        CHECK_OK(lcx_model_init_random(cpm, 11, 0.4));
    }
    CHECK(lcx_cp_local_len(N, cp) == (N + 2 * cp - 1) / (2 * cp) * 2);
    double ref[N], got[N], same[N];
    CHECK_OK(lcx_train_window_score(one, ids, N, FIRST, ref));
    lcx_train_cp_scorer sc = {cpm, g.coord.c, cp}, sc1 = {one, 0, 1};
    CHECK_OK(lcx_train_window_score_cp(&sc, ids, N, FIRST, got));
    CHECK_OK(lcx_train_window_score_cp(&sc1, ids, N, FIRST, same));
    CHECK(same[0] == ref[0]);
    double rel = fabs(got[0] - ref[0]) / fabs(ref[0]);
    CHECK_MSG(rel <= 1e-6, "CP %d window score %.9g vs one rank %.9g (relative %.2e)", cp, got[0], ref[0], rel);
    CHECK(got[N - FIRST - 1] == got[0]);
    if (world->rank == 0)
        printf("window score over CP %d%s vs one rank: %.2e relative (tol 1e-6)\n", cp,
               dynamic ? " (dynamic NTK rope)" : "", rel);
    CHECK_FAILS(lcx_train_window_score_cp(&sc, ids, N, N, got), LCX_ERR_INVALID, "bad window");
    lcx_model_free(one);
    lcx_model_free(cpm);
    lcx_comm_groups_free(&g);
    g_cfg = saved;
}

int main(void) {
    omp_set_num_threads(1); /* 4 ranks share the machine's cores */
    lcx_comm *world = NULL;
    CHECK_OK(lcx_comm_world_init(&world));
    if (!world) return test_summary("test_train_cp_mpi");
    if (world->size != 4) {
        fprintf(stderr, "test_train_cp_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    lcx_tokdata td;
    fixture_open(world, "test_train_cp_mpi", 35, 10, &td);

    check_cpdp(world, &td, 2, 2); /* CP groups {0, 1}, {2, 3}; DP groups {0, 2}, {1, 3}; GRAD all four */
    check_cpdp(world, &td, 4, 1); /* CP = GRAD = all four */
    check_step(world, &td);
    check_window_score(world, 2, 0);
    check_window_score(world, 4, 0);
    check_window_score(world, 4, 1);
    if (world->rank == 0)
        printf("CP x DP vs one rank: worst loss %.2e (relative, tol %.0e), norm %.2e (tol %.0e), weights %.2e "
               "(absolute, tol %.0e)\n",
               g_worst_loss, REL_TOL, g_worst_norm, NORM_TOL, g_worst_w, W_TOL);

    return fixture_close(world, &td, "test_train_cp_mpi");
}
