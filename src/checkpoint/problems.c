/* problems: a one-line list of tensor problems (problems.h). */
#include "src/checkpoint/problems.h"

#include <stdarg.h>
#include <stdio.h>

#include "src/core/strbuf.h"

static const char *const kind_names[LCX_PROBLEM_KINDS] = {"missing", "unexpected", "wrong shape",
                                                          "not a float dtype"};

void lcx_problems_add(lcx_problems *ps, int kind, const char *fmt, ...) {
    if (ps->count[kind] < LCX_PROBLEM_SHOW) {
        char raw[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        lcx_printable(raw, ps->shown[kind][ps->count[kind]], sizeof ps->shown[kind][0]);
    }
    ps->count[kind]++;
}

size_t lcx_problems_total(const lcx_problems *ps) {
    size_t n = 0;
    for (int k = 0; k < LCX_PROBLEM_KINDS; k++) n += ps->count[k];
    return n;
}

void lcx_problems_format(const lcx_problems *ps, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (int k = 0; k < LCX_PROBLEM_KINDS; k++) {
        if (!ps->count[k]) continue;
        if (n < cap) n += (size_t)snprintf(out + n, cap - n, "%s%zu %s: ", n ? "; " : "", ps->count[k], kind_names[k]);
        size_t shown = ps->count[k] < LCX_PROBLEM_SHOW ? ps->count[k] : LCX_PROBLEM_SHOW;
        for (size_t i = 0; i < shown && n < cap; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", ps->shown[k][i]);
        if (ps->count[k] > shown && n < cap) n += (size_t)snprintf(out + n, cap - n, " (+%zu more)", ps->count[k] - shown);
    }
}
