/* Document masking in the model (lcx_batch.doc_start), against running each document on its own:
 * - two packed rows of 20 tokens holding five documents (one of a single token, one cut by the row's start)
 *   give the loss and every gradient of the five documents as separate micro-batches at the same positions
 *   with the same targets (float32: another summation order, loss 1e-6 relative, gradients 1e-5 of the largest);
 *   without the mask the packed rows differ (the check has power);
 * - the same in bf16 activations (the same values rounded alike: loss 1e-4, gradients 1e-3);
 * - keep, recompute, offload and recompute+offload give bit-identical gradients with the mask;
 * - errors: a document start after its token's position or negative, a forward-only model. */
#include <string.h>

#include "model_fixture.h"
#include "test_util.h"
#include "worst_of.h"

enum { NSEQ = 2, SEQ = 20, T = NSEQ * SEQ, NDOC = 5 };

/* the documents: row, first and last+1 column */
static const struct { int row, a, b; } DOCS[NDOC] = {{0, 0, 7}, {0, 7, 8}, {0, 8, 20}, {1, 0, 3}, {1, 3, 20}};

static lcx_model *open_model(const char *name, lcx_act_policy pol, lcx_dtype adt, int training) {
    return fx_open(name, (lcx_model_opts){.max_tokens = T, .loss_chunk = 7, .training = training, .policy = pol,
                                          .act_dtype = adt});
}

/* max |got - want| / max |want| */
static double scaled_err(const float *got, const float *want, size_t n) {
    double e = 0, mx = 1e-30;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        e = worst_of(e, d);
    }
    return e / mx;
}

typedef struct inputs {
    int32_t ids[T], tgt[T], doc[T], pos[T];
    lcx_batch packed, docs[NDOC];
} inputs;

static void make_inputs(inputs *in, int64_t V) {
    uint32_t h = 777;
    for (int t = 0; t < T; t++) h = h * 1103515245u + 12345u, in->ids[t] = (int32_t)((h >> 8) % (uint32_t)V);
    for (int t = 0; t < T; t++) { /* HF shift inside a row, and positions 0 .. SEQ-1 per row */
        in->tgt[t] = t % SEQ + 1 < SEQ ? in->ids[t + 1] : LCX_IGNORE_INDEX;
        in->pos[t] = t % SEQ;
    }
    for (int d = 0; d < NDOC; d++) {
        int t0 = DOCS[d].row * SEQ + DOCS[d].a;
        for (int j = DOCS[d].a; j < DOCS[d].b; j++) in->doc[DOCS[d].row * SEQ + j] = DOCS[d].a;
        in->docs[d] = (lcx_batch){.n_seq = 1, .seq_len = DOCS[d].b - DOCS[d].a, .ids = in->ids + t0,
                                  .targets = in->tgt + t0, .positions = in->pos + t0};
    }
    in->packed = (lcx_batch){.n_seq = NSEQ, .seq_len = SEQ, .ids = in->ids, .targets = in->tgt, .doc_start = in->doc};
}

static void check_packed_vs_docs(const char *name, lcx_dtype adt, double tol_loss, double tol_grad) {
    lcx_model *m = open_model(name, LCX_ACT_KEEP, adt, 1);
    if (!m) return;
    inputs in;
    make_inputs(&in, lcx_model_config_of(m)->vocab_size);
    size_t n1 = 0, n2 = 0, n3 = 0;
    double l1 = 0, l2 = 0, l3 = 0;
    float *gp = fx_grads(m, &in.packed, 1, &n1, &l1), *gd = fx_grads(m, in.docs, NDOC, &n2, &l2);
    lcx_batch nomask = in.packed;
    nomask.doc_start = NULL;
    float *gn = fx_grads(m, &nomask, 1, &n3, &l3);
    CHECK(n1 == n2 && n1 == n3);
    double el = fabs(l1 - l2) / fabs(l2), eg = scaled_err(gp, gd, n1);
    double pl = fabs(l3 - l2) / fabs(l2), pg = scaled_err(gn, gd, n1);
    CHECK_MSG(el <= tol_loss && eg <= tol_grad, "%s %s: packed with document mask vs documents alone: loss %.9g vs "
              "%.9g (%.2e), gradients %.2e", name, lcx_dtype_name(adt), l1, l2, el, eg);
    CHECK_MSG(pg > 0.1 && pl > 1e-3, "%s %s: without the mask the gradients are only %.2e away", name,
              lcx_dtype_name(adt), pg);
    printf("%s %s: packed + document mask vs each document alone: loss %.2e, gradients %.2e (without the mask: "
           "loss %.2e, gradients %.2e)\n", name, lcx_dtype_name(adt), el, eg, pl, pg);
    free(gp), free(gd), free(gn);
    lcx_model_free(m);
}

static void check_policies(const char *name) {
    static const lcx_act_policy pols[] = {LCX_ACT_KEEP, LCX_ACT_RECOMPUTE, LCX_ACT_OFFLOAD,
                                          LCX_ACT_RECOMPUTE_OFFLOAD};
    float *g0 = NULL;
    size_t n0 = 0;
    double l0 = 0;
    for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
        lcx_model *m = open_model(name, pols[p], LCX_F32, 1);
        if (!m) continue;
        inputs in;
        make_inputs(&in, lcx_model_config_of(m)->vocab_size);
        size_t n = 0;
        double l = 0;
        float *g = fx_grads(m, &in.packed, 1, &n, &l);
        if (!g0) {
            g0 = g, n0 = n, l0 = l;
        } else {
            CHECK_MSG(n == n0 && l == l0 && memcmp(g, g0, n * sizeof(float)) == 0,
                      "%s: policy %d with a document mask differs from keep", name, (int)pols[p]);
            free(g);
        }
        lcx_model_free(m);
    }
    printf("%s: keep == recompute == offload == recompute+offload with a document mask, bit for bit\n", name);
    free(g0);
}

static void check_errors(const char *name) {
    lcx_model *m = open_model(name, LCX_ACT_KEEP, LCX_F32, 1), *fo = open_model(name, LCX_ACT_KEEP, LCX_F32, 0);
    if (!m || !fo) goto done;
    inputs in;
    make_inputs(&in, lcx_model_config_of(m)->vocab_size);
    CHECK_FAILS(lcx_model_forward(fo, &in.packed, NULL, NULL, NULL), LCX_ERR_INVALID, "built for training");
    in.doc[25] = 6; /* row 1, position 5 */
    CHECK_FAILS(lcx_model_forward(m, &in.packed, NULL, NULL, NULL), LCX_ERR_INVALID, "document start 6");
    in.doc[25] = -1;
    CHECK_FAILS(lcx_model_forward(m, &in.packed, NULL, NULL, NULL), LCX_ERR_INVALID, "document start -1");
done:
    lcx_model_free(m);
    lcx_model_free(fo);
}

int main(void) {
    static const char *names[] = {"llama_gqa", "qwen2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        check_packed_vs_docs(names[i], LCX_F32, 1e-6, 1e-5);
        check_packed_vs_docs(names[i], LCX_BF16, 1e-4, 1e-3);
        check_policies(names[i]);
        check_errors(names[i]);
    }
    return test_summary("test_model_docmask");
}
