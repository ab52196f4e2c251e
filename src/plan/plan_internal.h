/* plan_internal: what the planner's files (src/plan: plan.c the plan of one layout, mem_model.c the memory
 * model, throughput.c the step time, plan_search.c the policy and layout searches, plan_print.c the table and the
 * JSON) share, and nothing outside them uses. */
#ifndef LCX_PLAN_INTERNAL_H
#define LCX_PLAN_INTERNAL_H

#include <stdio.h>

#include "src/core/units.h"
#include "src/plan/plan.h"

static inline double per_tp(int64_t x, int64_t tp) { return x >= tp ? (double)x / (double)tp : 1.0; }
/* Sequence parallelism in effect: the residual stream and the norms hold 1/TP of the rows. */
static inline int seq_parallel(const lcx_mem_model *m) { return m->sequence_parallel && m->tp > 1; }
/* The share of the rows of the residual stream (and the norms) a rank holds. */
static inline double row_share(const lcx_mem_model *m) { return seq_parallel(m) ? 1.0 / (double)m->tp : 1.0; }
/* Distributed saved activations in effect: TP ranks keep their rows of a recomputed layer's input. */
static inline int distributes(const lcx_mem_model *m) { return m->distribute && m->tp > 1 && !seq_parallel(m); }

/* x in decimal units for a message: "20.8K", "70.6G" (three digits from K up). Returns buf. */
static inline const char *human_count(double x, char *buf, size_t cap) {
    static const char *units[] = {"", "K", "M", "G", "T", "P", "E"};
    int u = 0;
    while (x >= 1000 && u < 6) x /= 1000, u++;
    snprintf(buf, cap, u ? "%.3g%s" : "%.0f%s", x, units[u]);
    return buf;
}

/* mem_model.c: the estimate from the number of layers of each policy (counts[LCX_ACT_POLICY_COUNT]), and those
 * numbers for a per-layer list. */
void lcx_mem_estimate_counts(const lcx_mem_model *m, int64_t seq_len, int64_t micro_seqs, const int *counts,
                             lcx_mem_estimate *e);
void lcx_mem_policy_counts(const lcx_act_policy *policy, int64_t n_layers, int *counts);

/* plan.c: the plan of one layout (opts tp, cp, dp >= 1); searching: a search's candidate, whose `auto` stages get
 * the searched policies and whose over-budget stages are not errors. */
lcx_status lcx_plan_build_one(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o,
                              int searching, lcx_plan **out);

/* plan_search.c: the per-layer policies of an `activation: auto` stage for the best throughput that fits; the
 * ways TP ranks may split the rows (modes[k] = {distribute_saved, sequence_parallel}; returns their number); the
 * layout search (opts.gpus > 0); the ", loss chunk 4096, MLP tile none, ..." text of a candidate. */
void lcx_plan_search_policies(const lcx_plan *p, lcx_plan_stage *ps);
int lcx_plan_split_modes(const lcx_plan_opts *o, int64_t tp, int modes[3][2]);
lcx_status lcx_plan_search_layouts(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o,
                                   lcx_plan **out);
const char *lcx_plan_knobs_str(const lcx_plan_candidate *c, char *buf, size_t cap);

#endif /* LCX_PLAN_INTERNAL_H */
