/* cpu_scratch: op workspaces carved from the front of the exec's arena. Every part is rounded up to 64 bytes
 * (the arena's alignment), so each part, and each thread's slot of a per-thread part, starts aligned. Workspace
 * sizes add up the same rounded parts and saturate at SIZE_MAX, so an absurd size fails the arena check instead
 * of wrapping around. */
#ifndef LCX_CPU_SCRATCH_H
#define LCX_CPU_SCRATCH_H

#include <omp.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a part of `count` elements of `elem` bytes, rounded up to 64 (SIZE_MAX if negative or too large). */
static inline size_t lcx_cpu_ws_part(int64_t count, size_t elem) {
    size_t b;
    if (count < 0 || __builtin_mul_overflow((size_t)count, elem, &b) || b > SIZE_MAX - 63) return SIZE_MAX;
    return (b + 63) & ~(size_t)63;
}
static inline size_t lcx_cpu_ws_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static inline size_t lcx_cpu_ws_mul(size_t a, int64_t n) {
    size_t r;
    return n < 0 || __builtin_mul_overflow(a, (size_t)n, &r) ? SIZE_MAX : r;
}

/* Threads of the op's parallel regions: per-thread parts are sized by it at the workspace query and the op
 * runs its team with at most as many (omp_get_max_threads() at the call, as both see the same setting). */
static inline int lcx_cpu_threads(void) { return omp_get_max_threads(); }

/* A cursor over the arena: parts are taken in the order the workspace added them. */
typedef struct lcx_cpu_carve {
    char *next;
} lcx_cpu_carve;
static inline void *lcx_cpu_take(lcx_cpu_carve *c, size_t part_bytes) {
    void *p = c->next;
    c->next += part_bytes;
    return p;
}

#endif
