/* Cross-entropy on chunks of logits against a double reference: summed loss and count with ignore_index -100,
 * dlogits = dscale * d(sum of losses)/dlogits checked by central differences, chunking (the chunks' sums equal
 * the whole; dlogits identical), in-place dlogits, large logits, targets outside the vocabulary counted as
 * ignored (never validated by the op). Loss sum and count are device results that accumulate (+=): the test
 * zeroes them and reads them back. bf16 logits, the workspace and a too small arena. The vocab-parallel phases
 * (STATS on every shard, FINISH with the gathered stats) against the whole-row op, for tp = 1..5 shards of a
 * vocabulary padded to a multiple of tp (including a shard of padding only). */
#include "ops_common.h"
#include "worst_of.h"

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

static lcx_exec *X;

/* One call on an arena of exactly its workspace; *loss and *count are accumulated into. */
static lcx_status xent(lcx_dtype dt, const void *x, const int32_t *tg, void *dx, int64_t R, int64_t V, float dscale,
                       double *loss, int64_t *count) {
    lcx_xent_args a = {.dt = dt, .n_rows = R, .vocab = V, .dscale = dscale, .logits = x, .targets = tg,
                       .dlogits = dx, .loss_sum = loss, .count = count};
    return op_exact(X, LCX_OP_CROSS_ENTROPY, &a);
}

/* The rows split into tp vocab shards of ceil(V / tp) columns (the last ones padded with garbage the op must
 * mask), STATS per shard, stats gathered in rank order, FINISH per shard: loss and count like the whole-row op,
 * dlogits equal to its columns within float rounding, padding columns 0. */
static void check_vocab_parallel(const float *x, const int32_t *tg, int64_t R, int64_t V, float dscale, int tp,
                                 double want_loss, int64_t want_count, const float *want_dx) {
    const int64_t per = (V + tp - 1) / tp;
    double *stats = malloc(sizeof(double) * 3 * (size_t)(R * tp));
    float *sx = malloc(sizeof(float) * (size_t)(R * per * tp)), *sdx = malloc(sizeof(float) * (size_t)(R * per));
    for (int r = 0; r < tp; r++) /* shard r: columns [r per, r per + per), garbage where past V */
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < per; j++) {
                int64_t g = r * per + j;
                sx[(r * R + i) * per + j] = g < V ? x[i * V + g] : 1e30f;
            }
    for (int r = 0; r < tp; r++) {
        int64_t nv = V - r * per < 0 ? 0 : V - r * per > per ? per : V - r * per;
        lcx_xent_args a = {.dt = LCX_F32, .n_rows = R, .vocab = per, .logits = sx + r * R * per, .targets = tg,
                           .phase = LCX_XENT_STATS, .tp = tp, .vocab_start = r * per, .n_valid = nv,
                           .stats = stats + (int64_t)r * R * 3};
        CHECK_OK(op_exact(X, LCX_OP_CROSS_ENTROPY, &a));
    }
    double worst = 0;
    for (int r = 0; r < tp; r++) {
        int64_t nv = V - r * per < 0 ? 0 : V - r * per > per ? per : V - r * per;
        double loss = 0;
        int64_t count = 0;
        lcx_xent_args a = {.dt = LCX_F32, .n_rows = R, .vocab = per, .dscale = dscale, .logits = sx + r * R * per,
                           .targets = tg, .dlogits = sdx, .loss_sum = &loss, .count = &count,
                           .phase = LCX_XENT_FINISH, .tp = tp, .vocab_start = r * per, .n_valid = nv, .stats = stats};
        CHECK_OK(op_exact(X, LCX_OP_CROSS_ENTROPY, &a));
        CHECK(count == want_count);
        CHECK(fabs(loss - want_loss) <= 1e-6 * fabs(want_loss));
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < per; j++) {
                int64_t g = r * per + j;
                float d = sdx[i * per + j];
                if (g >= V) {
                    CHECK(d == 0.0f);
                    continue;
                }
                double e = fabs((double)d - want_dx[i * V + g]);
                worst = worst_of(worst, e);
            }
    }
    CHECK(worst <= 1e-6 * dscale); /* dlogits are dscale * probabilities: 1e-6 of the largest possible */
    free(stats); free(sx); free(sdx);
}

