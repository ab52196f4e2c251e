#include "src/core/units.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/core/strbuf.h" /* lcx_printable */

#define SHOWN(text, buf) lcx_printable((text), (buf), sizeof(buf))

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decimal digits at *p as a magnitude, advancing *p past all of them; returns how many. *too_big is set when
 * the value is 2^64 or more (the digits are still consumed, so callers can report bad syntax first). */
static int read_digits(const char **p, uint64_t *v, int *too_big) {
    int n = 0;
    *v = 0;
    *too_big = 0;
    for (; is_digit(**p); (*p)++, n++)
        if (!*too_big && (__builtin_mul_overflow(*v, 10, v) || __builtin_add_overflow(*v, (uint64_t)(**p - '0'), v)))
            *too_big = 1;
    return n;
}

lcx_status lcx_parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    char shown[48];
    LCX_FAIL_IF(!text || !*text, LCX_ERR_INVALID, "empty integer");
    const char *p = text;
    int negative = *p == '-';
    p += negative;
    uint64_t m;
    int too_big;
    int n = read_digits(&p, &m, &too_big);
    LCX_FAIL_IF(n == 0 || *p != '\0', LCX_ERR_INVALID, "'%s' is not an integer (expected decimal digits)",
                SHOWN(text, shown));
    const uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX; /* |INT64_MIN| = 2^63 */
    int64_t v = 0;
    if (!too_big && m <= limit) v = !negative ? (int64_t)m : m == limit ? INT64_MIN : -(int64_t)m;
    LCX_FAIL_IF(too_big || m > limit || v < lo || v > hi, LCX_ERR_INVALID,
                "integer '%s' is outside [%" PRId64 ", %" PRId64 "]", SHOWN(text, shown), lo, hi);
    *out = v;
    return LCX_OK;
}

/* [-]digits[.digits] or [-].digits, then [eE][+-]digits: the decimal forms strtod shares with humans. */
static int is_decimal_real(const char *s) {
    if (*s == '-') s++;
    int mantissa = 0;
    for (; is_digit(*s); s++) mantissa++;
    if (*s == '.')
        for (s++; is_digit(*s); s++) mantissa++;
    if (mantissa == 0) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!is_digit(*s)) return 0;
        while (is_digit(*s)) s++;
    }
    return *s == '\0';
}

lcx_status lcx_parse_real(const char *text, double lo, double hi, double *out) {
    char shown[48];
    LCX_FAIL_IF(!text || !*text, LCX_ERR_INVALID, "empty number");
    LCX_FAIL_IF(!is_decimal_real(text), LCX_ERR_INVALID, "'%s' is not a number (expected a decimal like 3, 0.5, 1e-4)",
                SHOWN(text, shown));
    double v = strtod(text, NULL); /* the syntax is checked: no hex, inf or nan can reach it */
    LCX_FAIL_IF(!isfinite(v), LCX_ERR_INVALID, "number '%s' is too large", SHOWN(text, shown));
    LCX_FAIL_IF(!(v >= lo && v <= hi), LCX_ERR_INVALID, "number '%s' is outside [%g, %g]", SHOWN(text, shown), lo,
                hi);
    *out = v;
    return LCX_OK;
}

lcx_status lcx_parse_length_in(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    char shown[48];
    LCX_FAIL_IF(!text || !*text, LCX_ERR_INVALID, "empty length");
    const char *p = text;
    uint64_t m;
    int too_big;
    int n = read_digits(&p, &m, &too_big);
    int64_t v = (int64_t)m, mult = 1;
    if (*p == 'k' || *p == 'K') mult = 1024, p++;
    else if (*p == 'm' || *p == 'M') mult = 1048576, p++;
    LCX_FAIL_IF(n == 0 || *p != '\0', LCX_ERR_INVALID,
                "'%s' is not a length (expected digits with an optional k or m suffix, e.g. 32768, 32k, 1m)",
                SHOWN(text, shown));
    LCX_FAIL_IF(too_big || m > INT64_MAX || __builtin_mul_overflow(v, mult, &v), LCX_ERR_INVALID,
                "length '%s' is too large", SHOWN(text, shown));
    LCX_FAIL_IF(v < lo && lo == 1, LCX_ERR_INVALID, "length '%s' must be positive", SHOWN(text, shown));
    LCX_FAIL_IF(v < lo, LCX_ERR_INVALID, "length '%s' is below the minimum %" PRId64, SHOWN(text, shown), lo);
    LCX_FAIL_IF(v > hi, LCX_ERR_INVALID, "length '%s' = %" PRId64 " is above the limit %" PRId64, SHOWN(text, shown),
                v, hi);
    *out = v;
    return LCX_OK;
}

