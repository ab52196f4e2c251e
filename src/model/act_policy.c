#include "src/model/act_policy.h"

#include <stdio.h>
#include <string.h>

static const char *const POLICY_NAMES[LCX_ACT_COUNT] = {"keep", "recompute", "offload",
                                                                "recompute+offload", "auto"};

const char *lcx_act_policy_name(lcx_act_policy p) {
    return (unsigned)p < LCX_ACT_COUNT ? POLICY_NAMES[p] : "?";
}

int lcx_act_layers_str(const lcx_act_policy *pol, int64_t n, char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (int64_t l = 0, e; l < n; l = e + 1) {
        for (e = l; e + 1 < n && pol[e + 1] == pol[l];) e++;
        char run[64];
        int k = e > l ? snprintf(run, sizeof run, "%s %lld-%lld %s", l ? "," : "", (long long)l, (long long)e,
                                 lcx_act_policy_name(pol[l]))
                      : snprintf(run, sizeof run, "%s %lld %s", l ? "," : "", (long long)l, lcx_act_policy_name(pol[l]));
        if (at < cap) snprintf(buf + at, cap - at, "%s", run);
        at += (size_t)k;
    }
    return (int)at;
}

lcx_status lcx_act_policy_parse(const char *s, lcx_act_policy *out) {
    for (int i = 0; i < LCX_ACT_POLICY_COUNT; i++)
        if (s && strcmp(s, POLICY_NAMES[i]) == 0) return *out = (lcx_act_policy)i, LCX_OK;
    if (s && strcmp(s, "recompute_offload") == 0) return *out = LCX_ACT_RECOMPUTE_OFFLOAD, LCX_OK;
    return lcx_fail(LCX_ERR_INVALID,
                    "unknown activation policy '%s' (expected keep, recompute, offload or recompute+offload)",
                    s ? s : "(null)");
}
