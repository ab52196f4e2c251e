/* emu_cuda.h: the CUDA subset the kernels of kernels/cuda use, emulated on the CPU for tests/cuda_emu (stands in for
 * <cuda_runtime.h> in the kernels' translation units). Each CUDA thread of a block is a fiber (below) on the
 * launching host thread (blocks of up to three dimensions, x fastest), the blocks of a launch one after another:
 * __syncthreads and __syncwarp are real barriers (a fiber that reaches one waits, switched out, until every thread
 * of its block or warp has), a kernel's `__shared__` arrays are function statics (one copy, which the block's
 * threads share and the next block reuses), warp shuffles go through a per-warp slot array between two barriers
 * (so a shuffle that not every lane of the warp reaches stops the run with a message instead of passing), dynamic
 * shared memory is a fresh buffer of exactly the launch's size filled with NaN (AddressSanitizer catches a read or
 * write past it, a read of an unwritten float shows as NaN in the results). A kernel asking for more than sm_80's
 * 163 KiB fails like cudaFuncSetAttribute would. The tensor-core kernels' mma.sync, ldmatrix and cp.async are
 * emulated from their register layouts and group semantics, the ordered sums' wait and post from launch order
 * (below). Float intrinsics are the host's IEEE operations; expf/logf are glibc's. Fibers, not threads: a barrier
 * costs a few context switches instead of a trip through the kernel's scheduler for every thread (the threads
 * this emulator first used spent most of CI's emulation time in sched_yield, clone and munmap). */
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <ucontext.h>

#include <deque>
#include <vector>

#include "emu_runtime.h" /* the runtime API (host side: emu_runtime.cpp) */

#define LCX_CUDA_EMU 1 /* cuda_mma.h, cuda_cp_async.h, cuda_order.h: mma.sync, ldmatrix, cp.async and the ordered
                        * sums come from here */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(x)

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct emu_idx {
    unsigned x, y, z;
};
inline emu_idx threadIdx, blockIdx; /* the running fiber's (set at every switch) */
inline dim3 gridDim, blockDim;

/* A barrier among `expected` fibers: the last to arrive opens it (a new generation) and goes on; the others wait
 * in emu_yield until the generation changes. */
struct emu_bar {
    unsigned expected, count;
    unsigned long gen;
};
inline void emu_yield();
inline unsigned long emu_progress; /* barriers opened or left so far: a pass over a block's fibers that changes
                                    * nothing is a deadlock */
inline void emu_arrive_and_wait(emu_bar &b) {
    const unsigned long g = b.gen;
    if (++b.count == b.expected) {
        b.count = 0, b.gen++, emu_progress++;
        return;
    }
    while (b.gen == g) emu_yield();
    emu_progress++;
}
inline emu_bar emu_block_bar;
inline std::vector<emu_bar> emu_warp_bar;
inline double emu_shfl[32][32];
inline float *emu_smem;                  /* the kernels' `extern __shared__ float sm[]` (run.sh rewrites it) */
inline size_t emu_smem_bytes;            /* its size */
inline size_t emu_smem_limit = 48 * 1024; /* raised by cudaFuncSetAttribute for the next launch */
inline size_t emu_max_smem = 0;
inline unsigned long emu_launches; /* launches so far: one block's fiber order alternates across them too */

inline void __syncthreads() { emu_arrive_and_wait(emu_block_bar); }
inline void __syncwarp() { emu_arrive_and_wait(emu_warp_bar[threadIdx.x / 32]); }
template <class T> T __shfl_xor_sync(unsigned, T v, int off) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    T *slot = (T *)emu_shfl[w];
    slot[l] = v;
    emu_arrive_and_wait(emu_warp_bar[w]);
    T r = slot[l ^ (unsigned)off];
    emu_arrive_and_wait(emu_warp_bar[w]);
    return r;
}
/* mma.sync m16n8k16 bf16 -> f32 (kernels/cuda/cuda_mma.h has the fragment layouts): every lane parks its A and
 * B fragment registers, then computes its four accumulators from the warp's fragments, each as a float32 fmaf
 * chain over k in order (the tensor core's own summation order and internal precision are not emulated). */
