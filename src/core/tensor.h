/* tensor: element types, shapes and conversions between storage types.
 *
 * The dtype list covers every safetensors dtype (so any file can be catalogued and a clear "unsupported dtype"
 * given) plus the GGUF block-quantised types we import. Compute types are F32/BF16/F16; F64 and F8 can be
 * loaded by conversion. Conversions round to nearest even, keep NaN (quiet) and Inf, and handle subnormals. */
#ifndef LCX_TENSOR_H
#define LCX_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/core/status.h"

typedef enum lcx_dtype {
    LCX_DTYPE_INVALID = 0,
    LCX_F32, LCX_F16, LCX_BF16, LCX_F64,
    LCX_F8_E4M3, LCX_F8_E5M2, LCX_F8_E8M0, LCX_F8_E4M3FNUZ, LCX_F8_E5M2FNUZ, LCX_F6_E2M3, LCX_F6_E3M2, LCX_F4,
    LCX_BOOL, LCX_U8, LCX_I8, LCX_I16, LCX_U16, LCX_I32, LCX_U32, LCX_I64, LCX_U64, LCX_C64,
    /* GGUF block types (import only): bits are per element averaged over a block, see lcx_dtype_block. */
    LCX_Q8_0, LCX_Q4_0, LCX_Q4_1,
    LCX_DTYPE_COUNT
} lcx_dtype;

/* Safetensors name ("BF16") of a dtype; "?" for block types. */
const char *lcx_dtype_name(lcx_dtype dt);
/* Parse a safetensors dtype name; LCX_DTYPE_INVALID if unknown. Exact, case-sensitive match. */
lcx_dtype lcx_dtype_from_name(const char *name);
/* Bits per element for scalar types (F4 = 4, F6 = 6); 0 for block types. */
unsigned lcx_dtype_bits(lcx_dtype dt);
/* Block geometry: elements and bytes per block (1 element, bits/8 bytes for byte-sized scalar types). */
void lcx_dtype_block(lcx_dtype dt, size_t *elems, size_t *bytes);
/* 1 if values of this dtype can be converted to float32 by lcx_convert_to_f32. */
int lcx_dtype_is_float_loadable(lcx_dtype dt);
/* 1 for F32/BF16/F16: types parameters may be stored in. */
int lcx_dtype_is_compute(lcx_dtype dt);

/* Bytes for n elements of dt, overflow-checked; fails if n is not a whole number of bytes/blocks. */
lcx_status lcx_dtype_nbytes(lcx_dtype dt, uint64_t n, uint64_t *bytes);

/* ---- scalar conversions (exact IEEE semantics, round to nearest even) ------------------------------------ */
/* bf16 conversions are inline: the kernels convert activations element by element in their hot loops. */
static inline float lcx_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t lcx_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep sign, force quiet */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into Inf correctly */
    return (uint16_t)(u >> 16);
}
float lcx_f16_to_f32(uint16_t h);
uint16_t lcx_f32_to_f16(float f);
float lcx_f8e4m3_to_f32(uint8_t v); /* OCP E4M3FN: no Inf, 0x7f/0xff NaN */
float lcx_f8e5m2_to_f32(uint8_t v); /* IEEE-like E5M2 */

/* ---- buffer conversions ---------------------------------------------------------------------------------- */
/* src holds n elements of src_dt (any float-loadable dtype, including GGUF blocks: n multiple of the block). */
lcx_status lcx_convert_to_f32(lcx_dtype src_dt, const void *src, float *dst, size_t n);
/* dst_dt in {F32, BF16, F16}. */
lcx_status lcx_convert_from_f32(lcx_dtype dst_dt, const float *src, void *dst, size_t n);

/* ---- shapes ---------------------------------------------------------------------------------------------- */
#define LCX_MAX_DIMS 8
typedef struct lcx_shape {
    int ndim;                      /* 0 = scalar (one element) */
    uint64_t dims[LCX_MAX_DIMS];   /* outermost first, as in safetensors/PyTorch */
} lcx_shape;

/* Number of elements, overflow-checked (fails with LCX_ERR_FORMAT naming nothing: callers add context). */
lcx_status lcx_shape_numel(const lcx_shape *s, uint64_t *numel);
int lcx_shape_equal(const lcx_shape *a, const lcx_shape *b);
/* "[4, 16]" into buf (always NUL-terminated). Returns buf. */
char *lcx_shape_str(const lcx_shape *s, char *buf, size_t cap);
lcx_shape lcx_shape_1d(uint64_t a);
lcx_shape lcx_shape_2d(uint64_t a, uint64_t b);

#endif /* LCX_TENSOR_H */
