/* RoPE against a double reference written in Hugging Face's form (x * cos + rotate_half(x) * sin with
 * cos/sin duplicated over both halves, rotate_half(x) = [-x2, x1], partial rotary on the first rot_dim dims),
 * backward against central differences, fwd then bwd = identity, positions beyond the table passed through
 * unrotated (never read to fail: the host validates them), bf16 activations. */
#include "ops_common.h"
#include "worst_of.h"

typedef struct ctx {
    int64_t T, H, hd, rot, P;
    const int32_t *pos;
    const double *cos, *sin; /* [P, rot/2] */
    double *x, *r;
} ctx;

static void ref_fwd(const ctx *c, double *out) {
    int64_t half = c->rot / 2;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->H; h++) {
            const double *x = c->x + (t * c->H + h) * c->hd;
            double *o = out + (t * c->H + h) * c->hd;
            for (int64_t d = 0; d < c->hd; d++) {
                if (d >= c->rot) {
                    o[d] = x[d];
                    continue;
                }
                double cf = c->cos[c->pos[t] * half + d % half], sf = c->sin[c->pos[t] * half + d % half];
                double rh = d < half ? -x[d + half] : x[d - half];
                o[d] = x[d] * cf + rh * sf;
            }
        }
}

static double loss(void *p) {
    ctx *c = p;
    int64_t n = c->T * c->H * c->hd;
    double *o = zeros_f64(n), s = 0;
    ref_fwd(c, o);
    for (int64_t i = 0; i < n; i++) s += c->r[i] * o[i];
    free(o);
    return s;
}

static lcx_exec *X;

static lcx_status rope(int bwd, lcx_dtype dt, const void *x, void *out, const int32_t *pos, const float *cs,
                       const float *sn, int64_t T, int64_t H, int64_t hd, int64_t rot, int64_t P) {
    lcx_rope_args a = {.dt = dt, .n_tokens = T, .n_heads = H, .head_dim = hd, .rot_dim = rot, .n_pos = P, .x = x,
                       .out = out, .pos = pos, .cos = cs, .sin = sn};
    return op_exact(X, bwd ? LCX_OP_ROPE_BWD : LCX_OP_ROPE_FWD, &a);
}

