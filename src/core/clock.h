/* clock: a monotonic clock for rates, ETAs and progress intervals. */
#ifndef LCX_CORE_CLOCK_H
#define LCX_CORE_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): only differences mean something. */
double lcx_clock_s(void);

#endif
