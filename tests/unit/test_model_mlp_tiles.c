/* The tiled MLP of training models (opts.mlp_chunk = C < max_tokens; docs/model.md "Tiled MLP"): the MLP runs
 * (forward, and backward with a recompute layer's intermediates recomputed tile by tile) in row tiles of C, so
 * the recompute scratch's gate/up/act and the backward's dgate/dup/dact are [C, F] instead of [T, F].
 * - loss and every gradient against the untiled model (keep policy) on llama_gqa and qwen3, f32 and bf16
 *   activations, tile sizes 1, 5, 7, 16, 47 of 48 tokens (all but 16 leave a ragged last tile): the GEMMs then
 *   have other shapes and OpenBLAS / the CPU backend's thread split sum in another order, so equal to float
 *   tolerance, not bits. The measured errors and the bounds are printed (llm.c style);
 * - with one tile size, keep, recompute, recompute+offload and mixed per-layer policies give bit-identical
 *   gradients and losses (the same calls in the same order; the recompute is the same kernels);
 * - mlp_chunk >= max_tokens, or a batch no longer than the tile, is the untiled model bit for bit;
 * - the activation bytes (lcx_model_memory_of().acts) shrink by exactly the expected bytes, computed here:
 *   keep saves the backward scratch 3 x ([T, F] - [C, F]), recompute also the recompute scratch's gate/up/act
 *   (6 x in all), each tensor rounded up to 64 bytes. */
#include <string.h>

#include "model_fixture.h"
#include "test_util.h"
#include "worst_of.h"

#define NSEQ 2
#define SEQ 24
#define TT (NSEQ * SEQ)

/* Bounds (the measured values are printed by every run; worst measured here: f32 loss 2e-8 and gradients 5.6e-7,
 * bf16 loss 0 and gradients 1.9e-3): loss relative, gradients ||g - g0|| / ||g0||. f32: the reordered sums give
 * ~5e-7; bf16 activations round every act tensor to 8 bits of mantissa, so one reordered
 * sum that crosses a rounding boundary moves a value by 2^-8 relative and that propagates. */
#define LOSS_TOL_F32 1e-6
#define GRAD_TOL_F32 2e-6
#define LOSS_TOL_BF16 1e-3
#define GRAD_TOL_BF16 1e-2

static lcx_model *open_fx(const char *name, lcx_dtype adt, int64_t tile, lcx_act_policy pol,
                          const lcx_act_policy *layer_pol) {
    return fx_open(name, (lcx_model_opts){.max_tokens = TT, .loss_chunk = 7, .training = 1, .policy = pol,
                                          .layer_policy = layer_pol, .act_dtype = adt, .mlp_chunk = tile});
}