int main(void) {
    X = cpu_exec();
    rng_seed(9);
    double wf = 0, wb = 0, wid = 0;
    static const int64_t shapes[][4] = {{5, 3, 8, 8}, {9, 2, 16, 8}, {4, 4, 12, 4}, {3, 1, 6, 0}, {11, 2, 64, 64}};
    for (size_t si = 0; si < 5; si++) {
        int64_t T = shapes[si][0], H = shapes[si][1], hd = shapes[si][2], rot = shapes[si][3], P = 5000;
        int64_t n = T * H * hd, half = rot / 2;
        /* tables from inv_freq = theta^(-2i/rot), computed here in double */
        double *cd = zeros_f64(P * half), *sd = zeros_f64(P * half);
        float *cf = zeros_f32(P * half), *sf = zeros_f32(P * half);
        for (int64_t p = 0; p < P; p++)
            for (int64_t i = 0; i < half; i++) {
                double ang = (double)p * pow(10000.0, -2.0 * (double)i / (double)rot);
                cf[p * half + i] = (float)cos(ang);
                sf[p * half + i] = (float)sin(ang);
                cd[p * half + i] = cf[p * half + i]; /* the op sees float tables; compare on equal footing */
                sd[p * half + i] = sf[p * half + i];
            }
        int32_t *pos = malloc(sizeof(int32_t) * (size_t)T);
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)rng_int(0, P - 1); /* arbitrary global positions */
        float *x = rand_f32(n, -1, 1), *dy = rand_f32(n, -1, 1), *y = zeros_f32(n), *dx = zeros_f32(n);
        ctx c = {T, H, hd, rot, P, pos, cd, sd, to_f64(x, n), to_f64(dy, n)};
        double *yr = zeros_f64(n), *g = zeros_f64(n);
        CHECK_OK(rope(0, LCX_F32, x, y, pos, cf, sf, T, H, hd, rot, P));
        ref_fwd(&c, yr);
        wf = worst_of(wf, rel_err(y, yr, n, 0.1));
        CHECK_OK(rope(1, LCX_F32, dy, dx, pos, cf, sf, T, H, hd, rot, P));
        fd_grad(loss, &c, c.x, n, 1e-6, g);
        wb = worst_of(wb, rel_err(dx, g, n, 0.1));
        /* the rotation is orthogonal: bwd(fwd(x)) = x, in place */
        float *z = malloc(sizeof(float) * (size_t)n);
        memcpy(z, x, sizeof(float) * (size_t)n);
        CHECK_OK(rope(0, LCX_F32, z, z, pos, cf, sf, T, H, hd, rot, P));
        CHECK(memcmp(z, y, sizeof(float) * (size_t)n) == 0);
        CHECK_OK(rope(1, LCX_F32, z, z, pos, cf, sf, T, H, hd, rot, P));
        double *xd = to_f64(x, n);
        wid = worst_of(wid, rel_err(z, xd, n, 1.0));
        /* dims past rot_dim pass through bit-exactly */
        int pass = 0;
        for (int64_t t = 0; t < T * H; t++)
            for (int64_t d = rot; d < hd; d++) pass += y[t * hd + d] != x[t * hd + d];
        CHECK(pass == 0);
        /* bf16: the rounding of the float32 result on the same values, in place too */
        {
            float *xr = malloc(sizeof(float) * (size_t)n);
            memcpy(xr, x, sizeof(float) * (size_t)n);
            round_bf16(xr, n);
            uint16_t *xh = to_bf16(xr, n), *yh = malloc(2 * (size_t)n);
            float *y32 = zeros_f32(n);
            CHECK_OK(rope(0, LCX_F32, xr, y32, pos, cf, sf, T, H, hd, rot, P));
            CHECK_OK(rope(0, LCX_BF16, xh, yh, pos, cf, sf, T, H, hd, rot, P));
            CHECK(bf16_mismatch(yh, y32, n) == 0);
            CHECK_OK(rope(1, LCX_F32, xr, y32, pos, cf, sf, T, H, hd, rot, P));
            CHECK_OK(rope(1, LCX_BF16, xh, xh, pos, cf, sf, T, H, hd, rot, P));
            CHECK(bf16_mismatch(xh, y32, n) == 0);
            free(xr); free(xh); free(yh); free(y32);
        }
        if (T > 1) { /* positions outside the table: those tokens pass through, the others rotate as before */
            int32_t keep = pos[T - 1];
            float *yb = zeros_f32(n);
            pos[T - 1] = (int32_t)P;
            CHECK_OK(rope(0, LCX_F32, x, yb, pos, cf, sf, T, H, hd, rot, P));
            CHECK(memcmp(yb, y, sizeof(float) * (size_t)((T - 1) * H * hd)) == 0);
            CHECK(memcmp(yb + (T - 1) * H * hd, x + (T - 1) * H * hd, sizeof(float) * (size_t)(H * hd)) == 0);
            pos[T - 1] = -1;
            CHECK_OK(rope(1, LCX_F32, dy, yb, pos, cf, sf, T, H, hd, rot, P));
            CHECK(memcmp(yb, dx, sizeof(float) * (size_t)((T - 1) * H * hd)) == 0);
            CHECK(memcmp(yb + (T - 1) * H * hd, dy + (T - 1) * H * hd, sizeof(float) * (size_t)(H * hd)) == 0);
            pos[T - 1] = keep;
            free(yb);
        }
        free(cd); free(sd); free(cf); free(sf); free(pos); free(x); free(dy); free(y); free(dx); free(c.x); free(c.r);
        free(yr); free(g); free(z); free(xd);
    }
    CHECK_ERR("rope forward vs HF-form double (floor 10% max)", wf, 1e-6);
    CHECK_ERR("rope backward vs central diff. (floor 10% max)", wb, 1e-6);
    CHECK_ERR("rope bwd(fwd(x)) - x (normwise)", wid, 1e-6);
    float buf[8] = {0};
    int32_t p0 = 0;
    CHECK_FAILS(rope(0, LCX_F32, buf, buf, &p0, buf, buf, 1, 1, 4, 3, 1), LCX_ERR_INVALID, "rot_dim=3");
    CHECK_FAILS(rope(0, LCX_F32, buf, buf, &p0, buf, buf, 1, 1, 4, 6, 1), LCX_ERR_INVALID, "rot_dim=6");
    CHECK_FAILS(rope(0, LCX_F64, buf, buf, &p0, buf, buf, 1, 1, 4, 4, 1), LCX_ERR_UNSUPPORTED, "activation dtype");
    return test_summary("test_ops_rope");
}
