/* Data mix: the source of each sample by the largest lag behind its share, then that source's sampler. */
#include "src/train/mix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lcx_mix {
    int n;
    double w[LCX_MIX_MAX]; /* normalised */
    const lcx_tokdata *td[LCX_MIX_MAX];
    lcx_sampler *s[LCX_MIX_MAX];
};

lcx_mix_data lcx_mix_single(const lcx_tokdata *td) {
    lcx_mix_data d;
    memset(&d, 0, sizeof d);
    d.n = 1;
    d.td[0] = td;
    d.weight[0] = 1;
    return d;
}

uint64_t lcx_mix_seed(uint64_t seed, int i) {
    return i == 0 ? seed : seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull); /* golden-ratio steps: distinct streams */
}

lcx_status lcx_mix_init(const lcx_mix_data *data, const lcx_sampler_config *cfg, lcx_mix **out) {
    *out = NULL;
    LCX_FAIL_IF(data->n < 1 || data->n > LCX_MIX_MAX, LCX_ERR_INVALID, "data mix: %d sources (1 to %d)", data->n,
                (int)LCX_MIX_MAX);
    double sum = 0;
    for (int i = 0; i < data->n; i++) {
        LCX_FAIL_IF(!(data->weight[i] > 0) || !isfinite(data->weight[i]), LCX_ERR_INVALID,
                    "data mix: %s: weight %g (must be a positive number)", data->td[i]->prefix, data->weight[i]);
        sum += data->weight[i];
    }
    lcx_mix *m = calloc(1, sizeof *m);
    LCX_FAIL_IF(!m, LCX_ERR_OOM, "data mix");
    m->n = data->n;
    for (int i = 0; i < data->n; i++) {
        m->w[i] = data->weight[i] / sum;
        m->td[i] = data->td[i];
        lcx_sampler_config c = *cfg;
        c.seed = lcx_mix_seed(cfg->seed, i);
        lcx_status st = lcx_sampler_init(data->td[i], &c, &m->s[i]);
        if (st != LCX_OK) {
            lcx_mix_free(m);
            return st;
        }
    }
    *out = m;
    return LCX_OK;
}

void lcx_mix_free(lcx_mix *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) lcx_sampler_free(m->s[i]);
    free(m);
}

/* Megatron's rule: the source furthest behind w_i (k + 1) after this sample, k the samples drawn so far. */
static int pick(const lcx_mix *m) {
    uint64_t k = 0;
    for (int i = 0; i < m->n; i++) k += lcx_sampler_tell(m->s[i]).samples;
    int best = 0;
    double lag = -INFINITY;
    for (int i = 0; i < m->n; i++) {
        const double l = m->w[i] * (double)(k + 1) - (double)lcx_sampler_tell(m->s[i]).samples;
        if (l > lag) lag = l, best = i;
    }
    return best;
}

lcx_status lcx_mix_next(lcx_mix *m, uint32_t *out, int32_t *doc, int *src) {
    const int i = pick(m);
    if (src) *src = i;
    return lcx_sampler_next(m->s[i], out, doc);
}

lcx_mix_cursor lcx_mix_tell(const lcx_mix *m) {
    lcx_mix_cursor c;
    memset(&c, 0, sizeof c);
    c.n = m->n;
    for (int i = 0; i < m->n; i++) c.src[i] = lcx_sampler_tell(m->s[i]);
    return c;
}

lcx_status lcx_mix_seek(lcx_mix *m, const lcx_mix_cursor *c) {
    LCX_FAIL_IF(c->n != m->n, LCX_ERR_INVALID, "data mix cursor: %d sources saved, this mix has %d", c->n, m->n);
    for (int i = 0; i < m->n; i++) {
        const lcx_status st = lcx_sampler_seek(m->s[i], &c->src[i]);
        if (st != LCX_OK) return m->n > 1 ? lcx_fail_context(st, "%s: ", m->td[i]->prefix) : st;
    }
    return LCX_OK;
}

double lcx_mix_weight(const lcx_mix *m, int i) { return i >= 0 && i < m->n ? m->w[i] : 0; }
