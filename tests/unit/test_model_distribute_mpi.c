/* Distributed saved activations (opts.distribute_saved, docs/parallel.md "Distributed saved activations"; 4 ranks):
 * TP ranks keep only their rows of a recomputed layer's input and all-gather them before the rerun. The rows are
 * copies, so training must be bit-identical to the same layout without it; the stored input shrinks TP-fold.
 * Reference: the same mesh, the same steps with distribute_saved 0 (itself checked against one rank by
 * test_train_tp_mpi). Cases, 4 layers with policies recompute, recompute, keep, recompute+offload (two
 * distributed layers in a row share the whole input buffer; a keep layer writes a distributed layer's input; an
 * offloaded one keeps its rows in its offload slot), every layer recompute, or keep, recompute, offload,
 * recompute+offload (an offload layer's input whole in its slot, beside a distributed one's rows):
 *   - qwen3's shape (q/k norms) TP 4, float32: 30 tokens a micro-batch (ragged rows: 8, 8, 8, 6) and a second
 *     micro-batch of 17 (5 rows a rank, the last 2), below the capacity;
 *   - llama_gqa's shape TP 2 x CP 2, bf16 activations, 14 and 10 local tokens;
 *   - qwen2's shape (GQA 4:1, biases), TP 2 in two independent worlds, bf16 parameters, every layer recompute;
 *   - qwen3's shape TP 4 with micro-batches of 3 and 2 tokens: fewer rows than ranks, some keep none.
 * Over STEPS AdamW steps, on every rank: every step's loss and gradient norm, a forward-only pass after each step
 * (lcx_model_forward on the training model: the layers run on the shared input, nothing kept) and the final master
 * weights the same bits with and without distribution; the activation buffer and the offload slot smaller by
 * exactly the rows not kept (each piece rounded to 64 bytes, as the model lays them out), less the shared whole
 * input (more memory, not less, where fewer than TP/(TP-1) layers stay on the device recomputing, as in the
 * llama_gqa case: 2 layers at TP 2), and the planner's memory model predicting that saving to the rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/plan.h"
#include "test_util.h"
#include "model_mesh_fixture.h"

#define STEPS 3
#define MAX_SEQ 30
#define N_MICRO 2

static int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }

typedef struct run_out {
    double loss[STEPS], norm[STEPS], fwd[STEPS]; /* fwd: the forward-only loss sum after each step */
    float **master;           /* [param] this rank's slice after the last step */
    size_t *numel;            /* [param] its elements */
    size_t n_params;
    lcx_model_memory mem;
    size_t slot_bytes;
} run_out;

typedef struct layout_case {
    const char *fixture;
    int tp, cp, sub;          /* TP x CP in independent worlds of sub ranks */
    lcx_dtype pdt, adt;
    lcx_act_policy pol[4];    /* the 4 layers' */
    int64_t seq[N_MICRO];     /* global row length of each micro-batch (one row each) */
} layout_case;

#define MIXED {LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE, LCX_ACT_KEEP, LCX_ACT_RECOMPUTE_OFFLOAD}
#define ALL_RECOMPUTE {LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE, LCX_ACT_RECOMPUTE}
#define WITH_OFFLOAD {LCX_ACT_KEEP, LCX_ACT_RECOMPUTE, LCX_ACT_OFFLOAD, LCX_ACT_RECOMPUTE_OFFLOAD}

static int count_policy(const layout_case *k, lcx_act_policy p) {
    int n = 0;
    for (int l = 0; l < 4; l++) n += k->pol[l] == p;
    return n;
}

