/* cpu_backend: the CPU implementation's function table (host memory is device memory), its contexts and events,
 * and the workspace query. The queue is synchronous: an op has finished when it returns, so sync has nothing to
 * wait for and every event is complete as soon as it is recorded. */
#include <stdlib.h>

#include "kernels/backend_check.h"
#include "kernels/cpu/cpu_internal.h"
#include "src/core/clock.h"

static int cpu_available(void) { return 1; }

static lcx_status cpu_exec_init(lcx_exec *x) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "exec_init: NULL exec");
    x->queue = NULL;
    x->handles = NULL;
    return LCX_OK;
}

static void cpu_exec_destroy(lcx_exec *x) { (void)x; }

static lcx_status cpu_sync(lcx_exec *x) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "sync: NULL exec");
    return LCX_OK;
}

/* One shared event for the untimed ones (there is nothing to record in them); a timed one is its own, holding the
 * clock at its record (the queue is synchronous: the mark is reached when it is recorded). */
struct lcx_event {
    int timed;
    double at; /* lcx_clock_s() at the last record; < 0 before the first */
};
static lcx_event cpu_event;

static lcx_status cpu_event_create(lcx_event **out, unsigned flags) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "event_create: 'out' is NULL");
    LCX_FAIL_IF(flags & ~LCX_EVENT_TIMED, LCX_ERR_INVALID, "event_create: unknown flags %#x", flags);
    *out = &cpu_event;
    if (!(flags & LCX_EVENT_TIMED)) return LCX_OK;
    lcx_event *e = malloc(sizeof *e);
    LCX_FAIL_IF(e == NULL, LCX_ERR_OOM, "event_create: out of memory");
    e->timed = 1, e->at = -1;
    *out = e;
    return LCX_OK;
}
static void cpu_event_free(lcx_event *e) {
    if (e != &cpu_event) free(e);
}
static lcx_status cpu_event_record(lcx_exec *x, lcx_event *e) {
    LCX_FAIL_IF(x == NULL || e == NULL, LCX_ERR_INVALID, "event_record: NULL exec or event");
    if (e->timed) e->at = lcx_clock_s();
    return LCX_OK;
}
static lcx_status cpu_event_elapsed(lcx_event *a, lcx_event *b, double *seconds) {
    LCX_FAIL_IF(a == NULL || b == NULL || seconds == NULL, LCX_ERR_INVALID, "event_elapsed: NULL argument");
    LCX_FAIL_IF(!a->timed || !b->timed, LCX_ERR_INVALID, "event_elapsed: an event created without LCX_EVENT_TIMED");
    LCX_FAIL_IF(a->at < 0 || b->at < 0, LCX_ERR_INVALID, "event_elapsed: an event that was never recorded");
    *seconds = b->at - a->at;
    return LCX_OK;
}
static lcx_status cpu_event_wait(lcx_exec *x, lcx_event *e) {
    LCX_FAIL_IF(x == NULL || e == NULL, LCX_ERR_INVALID, "event_wait: NULL exec or event");
    return LCX_OK;
}
static lcx_status cpu_event_sync(lcx_event *e) {
    LCX_FAIL_IF(e == NULL, LCX_ERR_INVALID, "event_sync: NULL event");
    return LCX_OK;
}

static size_t cpu_workspace(const lcx_exec *x, lcx_op op, const void *args) {
    (void)x;
    if (args == NULL) return 0;
    switch (op) {
    case LCX_OP_MATMUL: return lcx_cpu_matmul_ws(args);
    case LCX_OP_RMSNORM_FWD: return lcx_cpu_rmsnorm_ws(0, args);
    case LCX_OP_RMSNORM_BWD: return lcx_cpu_rmsnorm_ws(1, args);
    case LCX_OP_ATTENTION_FWD: return lcx_cpu_attention_fwd_ws(args);
    case LCX_OP_ATTENTION_BWD: return lcx_cpu_attention_bwd_ws(args);
    case LCX_OP_CROSS_ENTROPY: return lcx_cpu_cross_entropy_ws(args);
    case LCX_OP_SQNORM: return lcx_cpu_sqnorm_ws(args);
    default: return 0; /* the other ops need no scratch */
    }
}

/* The table's ops: the shared argument checks (kernels/backend_check.c), then the op. */
LCX_CHECKED_OPS(lcx_cpu_)

const lcx_backend lcx_cpu_backend_table = {
    .name = "cpu",
    .available = cpu_available,
    .exec_init = cpu_exec_init,
    .exec_destroy = cpu_exec_destroy,
    .sync = cpu_sync,
    .event_create = cpu_event_create,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_sync = cpu_event_sync,
    .event_elapsed = cpu_event_elapsed,
    .alloc = lcx_cpu_alloc,
    .free = lcx_cpu_free,
    .copy_h2d = lcx_cpu_copy,
    .copy_d2h = lcx_cpu_copy,
    .copy_d2d = lcx_cpu_copy,
    .zero = lcx_cpu_zero,
    .host_alloc = lcx_cpu_host_alloc, /* one memory: the "host" pool is ordinary memory, not in mem_stats */
    .host_free = lcx_cpu_host_free,
    .mem_stats = lcx_cpu_mem_stats,
    .mem_reset_peak = lcx_cpu_mem_reset_peak,
    .device_used = lcx_cpu_device_used,
    .copy_d2h_async = lcx_cpu_copy, /* a synchronous queue: done on return */
    .copy_h2d_async = lcx_cpu_copy,
    .workspace = cpu_workspace,
    LCX_CHECKED_ENTRIES,
};

const lcx_backend *lcx_backend_cpu(void) { return &lcx_cpu_backend_table; }
