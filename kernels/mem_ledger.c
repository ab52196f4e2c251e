/* mem_ledger: pointer -> size, open addressing with linear probing and backward-shift deletion (no tombstones). */
#include "kernels/mem_ledger.h"

#include <stdint.h>
#include <stdlib.h>

struct lcx_ledger_entry {
    void *p; /* NULL: empty */
    size_t bytes;
};

static size_t slot_of(const lcx_mem_ledger *l, const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing: the high bits mix best */
    return (size_t)(h >> 32) & (l->cap - 1);
}

static void put(lcx_mem_ledger *l, void *p, size_t bytes) {
    size_t i = slot_of(l, p);
    while (l->slots[i].p) i = (i + 1) & (l->cap - 1);
    l->slots[i] = (struct lcx_ledger_entry){p, bytes};
}

static int grow(lcx_mem_ledger *l) {
    const size_t old_cap = l->cap, cap = old_cap ? 2 * old_cap : 64;
    struct lcx_ledger_entry *old = l->slots, *s = calloc(cap, sizeof *s);
    if (!s) return 0;
    l->slots = s, l->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].p) put(l, old[i].p, old[i].bytes);
    free(old);
    return 1;
}

lcx_status lcx_mem_ledger_add(lcx_mem_ledger *l, void *p, size_t bytes) {
    pthread_mutex_lock(&l->lock);
    int ok = 2 * (l->count + 1) <= l->cap || grow(l);
    if (ok) {
        put(l, p, bytes);
        l->count++;
        l->in_use += bytes;
        if (l->in_use > l->peak) l->peak = l->in_use;
    }
    pthread_mutex_unlock(&l->lock);
    LCX_FAIL_IF(!ok, LCX_ERR_OOM, "alloc: out of host memory for the allocation ledger");
    return LCX_OK;
}

void lcx_mem_ledger_remove(lcx_mem_ledger *l, void *p) {
    if (!p) return;
    pthread_mutex_lock(&l->lock);
    size_t i = l->cap ? slot_of(l, p) : 0;
    while (l->cap && l->slots[i].p && l->slots[i].p != p) i = (i + 1) & (l->cap - 1);
    if (l->cap && l->slots[i].p == p) {
        l->in_use -= l->slots[i].bytes;
        l->count--;
        l->slots[i].p = NULL;
        /* backward shift: move later entries of the probe run into the hole when their home allows it */
        for (size_t j = (i + 1) & (l->cap - 1); l->slots[j].p; j = (j + 1) & (l->cap - 1)) {
            const size_t home = slot_of(l, l->slots[j].p);
            /* j's entry may fill hole i unless its home lies cyclically in (i, j] */
            const int home_after_hole = i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!home_after_hole) {
                l->slots[i] = l->slots[j];
                l->slots[j].p = NULL;
                i = j;
            }
        }
    }
    pthread_mutex_unlock(&l->lock);
}

void lcx_mem_ledger_stats(lcx_mem_ledger *l, size_t *in_use, size_t *peak) {
    pthread_mutex_lock(&l->lock);
    if (in_use) *in_use = l->in_use;
    if (peak) *peak = l->peak;
    pthread_mutex_unlock(&l->lock);
}

void lcx_mem_ledger_reset_peak(lcx_mem_ledger *l) {
    pthread_mutex_lock(&l->lock);
    l->peak = l->in_use;
    pthread_mutex_unlock(&l->lock);
}
