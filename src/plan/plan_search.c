/* plan_search: the searches of the planner: the per-layer policies of an `activation: auto` stage, and the
 * TP x CP x DP layout with its loss chunk, MLP tile and row split for N devices, with the explanation (docs/plan.md
 * "Layout search"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/mesh_check.h"
#include "src/plan/plan_internal.h"

/* ---- per-layer policies of an `activation: auto` stage in a layout search ----------------------------------- */
static const lcx_act_policy SEARCH_POLICIES[] = LCX_PLAN_SEARCH_POLICIES;
enum { N_SEARCH_POLICIES = (int)(sizeof SEARCH_POLICIES / sizeof SEARCH_POLICIES[0]) };

typedef struct comp_search {
    const lcx_plan *p;
    const lcx_plan_stage *ps;
    int cnt[N_SEARCH_POLICIES];          /* layers per SEARCH_POLICIES entry, in layer order */
    int best[N_SEARCH_POLICIES], least[N_SEARCH_POLICIES];
    double best_s, least_total, least_s;
    int have_best, have_least;
} comp_search;

static void comp_eval(comp_search *c) {
    int counts[LCX_ACT_POLICY_COUNT] = {0};
    for (int i = 0; i < N_SEARCH_POLICIES; i++) counts[SEARCH_POLICIES[i]] += c->cnt[i];
    lcx_mem_estimate e;
    lcx_mem_estimate_counts(&c->p->model, c->ps->seq_len, c->ps->micro_seqs, counts, &e);
    double t = lcx_plan_step_time(&c->p->opts, &c->p->model, c->p->opts.dp, c->ps->seq_len,
                                  c->ps->micro_seqs * c->ps->grad_accum, c->ps->ring.per_step, counts, NULL);
    int fits = e.total <= c->p->opts.mem_budget && (c->p->opts.host_budget <= 0 || e.host <= c->p->opts.host_budget);
    /* strict comparisons: the first composition in enumeration order wins a tie (deterministic) */
    if (fits && (!c->have_best || t < c->best_s)) {
        memcpy(c->best, c->cnt, sizeof c->best);
        c->best_s = t, c->have_best = 1;
    }
    if (!c->have_least || e.total < c->least_total || (e.total == c->least_total && t < c->least_s)) {
        memcpy(c->least, c->cnt, sizeof c->least);
        c->least_total = e.total, c->least_s = t, c->have_least = 1;
    }
}

static void comp_visit(comp_search *c, int i, int left) {
    if (i == N_SEARCH_POLICIES - 1) {
        c->cnt[i] = left;
        comp_eval(c);
        return;
    }
    for (int k = 0; k <= left; k++) {
        c->cnt[i] = k;
        comp_visit(c, i + 1, left - k);
    }
}

/* Every split of the layers over SEARCH_POLICIES (the memory and the time depend on the counts only): the
 * fastest that fits, else the one needing the least memory (the search then reports the layout as not fitting). */
void lcx_plan_search_policies(const lcx_plan *p, lcx_plan_stage *ps) {
    comp_search c;
    memset(&c, 0, sizeof c);
    c.p = p, c.ps = ps;
    comp_visit(&c, 0, (int)p->model.n_layers);
    const int *pick = c.have_best ? c.best : c.least;
    int64_t l = 0;
    for (int i = 0; i < N_SEARCH_POLICIES; i++)
        for (int k = 0; k < pick[i]; k++) ps->activation[l++] = SEARCH_POLICIES[i];
    lcx_mem_estimate_compute(&p->model, ps->seq_len, ps->micro_seqs, ps->activation, &ps->mem);
}


