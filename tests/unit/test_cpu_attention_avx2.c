/* The AVX2 + FMA pieces of the CPU attention (kernels/cpu/cpu_attention_avx2.c) one by one, against plain
 * references written here: the key transpose and its zero padding exactly, the score and P V products against
 * double sums over odd row counts (the 6-row blocks' remainders), key counts (16-column blocks) and head dims
 * (16- and 8-column blocks) with row strides wider than the rows, and the backward's transposed product P^T V.
 * Where the CPU has AVX-512 the products run in both register widths, each against the references, and the two
 * must agree bit for bit. test_ops_attention checks the whole forward and backward. Exit 77 where the CPU or the
 * build has no AVX2/FMA path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_attention_common.h"
#include "test_util.h"
#include "worst_of.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static void test_transpose(int64_t nk, int64_t hd, int64_t ldk) {
    int64_t ldkt = ((nk + 15) & ~(int64_t)15) + 16;
    float *k = malloc(sizeof(float) * (size_t)(nk * ldk + 1)), *kt = malloc(sizeof(float) * (size_t)(hd * ldkt));
    for (int64_t i = 0; i < nk * ldk; i++) k[i] = urand();
    for (int64_t i = 0; i < hd * ldkt; i++) kt[i] = NAN;
    lcx_cpu_att_transpose_keys(k, ldk, nk, hd, kt, ldkt);
    int bad = 0;
    for (int64_t d = 0; d < hd; d++) {
        for (int64_t j = 0; j < nk; j++) bad += kt[d * ldkt + j] != k[j * ldk + d];
        for (int64_t j = nk; j < ((nk + 15) & ~(int64_t)15); j++) bad += kt[d * ldkt + j] != 0.0f;
    }
    CHECK_MSG(bad == 0, "transpose nk %lld hd %lld: %d wrong", (long long)nk, (long long)hd, bad);
    free(k);
    free(kt);
}

/* scores then P V on random data, each against a double reference; returns the worst relative error */
static double test_products(int64_t nr, int64_t nk, int64_t hd) {
    const int64_t ldq = hd + 8, ldk = hd + 24, nkp = (nk + 15) & ~(int64_t)15, lds = nkp + 16;
    float *q = malloc(sizeof(float) * (size_t)(nr * ldq)), *k = malloc(sizeof(float) * (size_t)(nk * ldk));
    float *kt = malloc(sizeof(float) * (size_t)(hd * nkp)), *s = malloc(sizeof(float) * (size_t)(nr * lds));
    float *o = malloc(sizeof(float) * (size_t)(nr * ldq));
    for (int64_t i = 0; i < nr * ldq; i++) q[i] = urand();
    for (int64_t i = 0; i < nk * ldk; i++) k[i] = urand();
    for (int64_t i = 0; i < nr * ldq; i++) o[i] = urand();
    const float scale = 0.37f;
    lcx_cpu_att_transpose_keys(k, ldk, nk, hd, kt, nkp);
    lcx_cpu_att_scores(q, ldq, nr, kt, nkp, nk, hd, scale, s, lds);
    double worst = 0;
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < nk; j++) {
            double want = 0, mag = 0;
            for (int64_t d = 0; d < hd; d++) {
                want += (double)q[r * ldq + d] * k[j * ldk + d];
                mag += fabs((double)q[r * ldq + d] * k[j * ldk + d]);
            }
            double e = fabs(s[r * lds + j] - scale * want) / (scale * mag + 1e-30);
            worst = worst_of(worst, e);
        }
    /* o += s V, with s as probabilities-like weights and k's rows as V */
    float *o0 = malloc(sizeof(float) * (size_t)(nr * ldq));
    memcpy(o0, o, sizeof(float) * (size_t)(nr * ldq));
    lcx_cpu_att_pv(s, lds, nr, k, ldk, nk, hd, o, ldq);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t c = 0; c < hd; c++) {
            double want = o0[r * ldq + c], mag = fabs(want);
            for (int64_t j = 0; j < nk; j++) {
                want += (double)s[r * lds + j] * k[j * ldk + c];
                mag += fabs((double)s[r * lds + j] * k[j * ldk + c]);
            }
            double e = fabs(o[r * ldq + c] - want) / (mag + 1e-30);
            worst = worst_of(worst, e);
        }
        for (int64_t c = hd; c < ldq; c++) /* the stride's padding is not written */
            CHECK_MSG(o[r * ldq + c] == o0[r * ldq + c], "pv wrote past head_dim (nr %lld hd %lld)", (long long)nr,
                      (long long)hd);
    }
    free(q), free(k), free(kt), free(s), free(o), free(o0);
    return worst;
}

/* o[j] += sum_r p[r][j] v[r] (the backward's P^T dO and dS^T Q) against double sums */
static double test_ptv(int64_t nr, int64_t nk, int64_t hd) {
    const int64_t ldp = nk + 5, ldv = hd + 8, ldo = hd + 16;
    float *p = malloc(sizeof(float) * (size_t)(nr * ldp)), *v = malloc(sizeof(float) * (size_t)(nr * ldv));
    float *o = malloc(sizeof(float) * (size_t)(nk * ldo)), *o0 = malloc(sizeof(float) * (size_t)(nk * ldo));
    for (int64_t i = 0; i < nr * ldp; i++) p[i] = urand();
    for (int64_t i = 0; i < nr * ldv; i++) v[i] = urand();
    for (int64_t i = 0; i < nk * ldo; i++) o0[i] = o[i] = urand();
    lcx_cpu_att_ptv(p, ldp, nr, nk, v, ldv, hd, o, ldo);
    double worst = 0;
    for (int64_t j = 0; j < nk; j++) {
        for (int64_t c = 0; c < hd; c++) {
            double want = o0[j * ldo + c], mag = fabs(want);
            for (int64_t r = 0; r < nr; r++) {
                want += (double)p[r * ldp + j] * v[r * ldv + c];
                mag += fabs((double)p[r * ldp + j] * v[r * ldv + c]);
            }
            double e = fabs(o[j * ldo + c] - want) / (mag + 1e-30);
            worst = worst_of(worst, e);
        }
        for (int64_t c = hd; c < ldo; c++)
            CHECK_MSG(o[j * ldo + c] == o0[j * ldo + c], "ptv wrote past head_dim (nk %lld hd %lld)", (long long)nk,
                      (long long)hd);
    }
    free(p), free(v), free(o), free(o0);
    return worst;
}

