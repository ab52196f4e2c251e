/* cpu_memory: aligned host allocations (the backend's "device" memory counted in a ledger, the host pool's not)
 * and copies. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/mem_ledger.h"

static lcx_mem_ledger ledger = LCX_MEM_LEDGER_INIT;

lcx_status lcx_cpu_host_alloc(size_t bytes, void **out) {
    LCX_FAIL_IF(out == NULL, LCX_ERR_INVALID, "alloc: 'out' is NULL");
    *out = NULL;
    size_t rounded; /* aligned_alloc wants a multiple of the alignment; 0 still gives a freeable pointer */
    LCX_FAIL_IF(!lcx_add_size(bytes, 63, &rounded), LCX_ERR_OOM, "alloc: %zu bytes is too large", bytes);
    rounded &= ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    LCX_FAIL_IF(p == NULL, LCX_ERR_OOM, "alloc: out of host memory allocating %zu bytes", bytes);
    *out = p;
    return LCX_OK;
}

void lcx_cpu_host_free(void *p) { free(p); }

lcx_status lcx_cpu_alloc(size_t bytes, void **out) {
    LCX_TRY(lcx_cpu_host_alloc(bytes, out));
    const size_t held = bytes ? (bytes + 63) & ~(size_t)63 : 64; /* what aligned_alloc was asked for */
    lcx_status st = lcx_mem_ledger_add(&ledger, *out, held);
    if (st != LCX_OK) free(*out), *out = NULL;
    return st;
}

void lcx_cpu_free(void *p) {
    lcx_mem_ledger_remove(&ledger, p);
    free(p);
}

void lcx_cpu_mem_stats(size_t *in_use, size_t *peak) { lcx_mem_ledger_stats(&ledger, in_use, peak); }
void lcx_cpu_mem_reset_peak(void) { lcx_mem_ledger_reset_peak(&ledger); }
size_t lcx_cpu_device_used(void) { return 0; } /* the device is the host: its resident memory says it */

/* The queue is synchronous: copies are done when they return, whichever direction. */
lcx_status lcx_cpu_copy(lcx_exec *x, void *dst, const void *src, size_t bytes) {
    (void)x;
    if (bytes == 0) return LCX_OK;
    LCX_FAIL_IF(dst == NULL || src == NULL, LCX_ERR_INVALID, "copy: NULL pointer with %zu bytes", bytes);
    memcpy(dst, src, bytes);
    return LCX_OK;
}

lcx_status lcx_cpu_zero(lcx_exec *x, void *p, size_t bytes) {
    (void)x;
    if (bytes == 0) return LCX_OK;
    LCX_FAIL_IF(p == NULL, LCX_ERR_INVALID, "zero: NULL pointer with %zu bytes", bytes);
    memset(p, 0, bytes);
    return LCX_OK;
}