/* plan.h */
lcx_status lcx_plan_step_policies(const lcx_mem_model *m, const lcx_plan_opts *o, int64_t seq_len,
                                  lcx_act_policy *out, lcx_mem_estimate *e) {
    LCX_FAIL_IF(!m || !o || !out || !e || seq_len < 1 || m->n_layers < 1, LCX_ERR_INVALID,
                "step policies: bad arguments");
    LCX_FAIL_IF(!(o->mem_budget > 0), LCX_ERR_INVALID, "step policies: no memory budget to fit");
    lcx_plan p;
    lcx_plan_stage ps;
    memset(&p, 0, sizeof p);
    memset(&ps, 0, sizeof ps);
    p.model = *m, p.opts = *o;
    ps.seq_len = seq_len, ps.micro_seqs = 1, ps.grad_accum = 1, ps.activation = out;
    lcx_plan_search_policies(&p, &ps); /* CP 1 here: no ring traffic to weigh */
    *e = ps.mem;
    if (e->total <= o->mem_budget && (o->host_budget <= 0 || e->host <= o->host_budget)) return LCX_OK;
    char b1[32], b2[32], b3[32], b4[32];
    return lcx_fail(LCX_ERR_INVALID,
                    "no split of the %lld layers over recompute+offload, recompute, offload and keep fits %lld "
                    "tokens: the least needs %s per device and %s of host pool (budget %s per device, host %s)",
                    (long long)m->n_layers, (long long)seq_len, lcx_format_bytes(e->total, b1, sizeof b1),
                    lcx_format_bytes(e->host, b2, sizeof b2), lcx_format_bytes(o->mem_budget, b3, sizeof b3),
                    o->host_budget > 0 ? lcx_format_bytes(o->host_budget, b4, sizeof b4) : "not limited");
}

/* ---- layout search (docs/plan.md "Layout search") ---------------------------------------------------------- */

static const char *layout_str(const lcx_plan_candidate *c, char *buf, size_t cap) {
    snprintf(buf, cap, "TP %lld x CP %lld x DP %lld", (long long)c->tp, (long long)c->cp, (long long)c->dp);
    return buf;
}

/* "loss chunk C, MLP tile N[, saved activations distributed][, sequence parallel][, ZeRO-1]" (tile "none": the
 * whole micro-batch at once). */
const char *lcx_plan_knobs_str(const lcx_plan_candidate *c, char *buf, size_t cap) {
    if (c->mlp_tile > 0)
        snprintf(buf, cap, "loss chunk %lld, MLP tile %lld", (long long)c->loss_chunk, (long long)c->mlp_tile);
    else snprintf(buf, cap, "loss chunk %lld, MLP tile none", (long long)c->loss_chunk);
    if (c->distribute) snprintf(buf + strlen(buf), cap - strlen(buf), ", saved activations distributed");
    if (c->sequence_parallel) snprintf(buf + strlen(buf), cap - strlen(buf), ", sequence parallel");
    if (c->zero1) snprintf(buf + strlen(buf), cap - strlen(buf), ", ZeRO-1");
    return buf;
}

/* The per-layer policy of every stage as runs of layers: "policy: 128k: layers 0-9 recompute+offload, 10-31
 * offload" (stages separated by "; "; cut at the line's end). */
static void policy_line(const lcx_plan *p, char *line, size_t cap) {
    size_t n = (size_t)snprintf(line, cap, "policy:");
    char b1[32];
    for (int i = 0; i < p->n_stages && n < cap; i++) {
        const lcx_plan_stage *ps = &p->stages[i];
        n += (size_t)snprintf(line + n, cap - n, "%s %s: layers", i ? ";" : "",
                              lcx_format_length(ps->seq_len, b1, sizeof b1));
        if (n < cap) n += (size_t)lcx_act_layers_str(ps->activation, p->model.n_layers, line + n, cap - n);
    }
}

/* Better candidate: higher predicted throughput, then less peak memory; an exact tie keeps the earlier one. */
static int better(const lcx_plan_candidate *a, const lcx_plan_candidate *b) {
    if (a->tokens_per_s != b->tokens_per_s) return a->tokens_per_s > b->tokens_per_s;
    return a->peak < b->peak;
}