inline uint32_t emu_mma_frag[32][32][6];
inline float emu_bf16_half(uint32_t reg, int hi) { return __builtin_bit_cast(float, ((reg >> (16 * hi)) & 0xffffu) << 16); }
inline void lcx_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    uint32_t *mine = emu_mma_frag[w][l];
    mine[0] = a[0], mine[1] = a[1], mine[2] = a[2], mine[3] = a[3], mine[4] = b0, mine[5] = b1;
    emu_arrive_and_wait(emu_warp_bar[w]);
    auto A = [&](int r, int k) { return emu_bf16_half(emu_mma_frag[w][(r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)], k & 1); };
    auto B = [&](int k, int n) { return emu_bf16_half(emu_mma_frag[w][n * 4 + (k % 8) / 2][4 + (k >= 8)], k & 1); };
    const int g = (int)l / 4, t = (int)l % 4;
    for (int c = 0; c < 4; c++) {
        const int r = g + 8 * (c >= 2), n = 2 * t + (c & 1);
        float acc = d[c];
        for (int k = 0; k < 16; k++) acc = fmaf(A(r, k), B(k, n), acc);
        d[c] = acc;
    }
    emu_arrive_and_wait(emu_warp_bar[w]);
}
/* ldmatrix.x4 (kernels/cuda/cuda_mma.h): every lane parks its row address (which must lie in the launch's shared
 * memory, 16-byte aligned), then reads its four registers from the rows the warp gave. */
inline const uint16_t *emu_ldm_row[32][32];
inline void emu_check_shared(const void *p, size_t n, const char *what) {
    const char *b = (const char *)emu_smem, *q = (const char *)p;
    if (((uintptr_t)p & 15) || q < b || q + n > b + emu_smem_bytes) {
        fprintf(stderr, "%s: %p is not a 16-byte aligned place of %zu bytes in shared memory\n", what, p, n);
        abort();
    }
}
inline void emu_ldmatrix(uint32_t (&r)[4], const uint16_t *row, bool trans) {
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    emu_check_shared(row, 16, "ldmatrix");
    emu_ldm_row[w][l] = row;
    emu_arrive_and_wait(emu_warp_bar[w]);
    for (unsigned i = 0; i < 4; i++) {
        const uint16_t *const *m = emu_ldm_row[w] + 8 * i; /* matrix i's eight rows */
        r[i] = trans ? (uint32_t)m[2 * t][g] | (uint32_t)m[2 * t + 1][g] << 16
                     : (uint32_t)m[g][2 * t] | (uint32_t)m[g][2 * t + 1] << 16;
    }
    emu_arrive_and_wait(emu_warp_bar[w]);
}
inline void lcx_ldmatrix_x4(uint32_t (&r)[4], const uint16_t *row) { emu_ldmatrix(r, row, false); }
inline void lcx_ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t *row) { emu_ldmatrix(r, row, true); }

/* cp.async (kernels/cuda/cuda_cp_async.h): each copy waits in its thread's groups and is done by the first wait
 * that must cover it, the latest moment a GPU may do it, so a read before the wait (or before the barrier after
 * it) sees the NaN the launch filled shared memory with. */
struct emu_cp {
    void *dst;
    const void *src;
};
struct emu_cp_state {
    std::vector<emu_cp> open;
    std::deque<std::vector<emu_cp>> groups;
};
inline std::vector<emu_cp_state> emu_cp_fiber; /* per fiber */
inline unsigned emu_cur;                       /* the running fiber */
inline void lcx_cp_async16(void *dst, const void *src) {
    emu_check_shared(dst, 16, "cp.async");
    if ((uintptr_t)src & 15) {
        fprintf(stderr, "cp.async: global source %p is not 16-byte aligned\n", src);
        abort();
    }
    emu_cp_fiber[emu_cur].open.push_back({dst, src});
}
inline void lcx_cp_async_commit() {
    emu_cp_state &me = emu_cp_fiber[emu_cur];
    me.groups.push_back(std::move(me.open));
    me.open.clear();
}
template <int N> void lcx_cp_async_wait() {
    std::deque<std::vector<emu_cp>> &groups = emu_cp_fiber[emu_cur].groups;
    while (groups.size() > (size_t)N) {
        for (const emu_cp &c : groups.front()) memcpy(c.dst, c.src, 16);
        groups.pop_front();
    }
}

