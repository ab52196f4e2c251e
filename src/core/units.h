/* units: human-friendly lengths on the command line and in recipes ("32768", "32k", "128k", "1m").
 *
 * k = 1024 and m = 1048576 (binary), because context lengths are powers of two by convention: Llama 3.1's
 * "128k" context is max_position_embeddings = 131072 = 128 * 1024, and nobody means 128000. */
#ifndef LCX_UNITS_H
#define LCX_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* Strict parse of a positive length: decimal digits, optionally followed by one suffix k/K (x1024) or m/M
 * (x1048576). Rejected (LCX_ERR_INVALID, message quoting the text): empty, signs, spaces, decimal points,
 * exponents, "0", leading junk, trailing junk ("12kk", "12 k", "32kb"), values above max (max <= 0 means
 * INT64_MAX), overflow. The message does not name a file or key; callers add that context. */
lcx_status lcx_parse_length(const char *text, int64_t max, int64_t *out);

/* Shortest exact spelling of n: "1m" when a multiple of 1048576, "128k" when a multiple of 1024, else digits.
 * Returns buf. */
char *lcx_format_length(int64_t n, char *buf, size_t cap);

#endif
