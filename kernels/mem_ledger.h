/* mem_ledger: the bytes a backend's alloc holds, now and at its high-water mark, for the contract's mem_stats (the
 * planner's memory model is checked against it: docs/plan.md "Memory"). A backend adds each allocation's pointer
 * and size and removes it on free; the ledger maps pointers to sizes itself, as neither free() nor cudaFree()
 * says how much went back. Thread-safe (one mutex: alloc and free are outside hot loops by the contract). */
#ifndef LCX_KERNELS_MEM_LEDGER_H
#define LCX_KERNELS_MEM_LEDGER_H

#include <pthread.h>
#include <stddef.h>

#include "src/core/status.h"

typedef struct lcx_mem_ledger {
    pthread_mutex_t lock;
    struct lcx_ledger_entry *slots; /* open addressing; cap a power of two, at most half full */
    size_t cap, count;
    size_t in_use, peak;
} lcx_mem_ledger;

#define LCX_MEM_LEDGER_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0}

/* Record p (non-NULL) holding bytes. LCX_ERR_OOM when the ledger cannot grow (the caller frees p and fails). */
lcx_status lcx_mem_ledger_add(lcx_mem_ledger *l, void *p, size_t bytes);
/* Forget p (NULL or unknown: nothing). */
void lcx_mem_ledger_remove(lcx_mem_ledger *l, void *p);
/* The bytes held now and the most held since the start or the last reset. */
void lcx_mem_ledger_stats(lcx_mem_ledger *l, size_t *in_use, size_t *peak);
/* The high-water mark restarts from what is held now. */
void lcx_mem_ledger_reset_peak(lcx_mem_ledger *l);

#endif /* LCX_KERNELS_MEM_LEDGER_H */
