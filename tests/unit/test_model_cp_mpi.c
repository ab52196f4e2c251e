/* Context parallelism in the model (run with 4 ranks): the qwen2 fixture's shape (4 query heads on 1 KV head,
 * q/k/v biases) with random weights, the same seed on every rank, run over CP groups of 2 (mesh 1x2x2: two
 * independent groups) and of 4 (mesh 1x4x1). Each rank also runs the single-rank model on the whole global
 * batch (2 rows of 32 tokens, the second starting at position 5, some targets ignored) as the reference, then
 * its CP model on its local tokens (lcx_cp_local_batch):
 * - forward: the loss sum and count every rank reports are the global ones, and the logits of its local rows
 *   are the reference's rows it holds;
 * - forward + backward: every weight gradient summed over the CP group equals the reference's;
 * - the same call again gives bit-identical local gradients and loss;
 * - the recompute policy gives the same gradients as keep, bit for bit (the attention output is kept);
 * - a forward-only model (training 0) gives the same loss as the training model's forward;
 * - bf16 activations: the CP gradients within 2e-2 of the single-rank bf16 model's, and no further from the
 *   float32 reference than twice the single-rank bf16 model's own distance;
 * - a CP communicator of one rank (lcx_comm_single): the ring with the own block only, vs the plain model;
 * - errors: a batch without targets, an odd local row, positions that are not this rank's chunks;
 * - document masks (check_cp_docs).
 * Tolerances (float32, another summation order than one causal attention over the row): loss sum 1e-5
 * relative, logits 1e-5 of the largest |logit|, each gradient 1e-5 of its largest |value|. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_fixture.h"
#include "src/comm/comm.h"
#include "src/core/cp_perm.h"
#include "test_util.h"
#include "worst_of.h"

enum { NSEQ = 2, LG = 32, TG = NSEQ * LG };

static lcx_model *make_model_dt(int64_t max_tokens, lcx_comm *cp, int training, lcx_act_policy pol, lcx_dtype adt) {
    char *dir = fx_path("qwen2", "models", "");
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = max_tokens;
    o.loss_chunk = 5; /* several loss chunks per local batch */
    o.training = training;
    o.policy = pol;
    o.cp_comm = cp;
    o.act_dtype = adt;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    free(dir);
    if (m) CHECK_OK(lcx_model_init_random(m, 4242, 0.08));
    return m;
}

static lcx_model *make_model(int64_t max_tokens, lcx_comm *cp, int training, lcx_act_policy pol) {
    return make_model_dt(max_tokens, cp, training, pol, LCX_F32);
}

/* max |got - want| / max |want| */
static double scaled_err(const float *got, const float *want, int64_t n) {
    double e = 0, mx = 1e-30;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        e = worst_of(e, d);
    }
    return e / mx;
}

/* All gradients of m, parameter after parameter, into g (host). */
static void grads_of(lcx_model *m, float *g) {
    const lcx_param_table *t = lcx_model_params(m);
    size_t off = 0;
    for (size_t i = 0; i < t->n; i++) {
        CHECK_OK(lcx_model_get_grad(m, i, g + off));
        off += t->params[i].numel;
    }
}

static size_t n_grads(lcx_model *m) {
    const lcx_param_table *t = lcx_model_params(m);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) n += t->params[i].numel;
    return n;
}

static double worst_loss = 0, worst_logits = 0, worst_grad = 0, worst_bf16 = 0, worst_bf16_cp = 0, worst_bf16_one = 0;

