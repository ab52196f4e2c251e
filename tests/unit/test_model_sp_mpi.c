/* Sequence parallelism (opts.sequence_parallel, docs/parallel.md "Sequence parallelism"; 4 ranks): under TP the
 * residual stream, the RMSNorms and their outputs hold each rank's ceil(T / TP) rows; the row-parallel outputs are
 * reduce-scattered and the column-parallel inputs all-gathered. Reference: the same mesh, the same steps without
 * it (itself checked against one rank by test_train_tp_mpi). What must hold, on every rank:
 *   - the forward is the same computation row by row and every sum keeps its rank order: the first step's loss the
 *     same bits, and every gradient of the first step but the norms' the same bits;
 *   - the norm weights' gradients are the same sums in another order (each rank's rows, then the ranks): within
 *     1e-6 of their largest value; then over STEPS AdamW steps losses within 1e-6 and master weights within 5e-5
 *     of each tensor's largest (AdamW normalises each element's step: a gradient near zero moves its weight by up
 *     to lr whatever its size, so the order of its sum shows more in the weights than in the gradients);
 *   - the activation buffer and the offload slot are what the planner's memory model predicts with sequence
 *     parallelism, to the model's rounding, and smaller than without it wherever layers keep their tensors.
 * Cases (4 layers): qwen3's shape (q/k norms, tied embeddings) TP 4 with ragged rows (30 tokens: 8, 8, 8, 6; 17:
 * 5, 5, 5, 2) and policies recompute, recompute, keep, recompute+offload; llama_gqa's TP 2 x CP 2, bf16
 * activations, MLP tiles of 5 rows, keep, recompute, offload, recompute+offload; qwen2's (biases) TP 2 in two
 * worlds with bf16 parameters, every layer keep; llama_gqa's TP 2 x DP 2 with ZeRO-1; qwen3's TP 4 with
 * micro-batches of 3 and 2 tokens (fewer rows than ranks: some hold padding only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "test_util.h"
#include "model_mesh_fixture.h"
#include "worst_of.h"

#define STEPS 3
#define MAX_SEQ 30
#define N_MICRO 2

typedef struct run_out {
    double loss[STEPS];
    float **grad1, **master;  /* [param] this rank's slice: the first step's gradient, the last step's weights */
    size_t *numel;            /* [param] its elements */
    size_t n_params;
    lcx_model_memory mem;
    size_t slot_bytes;
    int sp;                   /* the model said it runs sequence parallel */
} run_out;

typedef struct sp_case {
    const char *fixture;
    int tp, cp, dp, sub;      /* TP x CP x DP in independent worlds of sub ranks */
    lcx_dtype pdt, adt;
    int64_t mlp_chunk;
    int zero;                 /* ZeRO-1 over the GRAD group */
    lcx_act_policy pol[4];    /* the 4 layers' */
    int64_t seq[N_MICRO];     /* global row length of each micro-batch (one row each) */
} sp_case;

#define MIXED {LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE, LCX_ACT_KEEP, LCX_ACT_RECOMPUTE_OFFLOAD}
#define ALL_KEEP {LCX_ACT_KEEP, LCX_ACT_KEEP, LCX_ACT_KEEP, LCX_ACT_KEEP}
#define ALL_RECOMPUTE {LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE}
#define EVERY_POLICY {LCX_ACT_KEEP, LCX_ACT_RECOMPUTE, LCX_ACT_OFFLOAD, LCX_ACT_RECOMPUTE_OFFLOAD}

static float *slice_copy(const lcx_model *m, size_t i, size_t n, int grad) {
    float *v = malloc(n * sizeof(float));
    CHECK_OK(grad ? lcx_model_get_grad(m, i, v) : lcx_model_get_master(m, i, v));
    return v;
}

