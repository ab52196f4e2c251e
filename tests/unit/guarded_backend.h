/* A CPU backend whose memory the host cannot touch: the CPU table's ops and copies behind a table whose
 * allocations are page mappings kept PROT_NONE except while one of its own calls runs. Code above the op
 * contract (the model, the trainer) that reads or writes a backend buffer directly -- what works on the CPU and
 * faults on a GPU -- stops here with SIGSEGV at the guilty instruction; the handler names the buffer and prints
 * the stack. Results are the CPU backend's bit for bit (the same kernels run). Test-only, single-threaded host
 * code (the ops' own OpenMP threads run while the memory is open). */
#ifndef LCX_TEST_GUARDED_BACKEND_H
#define LCX_TEST_GUARDED_BACKEND_H

#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "src/core/status.h"

enum { GB_MAX_REGIONS = 4096 };
typedef struct gb_region {
    char *p;
    size_t len, bytes;
} gb_region;
static gb_region gb_regions[GB_MAX_REGIONS];
static int gb_n, gb_is_open;
static size_t gb_in_use, gb_peak; /* the contract's mem_stats: the regions' requested bytes */
static size_t gb_calls;

static void gb_set(int prot) {
    for (int i = 0; i < gb_n; i++)
        if (mprotect(gb_regions[i].p, gb_regions[i].len, prot) != 0) {
            perror("guarded backend: mprotect");
            abort();
        }
    gb_is_open = prot != PROT_NONE;
}
static void gb_open(void) { gb_set(PROT_READ | PROT_WRITE), gb_calls++; }
static void gb_close(void) { gb_set(PROT_NONE); }

static void gb_segv(int sig, siginfo_t *si, void *ctx) {
    (void)sig, (void)ctx;
    char msg[256];
    const char *a = si->si_addr;
    int n = snprintf(msg, sizeof msg, "guarded backend: the host touched %p outside a backend call\n", (void *)a);
    for (int i = 0; i < gb_n; i++)
        if (a >= gb_regions[i].p && a < gb_regions[i].p + gb_regions[i].len)
            n = snprintf(msg, sizeof msg,
                         "guarded backend: the host touched backend buffer %d (%zu bytes) at offset %zu outside a "
                         "backend call\n",
                         i, gb_regions[i].bytes, (size_t)(a - gb_regions[i].p));
    if (n > 0) (void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    void *frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    _exit(3);
}

static lcx_status gb_alloc(size_t bytes, void **out) {
    long page = sysconf(_SC_PAGESIZE);
    size_t len = ((bytes ? bytes : 1) + (size_t)page - 1) / (size_t)page * (size_t)page;
    if (gb_n == GB_MAX_REGIONS) return lcx_fail(LCX_ERR_OOM, "guarded backend: more than %d buffers", GB_MAX_REGIONS);
    void *p = mmap(NULL, len, gb_is_open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return lcx_fail(LCX_ERR_OOM, "guarded backend: %zu bytes", bytes);
    gb_regions[gb_n++] = (gb_region){p, len, bytes};
    gb_in_use += bytes;
    if (gb_in_use > gb_peak) gb_peak = gb_in_use;
    *out = p;
    return LCX_OK;
}
static void gb_free(void *p) {
    for (int i = 0; p && i < gb_n; i++)
        if (gb_regions[i].p == p) {
            munmap(p, gb_regions[i].len);
            gb_in_use -= gb_regions[i].bytes;
            gb_regions[i] = gb_regions[--gb_n];
            return;
        }
}

#define GB_CPU (lcx_backend_cpu())
#define GB_OP(name, T)                                                                                                 \
    static lcx_status gb_##name(lcx_exec *x, const T *a) {                                                             \
        gb_open();                                                                                                     \
        lcx_status s = GB_CPU->name(x, a);                                                                             \
        gb_close();                                                                                                    \
        return s;                                                                                                      \
    }
GB_OP(matmul, lcx_matmul_args)
GB_OP(embedding_fwd, lcx_embedding_args)
GB_OP(embedding_bwd, lcx_embedding_args)
GB_OP(rmsnorm_fwd, lcx_rmsnorm_args)
GB_OP(rmsnorm_bwd, lcx_rmsnorm_args)
GB_OP(rope_fwd, lcx_rope_args)
GB_OP(rope_bwd, lcx_rope_args)
GB_OP(attention_fwd, lcx_attn_args)
GB_OP(attention_bwd, lcx_attn_args)
GB_OP(attention_merge, lcx_attn_merge_args)
GB_OP(swiglu_fwd, lcx_swiglu_args)
GB_OP(swiglu_bwd, lcx_swiglu_args)
GB_OP(cross_entropy, lcx_xent_args)
GB_OP(adamw, lcx_adamw_args)
GB_OP(sqnorm, lcx_sqnorm_args)
GB_OP(cast, lcx_cast_args)
GB_OP(add, lcx_elementwise_args)
GB_OP(scale, lcx_elementwise_args)
GB_OP(axpy, lcx_elementwise_args)
#undef GB_OP

#define GB_COPY(name, D, S)                                                                                            \
    static lcx_status gb_##name(lcx_exec *x, D dst, S src, size_t bytes) {                                             \
        gb_open();                                                                                                     \
        lcx_status s = GB_CPU->name(x, dst, src, bytes);                                                               \
        gb_close();                                                                                                    \
        return s;                                                                                                      \
    }