/* A CP communicator of one rank: the ring with only the own block (three tasks), nothing sent. */
static void check_cp1(void) {
    lcx_comm *one = NULL;
    CHECK_OK(lcx_comm_single(&one));
    int32_t ids[LG];
    for (int64_t t = 0; t < LG; t++) ids[t] = (int32_t)((t * 37 + 11) % 100);
    int32_t tgt[LG];
    for (int64_t t = 0; t < LG; t++) tgt[t] = t + 1 < LG ? ids[t + 1] : LCX_IGNORE_INDEX;
    lcx_batch b = {.n_seq = 1, .seq_len = LG, .ids = ids, .targets = tgt};
    lcx_model *ref = make_model(LG, NULL, 1, LCX_ACT_KEEP), *m = make_model(LG, one, 1, LCX_ACT_KEEP);
    size_t ng = n_grads(ref);
    float *gr = malloc(sizeof(float) * ng), *gc = malloc(sizeof(float) * ng);
    double sr = 0, sc = 0;
    CHECK_OK(lcx_model_zero_grads(ref));
    CHECK_OK(lcx_model_forward_backward(ref, &b, 1.0f / (LG - 1), &sr, NULL));
    grads_of(ref, gr);
    CHECK_OK(lcx_model_zero_grads(m));
    CHECK_OK(lcx_model_forward_backward(m, &b, 1.0f / (LG - 1), &sc, NULL));
    grads_of(m, gc);
    double e = scaled_err(gc, gr, (int64_t)ng);
    CHECK_MSG(fabs(sc - sr) <= 1e-5 * fabs(sr) && e <= 1e-5, "cp=1: loss %.9g vs %.9g, gradients %.2e", sc, sr, e);
    lcx_model_free(ref);
    lcx_model_free(m);
    free(gr);
    free(gc);
    one->impl->free(one); /* not lcx_comm_finalize: that would end MPI */
}

/* The world as a 1 x cp x (size / cp) mesh: this rank's CP group. */
static lcx_comm *cp_group(lcx_comm *world, int cp, lcx_comm_groups *gs) {
    lcx_mesh mesh;
    CHECK_OK(lcx_mesh_init(&mesh, 1, cp, world->size / cp));
    CHECK_OK(lcx_comm_mesh(world, &mesh, gs));
    return gs->group[LCX_GROUP_CP];
}

