/* The allocation ledger behind the backends' mem_stats (kernels/mem_ledger.c) against a plain array of live
 * (pointer, size) pairs: 20000 random adds and removes of pointers chosen to collide in the hash (every 4096th
 * byte), in random order, with removes of unknown pointers and NULL; after every operation the bytes held equal
 * the array's sum and the high-water mark its running maximum, and at the end every size comes back. Then the
 * CPU backend's own ledger: alloc and free move mem_stats by the 64-byte-rounded size, host_alloc does not, and
 * mem_reset_peak restarts the mark from what is held. */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/mem_ledger.h"
#include "test_util.h"

enum { N = 3000, OPS = 20000 };

static uint64_t rng = 12345;
static uint64_t next(void) { return rng = rng * 6364136223846793005ull + 1442695040888963407ull, rng >> 33; }

static void test_ledger(void) {
    static lcx_mem_ledger l = LCX_MEM_LEDGER_INIT;
    static void *ptr[N];
    static size_t size[N];
    int live = 0, bad = 0;
    size_t sum = 0, peak = 0, next_id = 1;
    for (int op = 0; op < OPS; op++) {
        const uint64_t r = next();
        if (live < N && (live == 0 || r % 3 != 0)) {
            ptr[live] = (void *)(uintptr_t)(next_id++ * 4096); /* low bits equal: a weak hash would collide */
            size[live] = (size_t)(next() % 100000) + 1;
            CHECK_OK(lcx_mem_ledger_add(&l, ptr[live], size[live]));
            sum += size[live++];
            if (sum > peak) peak = sum;
        } else if (r % 7 == 0) {
            lcx_mem_ledger_remove(&l, (void *)(uintptr_t)(next_id * 4096 + 8)); /* never added */
            lcx_mem_ledger_remove(&l, NULL);
        } else {
            const int k = (int)(next() % (uint64_t)live);
            lcx_mem_ledger_remove(&l, ptr[k]);
            sum -= size[k];
            ptr[k] = ptr[--live], size[k] = size[live];
        }
        size_t in_use = 0, hwm = 0;
        lcx_mem_ledger_stats(&l, &in_use, &hwm);
        bad += in_use != sum || hwm != peak;
    }
    CHECK_MSG(bad == 0, "%d operations left the ledger off the reference", bad);
    lcx_mem_ledger_reset_peak(&l);
    size_t in_use = 0, hwm = 0;
    lcx_mem_ledger_stats(&l, &in_use, &hwm);
    CHECK(in_use == sum && hwm == sum);
    for (int k = live - 1; k >= 0; k--) lcx_mem_ledger_remove(&l, ptr[k]);
    lcx_mem_ledger_stats(&l, &in_use, &hwm);
    CHECK(in_use == 0 && hwm == sum);
    CHECK(l.count == 0);
    free(l.slots);
}

static void test_cpu_backend(void) {
    const lcx_backend *be = lcx_backend_cpu();
    size_t h0 = 0, h = 0, pk = 0;
    be->mem_stats(&h0, NULL);
    be->mem_reset_peak();
    void *a = NULL, *b = NULL, *host = NULL;
    CHECK_OK(be->alloc(1000, &a));
    be->mem_stats(&h, &pk);
    CHECK(h == h0 + 1024 && pk == h0 + 1024);
    CHECK_OK(be->alloc(0, &b));
    CHECK_OK(be->host_alloc(1 << 20, &host));
    be->mem_stats(&h, &pk);
    CHECK(h == h0 + 1024 + 64 && pk == h);
    be->free(a);
    be->mem_stats(&h, &pk);
    CHECK(h == h0 + 64 && pk == h0 + 1024 + 64);
    be->mem_reset_peak();
    be->mem_stats(NULL, &pk);
    CHECK(pk == h0 + 64);
    be->free(b);
    be->host_free(host);
    be->mem_stats(&h, NULL);
    CHECK(h == h0);
}

int main(void) {
    test_ledger();
    test_cpu_backend();
    return test_summary("test_mem_ledger");
}
