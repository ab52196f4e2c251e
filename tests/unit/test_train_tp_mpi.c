/* Tensor parallelism in training (8 ranks), alone and with context and data parallelism (and, on the same GQA 4:1
 * model, CP 2, CP 4 and DP 2 without TP, so the whole list of layouts meets one reference): the training step
 * (lcx_model_train_step_group) of a model built with the mesh's TP group (opts.tp_comm) and CP group, over the GRAD
 * group, against one rank training on all the sequences with the whole model (every rank runs the reference itself,
 * without communicating). Cases (TEST_RANKS ranks, split into independent worlds where the mesh is smaller):
 *   - qwen2's shape (4 query heads on 1 KV head: GQA 4:1, q/k/v biases): CP 2, CP 4, DP 2, TP 2 (the KV head
 *     replicated on both ranks, its gradient summed over them), TP 2 x CP 2, in independent 2- or 4-rank worlds;
 *   - llama_gqa's shape (4 on 2), TP 2 x CP 2, and with a vocabulary of 253 (padded to 254: a padding row masked
 *     in the loss), two 4-rank worlds;
 *   - qwen2's shape, TP 2 x CP 2 x DP 2 on all 8 ranks;
 *   - qwen3's shape (per-head q_norm/k_norm, tied embeddings), TP 2 x DP 2 (two 4-rank worlds), TP 4 x CP 2
 *     (8 ranks: 2 ranks share each KV head).
 * Over STEPS AdamW steps (lr 1e-2, clipping active, weight decay), for every rank:
 *   - step 1 (same weights on both sides): each parameter's gradient (this rank's slice, lcx_model_param_slice)
 *     within GRAD_TOL of the largest |value| of the reference's box; loss and gradient norm within STEP1_TOL;
 *   - every step: loss within REL_TOL and gradient norm within NORM_TOL (relative), counted tokens equal;
 *   - final master weights (this rank's box) within W_TOL of the reference's;
 *   - replicas agree bit for bit: the GRAD group's ranks, and the TP ranks holding the same box (norms, replicated
 *     KV heads) — gathered over the world and compared;
 *   - a rerun of the parallel run repeats every loss and weight bit for bit;
 *   - the tiled MLP (opts.mlp_chunk 5 with recompute on TP 2 x DP 2 qwen3, 7 with recompute+offload on TP 2 x
 *     CP 2 llama_gqa: ragged last tiles) against the same untiled reference, within the same bounds;
 *   - with ZeRO-1 on top (AdamW moments sharded over the GRAD group: TP 2 x CP 2, TP 2 x CP 2 x DP 2, TP 2 x DP 2)
 *     every loss, norm and weight is the same bits as without it.
 * Tolerances: float32 sums in another order (a rank's GEMMs cover its heads / columns / vocabulary rows, partial
 * sums are added over TP in rank order, the loss's log-sum-exp combines the shards' statistics; with CP the ring's
 * blocks). Measured (printed by rank 0): step-1 gradients <= ~1e-6 of their largest value (GRAD_TOL 1e-5, the
 * bound test_model_cp_mpi uses), loss and norm at step 1 <= ~1e-7 (STEP1_TOL 1e-6); later steps start from weights
 * that AdamW has made differ (an element near eps magnifies a rounding difference; test_train_dp_mpi): loss
 * REL_TOL 2e-6, norm NORM_TOL 2e-5, weights W_TOL 1e-4 (1% of one step's largest update), as test_train_cp_mpi. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "src/comm/comm.h"
#include "src/core/cp_perm.h"
#include "src/model/model.h"
#include "test_util.h"
#include "worst_of.h"

#define TEST_RANKS 8
#define STEPS 3
#define SEQ 32
#define MSEQ 2  /* sequences per micro-batch */
#define ACCUM 2 /* micro-batches per DP rank and step */
#define STEP1_TOL 1e-6
#define GRAD_TOL 1e-5
#define REL_TOL 2e-6
#define NORM_TOL 2e-5
#define W_TOL 1e-4

