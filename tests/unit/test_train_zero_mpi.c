/* ZeRO-1 and checkpoints in the layout (4 ranks; docs/parallel.md "Data parallelism", docs/lcx-format.md "Who
 * writes what"). The stage loop (lcx_train_stage_run) over the mesh's GRAD group, llama_gqa shape, STEPS AdamW
 * steps with clipping active:
 *   1. ZeRO-1 on (opts.zero_comm = GRAD) against off, on meshes 1x1x4 (DP 4) and 1x2x2 (CP 2 x DP 2), the same
 *      sequences: losses, gradient norms and final master weights bit-identical (the same additions in the same
 *      order, the norm's partial sums grouped the same way, the same AdamW per element), every rank's AdamW
 *      moment bytes about 1/D of the unsharded model's.
 *   2. Checkpoints: layout A = CP 2 x DP 2 with ZeRO-1, saving at step SAVE_AT; the step-SAVE_AT checkpoint holds
 *      params once and the moments in one piece per rank; it resumes in
 *        B0 = CP 2 x DP 2 without ZeRO-1 (the same sums: losses and weights bit-identical to A's continuation),
 *        B1 = DP 4 with ZeRO-1 and B2 = one rank without a group (other summation orders: losses within REL_TOL,
 *             weights within W_TOL of A's, the tolerances of test_train_cp_mpi),
 *      with the same global batch (4 sequences per step) and the same sample order.
 *   2b. The same with bf16 parameters, whose fp32 master ZeRO-1 shards too: the checkpoint's master in one piece
 *      per rank; resumed without ZeRO-1, and a checkpoint without ZeRO-1 resumed with it, bit-identical.
 *   3. A save whose part on one rank fails (ctx.test_fail_save: rank 2, then rank 0) fails on every rank, commits
 *      nothing and leaves `latest` naming the previous checkpoint; the next save succeeds and removes the failed
 *      saves' directories. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/lcx.h"
#include "formats/tokdata.h"
#include "src/comm/comm.h"
#include "src/train/train.h"
#include "test_util.h"

#define STEPS 4
#define SAVE_AT 2
#define SEQ 32
#define ACCUM 2
#define GLOBAL_SEQS 4 /* sequences per micro-batch slot over the DP ranks: DP x micro_seqs */
#define REL_TOL 2e-6
#define W_TOL 1e-4
#define EPS 1e-6

#include "train_mpi_fixture.h"
#include "worst_of.h"

static lcx_comm *g_world;

typedef struct run_opts {
    int cp, dp;          /* mesh 1 x cp x dp over the world; 0: one rank, no group */
    int zero;            /* ZeRO-1 */
    int64_t save_interval;
    const char *resume;  /* checkpoint to continue from, or NULL */
    int bf16;            /* bf16 parameters (ZeRO-1 then shards the fp32 master too) */
} run_opts;

typedef struct run_out {
    run_log log;
    float *w;            /* final master weights (bf16: the stored parameters), all back to back */
    size_t n;
    size_t moments;      /* this rank's AdamW moment bytes */
} run_out;

static void train(const lcx_tokdata *td, const char *name, const run_opts *ro, run_out *out) {
    const lcx_mix_data data = lcx_mix_single(td);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", g_root, name);
    mkdir(dir, 0777);
    memset(out, 0, sizeof *out);
    lcx_reporter rep = {.event = on_event, .user = &out->log};
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = dir;
    ctx.model_config = g_cfg.json;
    ctx.report = &rep;
    lcx_comm_groups gs;
    memset(&gs, 0, sizeof gs);
    int cp = 1, dp = 1;
    lcx_comm *cpc = NULL, *grad = NULL;
    if (ro->dp) {
        cp = ro->cp, dp = ro->dp;
        lcx_mesh mesh = {1, cp, dp, cp * dp};
        CHECK_OK(lcx_comm_mesh(g_world, &mesh, &gs));
        grad = gs.group[LCX_GROUP_GRAD];
        cpc = cp > 1 ? gs.group[LCX_GROUP_CP] : NULL;
        ctx.grad = grad;
        ctx.world = g_world;
        ctx.dp_rank = gs.coord.d, ctx.dp_size = dp;
        ctx.cp_rank = gs.coord.c, ctx.cp_size = cp;
    }
    const int64_t micro = GLOBAL_SEQS / dp;
    lcx_train_stage sg = stage(micro, ro->save_interval);
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = ro->bf16 ? LCX_BF16 : LCX_F32;
    o.max_tokens = micro * SEQ / cp;
    o.training = 1;
    o.cp_comm = cpc;
    o.zero_comm = ro->zero ? grad : NULL;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &g_cfg, &o));
    lcx_train_state state;
    lcx_train_state_init(&state);
    if (ro->resume) CHECK_OK(lcx_train_load(ro->resume, m, &state));
    else CHECK_OK(lcx_model_init_random(m, 11, 0.05));
    lcx_train_summary sum;
    CHECK_OK(lcx_train_stage_run(m, &data, &sg, &ctx, &state, &sum));
    out->w = ro->bf16 ? stored_params(m, &out->n) : masters(m, &out->n);
    out->moments = lcx_model_memory_of(m).moments;
    lcx_train_state_free(&state);
    lcx_model_free(m);
    if (ro->dp) lcx_comm_groups_free(&gs);
}

