#include "src/core/units.h"

#include <inttypes.h>
#include <stdio.h>

#include "src/core/strbuf.h" /* lcx_printable */

lcx_status lcx_parse_length(const char *text, int64_t max, int64_t *out) {
    char shown[48];
    if (max <= 0) max = INT64_MAX;
    LCX_FAIL_IF(!text || !*text, LCX_ERR_INVALID, "empty length");
    const char *p = text;
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (int64_t)(*p - '0'), &v))
            return lcx_fail(LCX_ERR_INVALID, "length '%s' is too large", lcx_printable(text, shown, sizeof shown));
        p++;
    }
    LCX_FAIL_IF(p == text, LCX_ERR_INVALID,
                "'%s' is not a length (expected digits with an optional k or m suffix, e.g. 32768, 32k, 1m)",
                lcx_printable(text, shown, sizeof shown));
    int64_t mult = 1;
    if (*p == 'k' || *p == 'K') mult = 1024, p++;
    else if (*p == 'm' || *p == 'M') mult = 1048576, p++;
    LCX_FAIL_IF(*p != '\0', LCX_ERR_INVALID,
                "'%s' is not a length (expected digits with an optional k or m suffix, e.g. 32768, 32k, 1m)",
                lcx_printable(text, shown, sizeof shown));
    LCX_FAIL_IF(__builtin_mul_overflow(v, mult, &v), LCX_ERR_INVALID, "length '%s' is too large",
                lcx_printable(text, shown, sizeof shown));
    LCX_FAIL_IF(v == 0, LCX_ERR_INVALID, "length '%s' must be positive", lcx_printable(text, shown, sizeof shown));
    LCX_FAIL_IF(v > max, LCX_ERR_INVALID, "length '%s' = %" PRId64 " is above the limit %" PRId64,
                lcx_printable(text, shown, sizeof shown), v, max);
    *out = v;
    return LCX_OK;
}

char *lcx_format_length(int64_t n, char *buf, size_t cap) {
    if (n > 0 && n % 1048576 == 0) snprintf(buf, cap, "%" PRId64 "m", n / 1048576);
    else if (n > 0 && n % 1024 == 0) snprintf(buf, cap, "%" PRId64 "k", n / 1024);
    else snprintf(buf, cap, "%" PRId64, n);
    return buf;
}
