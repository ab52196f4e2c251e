/* cpu_blas: the OpenBLAS kernel set the program asks for when OpenBLAS's own detection fell back to one older than
 * the CPU (kernels/cpu/cpu_blas.h), case by case, and this process's features read against /proc/cpuinfo. */
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_blas.h"
#include "test_util.h"

/* name as a whole word of a /proc/cpuinfo flags line ("fma" is not "fma4") */
static int has_flag(const char *line, const char *name) {
    size_t n = strlen(name);
    for (const char *p = line; (p = strstr(p, name)); p += n)
        if (p > line && p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

static int streq(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static void test_better(void) {
    const unsigned avx2 = LCX_CPU_AVX2_FMA, avx512 = LCX_CPU_AVX2_FMA | LCX_CPU_AVX512;
    const struct {
        const char *detected;
        unsigned features;
        const char *want;
    } cases[] = {
        {"Prescott", avx512, "SkylakeX"},   /* an unknown Xeon model with AVX-512: the case that was measured */
        {"Prescott", avx2, "Haswell"},      /* an unknown AVX2 CPU (Zen included) */
        {"prescott", avx2, "Haswell"},      /* OpenBLAS's names in any case */
        {"Nehalem", avx512, "SkylakeX"},
        {"Sandybridge", avx2, "Haswell"},   /* AVX without FMA kernels */
        {"Piledriver", avx2, "Haswell"},
        {"Prescott", 0, NULL},              /* a CPU without AVX2: Prescott is right */
        {"Prescott", LCX_CPU_AVX512, NULL}, /* AVX-512 bits alone are not a CPU we know */
        {"Haswell", avx512, NULL},          /* a detection that already uses AVX2 is left alone */
        {"Zen", avx512, NULL},
        {"SkylakeX", avx512, NULL},
        {"Cooperlake", avx512, NULL},
        {"SapphireRapids", avx512, NULL},
        {"Excavator", avx2, NULL},          /* not in the pre-AVX2 list: never guessed */
        {NULL, avx512, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = lcx_cpu_blas_core_better(cases[i].detected, cases[i].features);
        CHECK_MSG(streq(got, cases[i].want), "%s with features %u: got %s, want %s",
                  cases[i].detected ? cases[i].detected : "(null)", cases[i].features, got ? got : "(null)",
                  cases[i].want ? cases[i].want : "(null)");
    }
}

/* The features this process reports, against the flags the kernel lists. */
static void test_features(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return; /* not Linux: nothing to compare with */
    char line[8192];
    int avx2 = 0, fma = 0, f512 = 0, bw = 0, dq = 0, vl = 0, seen = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            seen = 1;
            avx2 = has_flag(line, "avx2"), fma = has_flag(line, "fma");
            f512 = has_flag(line, "avx512f"), bw = has_flag(line, "avx512bw");
            dq = has_flag(line, "avx512dq"), vl = has_flag(line, "avx512vl");
            break;
        }
    fclose(f);
    if (!seen) return; /* no x86 flags line */
    unsigned want = avx2 && fma ? LCX_CPU_AVX2_FMA : 0u;
    if (want && f512 && bw && dq && vl) want |= LCX_CPU_AVX512;
    CHECK_MSG(lcx_cpu_features() == want, "features %u, /proc/cpuinfo says %u", lcx_cpu_features(), want);
    CHECK(lcx_cpu_blas_core() && strlen(lcx_cpu_blas_core()) > 0);
    CHECK(lcx_cpu_blas_config() && strstr(lcx_cpu_blas_config(), "OpenBLAS"));
    printf("cpu: features %u, OpenBLAS kernels %s in this process\n", lcx_cpu_features(), lcx_cpu_blas_core());
}

int main(void) {
    test_better();
    test_features();
    return test_summary("test_cpu_blas");
}