static double max_abs_diff(const run_out *a, const run_out *b) {
    double mx = 0;
    for (size_t i = 0; i < a->n && a->n == b->n; i++) mx = worst_of(mx, fabs((double)a->w[i] - b->w[i]));
    return a->n == b->n ? mx : INFINITY;
}

/* 1. ZeRO-1 on vs off on one mesh. */
static void check_zero(const lcx_tokdata *td, int cp, int dp, int bf16) {
    char name[64];
    run_out off, on;
    run_opts ro = {cp, dp, 0, 0, NULL, bf16};
    snprintf(name, sizeof name, "off-%dx%d%s", cp, dp, bf16 ? "-bf16" : "");
    train(td, name, &ro, &off);
    ro.zero = 1;
    snprintf(name, sizeof name, "on-%dx%d%s", cp, dp, bf16 ? "-bf16" : "");
    train(td, name, &ro, &on);
    CHECK(off.log.n == STEPS && on.log.n == STEPS);
    for (int s = 0; s < STEPS; s++) {
        CHECK_MSG(on.log.loss[s] == off.log.loss[s], "CP %d x DP %d step %d: loss %.17g with ZeRO-1, %.17g without",
                  cp, dp, s + 1, on.log.loss[s], off.log.loss[s]);
        CHECK_MSG(on.log.norm[s] == off.log.norm[s], "CP %d x DP %d step %d: gradient norm %.17g with ZeRO-1, %.17g "
                  "without", cp, dp, s + 1, on.log.norm[s], off.log.norm[s]);
    }
    CHECK_MSG(on.n == off.n && memcmp(on.w, off.w, on.n * sizeof *on.w) == 0,
              "CP %d x DP %d: weights with ZeRO-1 differ from those without (max %g)", cp, dp, max_abs_diff(&on, &off));
    /* moments: about 1/D of the unsharded bytes (each parameter's rows rounded to 64-byte alignment) */
    const int D = cp * dp;
    double ratio = (double)on.moments / (double)off.moments;
    CHECK_MSG(ratio < 1.0 / D + 0.05, "CP %d x DP %d: moment bytes %zu with ZeRO-1, %zu without (ratio %.3f)", cp, dp,
              on.moments, off.moments, ratio);
    /* the replicas agree: the weights' hash is the same on every rank */
    uint64_t h = hash_bytes(on.w, on.n * sizeof *on.w), hs[8];
    CHECK_OK(lcx_comm_all_gather(g_world, NULL, &h, hs, 1, LCX_I64));
    for (int r = 0; r < g_world->size; r++) CHECK_MSG(hs[r] == h, "ZeRO-1: rank %d's weights differ", r);
    if (g_world_rank == 0)
        printf("CP %d x DP %d, %s, %d steps: ZeRO-1 on vs off: losses, gradient norms and weights bit-identical; "
               "AdamW moments %zu -> %zu bytes per rank (%.3f, 1/D = %.3f)\n",
               cp, dp, bf16 ? "bf16" : "f32", STEPS, off.moments, on.moments, ratio, 1.0 / D);
    free(off.w);
    free(on.w);
}

/* The checkpoint that run `name` saved at step SAVE_AT, into ck[cap]. */
static void saved_at(const char *name, char *ck, size_t cap) {
    snprintf(ck, cap, "%s/%s/checkpoints/s01-step%06d", g_root, name, SAVE_AT);
}

/* How many pieces checkpoint ck holds of the embedding's `kind` ("param", "master", "adam_m"), -1 without it; with
 * files non-NULL, its bit f set for each data file f holding one. */
static int embed_pieces(const char *ck, const char *kind, unsigned *files) {
    lcx_ckpt *c = NULL;
    CHECK_OK(lcx_ckpt_open(ck, &c));
    const lcx_ckpt_tensor *t = c ? lcx_ckpt_find(c, "model.embed_tokens.weight", kind) : NULL;
    const int n = t ? t->n_pieces : -1;
    if (files) *files = 0;
    for (int k = 0; files && k < n; k++) *files |= 1u << t->pieces[k].file;
    lcx_ckpt_free(c);
    return n;
}

/* Run b, resumed from a's checkpoint at step SAVE_AT, went on as a did: the same losses and final weights, bit for
 * bit. */
