/* cpu_internal: the CPU backend's ops (one file per family), gathered into the table by cpu_backend.c.
 * Shapes and semantics are documented once, in kernels/backend.h. The table's entries check every argument first
 * (kernels/backend_check.c), so an op here starts from valid sizes, dtypes, pointers and arena. */
#ifndef LCX_CPU_INTERNAL_H
#define LCX_CPU_INTERNAL_H

#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_act.h"
#include "kernels/cpu/cpu_scratch.h"

/* The hot loops outside sgemm (softmax exp, elementwise) get an AVX2 clone chosen at load time (ifunc) on
 * x86-64, so a generic build still uses 8-wide vectors where the CPU has them (~2x on those loops). Results of
 * the two clones are identical (no FMA contraction: an "arch=" clone would be picked by CPU model, not
 * features, and so missed on AMD). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(LCX_NO_MULTIVERSION)
#define LCX_CPU_HOT __attribute__((target_clones("avx2", "default")))
/* Loops that follow PyTorch's fused multiply-adds with fmaf: without hardware FMA, fmaf is a libm call per
 * element; the "fma" clone (AVX + FMA) inlines and vectorises it. fmaf rounds once either way: same results. */
#define LCX_CPU_HOT_FMA __attribute__((target_clones("fma", "default")))
#else
#define LCX_CPU_HOT
#define LCX_CPU_HOT_FMA
#endif
/* Helpers called from a hot loop: inlined always, so that they are compiled into the caller's clone (a helper
 * left out of line is built for the baseline target: SSE2 exps in an AVX2 loop). */
#if defined(__GNUC__)
#define LCX_CPU_INLINE __attribute__((always_inline))
#else
#define LCX_CPU_INLINE
#endif

/* exp(x) for x <= 0 in straight-line float code the compiler vectorises (Cephes expf: Cody-Waite reduction by
 * ln 2, degree-6 polynomial, 2^n through the exponent bits), within 2 ulp of expf. Inputs below -87 are clamped
 * (the result, ~1e-38, is negligible against a softmax row sum, which is >= 1), above 88 too (never reached:
 * arguments are score - row max or score - LSE); NaN propagates. Used by the softmax of attention and of the
 * cross-entropy. */
static inline float lcx_cpu_expf(float x0) {
    float x = x0 > -87.0f ? x0 : -87.0f; /* NaN too: keeps the float-to-int conversion below defined */
    x = x < 88.0f ? x : 88.0f;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n; memcpy, not a union: gcc vectorises only this form */
    float sc;
    memcpy(&sc, &bits, sizeof sc);
    float y = p * sc;
    return x0 == x0 ? y : x0; /* NaN in, NaN out */
}

/* cpu_memory.c */
lcx_status lcx_cpu_alloc(size_t bytes, void **out); /* counted in the backend's ledger (mem_stats) */
void lcx_cpu_free(void *p);
lcx_status lcx_cpu_host_alloc(size_t bytes, void **out); /* the same memory, not counted */
void lcx_cpu_host_free(void *p);
void lcx_cpu_mem_stats(size_t *in_use, size_t *peak);
void lcx_cpu_mem_reset_peak(void);
size_t lcx_cpu_device_used(void);
lcx_status lcx_cpu_copy(lcx_exec *x, void *dst, const void *src, size_t bytes);
lcx_status lcx_cpu_zero(lcx_exec *x, void *p, size_t bytes);

/* cpu_matmul.c */
lcx_status lcx_cpu_matmul(lcx_exec *x, const lcx_matmul_args *a);
size_t lcx_cpu_matmul_ws(const lcx_matmul_args *a);
/* The CPU backend parallelises with one OpenMP team and calls sgemm from its threads, one block each. A pthreads
 * OpenBLAS would run a second pool of threads on the same cores (spinning in sched_yield between calls: 10-15%
 * of a training step on 2 cores, and calls from several threads serialise on its lock), so it is switched to one
 * thread for the process, once. An OpenMP OpenBLAS is already serial inside a parallel region. */
void lcx_cpu_blas_serial(void);

/* cpu_embedding.c */
lcx_status lcx_cpu_embedding_fwd(lcx_exec *x, const lcx_embedding_args *a);
lcx_status lcx_cpu_embedding_bwd(lcx_exec *x, const lcx_embedding_args *a);

/* cpu_rmsnorm.c */
lcx_status lcx_cpu_rmsnorm_fwd(lcx_exec *x, const lcx_rmsnorm_args *a);
lcx_status lcx_cpu_rmsnorm_bwd(lcx_exec *x, const lcx_rmsnorm_args *a);
size_t lcx_cpu_rmsnorm_ws(int bwd, const lcx_rmsnorm_args *a);

/* cpu_rope.c */
lcx_status lcx_cpu_rope_fwd(lcx_exec *x, const lcx_rope_args *a);
lcx_status lcx_cpu_rope_bwd(lcx_exec *x, const lcx_rope_args *a);

/* cpu_attention.c, cpu_attention_bwd.c */
lcx_status lcx_cpu_attention_fwd(lcx_exec *x, const lcx_attn_args *a);
lcx_status lcx_cpu_attention_bwd(lcx_exec *x, const lcx_attn_args *a);
lcx_status lcx_cpu_attention_merge(lcx_exec *x, const lcx_attn_merge_args *a);
size_t lcx_cpu_attention_fwd_ws(const lcx_attn_args *a);
size_t lcx_cpu_attention_bwd_ws(const lcx_attn_args *a);

/* cpu_swiglu.c */
lcx_status lcx_cpu_swiglu_fwd(lcx_exec *x, const lcx_swiglu_args *a);
lcx_status lcx_cpu_swiglu_bwd(lcx_exec *x, const lcx_swiglu_args *a);

/* cpu_cross_entropy.c */
lcx_status lcx_cpu_cross_entropy(lcx_exec *x, const lcx_xent_args *a);
size_t lcx_cpu_cross_entropy_ws(const lcx_xent_args *a);

/* cpu_adamw.c */
lcx_status lcx_cpu_adamw(lcx_exec *x, const lcx_adamw_args *a);

/* cpu_sqnorm.c */
lcx_status lcx_cpu_sqnorm(lcx_exec *x, const lcx_sqnorm_args *a);
size_t lcx_cpu_sqnorm_ws(const lcx_sqnorm_args *a);

/* cpu_elementwise.c */
lcx_status lcx_cpu_cast(lcx_exec *x, const lcx_cast_args *a);
lcx_status lcx_cpu_add(lcx_exec *x, const lcx_elementwise_args *a);
lcx_status lcx_cpu_scale(lcx_exec *x, const lcx_elementwise_args *a);
lcx_status lcx_cpu_axpy(lcx_exec *x, const lcx_elementwise_args *a);

#endif /* LCX_CPU_INTERNAL_H */