static double g_worst_grad, g_worst_step1, g_worst_loss, g_worst_norm, g_worst_w;
/* the parallel models' MLP tile (opts.mlp_chunk, 0: untiled) and activation policy; the reference stays untiled */
static int64_t g_tile;
static lcx_act_policy g_policy;

typedef struct run_out {
    double loss[STEPS], norm[STEPS];
    int64_t tokens[STEPS];
    float **grad1;   /* [param] after step 1 (this rank's buffer) */
    float **master;  /* [param] after the last step */
    size_t n_params;
} run_out;

static void run_out_free(run_out *r) {
    for (size_t i = 0; i < r->n_params; i++) {
        free(r->grad1 ? r->grad1[i] : NULL);
        free(r->master ? r->master[i] : NULL);
    }
    free(r->grad1);
    free(r->master);
    memset(r, 0, sizeof *r);
}

static size_t local_numel(const lcx_tp_slice *s) {
    size_t n = 1;
    for (int k = 0; k < s->ndim; k++) n *= (size_t)s->local[k];
    return n;
}

/* The global batch of a step: DP x ACCUM micro-batches of MSEQ rows of SEQ tokens; targets the next token of the
 * row, some ignored; rows start at different positions. */
typedef struct batch_data {
    int32_t ids[TEST_RANKS * ACCUM][MSEQ * SEQ], tgt[TEST_RANKS * ACCUM][MSEQ * SEQ], pos[TEST_RANKS * ACCUM][MSEQ * SEQ];
} batch_data;

static void make_step_batch(batch_data *b, int n_micro, int64_t vocab, int step) {
    for (int i = 0; i < n_micro; i++)
        for (int s = 0; s < MSEQ; s++)
            for (int t = 0; t < SEQ; t++) {
                int64_t k = ((int64_t)step * 1000 + i * 100 + s * SEQ + t);
                b->ids[i][s * SEQ + t] = (int32_t)((k * 2654435761u + 17) % (uint64_t)vocab);
                b->pos[i][s * SEQ + t] = (int32_t)(t + 3 * s);
            }
    for (int i = 0; i < n_micro; i++)
        for (int s = 0; s < MSEQ; s++)
            for (int t = 0; t < SEQ; t++) {
                int32_t *y = &b->tgt[i][s * SEQ + t];
                *y = t + 1 < SEQ ? b->ids[i][s * SEQ + t + 1] : LCX_IGNORE_INDEX;
                if ((t * 7 + i + s) % 11 == 3) *y = LCX_IGNORE_INDEX;
            }
}

static lcx_model *new_model_z(const lcx_model_config *cfg, int64_t max_tokens, lcx_comm *tp, lcx_comm *cp,
                              lcx_comm *zero) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_F32;
    o.max_tokens = max_tokens;
    o.loss_chunk = 7; /* several loss chunks, one of them ragged */
    o.training = 1;
    o.tp_comm = tp;
    o.cp_comm = cp;
    o.zero_comm = zero;
    if (tp) o.mlp_chunk = g_tile, o.policy = g_policy;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 77, 0.08));
    return m;
}
static lcx_model *new_model(const lcx_model_config *cfg, int64_t max_tokens, lcx_comm *tp, lcx_comm *cp) {
    return new_model_z(cfg, max_tokens, tp, cp, NULL);
}

static void snapshot(lcx_model *m, float ***out, run_out *r, int grads) {
    const lcx_param_table *t = lcx_model_params(m);
    r->n_params = t->n;
    *out = calloc(t->n, sizeof **out);
    for (size_t i = 0; i < t->n; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_model_param_slice(m, i, &s));
        (*out)[i] = malloc(local_numel(&s) * sizeof(float));
        CHECK_OK(grads ? lcx_model_get_grad(m, i, (*out)[i]) : lcx_model_get_master(m, i, (*out)[i]));
    }
}