/* The loss chunks and MLP tiles the search tries, largest first (an MLP tile 0 = the whole micro-batch). */
static const int64_t SEARCH_CHUNKS[] = {4096, 1024, 256};
static const int64_t SEARCH_TILES[] = {0, 4096, 1024};

/* The (distribute_saved, sequence_parallel) pairs the planner tries for TP tp, into modes; returns their number:
 * with TP > 1 each one given as -1 both ways, never both on; with TP 1 neither. */
int lcx_plan_split_modes(const lcx_plan_opts *o, int64_t tp, int modes[3][2]) {
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int q = 0; q < 2; q++) {
            int dist_ok = o->distribute_saved < 0 ? 1 : d == (o->distribute_saved == 1);
            int sp_ok = o->sequence_parallel < 0 ? 1 : q == (o->sequence_parallel == 1);
            if (tp <= 1 ? d == 0 && q == 0 : dist_ok && sp_ok && !(d && q)) modes[n][0] = d, modes[n][1] = q, n++;
        }
    return n;
}

/* One layout: the layout rules (lcx_comm_check_mesh on every stage length), then for each loss chunk and MLP tile
 * (largest first) the plan with the searched policies; the candidate keeps the largest chunk and tile that fit
 * with the best throughput (a smaller one only when the memory it frees lets more layers keep their activations
 * or skip the transfer), else the pair needing the least memory. */
static void try_layout(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o, int64_t tp,
                       int64_t cp, int64_t dp, lcx_plan_candidate *c) {
    memset(c, 0, sizeof *c);
    c->tp = tp, c->cp = cp, c->dp = dp;
    const int n_chunks = o->loss_chunk > 0 ? 1 : (int)(sizeof SEARCH_CHUNKS / sizeof SEARCH_CHUNKS[0]);
    const int n_tiles = o->mlp_tile > 0 ? 1 : (int)(sizeof SEARCH_TILES / sizeof SEARCH_TILES[0]);
    /* how the TP ranks split the rows they would each hold whole: neither, distributed saved activations,
     * sequence parallelism (TP > 1 only; as given unless -1) */
    int modes[3][2], n_dist = lcx_plan_split_modes(o, tp, modes);
    lcx_tp_dims dims = {cfg->num_attention_heads, cfg->num_key_value_heads, cfg->head_dim, cfg->hidden_size,
                        cfg->intermediate_size, cfg->vocab_size};
    for (int k = 0; k < n_chunks * n_tiles * n_dist; k++) {
        lcx_plan_opts oc = *o;
        oc.gpus = 0, oc.tp = tp, oc.cp = cp, oc.dp = dp;
        oc.loss_chunk = o->loss_chunk > 0 ? o->loss_chunk : SEARCH_CHUNKS[k / n_dist / n_tiles];
        oc.mlp_tile = o->mlp_tile > 0 ? o->mlp_tile : SEARCH_TILES[k / n_dist % n_tiles];
        oc.distribute_saved = modes[k % n_dist][0], oc.sequence_parallel = modes[k % n_dist][1];
        lcx_plan *p = NULL;
        lcx_status st = lcx_plan_build_one(cfg, r, &oc, 1, &p);
        lcx_mesh mesh = {(int)tp, (int)cp, (int)dp, (int)(tp * cp * dp)};
        for (int i = 0; st == LCX_OK && i < p->n_stages; i++)
            st = lcx_comm_check_mesh(&mesh, &dims, p->stages[i].seq_len);
        if (st != LCX_OK) {
            snprintf(c->reason, sizeof c->reason, "%s", lcx_last_error());
            lcx_plan_free(p);
            return; /* the layout rules do not depend on the chunk */
        }
        lcx_plan_candidate t = *c;
        t.valid = 1;
        t.loss_chunk = oc.loss_chunk;
        t.mlp_tile = oc.mlp_tile;
        t.distribute = p->distributes; /* in effect: some layer recomputes */
        t.sequence_parallel = p->seq_parallel;
        t.zero1 = p->zero1;
        /* the run's peak per device: training, or the before/after evaluation on the TP x CP group where it needs
         * more (a long window in float32: it decides at small TP and CP) */
        t.peak = p->eval.total > p->peak_memory ? p->eval.total : p->peak_memory;
        t.host_peak = p->host_peak;
        t.reserve = p->reserve;
        t.fits = t.peak <= p->opts.mem_budget && (o->host_budget <= 0 || p->host_peak <= o->host_budget);
        t.tokens_per_s = t.fits ? p->predicted_tokens_per_s : 0;
        lcx_plan_free(p);
        int take = !c->valid || (t.fits && !c->fits) || (t.fits && c->fits && t.tokens_per_s > c->tokens_per_s) ||
                   (!t.fits && !c->fits && t.peak < c->peak);
        if (take) *c = t;
    }
}

