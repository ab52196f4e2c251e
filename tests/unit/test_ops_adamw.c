/* AdamW: (1) several steps against torch.optim.AdamW itself (fixture from tests/fixtures/gen_adamw.py),
 * to 1e-6, including the bf16 copy-out; (2) against a double-precision reference of PyTorch's documented
 * algorithm: p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps). */
#include <jansson.h>

#include "ops_common.h"
#include "worst_of.h"

static lcx_exec *X;

static lcx_status adamw(lcx_adamw_args a, float *p, const float *g, float *m, float *v, uint16_t *pb, int64_t n) {
    a.n = n, a.param = p, a.grad = g, a.m = m, a.v = v, a.param_bf16 = pb;
    return op_exact(X, LCX_OP_ADAMW, &a);
}

static float *floats(json_t *arr, int64_t *n) {
    *n = (int64_t)json_array_size(arr);
    float *f = malloc(sizeof(float) * (size_t)(*n > 0 ? *n : 1));
    for (int64_t i = 0; i < *n; i++) f[i] = (float)json_number_value(json_array_get(arr, (size_t)i));
    return f;
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static void torch_fixture(void) {
    const char *path = LCX_SOURCE_DIR "/tests/fixtures/adamw/adamw_ref.json";
    json_error_t err;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    CHECK_MSG(doc != NULL, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    if (!doc) return;
    json_t *cases = json_object_get(doc, "cases");
    CHECK(json_array_size(cases) >= 1);
    double ep = 0, emv = 0;
    int bf_bad = 0, n_steps = 0;
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *c = json_array_get(cases, ci);
        lcx_adamw_args a = {.lr = num(c, "lr"), .beta1 = num(c, "beta1"), .beta2 = num(c, "beta2"),
                            .eps = num(c, "eps"), .weight_decay = num(c, "weight_decay"),
                            .grad_scale = num(c, "grad_scale")};
        int64_t n;
        float *p = floats(json_object_get(c, "param0"), &n), *m = zeros_f32(n), *v = zeros_f32(n);
        uint16_t *pb = malloc(sizeof(uint16_t) * (size_t)n);
        json_t *steps = json_object_get(c, "steps");
        for (size_t s = 0; s < json_array_size(steps); s++) {
            json_t *st = json_array_get(steps, s);
            int64_t ng, k;
            float *g = floats(json_object_get(st, "grad"), &ng);
            float *wp = floats(json_object_get(st, "param"), &k), *wm = floats(json_object_get(st, "exp_avg"), &k);
            float *wv = floats(json_object_get(st, "exp_avg_sq"), &k);
            json_t *wb = json_object_get(st, "param_bf16");
            CHECK(ng == n && k == n && (int64_t)json_array_size(wb) == n);
            a.step = (int64_t)s + 1;
            CHECK_OK(adamw(a, p, g, m, v, pb, n));
            for (int64_t i = 0; i < n && i < k; i++) {
                ep = worst_of(ep, fabs((double)p[i] - wp[i]));
                emv = worst_of(emv, fabs((double)m[i] - wm[i]) / fmax(fabs((double)wm[i]), 1e-30));
                emv = worst_of(emv, fabs((double)v[i] - wv[i]) / fmax(fabs((double)wv[i]), 1e-30));
                uint16_t want = (uint16_t)json_integer_value(json_array_get(wb, (size_t)i));
                /* torch's bf16 bits must match whenever the float32 parameter matches bit for bit */
                if (memcmp(&p[i], &wp[i], 4) == 0 && pb[i] != want) bf_bad++;
                if (pb[i] != lcx_f32_to_bf16(p[i])) bf_bad++;
            }
            n_steps++;
            free(g); free(wp); free(wm); free(wv);
        }
        free(p); free(m); free(v); free(pb);
    }
    printf("  torch.optim.AdamW fixture: %d steps\n", n_steps);
    CHECK_ERR("AdamW param vs torch (abs)", ep, 1e-6);
    CHECK_ERR("AdamW exp_avg, exp_avg_sq vs torch (rel)", emv, 1e-6);
    CHECK_MSG(bf_bad == 0, "%d bf16 copies differ", bf_bad);
    json_decref(doc);
}

static void double_reference(void) {
    const int64_t n = 1000;
    lcx_adamw_args a = {.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .grad_scale = 0.7};
    float *p = rand_f32(n, -1, 1), *m = zeros_f32(n), *v = zeros_f32(n);
    double *pd = to_f64(p, n), *md = zeros_f64(n), *vd = zeros_f64(n), ep = 0;
    for (int64_t t = 1; t <= 6; t++) {
        float *g = rand_f32(n, -1, 1);
        for (int64_t i = 0; i < n; i += 7) g[i] *= 1e-7f; /* eps-dominated entries */
        a.step = t;
        CHECK_OK(adamw(a, p, g, m, v, NULL, n));
        double bc1 = 1 - pow(a.beta1, (double)t), bc2 = 1 - pow(a.beta2, (double)t);
        for (int64_t i = 0; i < n; i++) {
            double gi = (double)(g[i] * (float)a.grad_scale); /* the float32 gradient the op sees */
            pd[i] -= (double)a.lr * a.weight_decay * pd[i];
            md[i] = a.beta1 * md[i] + (1 - (double)a.beta1) * gi;
            vd[i] = a.beta2 * vd[i] + (1 - (double)a.beta2) * gi * gi;
            pd[i] -= a.lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + a.eps);
            ep = worst_of(ep, fabs(p[i] - pd[i]));
        }
        free(g);
    }
    CHECK_ERR("AdamW 6 steps vs double reference (abs)", ep, 1e-6);
    free(p); free(m); free(v); free(pd); free(md); free(vd);
}

int main(void) {
    X = cpu_exec();
    rng_seed(31);
    torch_fixture();
    double_reference();
    lcx_adamw_args a = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .grad_scale = 1.0};
    float x[2] = {0};
    CHECK_FAILS(adamw(a, x, x, x, x, NULL, 2), LCX_ERR_INVALID, "step 0");
    a.step = 1;
    a.beta2 = 1.0;
    CHECK_FAILS(adamw(a, x, x, x, x, NULL, 2), LCX_ERR_INVALID, "betas");
    return test_summary("test_ops_adamw");
}