/* STEPS steps. gs NULL: the one-rank reference on all DP x ACCUM micro-batches. zero: the AdamW moments sharded
 * over the GRAD group (ZeRO-1). */
static void train_z(const lcx_model_config *cfg, const lcx_comm_groups *gs, int dp, int zero, run_out *r) {
    memset(r, 0, sizeof *r);
    int cp = gs ? gs->mesh.cp : 1, d = gs ? gs->coord.d : 0, c = gs ? gs->coord.c : 0;
    int n_micro = gs ? ACCUM : dp * ACCUM, first = gs ? d * ACCUM : 0;
    lcx_model *m = new_model_z(cfg, MSEQ * SEQ / cp, gs ? gs->group[LCX_GROUP_TP] : NULL,
                               gs && cp > 1 ? gs->group[LCX_GROUP_CP] : NULL,
                               gs && zero ? gs->group[LCX_GROUP_GRAD] : NULL);
    if (!m) return;
    lcx_adamw_opts o = lcx_adamw_opts_default();
    o.lr = 1e-2, o.weight_decay = 0.1, o.max_grad_norm = 0.3, o.eps = 1e-6;
    static batch_data b, local;
    for (int step = 0; step < STEPS; step++) {
        make_step_batch(&b, dp * ACCUM, cfg->vocab_size, step);
        lcx_batch mb[TEST_RANKS * ACCUM];
        for (int i = 0; i < n_micro; i++) {
            int g = first + i;
            if (cp > 1) {
                for (int s = 0; s < MSEQ; s++) {
                    int64_t L = SEQ / cp;
                    CHECK_OK(lcx_cp_local_batch(SEQ, cp, c, b.ids[g] + s * SEQ, b.tgt[g] + s * SEQ, b.pos[g] + s * SEQ,
                                                local.ids[i] + s * L, local.tgt[i] + s * L, local.pos[i] + s * L));
                }
                mb[i] = (lcx_batch){.n_seq = MSEQ, .seq_len = SEQ / cp, .ids = local.ids[i], .targets = local.tgt[i],
                                    .positions = local.pos[i]};
            } else {
                mb[i] = (lcx_batch){.n_seq = MSEQ, .seq_len = SEQ, .ids = b.ids[g], .targets = b.tgt[g],
                                    .positions = b.pos[g]};
            }
        }
        lcx_step_result res;
        CHECK_OK(lcx_model_train_step_group(m, mb, n_micro, &o, gs ? gs->group[LCX_GROUP_GRAD] : NULL, &res));
        r->loss[step] = res.loss, r->norm[step] = res.grad_norm, r->tokens[step] = res.n_tokens;
        if (step == 0) snapshot(m, &r->grad1, r, 1);
    }
    snapshot(m, &r->master, r, 0);
    lcx_model_free(m);
}
static void train(const lcx_model_config *cfg, const lcx_comm_groups *gs, int dp, run_out *r) {
    train_z(cfg, gs, dp, 0, r);
}

/* max |got - want[box]| / max |want[box]| over this rank's box (padding rows: got must be 0) */
static double box_err(const lcx_tp_slice *s, const float *got, const float *want_global, int absolute) {
    size_t n = local_numel(s);
    float *want = calloc(n, sizeof *want);
    lcx_box local = s->box;
    for (int k = 0; k < s->ndim; k++) local.shape[k] = s->local[k];
    CHECK_OK(lcx_box_copy(&s->global, want_global, &local, want, sizeof(float), NULL));
    double e = 0, mx = 1e-30;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(want[i]));
        double dd = fabs((double)got[i] - want[i]);
        e = worst_of(e, dd);
    }
    free(want);
    return absolute ? e : e / mx;
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

/* Bit equality of every box across the ranks holding it: each rank's masters hashed per parameter, gathered over
 * the world with its TP box start; ranks with the same (parameter, box) must have the same hash. */
