/* Load benchmark: open + validate a safetensors file and read every tensor byte (a checksum, so each page is
 * really touched), repeated. Driven by bench/safetensors_load.sh, which times Python safetensors on the same file.
 *
 * usage: bench_safetensors_load FILE [REPEATS]
 * prints one line per repeat ("repeat R: WALL s (GB/s) cpu CPU s": wall clock and process CPU time, the latter
 * steadier on a shared machine) and "best_s=... median_s=... checksum=..." (checksum: sum mod 2^64 of the
 * little-endian u64 words of every tensor, plus its trailing bytes one by one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/safetensors.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t checksum_tail(const uint8_t *p, uint64_t i, uint64_t n, uint64_t s) {
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        s += w;
    }
    for (; i < n; i++) s += p[i];
    return s;
}

static uint64_t checksum_portable(const uint8_t *p, uint64_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, i = 0;
    for (; i + 32 <= n; i += 32) { /* four accumulators so the loop is not one long dependency chain */
        uint64_t w[4];
        memcpy(w, p + i, 32);
        s0 += w[0];
        s1 += w[1];
        s2 += w[2];
        s3 += w[3];
    }
    return checksum_tail(p, i, n, s0 + s1 + s2 + s3);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* The Python contenders sum with numpy/torch SIMD kernels; give ours the same so the comparison is about
 * loading, not about the checksum loop. */
__attribute__((target("avx2"))) static uint64_t checksum_avx2(const uint8_t *p, uint64_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    uint64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32)));
        c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64)));
        d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t w[4];
    memcpy(w, &a, sizeof w);
    return checksum_tail(p, i, n, w[0] + w[1] + w[2] + w[3]);
}
static uint64_t checksum(const uint8_t *p, uint64_t n) {
    return __builtin_cpu_supports("avx2") ? checksum_avx2(p, n) : checksum_portable(p, n);
}
#else
static uint64_t checksum(const uint8_t *p, uint64_t n) { return checksum_portable(p, n); }
#endif

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [REPEATS]\n", argv[0]);
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    double *times = calloc((size_t)reps, sizeof *times);
    uint64_t sum = 0, bytes = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        lcx_st_file *f = NULL;
        if (lcx_st_open(argv[1], &f) != LCX_OK) {
            fprintf(stderr, "%s\n", lcx_last_error());
            return 1;
        }
        sum = 0;
        bytes = 0;
        for (size_t i = 0; i < f->n_tensors; i++) {
            const lcx_st_tensor *t = &f->tensors[i];
            if (t->end > t->begin) sum += checksum(t->data, t->end - t->begin);
            bytes += t->end - t->begin;
        }
        lcx_st_close(f);
        times[r] = clock_s(CLOCK_MONOTONIC) - t0;
        printf("repeat %d: %.4f s (%.2f GB/s) cpu %.4f s\n", r, times[r], (double)bytes / times[r] / 1e9,
               clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
    }
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    printf("best_s=%.4f median_s=%.4f bytes=%llu checksum=%llu\n", times[0], times[reps / 2],
           (unsigned long long)bytes, (unsigned long long)sum);
    free(times);
    return 0;
}
