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
#include "worst_of.h"

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

/* ---- exec contexts and arenas ------------------------------------------------------------------------------ */

/* A CPU exec for the test (freed by the OS at exit: tests are short-lived processes). */
static inline lcx_exec *cpu_exec(void) {
    lcx_exec *x = NULL;
    if (lcx_exec_create(cpu(), &x) != LCX_OK) {
        fprintf(stderr, "no cpu exec: %s\n", lcx_last_error());
        exit(1);
    }
    return x;
}

/* Give x an arena of exactly `bytes` (plain malloc: the CPU backend's device memory is host memory, and under
 * ASan any access past the end of the workspace is then reported). */
static inline void arena_exact(lcx_exec *x, size_t bytes) {
    x->be->free(x->scratch);
    x->scratch = bytes ? malloc(bytes) : NULL;
    x->scratch_bytes = bytes;
}

/* Any op of the table, by its lcx_op. */
static inline lcx_status op_call(lcx_exec *x, lcx_op op, const void *args) {
    const lcx_backend *be = x->be;
    switch (op) {
    case LCX_OP_MATMUL: return be->matmul(x, args);
    case LCX_OP_EMBEDDING_FWD: return be->embedding_fwd(x, args);
    case LCX_OP_EMBEDDING_BWD: return be->embedding_bwd(x, args);
    case LCX_OP_RMSNORM_FWD: return be->rmsnorm_fwd(x, args);
    case LCX_OP_RMSNORM_BWD: return be->rmsnorm_bwd(x, args);
    case LCX_OP_ROPE_FWD: return be->rope_fwd(x, args);
    case LCX_OP_ROPE_BWD: return be->rope_bwd(x, args);
    case LCX_OP_ATTENTION_FWD: return be->attention_fwd(x, args);
    case LCX_OP_ATTENTION_BWD: return be->attention_bwd(x, args);
    case LCX_OP_ATTENTION_MERGE: return be->attention_merge(x, args);
    case LCX_OP_SWIGLU_FWD: return be->swiglu_fwd(x, args);
    case LCX_OP_SWIGLU_BWD: return be->swiglu_bwd(x, args);
    case LCX_OP_CROSS_ENTROPY: return be->cross_entropy(x, args);
    case LCX_OP_ADAMW: return be->adamw(x, args);
    case LCX_OP_SQNORM: return be->sqnorm(x, args);
    case LCX_OP_CAST: return be->cast(x, args);
    case LCX_OP_ADD: return be->add(x, args);
    case LCX_OP_SCALE: return be->scale(x, args);
    case LCX_OP_AXPY: return be->axpy(x, args);
    default: return lcx_fail(LCX_ERR_INVALID, "op_call: op %d", (int)op);
    }
}

/* Run an op with an arena of exactly its workspace for these arguments. */
static inline lcx_status op_exact(lcx_exec *x, lcx_op op, const void *args) {
    arena_exact(x, lcx_exec_workspace(x, op, args));
    return op_call(x, op, args);
}

/* An arena one byte short of the workspace must fail with LCX_ERR_INVALID naming both sizes (ops whose workspace
 * is 0 for these arguments are skipped; *checked counts the others). */
static inline void check_arena_short(lcx_exec *x, lcx_op op, const void *args, int *checked) {
    size_t need = lcx_exec_workspace(x, op, args);
    if (need == 0) return;
    arena_exact(x, need - 1);
    char want[64], have[64];
    snprintf(want, sizeof want, "needs %zu bytes", need);
    snprintf(have, sizeof have, "holds %zu", need - 1);
    CHECK_FAILS(op_call(x, op, args), LCX_ERR_INVALID, want);
    CHECK_MSG(strstr(lcx_last_error(), have) != NULL, "op %d: '%s' lacks '%s'", (int)op, lcx_last_error(), have);
    (*checked)++;
}

/* bf16 copies of float data, and the float32 values they hold. */
static inline uint16_t *to_bf16(const float *x, int64_t n) {
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = lcx_f32_to_bf16(x[i]);
    return h;
}
static inline float *widen_bf16(const uint16_t *h, int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = lcx_bf16_to_f32(h[i]);
    return x;
}
/* Round float data to bf16 values in place. */
static inline void round_bf16(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = lcx_bf16_to_f32(lcx_f32_to_bf16(x[i]));
}
/* Elements of a bf16 result that are not the rounding of the float32 result of the same math. */
static inline int64_t bf16_mismatch(const uint16_t *got, const float *want32, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != lcx_f32_to_bf16(want32[i]);
    return bad;
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
        err = worst_of(err, e);
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
