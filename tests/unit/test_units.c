/* units: the strict number parsers every flag and recipe value goes through. Each case is one that a plain
 * strtol/strtod call gets wrong: overflow that wraps or saturates, trailing junk, a '+' or a space, hex, octal
 * look-alikes, inf/nan, exponents where none belong, and range edges. lcx_parse_length's own rules are in
 * test_recipe.c. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "src/core/units.h"
#include "test_util.h"

static void test_int(void) {
    int64_t v = -1;
    CHECK_OK(lcx_parse_int("0", 0, 10, &v));
    CHECK(v == 0);
    CHECK_OK(lcx_parse_int("-5", -10, 10, &v));
    CHECK(v == -5);
    CHECK_OK(lcx_parse_int("-0", 0, 10, &v));
    CHECK(v == 0);
    CHECK_OK(lcx_parse_int("007", 0, 10, &v)); /* decimal, not octal */
    CHECK(v == 7);
    CHECK_OK(lcx_parse_int("9223372036854775807", INT64_MIN, INT64_MAX, &v));
    CHECK(v == INT64_MAX);
    CHECK_OK(lcx_parse_int("-9223372036854775808", INT64_MIN, INT64_MAX, &v));
    CHECK(v == INT64_MIN);
    /* range edges: both bounds inclusive */
    CHECK_OK(lcx_parse_int("1", 1, 4, &v));
    CHECK(v == 1);
    CHECK_OK(lcx_parse_int("4", 1, 4, &v));
    CHECK(v == 4);
    v = 42;
    CHECK_FAILS(lcx_parse_int("0", 1, 4, &v), LCX_ERR_INVALID, "integer '0' is outside [1, 4]");
    CHECK_FAILS(lcx_parse_int("5", 1, 4, &v), LCX_ERR_INVALID, "outside [1, 4]");
    CHECK_FAILS(lcx_parse_int("-1", 0, 4, &v), LCX_ERR_INVALID, "outside");
    CHECK(v == 42); /* untouched on failure */
    /* overflow: strtoll saturates to INT64_MAX with ERANGE, which an unchecked caller takes as a value */
    CHECK_FAILS(lcx_parse_int("9223372036854775808", INT64_MIN, INT64_MAX, &v), LCX_ERR_INVALID, "outside");
    CHECK_FAILS(lcx_parse_int("-9223372036854775809", INT64_MIN, INT64_MAX, &v), LCX_ERR_INVALID, "outside");
    CHECK_FAILS(lcx_parse_int("18446744073709551616", INT64_MIN, INT64_MAX, &v), LCX_ERR_INVALID, "outside");
    CHECK_FAILS(lcx_parse_int("99999999999999999999999999", 0, 10, &v), LCX_ERR_INVALID, "outside");
    /* int-sized ranges: a value that would wrap a 32-bit int is refused, not truncated */
    CHECK_FAILS(lcx_parse_int("4294967297", 0, INT32_MAX, &v), LCX_ERR_INVALID, "outside");
    /* syntax: the whole string, decimal digits only */
    CHECK_FAILS(lcx_parse_int("", 0, 10, &v), LCX_ERR_INVALID, "empty");
    CHECK_FAILS(lcx_parse_int("-", 0, 10, &v), LCX_ERR_INVALID, "'-' is not an integer");
    CHECK_FAILS(lcx_parse_int("+5", 0, 10, &v), LCX_ERR_INVALID, "'+5' is not an integer");
    CHECK_FAILS(lcx_parse_int("--5", -10, 10, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int(" 5", 0, 10, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int("5 ", 0, 10, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int("5x", 0, 10, &v), LCX_ERR_INVALID, "'5x' is not an integer");
    CHECK_FAILS(lcx_parse_int("0x10", 0, 100, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int("1e3", 0, 10000, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int("2.0", 0, 10, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int("1k", 0, 10000, &v), LCX_ERR_INVALID, "not an integer");
    CHECK_FAILS(lcx_parse_int("inf", INT64_MIN, INT64_MAX, &v), LCX_ERR_INVALID, "not an integer");
    CHECK(v == 42);
}

static void test_real(void) {
    double v = -1;
    CHECK_OK(lcx_parse_real("0", 0, 1, &v));
    CHECK(v == 0);
    CHECK_OK(lcx_parse_real("-2.5", -10, 10, &v));
    CHECK(v == -2.5);
    CHECK_OK(lcx_parse_real(".5", 0, 1, &v));
    CHECK(v == 0.5);
    CHECK_OK(lcx_parse_real("5.", 0, 10, &v));
    CHECK(v == 5);
    CHECK_OK(lcx_parse_real("1e-3", 0, 1, &v));
    CHECK(v == 1e-3);
    CHECK_OK(lcx_parse_real("2.5E+6", 0, 1e7, &v));
    CHECK(v == 2.5e6);
    CHECK_OK(lcx_parse_real("1e6", 0, DBL_MAX, &v));
    CHECK(v == 1e6);
    CHECK_OK(lcx_parse_real("1", 1, 1, &v)); /* bounds inclusive */
    CHECK(v == 1);
    v = 42;
    CHECK_FAILS(lcx_parse_real("1.5", 0, 1, &v), LCX_ERR_INVALID, "number '1.5' is outside [0, 1]");
    CHECK_FAILS(lcx_parse_real("-0.001", 0, 1, &v), LCX_ERR_INVALID, "outside");
    /* strtod takes all of these; none is a number a person typed for a flag */
    CHECK_FAILS(lcx_parse_real("inf", -DBL_MAX, DBL_MAX, &v), LCX_ERR_INVALID, "'inf' is not a number");
    CHECK_FAILS(lcx_parse_real("-infinity", -DBL_MAX, DBL_MAX, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("nan", -DBL_MAX, DBL_MAX, &v), LCX_ERR_INVALID, "'nan' is not a number");
    CHECK_FAILS(lcx_parse_real("NAN(1)", -DBL_MAX, DBL_MAX, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("0x1p3", -DBL_MAX, DBL_MAX, &v), LCX_ERR_INVALID, "'0x1p3' is not a number");
    CHECK_FAILS(lcx_parse_real("0x10", -DBL_MAX, DBL_MAX, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real(" 1", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("1 ", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("+1", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("1.5x", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("1e", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("1e+", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real(".", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("-", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("1,5", 0, 10, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_real("", 0, 10, &v), LCX_ERR_INVALID, "empty");
    /* overflow: strtod returns HUGE_VAL, which a range [lo, +inf] would let through */
    CHECK_FAILS(lcx_parse_real("1e400", 0, INFINITY, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_real("-1e400", -INFINITY, 0, &v), LCX_ERR_INVALID, "too large");
    CHECK(v == 42);
}

static void test_length_in(void) {
    int64_t v = -1;
    CHECK_OK(lcx_parse_length_in("0", 0, 100, &v)); /* a range from 0 takes "0" (a stride of 0) */
    CHECK(v == 0);
    CHECK_OK(lcx_parse_length_in("32k", 0, INT64_C(1) << 24, &v));
    CHECK(v == 32768);
    CHECK_OK(lcx_parse_length_in("16m", 2, INT64_C(1) << 24, &v));
    CHECK(v == INT64_C(1) << 24);
    CHECK_OK(lcx_parse_length_in("2", 2, 4, &v));
    CHECK(v == 2);
    v = 42;
    CHECK_FAILS(lcx_parse_length_in("1", 2, 4, &v), LCX_ERR_INVALID, "length '1' is below the minimum 2");
    CHECK_FAILS(lcx_parse_length_in("0", 1, 4, &v), LCX_ERR_INVALID, "must be positive");
    CHECK_FAILS(lcx_parse_length_in("16m", 2, (INT64_C(1) << 24) - 1, &v), LCX_ERR_INVALID, "above the limit");
    CHECK_FAILS(lcx_parse_length_in("-1", 0, 4, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length_in("18446744073709551616", 0, INT64_MAX, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_length_in("9223372036854775808", 0, INT64_MAX, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_length_in("1g", 0, INT64_MAX, &v), LCX_ERR_INVALID, "not a length");
    CHECK(v == 42);
}

static void test_bytes(void) {
    uint64_t v = 1;
    CHECK_OK(lcx_parse_bytes("0", LCX_BYTES_DECIMAL, &v)); /* callers needing a positive size check */
    CHECK(v == 0);
    CHECK_OK(lcx_parse_bytes("4096", LCX_BYTES_DECIMAL, &v));
    CHECK(v == 4096);
    CHECK_OK(lcx_parse_bytes("4096B", LCX_BYTES_BINARY, &v));
    CHECK(v == 4096);
    /* a bare letter: decimal or binary as asked; 'i' is binary either way */
    CHECK_OK(lcx_parse_bytes("80G", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_C(80000000000));
    CHECK_OK(lcx_parse_bytes("80GB", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_C(80000000000));
    CHECK_OK(lcx_parse_bytes("80G", LCX_BYTES_BINARY, &v));
    CHECK(v == UINT64_C(80) << 30);
    CHECK_OK(lcx_parse_bytes("80GB", LCX_BYTES_BINARY, &v));
    CHECK(v == UINT64_C(80) << 30);
    CHECK_OK(lcx_parse_bytes("80GiB", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_C(80) << 30);
    CHECK_OK(lcx_parse_bytes("512Mi", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_C(512) << 20);
    CHECK_OK(lcx_parse_bytes("4k", LCX_BYTES_DECIMAL, &v)); /* either case */
    CHECK(v == 4000);
    CHECK_OK(lcx_parse_bytes("2t", LCX_BYTES_BINARY, &v));
    CHECK(v == UINT64_C(2) << 40);
    /* fractions, exactly (no binary floating point): 1.5 GB, 1.5 GiB, 0.1 KB */
    CHECK_OK(lcx_parse_bytes("1.5GB", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_C(1500000000));
    CHECK_OK(lcx_parse_bytes("1.5GiB", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_C(1610612736));
    CHECK_OK(lcx_parse_bytes("0.1KB", LCX_BYTES_DECIMAL, &v));
    CHECK(v == 100);
    CHECK_OK(lcx_parse_bytes(".5K", LCX_BYTES_BINARY, &v));
    CHECK(v == 512);
    CHECK_OK(lcx_parse_bytes("1.9", LCX_BYTES_DECIMAL, &v)); /* a fraction of a byte is dropped */
    CHECK(v == 1);
    CHECK_OK(lcx_parse_bytes("18446744073709551615", LCX_BYTES_DECIMAL, &v));
    CHECK(v == UINT64_MAX);
    CHECK_OK(lcx_parse_bytes("16777215.99999999999TiB", LCX_BYTES_DECIMAL, &v)); /* just below 2^64 */
    CHECK(v > (UINT64_C(16777215) << 40) && v < UINT64_MAX);
    v = 7;
    CHECK_FAILS(lcx_parse_bytes("18446744073709551616", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_bytes("16777216TiB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "too large"); /* 2^64 */
    CHECK_FAILS(lcx_parse_bytes("99999999999999999999999T", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_bytes("-1", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "size '-1' is not a number");
    CHECK_FAILS(lcx_parse_bytes("+1", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_bytes("", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "empty");
    CHECK_FAILS(lcx_parse_bytes("GB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_bytes("5XB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("5EB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("5Gb", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("5GBB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("5iB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("5 GB", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes(" 5", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_bytes("1e9", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("0x10", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("inf", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_bytes("nan", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "not a number");
    CHECK_FAILS(lcx_parse_bytes("1.2.3", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "unknown unit");
    CHECK_FAILS(lcx_parse_bytes("0.1234567890123456789K", LCX_BYTES_DECIMAL, &v), LCX_ERR_INVALID, "decimals");
    CHECK(v == 7);
}

int main(void) {
    test_int();
    test_real();
    test_length_in();
    test_bytes();
    return test_summary("test_units");
}
