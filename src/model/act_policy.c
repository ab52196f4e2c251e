#include "src/model/act_policy.h"

#include <string.h>

static const char *const POLICY_NAMES[LCX_ACT_COUNT] = {"keep", "recompute", "offload",
                                                                "recompute+offload", "auto"};

const char *lcx_act_policy_name(lcx_act_policy p) {
    return (unsigned)p < LCX_ACT_COUNT ? POLICY_NAMES[p] : "?";
}

lcx_status lcx_act_policy_parse(const char *s, lcx_act_policy *out) {
    for (int i = 0; i < LCX_ACT_POLICY_COUNT; i++)
        if (s && strcmp(s, POLICY_NAMES[i]) == 0) return *out = (lcx_act_policy)i, LCX_OK;
    if (s && strcmp(s, "recompute_offload") == 0) return *out = LCX_ACT_RECOMPUTE_OFFLOAD, LCX_OK;
    return lcx_fail(LCX_ERR_INVALID,
                    "unknown activation policy '%s' (expected keep, recompute, offload or recompute+offload)",
                    s ? s : "(null)");
}
