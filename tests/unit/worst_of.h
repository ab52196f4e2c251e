/* A running maximum of errors that does not lose a NaN.
 *
 * Tests accumulate the worst error of many comparisons and check it once: CHECK(worst <= tol). Neither
 * fmax(worst, e) (fmax(x, NaN) is x) nor `if (e > worst) worst = e` (NaN > x is false) records a NaN error, so a
 * kernel that writes NaN would pass such a check. worst_of treats a NaN as the worst error of all: once either
 * argument is NaN the result is NaN, it stays NaN through later calls, and the final `worst <= tol` fails.
 * Use it for errors and differences only, not for scales or reference magnitudes. */
#ifndef LCX_TEST_WORST_OF_H
#define LCX_TEST_WORST_OF_H

#include <math.h>

static inline double worst_of(double worst, double e) {
    if (isnan(worst) || isnan(e)) return NAN;
    return e > worst ? e : worst;
}

#endif