static void run(const mesh_world *mw, const sp_case *k, int sp, run_out *r) {
    const lcx_model_config *cfg = &mw->cfg;
    const lcx_comm_groups *gs = &mw->gs;
    memset(r, 0, sizeof *r);
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = k->pdt, o.act_dtype = k->adt;
    o.max_tokens = MAX_SEQ / k->cp;
    o.loss_chunk = 7;
    o.mlp_chunk = k->mlp_chunk;
    o.training = 1;
    o.layer_policy = k->pol;
    o.tp_comm = gs->group[LCX_GROUP_TP];
    o.cp_comm = k->cp > 1 ? gs->group[LCX_GROUP_CP] : NULL;
    o.zero_comm = k->zero ? gs->group[LCX_GROUP_GRAD] : NULL;
    o.sequence_parallel = sp;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (!m) return;
    r->sp = lcx_model_sequence_parallel(m);
    CHECK_OK(lcx_model_init_random(m, 37, 0.08));
    r->mem = lcx_model_memory_of(m);
    r->slot_bytes = lcx_model_offload_stats(m).slot_bytes;
    const lcx_param_table *t = lcx_model_params(m);
    r->n_params = t->n;
    r->grad1 = calloc(t->n, sizeof *r->grad1);
    r->master = calloc(t->n, sizeof *r->master);
    r->numel = calloc(t->n, sizeof *r->numel);
    for (size_t i = 0; i < t->n; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_model_param_slice(m, i, &s));
        r->numel[i] = 1;
        for (int d = 0; d < s.ndim; d++) r->numel[i] *= (size_t)s.local[d];
    }
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    ao.lr = 1e-2, ao.max_grad_norm = 0.3;
    int32_t ids[N_MICRO][MAX_SEQ], tgt[N_MICRO][MAX_SEQ], pos[N_MICRO][MAX_SEQ];
    int32_t lids[N_MICRO][MAX_SEQ], ltgt[N_MICRO][MAX_SEQ], lpos[N_MICRO][MAX_SEQ];
    for (int step = 0; step < STEPS; step++) {
        lcx_batch mb[N_MICRO];
        for (int i = 0; i < N_MICRO; i++) /* each DP replica its own tokens */
            mesh_batch(mw, k->cp, k->seq[i], 10 * (step + 10 * gs->coord.d) + i, ids[i], tgt[i], pos[i], lids[i],
                       ltgt[i], lpos[i], &mb[i]);
        lcx_step_result res;
        CHECK_OK(lcx_model_train_step_group(m, mb, N_MICRO, &ao, gs->group[LCX_GROUP_GRAD], &res));
        r->loss[step] = res.loss;
        for (size_t i = 0; step == 0 && i < t->n; i++) r->grad1[i] = slice_copy(m, i, r->numel[i], 1);
    }
    for (size_t i = 0; i < t->n; i++) r->master[i] = slice_copy(m, i, r->numel[i], 0);
    lcx_model_free(m);
}

static void run_out_free(run_out *r) {
    for (size_t i = 0; i < r->n_params; i++) {
        free(r->grad1[i]);
        free(r->master[i]);
    }
    free(r->grad1);
    free(r->master);
    free(r->numel);
}

static int is_norm(const lcx_param_spec *s) { return s->role == LCX_ROLE_NORM; }

