/* Backend registry, memory ops, casts, add/scale/axpy and the squared norm. References: float32 results of
 * a single rounding computed through double (exact for these ops), bf16 widening by a 16-bit shift, and a
 * plain double sum. */
#include <stdint.h>

#include "ops_common.h"

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

int main(void) {
    const lcx_backend *be = cpu();
    rng_seed(41);
    CHECK(strcmp(be->name, "cpu") == 0 && be == lcx_backend_cpu());
    lcx_clear_error();
    CHECK(lcx_backend_get("tpu") == NULL && strstr(lcx_last_error(), "unknown backend 'tpu'") != NULL);
    CHECK(lcx_backend_get(NULL) == NULL);

    /* every slot of the table is filled */
    void (*const *slot)(void) = (void (*const *)(void))((const char *)be + offsetof(lcx_backend, alloc));
    size_t n_slots = (sizeof(lcx_backend) - offsetof(lcx_backend, alloc)) / sizeof(void (*)(void));
    int empty = 0;
    for (size_t i = 0; i < n_slots; i++) empty += slot[i] == NULL;
    CHECK_MSG(empty == 0, "%d empty slots in the cpu table", empty);

    /* memory */
    const size_t nb = 1000;
    unsigned char host[1000], back[1000];
    for (size_t i = 0; i < nb; i++) host[i] = (unsigned char)rng_u64();
    void *d1 = NULL, *d2 = NULL, *d0 = NULL;
    CHECK_OK(be->alloc(nb, &d1));
    CHECK_OK(be->alloc(nb, &d2));
    CHECK_OK(be->alloc(0, &d0));
    CHECK(d0 != NULL && ((uintptr_t)d1 % 64) == 0 && ((uintptr_t)d2 % 64) == 0);
    CHECK_OK(be->copy_h2d(d1, host, nb));
    CHECK_OK(be->copy_d2d(d2, d1, nb));
    CHECK_OK(be->copy_d2h(back, d2, nb));
    CHECK(memcmp(host, back, nb) == 0);
    CHECK_OK(be->zero(d2, nb));
    CHECK_OK(be->copy_d2h(back, d2, nb));
    int nz = 0;
    for (size_t i = 0; i < nb; i++) nz += back[i] != 0;
    CHECK(nz == 0);
    CHECK_OK(be->sync());
    be->free(d0);
    be->free(d1);
    be->free(d2);
    be->free(NULL);
    void *huge = (void *)1;
    CHECK_FAILS(be->alloc(SIZE_MAX - 8, &huge), LCX_ERR_OOM, "too large");
    CHECK(huge == NULL);

    /* casts */
    const int64_t n = 100003; /* several sqnorm blocks, not a multiple of any */
    float *x = rand_f32(n, -3, 3), *y = rand_f32(n, -3, 3), *out = zeros_f32(n);
    x[0] = NAN; x[1] = INFINITY; x[2] = -0.0f; x[3] = 1e-40f; /* subnormal */
    x[4] = 1.0f + 0x1p-8f;      /* halfway between two bf16 values: even neighbour 1.0 (0x3f80) */
    x[5] = 1.0f + 3 * 0x1p-8f;  /* halfway: rounds up to the even 0x3f82 */
    x[6] = 3.4e38f;             /* rounds up to +Inf */
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    CHECK_OK(be->cast_f32_to_bf16(x, h, n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += h[i] != lcx_f32_to_bf16(x[i]);
    CHECK(bad == 0);
    CHECK(h[4] == 0x3f80 && h[5] == 0x3f82 && h[6] == 0x7f80 && h[2] == 0x8000 && (h[0] & 0x7fff) > 0x7f80);
    uint16_t all[65536];
    float *wide = zeros_f32(65536);
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    CHECK_OK(be->cast_bf16_to_f32(all, wide, 65536));
    bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t b = bits(wide[i]), want = i << 16;
        if ((want & 0x7fffffffu) > 0x7f800000u) bad += (b & 0x7fffffffu) <= 0x7f800000u || (b >> 31) != (i >> 15);
        else bad += b != want;
    }
    CHECK_MSG(bad == 0, "%d bf16 patterns widened wrongly", bad);

    /* add / scale / axpy: one float rounding of the exact double result */
    x[0] = 0.5f; x[1] = -2.0f; x[3] = 1.0f;
    CHECK_OK(be->add(x, y, out, n));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)x[i] + y[i]);
    CHECK(bad == 0);
    memcpy(out, x, sizeof(float) * (size_t)n);
    CHECK_OK(be->scale(out, 0.3f, n));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)x[i] * 0.3f);
    CHECK(bad == 0);
    memcpy(out, y, sizeof(float) * (size_t)n);
    CHECK_OK(be->axpy(-1.7f, x, out, n));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != (float)((double)y[i] + (double)(float)(-1.7f * (double)x[i]));
    CHECK(bad == 0);
    CHECK_OK(be->add(x, y, out, n));
    CHECK_OK(be->add(x, y, x, n)); /* out aliasing a */
    CHECK(memcmp(x, out, sizeof(float) * (size_t)n) == 0);

    /* squared norm */
    double s = 0, got = -1;
    for (int64_t i = 0; i < n; i++) s += (double)y[i] * y[i];
    CHECK_OK(be->sqnorm(y, n, &got));
    CHECK_ERR("sqnorm vs double sum (rel)", fabs(got - s) / s, 1e-12);
    CHECK_OK(be->sqnorm(y, 0, &got));
    CHECK(got == 0.0);
    CHECK_FAILS(be->sqnorm(y, -1, &got), LCX_ERR_INVALID, "negative");
    free(x); free(y); free(out); free(h); free(wide);
    return test_summary("test_ops_misc");
}
