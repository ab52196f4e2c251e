#include "src/core/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct dtype_info {
    const char *name;
    unsigned bits;        /* per element; 0 for block types */
    size_t block_elems;   /* GGUF block types */
    size_t block_bytes;
} dtype_info;

static const dtype_info infos[LCX_DTYPE_COUNT] = {
    [LCX_DTYPE_INVALID] = {"?", 0, 0, 0},
    [LCX_F32] = {"F32", 32, 1, 4},
    [LCX_F16] = {"F16", 16, 1, 2},
    [LCX_BF16] = {"BF16", 16, 1, 2},
    [LCX_F64] = {"F64", 64, 1, 8},
    [LCX_F8_E4M3] = {"F8_E4M3", 8, 1, 1},
    [LCX_F8_E5M2] = {"F8_E5M2", 8, 1, 1},
    [LCX_F8_E8M0] = {"F8_E8M0", 8, 1, 1},
    [LCX_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, 1, 1},
    [LCX_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, 1, 1},
    [LCX_F6_E2M3] = {"F6_E2M3", 6, 0, 0},
    [LCX_F6_E3M2] = {"F6_E3M2", 6, 0, 0},
    [LCX_F4] = {"F4", 4, 0, 0},
    [LCX_BOOL] = {"BOOL", 8, 1, 1},
    [LCX_U8] = {"U8", 8, 1, 1},
    [LCX_I8] = {"I8", 8, 1, 1},
    [LCX_I16] = {"I16", 16, 1, 2},
    [LCX_U16] = {"U16", 16, 1, 2},
    [LCX_I32] = {"I32", 32, 1, 4},
    [LCX_U32] = {"U32", 32, 1, 4},
    [LCX_I64] = {"I64", 64, 1, 8},
    [LCX_U64] = {"U64", 64, 1, 8},
    [LCX_C64] = {"C64", 64, 1, 8},
    [LCX_Q8_0] = {"Q8_0", 0, 32, 34},
    [LCX_Q4_0] = {"Q4_0", 0, 32, 18},
    [LCX_Q4_1] = {"Q4_1", 0, 32, 20},
};

const char *lcx_dtype_name(lcx_dtype dt) {
    if ((unsigned)dt >= LCX_DTYPE_COUNT) return "?";
    return infos[dt].name;
}

lcx_dtype lcx_dtype_from_name(const char *name) {
    /* Block types have no safetensors name: stop before them. */
    for (int dt = LCX_F32; dt < LCX_Q8_0; dt++)
        if (strcmp(infos[dt].name, name) == 0) return (lcx_dtype)dt;
    return LCX_DTYPE_INVALID;
}

unsigned lcx_dtype_bits(lcx_dtype dt) { return (unsigned)dt < LCX_DTYPE_COUNT ? infos[dt].bits : 0; }

void lcx_dtype_block(lcx_dtype dt, size_t *elems, size_t *bytes) {
    LCX_ASSERT((unsigned)dt < LCX_DTYPE_COUNT);
    *elems = infos[dt].block_elems;
    *bytes = infos[dt].block_bytes;
}

int lcx_dtype_is_compute(lcx_dtype dt) { return dt == LCX_F32 || dt == LCX_BF16 || dt == LCX_F16; }

int lcx_dtype_is_float_loadable(lcx_dtype dt) {
    switch (dt) {
    case LCX_F32: case LCX_F16: case LCX_BF16: case LCX_F64:
    case LCX_F8_E4M3: case LCX_F8_E5M2: case LCX_F8_E4M3FNUZ: case LCX_F8_E5M2FNUZ: case LCX_F8_E8M0:
    case LCX_Q8_0: case LCX_Q4_0: case LCX_Q4_1:
        return 1;
    default:
        return 0;
    }
}