static void run(const mesh_world *mw, const layout_case *k, int distribute, run_out *r) {
    const lcx_model_config *cfg = &mw->cfg;
    const lcx_comm_groups *gs = &mw->gs;
    memset(r, 0, sizeof *r);
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = k->pdt, o.act_dtype = k->adt;
    o.max_tokens = MAX_SEQ / k->cp;
    o.loss_chunk = 7;
    o.training = 1;
    o.layer_policy = k->pol;
    o.tp_comm = gs->group[LCX_GROUP_TP];
    o.cp_comm = k->cp > 1 ? gs->group[LCX_GROUP_CP] : NULL;
    o.distribute_saved = distribute;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (!m) return;
    CHECK_OK(lcx_model_init_random(m, 91, 0.08));
    r->mem = lcx_model_memory_of(m);
    r->slot_bytes = lcx_model_offload_stats(m).slot_bytes;
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    ao.lr = 1e-2, ao.max_grad_norm = 0.3;
    int32_t ids[N_MICRO][MAX_SEQ], tgt[N_MICRO][MAX_SEQ], pos[N_MICRO][MAX_SEQ];
    int32_t lids[N_MICRO][MAX_SEQ], ltgt[N_MICRO][MAX_SEQ], lpos[N_MICRO][MAX_SEQ];
    for (int step = 0; step < STEPS; step++) {
        lcx_batch mb[N_MICRO];
        for (int i = 0; i < N_MICRO; i++)
            mesh_batch(mw, k->cp, k->seq[i], 10 * step + i, ids[i], tgt[i], pos[i], lids[i], ltgt[i], lpos[i],
                       &mb[i]);
        lcx_step_result res;
        CHECK_OK(lcx_model_train_step_group(m, mb, N_MICRO, &ao, gs->group[LCX_GROUP_GRAD], &res));
        r->loss[step] = res.loss, r->norm[step] = res.grad_norm;
        int64_t count = 0;
        CHECK_OK(lcx_model_forward(m, &mb[0], NULL, &r->fwd[step], &count));
    }
    const lcx_param_table *t = lcx_model_params(m);
    r->n_params = t->n;
    r->master = calloc(t->n, sizeof *r->master);
    r->numel = calloc(t->n, sizeof *r->numel);
    for (size_t i = 0; i < t->n; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_model_param_slice(m, i, &s));
        r->numel[i] = 1;
        for (int d = 0; d < s.ndim; d++) r->numel[i] *= (size_t)s.local[d];
        r->master[i] = malloc(r->numel[i] * sizeof(float));
        CHECK_OK(lcx_model_get_master(m, i, r->master[i]));
    }
    lcx_model_free(m);
}

static void run_out_free(run_out *r) {
    for (size_t i = 0; i < r->n_params; i++) free(r->master[i]);
    free(r->master);
    free(r->numel);
}

