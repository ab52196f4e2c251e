/* backend registry (name -> table) and the exec helpers shared by every backend. The CPU reference is always
 * listed; builds with CUDA (LCX_HAVE_CUDA) list the CUDA table after it (kernels/cuda, docs/cuda.md), whether or
 * not a device is visible: callers ask ->available(). */
#include "kernels/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const lcx_backend lcx_cpu_backend_table; /* kernels/cpu/cpu_backend.c */
#ifdef LCX_HAVE_CUDA
extern const lcx_backend lcx_cuda_backend_table; /* kernels/cuda/cuda_backend.c */
#endif

static const lcx_backend *const backends[] = {
    &lcx_cpu_backend_table,
#ifdef LCX_HAVE_CUDA
    &lcx_cuda_backend_table,
#endif
};

const lcx_backend *const *lcx_backend_list(int *n) {
    if (n) *n = (int)(sizeof backends / sizeof backends[0]);
    return backends;
}

const lcx_backend *lcx_backend_get(const char *name) {
    int n = 0;
    const lcx_backend *const *list = lcx_backend_list(&n);
    for (int i = 0; i < n && name; i++)
        if (strcmp(list[i]->name, name) == 0) return list[i];
    char names[128] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", list[i]->name);
    }
    lcx_fail(LCX_ERR_NOT_FOUND, "unknown backend '%s' (available: %s)", name ? name : "(null)", names);
    return NULL;
}

lcx_status lcx_exec_create(const lcx_backend *be, lcx_exec **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "exec_create: 'out' is NULL");
    *out = NULL;
    lcx_exec *x = calloc(1, sizeof *x);
    LCX_FAIL_IF(x == NULL, LCX_ERR_OOM, "exec_create: out of memory");
    x->be = be ? be : lcx_backend_cpu();
    lcx_status st = x->be->exec_init(x);
    if (st != LCX_OK) {
        free(x);
        return lcx_fail_context(st, "%s exec: ", be ? be->name : "cpu");
    }
    *out = x;
    return LCX_OK;
}

void lcx_exec_free(lcx_exec *x) {
    if (!x) return;
    (void)x->be->sync(x); /* queued ops may still use the arena; nothing to report to */
    x->be->free(x->scratch);
    x->be->exec_destroy(x);
    free(x);
}

lcx_status lcx_exec_reserve(lcx_exec *x, size_t bytes) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "exec_reserve: NULL exec");
    if (bytes <= x->scratch_bytes && x->scratch) return LCX_OK;
    void *p = NULL;
    lcx_status st = x->be->alloc(bytes, &p);
    if (st != LCX_OK) return lcx_fail_context(st, "scratch arena: ");
    x->be->free(x->scratch);
    x->scratch = p;
    x->scratch_bytes = bytes;
    return LCX_OK;
}

size_t lcx_exec_workspace(const lcx_exec *x, lcx_op op, const void *args) {
    return x && args ? x->be->workspace(x, op, args) : 0;
}

lcx_status lcx_exec_need(const lcx_exec *x, size_t need, const char *op_name) {
    LCX_FAIL_IF(x == NULL, LCX_ERR_INVALID, "%s: NULL exec", op_name);
    size_t have = x->scratch ? x->scratch_bytes : 0;
    LCX_FAIL_IF(need > have, LCX_ERR_INVALID,
                "%s: needs %zu bytes of scratch, the exec's arena holds %zu (size it with lcx_exec_reserve from "
                "the op's workspace)", op_name, need, have);
    return LCX_OK;
}