lcx_status lcx_dtype_nbytes(lcx_dtype dt, uint64_t n, uint64_t *bytes) {
    LCX_FAIL_IF((unsigned)dt >= LCX_DTYPE_COUNT || dt == LCX_DTYPE_INVALID, LCX_ERR_INVALID, "invalid dtype");
    if (infos[dt].bits == 0) { /* block type */
        uint64_t be = infos[dt].block_elems;
        LCX_FAIL_IF(n % be != 0, LCX_ERR_FORMAT, "%llu elements of %s are not a whole number of %llu-element blocks",
                    (unsigned long long)n, infos[dt].name, (unsigned long long)be);
        LCX_FAIL_IF(__builtin_mul_overflow(n / be, (uint64_t)infos[dt].block_bytes, bytes), LCX_ERR_FORMAT,
                    "byte size of %llu elements of %s overflows", (unsigned long long)n, infos[dt].name);
        return LCX_OK;
    }
    uint64_t bits;
    LCX_FAIL_IF(__builtin_mul_overflow(n, (uint64_t)infos[dt].bits, &bits), LCX_ERR_FORMAT,
                "byte size of %llu elements of %s overflows", (unsigned long long)n, infos[dt].name);
    LCX_FAIL_IF(bits % 8 != 0, LCX_ERR_FORMAT, "%llu elements of %s are not a whole number of bytes",
                (unsigned long long)n, infos[dt].name);
    *bytes = bits / 8;
    return LCX_OK;
}

/* ---- scalar conversions ---------------------------------------------------------------------------------- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float lcx_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in float */
        float v = (float)man * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13)); /* Inf / NaN with payload */
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t lcx_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15; /* biased half exponent */
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* half subnormal (or zero): value = m * 2^-24 with m = man24 >> (14 - e) */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t m = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (m & 1u))) m++;
        return (uint16_t)(sign | m); /* m == 0x400 is the smallest normal: encoding is right */
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry rolls into the exponent (max -> Inf) */
    return (uint16_t)h;
}

float lcx_f8e4m3_to_f32(uint8_t v) {
    uint32_t s = v >> 7, e = (v >> 3) & 0xfu, m = v & 7u;
    float r;
    if (e == 15 && m == 7) r = NAN;
    else if (e == 0) r = (float)m * 0x1p-9f;
    else r = ldexpf(1.0f + (float)m / 8.0f, (int)e - 7);
    return s ? -r : r;
}

float lcx_f8e5m2_to_f32(uint8_t v) { return lcx_f16_to_f32((uint16_t)((uint16_t)v << 8)); }

/* FNUZ variants: bias one larger, no Inf, no negative zero, 0x80 is the only NaN. */
static float f8_fnuz_to_f32(uint8_t v, int man_bits, int bias) {
    if (v == 0x80) return NAN;
    uint32_t s = v >> 7, e = (v >> man_bits) & ((1u << (7 - man_bits)) - 1), m = v & ((1u << man_bits) - 1);
    float frac = (float)m / (float)(1u << man_bits);
    float r = e == 0 ? ldexpf(frac, 1 - bias) : ldexpf(1.0f + frac, (int)e - bias);
    return s ? -r : r;
}

static float f8e8m0_to_f32(uint8_t v) { return v == 0xff ? NAN : ldexpf(1.0f, (int)v - 127); }