static void check_cp(lcx_comm *world, int cp) {
    lcx_comm_groups gs;
    lcx_comm *g = cp_group(world, cp, &gs);
    const int c = g->rank;
    const int64_t S = LG / cp, T = NSEQ * S;

    /* the global batch, the same on every rank */
    int32_t ids[TG], tgt[TG], pos[TG];
    uint32_t h = 12345;
    lcx_model *ref = make_model(TG, NULL, 1, LCX_ACT_KEEP);
    const int64_t V = lcx_model_config_of(ref)->vocab_size;
    for (int64_t t = 0; t < TG; t++) h = h * 1103515245u + 12345u, ids[t] = (int32_t)((h >> 8) % (uint32_t)V);
    for (int64_t r = 0; r < NSEQ; r++)
        for (int64_t i = 0; i < LG; i++) {
            int64_t t = r * LG + i;
            tgt[t] = i + 1 < LG && t % 7 != 3 ? ids[t + 1] : LCX_IGNORE_INDEX;
            pos[t] = (int32_t)(i + (r == 1 ? 5 : 0));
        }
    lcx_batch gb = {.n_seq = NSEQ, .seq_len = LG, .ids = ids, .targets = tgt, .positions = pos};

    /* reference: one rank, the whole sequence */
    float *ref_logits = malloc(sizeof(float) * (size_t)(TG * V));
    double ref_sum = 0;
    int64_t ref_cnt = 0;
    CHECK_OK(lcx_model_forward(ref, &gb, ref_logits, &ref_sum, &ref_cnt));
    size_t ng = n_grads(ref);
    float *ref_g = malloc(sizeof(float) * ng), *g1 = malloc(sizeof(float) * ng), *g2 = malloc(sizeof(float) * ng);
    float *g3 = malloc(sizeof(float) * ng);
    CHECK_OK(lcx_model_zero_grads(ref));
    CHECK_OK(lcx_model_forward_backward(ref, &gb, (float)(1.0 / (double)ref_cnt), NULL, NULL));
    grads_of(ref, ref_g);

    /* this rank's local batch */
    int32_t lid[TG], ltg[TG], lpos[TG];
    for (int64_t r = 0; r < NSEQ; r++)
        CHECK_OK(lcx_cp_local_batch(LG, cp, c, ids + r * LG, tgt + r * LG, pos + r * LG, lid + r * S, ltg + r * S,
                                    lpos + r * S));
    lcx_batch lb = {.n_seq = NSEQ, .seq_len = S, .ids = lid, .targets = ltg, .positions = lpos};

    /* forward: global loss on every rank, the local rows of the logits */
    lcx_model *m = make_model(T, g, 1, LCX_ACT_KEEP);
    float *logits = malloc(sizeof(float) * (size_t)(T * V)), *want = malloc(sizeof(float) * (size_t)(T * V));
    double sum = 0;
    int64_t cnt = 0;
    CHECK_OK(lcx_model_forward(m, &lb, logits, &sum, &cnt));
    for (int64_t r = 0; r < NSEQ; r++)
        CHECK_OK(lcx_cp_scatter_rows(LG, cp, c, ref_logits + r * LG * V, want + r * S * V, (size_t)V * sizeof(float)));
    double el = fabs(sum - ref_sum) / fabs(ref_sum), eg = scaled_err(logits, want, T * V);
    CHECK_MSG(cnt == ref_cnt && el <= 1e-5 && eg <= 1e-5,
              "cp=%d rank %d forward: count %lld vs %lld, loss sum %.9g vs %.9g (rel %.2e), logits err %.2e", cp, c,
              (long long)cnt, (long long)ref_cnt, sum, ref_sum, el, eg);
    worst_loss = worst_of(worst_loss, el), worst_logits = worst_of(worst_logits, eg);

    /* a forward-only model: the same forward through the working set */
    lcx_model *mi = make_model(T, g, 0, LCX_ACT_KEEP);
    double sum_i = 0;
    int64_t cnt_i = 0;
    CHECK_OK(lcx_model_forward(mi, &lb, NULL, &sum_i, &cnt_i));
    CHECK_MSG(cnt_i == cnt && sum_i == sum, "cp=%d rank %d: forward-only loss %.12g vs training model's %.12g", cp,
              c, sum_i, sum);
    lcx_model_free(mi);

    /* forward + backward, twice: bit-identical; then the CP sum of the gradients against the reference */
    double s1 = 0, s2 = 0;
    int64_t c1 = 0, c2 = 0;
    float dscale = (float)(1.0 / (double)ref_cnt);
    CHECK_OK(lcx_model_zero_grads(m));
    CHECK_OK(lcx_model_forward_backward(m, &lb, dscale, &s1, &c1));
    grads_of(m, g1);
    CHECK_OK(lcx_model_zero_grads(m));
    CHECK_OK(lcx_model_forward_backward(m, &lb, dscale, &s2, &c2));
    grads_of(m, g2);
    CHECK_MSG(s1 == s2 && c1 == c2 && memcmp(g1, g2, sizeof(float) * ng) == 0,
              "cp=%d rank %d: a rerun is not bit-identical", cp, c);
    CHECK_MSG(c1 == ref_cnt && fabs(s1 - ref_sum) <= 1e-5 * fabs(ref_sum),
              "cp=%d rank %d forward_backward: loss %.9g / %lld vs %.9g / %lld", cp, c, s1, (long long)c1, ref_sum,
              (long long)ref_cnt);

    /* recompute: the same local gradients, bit for bit */
    lcx_model *mr = make_model(T, g, 1, LCX_ACT_RECOMPUTE);
    CHECK_OK(lcx_model_zero_grads(mr));
    CHECK_OK(lcx_model_forward_backward(mr, &lb, dscale, NULL, NULL));
    grads_of(mr, g3);
    CHECK_MSG(memcmp(g1, g3, sizeof(float) * ng) == 0, "cp=%d rank %d: recompute gradients differ from keep", cp, c);
    lcx_model_free(mr);

    CHECK_OK(lcx_comm_all_reduce(g, NULL, g1, g1, (int64_t)ng, LCX_F32, LCX_COMM_SUM));
    const lcx_param_table *tab = lcx_model_params(m);
    size_t off = 0;
    for (size_t i = 0; i < tab->n; i++) {
        int64_t n = (int64_t)tab->params[i].numel;
        double e = scaled_err(g1 + off, ref_g + off, n);
        CHECK_MSG(e <= 1e-5, "cp=%d rank %d: gradient of %s differs by %.2e of its largest value", cp, c,
                  tab->params[i].name, e);
        worst_grad = worst_of(worst_grad, e);
        off += (size_t)n;
    }

    /* bf16 activations (K|V travel as bf16, dK/dV as f32): the CP sum against the single-rank bf16 model, within
     * bf16 rounding of the partial outputs (2e-2 of the largest value) */
    lcx_model *rb = make_model_dt(TG, NULL, 1, LCX_ACT_KEEP, LCX_BF16), *mb = make_model_dt(T, g, 1, LCX_ACT_KEEP, LCX_BF16);
    double sb = 0, sr = 0;
    CHECK_OK(lcx_model_zero_grads(rb));
    CHECK_OK(lcx_model_forward_backward(rb, &gb, dscale, &sr, NULL));
    grads_of(rb, g2);
    CHECK_OK(lcx_model_zero_grads(mb));
    CHECK_OK(lcx_model_forward_backward(mb, &lb, dscale, &sb, NULL));
    grads_of(mb, g3);
    CHECK_OK(lcx_comm_all_reduce(g, NULL, g3, g3, (int64_t)ng, LCX_F32, LCX_COMM_SUM));
    double eb = scaled_err(g3, g2, (int64_t)ng);
    /* and no further from the f32 gradients than the single-rank bf16 model is (twice its error at most) */
    double e_cp = scaled_err(g3, ref_g, (int64_t)ng), e_one = scaled_err(g2, ref_g, (int64_t)ng);
    CHECK_MSG(fabs(sb - sr) <= 1e-2 * fabs(sr) && eb <= 2e-2 && e_cp <= 2 * e_one,
              "cp=%d rank %d bf16: loss %.6g vs %.6g, gradients %.2e; vs f32: CP %.2e, one rank %.2e", cp, c, sb, sr,
              eb, e_cp, e_one);
    worst_bf16 = worst_of(worst_bf16, eb), worst_bf16_cp = worst_of(worst_bf16_cp, e_cp);
    worst_bf16_one = worst_of(worst_bf16_one, e_one);
    lcx_model_free(rb);
    lcx_model_free(mb);

    /* errors */
    lcx_batch bad = lb;
    bad.targets = NULL;
    CHECK_FAILS(lcx_model_forward(m, &bad, NULL, NULL, NULL), LCX_ERR_INVALID, "must carry its targets");
    bad = lb, bad.n_seq = 1, bad.seq_len = S - 1;
    CHECK_FAILS(lcx_model_forward(m, &bad, NULL, NULL, NULL), LCX_ERR_INVALID, "must be even");
    int32_t shifted[TG];
    memcpy(shifted, lpos, sizeof shifted);
    shifted[S - 1] += 1; /* the last token of the row's second chunk moved */
    bad = lb, bad.positions = shifted;
    CHECK_FAILS(lcx_model_forward(m, &bad, NULL, NULL, NULL), LCX_ERR_INVALID, "holds position");

    lcx_model_free(m);
    lcx_model_free(ref);
    free(ref_logits); free(logits); free(want); free(ref_g); free(g1); free(g2); free(g3);
    lcx_comm_groups_free(&gs);
}

