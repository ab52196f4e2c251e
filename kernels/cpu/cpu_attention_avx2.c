/* cpu_attention_avx2: the products of the attention forward (and backward) tiles in AVX2 + FMA
 * registers, on x86-64 CPUs that have them. With head_dim 64 both products are short in k, and OpenBLAS spends on
 * them about as much packing the q rows, the key tile and P, and zeroing each score tile, as on the
 * multiply-adds; here K is transposed once per (query tile, key tile) and nothing else moves. Register blocks of
 * 6 rows x 16 columns: 12 accumulators, 2 loaded vectors and a broadcast fill the 16 ymm registers. Each output
 * element sums its terms in index order, so results do not depend on the tile or thread it falls in.
 * On CPUs with AVX-512 the same products run 16 lanes wide (6 rows x 32 columns: 12 of the 32 zmm registers).
 * A lane still sums its own element's terms in the same order with the same fused multiply-adds, so the results
 * are the AVX2 ones, bit for bit (test_cpu_attention_avx2 compares them); only the instruction count halves. */
#include "kernels/cpu/cpu_attention_common.h"

#include <stdlib.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(LCX_NO_MULTIVERSION)
#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

enum { ROWS = 6 };

/* f(R, args...) for the R = min(n, ROWS) rows left, R a constant in each call so that the blocks' row loops
 * unroll into registers. */
#define BY_ROWS(n, f, ...)                                                                                    \
    switch ((n) < ROWS ? (n) : ROWS) {                                                                        \
    case 6: f(6, __VA_ARGS__); break;                                                                         \
    case 5: f(5, __VA_ARGS__); break;                                                                         \
    case 4: f(4, __VA_ARGS__); break;                                                                         \
    case 3: f(3, __VA_ARGS__); break;                                                                         \
    case 2: f(2, __VA_ARGS__); break;                                                                         \
    default: f(1, __VA_ARGS__); break;                                                                        \
    }

int lcx_cpu_att_avx2_usable(int64_t head_dim) {
    static int cpu = -1; /* benign race: every thread computes the same value */
    if (cpu < 0) cpu = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return cpu && head_dim % 8 == 0;
}

/* -1: not decided yet (the CPU decides on first use); 0: AVX2; 1: AVX-512 */
static int wide = -1;