/* ---- GGUF block dequantisation (docs/formats.md "GGUF") ------------------------------------------------ */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static void dequant_q8_0(const uint8_t *b, float *y) {
    float d = lcx_f16_to_f32(rd16(b));
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void dequant_q4_0(const uint8_t *b, float *y) {
    float d = lcx_f16_to_f32(rd16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 15) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void dequant_q4_1(const uint8_t *b, float *y) {
    float d = lcx_f16_to_f32(rd16(b)), m = lcx_f16_to_f32(rd16(b + 2));
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 15) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

lcx_status lcx_convert_to_f32(lcx_dtype dt, const void *src, float *dst, size_t n) {
    const uint8_t *s8 = src;
    switch (dt) {
    case LCX_F32: memcpy(dst, src, n * 4); return LCX_OK;
    case LCX_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = lcx_bf16_to_f32(rd16(s8 + 2 * i));
        return LCX_OK;
    case LCX_F16:
        for (size_t i = 0; i < n; i++) dst[i] = lcx_f16_to_f32(rd16(s8 + 2 * i));
        return LCX_OK;
    case LCX_F64:
        for (size_t i = 0; i < n; i++) { double d; memcpy(&d, s8 + 8 * i, 8); dst[i] = (float)d; }
        return LCX_OK;
    case LCX_F8_E4M3: for (size_t i = 0; i < n; i++) dst[i] = lcx_f8e4m3_to_f32(s8[i]); return LCX_OK;
    case LCX_F8_E5M2: for (size_t i = 0; i < n; i++) dst[i] = lcx_f8e5m2_to_f32(s8[i]); return LCX_OK;
    case LCX_F8_E4M3FNUZ: for (size_t i = 0; i < n; i++) dst[i] = f8_fnuz_to_f32(s8[i], 3, 8); return LCX_OK;
    case LCX_F8_E5M2FNUZ: for (size_t i = 0; i < n; i++) dst[i] = f8_fnuz_to_f32(s8[i], 2, 16); return LCX_OK;
    case LCX_F8_E8M0: for (size_t i = 0; i < n; i++) dst[i] = f8e8m0_to_f32(s8[i]); return LCX_OK;
    case LCX_Q8_0: case LCX_Q4_0: case LCX_Q4_1: {
        LCX_FAIL_IF(n % 32 != 0, LCX_ERR_INVALID, "%zu elements of %s are not whole 32-element blocks", n,
                    infos[dt].name);
        void (*dq)(const uint8_t *, float *) = dt == LCX_Q8_0 ? dequant_q8_0 : dt == LCX_Q4_0 ? dequant_q4_0
                                                                                              : dequant_q4_1;
        for (size_t b = 0; b < n / 32; b++) dq(s8 + b * infos[dt].block_bytes, dst + 32 * b);
        return LCX_OK;
    }
    default:
        return lcx_fail(LCX_ERR_UNSUPPORTED, "unsupported dtype %s (cannot load as floating point)",
                        lcx_dtype_name(dt));
    }
}

lcx_status lcx_convert_from_f32(lcx_dtype dt, const float *src, void *dst, size_t n) {
    uint8_t *d8 = dst;
    switch (dt) {
    case LCX_F32: memcpy(dst, src, n * 4); return LCX_OK;
    case LCX_BF16:
        for (size_t i = 0; i < n; i++) { uint16_t h = lcx_f32_to_bf16(src[i]); memcpy(d8 + 2 * i, &h, 2); }
        return LCX_OK;
    case LCX_F16:
        for (size_t i = 0; i < n; i++) { uint16_t h = lcx_f32_to_f16(src[i]); memcpy(d8 + 2 * i, &h, 2); }
        return LCX_OK;
    default:
        return lcx_fail(LCX_ERR_UNSUPPORTED, "cannot store tensors as %s (use F32, BF16 or F16)",
                        lcx_dtype_name(dt));
    }
}

/* ---- shapes ---------------------------------------------------------------------------------------------- */

lcx_status lcx_shape_numel(const lcx_shape *s, uint64_t *numel) {
    uint64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        LCX_FAIL_IF(__builtin_mul_overflow(n, s->dims[i], &n), LCX_ERR_FORMAT, "element count of shape overflows");
    *numel = n;
    return LCX_OK;
}

int lcx_shape_equal(const lcx_shape *a, const lcx_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

char *lcx_shape_str(const lcx_shape *s, char *buf, size_t cap) {
    size_t len = 0;
    if (cap == 0) return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s->ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu", i ? ", " : "", (unsigned long long)s->dims[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

lcx_shape lcx_shape_1d(uint64_t a) { return (lcx_shape){.ndim = 1, .dims = {a}}; }
lcx_shape lcx_shape_2d(uint64_t a, uint64_t b) { return (lcx_shape){.ndim = 2, .dims = {a, b}}; }
