#include "src/train/lr_schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[LCX_LR_KIND_COUNT] = {"cosine", "constant", "wsd"};
static const char *const decay_names[LCX_DECAY_COUNT] = {"cosine", "linear", "1-sqrt"};

/* Index of name in names[0..n), or -1. */
static int find_name(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *lcx_lr_kind_name(lcx_lr_kind k) {
    return (k >= 0 && k < LCX_LR_KIND_COUNT) ? kind_names[k] : "?";
}

int lcx_lr_kind_parse(const char *name, lcx_lr_kind *out) {
    int i = find_name(kind_names, LCX_LR_KIND_COUNT, name);
    if (i >= 0) *out = (lcx_lr_kind)i;
    return i >= 0 ? 0 : -1;
}

const char *lcx_lr_decay_name(lcx_lr_decay d) {
    return (d >= 0 && d < LCX_DECAY_COUNT) ? decay_names[d] : "?";
}

int lcx_lr_decay_parse(const char *name, lcx_lr_decay *out) {
    int i = find_name(decay_names, LCX_DECAY_COUNT, name);
    if (i >= 0) *out = (lcx_lr_decay)i;
    return i >= 0 ? 0 : -1;
}

int64_t lcx_lr_decay_steps(double fraction, int64_t total, int64_t warmup) {
    int64_t d = llround(fraction * (double)total);
    if (d < 1) d = 1;
    if (d > total - warmup) d = total - warmup;
    return d > 0 ? d : 0;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b)); }

int lcx_lr_same(const lcx_lr_schedule *a, const lcx_lr_schedule *b) {
    int same = a->kind == b->kind && close_to(a->peak, b->peak) && a->warmup_steps == b->warmup_steps;
    if (same && a->kind != LCX_LR_CONSTANT) same = close_to(a->min_lr, b->min_lr);
    if (same && a->kind == LCX_LR_WSD) same = a->decay_steps == b->decay_steps && a->decay == b->decay;
    return same;
}

const char *lcx_lr_describe(const lcx_lr_schedule *s, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "lr %g %s, warm-up %lld", s->peak, lcx_lr_kind_name(s->kind),
                     (long long)s->warmup_steps);
    if (n >= 0 && (size_t)n < cap && s->kind != LCX_LR_CONSTANT)
        n += snprintf(buf + n, cap - (size_t)n, ", min_lr %g", s->min_lr);
    if (n >= 0 && (size_t)n < cap && s->kind == LCX_LR_WSD)
        snprintf(buf + n, cap - (size_t)n, ", decay %lld %s", (long long)s->decay_steps, lcx_lr_decay_name(s->decay));
    return buf;
}

static const double PI = 3.14159265358979323846;

/* WSD (header) before step T (lcx_lr_at gives min_lr from T on): the multiplier of peak, HF's
 * _get_wsd_scheduler_lambda with a linear warm-up. */
static double wsd_factor(const lcx_lr_schedule *s, int64_t step, int64_t W) {
    double m = s->min_lr / s->peak, f;
    int64_t D = s->decay_steps > 0 ? s->decay_steps : 0, T = s->total_steps;
    if (step < W) {
        f = (double)step / (double)W;
    } else if (step < T - D) {
        return 1.0;
    } else {
        double p = (double)(step - (T - D)) / (double)(D > 1 ? D : 1);
        f = s->decay == LCX_DECAY_LINEAR ? 1.0 - p : s->decay == LCX_DECAY_SQRT ? 1.0 - sqrt(p)
                                                                               : 0.5 * (1.0 + cos(PI * p));
    }
    f = f * (1.0 - m) + m;
    return f > 0 ? f : 0;
}

double lcx_lr_at(const lcx_lr_schedule *s, int64_t step) {
    if (step < 0) step = 0;
    int64_t W = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (s->kind == LCX_LR_WSD) return step >= s->total_steps ? s->min_lr : s->peak * wsd_factor(s, step, W);
    if (step < W) return s->peak * (double)step / (double)W;
    if (s->kind == LCX_LR_CONSTANT) return s->peak;
    int64_t span = s->total_steps - W;
    double p = (double)(step - W) / (double)(span > 1 ? span : 1);
    if (p > 1.0) p = 1.0;
    return s->min_lr + (s->peak - s->min_lr) * 0.5 * (1.0 + cos(PI * p));
}
