/* act_policy: what a layer keeps for backward. One enum shared by the model (which runs the concrete
 * policies) and recipes/plans (which may also say `auto`, resolved by the planner before a model sees it). */
#ifndef LCX_ACT_POLICY_H
#define LCX_ACT_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

typedef enum lcx_act_policy {
    LCX_ACT_KEEP = 0,   /* store what backward needs */
    LCX_ACT_RECOMPUTE,  /* store the layer input (+ attention output and LSE); rerun the layer in backward */
    LCX_ACT_OFFLOAD,    /* keep, copied to a host pool right after the forward and fetched back ahead of the
                           backward (docs/model.md "Activation policy (per layer)") */
    LCX_ACT_RECOMPUTE_OFFLOAD, /* recompute whose stored tensors (layer input, attention output, LSE) are
                                  offloaded as offload's are */
    LCX_ACT_AUTO,       /* recipes only: the planner chooses per layer from the memory budget */
    LCX_ACT_COUNT
} lcx_act_policy;

/* The concrete policies a model runs are those below AUTO. */
#define LCX_ACT_POLICY_COUNT LCX_ACT_AUTO

/* "keep", "recompute", "offload", "recompute+offload", "auto"; "?" otherwise. */
const char *lcx_act_policy_name(lcx_act_policy p);

/* The layers' policies as runs of equal ones, " first[-last] name" each, separated by ",": " 0-12
 * recompute+offload, 13-15 recompute". snprintf's contract: writes at most cap bytes (NUL included), returns the
 * length the whole text needs. */
int lcx_act_layers_str(const lcx_act_policy *pol, int64_t n, char *buf, size_t cap);

/* Parse a concrete policy (keep, recompute, offload, recompute+offload, also spelled recompute_offload);
 * "auto" and anything else is an error. */
lcx_status lcx_act_policy_parse(const char *s, lcx_act_policy *out);

/* 1 for the policies that rerun the layer forward in backward (recompute, recompute+offload), resp. that move
 * the stored tensors to the host pool (offload, recompute+offload). */
static inline int lcx_act_recomputes(lcx_act_policy p) {
    return p == LCX_ACT_RECOMPUTE || p == LCX_ACT_RECOMPUTE_OFFLOAD;
}
static inline int lcx_act_offloads(lcx_act_policy p) { return p == LCX_ACT_OFFLOAD || p == LCX_ACT_RECOMPUTE_OFFLOAD; }

#endif