static void explain(lcx_plan_search_info *s, const lcx_plan *p, const lcx_plan_opts *o) {
    const double budget = o->mem_budget, left = p->opts.mem_budget; /* the card's, and what the reserve leaves */
    char b1[48], b2[48], b3[48], b4[48], l1[64], l2[64], k1[96], k2[96];
    const lcx_plan_candidate *ch = &s->cand[s->chosen];
    snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
             "search: %d layout%s of %lld device%s (TP x CP x DP), %d meet%s the layout rules, %d fit%s %s per "
             "device%s; loss chunk %s; MLP tile %s; activations %s; saved activations %s; sequence parallelism %s; "
             "ZeRO-1 %s; per-layer policy of auto stages from recompute+offload/recompute/offload/keep",
             s->n_candidates, s->n_candidates == 1 ? "" : "s", (long long)s->gpus, s->gpus == 1 ? "" : "s", s->n_valid,
             s->n_valid == 1 ? "s" : "", s->n_fit, s->n_fit == 1 ? "s" : "", lcx_format_bytes(budget, b1, sizeof b1),
             p->reserve > 0 ? " less the reserve" : "", o->loss_chunk > 0 ? "as given" : "4096, 1024 or 256",
             o->mlp_tile > 0 ? "as given" : "none, 4096 or 1024",
             p->opts.act_bytes == 2 ? "bf16" : "fp32",
             o->distribute_saved < 0 ? "whole or distributed over TP"
             : o->distribute_saved  ? "distributed over TP (where TP > 1 and a layer recomputes)"
                                    : "whole",
             o->sequence_parallel < 0 ? "off or on" : o->sequence_parallel ? "on (where TP > 1)" : "off",
             o->zero1 ? "on (where CP x DP > 1)" : "off");
    const lcx_plan_cost *k = &p->cost;
    double tot = k->total > 0 ? k->total : 1;
    snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
             "chosen: %s, %s: predicted %s tokens/s, peak %s per device (%.0f%% of the %s%s); time "
             "split: compute %.0f%%, TP all-reduce %.0f%%, CP ring %.0f%%, gradient all-reduce %.0f%%, offload wait "
             "%.0f%%",
             layout_str(ch, l1, sizeof l1), lcx_plan_knobs_str(ch, k1, sizeof k1),
             human_count(ch->tokens_per_s, b2, sizeof b2),
             lcx_format_bytes(ch->peak, b3, sizeof b3), 100 * ch->peak / left, lcx_format_bytes(left, b4, sizeof b4),
             p->reserve > 0 ? " the reserve leaves" : " budget", 100 * k->compute / tot,
             100 * k->tp / tot, 100 * k->cp / tot, 100 * k->grad / tot, 100 * k->offload / tot);
    if (s->runner_up >= 0) {
        const lcx_plan_candidate *ru = &s->cand[s->runner_up];
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
                 "runner-up: %s, %s: %s tokens/s (%.1f%% slower), peak %s per device",
                 layout_str(ru, l2, sizeof l2), lcx_plan_knobs_str(ru, k2, sizeof k2),
                 human_count(ru->tokens_per_s, b2, sizeof b2),
                 100 * (1 - ru->tokens_per_s / ch->tokens_per_s), lcx_format_bytes(ru->peak, b3, sizeof b3));
    } else {
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0], "runner-up: none (the only layout that fits)");
    }
    policy_line(p, s->lines[s->n_lines++], sizeof s->lines[0]);
    /* offload's pinned host memory is unbounded unless given: say how much the choice takes */
    if (ch->host_peak > 0)
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
                 "host: offload pins %s of host memory per device (%s for the %lld devices)%s",
                 lcx_format_bytes(ch->host_peak, b1, sizeof b1),
                 lcx_format_bytes(ch->host_peak * (double)s->gpus, b2, sizeof b2), (long long)s->gpus,
                 o->host_budget > 0 ? "" : "; --host-memory SIZE bounds it per device");
    /* what the memory model leaves out, and what it was given */
    const int comms = lcx_mem_nccl_comms(ch->tp, ch->cp, ch->dp);
    if (p->reserve > 0 && o->reserve < 0)
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
                 "reserve: %s of each device's %s for the CUDA context (%s) and %d NCCL communicator%s of more "
                 "than one rank (%s each); --reserve SIZE sets it",
                 lcx_format_bytes(p->reserve, b1, sizeof b1), lcx_format_bytes(budget, b2, sizeof b2),
                 lcx_format_bytes(LCX_MEM_CUDA_CONTEXT, b3, sizeof b3), comms, comms == 1 ? "" : "s",
                 lcx_format_bytes(LCX_MEM_NCCL_COMM, b4, sizeof b4));
    else if (p->reserve > 0)
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0], "reserve: %s of each device's %s (--reserve)",
                 lcx_format_bytes(p->reserve, b1, sizeof b1), lcx_format_bytes(budget, b2, sizeof b2));
    /* the layouts that do not fit or break a rule, compactly */
    char *line = s->lines[s->n_lines];
    size_t cap = sizeof s->lines[0], n = 0;
    int any = 0;
    for (int i = 0; i < s->n_candidates && n + 1 < cap; i++) {
        const lcx_plan_candidate *c = &s->cand[i];
        if (c->fits) continue;
        int w = snprintf(line + n, cap - n, "%s%lldx%lldx%lld %s", any ? ", " : "rejected (TPxCPxDP): ",
                         (long long)c->tp, (long long)c->cp, (long long)c->dp,
                         c->valid ? lcx_format_bytes(c->peak, b1, sizeof b1) : "breaks a layout rule");
        if (w < 0 || (size_t)w >= cap - n) {
            line[n] = 0;
            break;
        }
        n += (size_t)w, any = 1;
    }
    if (any) s->n_lines++;
}

