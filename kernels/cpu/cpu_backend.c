/* cpu_backend: the CPU implementation's function table (host memory is device memory), its contexts and events,
 * and the workspace query. The queue is synchronous: an op has finished when it returns, so sync has nothing to
 * wait for and every event is complete as soon as it is recorded. */
#include <stdlib.h>

#include "kernels/backend_check.h"
#include "kernels/cpu/cpu_internal.h"

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

/* One shared event: there is nothing to record in it. */
struct lcx_event {
    char unused;
};
static lcx_event cpu_event;

static lcx_status cpu_event_create(lcx_event **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "event_create: 'out' is NULL");
    *out = &cpu_event;
    return LCX_OK;
}
static void cpu_event_free(lcx_event *e) { (void)e; }
static lcx_status cpu_event_record(lcx_exec *x, lcx_event *e) {
    LCX_FAIL_IF(x == NULL || e == NULL, LCX_ERR_INVALID, "event_record: NULL exec or event");
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
    .alloc = lcx_cpu_alloc,
    .free = lcx_cpu_free,
    .copy_h2d = lcx_cpu_copy,
    .copy_d2h = lcx_cpu_copy,
    .copy_d2d = lcx_cpu_copy,
    .zero = lcx_cpu_zero,
    .host_alloc = lcx_cpu_alloc, /* one memory: the "host" pool is ordinary memory, accounted apart by its users */
    .host_free = lcx_cpu_free,
    .copy_d2h_async = lcx_cpu_copy, /* a synchronous queue: done on return */
    .copy_h2d_async = lcx_cpu_copy,
    .workspace = cpu_workspace,
    LCX_CHECKED_ENTRIES,
};

const lcx_backend *lcx_backend_cpu(void) { return &lcx_cpu_backend_table; }
