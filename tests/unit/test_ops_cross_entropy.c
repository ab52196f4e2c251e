/* Cross-entropy on chunks of logits against a double reference: summed loss and count with ignore_index -100,
 * dlogits = dscale * d(sum of losses)/dlogits checked by central differences, chunking (the chunks' sums equal
 * the whole; dlogits identical), in-place dlogits, large logits, bad targets rejected. */
#include "ops_common.h"

typedef struct ctx {
    int64_t R, V;
    const int32_t *tg;
    double *x;
} ctx;

static double ref_loss(void *p) { /* sum over non-ignored rows of logsumexp - x[target] */
    ctx *c = p;
    double s = 0;
    for (int64_t r = 0; r < c->R; r++) {
        if (c->tg[r] == LCX_IGNORE_INDEX) continue;
        const double *x = c->x + r * c->V;
        double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j < c->V; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < c->V; j++) z += exp(x[j] - mx);
        s += mx + log(z) - x[c->tg[r]];
    }
    return s;
}

int main(void) {
    const lcx_backend *be = cpu();
    rng_seed(21);
    const int64_t R = 37, V = 101, n = R * V;
    int32_t *tg = malloc(sizeof(int32_t) * R);
    int64_t want_count = 0;
    for (int64_t r = 0; r < R; r++) {
        tg[r] = rng_int(0, 4) == 0 ? LCX_IGNORE_INDEX : (int32_t)rng_int(0, V - 1);
    }
    tg[0] = 0;
    tg[1] = (int32_t)(V - 1);
    tg[2] = LCX_IGNORE_INDEX;
    float *x = rand_f32(n, -5, 5);
    for (int64_t j = 0; j < V; j++) x[3 * V + j] += 1000.0f; /* a row far from 0: needs the max shift */
    tg[3] = 5;
    for (int64_t r = 0; r < R; r++) want_count += tg[r] != LCX_IGNORE_INDEX;
    ctx c = {R, V, tg, to_f64(x, n)};
    const float dscale = 1.0f / 123.0f; /* e.g. 1 / global token count */
    float *dx = rand_f32(n, -1, 1);
    double loss = 0;
    int64_t count = -1;
    CHECK_OK(be->cross_entropy(x, tg, dx, R, V, dscale, &loss, &count));
    double want = ref_loss(&c);
    CHECK(count == want_count);
    /* exp runs in float (within 2 ulp, ~2.4e-7 relative) and is summed in double: log(sum) is off by at most
     * ~2.4e-7 absolute per row, so the loss sum (rows of loss ~log V) is good to ~1e-7 relative */
    CHECK_ERR("cross-entropy loss sum (rel)", fabs(loss - want) / fabs(want), 1e-7);
    double *g = zeros_f64(n);
    fd_grad(ref_loss, &c, c.x, n, 1e-4, g);
    for (int64_t i = 0; i < n; i++) g[i] *= dscale;
    CHECK_ERR("cross-entropy dlogits vs central differences", rel_err(dx, g, n, 1e-2), 1e-6);
    int nz = 0;
    for (int64_t j = 0; j < V; j++) nz += dx[2 * V + j] != 0.0f;
    CHECK_MSG(nz == 0, "ignored row has %d nonzero gradients", nz);

    /* chunks */
    float *dc = zeros_f32(n);
    double sum = 0;
    int64_t cnt = 0;
    static const int64_t cuts[] = {0, 10, 11, 25, 37};
    for (int k = 0; k < 4; k++) {
        double l;
        int64_t cn;
        int64_t r0 = cuts[k], r1 = cuts[k + 1];
        CHECK_OK(be->cross_entropy(x + r0 * V, tg + r0, dc + r0 * V, r1 - r0, V, dscale, &l, &cn));
        sum += l;
        cnt += cn;
    }
    CHECK(cnt == count);
    CHECK_ERR("sum over chunks - whole (rel)", fabs(sum - loss) / fabs(loss), 1e-13);
    CHECK(memcmp(dc, dx, sizeof(float) * (size_t)n) == 0);

    /* in place over the logits, and loss-only */
    float *xi = malloc(sizeof(float) * (size_t)n);
    memcpy(xi, x, sizeof(float) * (size_t)n);
    double l2, l3;
    int64_t c2, c3;
    CHECK_OK(be->cross_entropy(xi, tg, xi, R, V, dscale, &l2, &c2));
    CHECK(memcmp(xi, dx, sizeof(float) * (size_t)n) == 0 && l2 == loss && c2 == count);
    CHECK_OK(be->cross_entropy(x, tg, NULL, R, V, dscale, &l3, &c3));
    CHECK(l3 == loss && c3 == count);

    /* all rows ignored: zero loss, zero count, zero gradient */
    int32_t ign[3] = {LCX_IGNORE_INDEX, LCX_IGNORE_INDEX, LCX_IGNORE_INDEX};
    CHECK_OK(be->cross_entropy(x, ign, dc, 3, V, 1.0f, &l2, &c2));
    nz = 0;
    for (int64_t i = 0; i < 3 * V; i++) nz += dc[i] != 0.0f;
    CHECK(l2 == 0.0 && c2 == 0 && nz == 0);

    int32_t bad[2] = {1, (int32_t)V};
    CHECK_FAILS(be->cross_entropy(x, bad, dc, 2, V, 1.0f, &l2, &c2), LCX_ERR_INVALID, "row 1 has target 101");
    bad[1] = -1;
    CHECK_FAILS(be->cross_entropy(x, bad, dc, 2, V, 1.0f, &l2, &c2), LCX_ERR_INVALID, "target -1");
    free(tg); free(x); free(c.x); free(dx); free(g); free(dc); free(xi);
    return test_summary("test_ops_cross_entropy");
}
