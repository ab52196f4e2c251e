/* ZeRO-1 on the training step directly (4 ranks, src/model/model_zero.c): lcx_model_train_step_group over the
 * world (DP 4) with the AdamW moments sharded (opts.zero_comm) against the same step unsharded, bf16 and f32
 * parameters, STEPS steps with clipping active and a ragged batch (rank r has r + 1 rows, some labels ignored):
 *   - loss, counted targets and the gradient norm (the double) identical: the unsharded group step groups its
 *     norm's partial sums by the ZeRO-1 rows of each rank too;
 *   - stored parameters bit-identical, on every rank; the master weights (bf16: sharded as the moments, 1/4 of
 *     the bytes; f32: the parameters) bit-identical to the unsharded model's rows;
 *   - every rank's moments equal the unsharded model's rows (lcx_model_moment_rows), bit for bit;
 *   - moment bytes about 1/4, as the planner's memory model says; the unsharded public optimizer step and a step over another group are refused;
 *   - the same with exchange batches of 100 and 777 elements (lcx_zero_set_chunk), so that parameters larger than a
 *     batch go in windows of their rows. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/model/model.h"
#include "src/model/model_dp.h"
#include "src/model/model_state.h"
#include "src/plan/plan.h"
#include "test_util.h"

#define STEPS 3
#define SEQ 16

static lcx_model_config g_cfg;
static uint64_t g_chunk = LCX_ZERO_CHUNK; /* what lcx_zero_set_chunk was last given */

static lcx_model *new_model(lcx_dtype dt, lcx_comm *zero) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = dt;
    o.max_tokens = 4 * SEQ;
    o.training = 1;
    o.zero_comm = zero;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &g_cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 7, 0.05));
    return m;
}