static int avx512_cpu(void) { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2"); }

static int use_avx512(void) {
    if (wide < 0) { /* benign race, as above; LCX_CPU_AVX512=0 keeps AVX2 (a measurement's baseline) */
        const char *env = getenv("LCX_CPU_AVX512");
        wide = avx512_cpu() && !(env && strcmp(env, "0") == 0);
    }
    return wide;
}

int lcx_cpu_att_set_avx512(int on) {
    wide = on && avx512_cpu();
    return wide;
}

/* kt[d][j] = k[j][d] in 8 x 8 blocks (the standard unpack / shuffle / permute transpose), scalar at the edges. */
AVX2_FN void lcx_cpu_att_transpose_keys(const float *k, int64_t ldk, int64_t nk, int64_t hd, float *kt, int64_t ldkt) {
    const int64_t nkp = (nk + 15) & ~(int64_t)15, hd8 = hd & ~(int64_t)7;
    int64_t j = 0;
    for (; j + 8 <= nk; j += 8)
        for (int64_t d = 0; d < hd8; d += 8) {
            __m256 r[8], t[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(k + (j + i) * ldk + d);
            for (int i = 0; i < 8; i += 2) {
                t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 8; i += 4) {
                r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
                r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
                r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
            }
            for (int i = 0; i < 4; i++) {
                _mm256_storeu_ps(kt + (d + i) * ldkt + j, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
                _mm256_storeu_ps(kt + (d + i + 4) * ldkt + j, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
            }
        }
    for (int64_t d = 0; d < hd; d++) {
        float *row = kt + d * ldkt;
        for (int64_t jj = d < hd8 ? j : 0; jj < nk; jj++) row[jj] = k[jj * ldk + d];
        for (int64_t jj = nk; jj < nkp; jj++) row[jj] = 0.0f; /* padding keys score 0 and are never read */
    }
}

/* s[r][0..16) = scale * sum_d q[r][d] kt[d][0..16) for r < R (R a constant after inlining). */
AVX2_INLINE void scores_block(int R, const float *q, int64_t ldq, const float *kt, int64_t ldkt, int64_t hd,
                              __m256 scale, float *s, int64_t lds) {
    __m256 acc[ROWS][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d++) {
        __m256 k0 = _mm256_loadu_ps(kt + d * ldkt), k1 = _mm256_loadu_ps(kt + d * ldkt + 8);
        for (int r = 0; r < R; r++) {
            __m256 b = _mm256_broadcast_ss(q + r * ldq + d);
            acc[r][0] = _mm256_fmadd_ps(b, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(b, k1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(s + r * lds, _mm256_mul_ps(acc[r][0], scale));
        _mm256_storeu_ps(s + r * lds + 8, _mm256_mul_ps(acc[r][1], scale));
    }
}

/* One row block across the key tile, 16 keys at a time (the padding keys included). */
AVX2_INLINE void scores_rows(int R, const float *q, int64_t ldq, const float *kt, int64_t ldkt, int64_t nkp,
                             int64_t hd, __m256 scale, float *s, int64_t lds) {
    for (int64_t j = 0; j < nkp; j += 16) scores_block(R, q, ldq, kt + j, ldkt, hd, scale, s + j, lds);
}

#define AVX512_FN __attribute__((target("avx512f,avx2,fma")))
#define AVX512_INLINE __attribute__((target("avx512f,avx2,fma"), always_inline)) static inline

/* The AVX-512 form of scores_block: s[r][0..16W) for r < R, W zmm vectors of 16 keys (1 or 2). */
AVX512_INLINE void scores_block512(int R, int W, const float *q, int64_t ldq, const float *kt, int64_t ldkt,
                                   int64_t hd, __m512 scale, float *s, int64_t lds) {
    __m512 acc[ROWS][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d++) {
        __m512 k0 = _mm512_loadu_ps(kt + d * ldkt), k1 = W > 1 ? _mm512_loadu_ps(kt + d * ldkt + 16) : k0;
        for (int r = 0; r < R; r++) {
            __m512 b = _mm512_set1_ps(q[r * ldq + d]);
            acc[r][0] = _mm512_fmadd_ps(b, k0, acc[r][0]);
            if (W > 1) acc[r][1] = _mm512_fmadd_ps(b, k1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) _mm512_storeu_ps(s + r * lds + 16 * w, _mm512_mul_ps(acc[r][w], scale));
}

AVX512_INLINE void scores_rows512(int R, const float *q, int64_t ldq, const float *kt, int64_t ldkt, int64_t nkp,
                                  int64_t hd, __m512 scale, float *s, int64_t lds) {
    int64_t j = 0;
    for (; j + 32 <= nkp; j += 32) scores_block512(R, 2, q, ldq, kt + j, ldkt, hd, scale, s + j, lds);
    if (j < nkp) scores_block512(R, 1, q, ldq, kt + j, ldkt, hd, scale, s + j, lds);
}

AVX512_FN static void scores512(const float *q, int64_t ldq, int64_t nr, const float *kt, int64_t ldkt, int64_t nkp,
                                int64_t hd, float scale, float *s, int64_t lds) {
    const __m512 sc = _mm512_set1_ps(scale);
    for (int64_t r0 = 0; r0 < nr; r0 += ROWS) {
        const float *qr = q + r0 * ldq;
        float *sr = s + r0 * lds;
        BY_ROWS(nr - r0, scores_rows512, qr, ldq, kt, ldkt, nkp, hd, sc, sr, lds)
    }
}

AVX2_FN void lcx_cpu_att_scores(const float *q, int64_t ldq, int64_t nr, const float *kt, int64_t ldkt, int64_t nk,
                                int64_t hd, float scale, float *s, int64_t lds) {
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    if (use_avx512()) {
        scores512(q, ldq, nr, kt, ldkt, nkp, hd, scale, s, lds);
        return;
    }
    const __m256 sc = _mm256_set1_ps(scale);
    for (int64_t r0 = 0; r0 < nr; r0 += ROWS) {
        const float *qr = q + r0 * ldq;
        float *sr = s + r0 * lds;
        BY_ROWS(nr - r0, scores_rows, qr, ldq, kt, ldkt, nkp, hd, sc, sr, lds)
    }
}

/* o[r][0..8W) += sum_{j < nk} p(r, j) v[j][0..8W) for r < R, W vectors of 8 columns (1 or 2); p(r, j) is
 * p[r * prs + j * pks]: P itself (prs = ldp, pks = 1) or, for the backward's dV and dK, its transpose. */
AVX2_INLINE void pv_block(int R, int W, const float *p, int64_t prs, int64_t pks, const float *v, int64_t ldv,
                          int64_t nk, float *o, int64_t ldo) {
    __m256 acc[ROWS][2];
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) acc[r][w] = _mm256_loadu_ps(o + r * ldo + 8 * w);
    for (int64_t j = 0; j < nk; j++) {
        __m256 v0 = _mm256_loadu_ps(v + j * ldv), v1 = W > 1 ? _mm256_loadu_ps(v + j * ldv + 8) : v0;
        for (int r = 0; r < R; r++) {
            __m256 b = _mm256_broadcast_ss(p + r * prs + j * pks);
            acc[r][0] = _mm256_fmadd_ps(b, v0, acc[r][0]);
            if (W > 1) acc[r][1] = _mm256_fmadd_ps(b, v1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) _mm256_storeu_ps(o + r * ldo + 8 * w, acc[r][w]);
}

/* One row block across head_dim: 16 columns at a time, then the last 8 when head_dim % 16 == 8. */
AVX2_INLINE void pv_rows(int R, const float *p, int64_t prs, int64_t pks, const float *v, int64_t ldv, int64_t nk,
                         int64_t hd, float *o, int64_t ldo) {
    int64_t c = 0;
    for (; c + 16 <= hd; c += 16) pv_block(R, 2, p, prs, pks, v + c, ldv, nk, o + c, ldo);
    if (c < hd) pv_block(R, 1, p, prs, pks, v + c, ldv, nk, o + c, ldo);
}

/* The AVX-512 form of pv_block: W zmm vectors of 16 columns (1 or 2). */
AVX512_INLINE void pv_block512(int R, int W, const float *p, int64_t prs, int64_t pks, const float *v, int64_t ldv,
                               int64_t nk, float *o, int64_t ldo) {
    __m512 acc[ROWS][2];
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) acc[r][w] = _mm512_loadu_ps(o + r * ldo + 16 * w);
    for (int64_t j = 0; j < nk; j++) {
        __m512 v0 = _mm512_loadu_ps(v + j * ldv), v1 = W > 1 ? _mm512_loadu_ps(v + j * ldv + 16) : v0;
        for (int r = 0; r < R; r++) {
            __m512 b = _mm512_set1_ps(p[r * prs + j * pks]);
            acc[r][0] = _mm512_fmadd_ps(b, v0, acc[r][0]);
            if (W > 1) acc[r][1] = _mm512_fmadd_ps(b, v1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) _mm512_storeu_ps(o + r * ldo + 16 * w, acc[r][w]);
}

/* One row block across head_dim: 32 columns at a time, then 16, then the last 8 in AVX2 registers. */
AVX512_INLINE void pv_rows512(int R, const float *p, int64_t prs, int64_t pks, const float *v, int64_t ldv,
                              int64_t nk, int64_t hd, float *o, int64_t ldo) {
    int64_t c = 0;
    for (; c + 32 <= hd; c += 32) pv_block512(R, 2, p, prs, pks, v + c, ldv, nk, o + c, ldo);
    if (c + 16 <= hd) pv_block512(R, 1, p, prs, pks, v + c, ldv, nk, o + c, ldo), c += 16;
    if (c < hd) pv_block(R, 1, p, prs, pks, v + c, ldv, nk, o + c, ldo);
}

AVX512_FN static void pv512(const float *p, int64_t prs, int64_t pks, int64_t nr, const float *v, int64_t ldv,
                            int64_t nk, int64_t hd, float *o, int64_t ldo) {
    for (int64_t r0 = 0; r0 < nr; r0 += ROWS) {
        const float *pr = p + r0 * prs;
        float *orow = o + r0 * ldo;
        BY_ROWS(nr - r0, pv_rows512, pr, prs, pks, v, ldv, nk, hd, orow, ldo)
    }
}

/* o[r] += sum_j p(r, j) v[j] for r < nr, j < nk, in 6-row blocks. */
AVX2_FN static void pv_all(const float *p, int64_t prs, int64_t pks, int64_t nr, const float *v, int64_t ldv,
                           int64_t nk, int64_t hd, float *o, int64_t ldo) {
    if (use_avx512()) {
        pv512(p, prs, pks, nr, v, ldv, nk, hd, o, ldo);
        return;
    }
    for (int64_t r0 = 0; r0 < nr; r0 += ROWS) {
        const float *pr = p + r0 * prs;
        float *orow = o + r0 * ldo;
        BY_ROWS(nr - r0, pv_rows, pr, prs, pks, v, ldv, nk, hd, orow, ldo)
    }
}

void lcx_cpu_att_pv(const float *p, int64_t ldp, int64_t nr, const float *v, int64_t ldv, int64_t nk, int64_t hd,
                    float *o, int64_t ldo) {
    pv_all(p, ldp, 1, nr, v, ldv, nk, hd, o, ldo);
}

void lcx_cpu_att_ptv(const float *p, int64_t ldp, int64_t nr, int64_t nk, const float *v, int64_t ldv, int64_t hd,
                     float *o, int64_t ldo) {
    pv_all(p, 1, ldp, nk, v, ldv, nr, hd, o, ldo);
}

#else /* no AVX2 kernels in this build: the forward uses OpenBLAS */

int lcx_cpu_att_avx2_usable(int64_t head_dim) {
    (void)head_dim;
    return 0;
}
int lcx_cpu_att_set_avx512(int on) {
    (void)on;
    return 0;
}
void lcx_cpu_att_transpose_keys(const float *k, int64_t ldk, int64_t nk, int64_t hd, float *kt, int64_t ldkt) {
    (void)k, (void)ldk, (void)nk, (void)hd, (void)kt, (void)ldkt;
}
void lcx_cpu_att_scores(const float *q, int64_t ldq, int64_t nr, const float *kt, int64_t ldkt, int64_t nk,
                        int64_t hd, float scale, float *s, int64_t lds) {
    (void)q, (void)ldq, (void)nr, (void)kt, (void)ldkt, (void)nk, (void)hd, (void)scale, (void)s, (void)lds;
}
void lcx_cpu_att_pv(const float *p, int64_t ldp, int64_t nr, const float *v, int64_t ldv, int64_t nk, int64_t hd,
                    float *o, int64_t ldo) {
    (void)p, (void)ldp, (void)nr, (void)v, (void)ldv, (void)nk, (void)hd, (void)o, (void)ldo;
}
void lcx_cpu_att_ptv(const float *p, int64_t ldp, int64_t nr, int64_t nk, const float *v, int64_t ldv, int64_t hd,
                     float *o, int64_t ldo) {
    (void)p, (void)ldp, (void)nr, (void)nk, (void)v, (void)ldv, (void)hd, (void)o, (void)ldo;
}
#endif
