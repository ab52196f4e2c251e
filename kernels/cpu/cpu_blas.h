/* cpu_blas: which OpenBLAS kernel set runs the CPU backend's GEMMs, and the one that should.
 *
 * Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels by CPU family and model. A model it does not know
 * (a newer Xeon, or a VM that reports "Intel(R) Xeon(R) Processor") falls back to Prescott: SSE3 kernels on a CPU
 * with AVX-512. Measured on such a 2-core VM: a 4k-token evaluation of SmolLM2-135M took 139 s with Prescott, 50 s
 * with SkylakeX; a training step of the 10M-parameter benchmark model ran at 400 against 1029 tokens/s
 * (docs/benchmarks.md). OpenBLAS reads OPENBLAS_CORETYPE when it is loaded, before main, so the program sets it
 * and re-executes itself (tools/lcextend.c) when the user has not chosen a kernel set. */
#ifndef LCX_CPU_BLAS_H
#define LCX_CPU_BLAS_H

/* CPU features that decide the kernel set (bits of lcx_cpu_features). */
enum {
    LCX_CPU_AVX2_FMA = 1,    /* AVX2 and FMA3 */
    LCX_CPU_AVX512 = 2,      /* AVX-512 F, BW, DQ and VL (what OpenBLAS's SkylakeX kernels use) */
};
unsigned lcx_cpu_features(void);

/* The kernel set OpenBLAS chose in this process ("Prescott", "Haswell", "SkylakeX", ...), and its build line
 * ("OpenBLAS 0.3.21 DYNAMIC_ARCH ... MAX_THREADS=64"). */
const char *lcx_cpu_blas_core(void);
const char *lcx_cpu_blas_config(void);

/* The kernel set to ask for when `detected` predates AVX2 but the CPU has `features`: "SkylakeX" with AVX-512,
 * "Haswell" with AVX2 + FMA; NULL when the detected set is as good as the CPU allows (or unknown to this list). */
const char *lcx_cpu_blas_core_better(const char *detected, unsigned features);

#endif