/* Document masks under CP: the global rows hold documents that start inside chunks of other ranks and cross
 * chunk boundaries (one of a single token); each rank permutes the document starts like any per-token tensor
 * (lcx_cp_scatter_rows). The loss and the CP sum of the gradients equal the single-rank masked model's, recompute
 * equals keep bit for bit, and the mask changes the loss (the check has power). */
static double worst_doc_loss = 0, worst_doc_grad = 0;

static void check_cp_docs(lcx_comm *world, int cp) {
    lcx_comm_groups gs;
    lcx_comm *g = cp_group(world, cp, &gs);
    const int c = g->rank;
    const int64_t S = LG / cp;
    static const int starts[NSEQ][4] = {{0, 5, 6, 19}, {0, 9, 25, LG}}; /* columns where documents begin */
    int32_t ids[TG], tgt[TG], pos[TG], doc[TG];
    lcx_model *ref = make_model(TG, NULL, 1, LCX_ACT_KEEP);
    const int64_t V = lcx_model_config_of(ref)->vocab_size;
    uint32_t h = 999;
    for (int64_t t = 0; t < TG; t++) h = h * 1103515245u + 12345u, ids[t] = (int32_t)((h >> 8) % (uint32_t)V);
    for (int64_t r = 0; r < NSEQ; r++)
        for (int64_t i = 0, d = 0; i < LG; i++) {
            int64_t t = r * LG + i;
            while (d + 1 < 4 && starts[r][d + 1] <= i) d++;
            tgt[t] = i + 1 < LG ? ids[t + 1] : LCX_IGNORE_INDEX;
            pos[t] = (int32_t)(i + (r == 1 ? 5 : 0));
            doc[t] = (int32_t)(starts[r][d] + (r == 1 ? 5 : 0));
        }
    lcx_batch gb = {.n_seq = NSEQ, .seq_len = LG, .ids = ids, .targets = tgt, .positions = pos, .doc_start = doc};
    double ref_sum = 0, nomask_sum = 0;
    int64_t ref_cnt = 0;
    size_t ng = n_grads(ref);
    float *ref_g = malloc(sizeof(float) * ng), *g1 = malloc(sizeof(float) * ng), *g2 = malloc(sizeof(float) * ng);
    CHECK_OK(lcx_model_zero_grads(ref));
    CHECK_OK(lcx_model_forward_backward(ref, &gb, 1.0f / (float)(TG - NSEQ), &ref_sum, &ref_cnt));
    grads_of(ref, ref_g);
    lcx_batch nomask = gb;
    nomask.doc_start = NULL;
    CHECK_OK(lcx_model_forward(ref, &nomask, NULL, &nomask_sum, NULL));
    CHECK_MSG(fabs(nomask_sum - ref_sum) > 1e-3 * fabs(ref_sum), "the document mask does not change the loss");

    int32_t lid[TG], ltg[TG], lpos[TG], ldoc[TG];
    for (int64_t r = 0; r < NSEQ; r++) {
        CHECK_OK(lcx_cp_local_batch(LG, cp, c, ids + r * LG, tgt + r * LG, pos + r * LG, lid + r * S, ltg + r * S,
                                    lpos + r * S));
        CHECK_OK(lcx_cp_scatter_rows(LG, cp, c, doc + r * LG, ldoc + r * S, sizeof(int32_t)));
    }
    lcx_batch lb = {.n_seq = NSEQ, .seq_len = S, .ids = lid, .targets = ltg, .positions = lpos, .doc_start = ldoc};
    lcx_model *m = make_model(NSEQ * S, g, 1, LCX_ACT_KEEP), *mr = make_model(NSEQ * S, g, 1, LCX_ACT_RECOMPUTE);
    double sum = 0;
    int64_t cnt = 0;
    CHECK_OK(lcx_model_zero_grads(m));
    CHECK_OK(lcx_model_forward_backward(m, &lb, 1.0f / (float)(TG - NSEQ), &sum, &cnt));
    grads_of(m, g1);
    CHECK_OK(lcx_model_zero_grads(mr));
    CHECK_OK(lcx_model_forward_backward(mr, &lb, 1.0f / (float)(TG - NSEQ), NULL, NULL));
    grads_of(mr, g2);
    CHECK_MSG(memcmp(g1, g2, sizeof(float) * ng) == 0, "cp=%d rank %d documents: recompute differs from keep", cp, c);
    CHECK_OK(lcx_comm_all_reduce(g, NULL, g1, g1, (int64_t)ng, LCX_F32, LCX_COMM_SUM));
    double el = fabs(sum - ref_sum) / fabs(ref_sum), eg = scaled_err(g1, ref_g, (int64_t)ng);
    CHECK_MSG(cnt == ref_cnt && el <= 1e-5 && eg <= 1e-5,
              "cp=%d rank %d documents: loss %.9g vs %.9g (%.2e), count %lld vs %lld, gradients %.2e", cp, c, sum,
              ref_sum, el, (long long)cnt, (long long)ref_cnt, eg);
    worst_doc_loss = worst_of(worst_doc_loss, el), worst_doc_grad = worst_of(worst_doc_grad, eg);
    lcx_model_free(m);
    lcx_model_free(mr);
    lcx_model_free(ref);
    free(ref_g), free(g1), free(g2);
    lcx_comm_groups_free(&gs);
}

int main(void) {
    lcx_comm *world = NULL;
    lcx_status st = lcx_comm_world_init(&world);
    if (st != LCX_OK) {
        fprintf(stderr, "test_model_cp_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_model_cp_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    check_cp1();
    check_cp(world, 2);
    check_cp(world, 4);
    check_cp_docs(world, 2);
    check_cp_docs(world, 4);
    if (world->rank == 0)
        printf("document masks, CP 2 and 4 vs one rank: worst loss %.2e (rel), gradients %.2e\n", worst_doc_loss,
               worst_doc_grad);
    if (world->rank == 0)
        printf("CP 2 and 4 vs one rank: worst loss %.2e (rel), logits %.2e, gradients %.2e (of the largest); "
               "bf16 activations: gradients %.2e vs one rank's bf16, %.2e vs f32 (one rank's bf16: %.2e)\n",
               worst_loss, worst_logits, worst_grad, worst_bf16, worst_bf16_cp, worst_bf16_one);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_model_cp_mpi");
}
