/* Minimal test harness: CHECK records a failure and goes on; main returns test_summary(). */
#ifndef LCX_TEST_UTIL_H
#define LCX_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int test_failures_ = 0;
static int test_checks_ = 0;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        test_checks_++;                                                                                      \
        if (!(cond)) {                                                                                       \
            test_failures_++;                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                         \
        }                                                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                 \
    do {                                                                                                     \
        test_checks_++;                                                                                      \
        if (!(cond)) {                                                                                       \
            test_failures_++;                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                         \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

/* A call returning lcx_status must succeed; prints lcx_last_error() if not. */
#define CHECK_OK(expr)                                                                                       \
    do {                                                                                                     \
        lcx_status st_ = (expr);                                                                             \
        test_checks_++;                                                                                      \
        if (st_ != LCX_OK) {                                                                                 \
            test_failures_++;                                                                                \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #expr, lcx_status_name(st_),   \
                    lcx_last_error());                                                                       \
        }                                                                                                    \
    } while (0)

/* A call must fail with the given status and its message must contain `needle`. */
#define CHECK_FAILS(expr, code, needle)                                                                      \
    do {                                                                                                     \
        lcx_clear_error();                                                                                   \
        lcx_status st_ = (expr);                                                                             \
        test_checks_++;                                                                                      \
        if (st_ != (code) || !strstr(lcx_last_error(), (needle))) {                                          \
            test_failures_++;                                                                                \
            fprintf(stderr, "%s:%d: %s: expected %s containing '%s', got %s: '%s'\n", __FILE__, __LINE__,   \
                    #expr, lcx_status_name(code), (needle), lcx_status_name(st_), lcx_last_error());         \
        }                                                                                                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                \
    do {                                                                                                     \
        double a_ = (double)(a), b_ = (double)(b);                                                           \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%s = %.10g, %s = %.10g, tol %g", #a, a_, #b, b_, (double)(tol));  \
    } while (0)

/* Relative closeness: |a-b| <= tol * max(|a|,|b|, tiny). */
#define CHECK_REL(a, b, tol)                                                                                 \
    do {                                                                                                     \
        double a_ = (double)(a), b_ = (double)(b);                                                           \
        double m_ = fmax(fmax(fabs(a_), fabs(b_)), 1e-30);                                                   \
        CHECK_MSG(fabs(a_ - b_) <= (tol) * m_, "%s = %.12g, %s = %.12g, rel tol %g", #a, a_, #b, b_,         \
                  (double)(tol));                                                                            \
    } while (0)

static inline int test_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, test_checks_, test_failures_);
    return test_failures_ ? 1 : 0;
}

#endif
