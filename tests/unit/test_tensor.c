/* dtype conversions, exhaustively over all 65,536 half and bfloat16 bit patterns, against references built
 * from plain double arithmetic (no bit tricks shared with the code under test). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "src/core/tensor.h"
#include "test_util.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Reference decoders from the format definitions. */
static double ref_half(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}
static double ref_bf16(uint16_t h) {
    int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(1.0 + m / 128.0, e - 127);
    return s ? -v : v;
}

/* Nearest-even rounding of finite x >= 0 onto a monotone 16-bit grid [0, maxpat] by binary search;
 * returns the pattern of +Inf (inf_pat) when x is at or beyond max + ulp/2. */
static uint16_t ref_round(double x, double (*dec)(uint16_t), uint16_t maxpat, uint16_t inf_pat) {
    uint16_t lo = 0, hi = maxpat;
    if (x >= dec(maxpat)) {
        double ulp = dec(maxpat) - dec((uint16_t)(maxpat - 1));
        return x >= dec(maxpat) + ulp / 2 ? inf_pat : maxpat;
    }
    while (hi - lo > 1) { /* invariant dec(lo) <= x < dec(hi) */
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (dec(mid) <= x) lo = mid; else hi = mid;
    }
    double dl = x - dec(lo), dh = dec(hi) - x;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static int n_bad_half = 0, n_bad_bf16 = 0;

static void check_f32_to_half(float f) {
    uint16_t got = lcx_f32_to_f16(f);
    if (isnan(f)) {
        if (!isnan(ref_half(got)) || (got >> 15) != (fbits(f) >> 31)) n_bad_half++;
        return;
    }
    double x = fabs((double)f);
    uint16_t want = ref_round(x, ref_half, 0x7bff, 0x7c00);
    if (signbit(f)) want |= 0x8000;
    if (got != want) {
        if (n_bad_half < 5) fprintf(stderr, "f32->f16 %a (0x%08x): got 0x%04x want 0x%04x\n", f, fbits(f), got, want);
        n_bad_half++;
    }
}

static void check_f32_to_bf16(float f) {
    uint16_t got = lcx_f32_to_bf16(f);
    if (isnan(f)) {
        if (!isnan(ref_bf16(got)) || (got >> 15) != (fbits(f) >> 31)) n_bad_bf16++;
        return;
    }
    double x = fabs((double)f);
    uint16_t want = ref_round(x, ref_bf16, 0x7f7f, 0x7f80);
    if (signbit(f)) want |= 0x8000;
    if (got != want) {
        if (n_bad_bf16 < 5) fprintf(stderr, "f32->bf16 %a: got 0x%04x want 0x%04x\n", f, got, want);
        n_bad_bf16++;
    }
}

int main(void) {
    /* Decoding: every pattern equals the reference value (NaN stays NaN with its sign). */
    int bad_dec = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        double rh = ref_half((uint16_t)p), rb = ref_bf16((uint16_t)p);
        float h = lcx_f16_to_f32((uint16_t)p), b = lcx_bf16_to_f32((uint16_t)p);
        if (isnan(rh) ? !(isnan(h) && !!signbit(h) == (int)(p >> 15)) : (double)h != rh || !!signbit(h) != !!signbit(rh)) bad_dec++;
        if (isnan(rb) ? !(isnan(b) && !!signbit(b) == (int)(p >> 15)) : (double)b != rb || !!signbit(b) != !!signbit(rb)) bad_dec++;
    }
    CHECK_MSG(bad_dec == 0, "%d decode mismatches", bad_dec);

    /* Round trips: every non-NaN pattern survives f16->f32->f16 and bf16->f32->bf16 unchanged. */
    int bad_rt = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        uint16_t h = (uint16_t)p;
        if (!isnan(ref_half(h)) && lcx_f32_to_f16(lcx_f16_to_f32(h)) != h) bad_rt++;
        if (!isnan(ref_bf16(h)) && lcx_f32_to_bf16(lcx_bf16_to_f32(h)) != h) bad_rt++;
        if (isnan(ref_half(h)) && !isnan(ref_half(lcx_f32_to_f16(lcx_f16_to_f32(h))))) bad_rt++;
        if (isnan(ref_bf16(h)) && !isnan(ref_bf16(lcx_f32_to_bf16(lcx_bf16_to_f32(h))))) bad_rt++;
    }
    CHECK_MSG(bad_rt == 0, "%d round-trip mismatches", bad_rt);

    /* Encoding f32 -> f16: every half value, the f32 neighbours of it, and the exact midpoints between adjacent
     * halves with their neighbours (the ties and near-ties where rounding goes wrong). */
    for (uint32_t p = 0; p < 65536; p++) {
        float v = lcx_f16_to_f32((uint16_t)p);
        if (isnan(v) || isinf(v)) { check_f32_to_half(v); continue; }
        for (int d = -2; d <= 2; d++) check_f32_to_half(bitsf(fbits(v) + (uint32_t)d));
        if ((p & 0x7fff) < 0x7c00) {
            float next = lcx_f16_to_f32((uint16_t)(p + 1)); /* 0x7bff+1 = Inf: midpoint is the overflow edge */
            double mid = isinf(next) ? (double)fabsf(v) + 16.0 : ((double)v + (double)next) / 2;
            if (signbit(v)) mid = -fabs(mid);
            float fm = (float)mid; /* exact: midpoints of halves are representable in f32 */
            for (int d = -1; d <= 1; d++) check_f32_to_half(bitsf(fbits(fm) + (uint32_t)d));
        }
    }
    /* and pseudo-random f32 patterns across the whole range, NaNs and subnormals included */
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2000000; i++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        check_f32_to_half(bitsf((uint32_t)rng));
    }
    CHECK_MSG(n_bad_half == 0, "%d f32->f16 mismatches", n_bad_half);

    /* Encoding f32 -> bf16: for every bf16 grid point, the low halves that decide rounding. */
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000};
    for (uint32_t p = 0; p < 65536; p++)
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) check_f32_to_bf16(bitsf((p << 16) | lows[k]));
    for (int i = 0; i < 2000000; i++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        check_f32_to_bf16(bitsf((uint32_t)rng));
    }
    CHECK_MSG(n_bad_bf16 == 0, "%d f32->bf16 mismatches", n_bad_bf16);

    /* Specific values everyone gets wrong once. */
    CHECK(lcx_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(lcx_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(lcx_f32_to_f16(0x1p-25f) == 0x0000);             /* tie between 0 and min subnormal -> even (0) */
    CHECK(lcx_f32_to_f16(bitsf(fbits(0x1p-25f) + 1)) == 0x0001);
    CHECK(lcx_f32_to_f16(-0.0f) == 0x8000);
    CHECK(lcx_f32_to_bf16(bitsf(0x3f808000)) == 0x3f80);   /* tie to even, down */
    CHECK(lcx_f32_to_bf16(bitsf(0x3f818000)) == 0x3f82);   /* tie to even, up */
    CHECK(lcx_f32_to_bf16(bitsf(0x7f7fffff)) == 0x7f80);   /* max float rounds to Inf in bf16 */
    CHECK(lcx_f32_to_bf16(bitsf(0xff800001)) == 0xffc0);   /* signalling NaN -> quiet, sign kept */

    /* F8 decoders against their definitions */
    CHECK(lcx_f8e4m3_to_f32(0x7e) == 448.0f);
    CHECK(isnan(lcx_f8e4m3_to_f32(0x7f)));
    CHECK(lcx_f8e4m3_to_f32(0x01) == 0x1p-9f);
    CHECK(lcx_f8e4m3_to_f32(0xb8) == -1.0f);
    CHECK(lcx_f8e5m2_to_f32(0x7b) == 57344.0f);
    CHECK(isinf(lcx_f8e5m2_to_f32(0x7c)));
    float f8[4];
    uint8_t fnuz[4] = {0x80, 0x40, 0x01, 0xc0};
    CHECK_OK(lcx_convert_to_f32(LCX_F8_E4M3FNUZ, fnuz, f8, 4));
    CHECK(isnan(f8[0]) && f8[1] == 1.0f && f8[2] == 0x1p-10f && f8[3] == -1.0f);

    /* GGUF blocks: Q8_0 d=0.5 (f16 0x3800), q = j-16 */
    uint8_t q8[34] = {0x00, 0x38};
    for (int j = 0; j < 32; j++) q8[2 + j] = (uint8_t)(int8_t)(j - 16);
    float out[32];
    CHECK_OK(lcx_convert_to_f32(LCX_Q8_0, q8, out, 32));
    for (int j = 0; j < 32; j++) CHECK(out[j] == 0.5f * (float)(j - 16));
    uint8_t q41[20] = {0x00, 0x3c, 0x00, 0xbc}; /* d = 1, m = -1 */
    for (int j = 0; j < 16; j++) q41[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK_OK(lcx_convert_to_f32(LCX_Q4_1, q41, out, 32));
    for (int j = 0; j < 16; j++) CHECK(out[j] == (float)j - 1.0f && out[j + 16] == (float)(15 - j) - 1.0f);
    uint8_t q40[18] = {0x00, 0x40}; /* d = 2 */
    for (int j = 0; j < 16; j++) q40[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK_OK(lcx_convert_to_f32(LCX_Q4_0, q40, out, 32));
    for (int j = 0; j < 16; j++) CHECK(out[j] == 2.0f * (float)(j - 8) && out[j + 16] == 2.0f * (float)(7 - j));

    /* names, sizes, overflow */
    CHECK(lcx_dtype_from_name("BF16") == LCX_BF16);
    CHECK(lcx_dtype_from_name("bf16") == LCX_DTYPE_INVALID);
    CHECK(lcx_dtype_from_name("Q8_0") == LCX_DTYPE_INVALID);
    uint64_t nb;
    CHECK_OK(lcx_dtype_nbytes(LCX_F4, 6, &nb));
    CHECK(nb == 3);
    CHECK_FAILS(lcx_dtype_nbytes(LCX_F4, 3, &nb), LCX_ERR_FORMAT, "whole number of bytes");
    CHECK_FAILS(lcx_dtype_nbytes(LCX_F64, UINT64_MAX / 4, &nb), LCX_ERR_FORMAT, "overflows");
    CHECK_OK(lcx_dtype_nbytes(LCX_Q4_0, 64, &nb));
    CHECK(nb == 36);
    lcx_shape big = {.ndim = 3, .dims = {1ull << 30, 1ull << 30, 1ull << 10}};
    uint64_t numel;
    CHECK_FAILS(lcx_shape_numel(&big, &numel), LCX_ERR_FORMAT, "overflows");
    lcx_shape zero = {.ndim = 2, .dims = {0, 1ull << 62}};
    CHECK_OK(lcx_shape_numel(&zero, &numel));
    CHECK(numel == 0);
    lcx_shape scalar = {.ndim = 0};
    CHECK_OK(lcx_shape_numel(&scalar, &numel));
    CHECK(numel == 1);
    char buf[64];
    CHECK(strcmp(lcx_shape_str(&zero, buf, sizeof buf), "[0, 4611686018427387904]") == 0);
    return test_summary("test_tensor");
}
