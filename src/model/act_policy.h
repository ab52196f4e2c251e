/* act_policy: what a layer keeps for backward. One enum shared by the model (which runs the concrete
 * policies) and recipes/plans (which may also say `auto`, resolved by the planner before a model sees it). */
#ifndef LCX_ACT_POLICY_H
#define LCX_ACT_POLICY_H

#include "src/core/status.h"

typedef enum lcx_act_policy {
    LCX_ACT_KEEP = 0,   /* store what backward needs */
    LCX_ACT_RECOMPUTE,  /* store the layer input (+ attention output and LSE); rerun the layer in backward */
    LCX_ACT_OFFLOAD,    /* keep, copied to host memory between forward and backward (same as keep on CPU) */
    LCX_ACT_AUTO,       /* recipes only: the planner chooses per layer from the memory budget */
    LCX_ACT_COUNT
} lcx_act_policy;

/* The concrete policies a model runs are those below AUTO. */
#define LCX_ACT_POLICY_COUNT LCX_ACT_AUTO

/* "keep", "recompute", "offload", "auto"; "?" otherwise. */
const char *lcx_act_policy_name(lcx_act_policy p);

/* Parse a concrete policy (keep, recompute, offload); "auto" and anything else is an error. */
lcx_status lcx_act_policy_parse(const char *s, lcx_act_policy *out);

#endif