static void check(lcx_comm *world, lcx_dtype dt) {
    const int me = world->rank, rows = me + 1;
    int32_t *ids = malloc((size_t)rows * SEQ * 4), *tgt = malloc((size_t)rows * SEQ * 4);
    for (int i = 0; i < rows * SEQ; i++) {
        ids[i] = (int32_t)((i * 31 + 7 * me + 5) % g_cfg.vocab_size);
        tgt[i] = i % 7 == 3 ? LCX_IGNORE_INDEX : (int32_t)((i * 17 + 3 + me) % g_cfg.vocab_size);
    }
    lcx_batch b = {.n_seq = rows, .seq_len = SEQ, .ids = ids, .targets = tgt};
    lcx_adamw_opts o = lcx_adamw_opts_default();
    o.lr = 1e-2;
    o.max_grad_norm = 0.3;
    o.eps = 1e-6;
    lcx_model *ref = new_model(dt, NULL), *z = new_model(dt, world);
    for (int s = 0; s < STEPS; s++) {
        lcx_step_result rr, rz;
        CHECK_OK(lcx_model_train_step_group(ref, &b, 1, &o, world, &rr));
        CHECK_OK(lcx_model_train_step_group(z, &b, 1, &o, world, &rz));
        CHECK(rr.loss == rz.loss && rr.n_tokens == rz.n_tokens && rr.step == rz.step);
        CHECK_MSG(rz.grad_norm == rr.grad_norm, "step %d: gradient norm %.17g with ZeRO-1, %.17g without", s + 1,
                  rz.grad_norm, rr.grad_norm);
        CHECK_MSG(rr.clip_scale < 1, "clipping inactive (%g)", rr.clip_scale);
    }
    const lcx_param_table *t = lcx_model_params(ref);
    size_t mx = 0;
    for (size_t i = 0; i < t->n; i++) mx = mx > t->params[i].numel ? mx : (size_t)t->params[i].numel;
    float *a = malloc(mx * 4), *c = malloc(mx * 4), *am = malloc(mx * 4), *av = malloc(mx * 4);
    float *zm = malloc(mx * 4), *zv = malloc(mx * 4);
    int same_w = 1, same_p = 1, same_m = 1;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < t->n; i++) {
        size_t n = (size_t)t->params[i].numel;
        uint64_t r0, nr, fr0, fnr, w0, wn;
        CHECK_OK(lcx_model_moment_rows(z, i, &r0, &nr));
        CHECK_OK(lcx_model_moment_rows(ref, i, &fr0, &fnr));
        CHECK(fr0 == 0 && r0 + nr <= fnr);
        size_t rl = n / fnr;
        /* bf16: the master is sharded as the moments are (f32: the stored parameter, whole) */
        CHECK_OK(lcx_model_master_rows(z, i, &w0, &wn));
        CHECK(dt == LCX_BF16 ? w0 == r0 && wn == nr : w0 == 0 && wn == fnr);
        CHECK_OK(lcx_model_get_master(ref, i, a));
        CHECK_OK(lcx_model_get_master_rows(z, i, c));
        same_w &= memcmp(a + w0 * rl, c, wn * rl * 4) == 0;
        CHECK_OK(lcx_model_get_param(ref, i, a));
        CHECK_OK(lcx_model_get_param(z, i, c));
        same_p &= memcmp(a, c, n * 4) == 0;
        for (size_t k = 0; k < n * 4; k++) h = (h ^ ((unsigned char *)c)[k]) * 1099511628211ull;
        CHECK_OK(lcx_model_get_moments(ref, i, am, av));
        CHECK_OK(lcx_model_get_moments(z, i, zm, zv));
        same_m &= memcmp(am + r0 * rl, zm, nr * rl * 4) == 0 && memcmp(av + r0 * rl, zv, nr * rl * 4) == 0;
    }
    CHECK_MSG(same_w, "%s: this rank's master rows with ZeRO-1 differ", lcx_dtype_name(dt));
    CHECK_MSG(same_p, "%s: stored parameters with ZeRO-1 differ", lcx_dtype_name(dt));
    CHECK_MSG(same_m, "%s: this rank's moments differ from the unsharded model's rows", lcx_dtype_name(dt));
    uint64_t hs[4];
    CHECK_OK(lcx_comm_all_gather(world, NULL, &h, hs, 1, LCX_I64));
    for (int r = 0; r < world->size; r++) CHECK_MSG(hs[r] == h, "rank %d's parameters differ from rank %d's", r, me);
    lcx_model_memory mr = lcx_model_memory_of(ref), mz = lcx_model_memory_of(z);
    CHECK(mz.moments * 4 < mr.moments * 11 / 10 && mz.params == mr.params && mz.grads == mr.grads);
    CHECK_MSG(dt == LCX_BF16 ? mz.master * 4 < mr.master * 11 / 10 : mz.master == mr.master,
              "%s: master bytes %zu with ZeRO-1, %zu without", lcx_dtype_name(dt), mz.master, mr.master);
    if (dt == LCX_BF16) CHECK_FAILS(lcx_model_get_master(z, 0, a), LCX_ERR_INVALID, "sharded");
    /* the planner's memory model (src/plan/plan.h): 8 bytes a parameter / D; the model rounds each parameter's
     * share to whole rows (up to one row more) and 64 bytes */
    lcx_mem_model pm = lcx_mem_model_of(&g_cfg, t->total_numel);
    pm.weight_bytes = dt == LCX_BF16 ? 2 : 4, pm.act_bytes = 4, pm.loss_chunk = SEQ, pm.zero_shards = world->size;
    lcx_act_policy keep[64];
    for (int l = 0; l < 64; l++) keep[l] = LCX_ACT_KEEP;
    lcx_mem_estimate e;
    lcx_mem_estimate_compute(&pm, SEQ, 1, keep, &e);
    double slack = 0;
    for (size_t i = 0; i < t->n; i++) {
        const lcx_shape *sh = &t->params[i].shape;
        slack += 8.0 * (double)(sh->ndim >= 2 ? (uint64_t)t->params[i].numel / sh->dims[0] : 1) + 2 * 64;
    }
    /* the exchange scratch, held by the model: 2 x 4 x min(chunk, P) bytes, up to the rows' rounding */
    const double zs = 8.0 * fmin((double)g_chunk, (double)t->total_numel);
    CHECK_MSG(fabs((double)mz.grad_scratch - zs) <= slack,
              "ZeRO-1 scratch %zu bytes, the model's 2 x 4 x min(chunk, P) = %.0f", mz.grad_scratch, zs);
    /* without ZeRO-1 the sum's, (D + 1) x ceil(min(P, 2^20) / D) floats (P rounded up to 64 bytes a parameter) */
    const int64_t pn = (int64_t)t->total_numel < LCX_DP_CHUNK ? (int64_t)t->total_numel : LCX_DP_CHUNK;
    const double ds = 4.0 * (double)lcx_group_sum_all_scratch(world->size, pn);
    CHECK_MSG((double)mr.grad_scratch >= ds && (double)mr.grad_scratch <= ds + 4.0 * (world->size + 1) * 16 * t->n,
              "the unsharded sum's scratch %zu bytes, expected %.0f", mr.grad_scratch, ds);
    if (g_chunk == LCX_ZERO_CHUNK) CHECK(e.workspace >= zs); /* the planner's workspace counts it */
    CHECK_MSG(fabs((double)mz.moments - e.optimizer) <= slack,
              "moments per rank %zu bytes, the planner's model %.0f (slack %.0f)", mz.moments, e.optimizer, slack);
    /* bf16: the master rows are laid out as the moments (half their bytes), beside the norms' float32 copies (the
     * same on both models); the planner's model: 4 bytes a parameter / D */
    if (dt == LCX_BF16)
        CHECK_MSG(mz.master - mz.moments / 2 == mr.master - mr.moments / 2 &&
                      fabs((double)mz.moments / 2 - e.master) <= slack / 2,
                  "master per rank %zu bytes (moments %zu), the planner's model %.0f", mz.master, mz.moments,
                  e.master);
    /* refused: the unsharded optimizer step, and a step without the group */
    lcx_step_result r;
    CHECK_FAILS(lcx_model_optimizer_step(z, &o, &r), LCX_ERR_INVALID, "ZeRO-1");
    CHECK_FAILS(lcx_model_train_step(z, &b, 1, &o, &r), LCX_ERR_INVALID, "sharded");
    if (me == 0)
        printf("%s, DP 4, %d steps (ragged, clipped): ZeRO-1 loss, norm, weights, stored params and moment "
               "rows bit-identical; moments %zu -> %zu, master %zu -> %zu bytes per rank\n",
               lcx_dtype_name(dt), STEPS, mr.moments, mz.moments, mr.master, mz.master);
    lcx_model_free(ref);
    lcx_model_free(z);
    free(a);
    free(c);
    free(am);
    free(av);
    free(zm);
    free(zv);
    free(ids);
    free(tgt);
}