static void check_case(lcx_comm *world, const layout_case *k) {
    mesh_world mw;
    mesh_world_open(world, k->fixture, k->sub, k->tp, k->cp, 1, &mw);
    const lcx_model_config cfg = mw.cfg;
    run_out ref, dist;
    run(&mw, k, 0, &ref);
    run(&mw, k, 1, &dist);
    int same = ref.n_params == dist.n_params && ref.n_params > 0;
    for (int s = 0; s < STEPS; s++)
        same &= ref.loss[s] == dist.loss[s] && ref.norm[s] == dist.norm[s] && ref.fwd[s] == dist.fwd[s];
    for (size_t i = 0; same && i < ref.n_params; i++)
        same &= ref.numel[i] == dist.numel[i] &&
                memcmp(ref.master[i], dist.master[i], ref.numel[i] * sizeof(float)) == 0;
    CHECK_MSG(same, "%s TP %d x CP %d: distributed training differs from the undistributed one", k->fixture, k->tp,
              k->cp);

    /* memory: each distributed recompute layer keeps ceil(T / TP) rows instead of T, the shared whole input is
     * TP x ceil(T / TP) rows; a recompute+offload layer's rows shrink in its offload slot */
    const int64_t T = MAX_SEQ / k->cp, rows = (T + k->tp - 1) / k->tp, es = k->adt == LCX_BF16 ? 2 : 4;
    const int64_t full = round64(T * cfg.hidden_size * es), part = round64(rows * cfg.hidden_size * es);
    const int n_rec = count_policy(k, LCX_ACT_RECOMPUTE);
    int64_t want = n_rec * (full - part) - round64(k->tp * rows * cfg.hidden_size * es);
    CHECK_MSG((int64_t)ref.mem.acts - (int64_t)dist.mem.acts == want, "%s: activation bytes %zu -> %zu, expected "
              "%lld less", k->fixture, ref.mem.acts, dist.mem.acts, (long long)want);
    /* the slot is the largest offloaded layer's: a recompute+offload one's shrinks, an offload one's does not */
    const int64_t slot_want = count_policy(k, LCX_ACT_OFFLOAD)                ? 0
                              : count_policy(k, LCX_ACT_RECOMPUTE_OFFLOAD) ? full - part
                                                                           : 0;
    CHECK_MSG((int64_t)ref.slot_bytes - (int64_t)dist.slot_bytes == slot_want,
              "%s: offload slot %zu -> %zu bytes, expected %lld less", k->fixture, ref.slot_bytes, dist.slot_bytes,
              (long long)slot_want);
    /* the planner's memory model (docs/plan.md "Memory") predicts the same saving, activations and offload device
     * pool together, to the model's rounding: ceil(T / TP) rows, not T / TP, and 64-byte pieces (at most a row and
     * 64 bytes for each of the 4 layers' inputs, the shared one and the 3 slots) */
    lcx_mem_model mm = {.n_layers = 4, .hidden = cfg.hidden_size, .ffn = cfg.intermediate_size,
                        .heads = cfg.num_attention_heads, .kv_heads = cfg.num_key_value_heads,
                        .head_dim = cfg.head_dim, .vocab = cfg.vocab_size, .tp = k->tp, .cp = k->cp,
                        .weight_bytes = k->pdt == LCX_BF16 ? 2 : 4, .act_bytes = (int)es, .loss_chunk = 7};
    lcx_mem_estimate ew, ed;
    lcx_mem_estimate_compute(&mm, MAX_SEQ, 1, k->pol, &ew);
    mm.distribute = 1;
    lcx_mem_estimate_compute(&mm, MAX_SEQ, 1, k->pol, &ed);
    const double predicted = (ew.activations + ew.workspace) - (ed.activations + ed.workspace);
    const double measured = ((double)ref.mem.acts + (double)ref.mem.offload_device) -
                            ((double)dist.mem.acts + (double)dist.mem.offload_device);
    CHECK_MSG(fabs(measured - predicted) <= 8.0 * (64 + es * cfg.hidden_size),
              "%s: the model saves %.0f bytes, the planner predicts %.0f", k->fixture, measured, predicted);
    char names[96] = "";
    for (int l = 0; l < 4; l++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", l ? ", " : "",
                 lcx_act_policy_name(k->pol[l]));
    if (world->rank == 0)
        printf("%s TP %d x CP %d (%s activations, %s): %d steps %s; activations %zu -> %zu bytes, offload slot "
               "%zu -> %zu\n",
               k->fixture, k->tp, k->cp, k->adt == LCX_BF16 ? "bf16" : "f32",
               names, STEPS,
               same ? "bit-identical" : "DIFFERENT", ref.mem.acts, dist.mem.acts, ref.slot_bytes, dist.slot_bytes);
    run_out_free(&ref);
    run_out_free(&dist);
    mesh_world_close(&mw);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_model_distribute_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_model_distribute_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    const layout_case cases[] = {
        {"qwen3", 4, 1, 4, LCX_F32, LCX_F32, MIXED, {30, 17}},
        {"llama_gqa", 2, 2, 4, LCX_F32, LCX_BF16, MIXED, {28, 20}},
        {"qwen2", 2, 1, 2, LCX_BF16, LCX_F32, ALL_RECOMPUTE, {30, 23}},
        {"llama_gqa", 2, 1, 2, LCX_F32, LCX_BF16, WITH_OFFLOAD, {30, 12}},
        {"qwen3", 4, 1, 4, LCX_F32, LCX_F32, ALL_RECOMPUTE, {3, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(world, &cases[i]);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_model_distribute_mpi");
}
