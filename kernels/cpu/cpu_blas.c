/* cpu_blas: the OpenBLAS kernel set of this process and the one this CPU can run (cpu_blas.h). */
#include "kernels/cpu/cpu_blas.h"

#include <cblas.h>
#include <stddef.h>
#include <strings.h>

unsigned lcx_cpu_features(void) {
    unsigned f = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= LCX_CPU_AVX2_FMA;
    if ((f & LCX_CPU_AVX2_FMA) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        f |= LCX_CPU_AVX512;
#endif
    return f;
}

const char *lcx_cpu_blas_core(void) { return openblas_get_corename(); }
const char *lcx_cpu_blas_config(void) { return openblas_get_config(); }

const char *lcx_cpu_blas_core_better(const char *detected, unsigned features) {
    /* OpenBLAS's x86-64 kernel sets without AVX2 (its corename table); anything else is left alone */
    static const char *const pre_avx2[] = {"Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias",
                                           "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Athlon",
                                           "Opteron", "Opteron_SSE3", "Barcelona", "Nano", "Sandybridge",
                                           "Bobcat", "Bulldozer", "Piledriver", "Steamroller"};
    if (!detected || !(features & LCX_CPU_AVX2_FMA)) return NULL;
    for (size_t i = 0; i < sizeof pre_avx2 / sizeof pre_avx2[0]; i++)
        if (strcasecmp(detected, pre_avx2[i]) == 0) return features & LCX_CPU_AVX512 ? "SkylakeX" : "Haswell";
    return NULL;
}
