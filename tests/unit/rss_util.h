/* Resident-set helpers of the memory tests (test_model_infer_mem, test_plan_mem): the RSS now, and whether it
 * means anything in this build. */
#ifndef LCX_TEST_RSS_UTIL_H
#define LCX_TEST_RSS_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* AddressSanitizer's allocator ignores mallopt and adds redzones and a quarantine: the resident set then says
 * nothing about the memory model, so the RSS checks run in the plain builds only. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL 1
#endif

/* VmRSS of this process in bytes (0 when /proc is not readable). */
static inline uint64_t rss_now(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = strtoull(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb * 1024;
}

#endif