static void check_same_resumed(const run_out *b, const run_out *a, const char *what) {
    CHECK_MSG(b->log.n == STEPS - SAVE_AT, "%s: %d steps logged", what, b->log.n);
    for (int s = SAVE_AT; s < STEPS; s++)
        CHECK_MSG(b->log.loss[s] == a->log.loss[s], "%s, step %d: loss %.17g, uninterrupted %.17g", what, s + 1,
                  b->log.loss[s], a->log.loss[s]);
    CHECK_MSG(b->n == a->n && memcmp(b->w, a->w, a->n * sizeof *a->w) == 0,
              "%s: weights differ from the uninterrupted run (max %g)", what, max_abs_diff(b, a));
}

/* 2. A checkpoint written in layout A resumes in other layouts. */
static void check_resume(const lcx_tokdata *td) {
    run_out a, b0, b1, b2;
    run_opts ra = {2, 2, 1, SAVE_AT, NULL, 0};
    train(td, "A", &ra, &a);
    char ck[700];
    saved_at("A", ck, sizeof ck);
    /* its pieces: the params once, the moments one row range per rank, each in its rank's file */
    unsigned files = 0;
    const int np = embed_pieces(ck, "param", NULL), nm = embed_pieces(ck, "adam_m", &files);
    CHECK_MSG(np == 1 && nm == 4 && files == 0xf, "ZeRO-1 checkpoint: %d param pieces, %d moment pieces in files %#x",
              np, nm, files);
    run_opts r0 = {2, 2, 0, 0, ck, 0}, r1 = {1, 4, 1, 0, ck, 0}, r2 = {0, 0, 0, 0, ck, 0};
    train(td, "B0", &r0, &b0);
    train(td, "B1", &r1, &b1);
    char name[64];
    snprintf(name, sizeof name, "B2-r%d", g_world_rank);
    train(td, name, &r2, &b2);
    CHECK(a.log.n == STEPS && b1.log.n == STEPS - SAVE_AT && b2.log.n == STEPS - SAVE_AT);
    check_same_resumed(&b0, &a, "resume in CP 2 x DP 2 without ZeRO-1");
    double worst = 0;
    for (int s = SAVE_AT; s < STEPS; s++) {
        CHECK_REL(b1.log.loss[s], a.log.loss[s], REL_TOL);
        CHECK_REL(b2.log.loss[s], a.log.loss[s], REL_TOL);
        worst = worst_of(worst, fabs(b1.log.loss[s] - a.log.loss[s]) / a.log.loss[s]);
        worst = worst_of(worst, fabs(b2.log.loss[s] - a.log.loss[s]) / a.log.loss[s]);
    }
    double w1 = max_abs_diff(&b1, &a), w2 = max_abs_diff(&b2, &a);
    CHECK_MSG(w1 <= W_TOL && w2 <= W_TOL, "resume: weights differ from the uninterrupted run by %g (DP 4) / %g (one "
              "rank), tol %g", w1, w2, W_TOL);
    if (g_world_rank == 0)
        printf("resume at step %d of CP 2 x DP 2 + ZeRO-1: in CP 2 x DP 2 without ZeRO-1 bit-identical; in DP 4 + "
               "ZeRO-1 and on one rank losses within %.1e relative, weights within %.1e / %.1e\n",
               SAVE_AT, worst, w1, w2);
    free(a.w);
    free(b0.w);
    free(b1.w);
    free(b2.w);
}

/* 2b. bf16 parameters: ZeRO-1 shards the fp32 master as it shards the moments, and every rank writes its rows of
 * it; the checkpoint resumes without ZeRO-1 (the whole master assembled from the rows) bit-identically, and a
 * checkpoint with the master whole resumes under ZeRO-1 (each rank takes its rows) bit-identically too. */
static void check_resume_bf16(const lcx_tokdata *td) {
    run_out a, b0, c, c0;
    run_opts ra = {2, 2, 1, SAVE_AT, NULL, 1};
    train(td, "A16", &ra, &a);
    char ck[700];
    saved_at("A16", ck, sizeof ck);
    const int np = embed_pieces(ck, "param", NULL), nw = embed_pieces(ck, "master", NULL);
    CHECK_MSG(np == 1 && nw == 4, "bf16 ZeRO-1 checkpoint: %d param, %d master pieces", np, nw);
    run_opts r0 = {2, 2, 0, 0, ck, 1};
    train(td, "A16-B0", &r0, &b0);
    /* the other way: a whole-master checkpoint (ZeRO-1 off) into ZeRO-1 */
    run_opts rc = {2, 2, 0, SAVE_AT, NULL, 1};
    train(td, "C16", &rc, &c);
    saved_at("C16", ck, sizeof ck);
    run_opts rc0 = {2, 2, 1, 0, ck, 1};
    train(td, "C16-B0", &rc0, &c0);
    check_same_resumed(&b0, &a, "bf16, a ZeRO-1 checkpoint resumed without ZeRO-1");
    check_same_resumed(&c0, &a, "bf16, a checkpoint without ZeRO-1 resumed with it");
    if (g_world_rank == 0)
        printf("bf16, CP 2 x DP 2: the ZeRO-1 checkpoint's master in 4 pieces; resumed without ZeRO-1, and a "
               "checkpoint without it resumed with it: losses and parameters bit-identical\n");
    free(a.w);
    free(b0.w);
    free(c.w);
    free(c0.w);
}