lcx_status lcx_parse_length(const char *text, int64_t max, int64_t *out) {
    return lcx_parse_length_in(text, 1, max > 0 ? max : INT64_MAX, out);
}

/* The multiplier of a unit letter (K, M, G, T; either case) at *p and its 'i' / 'B' tail, advancing *p; 1 for no
 * unit or a lone 'B'; 0 for an unknown unit. */
static uint64_t unit_multiplier(const char **p, lcx_byte_units units) {
    static const char letters[] = "KMGT";
    const char *u = *p;
    if (*u == '\0') return 1;
    if (*u == 'B' && u[1] == '\0') {
        *p = u + 1;
        return 1;
    }
    int power = 0;
    for (int i = 0; letters[i]; i++)
        if (*u == letters[i] || *u == letters[i] - 'A' + 'a') power = i + 1;
    if (power == 0) return 0;
    u++;
    int binary = units == LCX_BYTES_BINARY || *u == 'i';
    if (*u == 'i') u++;
    if (*u == 'B') u++;
    *p = u;
    uint64_t m = 1;
    for (int i = 0; i < power; i++) m *= binary ? 1024 : 1000;
    return m;
}

lcx_status lcx_parse_bytes(const char *text, lcx_byte_units units, uint64_t *out) {
    char shown[48];
    LCX_FAIL_IF(!text || !*text, LCX_ERR_INVALID, "empty size");
    const char *p = text;
    unsigned __int128 whole = 0, frac = 0, scale = 1;
    int n_whole = 0, n_frac = 0;
    for (; is_digit(*p); p++, n_whole++)
        if (whole <= UINT64_MAX) whole = whole * 10 + (unsigned)(*p - '0'); /* stops growing once too large */
    if (*p == '.')
        for (p++; is_digit(*p); p++, n_frac++)
            if (n_frac < 18) frac = frac * 10 + (unsigned)(*p - '0'), scale *= 10;
    LCX_FAIL_IF(n_whole + n_frac == 0, LCX_ERR_INVALID,
                "size '%s' is not a number (expected digits with an optional unit, e.g. 4096, 512MiB, 1.5GB)",
                SHOWN(text, shown));
    LCX_FAIL_IF(n_frac > 18, LCX_ERR_INVALID, "size '%s' has more than 18 decimals", SHOWN(text, shown));
    uint64_t mult = unit_multiplier(&p, units);
    LCX_FAIL_IF(mult == 0 || *p != '\0', LCX_ERR_INVALID,
                "size '%s': unknown unit (use K, M, G, T, Ki, Mi, Gi, Ti, optional B)", SHOWN(text, shown));
    /* whole < 2^68, mult <= 2^40 and frac < scale <= 10^18: no product overflows 128 bits. */
    unsigned __int128 bytes = whole * mult + frac * mult / scale;
    LCX_FAIL_IF(bytes > UINT64_MAX, LCX_ERR_INVALID, "size '%s' is too large", SHOWN(text, shown));
    *out = (uint64_t)bytes;
    return LCX_OK;
}

const char *lcx_format_bytes(double x, char *buf, size_t cap) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (x >= 1024 && u < 4) x /= 1024, u++;
    snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", x, units[u]);
    return buf;
}

char *lcx_format_length(int64_t n, char *buf, size_t cap) {
    if (n > 0 && n % 1048576 == 0) snprintf(buf, cap, "%" PRId64 "m", n / 1048576);
    else if (n > 0 && n % 1024 == 0) snprintf(buf, cap, "%" PRId64 "k", n / 1024);
    else snprintf(buf, cap, "%" PRId64, n);
    return buf;
}