static size_t r64(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* Two rows of SEQ tokens: the fixture's inputs, then a deterministic walk over the vocabulary. */
static void make_batch(const char *name, int64_t V, int32_t *ids) {
    int32_t in[64];
    int64_t n = fx_inputs(name, in, 64);
    CHECK(n >= 8);
    uint32_t s = 12345;
    for (int64_t t = 0; t < TT; t++) {
        s = s * 1103515245u + 12345u;
        ids[t] = t < n ? in[t] : (int32_t)((s >> 8) % (uint32_t)V);
    }
}

static void test_fixture(const char *name, lcx_dtype adt) {
    const char *dtn = adt == LCX_BF16 ? "bf16" : "f32";
    const double loss_tol = adt == LCX_BF16 ? LOSS_TOL_BF16 : LOSS_TOL_F32;
    const double grad_tol = adt == LCX_BF16 ? GRAD_TOL_BF16 : GRAD_TOL_F32;
    lcx_model *ref = open_fx(name, adt, 0, LCX_ACT_KEEP, NULL);
    lcx_model *ref_rec = open_fx(name, adt, 0, LCX_ACT_RECOMPUTE, NULL);
    if (!ref || !ref_rec) goto done;
    const lcx_model_config *cfg = lcx_model_config_of(ref);
    int32_t ids[TT];
    make_batch(name, cfg->vocab_size, ids);
    lcx_batch b = {.n_seq = NSEQ, .seq_len = SEQ, .ids = ids};
    size_t n0;
    double l0;
    float *g0 = fx_grads(ref, &b, 1, &n0, &l0);
    double nz = 0;
    for (size_t i = 0; i < n0; i++) nz += fabs(g0[i]);
    CHECK(nz > 0);
    const size_t es = adt == LCX_BF16 ? 2 : 4, F = (size_t)cfg->intermediate_size;
    const size_t acts_keep = lcx_model_memory_of(ref).acts, acts_rec = lcx_model_memory_of(ref_rec).acts;

    const int64_t tiles[] = {1, 5, 7, 16, 47};
    double worst_l = 0, worst_g = 0;
    for (size_t k = 0; k < sizeof tiles / sizeof tiles[0]; k++) {
        const int64_t C = tiles[k];
        const lcx_act_policy mixed_pol[2] = {LCX_ACT_RECOMPUTE, LCX_ACT_KEEP};
        lcx_model *mk = open_fx(name, adt, C, LCX_ACT_KEEP, NULL);
        lcx_model *mr = open_fx(name, adt, C, LCX_ACT_RECOMPUTE, NULL);
        lcx_model *mo = open_fx(name, adt, C, LCX_ACT_RECOMPUTE_OFFLOAD, NULL);
        lcx_model *mm = open_fx(name, adt, C, LCX_ACT_KEEP, mixed_pol);
        if (mk && mr && mo && mm) {
            size_t n1, n2, n3, n4;
            double l1, l2, l3, l4;
            float *g1 = fx_grads(mk, &b, 1, &n1, &l1), *g2 = fx_grads(mr, &b, 1, &n2, &l2);
            float *g3 = fx_grads(mo, &b, 1, &n3, &l3), *g4 = fx_grads(mm, &b, 1, &n4, &l4);
            CHECK(n1 == n0 && n2 == n0 && n3 == n0 && n4 == n0);
            /* one tile size: every policy makes the same calls */
            CHECK_MSG(memcmp(g1, g2, n0 * 4) == 0 && l1 == l2, "%s %s tile %lld: recompute differs from keep", name,
                      dtn, (long long)C);
            CHECK_MSG(memcmp(g1, g3, n0 * 4) == 0 && l1 == l3, "%s %s tile %lld: recompute+offload differs from keep",
                      name, dtn, (long long)C);
            CHECK_MSG(memcmp(g1, g4, n0 * 4) == 0 && l1 == l4, "%s %s tile %lld: mixed policies differ from keep",
                      name, dtn, (long long)C);
            /* against the untiled model */
            double el = fabs(l1 - l0) / fabs(l0), eg = rel_norm_err(g1, g0, n0), em = rel_max_err(g1, g0, n0);
            CHECK_MSG(el <= loss_tol, "%s %s tile %lld: loss %.10f vs untiled %.10f (rel %.3g > %.3g)", name, dtn,
                      (long long)C, l1, l0, el, loss_tol);
            CHECK_MSG(eg <= grad_tol, "%s %s tile %lld: gradients rel error %.3g > %.3g", name, dtn, (long long)C, eg,
                      grad_tol);
            worst_l = worst_of(worst_l, el);
            worst_g = worst_of(worst_g, eg);
            /* the forward of a tiled training model too */
            double lf = 0;
            int64_t cnt = 0;
            CHECK_OK(lcx_model_forward(mr, &b, NULL, &lf, &cnt));
            CHECK_MSG(fabs(lf / (double)cnt - l0) <= loss_tol * fabs(l0), "%s %s tile %lld: forward loss %.10f",
                      name, dtn, (long long)C, lf / (double)cnt);
            /* memory: the [T, F] tensors that became [C, F] */
            const size_t d = r64((size_t)TT * F * es) - r64((size_t)C * F * es);
            const size_t ak = lcx_model_memory_of(mk).acts, ar = lcx_model_memory_of(mr).acts;
            CHECK_MSG(ak + 3 * d == acts_keep, "%s %s tile %lld: keep acts %zu, untiled %zu, expected saving %zu",
                      name, dtn, (long long)C, ak, acts_keep, 3 * d);
            CHECK_MSG(ar + 6 * d == acts_rec, "%s %s tile %lld: recompute acts %zu, untiled %zu, expected saving %zu",
                      name, dtn, (long long)C, ar, acts_rec, 6 * d);
            printf("%s %s tile %2lld: loss rel err %.2e (bound %.0e), grads rel err %.2e (bound %.0e, max elem "
                   "%.2e of the largest); acts keep %zu -> %zu, recompute %zu -> %zu bytes\n",
                   name, dtn, (long long)C, el, loss_tol, eg, grad_tol, em, acts_keep, ak, acts_rec, ar);
            free(g1), free(g2), free(g3), free(g4);
        }
        lcx_model_free(mk), lcx_model_free(mr), lcx_model_free(mo), lcx_model_free(mm);
    }
    printf("%s %s: worst loss rel err %.2e, worst grads rel err %.2e\n", name, dtn, worst_l, worst_g);

    /* a tile no shorter than the capacity is no tiling; a batch no longer than the tile is one tile: bits */
    {
        lcx_model *mt = open_fx(name, adt, TT, LCX_ACT_RECOMPUTE, NULL);
        lcx_model *m16 = open_fx(name, adt, 16, LCX_ACT_RECOMPUTE, NULL);
        if (mt && m16) {
            size_t n1, n2, n3;
            double l1, l2, l3;
            float *g1 = fx_grads(mt, &b, 1, &n1, &l1);
            CHECK_MSG(memcmp(g1, g0, n0 * 4) == 0 && l1 == l0, "%s %s: mlp_chunk = max_tokens is not untiled", name,
                      dtn);
            CHECK(lcx_model_memory_of(mt).acts == acts_rec);
            lcx_batch b16 = {.n_seq = 1, .seq_len = 16, .ids = ids};
            float *g2 = fx_grads(ref, &b16, 1, &n2, &l2), *g3 = fx_grads(m16, &b16, 1, &n3, &l3);
            CHECK_MSG(memcmp(g2, g3, n0 * 4) == 0 && l2 == l3, "%s %s: one tile differs from untiled", name, dtn);
            free(g1), free(g2), free(g3);
        }
        lcx_model_free(mt), lcx_model_free(m16);
    }
    free(g0);
done:
    lcx_model_free(ref), lcx_model_free(ref_rec);
}

int main(void) {
    const char *names[] = {"llama_gqa", "qwen3"};
    for (int i = 0; i < 2; i++) {
        test_fixture(names[i], LCX_F32);
        test_fixture(names[i], LCX_BF16);
    }
    return test_summary("test_model_mlp_tiles");
}