static void check_case(lcx_comm *world, const sp_case *k) {
    mesh_world mw;
    mesh_world_open(world, k->fixture, k->sub, k->tp, k->cp, k->dp, &mw);
    const lcx_model_config cfg = mw.cfg;
    run_out ref, sp;
    run(&mw, k, 0, &ref);
    run(&mw, k, 1, &sp);
    CHECK_MSG(sp.sp && !ref.sp, "%s: the model does not say whether it runs sequence parallel", k->fixture);
    lcx_param_table tab;
    CHECK_OK(lcx_param_table_init(&tab, &cfg));
    int same_loss = ref.loss[0] == sp.loss[0], same_grads = ref.n_params == sp.n_params && ref.n_params > 0;
    double norm_err = 0, loss_err = 0, w_err = 0;
    for (size_t i = 0; same_grads && i < ref.n_params; i++) {
        CHECK(ref.numel[i] == sp.numel[i]);
        double gmax = 0, gerr = 0, wmax = 0, werr = 0;
        for (size_t e = 0; e < ref.numel[i]; e++) {
            gmax = fmax(gmax, fabs(ref.grad1[i][e]));
            gerr = worst_of(gerr, fabs((double)ref.grad1[i][e] - sp.grad1[i][e]));
            wmax = fmax(wmax, fabs(ref.master[i][e]));
            werr = worst_of(werr, fabs((double)ref.master[i][e] - sp.master[i][e]));
        }
        if (is_norm(&tab.params[i])) {
            norm_err = worst_of(norm_err, gerr / (gmax > 0 ? gmax : 1));
        } else if (memcmp(ref.grad1[i], sp.grad1[i], ref.numel[i] * sizeof(float)) != 0) {
            CHECK_MSG(0, "%s: %s's first gradient differs by %.3g (of %.3g)", k->fixture, tab.params[i].name, gerr,
                      gmax);
            same_grads = 0;
        }
        w_err = worst_of(w_err, werr / (wmax > 0 ? wmax : 1));
    }
    for (int s = 0; s < STEPS; s++)
        loss_err = worst_of(loss_err, fabs(ref.loss[s] - sp.loss[s]) / fabs(ref.loss[s]));
    CHECK_MSG(same_loss, "%s: the first loss differs: %.17g vs %.17g", k->fixture, ref.loss[0], sp.loss[0]);
    CHECK_MSG(norm_err <= 1e-6, "%s: norm gradients %.3g (relative) from the reference", k->fixture, norm_err);
    CHECK_MSG(loss_err <= 1e-6 && w_err <= 5e-5, "%s: after %d steps losses %.3g, weights %.3g (relative) apart",
              k->fixture, STEPS, loss_err, w_err);

    /* memory: the planner's model with sequence parallelism predicts the model's activation buffer and offload
     * slot (to the rounding: ceil(T / TP) rows and 64-byte pieces, at most a row and 64 bytes for each of the
     * model's pieces of H-wide rows) and so the saving */
    const int64_t es = k->adt == LCX_BF16 ? 2 : 4;
    lcx_mem_model mm = {.n_layers = 4, .hidden = cfg.hidden_size, .ffn = cfg.intermediate_size,
                        .heads = cfg.num_attention_heads, .kv_heads = cfg.num_key_value_heads,
                        .head_dim = cfg.head_dim, .vocab = cfg.vocab_size, .tp = k->tp, .cp = k->cp,
                        .weight_bytes = k->pdt == LCX_BF16 ? 2 : 4, .act_bytes = (int)es, .loss_chunk = 7,
                        .mlp_tile = k->mlp_chunk};
    lcx_mem_estimate ew, es_;
    lcx_mem_estimate_compute(&mm, MAX_SEQ, 1, k->pol, &ew);
    mm.sequence_parallel = 1;
    lcx_mem_estimate_compute(&mm, MAX_SEQ, 1, k->pol, &es_);
    const double predicted = (ew.activations + ew.workspace) - (es_.activations + es_.workspace);
    const double measured = ((double)ref.mem.acts + (double)ref.mem.offload_device) -
                            ((double)sp.mem.acts + (double)sp.mem.offload_device);
    CHECK_MSG(fabs(measured - predicted) <= 40.0 * (64 + es * cfg.hidden_size),
              "%s: sequence parallelism saves %.0f bytes, the planner predicts %.0f", k->fixture, measured,
              predicted);
    int n_keep = 0;
    for (int l = 0; l < 4; l++) n_keep += k->pol[l] == LCX_ACT_KEEP;
    if (n_keep >= 2)
        CHECK_MSG(sp.mem.acts < ref.mem.acts, "%s: %d keep layers, yet activations %zu -> %zu bytes", k->fixture,
                  n_keep, ref.mem.acts, sp.mem.acts);
    if (world->rank == 0)
        printf("%s TP %d x CP %d x DP %d%s (%s activations): first loss %s, norm gradients %.2g, after %d steps "
               "losses %.2g, weights %.2g; activations %zu -> %zu bytes (predicted saving %.0f), offload slot %zu -> "
               "%zu\n",
               k->fixture, k->tp, k->cp, k->dp, k->zero ? " ZeRO-1" : "", k->adt == LCX_BF16 ? "bf16" : "f32",
               same_loss ? "bit-identical" : "DIFFERENT", norm_err, STEPS, loss_err, w_err, ref.mem.acts,
               sp.mem.acts, predicted, ref.slot_bytes, sp.slot_bytes);
    lcx_param_table_free(&tab);
    run_out_free(&ref);
    run_out_free(&sp);
    mesh_world_close(&mw);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_model_sp_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_model_sp_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    const sp_case cases[] = {
        {"qwen3", 4, 1, 1, 4, LCX_F32, LCX_F32, 0, 0, MIXED, {30, 17}},
        {"llama_gqa", 2, 2, 1, 4, LCX_F32, LCX_BF16, 5, 0, EVERY_POLICY, {28, 20}},
        {"qwen2", 2, 1, 1, 2, LCX_BF16, LCX_F32, 0, 0, ALL_KEEP, {30, 23}},
        {"llama_gqa", 2, 1, 2, 4, LCX_F32, LCX_F32, 0, 1, ALL_KEEP, {30, 12}},
        {"qwen3", 4, 1, 1, 4, LCX_F32, LCX_F32, 0, 0, ALL_RECOMPUTE, {3, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(world, &cases[i]);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_model_sp_mpi");
}