int main(void) {
    X = cpu_exec();
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
    int64_t count = 0;
    CHECK_OK(xent(LCX_F32, x, tg, dx, R, V, dscale, &loss, &count));
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
        double l = 0;
        int64_t cn = 0;
        int64_t r0 = cuts[k], r1 = cuts[k + 1];
        CHECK_OK(xent(LCX_F32, x + r0 * V, tg + r0, dc + r0 * V, r1 - r0, V, dscale, &l, &cn));
        sum += l;
        cnt += cn;
    }
    CHECK(cnt == count);
    CHECK_ERR("sum over chunks - whole (rel)", fabs(sum - loss) / fabs(loss), 1e-13);
    CHECK(memcmp(dc, dx, sizeof(float) * (size_t)n) == 0);

    /* in place over the logits, and loss-only */
    float *xi = malloc(sizeof(float) * (size_t)n);
    memcpy(xi, x, sizeof(float) * (size_t)n);
    double l2 = 0, l3 = 0;
    int64_t c2 = 0, c3 = 0;
    CHECK_OK(xent(LCX_F32, xi, tg, xi, R, V, dscale, &l2, &c2));
    CHECK(memcmp(xi, dx, sizeof(float) * (size_t)n) == 0 && l2 == loss && c2 == count);
    CHECK_OK(xent(LCX_F32, x, tg, NULL, R, V, dscale, &l3, &c3));
    CHECK(l3 == loss && c3 == count);
    /* device results accumulate: a second call adds the same sum and count */
    CHECK_OK(xent(LCX_F32, x, tg, NULL, R, V, dscale, &l3, &c3));
    CHECK(l3 == 2 * loss && c3 == 2 * count);
    /* chunks accumulating into one device sum: the per-call sums added in order */
    double acc = 0, want_acc = 0;
    int64_t acc_n = 0;
    for (int k = 0; k < 4; k++) {
        double l = 0;
        int64_t cn = 0;
        int64_t r0 = cuts[k], r1 = cuts[k + 1];
        CHECK_OK(xent(LCX_F32, x + r0 * V, tg + r0, NULL, r1 - r0, V, dscale, &l, &cn));
        want_acc += l;
        CHECK_OK(xent(LCX_F32, x + r0 * V, tg + r0, NULL, r1 - r0, V, dscale, &acc, &acc_n));
    }
    CHECK(acc == want_acc && acc_n == count);

    /* all rows ignored: zero loss, zero count, zero gradient */
    int32_t ign[3] = {LCX_IGNORE_INDEX, LCX_IGNORE_INDEX, LCX_IGNORE_INDEX};
    l2 = 0, c2 = 0;
    CHECK_OK(xent(LCX_F32, x, ign, dc, 3, V, 1.0f, &l2, &c2));
    nz = 0;
    for (int64_t i = 0; i < 3 * V; i++) nz += dc[i] != 0.0f;
    CHECK(l2 == 0.0 && c2 == 0 && nz == 0);

    /* targets outside [0, vocab): counted as ignored (no loss, zero gradient), the valid row as usual */
    int32_t bad[3] = {1, (int32_t)V, -1};
    double lb = 0, l1 = 0;
    int64_t cb = 0, c1 = 0;
    for (int64_t i = 0; i < 3 * V; i++) dc[i] = 1.0f;
    CHECK_OK(xent(LCX_F32, x, bad, dc, 3, V, 1.0f, &lb, &cb));
    CHECK_OK(xent(LCX_F32, x, bad, NULL, 1, V, 1.0f, &l1, &c1));
    nz = 0;
    for (int64_t i = V; i < 3 * V; i++) nz += dc[i] != 0.0f;
    CHECK(lb == l1 && cb == 1 && c1 == 1 && nz == 0 && dc[1] < 0.0f);

    /* bf16 logits: loss and count as float32 on the same values, dlogits their rounding (in place too) */
    {
        uint16_t *xh = to_bf16(x, n), *dh = malloc(2 * (size_t)n);
        float *xw = widen_bf16(xh, n), *d32 = zeros_f32(n);
        double lf = 0, lh = 0;
        int64_t cf = 0, ch = 0;
        CHECK_OK(xent(LCX_F32, xw, tg, d32, R, V, dscale, &lf, &cf));
        CHECK_OK(xent(LCX_BF16, xh, tg, dh, R, V, dscale, &lh, &ch));
        CHECK(lf == lh && cf == ch && bf16_mismatch(dh, d32, n) == 0);
        CHECK_OK(xent(LCX_BF16, xh, tg, xh, R, V, dscale, &lh, &ch));
        CHECK(memcmp(xh, dh, 2 * (size_t)n) == 0 && lh == 2 * lf && ch == 2 * cf);
        lcx_xent_args a = {.dt = LCX_BF16, .n_rows = R, .vocab = V, .dscale = dscale, .logits = xh, .targets = tg,
                           .dlogits = dh, .loss_sum = &lh, .count = &ch};
        int short_checked = 0;
        check_arena_short(X, LCX_OP_CROSS_ENTROPY, &a, &short_checked);
        a.dt = LCX_F32;
        a.logits = x;
        a.dlogits = dc;
        check_arena_short(X, LCX_OP_CROSS_ENTROPY, &a, &short_checked);
        CHECK(short_checked == 2);
        free(xh); free(dh); free(xw); free(d32);
    }
    for (int tp = 1; tp <= 5; tp++) { /* V = 101: tp 4 pads 3 columns; tp 5 has 21-column shards */
        double wl = 0;
        int64_t wc = 0;
        float *wdx = malloc(sizeof(float) * (size_t)n);
        CHECK_OK(xent(LCX_F32, x, tg, wdx, R, V, dscale, &wl, &wc));
        check_vocab_parallel(x, tg, R, V, dscale, tp, wl, wc, wdx);
        free(wdx);
    }
    { /* a shard of padding only: V = 5 over tp 4 (2 columns each: rank 3 holds 6, 7) */
        const int64_t v5 = 5;
        float *x5 = rand_f32(4 * v5, -3, 3), *d5 = malloc(sizeof(float) * 4 * v5);
        int32_t t5[4] = {0, 4, LCX_IGNORE_INDEX, 2};
        double wl = 0;
        int64_t wc = 0;
        CHECK_OK(xent(LCX_F32, x5, t5, d5, 4, v5, 0.25f, &wl, &wc));
        check_vocab_parallel(x5, t5, 4, v5, 0.25f, 4, wl, wc, d5);
        free(x5); free(d5);
    }
    {
        lcx_xent_args a = {.dt = LCX_BF16, .n_rows = 1, .vocab = V, .logits = x, .targets = tg, .phase = LCX_XENT_STATS,
                           .tp = 2, .n_valid = V, .stats = (double[3]){0}};
        CHECK_FAILS(X->be->cross_entropy(X, &a), LCX_ERR_UNSUPPORTED, "vocab-parallel phases take F32");
        a.dt = LCX_F32, a.n_valid = V + 1;
        CHECK_FAILS(X->be->cross_entropy(X, &a), LCX_ERR_INVALID, "bad vocab shard");
    }
    CHECK_FAILS(xent(LCX_F32, x, tg, dc, 2, V, 1.0f, NULL, &c2), LCX_ERR_INVALID, "NULL loss_sum");
    CHECK_FAILS(xent(LCX_F16, x, tg, dc, 2, V, 1.0f, &l2, &c2), LCX_ERR_UNSUPPORTED, "activation dtype F16");
    free(tg); free(x); free(c.x); free(dx); free(g); free(dc); free(xi);
    return test_summary("test_ops_cross_entropy");
}