static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
static void check_replicas(lcx_comm *world, const lcx_model_config *cfg, const lcx_comm_groups *gs, run_out *r) {
    (void)cfg;
    lcx_model *m = new_model(cfg, MSEQ * SEQ / gs->mesh.cp, gs->group[LCX_GROUP_TP],
                             gs->mesh.cp > 1 ? gs->group[LCX_GROUP_CP] : NULL); /* for the slices only */
    if (!m) return;
    size_t n = r->n_params;
    int64_t *mine = calloc(n * 2, sizeof *mine), *all = calloc(n * 2 * (size_t)world->size, sizeof *all);
    for (size_t i = 0; i < n; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_model_param_slice(m, i, &s));
        mine[2 * i] = (int64_t)(s.box.start[0] * 1000003u + (s.ndim > 1 ? s.box.start[1] : 0));
        mine[2 * i + 1] = (int64_t)(fnv(r->master[i], local_numel(&s) * sizeof(float)) >> 1);
    }
    CHECK_OK(lcx_comm_all_gather(world, NULL, mine, all, (int64_t)n * 2, LCX_I64));
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < world->size; a++)
            for (int b = a + 1; b < world->size; b++) {
                const int64_t *x = all + (size_t)a * n * 2 + 2 * i, *y = all + (size_t)b * n * 2 + 2 * i;
                if (x[0] == y[0] && x[1] != y[1]) bad++;
            }
    CHECK(bad == 0);
    free(mine);
    free(all);
    lcx_model_free(m);
}