int main(void) {
    omp_set_num_threads(1);
    lcx_comm *world = NULL;
    CHECK_OK(lcx_comm_world_init(&world));
    if (!world) return test_summary("test_model_zero_mpi");
    if (world->size != 4) {
        if (world->rank == 0) printf("test_model_zero_mpi needs 4 ranks (has %d): skipped\n", world->size);
        lcx_comm_finalize(world);
        return 77;
    }
    char cfgp[512];
    snprintf(cfgp, sizeof cfgp, "%s/tests/fixtures/models/llama_gqa/config.json", LCX_SOURCE_DIR);
    CHECK_OK(lcx_config_load(cfgp, &g_cfg));
    check(world, LCX_F32);
    check(world, LCX_BF16);
    /* batches smaller than a parameter: every large one exchanged in windows of its rows, as an 8B embedding is */
    lcx_zero_set_chunk(g_chunk = 100);
    check(world, LCX_F32);
    lcx_zero_set_chunk(g_chunk = 777);
    check(world, LCX_BF16);
    lcx_zero_set_chunk(0);
    g_chunk = LCX_ZERO_CHUNK;
    lcx_config_free(&g_cfg);
    int64_t bad = test_failures_ ? 1 : 0;
    CHECK_OK(lcx_comm_all_reduce(world, NULL, &bad, &bad, 1, LCX_I64, LCX_COMM_MAX));
    lcx_comm_finalize(world);
    CHECK(bad == 0);
    return test_summary("test_model_zero_mpi");
}