/* Ordered sums across blocks (kernels/cuda/cuda_order.h). The blocks run in launch order, so a wait that is not
 * met at once waits for a later block: a GPU may deadlock on it (that block need not be resident), so stop. */
inline void lcx_order_wait(const int *counter, int rank) {
    if (threadIdx.x == 0 && *counter != rank) {
        fprintf(stderr, "lcx_order_wait: block (%u, %u, %u) waits for counter %d to reach %d: only a later block can "
                "post it\n", blockIdx.x, blockIdx.y, blockIdx.z, *counter, rank);
        abort();
    }
    __syncthreads();
}
inline void lcx_order_post(int *counter) {
    __syncthreads();
    if (threadIdx.x == 0) ++*counter;
}
template <class T> T __ldcg(const T *p) { return *p; }
template <class T> void __stcg(T *p, T v) { *p = v; }

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
template <class K> cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int v) {
    if (v > 163 * 1024) return cudaErrorInvalidValue;
    emu_smem_limit = (size_t)v;
    return cudaSuccess;
}

/* The fibers. AddressSanitizer is told of every switch (its fiber annotations), so it knows which stack is live. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN_START(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define EMU_ASAN_FINISH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
#else
#define EMU_ASAN_START(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define EMU_ASAN_FINISH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#endif
inline constexpr size_t emu_stack_bytes = 1 << 20; /* a kernel's frame under ASan at -O1, with room to spare */
inline void emu_fiber_main();
#if defined(__x86_64__)
/* A switch saves the callee-saved registers, the SSE and x87 control words and the stack pointer; swapcontext
 * would also make a signal-mask system call, which at a switch per thread per barrier dominated the run. */
struct emu_ctx {
    void *sp;
};
extern "C" void emu_switch(emu_ctx *from, const emu_ctx *to);
asm(R"(
    .text
    .weak emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq (%rsi), %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
/* A fresh fiber's stack as emu_switch leaves a suspended one: control words, six registers, then emu_fiber_main as
 * the return address, placed so that the function starts with the stack alignment of a call. */
inline void emu_ctx_start(emu_ctx &c, char *stack, size_t size) {
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + size) & ~(uintptr_t)15) - 16);
    top[1] = 0; /* emu_fiber_main's own return address: it never returns */
    top[0] = (uint64_t)(uintptr_t)&emu_fiber_main;
    uint64_t *sp = top - 7;
    for (int i = 1; i < 7; i++) sp[i] = 0;
    sp[0] = 0x1f80 | (uint64_t)0x37f << 32; /* MXCSR and x87 control word at their defaults */
    c.sp = sp;
}
#else
struct emu_ctx {
    ucontext_t uc;
};
inline void emu_switch(emu_ctx *from, const emu_ctx *to) { swapcontext(&from->uc, &to->uc); }
inline void emu_ctx_start(emu_ctx &c, char *stack, size_t size) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, emu_fiber_main, 0);
}
#endif
struct emu_fiber {
    emu_ctx ctx;
    char *stack; /* mmap'd once, a guard page at its low end, kept for later launches */
    emu_idx tid;
    bool done;
};
inline std::vector<emu_fiber> emu_fibers;
inline emu_ctx emu_sched_ctx;
inline const void *emu_sched_bottom; /* the launching thread's stack, for the annotations of switches back */
inline size_t emu_sched_size;
inline void (*emu_body)(void *);
inline void *emu_body_arg;
inline void emu_yield() {
    void *fake = nullptr;
    EMU_ASAN_START(&fake, emu_sched_bottom, emu_sched_size);
    emu_switch(&emu_fibers[emu_cur].ctx, &emu_sched_ctx);
    EMU_ASAN_FINISH(fake, nullptr, nullptr);
}
inline void emu_fiber_main() {
    EMU_ASAN_FINISH(nullptr, &emu_sched_bottom, &emu_sched_size);
    emu_body(emu_body_arg);
    emu_fibers[emu_cur].done = true;
    EMU_ASAN_START(nullptr, emu_sched_bottom, emu_sched_size); /* nullptr: this fiber's stack frame ends here */
    emu_switch(&emu_fibers[emu_cur].ctx, &emu_sched_ctx);      /* never resumed */
}
/* Runs one block: every fiber from the start of body(arg) to its end, each until it waits at a barrier, in turn:
 * thread 0 first, or (reverse) the last thread first. The launches alternate the two orders by block, so a thread
 * that reads another's write without the barrier between them reads before it in one of them. */