lcx_status lcx_plan_search_layouts(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o,
                              lcx_plan **out) {
    char b1[48], b2[48], b3[48], l1[64], k1[96];
    LCX_FAIL_IF(o->mem_budget <= 0, LCX_ERR_INVALID,
                "plan: a layout search over %lld devices needs a memory budget per device", (long long)o->gpus);
    LCX_FAIL_IF(o->gpus > 65536, LCX_ERR_INVALID, "plan: %lld devices, above 65536", (long long)o->gpus);
    for (int64_t f = 0, v[3] = {o->tp, o->cp, o->dp}; f < 3; f++)
        LCX_FAIL_IF(v[f] < 0 || (v[f] > 0 && o->gpus % v[f] != 0), LCX_ERR_INVALID,
                    "plan: --%s %lld does not divide --gpus %lld", f == 0 ? "tp" : f == 1 ? "cp" : "dp",
                    (long long)v[f], (long long)o->gpus);
    lcx_plan_search_info *s = calloc(1, sizeof *s);
    LCX_FAIL_IF(!s, LCX_ERR_OOM, "out of memory");
    s->gpus = o->gpus;
    s->chosen = s->runner_up = -1;
    for (int64_t tp = 1; tp <= o->gpus; tp++) {
        if (o->gpus % tp || (o->tp && tp != o->tp)) continue;
        for (int64_t cp = 1; cp <= o->gpus / tp; cp++) {
            if ((o->gpus / tp) % cp || (o->cp && cp != o->cp)) continue;
            int64_t dp = o->gpus / tp / cp;
            if ((o->dp && dp != o->dp) || s->n_candidates >= LCX_PLAN_MAX_CANDIDATES) continue;
            lcx_plan_candidate *c = &s->cand[s->n_candidates];
            try_layout(cfg, r, o, tp, cp, dp, c);
            s->n_valid += c->valid, s->n_fit += c->fits;
            if (c->fits) {
                if (s->chosen < 0 || better(c, &s->cand[s->chosen]))
                    s->runner_up = s->chosen, s->chosen = s->n_candidates;
                else if (s->runner_up < 0 || better(c, &s->cand[s->runner_up])) s->runner_up = s->n_candidates;
            }
            s->n_candidates++;
        }
    }
    if (s->n_candidates == 0) {
        free(s);
        return lcx_fail(LCX_ERR_INVALID, "plan: no layout of %lld devices has TP %lld x CP %lld x DP %lld (0 = any)",
                        (long long)o->gpus, (long long)o->tp, (long long)o->cp, (long long)o->dp);
    }
    if (s->n_valid == 0) {
        lcx_status st = lcx_fail(LCX_ERR_INVALID, "plan: none of the %d layouts of %lld devices meets the layout rules "
                                 "(TP %lld x CP %lld x DP %lld: %s)", s->n_candidates, (long long)o->gpus,
                                 (long long)s->cand[0].tp, (long long)s->cand[0].cp, (long long)s->cand[0].dp,
                                 s->cand[0].reason);
        free(s);
        return st;
    }
    if (s->chosen < 0) {
        int least = -1;
        for (int i = 0; i < s->n_candidates; i++)
            if (s->cand[i].valid && (least < 0 || s->cand[i].peak < s->cand[least].peak)) least = i;
        const lcx_plan_candidate *c = &s->cand[least];
        int host = o->host_budget > 0 && c->peak <= o->mem_budget - c->reserve;
        char rs[96] = "";
        if (c->reserve > 0)
            snprintf(rs, sizeof rs, " (%s kept as the reserve)", lcx_format_bytes(c->reserve, b3, sizeof b3));
        lcx_status st = lcx_fail(
            LCX_ERR_INVALID,
            "plan: nothing fits %lld device%s of %s: the smallest layout (%s, %s, least-memory "
            "policies) needs %s per device%s%s%s",
            (long long)o->gpus, o->gpus == 1 ? "" : "s", lcx_format_bytes(o->mem_budget, b1, sizeof b1),
            layout_str(c, l1, sizeof l1), lcx_plan_knobs_str(c, k1, sizeof k1),
            lcx_format_bytes(c->peak, b2, sizeof b2), rs,
            host ? " and more pinned host memory than the host budget" : "",
            s->n_valid < s->n_candidates ? " (other layouts break the layout rules)" : "");
        free(s);
        return st;
    }
    const lcx_plan_candidate *ch = &s->cand[s->chosen];
    lcx_plan_opts oc = *o;
    oc.gpus = 0, oc.tp = ch->tp, oc.cp = ch->cp, oc.dp = ch->dp, oc.loss_chunk = ch->loss_chunk;
    oc.mlp_tile = ch->mlp_tile;
    oc.distribute_saved = ch->distribute;
    oc.sequence_parallel = ch->sequence_parallel;
    lcx_plan *p = NULL;
    lcx_status st = lcx_plan_build_one(cfg, r, &oc, 1, &p);
    if (st != LCX_OK) {
        free(s);
        return st;
    }
    p->opts.gpus = o->gpus;
    explain(s, p, o);
    p->search = s;
    *out = p;
    return LCX_OK;
}
