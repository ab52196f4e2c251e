/* units: numbers from text, strictly. Every command-line flag and recipe value that is a number goes through
 * these: integers, reals, lengths ("32768", "32k", "128k", "1m") and byte sizes ("512MiB", "80GB").
 *
 * Strict means: the whole string, decimal only, inside the caller's range. strtol/strtod accept leading
 * spaces, a '+', trailing junk (when the end pointer goes unchecked), hex ("0x10"), "inf" and "nan", and wrap
 * silently on overflow unless errno is checked; none of that gets through here. Failures are LCX_ERR_INVALID
 * with a message quoting the text; it names no flag or key (callers add that context).
 *
 * Lengths: k = 1024 and m = 1048576 (binary), because context lengths are powers of two by convention: Llama
 * 3.1's "128k" context is max_position_embeddings = 131072 = 128 * 1024, and nobody means 128000. */
#ifndef LCX_UNITS_H
#define LCX_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* An integer in [lo, hi]: an optional '-' and decimal digits ("007" is 7, not octal). Rejected: empty, '+',
 * spaces, hex, exponents, decimal points, trailing junk, values outside [lo, hi] (overflow included). */
lcx_status lcx_parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out);

/* A finite real in [lo, hi]: an optional '-', digits with an optional fraction (".5" and "5." too), an optional
 * exponent ("1e-3", "2.5E+6"). Rejected: empty, '+', spaces, hex floats, "inf", "nan", overflow to infinity,
 * trailing junk, values outside [lo, hi]. */
lcx_status lcx_parse_real(const char *text, double lo, double hi, double *out);

/* Strict parse of a positive length: decimal digits, optionally followed by one suffix k/K (x1024) or m/M
 * (x1048576). Rejected (LCX_ERR_INVALID, message quoting the text): empty, signs, spaces, decimal points,
 * exponents, "0", leading junk, trailing junk ("12kk", "12 k", "32kb"), values above max (max <= 0 means
 * INT64_MAX), overflow. The message does not name a file or key; callers add that context. */
lcx_status lcx_parse_length(const char *text, int64_t max, int64_t *out);

/* A length (same spelling) in [lo, hi]; lo may be 0, so "0" can be accepted (e.g. a stride of 0). */
lcx_status lcx_parse_length_in(const char *text, int64_t lo, int64_t hi, int64_t *out);

/* What a bare unit letter means in a byte size: K = 1000 (DECIMAL, as disk and file sizes are quoted; Ki is
 * 1024) or K = 1024 (BINARY, as memory is quoted: "80G" of device memory; Ki is 1024 too). */
typedef enum lcx_byte_units { LCX_BYTES_DECIMAL, LCX_BYTES_BINARY } lcx_byte_units;

/* A byte count: decimal digits with an optional fraction ("1.5GB"), then an optional unit K, M, G or T (either
 * case), optionally followed by 'i' (always binary) and/or 'B'; a lone 'B' is bytes. Fractions of a byte are
 * dropped. Rejected: empty, signs, spaces, exponents, hex, "inf", "nan", other units ("5XB", "5EB"), more than
 * 18 decimals, 2^64 or more. 0 is accepted (callers that need a positive size check). */
lcx_status lcx_parse_bytes(const char *text, lcx_byte_units units, uint64_t *out);

/* Shortest exact spelling of n: "1m" when a multiple of 1048576, "128k" when a multiple of 1024, else digits.
 * Returns buf. */
char *lcx_format_length(int64_t n, char *buf, size_t cap);

/* x bytes in binary units for a message: "512 B", "1.50 KiB", "76.05 GiB", "5.16 TiB" (two decimals from KiB up).
 * Returns buf. */
const char *lcx_format_bytes(double x, char *buf, size_t cap);

#endif