/* 3. A save that fails on one rank commits nothing. */
static void check_failed_save(const lcx_tokdata *td) {
    run_out a;
    run_opts ra = {1, 4, 1, 0, NULL, 0};
    train(td, "F", &ra, &a); /* saves s01-step000004 at the end */
    free(a.w);
    char dir[600], *latest = NULL;
    snprintf(dir, sizeof dir, "%s/F", g_root);
    lcx_comm_groups gs;
    lcx_mesh mesh = {1, 1, 4, 4};
    CHECK_OK(lcx_comm_mesh(g_world, &mesh, &gs));
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_F32;
    o.max_tokens = SEQ;
    o.training = 1;
    o.zero_comm = gs.group[LCX_GROUP_GRAD];
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &g_cfg, &o));
    CHECK_OK(lcx_model_init_random(m, 3, 0.05));
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.run_dir = dir;
    ctx.model_config = g_cfg.json;
    ctx.grad = gs.group[LCX_GROUP_GRAD];
    ctx.world = g_world;
    ctx.dp_rank = gs.coord.d, ctx.dp_size = 4;
    lcx_train_stage sg = stage(1, 0);
    lcx_train_state st;
    lcx_train_state_init(&st);
    st.step = STEPS + 1;
    char bad[700];
    for (int k = 0; k < 2; k++) { /* world rank 2, then rank 0 (the one that would commit) */
        const int victim = k == 0 ? 2 : 0;
        char needle[32];
        snprintf(needle, sizeof needle, "rank %d", victim);
        ctx.test_fail_save = victim + 1;
        CHECK_FAILS(lcx_train_save(m, &ctx, &st, &sg), LCX_ERR_IO, needle);
        CHECK_OK(lcx_train_latest(dir, &latest));
        CHECK_MSG(latest && strstr(latest, "s01-step000004") != NULL, "after a save failed on rank %d latest is %s",
                  victim, latest ? latest : "(none)");
        free(latest);
        latest = NULL;
        struct stat sb;
        snprintf(bad, sizeof bad, "%s/checkpoints/s01-step%06d", dir, STEPS + 1);
        CHECK_MSG(stat(bad, &sb) != 0, "a save failed on rank %d committed %s", victim, bad);
        CHECK_OK(lcx_comm_barrier(g_world, NULL));
    }
    ctx.test_fail_save = 0;
    CHECK_OK(lcx_train_save(m, &ctx, &st, &sg));
    CHECK_OK(lcx_train_latest(dir, &latest));
    CHECK(latest && strstr(latest, "s01-step000005") != NULL);
    /* the failed save's directory was removed by the commit */
    int tmp_left = 0;
    snprintf(bad, sizeof bad, "%s/checkpoints", dir);
    DIR *d = opendir(bad);
    for (struct dirent *e; d && (e = readdir(d));) tmp_left += strstr(e->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    CHECK_MSG(tmp_left == 0, "%d leftover tmp directories", tmp_left);
    if (g_world_rank == 0) printf("a save failing on rank 2 / rank 0 failed on every rank; latest kept step %d\n", STEPS);
    free(latest);
    lcx_train_state_free(&st);
    lcx_model_free(m);
    lcx_comm_groups_free(&gs);
}

int main(void) {
    omp_set_num_threads(1); /* 4 ranks share the machine's cores */
    lcx_comm *world = NULL;
    CHECK_OK(lcx_comm_world_init(&world));
    if (!world) return test_summary("test_train_zero_mpi");
    g_world = world;
    if (world->size != 4) {
        if (world->rank == 0) printf("test_train_zero_mpi needs 4 ranks (has %d): skipped\n", world->size);
        lcx_comm_finalize(world);
        return 77;
    }
    lcx_tokdata td;
    fixture_open(world, "test_train_zero_mpi", 40, 6, &td);

    check_zero(&td, 1, 4, 0);
    check_zero(&td, 2, 2, 0);
    check_zero(&td, 2, 2, 1);
    check_resume(&td);
    check_resume_bf16(&td);
    check_failed_save(&td);

    return fixture_close(world, &td, "test_train_zero_mpi");
}
