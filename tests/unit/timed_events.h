/* The timed events of the backend contract (event_create with LCX_EVENT_TIMED, event_elapsed), for any backend:
 * shared by test_ops_misc (the CPU) and test_exec_cuda. References: the host's clock around a host sleep between
 * two marks on an idle queue (each mark is reached as it is recorded), and the refusals the contract names. */
#ifndef LCX_TEST_TIMED_EVENTS_H
#define LCX_TEST_TIMED_EVENTS_H

#include <time.h>

#include "kernels/backend.h"
#include "src/core/clock.h"
#include "test_util.h"

static void check_timed_events(const lcx_backend *be, lcx_exec *x) {
    lcx_event *a = NULL, *b = NULL, *plain = NULL, *bad = NULL;
    CHECK_OK(be->event_create(&a, LCX_EVENT_TIMED));
    CHECK_OK(be->event_create(&b, LCX_EVENT_TIMED));
    CHECK_OK(be->event_create(&plain, 0));
    CHECK_FAILS(be->event_create(&bad, 2), LCX_ERR_INVALID, "unknown flags");
    if (!a || !b || !plain) return;
    double s = -1;
    CHECK_FAILS(be->event_elapsed(a, b, &s), LCX_ERR_INVALID, "never recorded");
    CHECK_OK(be->sync(x));
    const double t0 = lcx_clock_s();
    CHECK_OK(be->event_record(x, a));
    const struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    CHECK_OK(be->event_record(x, b));
    CHECK_OK(be->event_sync(b));
    const double host = lcx_clock_s() - t0;
    CHECK_OK(be->event_elapsed(a, b, &s));
    CHECK_MSG(s >= 0.019 && s <= host + 1e-3, "elapsed %.6f s over a 20 ms sleep, host %.6f s", s, host);
    CHECK_OK(be->event_record(x, plain));
    CHECK_OK(be->event_sync(plain));
    CHECK_FAILS(be->event_elapsed(plain, b, &s), LCX_ERR_INVALID, "LCX_EVENT_TIMED");
    CHECK_FAILS(be->event_elapsed(a, NULL, &s), LCX_ERR_INVALID, "NULL");
    be->event_free(a);
    be->event_free(b);
    be->event_free(plain);
}

#endif