static void check_case(lcx_comm *world, const char *fixture, int64_t vocab, int sub, int tp, int cp, int dp,
                       int zero) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fixtures/models/%s/config.json", LCX_SOURCE_DIR, fixture);
    lcx_model_config cfg;
    CHECK_OK(lcx_config_load(path, &cfg));
    if (vocab) cfg.vocab_size = vocab;
    /* independent worlds of `sub` ranks, each with the mesh */
    lcx_comm *w = NULL;
    CHECK_OK(world->impl->split(world, world->rank / sub, world->rank, &w));
    lcx_mesh mesh;
    lcx_comm_groups gs;
    CHECK_OK(lcx_mesh_init(&mesh, tp, cp, dp));
    CHECK_OK(lcx_comm_mesh(w, &mesh, &gs));

    run_out ref, par, again;
    train(&cfg, NULL, dp, &ref);
    train(&cfg, &gs, dp, &par);
    train(&cfg, &gs, dp, &again);
    run_out z; /* ZeRO-1 on top (the moments sharded over GRAD): the same steps bit for bit */
    memset(&z, 0, sizeof z);
    if (zero) train_z(&cfg, &gs, dp, 1, &z);
    int zero_same = 1;
    for (int s = 0; zero && s < STEPS; s++) zero_same &= z.loss[s] == par.loss[s] && z.norm[s] == par.norm[s];
    lcx_model *m = new_model(&cfg, MSEQ * SEQ / cp, gs.group[LCX_GROUP_TP], cp > 1 ? gs.group[LCX_GROUP_CP] : NULL);
    double wg = 0, ww = 0;
    for (size_t i = 0; m && i < par.n_params; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_model_param_slice(m, i, &s));
        if (zero && z.master) zero_same &= memcmp(z.master[i], par.master[i], local_numel(&s) * sizeof(float)) == 0;
        wg = worst_of(wg, box_err(&s, par.grad1[i], ref.grad1[i], 0));
        ww = worst_of(ww, box_err(&s, par.master[i], ref.master[i], 1));
        CHECK(memcmp(par.master[i], again.master[i], local_numel(&s) * sizeof(float)) == 0);
    }
    lcx_model_free(m);
    CHECK(wg <= GRAD_TOL);
    CHECK(ww <= W_TOL);
    double s1 = worst_of(rel(par.loss[0], ref.loss[0]), rel(par.norm[0], ref.norm[0]));
    CHECK(s1 <= STEP1_TOL);
    double wl = 0, wn = 0;
    for (int s = 0; s < STEPS; s++) {
        wl = worst_of(wl, rel(par.loss[s], ref.loss[s]));
        wn = worst_of(wn, rel(par.norm[s], ref.norm[s]));
        CHECK(par.tokens[s] == ref.tokens[s]);
        CHECK(par.loss[s] == again.loss[s] && par.norm[s] == again.norm[s]);
    }
    CHECK(wl <= REL_TOL);
    CHECK(wn <= NORM_TOL);
    check_replicas(w, &cfg, &gs, &par);
    CHECK(zero_same);
    run_out_free(&z);
    char tile[48] = "";
    if (g_tile) snprintf(tile, sizeof tile, ", MLP tile %lld (%s)", (long long)g_tile, lcx_act_policy_name(g_policy));
    if (world->rank == 0)
        printf("%s%s TP %d x CP %d x DP %d%s: step-1 gradients %.2e (of the largest), loss/norm %.2e; over %d steps "
               "loss %.2e, norm %.2e, weights %.2e (abs)%s\n",
               fixture, vocab ? " (vocab 253)" : "", tp, cp, dp, tile, wg, s1, STEPS, wl,
               wn, ww,
               !zero ? "" : zero_same ? "; ZeRO-1: bit-identical" : "; ZeRO-1: DIFFERENT");
    g_worst_grad = worst_of(g_worst_grad, wg), g_worst_step1 = worst_of(g_worst_step1, s1);
    g_worst_loss = worst_of(g_worst_loss, wl), g_worst_norm = worst_of(g_worst_norm, wn);
    g_worst_w = worst_of(g_worst_w, ww);
    run_out_free(&ref);
    run_out_free(&par);
    run_out_free(&again);
    lcx_comm_groups_free(&gs);
    w->impl->free(w);
    lcx_config_free(&cfg);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_train_tp_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != TEST_RANKS) {
        fprintf(stderr, "test_train_tp_mpi: needs %d ranks, has %d\n", TEST_RANKS, world->size);
        return 1;
    }
    /* the list on one GQA 4:1 model: CP 2, CP 4, TP 2, TP 2 x CP 2, DP 2, TP 2 x CP 2 x DP 2 */
    check_case(world, "qwen2", 0, 2, 1, 2, 1, 0);
    check_case(world, "qwen2", 0, 4, 1, 4, 1, 0);
    check_case(world, "qwen2", 0, 2, 2, 1, 1, 0);
    check_case(world, "qwen2", 0, 4, 2, 2, 1, 1);
    check_case(world, "qwen2", 0, 2, 1, 1, 2, 1);
    check_case(world, "llama_gqa", 0, 4, 2, 2, 1, 1);
    check_case(world, "llama_gqa", 253, 4, 2, 2, 1, 0);
    check_case(world, "qwen2", 0, 8, 2, 2, 2, 1);
    check_case(world, "qwen3", 0, 4, 2, 1, 2, 1);
    check_case(world, "qwen3", 0, 8, 4, 2, 1, 0);
    /* the tiled MLP (docs/model.md "Tiled MLP in training"): down_proj's TP sum per tile, ragged last tiles */
    g_tile = 5, g_policy = LCX_ACT_RECOMPUTE;
    check_case(world, "qwen3", 0, 4, 2, 1, 2, 1);
    g_tile = 7, g_policy = LCX_ACT_RECOMPUTE_OFFLOAD;
    check_case(world, "llama_gqa", 0, 4, 2, 2, 1, 0);
    g_tile = 0, g_policy = LCX_ACT_KEEP;
    if (world->rank == 0)
        printf("worst: step-1 gradients %.2e, step-1 loss/norm %.2e, loss %.2e, norm %.2e, weights %.2e\n",
               g_worst_grad, g_worst_step1, g_worst_loss, g_worst_norm, g_worst_w);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_train_tp_mpi");
}
