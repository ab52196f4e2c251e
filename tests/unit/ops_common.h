/* Helpers shared by the op tests (tests/unit/test_ops_*.c): a seeded RNG, the CPU backend, error measures and
 * central differences in double precision. The CPU backend's device memory is host memory, so tests hand it
 * plain host buffers. */
#ifndef LCX_OPS_COMMON_H
#define LCX_OPS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "test_util.h"

static uint64_t rng_state_ = 0x9e3779b97f4a7c15ull;
static inline void rng_seed(uint64_t s) { rng_state_ = s * 0x9e3779b97f4a7c15ull + 1; }
static inline uint64_t rng_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static inline double rng_uniform(double lo, double hi) { return lo + (hi - lo) * (double)(rng_u64() >> 11) * 0x1p-53; }
static inline int64_t rng_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_u64() % (uint64_t)(hi - lo + 1)); }

static inline float *rand_f32(int64_t n, double lo, double hi) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (float)rng_uniform(lo, hi);
    return p;
}
static inline float *zeros_f32(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }
static inline double *zeros_f64(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }
static inline double *to_f64(const float *x, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static inline const lcx_backend *cpu(void) {
    const lcx_backend *be = lcx_backend_get("cpu");
    if (!be) {
        fprintf(stderr, "no cpu backend: %s\n", lcx_last_error());
        exit(1);
    }
    return be;
}

/* Relative error with a floor: max over i of |got-want| / max(|want|, floor), floor = floor_frac * max|want|
 * (at least 1e-6), so entries that cancel to near zero are judged against the tensor's scale.
 * floor_frac = 1 gives the normwise error max|got-want| / max|want|. */
static inline double rel_err(const float *got, const double *want, int64_t n, double floor_frac) {
    double mx = 0.0, err = 0.0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    double floor = fmax(floor_frac * mx, 1e-6);
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor);
        if (!(e <= err)) err = e; /* NaN propagates as failure */
    }
    return err;
}

/* Central differences of loss() with respect to x[idx[0..n_idx)] (x is perturbed in place and restored). */
typedef double (*loss_fn)(void *ctx);
static inline void fd_grad(loss_fn loss, void *ctx, double *x, int64_t n, double h, double *g) {
    for (int64_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = loss(ctx);
        x[i] = keep - h;
        double lm = loss(ctx);
        x[i] = keep;
        g[i] = (lp - lm) / (2.0 * h);
    }
}

/* Report a measured error and check it against a tolerance. */
#define CHECK_ERR(what, err, tol)                                                                            \
    do {                                                                                                     \
        double e_ = (err);                                                                                   \
        printf("  %-48s err %.3e (tol %.0e)\n", (what), e_, (double)(tol));                                 \
        CHECK_MSG(e_ <= (tol), "%s: error %.3e > %.3e", (what), e_, (double)(tol));                          \
    } while (0)

#endif
