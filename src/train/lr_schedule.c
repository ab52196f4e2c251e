#include "src/train/lr_schedule.h"

#include <math.h>
#include <string.h>

static const char *const kind_names[LCX_LR_KIND_COUNT] = {"cosine", "constant"};

const char *lcx_lr_kind_name(lcx_lr_kind k) {
    return (k >= 0 && k < LCX_LR_KIND_COUNT) ? kind_names[k] : "?";
}

int lcx_lr_kind_parse(const char *name, lcx_lr_kind *out) {
    for (int i = 0; i < LCX_LR_KIND_COUNT; i++)
        if (!strcmp(name, kind_names[i])) {
            *out = (lcx_lr_kind)i;
            return 0;
        }
    return -1;
}

double lcx_lr_at(const lcx_lr_schedule *s, int64_t step) {
    if (step < 0) step = 0;
    int64_t W = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (step < W) return s->peak * (double)step / (double)W;
    if (s->kind == LCX_LR_CONSTANT) return s->peak;
    int64_t span = s->total_steps - W;
    double p = (double)(step - W) / (double)(span > 1 ? span : 1);
    if (p > 1.0) p = 1.0;
    const double pi = 3.14159265358979323846;
    return s->min_lr + (s->peak - s->min_lr) * 0.5 * (1.0 + cos(pi * p));
}