/* The three products in AVX2 and in AVX-512 registers on the same inputs: the same bits. */
static int same_bits(int64_t nr, int64_t nk, int64_t hd) {
    const int64_t ldq = hd + 8, nkp = (nk + 15) & ~(int64_t)15, lds = nkp + 16, ldo = hd + 16;
    const size_t nq = (size_t)(nr * ldq), nkk = (size_t)(nk * ldq), ns = (size_t)(nr * lds), no = (size_t)(nk * ldo);
    float *q = malloc(sizeof(float) * nq), *k = malloc(sizeof(float) * nkk), *kt = malloc(sizeof(float) * hd * nkp);
    float *s[2], *o[2], *t[2];
    for (int w = 0; w < 2; w++) {
        s[w] = malloc(sizeof(float) * ns), o[w] = malloc(sizeof(float) * nq), t[w] = malloc(sizeof(float) * no);
    }
    for (size_t i = 0; i < nq; i++) q[i] = urand(), o[0][i] = o[1][i] = urand();
    for (size_t i = 0; i < nkk; i++) k[i] = urand();
    for (size_t i = 0; i < no; i++) t[0][i] = t[1][i] = urand();
    lcx_cpu_att_transpose_keys(k, ldq, nk, hd, kt, nkp);
    for (int w = 0; w < 2; w++) {
        lcx_cpu_att_set_avx512(w);
        memset(s[w], 0, sizeof(float) * ns);
        lcx_cpu_att_scores(q, ldq, nr, kt, nkp, nk, hd, 0.125f + 0.01f * (float)nr, s[w], lds);
        lcx_cpu_att_pv(s[w], lds, nr, k, ldq, nk, hd, o[w], ldq);
        lcx_cpu_att_ptv(s[w], lds, nr, nk, q, ldq, hd, t[w], ldo);
    }
    int same = memcmp(s[0], s[1], sizeof(float) * ns) == 0 && memcmp(o[0], o[1], sizeof(float) * nq) == 0 &&
               memcmp(t[0], t[1], sizeof(float) * no) == 0;
    free(q), free(k), free(kt);
    for (int w = 0; w < 2; w++) free(s[w]), free(o[w]), free(t[w]);
    return same;
}

int main(void) {
    if (!lcx_cpu_att_avx2_usable(8)) {
        printf("test_cpu_attention_avx2: no AVX2/FMA path on this CPU or build: skipped\n");
        return 77;
    }
    CHECK(!lcx_cpu_att_avx2_usable(12)); /* head_dim % 8 != 0 keeps OpenBLAS */
    static const int64_t nks[] = {1, 7, 8, 9, 16, 17, 40, 512};
    static const int64_t hds[] = {8, 16, 24, 64, 72, 128};
    for (size_t a = 0; a < sizeof nks / sizeof nks[0]; a++)
        for (size_t b = 0; b < sizeof hds / sizeof hds[0]; b++) test_transpose(nks[a], hds[b], hds[b] * 3);
    const int widths = lcx_cpu_att_set_avx512(1) ? 2 : 1;
    if (widths == 2) {
        int differ = 0;
        for (int64_t nr = 1; nr <= 13; nr++)
            for (size_t a = 0; a < sizeof nks / sizeof nks[0]; a++)
                for (size_t b = 0; b < sizeof hds / sizeof hds[0]; b++) differ += !same_bits(nr, nks[a], hds[b]);
        CHECK_MSG(differ == 0, "AVX-512 and AVX2 products differ in %d shapes", differ);
        printf("AVX-512 and AVX2 products: the same bits over %zu shapes\n",
               (size_t)13 * (sizeof nks / sizeof nks[0]) * (sizeof hds / sizeof hds[0]));
    } else {
        printf("no AVX-512 on this CPU: the AVX2 products only\n");
    }
    for (int w = 0; w < widths; w++) {
        lcx_cpu_att_set_avx512(w);
        double worst = 0;
        for (int64_t nr = 1; nr <= 13; nr++)
            for (size_t a = 0; a < 7; a++)
                for (size_t b = 0; b < sizeof hds / sizeof hds[0]; b++) {
                    double e = test_products(nr, nks[a], hds[b]);
                    worst = worst_of(worst, e);
                }
        printf("%s scores and P V vs double: worst error %.3e of the sum of |terms|\n", w ? "AVX-512" : "AVX2", worst);
        CHECK_MSG(worst <= 1e-6, "products: error %.3e", worst);
        worst = 0;
        for (int64_t nr = 1; nr <= 20; nr += 3)
            for (int64_t nk = 1; nk <= 13; nk++)
                for (size_t b = 0; b < sizeof hds / sizeof hds[0]; b++) {
                    double e = test_ptv(nr, nk, hds[b]);
                    worst = worst_of(worst, e);
                }
        printf("%s P^T V vs double: worst error %.3e of the sum of |terms|\n", w ? "AVX-512" : "AVX2", worst);
        CHECK_MSG(worst <= 1e-6, "P^T V: error %.3e", worst);
    }
    return test_summary("test_cpu_attention_avx2");
}