inline void emu_run_block(unsigned nt, bool reverse, void (*body)(void *), void *arg) {
    while (emu_fibers.size() < nt) {
        emu_fiber f{};
        f.stack = (char *)mmap(nullptr, emu_stack_bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (f.stack == MAP_FAILED || mprotect(f.stack, 4096, PROT_NONE) != 0) {
            perror("emu_launch: a fiber's stack");
            abort();
        }
        emu_fibers.push_back(f);
    }
    emu_body = body, emu_body_arg = arg;
    for (unsigned t = 0; t < nt; t++) {
        emu_fiber &f = emu_fibers[t];
        emu_ctx_start(f.ctx, f.stack, emu_stack_bytes);
        f.tid = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
        f.done = false;
    }
    for (unsigned live = nt; live > 0;) {
        const unsigned long before = emu_progress;
        unsigned ended = 0;
        for (unsigned i = 0; i < nt; i++) {
            const unsigned t = reverse ? nt - 1 - i : i;
            emu_fiber &f = emu_fibers[t];
            if (f.done) continue;
            emu_cur = t;
            threadIdx = f.tid;
            void *fake = nullptr;
            EMU_ASAN_START(&fake, f.stack, emu_stack_bytes);
            emu_switch(&emu_sched_ctx, &f.ctx);
            EMU_ASAN_FINISH(fake, nullptr, nullptr);
            if (f.done) ended++;
        }
        live -= ended;
        if (live > 0 && ended == 0 && emu_progress == before) {
            fprintf(stderr, "emu_launch: block (%u, %u, %u): %u threads wait at barriers that the others never reach "
                    "(a __syncthreads or warp operation not reached by every thread of its block or warp)\n",
                    blockIdx.x, blockIdx.y, blockIdx.z, live);
            abort();
        }
    }
}

/* kernel<<<grid, block, smem, stream>>>(args...), rewritten by run.sh into this call. */
template <class K, class... A> void emu_launch(K kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t, A... args) {
    if (smem > emu_smem_limit) {
        fprintf(stderr, "emu_launch: %zu bytes of shared memory without the opt-in (limit %zu)\n", smem,
                emu_smem_limit);
        abort();
    }
    emu_max_smem = smem > emu_max_smem ? smem : emu_max_smem;
    emu_smem_limit = 48 * 1024;
    gridDim = grid;
    blockDim = block;
    const unsigned nt = block.x * block.y * block.z;
    emu_block_bar = {nt, 0, 0};
    emu_warp_bar.clear();
    for (unsigned w = 0; w < (nt + 31) / 32; w++) emu_warp_bar.push_back({nt - 32 * w < 32 ? nt - 32 * w : 32, 0, 0});
    emu_cp_fiber.assign(nt, {}); /* nothing in flight */
    float *sb = (float *)malloc(smem ? smem : 4);
    emu_smem = sb;
    emu_smem_bytes = smem;
    auto run = [&] { kernel(args...); };
    const unsigned long parity = emu_launches++;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = {bx, by, bz};
                for (size_t i = 0; i < smem / 4; i++) sb[i] = NAN;
                for (emu_cp_state &c : emu_cp_fiber) c.open.clear(), c.groups.clear();
                emu_run_block(nt, (parity + bx + by + bz) % 2, [](void *r) { (*(decltype(run) *)r)(); }, &run);
            }
    free(sb);
}