GB_COPY(copy_h2d, void *, const void *)
GB_COPY(copy_d2h, void *, const void *)
GB_COPY(copy_d2d, void *, const void *)
GB_COPY(copy_d2h_async, void *, const void *)
GB_COPY(copy_h2d_async, void *, const void *)
#undef GB_COPY
static lcx_status gb_zero(lcx_exec *x, void *p, size_t bytes) {
    gb_open();
    lcx_status s = GB_CPU->zero(x, p, bytes);
    gb_close();
    return s;
}
static int gb_available(void) { return 1; }
static void gb_mem_stats(size_t *in_use, size_t *peak) {
    if (in_use) *in_use = gb_in_use;
    if (peak) *peak = gb_peak;
}
static void gb_mem_reset_peak(void) { gb_peak = gb_in_use; }
static lcx_status gb_exec_init(lcx_exec *x) { return GB_CPU->exec_init(x); }
static void gb_exec_destroy(lcx_exec *x) { GB_CPU->exec_destroy(x); }
static lcx_status gb_sync(lcx_exec *x) { return GB_CPU->sync(x); }
static size_t gb_workspace(const lcx_exec *x, lcx_op op, const void *args) { return GB_CPU->workspace(x, op, args); }

/* The guarded table (its SIGSEGV handler installed on first use). */
static const lcx_backend *guarded_backend(void) {
    static lcx_backend t;
    if (!t.name) {
        const lcx_backend *c = GB_CPU;
        t = (lcx_backend){.name = "cpu-guarded", .available = gb_available, .exec_init = gb_exec_init,
                          .exec_destroy = gb_exec_destroy, .sync = gb_sync, .event_create = c->event_create,
                          .event_free = c->event_free, .event_record = c->event_record, .event_wait = c->event_wait,
                          .event_sync = c->event_sync, .event_elapsed = c->event_elapsed, .alloc = gb_alloc,
                          .free = gb_free, .copy_h2d = gb_copy_h2d, .copy_d2h = gb_copy_d2h, .copy_d2d = gb_copy_d2d,
                          .copy_d2h_async = gb_copy_d2h_async, .copy_h2d_async = gb_copy_h2d_async,
                          .host_alloc = c->host_alloc, .host_free = c->host_free, .zero = gb_zero,
                          .workspace = gb_workspace, .mem_stats = gb_mem_stats,
                          .mem_reset_peak = gb_mem_reset_peak,
                          .matmul = gb_matmul, .embedding_fwd = gb_embedding_fwd, .embedding_bwd = gb_embedding_bwd,
                          .rmsnorm_fwd = gb_rmsnorm_fwd, .rmsnorm_bwd = gb_rmsnorm_bwd, .rope_fwd = gb_rope_fwd,
                          .rope_bwd = gb_rope_bwd, .attention_fwd = gb_attention_fwd,
                          .attention_bwd = gb_attention_bwd, .attention_merge = gb_attention_merge,
                          .swiglu_fwd = gb_swiglu_fwd, .swiglu_bwd = gb_swiglu_bwd,
                          .cross_entropy = gb_cross_entropy, .adamw = gb_adamw, .sqnorm = gb_sqnorm, .cast = gb_cast,
                          .add = gb_add, .scale = gb_scale, .axpy = gb_axpy};
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = gb_segv;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, NULL);
    }
    return &t;
}

#endif
